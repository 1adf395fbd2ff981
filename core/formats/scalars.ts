// The domain scalars of the session protocol (docs/spec/scalars.md): Id, U64, Digest,
// RationalNs, Scope and request ids. Readers refuse anything else and name the field; they never
// normalise. Arithmetic on U64 and RationalNs is exact bigint and overflow is an error.
import { DetsimError } from './errors.js';

/** An identifier: 1 to 64 of `[a-z0-9._-]`, starting with a letter or digit (docs/spec/scalars.md). */
export type Id = string;
/** An unsigned 64-bit integer as a canonical decimal string (never a JSON number). */
export type U64 = string;
/** A SHA-256 digest as 64 lowercase hex characters. */
export type Digest = string;

export const U64_MAX = 18446744073709551615n;
const ID_RE = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const U64_RE = /^(0|[1-9][0-9]*)$/;
const DIGEST_RE = /^[0-9a-f]{64}$/;
const REQUEST_ID_RE = /^req-(0|[1-9][0-9]*)$/;

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
  if (value === undefined) return 'nothing';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

export function isId(value: unknown): value is Id {
  return typeof value === 'string' && ID_RE.test(value);
}

export function readId(value: unknown, field: string): Id {
  if (!isId(value)) {
    throw new DetsimError(
      'struct_invalid_id',
      `${field}: ${describe(value)} is not an Id (1-64 of a-z 0-9 . _ -, starting with a letter or digit)`,
      field,
    );
  }
  return value;
}

export function isU64(value: unknown): value is U64 {
  // Below 20 digits a U64 cannot exceed the maximum (20 digits): no BigInt for the common case.
  return (
    typeof value === 'string' &&
    U64_RE.test(value) &&
    (value.length < 20 || (value.length === 20 && BigInt(value) <= U64_MAX))
  );
}

export function readU64(value: unknown, field: string): U64 {
  if (!isU64(value)) {
    throw new DetsimError(
      'struct_invalid_u64',
      `${field}: ${describe(value)} is not a U64 (a decimal string, "0" or no leading zero, at most 18446744073709551615)`,
      field,
    );
  }
  return value;
}

export function u64ToBigInt(value: U64): bigint {
  return BigInt(value);
}

export function bigIntToU64(value: bigint, field: string): U64 {
  if (value < 0n || value > U64_MAX)
    throw new DetsimError('struct_rational_overflow', `${field}: ${value} is outside the U64 range`, field);
  return value.toString();
}

export function readDigest(value: unknown, field: string): Digest {
  if (typeof value !== 'string' || !DIGEST_RE.test(value)) {
    throw new DetsimError(
      'struct_invalid_digest',
      `${field}: ${describe(value)} is not a SHA-256 digest (64 lowercase hex)`,
      field,
    );
  }
  return value;
}

export function readRequestId(value: unknown, field: string): string {
  if (typeof value !== 'string' || !REQUEST_ID_RE.test(value) || !isU64(value.slice(4))) {
    throw new DetsimError('struct_invalid_field', `${field}: ${describe(value)} is not a request id req-<U64>`, field);
  }
  return value;
}

export function readI32(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < -2147483648 || value > 2147483647) {
    throw new DetsimError('struct_invalid_field', `${field}: ${describe(value)} is not a signed 32-bit integer`, field);
  }
  return value;
}

/** Refuse fields the schema does not define: a misspelled field fails, it never silently defaults. */
export function refuseUnknownFields(obj: Record<string, unknown>, allowed: readonly string[], field: string): void {
  // The common case, every key known, needs no sorted key list; a refusal names the first unknown key in order.
  let unknown = false;
  for (const key in obj) if (Object.hasOwn(obj, key) && !allowed.includes(key)) unknown = true;
  if (!unknown) return;
  for (const key of Object.keys(obj).sort()) {
    if (!allowed.includes(key)) {
      throw new DetsimError(
        'struct_unknown_field',
        `${field}: unknown field ${JSON.stringify(key)}`,
        `${field}.${key}`,
      );
    }
  }
}

export function readObject(value: unknown, field: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new DetsimError('struct_invalid_field', `${field}: ${describe(value)} is not an object`, field);
  }
  return value as Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------
// RationalNs: exact nanoseconds as a reduced fraction of U64s.

/** The JSON form of a {@link RationalNs}: a reduced fraction of nanoseconds as U64 strings. */
export interface RationalNsJson {
  numerator: U64;
  denominator: U64;
}

function gcd(a: bigint, b: bigint): bigint {
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

/** Exact nanoseconds as a reduced fraction of U64s (the step and tick durations); JSON form {@link RationalNsJson}. */
export class RationalNs {
  private constructor(
    readonly num: bigint,
    readonly den: bigint,
  ) {}

  static readonly ZERO = new RationalNs(0n, 1n);

  /** Build from any non-negative fraction, reducing it; overflow beyond U64 is an error. */
  static of(num: bigint, den: bigint, field = 'rational'): RationalNs {
    if (den <= 0n) throw new DetsimError('struct_invalid_rational', `${field}: denominator must be positive`, field);
    if (num < 0n) throw new DetsimError('struct_rational_overflow', `${field}: result is negative`, field);
    const g = num === 0n ? den : gcd(num, den);
    const n = num / g;
    const d = den / g;
    if (n > U64_MAX || d > U64_MAX)
      throw new DetsimError('struct_rational_overflow', `${field}: ${n}/${d} does not fit U64`, field);
    return new RationalNs(n, d);
  }

  /** Read the wire form; it must already be reduced, and zero must be 0/1. */
  static read(value: unknown, field: string): RationalNs {
    const obj = readObject(value, field);
    refuseUnknownFields(obj, ['numerator', 'denominator'], field);
    const num = BigInt(readU64(obj.numerator, `${field}.numerator`));
    const den = BigInt(readU64(obj.denominator, `${field}.denominator`));
    if (den === 0n) throw new DetsimError('struct_invalid_rational', `${field}: denominator is 0`, field);
    if (gcd(num, den) !== 1n) {
      throw new DetsimError('struct_invalid_rational', `${field}: ${num}/${den} is not reduced (zero is 0/1)`, field);
    }
    return new RationalNs(num, den);
  }

  /** Read a duration: like read, but zero is refused. */
  static readDuration(value: unknown, field: string): RationalNs {
    const r = RationalNs.read(value, field);
    if (r.num === 0n) throw new DetsimError('struct_invalid_rational', `${field}: a duration must be non-zero`, field);
    return r;
  }

  toJSON(): RationalNsJson {
    return { numerator: this.num.toString(), denominator: this.den.toString() };
  }

  toString(): string {
    return `${this.num}/${this.den}`;
  }

  isZero(): boolean {
    return this.num === 0n;
  }

  add(o: RationalNs): RationalNs {
    return RationalNs.of(this.num * o.den + o.num * this.den, this.den * o.den, 'sum');
  }

  sub(o: RationalNs): RationalNs {
    const n = this.num * o.den - o.num * this.den;
    if (n < 0n) throw new DetsimError('struct_rational_overflow', `difference ${this} - ${o} is below zero`);
    return RationalNs.of(n, this.den * o.den, 'difference');
  }

  mulInt(k: bigint): RationalNs {
    return RationalNs.of(this.num * k, this.den, 'product');
  }

  /** floor(this / o) for o > 0. */
  floorDiv(o: RationalNs): bigint {
    return (this.num * o.den) / (this.den * o.num);
  }

  compare(o: RationalNs): -1 | 0 | 1 {
    const l = this.num * o.den;
    const r = o.num * this.den;
    return l < r ? -1 : l > r ? 1 : 0;
  }

  equals(o: RationalNs): boolean {
    return this.num === o.num && this.den === o.den;
  }
}

// ---------------------------------------------------------------------------------------------
// Scope: the timeline identity of a request.

/** Where a request or checkpoint belongs on the run timeline: session, epoch and step. */
export interface Scope {
  sessionId: Id;
  epoch: Id;
  step: U64;
}

export function readScope(value: unknown, field: string): Scope {
  const obj = readObject(value, field);
  refuseUnknownFields(obj, ['sessionId', 'epoch', 'step'], field);
  const sessionId = readId(obj.sessionId, `${field}.sessionId`);
  const epoch = readId(obj.epoch, `${field}.epoch`);
  const step = readU64(obj.step, `${field}.step`);
  // Keys in RFC 8785 order: a scope echoed into a reply keeps the encoder on its fast path.
  return { epoch, sessionId, step };
}
