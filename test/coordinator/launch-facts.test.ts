// launch.json (issue 15 §2): a run records how its workers were launched — launcher, placement, TLS
// and where the set is — beside run.json and outside the receipt, so `detsim resume` relaunches
// the same way: a forage-walkers run over tcp with a per-run TLS set (`workers.tls: {}`, made into
// <run dir>/tls) is resumed from an early checkpoint with its per-run set removed; the resumed
// workers are started with --tls-dir (seen in their own argv, recorded by a --require spy), the set
// is made again, and the resumed ReproHash equals the uninterrupted golden; a per-run set that has
// expired is made anew on resume. Runs the built CLI.
// Also relaunchPlan, case by case (pure). NOT Slurm (test/cluster/slurm-tls.test.ts) nor the TLS handshake (tls-run).
import { X509Certificate } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { exampleWithWorkers } from '../example-config.js';
import { resolveConfig, type RunPlan } from '../../coordinator/config.js';
import { PER_RUN_TLS_RENEW_MS, relaunchPlan, type LaunchFacts } from '../../coordinator/launch/launch-facts.js';
import { DEFAULT_GOLDEN_DIR, readGolden } from '../../coordinator/diff0/goldens.js';
import { CLI_MAIN, detsimCli } from '../cli-refusal.js';
import { makeExpiredTlsSet } from '../expired-tls-set.js';

const root = mkdtempSync(join(tmpdir(), 'detsim-launch-facts-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const golden = readGolden(DEFAULT_GOLDEN_DIR, 'forage-walkers')!;
const base = (): Record<string, unknown> => ({
  sessionId: 's',
  masterSeed: '1',
  steps: 3,
  environment: { id: 'env', model: 'forage' },
  agents: { count: 2, prefix: 'a-', model: 'walker' },
});

/** forage-walkers over tcp asking for TLS without a set: the run makes its own. */
function perRunTlsConfig(): string {
  expect(golden.config).toMatch(/examples\/forage-walkers\.yaml$/);
  return exampleWithWorkers(join(root, 'tls-cfg'), ['agentsPerWorker: 4', 'transport: tcp', 'tls: {}']);
}

/** A --require hook: each TypeScript worker process writes its own argv into $SPY_DIR/<pid>.json. */
function argvSpy(dir: string): string {
  const path = join(root, 'argv-spy.cjs');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path,
    "require('node:fs').writeFileSync(require('node:path').join(process.env.SPY_DIR, process.pid + '.json'), JSON.stringify(process.argv));\n",
  );
  return path;
}

/** The flag values each spied worker was started with. */
function spiedFlag(dir: string, flag: string): (string | undefined)[] {
  return readdirSync(dir).map((name) => {
    const argv = JSON.parse(readFileSync(join(dir, name), 'utf8')) as string[];
    const at = argv.indexOf(flag);
    return at < 0 ? undefined : argv[at + 1];
  });
}

describe('launch.json and resume', () => {
  it('resume of a per-run TLS run relaunches TLS workers (set made again) and reproduces the golden', () => {
    const out = join(root, 'runs');
    const run = detsimCli(
      ['run', perRunTlsConfig(), '--steps', String(golden.steps), '--checkpoint-every', '10', '--out', out, '--json'],
      120_000,
    );
    expect(run.status, run.stderr).toBe(0);
    const { runDir, reproHash } = JSON.parse(run.stdout) as { runDir: string; reproHash: string };
    expect(reproHash).toBe(golden.reproHash);
    const tls = join(runDir, 'tls');
    expect(statSync(tls).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(join(runDir, 'launch.json'), 'utf8'))).toEqual({
      format: 'detsim-launch-v1',
      launcher: { kind: 'local', srunArgs: [] },
      placement: { kind: 'local' },
      tls: { dir: tls, perRun: true },
    });
    // Physical: the receipt never carries the launch facts.
    expect(readFileSync(join(runDir, 'receipt.json'), 'utf8')).not.toContain(tls);

    rmSync(tls, { recursive: true });
    const spies = join(root, 'spies');
    const resumed = spawnSync(
      process.execPath,
      [CLI_MAIN, 'resume', runDir, '--checkpoint', 'ckpt-e1-110', '--checkpoint-every', '0', '--json'],
      {
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, SPY_DIR: spies, DETSIM_WORKER_NODE_ARGS: `--require ${argvSpy(spies)}` },
      },
    );
    expect(resumed.status, resumed.stderr).toBe(0);
    expect((JSON.parse(resumed.stdout) as { reproHash: string }).reproHash).toBe(golden.reproHash);
    // Every resumed worker (environment + 4 agent workers) served TLS from the run's set, made again.
    expect(spiedFlag(spies, '--tls-dir')).toEqual(Array(5).fill(tls));
    expect(spiedFlag(spies, '--listen')).toEqual(Array(5).fill('127.0.0.1:0'));
    expect(existsSync(join(tls, 'worker-key.pem'))).toBe(true);
  }, 240_000);
});

describe('an expired per-run TLS set on resume', () => {
  it('is made anew the way the run made it: the resume serves TLS again and reproduces the run', () => {
    const out = join(root, 'expired-runs');
    const run = detsimCli(
      ['run', perRunTlsConfig(), '--steps', '20', '--checkpoint-every', '10', '--out', out, '--json'],
      120_000,
    );
    expect(run.status, run.stderr).toBe(0);
    const { runDir, reproHash } = JSON.parse(run.stdout) as { runDir: string; reproHash: string };
    const tls = join(runDir, 'tls');
    rmSync(tls, { recursive: true });
    makeExpiredTlsSet(tls);
    const resumed = detsimCli(
      ['resume', runDir, '--checkpoint', 'ckpt-e1-10', '--checkpoint-every', '0', '--json'],
      120_000,
    );
    expect(resumed.status, resumed.stderr).toBe(0);
    expect((JSON.parse(resumed.stdout) as { reproHash: string }).reproHash).toBe(reproHash);
    // Every certificate of the set is fresh again (valid for more than the renewal horizon).
    for (const name of ['ca.pem', 'coordinator.pem', 'worker.pem']) {
      const notAfter = Date.parse(new X509Certificate(readFileSync(join(tls, name))).validTo);
      expect(notAfter, name).toBeGreaterThan(Date.now() + PER_RUN_TLS_RENEW_MS);
    }
    expect(statSync(tls).mode & 0o777).toBe(0o700);
  }, 240_000);
});

describe('relaunchPlan: the plan a resume launches from launch.json', () => {
  const recorded = (): RunPlan => ({ ...resolveConfig(base()), transport: 'tcp' });
  const facts = (launcher: 'local' | 'slurm', rendezvous: boolean, tlsDir: string | null): LaunchFacts => ({
    format: 'detsim-launch-v1',
    launcher: { kind: launcher, srunArgs: launcher === 'slurm' ? ['--mem=1G'] : [] },
    placement: rendezvous ? { kind: 'rendezvous', dir: '/shared/rv', timeoutMs: 5000 } : { kind: 'local' },
    tls: tlsDir === null ? null : { dir: tlsDir, perRun: false },
  });

  it('relaunches srun steps found by rendezvous with TLS, as recorded', () => {
    const plan = relaunchPlan(recorded(), facts('slurm', true, '/certs'), root);
    expect([plan.launcher, plan.rendezvous, plan.tls]).toEqual([
      { kind: 'slurm', srunArgs: ['--mem=1G'] },
      { dir: '/shared/rv', timeoutMs: 5000 },
      { dir: '/certs' },
    ]);
  });

  it('--launcher local starts them here: drops the placement that was Slurm’s, keeps TLS', () => {
    const plan = relaunchPlan(recorded(), facts('slurm', true, '/certs'), root, 'local');
    expect([plan.launcher, plan.rendezvous, plan.tls]).toEqual([undefined, undefined, { dir: '/certs' }]);
  });

  it('hand-started workers are awaited in the rendezvous directory again; no launch.json changes nothing', () => {
    const plan = relaunchPlan(recorded(), facts('local', true, null), root);
    expect([plan.launcher, plan.rendezvous, plan.tls]).toEqual([
      undefined,
      { dir: '/shared/rv', timeoutMs: 5000 },
      undefined,
    ]);
    expect(relaunchPlan(recorded(), undefined, root)).toEqual(recorded());
  });
});
