// The checkpoint flags of `detsim run` (--checkpoint-every K, --keep N) and the lines the run
// prints about its checkpoints. Only argument reading and display; the work is
// coordinator/checkpoint/run-checkpoints.ts.
import { CheckpointRun, DEFAULT_KEEP, type CheckpointRunReport } from '../checkpoint/run-checkpoints.js';
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

/** A CheckpointRun for the flags, or undefined without --checkpoint-every (--keep alone is refused). */
export function checkpointRunFromFlags(every: string | undefined, keep: string | undefined): CheckpointRun | undefined {
  if (every === undefined) {
    if (keep !== undefined)
      throw new DetsimError('struct_invalid_field', '--keep: only meaningful with --checkpoint-every', '--keep');
    return undefined;
  }
  return new CheckpointRun({
    every: positive(every, '--checkpoint-every'),
    keep: keep === undefined ? DEFAULT_KEEP : positive(keep, '--keep'),
    onEvent: (line) => process.stderr.write(`${line}\n`),
  });
}

/** Honest end-of-run lines: how many committed, and each capture that is not durable. */
export function checkpointSummaryLines(r: CheckpointRunReport): string[] {
  const lines = [
    `checkpoints      ${r.committed.length} committed of ${r.captured.length} captured (every ${r.every} steps, keep ${r.keep}, high-water ${r.highWater ?? 'none'})`,
  ];
  for (const n of r.notDurable) lines.push(`not durable      ${n.checkpointId}: ${n.outcome} (${n.reason})`);
  for (const f of r.refused) lines.push(`not taken        boundary ${f.boundary}: [${f.reason}] ${f.message}`);
  return lines;
}
