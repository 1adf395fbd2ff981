// Making the store id: the random token in `<store>/store-id` that the launcher hands each worker
// process it starts with `--store-dir`, as `--store-id` (the file and the workers' check:
// core/protocol/store-id.ts). A worker uses the store's file paths (capture-file, payload-file,
// restore-prefetch) only if the directory it was given holds that very token, so a worker on
// another node, where the store's path names another directory or nothing, gets its payloads
// streamed as attachments instead of failing every checkpoint on a path it cannot see.
// NOT the store manifest, and NOT authentication (TLS and the bearer token are that).
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { readStoreId, STORE_ID_FILE } from '../../core/protocol/store-id.js';
import { fsyncDir, writeFileDurable } from '../durable-file.js';

/**
 * The store's token, made (with the directory) the first time: a store keeps one token for its
 * life, so a resumed run's workers are given the same one. A file that does not hold a token (torn,
 * edited) is replaced by a new one.
 */
export function ensureStoreId(storeDir: string): string {
  const made = mkdirSync(storeDir, { recursive: true });
  if (made !== undefined) fsyncDir(dirname(made));
  const existing = readStoreId(storeDir);
  if (existing !== null) return existing;
  const token = randomBytes(16).toString('hex');
  writeFileDurable(join(storeDir, STORE_ID_FILE), token);
  return token;
}
