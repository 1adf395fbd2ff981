// Opening the checkpoint machinery of a run directory: the STATE-01 store in `<runDir>/store/`, the
// writer queue in front of it and the hash-chained `<runDir>/ledger.jsonl`, with writer events
// wired into the ledger. NOT capture/restore, and it never decides when to checkpoint.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { lockAlongsideRun } from '../session/run-lock.js';
import type { DurableFs } from '../store/durable-fs.js';
import { ledgerEventOfWriter, Ledger } from '../store/ledger.js';
import { CheckpointStore } from '../store/store.js';
import { CheckpointWriter } from '../store/writer.js';

export const STORE_DIR = 'store';

export interface Checkpointing {
  store: CheckpointStore;
  writer: CheckpointWriter;
  ledger: Ledger;
}

export interface CheckpointingOptions {
  keep?: number;
  capacity?: number;
  maxQueuedBytes?: number;
  /** The store's file layer (tests inject ENOSPC/EIO through its hooks). */
  fs?: DurableFs;
}

export function storeDirOf(runDir: string): string {
  return join(runDir, STORE_DIR);
}

/** A run directory's store as it is, for reading; null when the run committed none (no manifest). */
export async function committedStore(runDir: string): Promise<CheckpointStore | null> {
  const dir = storeDirOf(runDir);
  return existsSync(join(dir, 'manifest.json')) ? CheckpointStore.open(dir) : null;
}

export async function openCheckpointing(runDir: string, opts: CheckpointingOptions = {}): Promise<Checkpointing> {
  const ledger = await Ledger.open(runDir);
  const store = await CheckpointStore.open(storeDirOf(runDir), {
    create: true,
    ...(opts.keep !== undefined ? { keep: opts.keep } : {}),
    ...(opts.fs ? { fs: opts.fs } : {}),
  });
  // The store is locked in itself for as long as the run's lock is held (gc through any path meets it).
  lockAlongsideRun(runDir, store.dir);
  const writer = new CheckpointWriter(store, {
    ...(opts.capacity !== undefined ? { capacity: opts.capacity } : {}),
    ...(opts.maxQueuedBytes !== undefined ? { maxQueuedBytes: opts.maxQueuedBytes } : {}),
    onEvent: (e) => ledger.append(ledgerEventOfWriter(e)).then(() => undefined),
  });
  return { store, writer, ledger };
}
