// Memory a model gave back for good (the SDK's `recycle`, called from its `release` hook when a
// restore replaced the state that held it): the next restore reads a large state field of the
// same length into it (payload-scatter.ts) instead of into fresh memory. Why: a fresh 12 MB field
// costs its page faults, and the external-memory garbage collections that a new ArrayBuffer per
// restore sets off, in every worker on every restore (bench/README.md, "Recycled field memory").
// Every byte of a reused buffer is overwritten by the read (or the read is refused), so nothing
// of the old state can reach the new one. NOT the owned-bytes handover (the other direction) and
// NOT a general allocator: only whole ArrayBuffers of field size, matched by exact length.

import { MIN_FIELD_BYTES } from './state-layout.js';

/** Smallest buffer kept: the size from which payload-scatter.ts gives a field memory of its own. */
export const RECYCLE_MIN_BYTES = MIN_FIELD_BYTES;
/** At most this many bytes wait in the pool; a buffer given back beyond it is left to the GC. */
export const RECYCLE_MAX_BYTES = 512 * 1024 * 1024;

interface Pool {
  readonly byLength: Map<number, ArrayBuffer[]>;
  readonly held: WeakSet<ArrayBuffer>;
  bytes: number;
}

// One pool per process, even when a model module loads its own copy of the SDK (e.g. from source).
const REGISTRY = Symbol.for('detsim.recycled-bytes.v1');
const registry = globalThis as typeof globalThis & { [REGISTRY]?: Pool };
const pool: Pool = (registry[REGISTRY] ??= { byLength: new Map(), held: new WeakSet(), bytes: 0 });

/**
 * Keep the ArrayBuffer behind `view` for a later restore: only when the view spans all of it, it
 * is at least RECYCLE_MIN_BYTES, not shared, not already kept, and the pool has room. Whether it was kept.
 */
export function giveBack(view: ArrayBufferView): boolean {
  const buffer = view.buffer;
  if (!(buffer instanceof ArrayBuffer) || view.byteOffset !== 0 || view.byteLength !== buffer.byteLength) return false;
  if (buffer.byteLength < RECYCLE_MIN_BYTES || pool.held.has(buffer)) return false;
  if (pool.bytes + buffer.byteLength > RECYCLE_MAX_BYTES) return false;
  const same = pool.byLength.get(buffer.byteLength) ?? [];
  same.push(buffer);
  pool.byLength.set(buffer.byteLength, same);
  pool.held.add(buffer);
  pool.bytes += buffer.byteLength;
  return true;
}

/** A kept buffer of exactly `length` bytes, taken out of the pool (so handed out once), or null. */
export function reuse(length: number): Buffer | null {
  const same = pool.byLength.get(length);
  const buffer = same?.pop();
  if (buffer === undefined) return null;
  if (same!.length === 0) pool.byLength.delete(length);
  pool.held.delete(buffer);
  pool.bytes -= length;
  return Buffer.from(buffer);
}

/** Bytes waiting in the pool (tests and diagnostics). */
export function recycledBytes(): number {
  return pool.bytes;
}
