// Slurm across nodes (issue 15 §2): `launcher: slurm` with `workers.placement: rendezvous` against
// the real local Slurm (scripts/slurm-up.sh). Every worker is an srun job step that listens beyond
// loopback (0.0.0.0, port 0) with mutual TLS + the run token from the per-run set the coordinator
// made in <run dir>/tls, announces `$(hostname):port` in a fresh launch directory, and is reached
// there: the submitted forage-walkers run reproduces the golden ReproHash. launch.json records the
// launch, so a cancelled run's `detsim resume` relaunches TLS srun steps (refused outside an
// allocation; inside salloc it reproduces the golden). Skips, saying why, when no Slurm node is idle.
// NOT the single-node Unix-socket launcher (slurm.test.ts) nor a multi-host network (rendezvous-netns).
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI_MAIN, expectCliRefusal } from '../cli-refusal.js';
import { detsim, jobListed, readJson, slurmDownReason, submit, until } from './slurm-harness.js';
import { exampleWithWorkers } from '../example-config.js';
import { stepsOnDisk } from '../trace-read.js';

const GOLDEN = JSON.parse(readFileSync('fixtures/golden/forage-walkers.json', 'utf8')) as {
  reproHash: string;
  steps: number;
};
const work = mkdtempSync(join(tmpdir(), 'detsim-slurm-tls-test-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** forage-walkers with launcher: slurm, tcp workers found by rendezvous in `<work>/rdv`, no TLS dir given. */
function rendezvousConfig(): string {
  const workers = ['agentsPerWorker: 4', 'transport: tcp', 'placement: rendezvous'];
  const path = exampleWithWorkers(
    work,
    [...workers, 'rendezvous: { dir: rdv, timeoutSeconds: 60 }'],
    ['launcher: slurm'],
  );
  mkdirSync(join(work, 'rdv'), { recursive: true });
  return path;
}
const CONFIG = rendezvousConfig();

/** The run log's srun-step lines (JSON): the worker flags each step was started with. */
function srunSteps(runDir: string): { srun: string[]; listen: string }[] {
  return readFileSync(join(runDir, 'run.log'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('worker starts as an srun job step'))
    .map((l) => JSON.parse(l) as { srun: string[]; listen: string });
}

/** Every step served TLS from the run's own set, listened beyond loopback and registered by rendezvous. */
function expectTlsRendezvousSteps(steps: { srun: string[]; listen: string }[], runDir: string): void {
  for (const step of steps) {
    expect(step.listen).toBe('0.0.0.0:0');
    expect(step.srun.join(' ')).toContain(`--tls-dir ${join(runDir, 'tls')}`);
    expect(step.srun.join(' ')).toContain(`--rendezvous ${join(work, 'rdv', 'launch-')}`);
    expect(step.srun.join(' ')).toContain('--advertise "$(hostname):0"');
  }
}

/** The launch directories left in the rendezvous directory (each launch's is removed once its steps exit). */
function launchDirsLeft(): string[] {
  return readdirSync(join(work, 'rdv')).filter((name) => name.startsWith('launch-'));
}

const down = slurmDownReason();
if (down) process.stderr.write(`test/cluster/slurm-tls.test.ts: Slurm cases skipped: ${down}\n`);

describe.skipIf(down !== null)(
  'launcher: slurm + placement: rendezvous + TLS on the local Slurm',
  { timeout: 180_000 },
  () => {
    it('a submitted run: TLS srun steps found by rendezvous at $(hostname):port reproduce the golden ReproHash', async () => {
      const out = join(work, 'golden');
      const jobId = submit(CONFIG, out, ['--steps', String(GOLDEN.steps), '--time=5']);
      const runDir = join(out, 'forage-walkers-1');
      await until(`job ${jobId} to finish`, () => !jobListed(jobId));
      const output = readFileSync(join(out, `slurm-${jobId}.out`), 'utf8');
      expect(output).toContain(`repro hash       ${GOLDEN.reproHash}`);
      const steps = srunSteps(runDir);
      expect(steps).toHaveLength(5);
      expectTlsRendezvousSteps(steps, runDir);
      // The coordinator reached each worker where its record said: the node's name, not loopback.
      const ready = readFileSync(join(runDir, 'run.log'), 'utf8')
        .split('\n')
        .filter((l) => l.includes('"worker ready"'))
        .map((l) => (JSON.parse(l) as { listen: string }).listen);
      expect(ready).toHaveLength(5);
      for (const address of ready) expect(address).toMatch(new RegExp(`^${hostname()}:[1-9][0-9]*$`));
      // The per-run set is private; launch.json records the launch (physical: the ReproHash is the golden's).
      expect(statSync(join(runDir, 'tls')).mode & 0o777).toBe(0o700);
      expect(readJson(join(runDir, 'launch.json'))).toEqual({
        format: 'detsim-launch-v1',
        launcher: { kind: 'slurm', srunArgs: [] },
        placement: { kind: 'rendezvous', dir: join(work, 'rdv'), timeoutMs: 60_000 },
        tls: { dir: join(runDir, 'tls'), perRun: true },
      });
      expect(JSON.stringify(readJson(join(runDir, 'receipt.json')))).not.toContain('launch');
      expect(launchDirsLeft()).toEqual([]);
    });

    it('scancel aborts it like Ctrl-C; resume relaunches TLS srun steps (refused outside an allocation) to the golden', async () => {
      const out = join(work, 'cancel');
      const jobId = submit(CONFIG, out, ['--steps', String(GOLDEN.steps), '--checkpoint-every', '5', '--time=5']);
      const runDir = join(out, 'forage-walkers-1');
      await until('10 steps in the trace', () => stepsOnDisk(runDir) >= 10);
      expect(spawnSync('scancel', [jobId]).status).toBe(0);
      await until(`job ${jobId} to end`, () => !jobListed(jobId));
      const summary = readJson(join(runDir, 'summary.json'));
      expect(summary.status, JSON.stringify(summary)).toBe('aborted');
      // launch.json says srun: outside an allocation the resume is refused, not run with local plaintext workers.
      expectCliRefusal(detsim(['resume', runDir]), 'perm_slurm_no_allocation', 'launcher: slurm');
      const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLURM_')));
      const resumed = spawnSync('salloc', ['--ntasks=5', '--time=5', process.execPath, CLI_MAIN, 'resume', runDir], {
        encoding: 'utf8',
        timeout: 150_000,
        env: clean,
      });
      expect(resumed.status, resumed.stderr).toBe(0);
      expect(resumed.stdout).toContain(`repro hash       ${GOLDEN.reproHash}`);
      const steps = srunSteps(runDir);
      expect(steps).toHaveLength(10);
      expectTlsRendezvousSteps(steps.slice(5), runDir);
      // Neither the cancelled launch's directory nor the resume's is left behind.
      expect(launchDirsLeft()).toEqual([]);
    });
  },
);

describe('slurm submit with placement: rendezvous, no cluster needed', () => {
  it('--dry-run shows the TLS rendezvous worker step and asks for no single node', () => {
    const out = join(work, 'dry');
    const r = detsim(['slurm', 'submit', CONFIG, '--out', out, '--dry-run'], { ...process.env, PATH: work });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`--listen 0.0.0.0:0 --tls-dir ${join(out, 'forage-walkers-<n>', 'tls')}`);
    expect(r.stdout).toContain(`--rendezvous ${join(work, 'rdv', 'launch-XXXXXX')} --advertise "$(hostname):0"`);
    expect(r.stdout).toContain('#SBATCH --ntasks=5\n');
    expect(r.stdout).not.toContain('--nodes=1\n');
    expect(existsSync(out)).toBe(false);
  });

  it('srun steps found by rendezvous over unix sockets are refused by name before anything is written', () => {
    const config = join(work, 'unix.yaml');
    writeFileSync(config, readFileSync(CONFIG, 'utf8').replace('transport: tcp', 'transport: unix'));
    const out = join(work, 'unix');
    expectCliRefusal(detsim(['slurm', 'submit', config, '--out', out]), 'struct_invalid_field', 'workers.transport');
    expect(existsSync(out)).toBe(false);
  });
});
