// payload-file-v1 on the worker side: read a payload's byte range from a checkpoint file inside
// the run's store directory, the one directory the launcher gave this worker (`--store-dir`).
// Every other path is refused, and the refusals are the same for a missing file, a file outside
// the store and an unreadable one, so they reveal nothing about files the worker cannot read.
// Not the digest check (checks.ts stagedPayload) and not the coordinator's store.
import { constants } from 'node:fs';
import { type FileHandle, open, realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, sep } from 'node:path';
import { ProtocolRefusal } from '../core/protocol/index.js';

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
  if (storeDir === undefined) throw refuse('UNSUPPORTED', PAYLOAD_FILE_REFUSALS.noStore);
  const fh = await openInsideStore(storeDir, file.path);
  try {
    const size = BigInt((await fh.stat()).size);
    if (file.offset + byteLength > size) throw refuse('BUFFER_INVALID', PAYLOAD_FILE_REFUSALS.pastEnd);
    return await readExactly(fh, Number(file.offset), Number(byteLength));
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** Open the real file behind `path` only if it lies under the store and is a regular file. */
async function openInsideStore(storeDir: string, path: string): Promise<FileHandle> {
  const outside = (): ProtocolRefusal => refuse('INVALID_ARGUMENT', PAYLOAD_FILE_REFUSALS.outside);
  const root = await realpath(storeDir).catch(() => null);
  const real = await realpath(path).catch(() => null);
  if (root === null || real === null || !isUnder(root, real)) throw outside();
  // O_NOFOLLOW: the resolved path has no symlink left; O_NONBLOCK: a FIFO cannot stall the open.
  const fh = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
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

async function readExactly(fh: FileHandle, offset: number, length: number): Promise<Buffer> {
  let out: Buffer;
  try {
    out = Buffer.allocUnsafe(length);
  } catch {
    throw refuse('BUFFER_INVALID', PAYLOAD_FILE_REFUSALS.unreadable);
  }
  let at = 0;
  while (at < length) {
    const got = await fh.read(out, at, length - at, offset + at).then(
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
