// Runs with agents on Rust workers (workers.runtime) through the real coordinator: a mix of
// TypeScript and Rust agent workers, and all-Rust runs of walker and lif, give the same behaviour
// traces, behaviourDigest and ReproHash as the all-TypeScript run; the Rust worker really ran (Hello
// runtime in run.json); a changed parameter is caught (the comparison can fail). Config refusals
// of workers.runtime and the missing-binary refusal run without the binary.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseConfigText, resolveConfig, type RunPlan } from '../../coordinator/config.js';
import { canonicalize } from '../../coordinator/formats/canonical-json.js';
import { writeReceipt } from '../../coordinator/receipt/receipt.js';
import { runSession } from '../../coordinator/run.js';
import { readRunRecord } from '../../coordinator/checkpoint/run-record.js';
import { readRun, tmpOut } from '../coordinator/helpers.js';
import { REPO_ROOT } from '../workers/harness.js';
import { ensureRustWorker, rustWorkerSkip } from './rust-worker.js';
import { refusal } from '../refusal.js';

type Cfg = Record<string, any>;
const example = (file: string): Cfg => parseConfigText(readFileSync(join(REPO_ROOT, file), 'utf8'), file) as Cfg;
const planOf = (cfg: Cfg): RunPlan => {
  const plan = resolveConfig(cfg, { baseDir: REPO_ROOT });
  plan.deadlines.startupMs = Math.max(plan.deadlines.startupMs, 60_000);
  return plan;
};
const withRuntime = (cfg: Cfg, runtime: unknown): Cfg => ({ ...cfg, workers: { ...cfg.workers, runtime } });
const behaviourLines = (dir: string): string[] => readRun(dir).traces.map((t) => canonicalize(t.behaviour));
const runtimes = (dir: string): string[] => (readRun(dir).run.workers as { runtime: string }[]).map((w) => w.runtime.split('/')[0]!);

describe('workers.runtime in a run configuration', () => {
  const base = example('examples/mixed-walkers.yaml');

  it('places agent workers on runtimes: one for all, or one per agent worker in order; the environment stays TypeScript', () => {
    expect(planOf(base).workers.map((w) => [w.workerId, w.runtime ?? 'typescript'])).toEqual([['worker-env', 'typescript'], ['worker-0', 'typescript'], ['worker-1', 'rust']]);
    expect(planOf(withRuntime(base, 'rust')).workers.map((w) => w.runtime ?? 'typescript')).toEqual(['typescript', 'rust', 'rust']);
    const { workers, ...rest } = base;
    const { runtime: _r, ...w } = workers as Cfg;
    expect(planOf({ ...rest, workers: w }).workers.every((x) => x.runtime === undefined)).toBe(true);
  });

  it('refuses unknown runtimes, a list of the wrong length, and a module model on a Rust worker, naming workers.runtime', () => {
    for (const bad of ['go', ['typescript', 'python'], [], 3]) {
      const e = refusal(() => planOf(withRuntime(base, bad)));
      expect(e.reason).toBe('struct_invalid_field');
      expect(e.field).toBe('workers.runtime');
      expect(e.message).toMatch(/^workers\.runtime: .*typescript or rust/);
    }
    const e = refusal(() => planOf(withRuntime(base, ['rust'])));
    expect(e.message).toBe('workers.runtime: 1 runtimes listed for 2 agent workers (one per agent worker, in order)');
    const mod = { ...base, agents: { ...base.agents, model: './test/workers/fixtures/' + readdirSync(join(REPO_ROOT, 'test/workers/fixtures')).find((f) => f.endsWith('.ts')) } };
    const m = refusal(() => planOf(withRuntime(mod, 'rust')));
    expect(m.field).toBe('workers.runtime');
    expect(m.message).toMatch(/worker-0 runs on rust, which hosts only the built-in agent models \(walker, lif\); agent walker-0 uses \//);
  });

  it('detsim run refuses a rust runtime whose binary is missing before starting anything: one line, the build command, exit 2, no run directory', () => {
    const out = join(tmpOut(), 'runs');
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'coordinator/cli/main.ts', 'run', 'examples/mixed-walkers.yaml', '--out', out], {
      cwd: REPO_ROOT, encoding: 'utf8', env: { ...process.env, DETSIM_RUST_WORKER: '/nonexistent/detsim-worker-rs' }, timeout: 60_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe('detsim: [struct_invalid_field] workers.runtime: rust needs the Rust worker binary, which is missing (/nonexistent/detsim-worker-rs); build it once with: bash scripts/build-rust-worker.sh\n');
    expect(r.stdout).toBe('');
    expect(existsSync(out)).toBe(false);
  });
});

describe.skipIf(rustWorkerSkip !== null)('runs on Rust workers match the all-TypeScript run', () => {
  beforeAll(() => ensureRustWorker(), 1_500_000);
  const out = tmpOut('detsim-rsrun-');
  const STEPS = 30;

  async function run(cfg: Cfg, steps = STEPS): Promise<{ dir: string; digest: string; repro: string }> {
    const r = await runSession(planOf(cfg), { outDir: out, steps, onWarning: () => undefined });
    return { dir: r.runDir, digest: r.behaviourDigest, repro: writeReceipt(r.runDir).reproHash };
  }

  it('8 walkers, half on a Rust worker (examples/mixed-walkers.yaml), and all on Rust: same traces, digest and ReproHash', async () => {
    const base = example('examples/mixed-walkers.yaml');
    const ts = await run(withRuntime(base, 'typescript'));
    const mixed = await run(base);
    const rust = await run(withRuntime(base, 'rust'));
    expect(runtimes(ts.dir)).toEqual(['detsim-ts', 'detsim-ts', 'detsim-ts']);
    expect(runtimes(mixed.dir)).toEqual(['detsim-ts', 'detsim-ts', 'detsim-rs']);
    expect(runtimes(rust.dir)).toEqual(['detsim-ts', 'detsim-rs', 'detsim-rs']);
    // A resume rebuilds the plan from run.json: each agent worker goes back to the runtime it ran on.
    const resumedRuntimes = (dir: string) => readRunRecord(dir).plan.workers.map((w) => [w.workerId, w.runtime ?? 'typescript']);
    expect(resumedRuntimes(mixed.dir)).toEqual([['worker-env', 'typescript'], ['worker-0', 'typescript'], ['worker-1', 'rust']]);
    expect(resumedRuntimes(ts.dir).every(([, r]) => r === 'typescript')).toBe(true);
    const lines = behaviourLines(ts.dir);
    expect(lines).toHaveLength(STEPS);
    expect(behaviourLines(mixed.dir)).toEqual(lines);
    expect(behaviourLines(rust.dir)).toEqual(lines);
    expect(mixed.digest).toBe(ts.digest);
    expect(rust.digest).toBe(ts.digest);
    expect(mixed.repro).toBe(ts.repro);
    expect(rust.repro).toBe(ts.repro);
    // Injected divergence: one changed walker parameter on the Rust side changes the traces and hashes.
    const changed = await run({ ...base, agents: { ...base.agents, params: { explore: 2 } } });
    expect(behaviourLines(changed.dir)).not.toEqual(lines);
    expect(changed.digest).not.toBe(ts.digest);
    expect(changed.repro).not.toBe(ts.repro);
  }, 300_000);

  it('a lif pair on Rust workers matches the TypeScript lif pair (spikes, ticks, remainders)', async () => {
    const base = example('examples/lif-pair.yaml');
    const ts = await run(withRuntime(base, 'typescript'), 20);
    const rust = await run(withRuntime(base, 'rust'), 20);
    expect(runtimes(rust.dir)).toEqual(['detsim-ts', 'detsim-rs', 'detsim-rs']);
    const lines = behaviourLines(ts.dir);
    expect(lines).toHaveLength(20);
    expect(lines.join('\n')).toContain('"spikes"');
    expect(behaviourLines(rust.dir)).toEqual(lines);
    expect(rust.digest).toBe(ts.digest);
    expect(rust.repro).toBe(ts.repro);
  }, 300_000);
});
