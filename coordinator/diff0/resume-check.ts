// The resume check of `detsim replay --resume-at K`: an uninterrupted run, and a run checkpointed
// at K, interrupted once that checkpoint is durable, then resumed (fresh workers, new epoch) to the
// same step count; after rebasing exactly the epoch-derived fields (EpochRebase) both must have
// the same ReproHash. The capture/restore machinery is coordinator/checkpoint (not here).
import { mkdirSync } from 'node:fs';
import { checkpointIdFor } from '../checkpoint/capture.js';
import { resumeRun } from '../checkpoint/resume.js';
import { CheckpointRun } from '../checkpoint/run-checkpoints.js';
import type { RunPlan } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import { epochId } from '../session/lockstep.js';
import { isRunFailure } from '../session/run-failure.js';
import { runSession } from '../session/run.js';
import type { CanonicalOptions } from '../receipt/canonical.js';
import { type Divergence, describeDivergence, diagnoseViews } from './diagnosis.js';
import { type Check, makeCheck } from './check.js';
import { hashView, runReceiptView } from '../receipt/receipt-view.js';

export interface ResumeCheckResult {
  readonly check: Check;
  readonly uninterruptedDir: string;
  readonly resumedDir: string;
  readonly checkpointId: string;
  readonly divergence: Divergence | null;
}

/** How long to wait for the checkpoint at K to become durable before interrupting anyway. */
const COMMIT_WAIT_MS = 60_000;

export { rebasedReceipt } from '../receipt/rebase.js';

/** Run uninterrupted and interrupted-at-K-then-resumed, and compare their (rebased) ReproHashes. */
export async function resumeCheck(
  plan: RunPlan,
  k: number,
  opts: { outDir?: string; steps?: number; canonical?: CanonicalOptions; verbose?: boolean } = {},
): Promise<ResumeCheckResult> {
  const n = opts.steps ?? plan.steps;
  if (!Number.isInteger(k) || k < 1 || k + 1 >= n)
    throw new DetsimError(
      'struct_invalid_field',
      `--resume-at: ${k} must be ≥ 1 and leave at least 2 steps after it (run has ${n} steps)`,
      '--resume-at',
    );
  const outDir = opts.outDir ?? 'runs';
  mkdirSync(outDir, { recursive: true });
  const silent = () => undefined;
  // `--verbose` reaches every run of the check (a Python model's failure then carries its traceback).
  const verbose = opts.verbose === true;
  const plain = await runSession(plan, { outDir, steps: n, dispatch: 'concurrent', onWarning: silent, verbose });
  // Each run and the resume write their receipt.json as their last act (the session loop); the
  // receipts are read back from the traces they bind (the binding checked), rebased, in flat memory.
  const u = runReceiptView(plain.runDir);

  const checkpointId = checkpointIdFor(epochId(1), k);
  const interruptedDir = await interruptedAt(plan, k, { outDir, steps: n, verbose });
  if (interruptedDir === undefined) {
    const check = makeCheck('resume', plan.sessionId, 'fail', 'audit_run_failed', {
      resumeAt: k,
      steps: n,
      problem: 'the run was not interrupted',
    });
    return { check, uninterruptedDir: plain.runDir, resumedDir: '', checkpointId, divergence: null };
  }
  const resumed = await resumeRun(interruptedDir, { checkpointId, steps: n, logLevel: 'warn', verbose });
  const r = runReceiptView(resumed.runDir);
  const hu = hashView(u, opts.canonical).reproHash;
  const hr = hashView(r, opts.canonical).reproHash;
  const divergence = hu === hr ? null : diagnoseViews(u, r, opts.canonical);
  const check =
    divergence === null && hu === hr
      ? makeCheck(
          'resume',
          plan.sessionId,
          'pass',
          'audit_replay_stable',
          { resumeAt: k, steps: n, checkpointId, reproHash: hu },
          { uninterrupted: plain.runDir, resumed: interruptedDir },
        )
      : makeCheck(
          'resume',
          plan.sessionId,
          'fail',
          'audit_repro_hash_mismatch',
          {
            resumeAt: k,
            steps: n,
            checkpointId,
            reproHashes: [hu, hr],
            diagnosis: divergence ? describeDivergence(divergence, ['uninterrupted', 'resumed']) : 'hashes differ',
          },
          { uninterrupted: plain.runDir, resumed: interruptedDir },
        );
  return { check, uninterruptedDir: plain.runDir, resumedDir: interruptedDir, checkpointId, divergence };
}

/**
 * The interrupted run: checkpoint every K steps; before step K+1 runs, wait for ckpt-e1-K to be
 * durable, then interrupt. Its run directory, or undefined when it was not interrupted.
 */
async function interruptedAt(
  plan: RunPlan,
  k: number,
  opts: { outDir: string; steps: number; verbose: boolean },
): Promise<string | undefined> {
  const checkpointId = checkpointIdFor(epochId(1), k);
  let committed!: () => void;
  const isCommitted = new Promise<void>((res) => (committed = res));
  const controller = new AbortController();
  const extension = new CheckpointRun({
    every: k,
    keep: 3,
    onEvent: (line) => (line.startsWith(`checkpoint ${checkpointId} committed`) ? committed() : undefined),
  });
  try {
    await runSession(plan, {
      outDir: opts.outDir,
      steps: opts.steps,
      dispatch: 'concurrent',
      onWarning: () => undefined,
      verbose: opts.verbose,
      signal: controller.signal,
      extension,
      hooks: {
        beforePhase: async (step, phase) => {
          if (step !== BigInt(k + 1) || phase !== 'prepare' || controller.signal.aborted) return;
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([isCommitted, new Promise((res) => (timer = setTimeout(res, COMMIT_WAIT_MS)))]);
          clearTimeout(timer); // a pending timer would keep the process alive for a minute
          controller.abort();
        },
      },
    });
  } catch (e) {
    if (!(isRunFailure(e) && e.kind === 'aborted')) throw e;
    return e.runDir;
  }
  return undefined;
}
