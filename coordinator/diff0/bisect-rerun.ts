// `detsim bisect`, the re-run: one run's steps of a window again, with fresh workers and a
// checkpoint after every step, so that its state can be compared step by step. From a committed
// checkpoint, the run directory is copied (its files and trace, of its store only that generation)
// into a scratch directory and resumed there (`detsim resume --checkpoint C --steps E
// --checkpoint-every 1`, each capture committed before the next step); without one, the recorded
// composition runs afresh from step 0 (as `detsim replay <run-dir>` does). The run directory itself
// is never written. NOT the comparison (bisect.ts, bisect-states.ts).
import { constants, copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalBytes, parseStrict } from '../../core/formats/canonical-json.js';
import { STORE_DIR } from '../checkpoint/checkpointing.js';
import { resumeRun } from '../checkpoint/resume.js';
import { CheckpointRun } from '../checkpoint/run-checkpoints.js';
import { checkWorkerBinaries } from '../launch/launcher.js';
import { RUN_FILES } from '../session/run-dir.js';
import { RUN_LOCK_FILE } from '../session/run-lock.js';
import { runSession } from '../session/run.js';
import {
  STATE_FORMAT_ID,
  STORE_MANIFEST_FILE,
  STORE_MANIFEST_VERSION,
  type GenerationRecord,
  type StoreManifest,
} from '../store/store.js';
import { TRACE_DIR } from '../trace/trace-store.js';
import { planFromRunRecord } from './replay.js';

/** Files of a run directory the copy leaves out: its lock and its log (the resume writes its own). */
const NOT_COPIED = new Set<string>([RUN_LOCK_FILE, RUN_FILES.log]);

function copyFile(from: string, to: string): void {
  // A reflink where the file system has them, else a copy.
  copyFileSync(from, to, constants.COPYFILE_FICLONE);
}

/**
 * Copy a run directory's files, its trace and one store generation (listed alone) into `dest`; the
 * copy's store gets a token of its own (store-id.ts) when the resume opens it.
 */
function copyForResume(runDir: string, record: GenerationRecord, dest: string): void {
  mkdirSync(join(dest, TRACE_DIR), { recursive: true });
  mkdirSync(join(dest, STORE_DIR));
  for (const e of readdirSync(runDir, { withFileTypes: true }))
    if (e.isFile() && !NOT_COPIED.has(e.name)) copyFile(join(runDir, e.name), join(dest, e.name));
  for (const e of readdirSync(join(runDir, TRACE_DIR), { withFileTypes: true }))
    if (e.isFile()) copyFile(join(runDir, TRACE_DIR, e.name), join(dest, TRACE_DIR, e.name));
  const store = join(runDir, STORE_DIR);
  copyFile(join(store, record.file), join(dest, STORE_DIR, record.file));
  const manifest: StoreManifest = {
    generations: [record],
    highWater: record.checkpointId,
    stateFormatId: STATE_FORMAT_ID,
    storeManifestVersion: STORE_MANIFEST_VERSION,
  };
  writeFileSync(join(dest, STORE_DIR, STORE_MANIFEST_FILE), canonicalBytes(manifest as never));
}

/** Where a re-run from a checkpoint copies the run directory inside its scratch directory. */
export const copyDirOf = (scratch: string): string => join(scratch, 'run');

/** Where one side's window starts: a committed checkpoint of the run, or (null) step 0. */
export interface RerunFrom {
  readonly runDir: string;
  readonly record: GenerationRecord | null;
}

/**
 * Re-run one run's steps up to boundary `end` with a checkpoint committed after every step, into
 * `scratch` (a new directory); returns the run directory whose store holds those checkpoints.
 */
export async function rerunWindow(from: RerunFrom, end: number, scratch: string): Promise<string> {
  if (from.record) {
    const dest = copyDirOf(scratch);
    copyForResume(from.runDir, from.record, dest);
    const start = Number(from.record.boundary);
    await resumeRun(dest, {
      checkpointId: from.record.checkpointId,
      steps: end,
      checkpointEvery: 1,
      keep: end - start + 1,
      settleEachCapture: true,
      modelsBeside: from.runDir,
    });
    return dest;
  }
  const plan = planFromRunRecord(parseStrict(readFileSync(join(from.runDir, RUN_FILES.run))), from.runDir);
  checkWorkerBinaries(plan);
  mkdirSync(scratch, { recursive: true });
  const result = await runSession(plan, {
    outDir: scratch,
    steps: end,
    onWarning: () => undefined,
    extension: new CheckpointRun({ every: 1, keep: end + 1, settleEach: true }),
  });
  return result.runDir;
}
