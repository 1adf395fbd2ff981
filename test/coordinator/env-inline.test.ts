// `environment.transport: inline` (the environment in the coordinator's own thread, the agents on
// workers.transport) is physical: every example gives its golden ReproHash and behaviour digest with
// the environment inline and the agents on unix or thread; an env-inline run and a default one
// (Python environment, Rust and Python agents) are DIFF=0; a checkpointed env-inline run resumes
// with its golden ReproHash whether the resume keeps the environment inline or not (and a default
// run resumes with it inline); hand-started agents found by rendezvous run beside an inline
// environment; a Slurm-style starter is never asked for it; the refusals name the field; a model
// exception or a death of the inline environment is named as worker-env's, at its step and phase.
// Real workers, real files. Not the all-inline transport (transports.test.ts).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveConfig, type PlannedWorker, type RunPlan, type Transport } from '../../coordinator/config.js';
import { DEFAULT_GOLDEN_DIR, exampleName, readGolden } from '../../coordinator/diff0/goldens.js';
import { defaultConfigs } from '../../coordinator/diff0/verify.js';
import { readLaunchFacts } from '../../coordinator/launch/launch-facts.js';
import type { Fleet } from '../../coordinator/launch/launcher.js';
import { RunFailure } from '../../coordinator/session/run-failure.js';
import { runSession } from '../../coordinator/session/run.js';
import { detsimCli, expectCliRefusal } from '../cli-refusal.js';
import { committedIds, detsim, runAndKill } from '../checkpoint/cli.js';
import { prepareRuntimesFor } from '../cross-lang/example-runtimes.js';
import { refusal } from '../refusal.js';
import { REPO_ROOT } from '../workers/harness.js';
import { runsInline } from '../../coordinator/launch/inline-worker.js';
import { rendezvousConfig, startHandWorker, stopAll } from './hand-workers.js';
import { builtWorkersFor, loadPlan, loggedWorkerRuns, readRun, tmpOut } from './helpers.js';

const examples = defaultConfigs('examples');
const FIXTURES = resolve('test', 'coordinator', 'fixtures');

/** `plan` with its environment inline; a Python environment becomes TypeScript (the same world, bit for bit). */
function envInline(plan: RunPlan, transport: Transport): RunPlan {
  const workers = plan.workers.map((w): PlannedWorker => {
    if (w.role !== 'environment') return w;
    const { runtime: _python, ...ts } = w;
    return ts;
  });
  return { ...plan, workers, transport, environmentTransport: 'inline' };
}

async function run(plan: RunPlan, steps: number) {
  const result = await runSession(plan, {
    outDir: tmpOut('detsim-env-inline-'),
    steps,
    onWarning: () => undefined,
    hooks: { commandFor: builtWorkersFor(plan) },
  });
  return { ...result, runs: loggedWorkerRuns(readRun(result.runDir).log) };
}

const reproHashOf = (stdout: string) => /repro hash\s+([0-9a-f]{16})/.exec(stdout)?.[1];

describe('environment.transport: inline gives the golden hashes', () => {
  for (const config of examples) {
    it(
      `${config}: the environment inline, agents on unix and on thread: its golden ReproHash and behaviour digest`,
      { timeout: 600_000 },
      async (ctx) => {
        const skip = prepareRuntimesFor(config);
        if (skip) return ctx.skip(skip);
        const g = readGolden(DEFAULT_GOLDEN_DIR, exampleName(config))!;
        for (const transport of ['unix', 'thread'] as const) {
          const plan = envInline(loadPlan(config), transport);
          const r = await run(plan, g.steps);
          expect({ transport, reproHash: r.reproHash, behaviourDigest: r.behaviourDigest }).toEqual({
            transport,
            reproHash: g.reproHash,
            behaviourDigest: g.behaviourDigest,
          });
          // Where each worker ran (run.log): the environment inline, TypeScript agents on the transport.
          const where = (w: PlannedWorker) =>
            w.role === 'environment'
              ? 'inline'
              : transport === 'thread' && w.runtime === 'typescript'
                ? 'thread'
                : 'process';
          expect(r.runs).toEqual(Object.fromEntries(plan.workers.map((w) => [w.workerId, where(w)])));
          expect(readLaunchFacts(r.runDir)?.environmentTransport).toBe('inline');
        }
      },
    );
  }

  it(
    'mixed-python (Python environment, Rust and Python agents) on its own and with a TypeScript environment inline: DIFF=0',
    { timeout: 600_000 },
    async (ctx) => {
      const config = 'examples/mixed-python.yaml';
      const skip = prepareRuntimesFor(config);
      if (skip) return ctx.skip(skip);
      const steps = 30;
      const plain = await run(loadPlan(config), steps);
      const inline = await run(envInline(loadPlan(config), 'unix'), steps);
      expect(plain.runs['worker-env']).toBe('process');
      expect(inline.runs['worker-env']).toBe('inline');
      expect(readLaunchFacts(plain.runDir)?.environmentTransport).toBeUndefined();
      const d = detsimCli(['diff', plain.runDir, inline.runDir]);
      expect(d.status, d.stdout + d.stderr).toBe(0);
      expect(d.stdout).toContain(`DIFF=0: the same run (ReproHash ${plain.reproHash}, ${steps} steps)`);
      // run.json carries no trace of it: the two differ only where every two runs differ (physical fields).
      const runJson = readFileSync(join(inline.runDir, 'run.json'), 'utf8');
      expect(runJson).not.toContain('environmentTransport');
    },
  );
});

describe.each([
  ['inline', undefined, 'inline', 'inline'],
  ['inline', 'workers', 'inline', 'thread'],
  ['workers', 'inline', 'thread', 'inline'],
  // The default on threads: lif-pair's built-in environment inline, and so on resume (launch.json).
  [undefined, undefined, 'inline', 'inline'],
] as const)(
  'checkpoint and resume: run with the environment %s, resumed with --environment-transport %s',
  (from, flag, ranAs, resumedAs) => {
    it(
      "SIGKILLed after a committed checkpoint and resumed: the uninterrupted run's (golden) ReproHash",
      { timeout: 300_000 },
      async () => {
        const g = readGolden(DEFAULT_GOLDEN_DIR, 'lif-pair')!;
        const out = tmpOut('detsim-env-inline-resume-');
        const runDir = join(out, 'lif-pair-1');
        const runFlags = from ? ['--environment-transport', from] : [];
        const { killed } = await runAndKill(
          [
            'run',
            'examples/lif-pair.yaml',
            '--steps',
            String(g.steps),
            '--checkpoint-every',
            '2',
            '--keep', // a fast run may commit past ckpt-e1-2 before the kill lands; it must still be listed
            '100',
            '--out',
            out,
            ...runFlags,
          ],
          runDir,
          (d) => committedIds(d).includes('ckpt-e1-2'),
        );
        expect(killed).toBe(true);
        expect(existsSync(join(runDir, 'summary.json'))).toBe(false);
        const r = detsim([
          'resume',
          runDir,
          '--checkpoint',
          'ckpt-e1-2',
          ...(flag ? ['--environment-transport', flag] : []),
        ]);
        expect(r.status, r.stderr).toBe(0);
        expect(reproHashOf(r.stdout)).toBe(g.reproHash);
        expect(readRun(runDir).summary.behaviourDigest).toBe(g.behaviourDigest);
        const spawned = readFileSync(join(runDir, 'run.log'), 'utf8')
          .split('\n')
          .filter((l) => l.includes('"workers spawned"'));
        expect(spawned.map((l) => loggedWorkerRuns(l)['worker-env'])).toEqual([ranAs, resumedAs]);
      },
    );
  },
);

afterEach(stopAll);

describe('placement: rendezvous and a Slurm-style starter leave an inline environment in the coordinator', () => {
  it('lif-pair: only its agent workers started by hand (rendezvous), the environment inline: golden ReproHash', async () => {
    const dir = tmpOut('ds-rv-env-');
    const workers = ['worker-0', 'worker-1'].map((workerId) =>
      startHandWorker({ workerId, role: 'agent', rendezvous: dir }),
    );
    const cfg = rendezvousConfig('examples/lif-pair.yaml', dir, 60);
    const plan = resolveConfig(
      { ...cfg, environment: { ...cfg.environment, transport: 'inline' } },
      { baseDir: REPO_ROOT },
    );
    const g = readGolden(DEFAULT_GOLDEN_DIR, 'lif-pair')!;
    const result = await runSession(plan, { outDir: tmpOut('ds-rv-env-out-'), steps: g.steps });
    expect(result.reproHash).toBe(g.reproHash);
    expect(loggedWorkerRuns(readRun(result.runDir).log)).toEqual({
      'worker-env': 'inline',
      'worker-0': 'remote',
      'worker-1': 'remote',
    });
    expect(readLaunchFacts(result.runDir)).toMatchObject({
      placement: { kind: 'rendezvous' },
      environmentTransport: 'inline',
    });
    expect(await Promise.all(workers.map((w) => w.exited))).toEqual([0, 0]);
    expect(readdirSync(dir)).toEqual([]);
  }, 180_000);

  it('a starter (what launcher: slurm plugs in) is asked for the agent workers only', async () => {
    const plan = envInline(loadPlan('examples/lif-pair.yaml'), 'unix');
    const asked: string[] = [];
    const g = readGolden(DEFAULT_GOLDEN_DIR, 'lif-pair')!;
    const r = await runSession(plan, {
      outDir: tmpOut('detsim-env-inline-starter-'),
      steps: g.steps,
      hooks: { startWorker: (w) => void asked.push(w.workerId) },
    });
    expect(asked).toEqual(['worker-0', 'worker-1']);
    expect(r.reproHash).toBe(g.reproHash);
  }, 120_000);

  it('config: accepted with launcher: slurm and with placement: rendezvous (the environment needs no process)', () => {
    const base = rendezvousConfig('examples/lif-pair.yaml', '/tmp/rv', 5);
    const environment = { ...base.environment, transport: 'inline' };
    expect(resolveConfig({ ...base, environment }).environmentTransport).toBe('inline');
    const slurm = { ...base, environment, launcher: 'slurm', workers: { ...base.workers, tls: {} } };
    expect(resolveConfig(slurm)).toMatchObject({ environmentTransport: 'inline', launcher: { kind: 'slurm' } });
  });
});

describe('the default placement of the environment', () => {
  const base = () => {
    const { workers: _rv, ...rest } = rendezvousConfig('examples/lif-pair.yaml', '/tmp/rv', 5);
    return rest as Record<string, any>;
  };
  const placed = (cfg: Record<string, any>) => {
    const plan = resolveConfig(cfg, { baseDir: FIXTURES });
    return runsInline(
      plan,
      plan.workers.find((w) => w.role === 'environment')!,
    )
      ? 'inline'
      : 'worker';
  };

  it('a built-in TypeScript environment on threads or Unix-socket processes is inline; a module of your own, Python, TCP, Slurm, rendezvous and `workers` are not', () => {
    const env = (more: Record<string, unknown>) => ({ ...base(), environment: { ...base().environment, ...more } });
    expect(placed(base())).toBe('inline');
    expect(placed({ ...base(), workers: { transport: 'thread' } })).toBe('inline');
    expect(placed(env({ transport: 'workers' }))).toBe('worker');
    expect(placed({ ...base(), workers: { transport: 'unix' } })).toBe('inline');
    expect(placed({ ...base(), workers: { transport: 'tcp' } })).toBe('worker');
    expect(placed(env({ runtime: 'python' }))).toBe('worker');
    expect(placed(env({ model: './throw-in-advance.ts' }))).toBe('worker');
    expect(placed({ ...base(), launcher: 'slurm' })).toBe('worker');
    expect(placed(rendezvousConfig('examples/lif-pair.yaml', '/tmp/rv', 5))).toBe('worker');
    // `inline` says so whatever the transport: processes, and a module of your own.
    expect(placed({ ...env({ transport: 'inline' }), workers: { transport: 'unix' } })).toBe('inline');
    expect(placed(env({ transport: 'inline', model: './throw-in-advance.ts' }))).toBe('inline');
  });
});

describe('refusals', () => {
  const lif = () => rendezvousConfig('examples/lif-pair.yaml', '/tmp/rv', 5);
  const local = () => {
    const { workers: _rv, ...rest } = lif();
    return rest;
  };

  it('a Python environment, or another environment.transport, is refused naming environment.transport', () => {
    const python = refusal(() =>
      resolveConfig({ ...local(), environment: { ...local().environment, runtime: 'python', transport: 'inline' } }),
    );
    expect([python.reason, python.field, python.message]).toEqual([
      'struct_invalid_field',
      'environment.transport',
      "environment.transport: inline hosts a TypeScript environment in the coordinator's thread; environment.runtime is python",
    ]);
    const thread = refusal(() =>
      resolveConfig({ ...local(), environment: { ...local().environment, transport: 'thread' } }),
    );
    expect([thread.reason, thread.field]).toEqual(['struct_invalid_field', 'environment.transport']);
    // An explicit TypeScript runtime is what inline hosts.
    const ts = { ...local(), environment: { ...local().environment, runtime: 'typescript', transport: 'inline' } };
    expect(resolveConfig(ts).environmentTransport).toBe('inline');
  });

  it('detsim run --environment-transport inline on a Python environment, or an unknown value: one line, exit 2', () => {
    expectCliRefusal(
      detsimCli(['run', 'examples/mixed-python.yaml', '--environment-transport', 'inline', '--out', tmpOut()]),
      'struct_invalid_field',
      '--environment-transport: inline hosts a TypeScript environment',
    );
    expectCliRefusal(
      detsimCli(['run', 'examples/lif-pair.yaml', '--environment-transport', 'thread', '--out', tmpOut()]),
      'struct_invalid_field',
      '--environment-transport',
    );
  });
});

describe('a failing inline environment is named as worker-env, at its step and phase', () => {
  function plan(transport: Transport, environment: Record<string, unknown>): RunPlan {
    return resolveConfig(
      {
        sessionId: 'env-fails',
        masterSeed: '5',
        steps: 6,
        stepHz: 60,
        environment: { id: 'world', params: { width: 8, height: 8, food: 4 }, ...environment },
        agents: [{ id: 'walk-a', model: 'walker' }],
        workers: { agentsPerWorker: 1, transport },
        deadlines: { startupMs: 60_000, stepMs: 30_000 },
      },
      { baseDir: FIXTURES },
    );
  }

  async function failure(p: RunPlan, killAt?: bigint): Promise<RunFailure> {
    let fleet: Fleet | undefined;
    const hooks = {
      onLaunched: (f: Fleet) => (fleet = f),
      beforePhase: (step: bigint, phase: string) => {
        if (step === killAt && phase === 'advance') fleet!.environment.instance.kill();
      },
    };
    try {
      await runSession(p, { outDir: tmpOut('detsim-env-inline-fail-'), hooks });
    } catch (e) {
      if (!(e instanceof RunFailure)) throw e;
      for (const w of fleet!.all()) expect(w.instance.exitInfo, w.plan.workerId).toBeDefined();
      expect(readRun(e.runDir!).summary).toMatchObject({ status: 'failed', failure: { workerId: 'worker-env' } });
      return e;
    }
    throw new Error('the run succeeded');
  }

  const named = (f: RunFailure) => ({ kind: f.kind, workerId: f.workerId, step: f.step, phase: f.phase });

  it('a model exception in Advance: the same named failure as a process environment', async () => {
    const model = { model: './throw-in-advance.ts' };
    const inline = await failure({ ...plan('unix', model), environmentTransport: 'inline' });
    const process = await failure(plan('unix', model));
    expect(named(inline)).toEqual({ kind: 'error-reply', workerId: 'worker-env', step: '2', phase: 'advance' });
    expect(named(process)).toEqual(named(inline));
    expect(inline.message).toMatch(
      /^worker worker-env .*at step 2, phase advance: .*throw-in-advance: the world gave up at step 2/,
    );
  }, 120_000);

  it('its death (the instance killed before an Advance): worker-exited, naming the inline worker-env', async () => {
    const e = await failure({ ...plan('thread', { model: 'forage' }), environmentTransport: 'inline' }, 3n);
    expect(named(e)).toEqual({ kind: 'worker-exited', workerId: 'worker-env', step: '3', phase: 'advance' });
    expect(e.message).toContain("inline worker worker-env (in the coordinator's thread) exited");
  }, 120_000);
});
