// RFC 8785 (JCS) canonical JSON: a writer and a strict parser, plus SHA-256 digests over the bytes.
// Not a general JSON library: the parser refuses duplicate keys, invalid UTF-8, lone surrogates,
// raw control characters, trailing data and integer literals beyond ±(2^53−1).
import { hash } from 'node:crypto';
import { DetsimError } from './errors.js';

/** A JSON value as the strict parser returns it (no undefined, no functions, finite numbers only). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

const utf8Decoder = new TextDecoder('utf-8', { fatal: true });
const utf8Encoder = new TextEncoder();
/** Deepest nesting the writer and the parser accept (the top-level value is depth 0). */
const MAX_DEPTH = 512;

/** ECMAScript Number::toString, which RFC 8785 adopts for numbers; -0 prints as 0. */
export function serializeNumber(n: number): string {
  if (!Number.isFinite(n)) throw new DetsimError('struct_non_finite_number', `cannot serialize ${n} as JSON`);
  return String(n);
}

// The writer keeps the path to the current value as a stack of keys and indices and only renders
// it for an error message: building a path string per value made canonicalize several times slower.
type PathStack = (string | number)[];

function renderPath(stack: PathStack, extra?: string | number): string {
  let path = '$';
  for (const seg of extra === undefined ? stack : [...stack, extra])
    path += typeof seg === 'number' ? `[${seg}]` : `.${seg}`;
  return path.length > 200 ? `${path.slice(0, 197)}...` : path;
}

// Characters that need escaping, or may be half of a surrogate pair: without any, the string
// prints as itself in quotes (the common case, several times faster than JSON.stringify).
// eslint-disable-next-line no-control-regex -- control characters are exactly what RFC 8785 escapes
const NEEDS_CARE = /["\\\u0000-\u001f\ud800-\udfff]/;

function serializeString(s: string, stack: PathStack): string {
  if (!NEEDS_CARE.test(s)) return `"${s}"`;
  if (!s.isWellFormed()) {
    const path = renderPath(stack);
    throw new DetsimError('struct_invalid_json', `lone surrogate in a string at ${path}`, path);
  }
  return JSON.stringify(s); // JSON.stringify's escaping is exactly the RFC 8785 escaping.
}

function write(value: unknown, stack: PathStack): string {
  // The parser's bound, which also turns a cycle into a refusal instead of a stack overflow.
  if (stack.length > MAX_DEPTH)
    throw new DetsimError(
      'struct_invalid_json',
      `nesting deeper than ${MAX_DEPTH} (or a cycle) at ${renderPath(stack)}`,
      '$',
    );
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) {
        const path = renderPath(stack);
        throw new DetsimError('struct_non_finite_number', `${value} at ${path} is not a finite number`, path);
      }
      return String(value);
    case 'string':
      return serializeString(value, stack);
    case 'object':
      break;
    default: {
      const path = renderPath(stack);
      throw new DetsimError('struct_unsupported_value', `${typeof value} at ${path} cannot be written as JSON`, path);
    }
  }
  if (Array.isArray(value)) {
    let text = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) text += ',';
      stack.push(i);
      text += write(value[i], stack);
      stack.pop();
    }
    return `${text}]`;
  }
  if (ArrayBuffer.isView(value) || value instanceof Map || value instanceof Set || value instanceof Date) {
    const path = renderPath(stack);
    throw new DetsimError(
      'struct_unsupported_value',
      `${value.constructor.name} at ${path} cannot be written as JSON`,
      path,
    );
  }
  // Default sort compares UTF-16 code units, which is exactly RFC 8785's key order.
  const keys = Object.keys(value as object);
  if (keys.length > 1) keys.sort();
  let text = '{';
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const v = (value as Record<string, unknown>)[key];
    if (v === undefined) {
      const path = renderPath(stack, key);
      throw new DetsimError('struct_unsupported_value', `undefined at ${path}: use null for an absent value`, path);
    }
    text += i > 0 ? `,${serializeString(key, stack)}:` : `${serializeString(key, stack)}:`;
    stack.push(key);
    text += write(v, stack);
    stack.pop();
  }
  return `${text}}`;
}

/**
 * Whether JSON.stringify already prints `value` canonically, but for lone surrogates (which
 * canonicalize looks for in the printed text): plain objects and arrays only, every object's keys
 * in RFC 8785 order, finite numbers, nothing undefined, within MAX_DEPTH. Data parsed from
 * canonical bytes (every reply body, the decisions and observations it carries) passes; anything
 * else (unsorted keys, class instances, refusals) takes the writer, which prints or refuses it
 * exactly as before. For such data the two agree: JSON.stringify uses Number::toString and the
 * RFC 8785 string escaping, and lists keys in own-key order.
 */
function stringifiesCanonically(value: unknown, depth: number): boolean {
  if (value === null) return true;
  switch (typeof value) {
    case 'boolean':
    case 'string':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      break;
    default:
      return false;
  }
  if (depth >= MAX_DEPTH) return false;
  const proto = Object.getPrototypeOf(value);
  if (proto === Array.prototype) {
    const list = value as unknown[];
    for (let i = 0; i < list.length; i++) if (!stringifiesCanonically(list[i], depth + 1)) return false;
    return true;
  }
  if (proto !== Object.prototype && proto !== null) return false;
  // for-in allocates no key list; it visits own keys in Object.keys order (an enumerable key
  // inherited from a polluted Object.prototype comes after them and can only fail the order check).
  let prev: string | undefined;
  for (const key in value as object) {
    // Key order first: an object built in code usually fails here, before any nested work.
    if (prev !== undefined && !(prev < key)) return false;
    prev = key;
    if (!stringifiesCanonically((value as Record<string, unknown>)[key], depth + 1)) return false;
  }
  return true;
}

/** Integers past this print as integer literals the strict parser refuses (below 1e21 they print without an exponent). */
const UNSAFE_BELOW = 1e21;

/**
 * A deep copy of plain JSON data equal to what JSON.parse(canonicalize(value)) gives back, with
 * every object's keys in RFC 8785 order (so canonicalize prints it on its fast path) — or
 * undefined when `value` is anything else: a class instance, a typed array, a lone surrogate, an
 * integer beyond ±(2^53−1) the strict parser refuses, undefined, a non-finite number, or nesting
 * deeper than the writer takes (a cycle). The caller then takes the text path, which prints or
 * refuses such a value exactly as before. For a reply built in this thread (an inline worker's): it
 * checks what printing would check, and the copy is the snapshot printing would make, without
 * printing and parsing.
 */
export function canonicalCopy(value: unknown, depth = 0): unknown {
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'string') return value.isWellFormed() ? value : undefined;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return undefined;
    if (Number.isInteger(value) && !Number.isSafeInteger(value) && Math.abs(value) < UNSAFE_BELOW) return undefined;
    return value === 0 ? 0 : value; // -0 prints and parses back as 0
  }
  if (typeof value !== 'object' || depth >= MAX_DEPTH) return undefined;
  const proto = Object.getPrototypeOf(value);
  if (proto === Array.prototype) {
    const list = value as unknown[];
    const out: unknown[] = new Array(list.length);
    for (let i = 0; i < list.length; i++) {
      const v = canonicalCopy(list[i], depth + 1);
      if (v === undefined) return undefined;
      out[i] = v;
    }
    return out;
  }
  if (proto !== Object.prototype && proto !== null) return undefined;
  const keys = Object.keys(value);
  if (keys.length > 1 && !keysSorted(keys)) keys.sort();
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    if (!key.isWellFormed()) return undefined;
    const v = canonicalCopy((value as Record<string, unknown>)[key], depth + 1);
    if (v === undefined) return undefined;
    // An own "__proto__" (as JSON.parse makes one) is defined, not assigned: assigning sets the prototype.
    if (key === '__proto__')
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
    else out[key] = v;
  }
  // (An integer-like key such as "10" is listed before "9" whatever the order: as JSON.parse lists it.)
  return out;
}

function keysSorted(keys: readonly string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (!(keys[i - 1]! < keys[i]!)) return false;
  return true;
}

/** The RFC 8785 canonical text of a JSON value. */
export function canonicalize(value: unknown): string {
  // Fast path: already-canonical data (e.g. parsed from a canonical body) is JSON.stringify's output,
  // unless a string holds a lone surrogate, which JSON.stringify escapes as \udXXX (lowercase) and
  // the writer refuses: any "\ud" in the text (rare, and maybe only an escaped backslash) goes there.
  if (stringifiesCanonically(value, 0)) {
    const text = JSON.stringify(value);
    if (!text.includes('\\ud')) return text;
  }
  return write(value, []);
}

/** The canonical UTF-8 bytes of a JSON value. */
export function canonicalBytes(value: unknown): Buffer {
  return Buffer.from(canonicalize(value), 'utf8');
}

/** SHA-256 in hex; a string is hashed as its UTF-8 bytes. */
export function sha256Hex(bytes: Uint8Array | string): string {
  // The one-shot hash skips the Hash object: several times cheaper for the small bodies hashed per step.
  return hash('sha256', bytes, 'hex');
}

/** Lowercase hex SHA-256 of the canonical bytes: the `Digest` of a JSON value. */
export function canonicalDigest(value: unknown): string {
  // The canonical text is well-formed (lone surrogates are refused), so hashing it as UTF-8 hashes
  // exactly canonicalBytes(value) without building that Buffer.
  return sha256Hex(canonicalize(value));
}

// ---------------------------------------------------------------------------------------------
// Canonical text check: one pass over a JSON text that proves it is already RFC 8785 canonical,
// without building or re-printing the value. It only ever says "certainly canonical"; anything it
// does not handle (escaped keys, U+FFFD, deep nesting, a non-canonical form) is "not proven", and
// the caller then takes its exact path, so refusals and their reasons stay that path's.

/** Nesting the checker follows; deeper texts are left to the exact path. */
const SCAN_MAX_DEPTH = 64;
/** Set by scanString when the string held an escape (keys with escapes are left to the exact path). */
let scannedEscape = false;

/**
 * Whether `text` is exactly `canonicalize(JSON.parse(text))`: no whitespace, object keys strictly
 * increasing in UTF-16 code units (so none repeats), strings escaped the RFC 8785 way and free of
 * lone surrogates, numbers printed as ECMAScript Number::toString prints them, and nothing after
 * the value. False means only "not proven here".
 */
export function isCanonicalText(text: string): boolean {
  return text.length > 0 && scanValue(text, 0, 0) === text.length;
}

/** The index just past the canonical value starting at `i`, or -1. */
function scanValue(t: string, i: number, depth: number): number {
  const c = t.charCodeAt(i);
  if (c === 0x22) return scanString(t, i);
  if (c === 0x7b) return scanObject(t, i, depth);
  if (c === 0x5b) return scanArray(t, i, depth);
  if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return scanNumber(t, i);
  if (c === 0x74) return t.startsWith('true', i) ? i + 4 : -1;
  if (c === 0x66) return t.startsWith('false', i) ? i + 5 : -1;
  if (c === 0x6e) return t.startsWith('null', i) ? i + 4 : -1;
  return -1;
}

function scanObject(t: string, i: number, depth: number): number {
  if (depth >= SCAN_MAX_DEPTH) return -1;
  let j = i + 1;
  if (t.charCodeAt(j) === 0x7d) return j + 1;
  let prevStart = -1;
  let prevEnd = -1;
  for (;;) {
    if (t.charCodeAt(j) !== 0x22) return -1;
    scannedEscape = false;
    const keyEnd = scanString(t, j);
    if (keyEnd < 0 || scannedEscape) return -1;
    // Keys without escapes compare as their raw text: strictly increasing means sorted and unique.
    if (prevStart >= 0 && !textLess(t, prevStart, prevEnd, j + 1, keyEnd - 1)) return -1;
    prevStart = j + 1;
    prevEnd = keyEnd - 1;
    if (t.charCodeAt(keyEnd) !== 0x3a) return -1;
    j = scanValue(t, keyEnd + 1, depth + 1);
    if (j < 0) return -1;
    const c = t.charCodeAt(j);
    if (c === 0x2c) j++;
    else return c === 0x7d ? j + 1 : -1;
  }
}

/** Whether t[a, aEnd) < t[b, bEnd) in UTF-16 code units (the order of JavaScript's default sort). */
function textLess(t: string, a: number, aEnd: number, b: number, bEnd: number): boolean {
  for (; a < aEnd && b < bEnd; a++, b++) {
    const x = t.charCodeAt(a);
    const y = t.charCodeAt(b);
    if (x !== y) return x < y;
  }
  return a === aEnd && b < bEnd;
}

function scanArray(t: string, i: number, depth: number): number {
  if (depth >= SCAN_MAX_DEPTH) return -1;
  let j = i + 1;
  if (t.charCodeAt(j) === 0x5d) return j + 1;
  for (;;) {
    j = scanValue(t, j, depth + 1);
    if (j < 0) return -1;
    const c = t.charCodeAt(j);
    if (c === 0x2c) j++;
    else return c === 0x5d ? j + 1 : -1;
  }
}

/** A string with exactly JSON.stringify's escaping of a well-formed string. */
function scanString(t: string, i: number): number {
  for (let j = i + 1; j < t.length;) {
    let c = t.charCodeAt(j);
    // The common run: printable characters below the surrogates, other than the quote and backslash.
    while (c >= 0x20 && c < 0xd800 && c !== 0x22 && c !== 0x5c) c = t.charCodeAt(++j);
    if (c === 0x22) return j + 1;
    if (j >= t.length) return -1;
    if (c < 0x20) return -1;
    if (c === 0x5c) {
      scannedEscape = true;
      const e = t.charCodeAt(j + 1);
      // \" \\ \b \f \n \r \t; \u only for the other control characters, in lowercase hex.
      if (e === 0x22 || e === 0x5c || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) j += 2;
      else if (e === 0x75 && isShortControlEscape(t, j + 2)) j += 6;
      else return -1;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      // A surrogate pair is printed as itself; a lone half is refused by canonicalize.
      const low = t.charCodeAt(j + 1);
      if (c > 0xdbff || !(low >= 0xdc00 && low <= 0xdfff)) return -1;
      j += 2;
    } else if (c === 0xfffd) {
      return -1; // maybe invalid UTF-8 replaced by the decoder: the exact path compares bytes
    } else j++;
  }
  return -1;
}

/** Whether t[k, k+4) is "00" and two lowercase hex digits naming a control character without a short escape. */
function isShortControlEscape(t: string, k: number): boolean {
  if (t.charCodeAt(k) !== 0x30 || t.charCodeAt(k + 1) !== 0x30) return false;
  const hi = t.charCodeAt(k + 2);
  const lo = t.charCodeAt(k + 3);
  if (hi !== 0x30 && hi !== 0x31) return false;
  const loValue = lo >= 0x30 && lo <= 0x39 ? lo - 0x30 : lo >= 0x61 && lo <= 0x66 ? lo - 0x61 + 10 : -1;
  if (loValue < 0) return false;
  const code = (hi - 0x30) * 16 + loValue;
  return code !== 0x08 && code !== 0x09 && code !== 0x0a && code !== 0x0c && code !== 0x0d;
}

/** A number exactly as Number::toString prints it (integers of up to 15 digits are so by form). */
function scanNumber(t: string, i: number): number {
  let j = i;
  if (t.charCodeAt(j) === 0x2d) j++;
  const digitsStart = j;
  let c = t.charCodeAt(j);
  if (c === 0x30) c = t.charCodeAt(++j);
  else if (c >= 0x31 && c <= 0x39) {
    do c = t.charCodeAt(++j);
    while (c >= 0x30 && c <= 0x39);
  } else return -1;
  if (c !== 0x2e && c !== 0x65 && c !== 0x45 && !(c >= 0x30 && c <= 0x39)) {
    const digits = j - digitsStart;
    if (digits <= 15 && !(digits === 1 && j - i === 2 && t.charCodeAt(digitsStart) === 0x30)) return j;
  } else {
    // A fraction or an exponent: consume the literal the JSON way, then compare with Number::toString.
    while (j < t.length && /[0-9.eE+-]/.test(t[j]!)) j++;
  }
  const literal = t.slice(i, j);
  return String(Number(literal)) === literal ? j : -1;
}

// ---------------------------------------------------------------------------------------------
// Strict parser

class Parser {
  private pos = 0;
  constructor(private readonly text: string) {}

  fail(
    message: string,
    reason: 'struct_invalid_json' | 'struct_duplicate_key' | 'struct_unsafe_integer' = 'struct_invalid_json',
  ): never {
    throw new DetsimError(reason, `${message} at offset ${this.pos}`);
  }

  parseDocument(): JsonValue {
    this.skipWhitespace();
    const value = this.parseValue(0);
    this.skipWhitespace();
    if (this.pos !== this.text.length) this.fail('trailing data after the JSON value');
    return value;
  }

  private skipWhitespace(): void {
    const t = this.text;
    while (this.pos < t.length) {
      const c = t.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.pos++;
      else break;
    }
  }

  private parseValue(depth: number): JsonValue {
    if (depth > MAX_DEPTH) this.fail(`nesting deeper than ${MAX_DEPTH}`);
    const c = this.text.charCodeAt(this.pos);
    if (c === 0x7b) return this.parseObject(depth);
    if (c === 0x5b) return this.parseArray(depth);
    if (c === 0x22) return this.parseString();
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.parseNumber();
    if (this.text.startsWith('true', this.pos)) return ((this.pos += 4), true);
    if (this.text.startsWith('false', this.pos)) return ((this.pos += 5), false);
    if (this.text.startsWith('null', this.pos)) return ((this.pos += 4), null);
    if (this.pos >= this.text.length) this.fail('unexpected end of input');
    return this.fail(`unexpected character ${JSON.stringify(this.text[this.pos])}`);
  }

  private expect(ch: string): void {
    if (this.text[this.pos] !== ch) {
      if (this.pos >= this.text.length) this.fail(`unexpected end of input, expected '${ch}'`);
      this.fail(`expected '${ch}'`);
    }
    this.pos++;
  }

  private parseObject(depth: number): JsonValue {
    this.pos++;
    const obj: Record<string, JsonValue> = Object.create(null);
    const seen = new Set<string>();
    this.skipWhitespace();
    if (this.text[this.pos] === '}') {
      this.pos++;
      return Object.assign({}, obj);
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text.charCodeAt(this.pos) !== 0x22) this.fail('expected a string key');
      const keyStart = this.pos;
      const key = this.parseString();
      if (seen.has(key)) {
        this.pos = keyStart;
        this.fail(`duplicate key ${JSON.stringify(key)}`, 'struct_duplicate_key');
      }
      seen.add(key);
      this.skipWhitespace();
      this.expect(':');
      this.skipWhitespace();
      obj[key] = this.parseValue(depth + 1);
      this.skipWhitespace();
      if (this.text[this.pos] === ',') {
        this.pos++;
        continue;
      }
      this.expect('}');
      break;
    }
    // A plain object (with a prototype) so callers can use it normally; keys were checked unique.
    const out: Record<string, JsonValue> = {};
    for (const k of Object.keys(obj)) {
      Object.defineProperty(out, k, { value: obj[k], enumerable: true, writable: true, configurable: true });
    }
    return out;
  }

  private parseArray(depth: number): JsonValue {
    this.pos++;
    const arr: JsonValue[] = [];
    this.skipWhitespace();
    if (this.text[this.pos] === ']') {
      this.pos++;
      return arr;
    }
    for (;;) {
      this.skipWhitespace();
      arr.push(this.parseValue(depth + 1));
      this.skipWhitespace();
      if (this.text[this.pos] === ',') {
        this.pos++;
        continue;
      }
      this.expect(']');
      return arr;
    }
  }

  private parseString(): string {
    const t = this.text;
    this.pos++; // opening quote
    let out = '';
    let runStart = this.pos;
    for (;;) {
      if (this.pos >= t.length) this.fail('unterminated string');
      const c = t.charCodeAt(this.pos);
      if (c === 0x22) {
        out += t.slice(runStart, this.pos);
        this.pos++;
        break;
      }
      if (c < 0x20) this.fail('raw control character in a string');
      if (c === 0x5c) {
        out += t.slice(runStart, this.pos);
        out += this.parseEscape();
        runStart = this.pos;
        continue;
      }
      this.pos++;
    }
    if (!out.isWellFormed()) this.fail('lone surrogate in a string');
    return out;
  }

  private parseEscape(): string {
    const e = this.text[this.pos + 1];
    this.pos += 2;
    switch (e) {
      case '"':
        return '"';
      case '\\':
        return '\\';
      case '/':
        return '/';
      case 'b':
        return '\b';
      case 'f':
        return '\f';
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'u': {
        const hex = this.text.slice(this.pos, this.pos + 4);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('bad \\u escape');
        this.pos += 4;
        return String.fromCharCode(parseInt(hex, 16));
      }
      default:
        this.pos -= 2;
        return this.fail('bad escape');
    }
  }

  private parseNumber(): number {
    const t = this.text;
    const start = this.pos;
    if (t[this.pos] === '-') this.pos++;
    if (t[this.pos] === '0') this.pos++;
    else if (/[1-9]/.test(t[this.pos] ?? '')) while (/[0-9]/.test(t[this.pos] ?? '')) this.pos++;
    else this.fail('bad number');
    let integral = true;
    if (t[this.pos] === '.') {
      integral = false;
      this.pos++;
      if (!/[0-9]/.test(t[this.pos] ?? '')) this.fail('bad number: digits must follow the point');
      while (/[0-9]/.test(t[this.pos] ?? '')) this.pos++;
    }
    if (t[this.pos] === 'e' || t[this.pos] === 'E') {
      integral = false;
      this.pos++;
      if (t[this.pos] === '+' || t[this.pos] === '-') this.pos++;
      if (!/[0-9]/.test(t[this.pos] ?? '')) this.fail('bad number: digits must follow the exponent');
      while (/[0-9]/.test(t[this.pos] ?? '')) this.pos++;
    }
    const literal = t.slice(start, this.pos);
    const n = Number(literal);
    if (!Number.isFinite(n)) {
      this.pos = start;
      this.fail(`number ${literal} is out of range`);
    }
    if (integral && !Number.isSafeInteger(n)) {
      this.pos = start;
      this.fail(`integer ${literal} is beyond ±(2^53−1); write counters as U64 strings`, 'struct_unsafe_integer');
    }
    return n;
  }
}

/** Decode UTF-8 strictly (no BOM skipping, no replacement characters). */
export function decodeUtf8Strict(bytes: Uint8Array): string {
  try {
    const text = utf8Decoder.decode(bytes);
    // TextDecoder drops a leading BOM silently; JSON text must not carry one.
    if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
      throw new DetsimError('struct_invalid_json', 'a byte-order mark is not allowed in JSON text');
    }
    return text;
  } catch (e) {
    if (e instanceof DetsimError) throw e;
    throw new DetsimError('struct_invalid_utf8', 'input is not valid UTF-8');
  }
}

/** Parse JSON strictly from text or UTF-8 bytes. */
export function parseStrict(input: string | Uint8Array): JsonValue {
  const text = typeof input === 'string' ? input : decodeUtf8Strict(input);
  return new Parser(text).parseDocument();
}

/**
 * Parse text that is expected to be canonical (a line detsim wrote), strictly, at the native
 * parser's speed: JSON.parse, then re-serialise; equal text proves the strict parse would give the
 * same value (no duplicate key, lone surrogate or unrepresentable number survives a canonical round
 * trip unchanged). Anything else takes the strict parser, which accepts or refuses it as always.
 */
export function parseExpectedCanonical(text: string): JsonValue {
  try {
    const value = JSON.parse(text) as JsonValue;
    if (canonicalize(value) === text && !hasPlainUnsafeInteger(value)) return value;
  } catch {
    // not canonical, or not JSON: the strict parser says which
  }
  return parseStrict(text);
}

/**
 * An integer beyond ±(2^53−1) that canonical text writes in plain digits (below 1e21): the strict
 * parser refuses its literal, JSON.parse rounds it silently, so the fast path must not accept it.
 */
function hasPlainUnsafeInteger(v: JsonValue): boolean {
  if (typeof v === 'number') return !Number.isSafeInteger(v) && Number.isInteger(v) && Math.abs(v) < 1e21;
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v)) return v.some(hasPlainUnsafeInteger);
  for (const k in v) if (hasPlainUnsafeInteger(v[k]!)) return true;
  return false;
}

/** Parse, and require the bytes to be already canonical (re-serialising gives the same bytes). */
export function parseCanonical(bytes: Uint8Array): JsonValue {
  const value = parseStrict(bytes);
  const again = utf8Encoder.encode(canonicalize(value));
  if (!Buffer.from(again).equals(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))) {
    throw new DetsimError('struct_not_canonical', 'JSON is not in RFC 8785 canonical form');
  }
  return value;
}
