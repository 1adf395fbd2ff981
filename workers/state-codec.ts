// Deterministic state payload encoding for captures, lossless or refused (docs/spec/state-codec.md):
// msgpackr with records off and variable map sizes, every object re-keyed in sorted order (as a Map,
// so integer-like keys keep their place); a BigInt as int64/uint64 or msgpackr's big-integer ext, -0
// as float64 -0, Uint8Array as bin, other typed arrays as the ndarray ext (dtype, shape, little-endian
// bytes) that the Python worker writes for numpy arrays. Not a general serializer: only plain data goes in.
import { Packr, addExtension } from 'msgpackr';
import { MIN_FIELD_BYTES, scanLayout } from './state-layout.js';
import { NDARRAY_EXT, NegativeZero, decodeNdarray, encodeNdarray, ndarrayClasses } from './state-ndarray.js';

const OPTIONS = { useRecords: false, variableMapSize: true, useBigIntExtension: true } as const;

// -0 is written as float64 -0 (msgpackr writes the int 0): its marker writes those 9 bytes itself.
addExtension({
  Class: NegativeZero,
  type: 0x2d,
  pack(_value: unknown, allocate: (size: number) => { target: Uint8Array; position: number }) {
    const { target, position } = allocate(9);
    target.set([0xcb, 0x80, 0, 0, 0, 0, 0, 0, 0], position);
  },
  unpack() {
    throw new Error('state payload: unsupported msgpack ext type 45');
  },
} as unknown as Parameters<typeof addExtension>[0]);
for (const Class of ndarrayClasses)
  addExtension({ Class, type: NDARRAY_EXT, pack: encodeNdarray, unpack: decodeNdarray });

const decoder = new Packr(OPTIONS);

export type { StateArray, StateValue } from './state-value.js';

/** Objects and arrays on the path from the root to the value being sorted: a cycle is named, not overflowed. */
type Ancestors = Map<object, string>;

function sorted(value: unknown, path: string, ancestors: Ancestors = new Map()): unknown {
  if (value === null || typeof value === 'boolean') return value;
  if (typeof value === 'string') return wellFormed(value, path);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`state ${path}: ${value} is not a finite number`);
    return Object.is(value, -0) ? NEGATIVE_ZERO : value;
  }
  if (typeof value === 'bigint') {
    if (value >= 1n << 65535n || value < -(1n << 65535n))
      throw new Error(`state ${path}: a BigInt of ${value.toString(2).length} bits is too large to capture`);
    return value;
  }
  if (value instanceof Uint8Array) return value;
  if (ArrayBuffer.isView(value)) {
    if ((ndarrayClasses as readonly unknown[]).includes(value.constructor)) return value;
    throw new Error(`state ${path}: a ${value.constructor.name} cannot be captured (use one of the typed arrays)`);
  }
  if (Array.isArray(value) || typeof value === 'object') {
    const seen = ancestors.get(value);
    if (seen !== undefined) throw new Error(`state ${path}: a cycle (it is ${seen}), which cannot be captured`);
    ancestors.set(value, path);
    try {
      return Array.isArray(value) ? sortedArray(value, path, ancestors) : sortedObject(value, path, ancestors);
    } finally {
      ancestors.delete(value);
    }
  }
  throw new Error(`state ${path}: ${typeof value} cannot be captured`);
}

/** A string as it is, or refused: a lone surrogate would come back as U+FFFD (msgpack strings are UTF-8). */
function wellFormed(s: string, path: string): string {
  if (!(s as unknown as { isWellFormed(): boolean }).isWellFormed())
    throw new Error(`state ${path}: a string with a lone surrogate cannot be captured (it would come back as U+FFFD)`);
  return s;
}

function sortedArray(value: unknown[], path: string, ancestors: Ancestors): unknown[] {
  // A for loop, not map: map skips the empty slots of a sparse array, which would come back as null.
  const out = new Array<unknown>(value.length);
  for (let i = 0; i < value.length; i++) {
    const v: unknown = value[i];
    if (v === undefined && !(i in value))
      throw new Error(
        `state ${path}[${i}]: an empty slot of a sparse array cannot be captured (fill it, e.g. with null)`,
      );
    out[i] = sorted(v, `${path}[${i}]`, ancestors);
  }
  // An own property beside the elements (arr.total = 3) would be dropped: the codec writes the elements.
  if (Object.getOwnPropertyNames(value).length !== value.length + 1) {
    const extra = Object.getOwnPropertyNames(value).find((k) => k !== 'length' && String(Number(k) >>> 0) !== k);
    throw new Error(`state ${path}.${extra}: a property beside an array's elements cannot be captured`);
  }
  return out;
}

function sortedObject(value: object, path: string, ancestors: Ancestors): Map<string, unknown> {
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null)
    throw new Error(`state ${path}: ${proto?.constructor?.name ?? 'object'} is not plain data`);
  const keys = Object.keys(value);
  if (Object.getOwnPropertySymbols(value).length > 0)
    throw new Error(`state ${path}: a Symbol-keyed property cannot be captured (it would be dropped)`);
  if (Object.getOwnPropertyNames(value).length !== keys.length) {
    const hidden = Object.getOwnPropertyNames(value).find((k) => !keys.includes(k));
    throw new Error(`state ${path}.${hidden}: a non-enumerable property cannot be captured (it would be dropped)`);
  }
  const m = new Map<string, unknown>();
  for (const key of keys.sort()) {
    if (key === '__proto__')
      throw new Error(`state ${path}: the key __proto__ cannot be captured (it would come back renamed)`);
    wellFormed(key, `${path} (a key)`);
    m.set(key, sorted((value as Record<string, unknown>)[key], `${path}.${key}`, ancestors));
  }
  return m;
}

const NEGATIVE_ZERO = new NegativeZero();

/** Encode plain data to deterministic msgpack bytes (a fresh buffer owned by the caller). */
export function encodeState(value: unknown): Buffer {
  return packTree(sorted(value, '$'));
}

/**
 * The same bytes as encodeState, as pieces to be written in order: the payload's own bytes around
 * its large bins (copied, small) and each large bin as the very Uint8Array the model returned, not
 * copied. So the pieces stay right only while the model's arrays do not change: for a held capture
 * (docs/spec/capture-file.md), which the group writes before it steps again, and whose bytes the file seal
 * checks against the digest. One piece (encodeState's buffer) when no large bins add up to 1 MiB
 * or their layout cannot be named exactly (state-layout.ts).
 */
export function encodeStatePieces(value: unknown): Uint8Array[] {
  const tree = sorted(value, '$');
  const views: Uint8Array[] = [];
  const skeleton = replaceLargeBins(tree, () => PLACEHOLDER, views);
  const large = views.reduce((n, v) => n + v.byteLength, 0);
  if (large < PRESIZE_FROM_BYTES || views.some((v) => v.byteLength > MAX_BIN32_BYTES)) return [packTree(tree)];
  // The skeleton holds a placeholder bin32 of 64 KiB where each large bin goes: the layout scan
  // finds them by offset, in the order the codec wrote them (the order replaceLargeBins met them).
  const bytes = Buffer.from(new Packr(OPTIONS).pack(skeleton)); // out of the codec's shared buffer
  const fields = scanLayout((start, end) => bytes.subarray(start, end), bytes.length);
  if (fields === null || fields.length !== views.length || fields.some((f) => f.length !== PLACEHOLDER.length))
    return [packTree(tree)];
  const pieces: Uint8Array[] = [];
  let at = 0;
  fields.forEach((f, i) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(views[i]!.byteLength);
    pieces.push(bytes.subarray(at, f.at - 4), length, views[i]!); // 0xc6 stays; its length is the view's
    at = f.at + f.length;
  });
  pieces.push(bytes.subarray(at));
  return pieces;
}

/** What stands in for a large bin in encodeStatePieces' skeleton: the smallest bin the layout scan names. */
const PLACEHOLDER = new Uint8Array(MIN_FIELD_BYTES);
const MAX_BIN32_BYTES = 0xffffffff;

/** A copy of the sorted tree with each bin of LARGE_BIN_BYTES or more replaced by `by()`, collected in `into`. */
function replaceLargeBins(tree: unknown, by: () => Uint8Array, into: Uint8Array[]): unknown {
  const walk = (v: unknown): unknown => {
    if (v instanceof Uint8Array) {
      if (v.byteLength < LARGE_BIN_BYTES) return v;
      into.push(v);
      return by();
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v instanceof Map) return new Map([...v].map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk(tree);
}

function packTree(tree: unknown): Buffer {
  // A fresh Packr per payload: a shared one hands out views into a reused buffer.
  const packr = new Packr(OPTIONS);
  const size = sizeWithLargeBins(tree);
  if (size === null) return packr.pack(tree);
  // Large bins (a model's typed-array state): pack into a buffer of the payload's size (+ headroom).
  // Left to itself the codec grows its buffer by 1.25x and copies, so a 269 MB state passed
  // through 112 MB and 336 MB buffers (paging in both) and the payload kept 67 MB of slack.
  packr.useBuffer(Buffer.allocUnsafeSlow(size + codecHeadroom(tree)));
  try {
    return packr.pack(tree);
  } finally {
    // The codec keeps its last buffer for the next payload: hand it a small one, not this payload.
    packr.useBuffer(Buffer.allocUnsafe(8192));
  }
}

/** Bins from this size are counted apart when sizing a payload (the codec writes them as bin32). */
const LARGE_BIN_BYTES = MIN_FIELD_BYTES;
/** Below this many bytes of large bins the codec's own buffer growth is cheap enough. */
const PRESIZE_FROM_BYTES = 1024 * 1024;

/**
 * The exact encoded size of `tree` when its large bins add up to PRESIZE_FROM_BYTES or more, else
 * null: the tree with each large bin emptied is packed (a few bytes), then each bin adds its length
 * and 3 header bytes (an empty bin is 0xc4 0x00, a bin32 is 0xc6 and a 4-byte length).
 */
function sizeWithLargeBins(tree: unknown): number | null {
  const views: Uint8Array[] = [];
  const skeleton = replaceLargeBins(tree, () => EMPTY, views);
  const large = views.reduce((n, v) => n + v.byteLength, 0);
  if (large < PRESIZE_FROM_BYTES) return null;
  return new Packr(OPTIONS).pack(skeleton).length + large + 3 * views.length;
}

/**
 * Room the codec wants past the bytes it writes: 10 bytes always, and before each string it
 * reserves the string's worst case (3 bytes per UTF-16 unit and a header) whether it needs it or not.
 */
function codecHeadroom(tree: unknown): number {
  let longest = 0;
  const walk = (v: unknown): void => {
    if (typeof v === 'string') longest = Math.max(longest, v.length);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v instanceof Map)
      for (const [k, x] of v) {
        walk(k);
        walk(x);
      }
  };
  walk(tree);
  return 3 * longest + 32;
}

const EMPTY = new Uint8Array(0);

const transient = new Packr(OPTIONS);

/**
 * The same bytes as encodeState, in a buffer the next call reuses: compare or copy them at once.
 * For checks that encode every step (workers/prepare-guard.ts), where a fresh Packr costs most.
 */
export function encodeStateTransient(value: unknown): Buffer {
  return transient.pack(sorted(value, '$'));
}

/** Decode payload bytes back to plain data (maps become objects, bin a Uint8Array, as it was captured). */
export function decodeState(bytes: Uint8Array): unknown {
  return plainBytes(decoder.unpack(bytes));
}

/**
 * A bin as the Uint8Array a model captured, not the Buffer msgpackr decodes it to (the same memory):
 * a Buffer's slice() is a view where a Uint8Array's is a copy, and its toString() differs.
 */
export function plainBytes(v: unknown): unknown {
  if (Buffer.isBuffer(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = plainBytes(v[i]);
  } else if (v !== null && typeof v === 'object' && !ArrayBuffer.isView(v)) {
    const o = v as Record<string, unknown>;
    for (const k of Object.keys(o)) o[k] = plainBytes(o[k]);
  }
  return v;
}
