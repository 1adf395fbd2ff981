// The checkpoint flags of `detsim run` (--checkpoint-every K, --keep N, --max-restarts N) and the lines the run
// prints about its checkpoints. Only argument reading and display; the work is
// coordinator/checkpoint/run-checkpoints.ts.
import { CheckpointRun, DEFAULT_KEEP, type CheckpointRunReport } from '../checkpoint/run-checkpoints.js';
import { recoveryWith, type RecoveryFactory } from '../checkpoint/recovery.js';
import type { RunPlan } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';

function positive(text: string, flag: string): number {
  if (!/^[1-9][0-9]{0,8}$/.test(text))
    throw new DetsimError(
      'struct_invalid_field',
      `${flag}: ${JSON.stringify(text)} is not a positive whole number`,
      flag,
    );
  return Number(text);
}

/**
 * A CheckpointRun for the flags, or undefined without --checkpoint-every (--keep alone is refused,
 * and so is --max-restarts N > 0: a recovery returns to a committed checkpoint).
 */
export function checkpointRunFromFlags(
  every: string | undefined,
  keep: string | undefined,
  maxRestarts?: string,
  configured?: RunPlan['recovery'],
  wait = false,
): CheckpointRun | undefined {
  // The flag overrides the config's recovery.maxRestarts; the refusal names whichever asked.
  const restarts = maxRestarts === undefined ? (configured?.maxRestarts ?? 0) : readMaxRestarts(maxRestarts);
  if (every === undefined) {
    if (keep !== undefined)
      throw new DetsimError('struct_invalid_field', '--keep: only meaningful with --checkpoint-every', '--keep');
    if (wait)
      throw new DetsimError(
        'struct_invalid_field',
        '--checkpoint-wait: only meaningful with --checkpoint-every',
        '--checkpoint-wait',
      );
    if (restarts > 0) {
      const field = maxRestarts === undefined ? 'recovery.maxRestarts' : '--max-restarts';
      throw new DetsimError(
        'struct_invalid_field',
        `${field}: a recovery returns to the last committed checkpoint; add --checkpoint-every K`,
        field,
      );
    }
    return undefined;
  }
  const run = new CheckpointRun({
    every: positive(every, '--checkpoint-every'),
    keep: keep === undefined ? DEFAULT_KEEP : positive(keep, '--keep'),
    onEvent: printEvent,
    ...(wait ? { settleEach: true } : {}),
  });
  if (restarts > 0) run.recovery = recoveryWith({ maxRestarts: restarts, onEvent: printEvent })(run);
  return run;
}

function printEvent(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** `--max-restarts N` (default 0: a lost worker fails the run): a whole number. */
export function readMaxRestarts(text: string | undefined): number {
  if (text === undefined) return 0;
  if (!/^(0|[1-9][0-9]{0,8})$/.test(text))
    throw new DetsimError(
      'struct_invalid_field',
      `--max-restarts: ${JSON.stringify(text)} is not a whole number`,
      '--max-restarts',
    );
  return Number(text);
}

/** The resume option for `--max-restarts N`, or nothing for 0. */
export function recoverFromFlag(text: string | undefined): { recover?: RecoveryFactory } {
  const maxRestarts = readMaxRestarts(text);
  return maxRestarts > 0 ? { recover: recoveryWith({ maxRestarts, onEvent: printEvent }) } : {};
}

export const MAX_RESTARTS_HELP =
  'on a lost worker (died, stalled past its deadline), restore the last committed checkpoint with ' +
  'replacement workers up to N times (default 0: the run fails)';

/** Honest end-of-run lines: how many committed, and each capture that is not durable. */
export function checkpointSummaryLines(r: CheckpointRunReport): string[] {
  const lines = [
    `checkpoints      ${r.committed.length} committed of ${r.captured.length} captured (every ${r.every} steps, keep ${r.keep}, high-water ${r.highWater ?? 'none'})`,
  ];
  for (const n of r.notDurable) lines.push(`not durable      ${n.checkpointId}: ${n.outcome} (${n.reason})`);
  for (const f of r.refused) lines.push(`not taken        boundary ${f.boundary}: [${f.reason}] ${f.message}`);
  return lines;
}
