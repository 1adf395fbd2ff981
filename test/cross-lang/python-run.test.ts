// Runs with Python workers (workers.runtime / environment.runtime: python) through the real
// coordinator: examples/mixed-python.yaml (TypeScript, Rust and Python agent workers, a Python
// environment) has the all-TypeScript run's traces, behaviourDigest and ReproHash; a checkpoint
// captured by Python workers resumes on TypeScript workers and the reverse, matching the
// TypeScript run; on unix every language speaks the socket wire (tcp: gRPC), one run either way; a
// missing interpreter or package is refused before any worker starts.
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseConfigText, resolveConfig, type RunPlan } from '../../coordinator/config.js';
import { resumeRun } from '../../coordinator/checkpoint/resume.js';
import { readRunRecord } from '../../coordinator/checkpoint/run-record.js';
import { defaultWorkerCommand } from '../../coordinator/launch/launcher.js';
import { writeReceipt } from '../../coordinator/receipt/receipt.js';
import { runSession } from '../../coordinator/session/run.js';
import { compareBehaviours } from '../../coordinator/trace/trace.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { committedIds, detsim, runAndKill, summary, traces } from '../checkpoint/cli.js';
import { readRun, tmpOut } from '../coordinator/helpers.js';
import { REPO_ROOT } from '../workers/harness.js';
import { ensurePythonWorker, pythonCommand, pythonWorkerSkip } from './python-worker.js';
import { ensureRustWorker, rustWorkerSkip } from './rust-worker.js';
import { refusal } from '../refusal.js';

type Cfg = Record<string, any>;
const EXAMPLE = 'examples/mixed-python.yaml';
const example = (): Cfg => parseConfigText(readFileSync(join(REPO_ROOT, EXAMPLE), 'utf8'), EXAMPLE) as Cfg;
/** The example with every worker, the environment's too, on one runtime. */
const allOn = (cfg: Cfg, runtime: 'typescript' | 'python'): Cfg => ({
  ...cfg,
  environment: { ...cfg.environment, runtime },
  workers: { ...cfg.workers, runtime },
});
const planOf = (cfg: Cfg): RunPlan => {
  const plan = resolveConfig(cfg, { baseDir: REPO_ROOT });
  plan.deadlines.startupMs = Math.max(plan.deadlines.startupMs, 60_000);
  return plan;
};
const runtimes = (dir: string): string[][] =>
  (
    (JSON.parse(readFileSync(join(dir, 'run.json'), 'utf8')) as Cfg).workers as { workerId: string; runtime: string }[]
  ).map((w) => [w.workerId, w.runtime.split('/')[0]!]);
const behaviourLines = (dir: string): string[] => readRun(dir).traces.map((t) => canonicalize(t.behaviour));

describe('environment.runtime and workers.runtime: python in a run configuration', () => {
  it('plans the environment and agent workers on python as configured; run.json rebuilds the same runtimes', () => {
    expect(planOf(example()).workers.map((w) => [w.workerId, w.runtime])).toEqual([
      ['worker-env', 'python'],
      ['worker-0', 'typescript'],
      ['worker-1', 'rust'],
      ['worker-2', 'python'],
    ]);
  });

  it('a python:package.module:Class model runs only on a Python worker: elsewhere it is refused at plan time, naming the field', () => {
    const coin: Cfg = {
      ...example(),
      agents: [{ id: 'coin-0', model: 'python:detsim_worker.examples:Coin' }],
      workers: { agentsPerWorker: 1 },
    };
    expect(refusal(() => planOf(coin))).toMatchObject({
      field: 'workers.runtime',
      message:
        'workers.runtime: agent coin-0 uses python:detsim_worker.examples:Coin, which needs runtime python for its worker',
    });
    expect(refusal(() => planOf({ ...coin, workers: { agentsPerWorker: 1, runtime: 'rust' } })).message).toBe(
      'workers.runtime: worker-0 runs on rust, which hosts only the built-in agent models (walker, lif); agent coin-0 uses python:detsim_worker.examples:Coin',
    );
    expect(refusal(() => planOf({ ...coin, agents: [{ id: 'coin-0', model: 'python:not a module' }] })).reason).toBe(
      'struct_unknown_model',
    );
    expect(
      refusal(() =>
        planOf({ ...coin, environment: { ...coin.environment, model: 'python:x.y:Z', runtime: 'typescript' } }),
      ).field,
    ).toBe('environment.runtime');
    expect(planOf({ ...coin, workers: { agentsPerWorker: 1, runtime: 'python' } }).agents.map((a) => a.model)).toEqual([
      'python:detsim_worker.examples:Coin',
    ]);
  });

  it('detsim run refuses a missing interpreter, a missing package and one older than this detsim before starting anything: one line naming the fix, exit 2', () => {
    const dir = tmpOut('detsim-pymissing-');
    // An interpreter that exists but sees no site-packages: detsim_worker cannot be imported.
    const bare = join(dir, 'bare-python');
    writeFileSync(bare, '#!/bin/sh\nexec python3 -I -S "$@"\n');
    chmodSync(bare, 0o755);
    const venv = ` (or make detsim's venv, used without DETSIM_PYTHON: bash ${join(REPO_ROOT, 'scripts/test-python.sh')})`;
    // A package installed from an older detsim (here: this one without its socket wire) before the
    // npm package was upgraded: refused at plan time with the command that reinstalls it.
    const old = join(dir, 'old');
    cpSync(join(REPO_ROOT, 'workers/python/detsim_worker'), join(old, 'detsim_worker'), { recursive: true });
    rmSync(join(old, 'detsim_worker', 'socket_wire.py'));
    const stale = join(dir, 'stale-python');
    // (Without a Python worker interpreter here, outside CI, the stale case runs on python3 alone.)
    const interpreter = pythonWorkerSkip === null ? ensurePythonWorker() : 'python3';
    writeFileSync(stale, `#!/bin/sh\nPYTHONPATH=${old} exec ${interpreter} "$@"\n`);
    chmodSync(stale, 0o755);
    const cases = [
      [
        '/nonexistent/python3',
        `detsim: [struct_invalid_field] environment.runtime: python needs a Python interpreter (>= 3.10), and "/nonexistent/python3" ($DETSIM_PYTHON) cannot be run; set DETSIM_PYTHON to one${venv}\n`,
      ],
      [
        bare,
        `detsim: [struct_invalid_field] environment.runtime: python needs the detsim_worker package, which ${JSON.stringify(bare)} ($DETSIM_PYTHON) cannot import (ModuleNotFoundError: No module named 'detsim_worker'); install it with: ${bare} -m pip install ${join(REPO_ROOT, 'workers/python')}${venv}\n`,
      ],
      [
        stale,
        `detsim: [struct_invalid_field] environment.runtime: python needs the detsim_worker package, which ${JSON.stringify(stale)} ($DETSIM_PYTHON) cannot import (ModuleNotFoundError: No module named 'detsim_worker.socket_wire'); install it with: ${stale} -m pip install ${join(REPO_ROOT, 'workers/python')}${venv}\n`,
      ],
    ] as const;
    const config = join(dir, 'py-env.json');
    writeFileSync(config, JSON.stringify({ ...example(), workers: { agentsPerWorker: 2, runtime: 'typescript' } }));
    for (const [python, stderr] of cases) {
      const out = join(dir, 'runs');
      const r = spawnSync(
        process.execPath,
        ['--import', 'tsx', 'coordinator/cli/main.ts', 'run', config, '--out', out],
        {
          cwd: REPO_ROOT,
          encoding: 'utf8',
          env: { ...process.env, DETSIM_PYTHON: python },
          timeout: 60_000,
        },
      );
      expect({ status: r.status, stderr: r.stderr, stdout: r.stdout }).toEqual({ status: 2, stderr, stdout: '' });
      expect(existsSync(out)).toBe(false);
    }
  });
});

describe.skipIf(pythonWorkerSkip !== null || rustWorkerSkip !== null)(
  `${EXAMPLE} matches the all-TypeScript run`,
  () => {
    beforeAll(() => {
      ensurePythonWorker();
      ensureRustWorker();
    }, 1_500_000);

    it('TypeScript, Rust and Python agent workers and a Python environment: same traces, digest and ReproHash', async () => {
      const out = tmpOut('detsim-pyrun-');
      const run = async (cfg: Cfg) => {
        const r = await runSession(planOf(cfg), { outDir: out, steps: 40, onWarning: () => undefined });
        return { dir: r.runDir, digest: r.behaviourDigest, repro: writeReceipt(r.runDir).reproHash };
      };
      const ts = await run(allOn(example(), 'typescript'));
      const mixed = await run(example());
      expect(runtimes(mixed.dir)).toEqual([
        ['worker-env', 'detsim-py'],
        ['worker-0', 'detsim-ts'],
        ['worker-1', 'detsim-rs'],
        ['worker-2', 'detsim-py'],
      ]);
      expect(readRunRecord(mixed.dir).plan.workers.map((w) => w.runtime)).toEqual([
        'python',
        'typescript',
        'rust',
        'python',
      ]);
      expect(behaviourLines(mixed.dir)).toEqual(behaviourLines(ts.dir));
      expect(mixed.digest).toBe(ts.digest);
      expect(mixed.repro).toBe(ts.repro);
    }, 300_000);

    it('on unix every language speaks the socket wire, on tcp gRPC: run.log names each process’s wire, and the runs are one run', async () => {
      const out = tmpOut('detsim-pywire-');
      /** The wire of each spawned worker process, from run.log's `workers spawned` line. */
      const wires = (dir: string): string[][] => {
        const line = readFileSync(join(dir, 'run.log'), 'utf8')
          .split('\n')
          .find((l) => l.includes('"msg":"workers spawned"'))!;
        const { workers } = JSON.parse(line) as { workers: { workerId: string; runs: string; wire?: string }[] };
        return workers.filter((w) => w.runs === 'process').map((w) => [w.workerId, w.wire ?? '?']);
      };
      const run = async (transport: 'unix' | 'tcp') => {
        const r = await runSession(planOf({ ...example(), workers: { ...example().workers, transport } }), {
          outDir: out,
          steps: 40,
          onWarning: () => undefined,
        });
        return { dir: r.runDir, repro: writeReceipt(r.runDir).reproHash };
      };
      const unix = await run('unix');
      const tcp = await run('tcp');
      const all = (wire: string) => ['worker-env', 'worker-0', 'worker-1', 'worker-2'].map((id) => [id, wire]);
      expect(wires(unix.dir)).toEqual(all('socket'));
      expect(wires(tcp.dir)).toEqual(all('grpc'));
      expect(unix.repro).toBe(tcp.repro);
    }, 300_000);
  },
);

describe.skipIf(pythonWorkerSkip !== null)('a Python model class in a run', () => {
  beforeAll(() => ensurePythonWorker(), 60_000);

  it('python:detsim_worker.examples:Coin runs on a Python worker (launched with --model), checkpoints its numpy state, and repeats its digest', async () => {
    const out = tmpOut('detsim-pycoin-');
    const cfg = {
      ...example(),
      agents: [
        { id: 'coin-0', model: 'python:detsim_worker.examples:Coin' },
        { id: 'walker-0', model: 'walker' },
      ],
      workers: { agentsPerWorker: 1, runtime: ['python', 'typescript'] },
    };
    const file = join(out, 'coin.json');
    writeFileSync(file, JSON.stringify(cfg));
    const cli = detsim(['run', file, '--steps', '12', '--checkpoint-every', '4', '--out', join(out, 'cli')]);
    expect(cli.status, cli.stderr).toBe(0);
    const plain = await runSession(planOf(cfg), { outDir: join(out, 'plain'), steps: 12, onWarning: () => undefined });
    expect(summary(join(out, 'cli', 'mixed-python-1')).behaviourDigest).toBe(plain.behaviourDigest);
    expect(committedIds(join(out, 'cli', 'mixed-python-1'))).toEqual(
      expect.arrayContaining(['ckpt-e1-4', 'ckpt-e1-8']),
    );
    const moves = readRun(plain.runDir).traces.map(
      (t) =>
        (t.behaviour.agents.find((x) => x.agentId === 'coin-0') as unknown as { decision: { move: string } }).decision
          .move,
    );
    expect(new Set(moves)).toEqual(new Set(['east', 'west']));
  }, 120_000);
});

describe.skipIf(pythonWorkerSkip !== null)('checkpoints restore between Python and TypeScript workers', () => {
  beforeAll(() => ensurePythonWorker(), 60_000);
  const M = 8;

  // As test/cross-lang/worker-checkpoint.test.ts does for Rust: the runtimes swap places, so the
  // composition's backend (the set of runtimes and builds) is the same before and after.
  /** `detsim run` of `cfg` SIGKILLed once ckpt-e1-2 commits, resumed to M steps with `commandFor`; the run directory. */
  async function killAndResume(
    dir: string,
    cfg: Cfg,
    commandFor: (w: { workerId: string }) => { command: string; args: string[] },
  ): Promise<{ runDir: string; logBefore: number }> {
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify(cfg));
    const runDir = join(dir, 'mixed-python-1');
    const { killed } = await runAndKill(
      // --keep: a fast run may commit past ckpt-e1-2 before the kill lands; it must still be listed.
      ['run', file, '--steps', '400', '--checkpoint-every', '2', '--keep', '100', '--out', dir],
      runDir,
      (d) => committedIds(d).includes('ckpt-e1-2'),
    );
    expect(killed).toBe(true);
    const logBefore = readFileSync(join(runDir, 'run.log'), 'utf8').length;
    const r = await resumeRun(runDir, { checkpointId: 'ckpt-e1-2', steps: M, commandFor });
    expect(r).toMatchObject({ checkpointId: 'ckpt-e1-2', boundary: 2, steps: M });
    return { runDir, logBefore };
  }

  // As test/cross-lang/worker-checkpoint.test.ts does for Rust: the runtimes swap places, so the
  // composition's backend (the set of runtimes and builds) is the same before and after.
  it(`Python-captured environment and agents resume on TypeScript workers and TypeScript-captured agents on Python: the TypeScript run's behaviour, and the all-TypeScript kill-and-resume's ReproHash`, async () => {
    const dir = tmpOut('detsim-pyck-');
    const cfg: Cfg = {
      ...example(),
      agents: example().agents.filter((a: Cfg) => a.id !== 'walker-2'),
      workers: { ...example().workers, agentsPerWorker: 3 },
    };
    const plain = await runSession(planOf(allOn(cfg, 'typescript')), {
      outDir: join(dir, 'a'),
      steps: M,
      onWarning: () => undefined,
    });
    const ts = defaultWorkerCommand();
    const py = pythonCommand();
    const mixed = {
      ...cfg,
      environment: { ...cfg.environment, runtime: 'python' },
      workers: { ...cfg.workers, runtime: ['python', 'typescript'] },
    };
    const { runDir: swapped, logBefore } = await killAndResume(join(dir, 'b'), mixed, (w) =>
      w.workerId === 'worker-1' ? py : ts,
    );
    expect(runtimes(swapped)).toEqual([
      ['worker-env', 'detsim-py'],
      ['worker-0', 'detsim-py'],
      ['worker-1', 'detsim-ts'],
    ]);
    const hellos = readRun(swapped)
      .log.slice(logBefore)
      .split('\n')
      .filter((l) => l.includes('"worker ready"'))
      .map((l) => JSON.parse(l) as { workerId: string; hello: { runtime: string } });
    expect(hellos.map((h) => [h.workerId, h.hello.runtime.split('/')[0]]).sort()).toEqual([
      ['worker-0', 'detsim-ts'],
      ['worker-1', 'detsim-py'],
      ['worker-env', 'detsim-ts'],
    ]);
    const expected = traces(plain.runDir).map((t) => t.behaviour);
    const actual = traces(swapped).map((t) => t.behaviour);
    expect(actual).toHaveLength(M);
    expect(actual.slice(2).every((x) => x.scope.epoch === 'e2')).toBe(true);
    expect(compareBehaviours(expected, actual)).toBeNull();
    expect(summary(swapped).behaviourDigest).toBe(plain.behaviourDigest);
    // A resumed run's ReproHash covers its epochs and planned steps, so the reference is the same
    // kill-and-resume on TypeScript workers only.
    const { runDir: reference } = await killAndResume(join(dir, 'c'), allOn(cfg, 'typescript'), () => ts);
    expect(writeReceipt(swapped).reproHash).toBe(writeReceipt(reference).reproHash);
  }, 300_000);
});
