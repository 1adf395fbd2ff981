// Deterministic state payload encoding for captures: msgpackr with records off and variable map
// sizes, every object re-keyed in sorted order (as a Map, so integer-like keys keep their place),
// typed arrays as Uint8Array views. Not a general serializer: only plain data goes in.
import { Packr } from 'msgpackr';

const OPTIONS = { useRecords: false, variableMapSize: true } as const;
const decoder = new Packr(OPTIONS);

/** Plain data a model may return from capture(). Typed arrays must be Uint8Array (see f64Bytes). */
export type StateValue = null | boolean | number | string | Uint8Array | StateValue[] | { [key: string]: StateValue };

function sorted(value: unknown, path: string): unknown {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`state ${path}: ${value} is not a finite number`);
    return value;
  }
  if (value instanceof Uint8Array) return value;
  if (ArrayBuffer.isView(value)) {
    // Other typed arrays are encoded non-deterministically by msgpackr: refuse rather than guess.
    throw new Error(
      `state ${path}: ${value.constructor.name} must be passed as a Uint8Array view (use f64Bytes / bytesOf)`,
    );
  }
  if (Array.isArray(value)) return value.map((v, i) => sorted(v, `${path}[${i}]`));
  if (typeof value === 'object') {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null)
      throw new Error(`state ${path}: ${proto?.constructor?.name ?? 'object'} is not plain data`);
    const m = new Map<string, unknown>();
    for (const key of Object.keys(value).sort())
      m.set(key, sorted((value as Record<string, unknown>)[key], `${path}.${key}`));
    return m;
  }
  throw new Error(`state ${path}: ${typeof value} cannot be captured`);
}

/** Encode plain data to deterministic msgpack bytes (a fresh buffer owned by the caller). */
export function encodeState(value: unknown): Buffer {
  // A fresh Packr per payload: a shared one hands out views into a reused buffer.
  return new Packr(OPTIONS).pack(sorted(value, '$'));
}

const transient = new Packr(OPTIONS);

/**
 * The same bytes as encodeState, in a buffer the next call reuses: compare or copy them at once.
 * For checks that encode every step (workers/prepare-guard.ts), where a fresh Packr costs most.
 */
export function encodeStateTransient(value: unknown): Buffer {
  return transient.pack(sorted(value, '$'));
}

/** Decode payload bytes back to plain data (maps become objects, bin becomes Buffer/Uint8Array). */
export function decodeState(bytes: Uint8Array): unknown {
  return decoder.unpack(bytes);
}
