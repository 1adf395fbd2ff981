// The store id file (docs/spec/capture-file.md, "Which workers are co-located"): the coordinator
// keeps a random token in `<store>/store-id` and starts each worker process with `--store-dir
// <store> --store-id <token>`; a worker takes the directory as the coordinator's store, and offers
// store-files-v1, only if the directory holds that very token. The TypeScript, Python and Rust
// workers read it alike. Physical: the token never enters a hash.
// NOT the coordinator's writing of the token (coordinator/store/store-id.ts), NOT authentication.
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';

/** The file in the store directory that holds the token. */
export const STORE_ID_FILE = 'store-id';

/** A token: 32 lowercase hex digits (128 random bits), the whole content of the file. */
export const STORE_ID_PATTERN = /^[0-9a-f]{32}$/;

/**
 * The token `<storeDir>/store-id` holds, or null: the file must be a regular file (opened without
 * following a symlink, and non-blocking) whose whole content is a token. Every failure (missing, a
 * symlink, a FIFO, unreadable, not a token) is null, and says nothing about what was found there.
 */
export function readStoreId(storeDir: string): string | null {
  let fd: number;
  try {
    // O_NOFOLLOW: the token must be in this directory; O_NONBLOCK: a FIFO cannot stall start-up.
    fd = openSync(join(storeDir, STORE_ID_FILE), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    if (!fstatSync(fd).isFile()) return null;
    const buf = Buffer.alloc(64);
    const text = buf.toString('latin1', 0, readSync(fd, buf, 0, buf.length, 0));
    return STORE_ID_PATTERN.test(text) ? text : null;
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

/** Whether `<storeDir>/store-id` holds exactly `token` (the worker's check; see readStoreId). */
export function storeHoldsId(storeDir: string, token: string): boolean {
  return readStoreId(storeDir) === token;
}
