// Runs with agents on Rust workers (workers.runtime) through the real coordinator: a mix of
// TypeScript and Rust agent workers, and all-Rust runs of walker and lif, give the same behaviour
// traces, behaviourDigest and ReproHash as the all-TypeScript run; the Rust worker really ran (Hello
// runtime in run.json); a parameter changed for the Rust-hosted agents only is caught, in their own
// trace entries (the comparison can fail on the Rust side alone). Config refusals
// of workers.runtime and the missing-binary refusal run without the binary.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseConfigText, resolveConfig, type RunPlan } from '../../coordinator/config.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { writeReceipt } from '../../coordinator/receipt/receipt.js';
import { runSession } from '../../coordinator/session/run.js';
import { readRunRecord } from '../../coordinator/checkpoint/run-record.js';
import type { TraceBehaviour } from '../../coordinator/trace/trace.js';
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
/** The agents whose trace entries differ between two behaviours of one step. */
const differingAgents = (a: TraceBehaviour, b: TraceBehaviour): string[] =>
  a.agents
    .filter((x) => canonicalize(x) !== canonicalize(b.agents.find((y) => y.agentId === x.agentId)))
    .map((x) => x.agentId);
const runtimes = (dir: string): string[] =>
  (readRun(dir).run.workers as { runtime: string }[]).map((w) => w.runtime.split('/')[0]!);

describe('workers.runtime in a run configuration', () => {
  const base = example('examples/mixed-walkers.yaml');

  it('places agent workers on runtimes: one for all, or one per agent worker in order; the environment stays TypeScript', () => {
    expect(planOf(base).workers.map((w) => [w.workerId, w.runtime ?? 'typescript'])).toEqual([
      ['worker-env', 'typescript'],
      ['worker-0', 'typescript'],
      ['worker-1', 'rust'],
    ]);
    expect(planOf(withRuntime(base, 'rust')).workers.map((w) => w.runtime ?? 'typescript')).toEqual([
      'typescript',
      'rust',
      'rust',
    ]);
    const { workers, ...rest } = base;
    const { runtime: _r, ...w } = workers as Cfg;
    // Without workers.runtime every agent worker is planned on typescript explicitly (run.json's rebuild then equals it).
    expect(planOf({ ...rest, workers: w }).workers.map((x) => x.runtime)).toEqual([
      undefined,
      'typescript',
      'typescript',
    ]);
  });

  it('refuses unknown runtimes, a list of the wrong length, and a module model on a Rust worker, naming workers.runtime', () => {
    for (const bad of ['go', ['typescript', 'go'], [], 3]) {
      const e = refusal(() => planOf(withRuntime(base, bad)));
      expect(e.reason).toBe('struct_invalid_field');
      expect(e.field).toBe('workers.runtime');
      expect(e.message).toMatch(/^workers\.runtime: .*typescript or rust/);
    }
    const e = refusal(() => planOf(withRuntime(base, ['rust'])));
    expect(e.message).toBe('workers.runtime: 1 runtimes listed for 2 agent workers (one per agent worker, in order)');
    const mod = {
      ...base,
      agents: {
        ...base.agents,
        model:
          './test/workers/fixtures/' +
          readdirSync(join(REPO_ROOT, 'test/workers/fixtures')).find((f) => f.endsWith('.ts')),
      },
    };
    const m = refusal(() => planOf(withRuntime(mod, 'rust')));
    expect(m.field).toBe('workers.runtime');
    expect(m.message).toMatch(
      /worker-0 runs on rust, which hosts only the built-in agent models \(walker, lif\); agent walker-0 uses \//,
    );
  });

  it('detsim run refuses a rust runtime whose binary is missing before starting anything: one line, the build command, exit 2, no run directory', () => {
    const out = join(tmpOut(), 'runs');
    const r = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'coordinator/cli/main.ts', 'run', 'examples/mixed-walkers.yaml', '--out', out],
      {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        env: { ...process.env, DETSIM_RUST_WORKER: '/nonexistent/detsim-worker-rs' },
        timeout: 60_000,
      },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      'detsim: [struct_invalid_field] workers.runtime: rust needs the Rust worker binary, which is missing (/nonexistent/detsim-worker-rs); build it once with: bash scripts/build-rust-worker.sh\n',
    );
    expect(r.stdout).toBe('');
    expect(existsSync(out)).toBe(false);
  });

  it('detsim run refuses a Rust worker binary older than its sources (built before an upgrade) the same way, naming why', () => {
    // A fake build: cargo's dep-info beside the binary lists a source changed after the build.
    const tree = tmpOut('detsim-stale-rs-');
    const binary = join(tree, 'crates-bridge/worker/target/release/detsim-worker-rs');
    const source = join(tree, 'crates-bridge/worker/src/main.rs');
    mkdirSync(dirname(binary), { recursive: true });
    mkdirSync(dirname(source), { recursive: true });
    writeFileSync(binary, '#!/bin/sh\nexit 1\n', { mode: 0o755 });
    writeFileSync(`${binary}.d`, `${binary}: ${source}\n`);
    writeFileSync(source, 'fn main() {}\n');
    utimesSync(binary, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    const out = join(tree, 'runs');
    const r = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'coordinator/cli/main.ts', 'run', 'examples/mixed-walkers.yaml', '--out', out],
      { cwd: REPO_ROOT, encoding: 'utf8', env: { ...process.env, DETSIM_RUST_WORKER: binary }, timeout: 60_000 },
    );
    expect({ status: r.status, stderr: r.stderr, stdout: r.stdout }).toEqual({
      status: 2,
      stderr: `detsim: [struct_invalid_field] workers.runtime: rust: the Rust worker binary is not a build of this detsim's sources (its source ${source} changed after it was built); rebuild it with: bash scripts/build-rust-worker.sh\n`,
      stdout: '',
    });
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
    const resumedRuntimes = (dir: string) =>
      readRunRecord(dir).plan.workers.map((w) => [w.workerId, w.runtime ?? 'typescript']);
    expect(resumedRuntimes(mixed.dir)).toEqual([
      ['worker-env', 'typescript'],
      ['worker-0', 'typescript'],
      ['worker-1', 'rust'],
    ]);
    expect(resumedRuntimes(ts.dir).every(([, r]) => r === 'typescript')).toBe(true);
    const lines = behaviourLines(ts.dir);
    expect(lines).toHaveLength(STEPS);
    expect(behaviourLines(mixed.dir)).toEqual(lines);
    expect(behaviourLines(rust.dir)).toEqual(lines);
    expect(mixed.digest).toBe(ts.digest);
    expect(rust.digest).toBe(ts.digest);
    expect(mixed.repro).toBe(ts.repro);
    expect(rust.repro).toBe(ts.repro);
    // Injected divergence on the Rust side only: the same eight agents listed one by one, the four
    // the Rust worker hosts with another walker parameter. The unchanged list reproduces the run
    // (so the list is the same composition); the changed one differs, and its first differing step
    // differs only in Rust-hosted agents' entries: the comparison sees what the Rust worker does.
    const listed = (rustParams: Record<string, unknown> | null): Cfg => ({
      ...base,
      agents: Array.from({ length: 8 }, (_, i) => ({
        id: `walker-${i}`,
        model: 'walker',
        ...(rustParams && i >= 4 ? { params: rustParams } : {}),
      })),
    });
    const rustHosted = planOf(listed(null))
      .agents.filter((a) => a.workerId === 'worker-1')
      .map((a) => a.agentId);
    expect(rustHosted).toEqual(['walker-4', 'walker-5', 'walker-6', 'walker-7']);
    const same = await run(listed(null));
    expect(behaviourLines(same.dir)).toEqual(lines);
    expect(same.digest).toBe(ts.digest);
    const changed = await run(listed({ explore: 2 }));
    expect(runtimes(changed.dir)).toEqual(['detsim-ts', 'detsim-ts', 'detsim-rs']);
    const changedLines = behaviourLines(changed.dir);
    expect(changedLines).not.toEqual(lines);
    expect(changed.digest).not.toBe(ts.digest);
    expect(changed.repro).not.toBe(ts.repro);
    const first = changedLines.findIndex((l, k) => l !== lines[k]);
    const [was, now] = [ts.dir, changed.dir].map((dir) => readRun(dir).traces[first]!.behaviour);
    const differing = differingAgents(was!, now!);
    expect(differing.length).toBeGreaterThan(0);
    expect(differing.filter((id) => !rustHosted.includes(id))).toEqual([]);
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
