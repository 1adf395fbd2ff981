// The store confinement of store-files-v1 on the worker side: read a payload's byte range from a
// checkpoint file inside the run's store directory, the one directory the launcher gave this worker
// (`--store-dir`). Every other path is refused, and the refusals are the same for a missing file, a
// file outside the store and an unreadable one, so they reveal nothing about files the worker
// cannot read. A held capture's payload goes the other way: into a checkpoint TEMP file of the same
// store (writeStoreTemp, which hashes what it writes); a committed generation or the store manifest
// is never writable.
// Not the digest check (checks.ts stagedPayload) and not the coordinator's store.
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, open, realpath, stat } from 'node:fs/promises';
import { basename, isAbsolute, relative, sep } from 'node:path';
import { ProtocolRefusal } from '../core/protocol/envelope.js';

export interface PayloadFile {
  path: string;
  offset: bigint;
}

/** Refusal texts, word for word the Rust worker's (crates-bridge/worker/src/payload_file.rs). */
export const PAYLOAD_FILE_REFUSALS = {
  noStore:
    'params.payload.file: this worker was started without --store-dir and reads no payload files (send the payload as an attachment)',
  outside: "params.payload.file.path is not a regular file inside this worker's store directory",
  pastEnd: 'params.payload.file: offset + byteLength run past the end of the payload file',
  unreadable: 'params.payload.file: the payload file cannot be read',
} as const;

/** Refusal texts of State.WritePayload. */
export const CAPTURE_FILE_REFUSALS = {
  noStore: 'params.file: this worker was started without --store-dir and writes no checkpoint files',
  notTemp:
    "params.file.path is not a checkpoint temporary file (tmp-<checkpointId>.flysess) inside this worker's store directory",
  unwritable: 'params.file: the checkpoint temporary file cannot be written',
} as const;

/** The only files State.WritePayload writes: the store's checkpoint temporaries. */
const TEMP_GENERATION = /^tmp-[a-z0-9][a-z0-9._-]{0,63}\.flysess$/;
/** One read() call moves at most this much (a single fs call is capped below 2 GiB). */
const MAX_READ_BYTES = 1024 * 1024 * 1024;

const refuse = (code: 'UNSUPPORTED' | 'INVALID_ARGUMENT' | 'BUFFER_INVALID', message: string): ProtocolRefusal =>
  new ProtocolRefusal(code, message);

/**
 * The `byteLength` bytes at `offset` of `file.path`, which must resolve (symlinks and `..`
 * followed) to a regular file under `storeDir`. The range is checked against the opened file's
 * size before anything is allocated.
 */
export async function readStoreRange(
  storeDir: string | undefined,
  file: PayloadFile,
  byteLength: bigint,
): Promise<Buffer> {
  return withStoreRange(storeDir, file, byteLength, (fh) => readExactly(fh, Number(file.offset), Number(byteLength)));
}

/** Reads of a hashed range move this much at a time: the next read runs while this one is hashed. */
const HASHED_READ_BYTES = 4 * 1024 * 1024;

/**
 * Run `use` on the opened file behind `file.path` (refused unless it resolves to a regular file
 * under `storeDir`), once its size is known to hold `byteLength` bytes at `file.offset`.
 */
export async function withStoreRange<T>(
  storeDir: string | undefined,
  file: PayloadFile,
  byteLength: bigint,
  use: (fh: FileHandle) => Promise<T>,
): Promise<T> {
  if (storeDir === undefined) throw refuse('UNSUPPORTED', PAYLOAD_FILE_REFUSALS.noStore);
  const fh = await openInsideStore(storeDir, file.path, constants.O_RDONLY, PAYLOAD_FILE_REFUSALS.outside);
  try {
    const size = BigInt((await fh.stat()).size);
    if (file.offset + byteLength > size) throw refuse('BUFFER_INVALID', PAYLOAD_FILE_REFUSALS.pastEnd);
    return await use(fh);
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** A destination of a hashed read: fill `into` with the file's bytes at `offset`. */
export interface HashedPiece {
  readonly into: Uint8Array;
  readonly offset: number;
}

/**
 * Fill each piece in turn and hash them all in that order, as one SHA-256 (hex): the next chunk is
 * read while this one is hashed. Refusals as readStoreRange's (a short file, a read error). The
 * digest is for the caller's comparison only; it is never sent back (an oracle on the file's bytes).
 */
export async function readHashed(
  fh: FileHandle,
  pieces: readonly HashedPiece[],
  chunkBytes = HASHED_READ_BYTES,
): Promise<string> {
  const chunks: HashedPiece[] = [];
  for (const { into, offset } of pieces)
    for (let at = 0; at < into.byteLength; at += chunkBytes)
      chunks.push({ into: into.subarray(at, Math.min(into.byteLength, at + chunkBytes)), offset: offset + at });
  const hash = createHash('sha256');
  const readChunk = (i: number): Promise<number> => readFully(fh, chunks[i]!.into, chunks[i]!.offset).then(() => i);
  let pending = chunks.length > 0 ? readChunk(0) : null;
  while (pending) {
    const i = await pending;
    pending = i + 1 < chunks.length ? readChunk(i + 1) : null;
    hash.update(chunks[i]!.into);
  }
  return hash.digest('hex');
}

/** A write moves this much per call: the next slice is hashed while this one is written. */
const HASHED_WRITE_BYTES = 4 * 1024 * 1024;

/**
 * Write `pieces`, one after the other, from `offset` of `path`, which must resolve to an existing regular file under
 * `storeDir` named like a checkpoint temporary (the coordinator created it; nothing else is writable).
 * Returns the SHA-256 of the bytes written: each slice is hashed on this thread while the thread
 * pool writes it, so the hash costs no time beyond the write's own.
 */
export async function writeStoreTemp(
  storeDir: string | undefined,
  path: string,
  offset: bigint,
  pieces: readonly Uint8Array[],
): Promise<string> {
  if (storeDir === undefined) throw refuse('UNSUPPORTED', CAPTURE_FILE_REFUSALS.noStore);
  if (!TEMP_GENERATION.test(basename(path))) throw refuse('INVALID_ARGUMENT', CAPTURE_FILE_REFUSALS.notTemp);
  const fh = await openInsideStore(storeDir, path, constants.O_WRONLY, CAPTURE_FILE_REFUSALS.notTemp);
  try {
    // The resolved name must still be a temporary (a symlink named tmp-* could point elsewhere in the store).
    // A path gone since the open gets the same refusal (never an INTERNAL error naming the file).
    const real = await realpath(path).catch(() => null);
    if (real === null || !TEMP_GENERATION.test(basename(real)))
      throw refuse('INVALID_ARGUMENT', CAPTURE_FILE_REFUSALS.notTemp);
    const hash = createHash('sha256');
    let position = Number(offset);
    for (const bytes of pieces) {
      for (let at = 0; at < bytes.byteLength; at += HASHED_WRITE_BYTES) {
        const part = bytes.subarray(at, Math.min(bytes.byteLength, at + HASHED_WRITE_BYTES));
        const writing = writeAll(fh, part, position + at);
        hash.update(part);
        if (!(await writing)) throw refuse('BUFFER_INVALID', CAPTURE_FILE_REFUSALS.unwritable);
      }
      position += bytes.byteLength;
    }
    return hash.digest('hex');
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** Write all of `bytes` at `position`; false when the file refuses (any error, or no progress). */
async function writeAll(fh: FileHandle, bytes: Uint8Array, position: number): Promise<boolean> {
  for (let at = 0; at < bytes.byteLength;) {
    const wrote = await fh.write(bytes, at, bytes.byteLength - at, position + at).then(
      (r) => r.bytesWritten,
      () => -1,
    );
    if (wrote <= 0) return false;
    at += wrote;
  }
  return true;
}

/** Open the real file behind `path` only if it lies under the store and is a regular file. */
async function openInsideStore(storeDir: string, path: string, mode: number, refusal: string): Promise<FileHandle> {
  const outside = (): ProtocolRefusal => refuse('INVALID_ARGUMENT', refusal);
  const root = await realpath(storeDir).catch(() => null);
  const real = await realpath(path).catch(() => null);
  if (root === null || real === null || !isUnder(root, real)) throw outside();
  // O_NOFOLLOW: the resolved path has no symlink left; O_NONBLOCK: a FIFO cannot stall the open.
  const fh = await open(real, mode | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (fh === null) throw outside();
  try {
    // The path may have been swapped between realpath and open: the opened file must be the
    // very file (device and inode) the path still resolves to under the store.
    const opened = await fh.stat();
    const again = await realpath(path).catch(() => null);
    const there = again !== null && isUnder(root, again) ? await stat(again).catch(() => null) : null;
    if (!opened.isFile() || there === null || there.dev !== opened.dev || there.ino !== opened.ino) throw outside();
    return fh;
  } catch (e) {
    await fh.close().catch(() => undefined);
    throw e;
  }
}

function isUnder(root: string, real: string): boolean {
  const rel = relative(root, real);
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
}

export function allocate(length: number): Buffer {
  try {
    return Buffer.allocUnsafe(length);
  } catch {
    throw refuse('BUFFER_INVALID', PAYLOAD_FILE_REFUSALS.unreadable);
  }
}

function readExactly(fh: FileHandle, offset: number, length: number): Promise<Buffer> {
  return readFully(fh, allocate(length), offset);
}

/** Fill `out` from `offset` of the file; a short file or a read error is refused without naming a size. */
async function readFully<B extends Uint8Array>(fh: FileHandle, out: B, offset: number): Promise<B> {
  const length = out.length;
  let at = 0;
  while (at < length) {
    // One read() moves at most MAX_READ_BYTES (a single fs call stops below 2 GiB).
    const got = await fh.read(out, at, Math.min(length - at, MAX_READ_BYTES), offset + at).then(
      (r) => r.bytesRead,
      () => -1,
    );
    // 0: the file shrank after its size was checked; -1: a read error. Neither names a size.
    if (got <= 0)
      throw refuse('BUFFER_INVALID', got === 0 ? PAYLOAD_FILE_REFUSALS.pastEnd : PAYLOAD_FILE_REFUSALS.unreadable);
    at += got;
  }
  return out;
}
