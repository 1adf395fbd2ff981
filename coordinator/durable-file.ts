// Durable replacement of one small file: temp file beside it → write → fsync → rename over the
// target → fsync the directory, so a reader sees the old file or the whole new one, never half.
// NOT the checkpoint store's file layer (store/durable-fs.ts, with fault injection and streaming).
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

/** fsync a directory (opened read-only), so a rename inside it survives a crash. */
export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, bytes: Uint8Array): void {
  let off = 0;
  while (off < bytes.byteLength) off += writeSync(fd, bytes, off, bytes.byteLength - off);
}

/**
 * Replace `path` durably with `data` (text, or byte parts written in order). The temporary is
 * `tmp-<name>` in the same directory; on failure it is removed and the old file is untouched.
 */
export function writeFileDurable(path: string, data: string | readonly Uint8Array[]): void {
  const dir = dirname(resolve(path));
  const tmp = join(dir, `tmp-${basename(path)}`);
  const fd = openSync(tmp, 'w');
  try {
    if (typeof data === 'string') writeAll(fd, Buffer.from(data, 'utf8'));
    else for (const part of data) writeAll(fd, part);
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  closeSync(fd);
  renameSync(tmp, path);
  fsyncDir(dir);
}
