// The state of one sweep run, read from its run directory: not started, done (its receipt.json
// binds its trace and its run.json is the planned run: master seed and overrides), resumable (a
// committed checkpoint in its store), or to start again (a directory with no checkpoint: it was
// stopped before its first capture). What `detsim sweep` continues from and `sweep status` shows.
// NOT the running of it (task.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalize, parseStrict, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { storeDirOf } from '../checkpoint/checkpointing.js';
import { checkReceiptBinding, readReceipt } from '../receipt/receipt.js';
import { RUN_FILES } from '../session/run-dir.js';
import { parseStoreManifest, STORE_MANIFEST_FILE } from '../store/store.js';
import type { SweepIndex } from './sweep-dir.js';

type Obj = Record<string, JsonValue>;

export type RunState =
  | { kind: 'pending' }
  | { kind: 'done'; reproHash: string; summary: Obj }
  | { kind: 'resumable'; checkpointId: string; boundary: number; summary: Obj | null }
  | { kind: 'restart'; why: string; summary: Obj | null };

/** One entry of sweep.json's runs. */
export type IndexedRun = SweepIndex['runs'][number];

function readObject(path: string): Obj | null {
  if (!existsSync(path)) return null;
  try {
    const v = parseStrict(readFileSync(path));
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/** A run directory that holds another run than the one planned is refused: continuing would mix runs. */
function checkPlanned(runDir: string, run: IndexedRun, record: Obj): void {
  const overrides = Array.isArray(record.overrides) ? record.overrides : [];
  const set = Object.fromEntries(
    overrides.map((o) => [(o as Obj).path as string, (o as Obj).value]).filter(([p]) => p !== 'masterSeed'),
  );
  // The master seed is held on its own: a grid's masterSeed value is the point's seed, the run's is
  // its replicate's (replicate-seed.ts), which run.json's overrides record.
  const planned = Object.fromEntries(Object.entries(run.overrides).filter(([p]) => p !== 'masterSeed'));
  if (record.masterSeed !== run.masterSeed || canonicalize(set) !== canonicalize(planned))
    throw new DetsimError(
      'struct_sweep_mismatch',
      `${runDir}: holds another run (master seed ${String(record.masterSeed)}, overrides ${canonicalize(set)}) than sweep.json plans (master seed ${run.masterSeed}, overrides ${canonicalize(planned)})`,
      'run.json',
    );
}

/** The newest committed checkpoint of a run's store, or null. */
function lastCheckpoint(runDir: string): { checkpointId: string; boundary: number } | null {
  const path = join(storeDirOf(runDir), STORE_MANIFEST_FILE);
  if (!existsSync(path)) return null;
  try {
    const m = parseStoreManifest(readFileSync(path));
    const g = m.generations.find((x) => x.checkpointId === m.highWater);
    return g ? { checkpointId: g.checkpointId, boundary: Number(g.boundary) } : null;
  } catch {
    return null;
  }
}

/** Run `run`'s state in `runDir`. A done run's receipt binding is checked (a damaged trace is refused, named). */
export function runStateOf(runDir: string, run: IndexedRun): RunState {
  if (!existsSync(runDir)) return { kind: 'pending' };
  const record = readObject(join(runDir, RUN_FILES.run));
  const summary = readObject(join(runDir, RUN_FILES.summary));
  if (record === null) return { kind: 'restart', why: 'it stopped before its workers started', summary };
  checkPlanned(runDir, run, record);
  const receipt = join(runDir, 'receipt.json');
  if (existsSync(receipt) && summary?.status === 'completed' && summary.stepsDone === run.steps) {
    checkReceiptBinding(runDir);
    return { kind: 'done', reproHash: readReceipt(receipt).reproHash ?? '', summary };
  }
  const last = lastCheckpoint(runDir);
  if (last) return { kind: 'resumable', ...last, summary };
  return { kind: 'restart', why: 'it stopped before its first checkpoint', summary };
}
