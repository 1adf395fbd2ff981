// One run of a sweep, run in this process: `detsim sweep task <sweep-dir> <index>` (what each Slurm
// array task and each of the local runner's child processes runs). The run is planned again from
// the sweep file sweep.json names, and must be the plan sweep.json records (the same plan digest);
// then, by its run directory's state (run-state.ts): done → skipped; a committed checkpoint →
// resumed from it; a directory without one → emptied and started again; none → started, with
// checkpoints every `checkpointEvery` steps so an interrupted run can be resumed. NOT the
// scheduling of several runs (runner.ts) and not the session itself (session/run.ts, checkpoint/resume.ts).
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';
import { CheckpointRun } from '../checkpoint/run-checkpoints.js';
import { resumeRun } from '../checkpoint/resume.js';
import type { RunProgress } from '../session/session.js';
import { runSession, type RunResult } from '../session/run.js';
import { withRunLock, RUN_LOCK_FILE } from '../session/run-lock.js';
import { requireSweepIndex, runDirOf, type SweepIndex } from './sweep-dir.js';
import { planSweep, readSweepFile, type SweepPlanned, type SweepRun } from './sweep-file.js';
import { runStateOf, type RunState } from './run-state.js';

export interface TaskOptions {
  onProgress?: (p: RunProgress) => void;
  /** Checkpoint outcomes and other one-line events. */
  onEvent?: (line: string) => void;
  /** Ctrl-C / SIGTERM stop the run like `detsim run` (an interrupted run resumes next time). */
  handleSignals?: boolean;
  /** Abort from outside (the local runner's child: its IPC channel closed). */
  signal?: AbortSignal;
}

export interface TaskOutcome {
  run: SweepRun;
  runDir: string;
  /** What was done: skipped (already done), started, restarted (no checkpoint to resume) or resumed. */
  action: 'skipped' | 'started' | 'restarted' | 'resumed';
  /** The state found before. */
  before: RunState;
  result: RunResult | null;
}

/** The sweep in `sweepDir`, planned again from its sweep file and checked against its sweep.json. */
export function loadSweep(sweepDir: string): { index: SweepIndex; planned: SweepPlanned } {
  const index = requireSweepIndex(sweepDir);
  const planned = planSweep(readSweepFile(index.sweepFile));
  if (planned.planDigest !== index.planDigest)
    throw new DetsimError(
      'struct_sweep_mismatch',
      `${sweepDir}: the sweep file ${index.sweepFile} (or its base config, or a model of its own) changed since this sweep began; run it as a new sweep`,
      'sweep.json',
    );
  return { index, planned };
}

/** Empty a run directory left without a checkpoint, under its lock (a live run holding it is refused). */
async function emptyRunDir(runDir: string): Promise<void> {
  await withRunLock(runDir, 'detsim sweep', async () => {
    for (const name of readdirSync(runDir))
      if (name !== RUN_LOCK_FILE) rmSync(join(runDir, name), { recursive: true, force: true });
  });
}

/** Start `run` in `runDir` (absent or empty) with the sweep's checkpoints. */
function start(run: SweepRun, runDir: string, keep: number, opts: TaskOptions): Promise<RunResult> {
  const extension =
    run.checkpointEvery > 0
      ? new CheckpointRun({ every: run.checkpointEvery, keep, ...(opts.onEvent ? { onEvent: opts.onEvent } : {}) })
      : undefined;
  return runSession(run.plan, {
    runDir,
    ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
    handleSignals: opts.handleSignals === true,
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(extension ? { extension } : {}),
  });
}

/** Run (or resume, or skip) run `index` of the sweep in `sweepDir`. */
export async function runSweepTask(sweepDir: string, index: number, opts: TaskOptions = {}): Promise<TaskOutcome> {
  const { index: idx, planned } = loadSweep(sweepDir);
  const run = planned.runs[index];
  const entry = idx.runs[index];
  if (!run || !entry)
    throw new DetsimError(
      'struct_invalid_field',
      `index ${index}: the sweep has runs 0 to ${planned.runs.length - 1}`,
      'index',
    );
  const runDir = runDirOf(sweepDir, run);
  const before = runStateOf(runDir, entry);
  const outcome = (action: TaskOutcome['action'], result: RunResult | null): TaskOutcome => ({
    run,
    runDir,
    action,
    before,
    result,
  });
  switch (before.kind) {
    case 'done':
      return outcome('skipped', null);
    case 'resumable':
      return outcome(
        'resumed',
        await resumeRun(runDir, {
          ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
          ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
          handleSignals: opts.handleSignals === true,
          ...(opts.signal ? { signal: opts.signal } : {}),
        }),
      );
    case 'restart':
      await emptyRunDir(runDir);
      return outcome('restarted', await start(run, runDir, planned.spec.keep, opts));
    case 'pending':
      return outcome('started', await start(run, runDir, planned.spec.keep, opts));
  }
}
