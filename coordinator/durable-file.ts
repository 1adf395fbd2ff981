// Durable replacement of small files: temp file beside it → write → fsync → rename over the
// target → fsync the directory, so a reader sees the old file or the whole new one, never half.
// Two steps when several files must change together (resume's trace cut): stage every temp file
// first (the step that can run out of space), then publish them all with renames only. Every
// failure leaves as a WriteFailure naming the file (write-failure.ts).
// NOT the checkpoint store's file layer (store/durable-fs.ts, with fault injection and streaming).
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { guardWrite } from './write-failure.js';

/** fsync a directory (opened read-only), so a rename inside it survives a crash. */
export function fsyncDir(dir: string): void {
  guardWrite(dir, () => {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  });
}

/** Write every byte (a short write is continued, not dropped). */
export function writeAll(fd: number, bytes: Uint8Array): void {
  let off = 0;
  while (off < bytes.byteLength) off += writeSync(fd, bytes, off, bytes.byteLength - off);
}

/** A fully written and fsynced temp file, not yet in place. */
export interface StagedFile {
  readonly path: string;
  readonly tmp: string;
}

/** The temporary beside `path`: `tmp-<name>` in the same directory. */
export function tempPathOf(path: string): string {
  return join(dirname(resolve(path)), `tmp-${basename(path)}`);
}

/**
 * Step 1: write `data` (text, or byte parts in order) to the temp file beside `path` and fsync it.
 * On failure the temp file is removed, `path` is untouched, and a WriteFailure names the file.
 */
export function stageFileDurable(path: string, data: string | readonly Uint8Array[]): StagedFile {
  const tmp = tempPathOf(path);
  guardWrite(path, () => {
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
  });
  return { path, tmp };
}

/** Step 2: rename every staged file over its target (no new space needed), then fsync each directory once. */
export function publishStaged(files: readonly StagedFile[]): void {
  for (const f of files) guardWrite(f.path, () => renameSync(f.tmp, f.path));
  for (const dir of [...new Set(files.map((f) => dirname(resolve(f.path))))].sort()) fsyncDir(dir);
}

/** Drop staged files that will not be published (best effort: they are temporaries). */
export function discardStaged(files: readonly StagedFile[]): void {
  for (const f of files) rmSync(f.tmp, { force: true });
}

/**
 * Replace `path` durably with `data` (text, or byte parts written in order). The temporary is
 * `tmp-<name>` in the same directory; on failure it is removed and the old file is untouched.
 */
export function writeFileDurable(path: string, data: string | readonly Uint8Array[]): void {
  publishStaged([stageFileDurable(path, data)]);
}
