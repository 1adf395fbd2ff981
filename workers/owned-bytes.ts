// Byte buffers a restore hands to a model to keep: each is the whole of an ArrayBuffer that nothing
// else in the worker holds (a large `bin` field of a state payload, read from the checkpoint file
// into memory of its own by payload-scatter.ts). The SDK's f64FromBytes / f32FromBytes take such a
// buffer over as the model's typed array instead of copying it, once.
// NOT a pool and NOT a cache: a buffer is marked by its maker and unmarked by the one taker.

// One registry per process, even when a model module loads its own copy of the SDK (e.g. from source).
const REGISTRY = Symbol.for('detsim.owned-bytes.v1');
const registry = globalThis as typeof globalThis & { [REGISTRY]?: WeakSet<ArrayBuffer> };
const owned: WeakSet<ArrayBuffer> = (registry[REGISTRY] ??= new WeakSet<ArrayBuffer>());

/** Mark `bytes` (which must span its whole ArrayBuffer, held by nobody else) as the model's to keep. */
export function handOver(bytes: Uint8Array): void {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer)
    owned.add(bytes.buffer);
}

/**
 * The ArrayBuffer behind `bytes` when it was handed over and is taken now (so never twice), and it
 * starts at a multiple of `alignment` bytes; else null (the caller copies).
 */
export function takeOver(bytes: Uint8Array, alignment: number): ArrayBuffer | null {
  const buffer = bytes.buffer;
  if (!(buffer instanceof ArrayBuffer) || !owned.has(buffer)) return null;
  if (bytes.byteOffset !== 0 || bytes.byteLength !== buffer.byteLength || buffer.byteLength % alignment !== 0)
    return null;
  owned.delete(buffer);
  return buffer;
}
