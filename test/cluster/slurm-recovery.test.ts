// Recovery from a lost worker under the Slurm launcher (issue 15 §3): a run submitted with
// `detsim slurm submit … --checkpoint-every 3 --max-restarts 1` whose fault-once agent worker, an
// srun job step, SIGKILLs its own process at step 7 (once: the replacement finds the marker). The
// coordinator in the batch step sees the step end, restores the last committed checkpoint with
// replacement srun steps, and the run completes with the ReproHash of the same config run
// uninterrupted. Skips, saying why, when no Slurm node is idle (as slurm.test.ts does).
// NOT the local or thread recovery cases (test/checkpoint/recovery.test.ts), nor a multi-node run.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FAULT_CONFIG, fault, referenceHash } from '../checkpoint/fault-once-harness.js';
import { jobListed, readJson, slurmDownReason, submit, until } from './slurm-harness.js';

const down = slurmDownReason();
if (down) process.stderr.write(`test/cluster/slurm-recovery.test.ts: Slurm case skipped: ${down}\n`);

/** Lines of the run log that say a worker started as an srun job step. */
function srunStarts(runDir: string): number {
  return readFileSync(join(runDir, 'run.log'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('worker starts as an srun job step')).length;
}

describe.skipIf(down !== null)('recovery under the Slurm launcher', { timeout: 150_000 }, () => {
  it('[STORE-21, STORE-24] an srun step whose worker is SIGKILLed at step 7 is replaced: the run completes, 1 recovery, the uninterrupted ReproHash', async () => {
    const f = fault({ faultStep: 7, mode: 'kill' });
    // The job's workers run the built CLI's worker; --import tsx lets them load the .ts fixture model.
    const env = { ...process.env, ...f.env, DETSIM_WORKER_NODE_ARGS: '--import tsx' };
    const flags = ['--checkpoint-every', '3', '--max-restarts', '1', '--time=5'];
    const jobId = submit(FAULT_CONFIG, f.out, flags, env);
    const reference = referenceHash();
    await until(`job ${jobId} to finish`, () => !jobListed(jobId));
    const output = readFileSync(join(f.out, `slurm-${jobId}.out`), 'utf8');
    const runDir = join(f.out, 'recover-1');
    expect(existsSync(f.marker), output).toBe(true);
    expect(output).toMatch(/^recovered: worker worker-1 worker-exited at step 7; restored ckpt-e1-6 /m);
    const summary = readJson(join(runDir, 'summary.json')) as Record<string, any>;
    expect([summary.status, summary.recoveries], output).toEqual(['completed', 1]);
    expect(summary.recovery.recovered).toMatchObject([{ workerId: 'worker-1', step: '7', epoch: 'e2' }]);
    expect(output).toContain(`repro hash       ${await reference}`);
    // The replacements were srun steps too, not local processes: more starts than the 3 workers.
    expect(srunStarts(runDir)).toBeGreaterThan(3);
  });
});
