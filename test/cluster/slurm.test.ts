// `launcher: slurm` and `detsim slurm submit` against the real single-node Slurm that
// scripts/slurm-up.sh brings up (CI runs it before npm test): a submitted forage-walkers run
// reproduces its golden ReproHash with every worker an srun job step (squeue -s lists them while the
// run lives); `scancel` ends a run like
// Ctrl-C (summary.json aborted, the checkpoint store verifies); sbatch refusing a job or missing
// from PATH, and launcher: slurm outside an allocation, are one-line refusals that leave nothing; a
// local run on threads resumes inside an allocation on srun job steps.
// The Slurm cases skip, saying why, only when no Slurm node is idle here (test-summary then fails CI).
// NOT a test of Slurm itself, nor of multi-node placement (single node: Unix sockets under /tmp).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expectCliRefusal } from '../cli-refusal.js';
import { detsim, jobListed, readJson, slurmDownReason, submit, until } from './slurm-harness.js';
import { exampleWithWorkers } from '../example-config.js';
import { CLI_MAIN } from '../cli-refusal.js';
import { stepsOnDisk } from '../trace-read.js';

const GOLDEN = JSON.parse(readFileSync('fixtures/golden/forage-walkers.json', 'utf8')) as {
  reproHash: string;
  steps: number;
};
const work = mkdtempSync(join(tmpdir(), 'detsim-slurm-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
/** The example with 4 agent workers: 5 srun job steps. */
const CONFIG = exampleWithWorkers(work, ['agentsPerWorker: 4']);

const down = slurmDownReason();
if (down) process.stderr.write(`test/cluster/slurm.test.ts: Slurm cases skipped: ${down}\n`);

// A job's start-up competes with everything else on a shared 2-core machine: generous limits, short when idle.
describe.skipIf(down !== null)('detsim slurm submit on the local Slurm', { timeout: 150_000 }, () => {
  it('a submitted forage-walkers run, every worker an srun job step, reproduces the golden ReproHash', async () => {
    const out = join(work, 'golden');
    const jobId = submit(CONFIG, out, ['--steps', String(GOLDEN.steps), '--time=5']);
    const runDir = join(out, 'forage-walkers-1');
    await until(`job ${jobId} to finish`, () => !jobListed(jobId));
    const output = readFileSync(join(out, `slurm-${jobId}.out`), 'utf8');
    expect(existsSync(join(runDir, 'receipt.json')), output).toBe(true);
    expect(output).toContain(`repro hash       ${GOLDEN.reproHash}`);
    expect(readJson(join(runDir, 'summary.json')).status).toBe('completed');
    // Each of the 5 workers (environment + 4 agent workers) was started as an srun job step.
    const steps = readFileSync(join(runDir, 'run.log'), 'utf8')
      .split('\n')
      .filter((l) => l.includes('worker starts as an srun job step'));
    expect(steps).toHaveLength(5);
    expect(readFileSync(join(out, 'slurm-forage-walkers.sbatch'), 'utf8')).toContain('--launcher slurm');
  });

  it('scancel stops the run like Ctrl-C: summary.json says aborted, the store verifies, a resume reproduces the golden', async () => {
    const out = join(work, 'cancel');
    const jobId = submit(CONFIG, out, ['--steps', String(GOLDEN.steps), '--checkpoint-every', '5']);
    const runDir = join(out, 'forage-walkers-1');
    // Cancel early in the run (~45 steps/s here): once two checkpoints (and their trace segments) are durable.
    await until('10 steps in the trace', () => stepsOnDisk(runDir) >= 10);
    // The workers really run as job steps of this job (Slurm's own view, not the coordinator's log):
    // squeue -s lists one step per worker, named by its worker id.
    const steps = spawnSync('squeue', ['-h', '-s', '-j', jobId, '-o', '%j'], { encoding: 'utf8' });
    expect(steps.status, steps.stderr).toBe(0);
    expect(
      steps.stdout
        .split('\n')
        .map((l) => l.trim())
        .filter((n) => /^worker-/.test(n))
        .sort(),
    ).toEqual(['worker-0', 'worker-1', 'worker-2', 'worker-3', 'worker-env']);
    expect(spawnSync('scancel', [jobId]).status).toBe(0);
    await until(`job ${jobId} to end`, () => !jobListed(jobId));
    const summary = readJson(join(runDir, 'summary.json'));
    expect(summary.status, JSON.stringify(summary)).toBe('aborted');
    expect(Number(summary.stepsDone)).toBeLessThan(GOLDEN.steps);
    expect(readFileSync(join(out, `slurm-${jobId}.out`), 'utf8')).toContain('the run was interrupted');
    expect(readdirSync(runDir)).not.toContain('run.lock');
    const verify = detsim(['store', 'verify', join(runDir, 'store')]);
    expect(verify.status, verify.stderr).toBe(0);
    // The cancelled run continues from its high-water checkpoint (local workers: --launcher local
    // overrides the srun launch launch.json records) to the golden.
    const resumed = detsim(['resume', runDir, '--launcher', 'local']);
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain(`repro hash       ${GOLDEN.reproHash}`);
  });

  it('a local run on threads (the default), resumed inside an allocation with --launcher slurm: srun job steps, the golden', () => {
    const out = join(work, 'local-then-slurm');
    const run = detsim(['run', CONFIG, '--steps', String(GOLDEN.steps), '--checkpoint-every', '20', '--out', out]);
    expect(run.status, run.stderr).toBe(0);
    const runDir = join(out, 'forage-walkers-1');
    const resumeArgs = ['resume', runDir, '--checkpoint', 'ckpt-e1-80', '--launcher', 'slurm'];
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLURM_')));
    const resumed = spawnSync('salloc', ['-N1', '--quiet', process.execPath, CLI_MAIN, ...resumeArgs], {
      encoding: 'utf8',
      timeout: 120_000,
      env: clean,
    });
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain(`repro hash       ${GOLDEN.reproHash}`);
    // The run's agent workers were threads, its built-in environment in the coordinator's thread (the
    // default on threads, recorded in launch.json); the resume's agents are processes started as srun
    // job steps, the environment again in the coordinator (the batch step).
    const log = readFileSync(join(runDir, 'run.log'), 'utf8').split('\n');
    const runs = log
      .filter((l) => l.includes('"workers spawned"'))
      .map((l) => [...new Set(l.match(/"runs":"[a-z]+"/g))]);
    expect(runs).toEqual([
      ['"runs":"inline"', '"runs":"thread"'],
      ['"runs":"inline"', '"runs":"process"'],
    ]);
    expect(log.filter((l) => l.includes('worker starts as an srun job step'))).toHaveLength(4);
  });

  it('a job sbatch refuses is one named line, exit 2, and leaves no script and no directory', () => {
    const out = join(work, 'refused', 'runs');
    const script = join(work, 'refused-script', 'job.sbatch');
    const r = detsim(['slurm', 'submit', CONFIG, '--out', out, '--script', script, '--partition=no-such-partition']);
    const line = expectCliRefusal(r, 'perm_slurm_job_refused', 'sbatch refused the job');
    expect(line).toContain('invalid partition');
    expect(existsSync(join(work, 'refused'))).toBe(false);
    expect(existsSync(join(work, 'refused-script'))).toBe(false);
  });
});

describe('Slurm refusals that need no cluster', () => {
  it('sbatch missing from PATH: one named line, exit 2, nothing written', () => {
    const out = join(work, 'no-sbatch');
    const r = detsim(['slurm', 'submit', CONFIG, '--out', out], { ...process.env, PATH: work });
    expectCliRefusal(r, 'perm_slurm_command_missing', 'sbatch: not found on PATH');
    expect(existsSync(out)).toBe(false);
  });

  it('a config with thread workers is refused by slurm submit before anything is written', () => {
    const out = join(work, 'thread');
    const config = exampleWithWorkers(join(work, 'thread-cfg'), ['agentsPerWorker: 4', 'transport: thread']);
    const r = detsim(['slurm', 'submit', config, '--out', out]);
    expectCliRefusal(r, 'struct_invalid_field', 'launcher: slurm starts worker processes');
    expect(existsSync(out)).toBe(false);
  });

  it('detsim run --launcher slurm outside an allocation is refused before any run directory exists', () => {
    const out = join(work, 'no-allocation');
    const r = detsim(['run', CONFIG, '--launcher', 'slurm', '--out', out]);
    expectCliRefusal(r, 'perm_slurm_no_allocation', 'launcher: slurm');
    expect(existsSync(out)).toBe(false);
  });

  it('--dry-run prints the batch script (one task per worker, --launcher slurm, the run flags) and writes nothing', () => {
    const out = join(work, 'dry');
    const flags = ['--steps', '7', '--checkpoint-every', '5', '--max-restarts', '2', '--dry-run'];
    const r = detsim(['slurm', 'submit', CONFIG, '--out', out, ...flags], { ...process.env, PATH: work });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('#SBATCH --ntasks=5\n');
    expect(r.stdout).toMatch(
      /^exec .* run .*forage-walkers\.yaml --launcher slurm --out \S+ --steps 7 --checkpoint-every 5 --max-restarts 2$/m,
    );
    expect(existsSync(out)).toBe(false);
  });

  it('--max-restarts without --checkpoint-every is refused by slurm submit before sbatch, naming the flag', () => {
    const out = join(work, 'restarts');
    const r = detsim(['slurm', 'submit', CONFIG, '--out', out, '--max-restarts', '1']);
    expectCliRefusal(r, 'struct_invalid_field', '--max-restarts');
    expect(existsSync(out)).toBe(false);
  });
});
