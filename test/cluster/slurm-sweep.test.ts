// `detsim sweep submit` against the real single-node Slurm that scripts/slurm-up.sh brings up: a
// sweep of 4 runs submitted as one job array (one task per run, each `detsim sweep task` with local
// workers in its allocation) gives the same runs — every ReproHash — as the same sweep run locally;
// submitting it again has nothing to do, and after a run is lost only that run is submitted. Without
// a cluster: --dry-run prints the array script and writes nothing; sbatch missing is one line, exit 2.
// The Slurm case skips, saying why, only when no Slurm node is idle here (test-summary then fails CI).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expectCliRefusal } from '../cli-refusal.js';
import { detsim, jobListed, readJson, slurmDownReason, until } from './slurm-harness.js';

const BASE = `sessionId: sweep-slurm
masterSeed: "11"
steps: 200
stepHz: 60
environment:
  id: forage
  model: forage
  params: { width: 12, height: 12, food: 6 }
agents:
  count: 2
  prefix: w-
  model: walker
workers:
  agentsPerWorker: 2
  transport: thread
`;
const SWEEP = `name: arr
base: base.yaml
replicates: 2
grid:
  environment.params.food: [4, 8]
`;

const work = mkdtempSync(join(tmpdir(), 'detsim-slurm-sweep-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
writeFileSync(join(work, 'base.yaml'), BASE);
writeFileSync(join(work, 'arr.yaml'), SWEEP);
const FILE = join(work, 'arr.yaml');

const down = slurmDownReason();
if (down) process.stderr.write(`test/cluster/slurm-sweep.test.ts: Slurm case skipped: ${down}\n`);

function reproHashes(sweepDir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of readdirSync(sweepDir).sort())
    if (existsSync(join(sweepDir, n, 'receipt.json')))
      out[n] = readJson(join(sweepDir, n, 'receipt.json')).reproHash as string;
  return out;
}

describe.skipIf(down !== null)('detsim sweep submit on the local Slurm', { timeout: 300_000 }, () => {
  it('a job array of 4 runs gives the runs a local sweep gives; submitted again it has nothing to do, and a lost run alone is resubmitted', async () => {
    const out = join(work, 'cluster');
    const r = detsim(['sweep', 'submit', FILE, '--out', out, '--parallel', '2', '--time=5']);
    expect(r.status, r.stderr).toBe(0);
    const jobId = /^submitted job +([0-9]+) \(4 array tasks\)$/m.exec(r.stdout)?.[1];
    expect(jobId, r.stdout).toBeDefined();
    const sweepDir = join(out, 'arr-1');
    expect(readFileSync(join(sweepDir, 'slurm', 'sweep.sbatch'), 'utf8')).toContain('#SBATCH --array=0-3%2\n');
    await until(`job array ${jobId} to finish`, () => !jobListed(jobId!), 240_000);
    const got = reproHashes(sweepDir);
    const logs = readdirSync(join(sweepDir, 'slurm')).filter((n) => n.endsWith('.out'));
    expect(Object.keys(got), logs.map((l) => readFileSync(join(sweepDir, 'slurm', l), 'utf8')).join('\n')).toHaveLength(
      4,
    );
    expect(logs.sort()).toEqual([0, 1, 2, 3].map((i) => `${jobId}_${i}.out`));

    const local = join(work, 'local');
    const l = detsim(['sweep', FILE, '--out', local, '--parallel', '2']);
    expect(l.status, l.stderr).toBe(0);
    expect(got).toEqual(reproHashes(join(local, 'arr-1')));

    const again = detsim(['sweep', 'submit', FILE, '--out', out]);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe(`sweep ${sweepDir}: all 4 runs are done; nothing to submit`);

    rmSync(join(sweepDir, Object.keys(got)[2]!), { recursive: true });
    const dry = detsim(['sweep', 'submit', FILE, '--out', out, '--dry-run']);
    expect(dry.status, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('#SBATCH --array=2\n');
    expect(dry.stdout).toContain(`sweep task ${sweepDir} "$SLURM_ARRAY_TASK_ID"`);
  });
});

describe('sweep submit without a cluster', () => {
  it('--dry-run prints the job array script (one task per run, the limit, the task command) and writes nothing', () => {
    const out = join(work, 'dry');
    const r = detsim(['sweep', 'submit', FILE, '--out', out, '--parallel', '3', '--dry-run'], {
      ...process.env,
      PATH: work,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('#SBATCH --array=0-3%3\n');
    expect(r.stdout).toContain(`#SBATCH --output=${join(out, 'arr-1', 'slurm', '%A_%a.out')}\n`);
    expect(r.stdout).toMatch(/^exec \S+ --v8-pool-size=0 \S+main\.js sweep task \S+arr-1 "\$SLURM_ARRAY_TASK_ID"$/m);
    expect(existsSync(out)).toBe(false);
  });

  it('sbatch missing from PATH: one named line, exit 2, no sweep directory', () => {
    const out = join(work, 'no-sbatch');
    const r = detsim(['sweep', 'submit', FILE, '--out', out], { ...process.env, PATH: work });
    expectCliRefusal(r, 'perm_slurm_command_missing', 'sbatch: not found on PATH');
    expect(existsSync(out)).toBe(false);
    expect(spawnSync('ls', [work]).stdout.toString()).not.toContain('no-sbatch');
  });
});
