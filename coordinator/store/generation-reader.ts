// Verifying a FLYSESS1 file in bounded chunks: one sequential read feeds check 2's prefix hash and
// check 5's payload hashes, then the seven checks run (core/formats/envelope.ts verifyEnvelope) in
// their order with those digests, so outcomes and refusals are decodeEnvelope's. Memory is the
// small parts (header, manifest, table, footer) plus one read window, whatever the file's size.
// A co-located worker may hash its own payload range meanwhile (`delegate`): check 5 then takes its
// verdict and this reader hashes that range only if the worker did not confirm it. Ranges the
// caller will use (`keep`, e.g. restore's small coordinator payloads) are copied out of the pass's
// chunks, so they are the very bytes that were hashed and the file is not opened again for them.
// readClaimedRanges reads the table alone, for a decision taken on the layout before the pass.
// NOT the store's record checks (store.ts) and NOT restore.
import { createHash, type Hash } from 'node:crypto';
import { readSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import {
  claimedRanges,
  FOOTER_BYTES,
  MIN_ENVELOPE_BYTES,
  rangeKey,
  verifyEnvelope,
  type ClaimedRange,
  type EnvelopeSource,
  type VerifiedEnvelope,
} from '../../core/formats/envelope.js';
import { eachWindow, WINDOW_BYTES } from './file-window.js';

/** Bytes per read of the verify pass: a window that stays in the CPU's cache while it is hashed. */
export const DEFAULT_READ_CHUNK_BYTES = WINDOW_BYTES;
/** A `keep` range longer than this is not kept (read it when it is needed): memory stays bounded. */
export const MAX_KEPT_RANGE_BYTES = 1024 * 1024;
/** The start of the file kept in memory for the checks (header, manifest and table fit it in practice). */
const HEAD_BYTES = 64 * 1024;

/** A check-5 digest someone else computes: resolves true when the range hashes to the claimed digest. */
export type DelegatedDigests = Map<string, Promise<boolean>>;

export interface ReadEnvelopeOptions {
  /** Bytes per read (tests use a few bytes so that every multi-chunk path runs). */
  readonly chunkBytes?: number;
  /**
   * Called once the table has been read (before any check): the claimed payload ranges whose
   * digest another party checks, keyed by rangeKey(offset, length). Only a range claimed once is
   * taken from it; a range it does not confirm is hashed here, so a refusal reads as it would.
   */
  readonly delegate?: (claimed: readonly ClaimedRange[]) => DelegatedDigests;
  /**
   * The claimed ranges whose bytes the caller wants. The pass copies them out as it hashes them;
   * a range another party confirms, or longer than MAX_KEPT_RANGE_BYTES, is not kept.
   */
  readonly keep?: (range: ClaimedRange) => boolean;
}

/** A verified file, with the bytes of the ranges the caller asked to keep (by rangeKey). */
export interface VerifiedEnvelopeFile extends VerifiedEnvelope {
  readonly kept: ReadonlyMap<string, Buffer>;
}

/** Verify the FLYSESS1 file open at `fh` (its size `size`) in bounded chunks; throws the first failed check. */
export async function verifyEnvelopeFile(
  fh: FileHandle,
  size: number,
  options: ReadEnvelopeOptions = {},
): Promise<VerifiedEnvelopeFile> {
  const chunkBytes = options.chunkBytes ?? DEFAULT_READ_CHUNK_BYTES;
  const source = await fileSource(fh, size);
  const claimed = claimedRanges(source);
  const delegated = usableDelegates(claimed, options.delegate?.(claimed) ?? new Map());
  const own = claimed.filter((r) => !delegated.has(rangeKey(r.offset, r.length)));
  // Start every worker's verdict before the pass, settle them all after it (none is left in flight).
  const verdicts = [...delegated].map(([key, p]) =>
    p.then(
      (ok) => [key, ok] as const,
      () => [key, false] as const,
    ),
  );
  const keep = own.filter((r) => r.length <= MAX_KEPT_RANGE_BYTES && options.keep?.(r) === true);
  const pass = size >= MIN_ENVELOPE_BYTES ? await hashPass(fh, size - FOOTER_BYTES, own, keep, chunkBytes) : null;
  const ranges = pass?.ranges ?? new Map<string, Buffer>();
  for (const [key, ok] of await Promise.all(verdicts)) {
    const r = claimed.find((c) => rangeKey(c.offset, c.length) === key)!;
    // Confirmed: the digest check 5 will compare is the claimed one. Not confirmed: hash it here.
    ranges.set(key, ok ? Buffer.from(r.digest, 'hex') : await hashRange(fh, r, chunkBytes));
  }
  const verified = verifyEnvelope(source, pass ? { prefix: pass.prefix, ranges } : {});
  return { ...verified, kept: pass?.kept ?? new Map() };
}

/** Only ranges the table claims exactly once can take another party's verdict (the key names one digest). */
function usableDelegates(claimed: readonly ClaimedRange[], given: DelegatedDigests): DelegatedDigests {
  const count = new Map<string, number>();
  for (const r of claimed) count.set(rangeKey(r.offset, r.length), (count.get(rangeKey(r.offset, r.length)) ?? 0) + 1);
  const out: DelegatedDigests = new Map();
  for (const [key, p] of given) {
    if (count.get(key) === 1) out.set(key, p);
    // Not usable: still settle it, so no worker call is left unobserved.
    else p.catch(() => undefined);
  }
  return out;
}

/**
 * The checks' view of the file: its head and footer in memory, any other small range (a large
 * manifest or table, padding between payloads) read when asked. Payload bytes are never asked for:
 * their digests come from the pass.
 */
async function fileSource(fh: FileHandle, size: number): Promise<EnvelopeSource> {
  const head = await readAt(fh, 0, Math.min(size, HEAD_BYTES));
  const tailStart = Math.max(0, size - FOOTER_BYTES);
  const tail = await readAt(fh, tailStart, size - tailStart);
  return {
    length: size,
    bytes(start, end) {
      if (end <= head.length) return head.subarray(start, end);
      if (start >= tailStart) return tail.subarray(start - tailStart, end - tailStart);
      const out = Buffer.alloc(end - start);
      for (let at = 0; at < out.length;) {
        const n = readSync(fh.fd, out, at, out.length - at, start + at);
        if (n === 0) throw new Error(`the file shrank while it was read (at ${start + at} of ${size})`);
        at += n;
      }
      return out;
    },
  };
}

/** One read() call moves at most this much (a single fs call stops below 2 GiB). */
const MAX_READ_BYTES = 1024 * 1024 * 1024;

function readAt(fh: FileHandle, position: number, length: number): Promise<Buffer> {
  return fillAt(fh, Buffer.alloc(length), position);
}

/** Fill `out` with the bytes at `position`. */
async function fillAt(fh: FileHandle, out: Buffer, position: number): Promise<Buffer> {
  for (let at = 0; at < out.length;) {
    const { bytesRead } = await fh.read(out, at, Math.min(out.length - at, MAX_READ_BYTES), position + at);
    if (bytesRead === 0) throw new Error(`the file shrank while it was read (at ${position + at})`);
    at += bytesRead;
  }
  return out;
}

/**
 * One sequential read of [0, end): every byte into the prefix hash, the bytes of each range into
 * that range's hash, and the bytes of each `keep` range (a subset of `ranges`, or outside [0, end)
 * and then left out) copied out. The next chunk is read while this one is hashed (two buffers).
 */
async function hashPass(
  fh: FileHandle,
  end: number,
  ranges: readonly ClaimedRange[],
  keep: readonly ClaimedRange[],
  chunkBytes: number,
): Promise<{ prefix: Hash; ranges: Map<string, Buffer>; kept: Map<string, Buffer> }> {
  const prefix = createHash('sha256');
  const open = ranges.map((r) => ({ r, hash: createHash('sha256') }));
  const kept = new Map<string, Buffer>();
  for (const r of keep) if (r.offset + r.length <= end) kept.set(rangeKey(r.offset, r.length), Buffer.alloc(r.length));
  await eachChunk(fh, 0, end, chunkBytes, (chunk, at) => {
    prefix.update(chunk);
    for (const { r, hash } of open) {
      const from = Math.max(r.offset, at);
      const to = Math.min(r.offset + r.length, at + chunk.length);
      if (from >= to) continue;
      hash.update(chunk.subarray(from - at, to - at));
      kept.get(rangeKey(r.offset, r.length))?.set(chunk.subarray(from - at, to - at), from - r.offset);
    }
  });
  const digests = new Map<string, Buffer>();
  for (const { r, hash } of open) digests.set(rangeKey(r.offset, r.length), hash.digest());
  return { prefix, ranges: digests, kept };
}

/** SHA-256 of one range, read in chunks. */
async function hashRange(fh: FileHandle, r: ClaimedRange, chunkBytes: number): Promise<Buffer> {
  const hash = createHash('sha256');
  await eachChunk(fh, r.offset, r.offset + r.length, chunkBytes, (chunk) => hash.update(chunk));
  return hash.digest();
}

/** Hand [start, end) to `use` window by window (file-window.ts); a file that ends first is refused. */
async function eachChunk(
  fh: FileHandle,
  start: number,
  end: number,
  chunkBytes: number,
  use: (chunk: Buffer, at: number) => void,
): Promise<void> {
  const reached = await eachWindow(fh, start, end, use, chunkBytes);
  if (reached < end) throw new Error(`the file shrank while it was read (at ${reached})`);
}

/**
 * The payload ranges the table of the file at `path` claims, read from its head alone (header and
 * table, never a payload byte) and leniently, as claimedRanges reads them: the checks judge them
 * later. Null when the file cannot be opened or read (its verification then refuses it by name).
 */
export async function readClaimedRanges(path: string): Promise<ClaimedRange[] | null> {
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch {
    return null;
  }
  try {
    return claimedRanges(await fileSource(fh, (await fh.stat()).size));
  } catch {
    return null;
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** The bytes [offset, offset + length) of a verified file, read in chunks into one buffer (one payload). */
export async function readFileRange(path: string, offset: number, length: number): Promise<Buffer> {
  const fh = await open(path, 'r');
  try {
    return await readAt(fh, offset, length);
  } finally {
    await fh.close();
  }
}
