// `detsim fork --set agents[i].params.…` across languages through the built CLI: a Rust-hosted
// walker forked with a new `explore` (its StageRestore carries `rebind`, crates-bridge/worker
// agent_host.rs) is the same run as the all-TypeScript fork; and a param the model does not accept
// on restore, slipped past the coordinator by editing the fork's run.json, is refused by the worker
// itself, TypeScript, Rust and Python in the same words. The coordinator's own checks: test/checkpoint/fork-params.test.ts.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalize, parseStrict } from '../../core/formats/canonical-json.js';
import { spawnSync } from 'node:child_process';
import { CLI_MAIN, detsimCli } from '../cli-refusal.js';
import { tmpOut } from '../coordinator/helpers.js';
import { REPO_ROOT } from '../workers/harness.js';
import { ensurePythonWorker, pythonWorkerSkip } from './python-worker.js';
import { ensureRustWorker, rustWorkerSkip } from './rust-worker.js';

let work: string;

/** The CLI with a Python worker run from this checkout's source (the venv may hold an installed copy of another). */
const detsimCheckout = (args: string[]) =>
  spawnSync(process.execPath, [CLI_MAIN, ...args], {
    encoding: 'utf8',
    timeout: 110_000,
    env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'workers/python') },
  });

/** A config file: `example` with `workers.runtime` replaced. */
function withRuntime(example: string, runtime: string, name: string): string {
  const text = readFileSync(join(REPO_ROOT, example), 'utf8').replace(/^ {2}runtime: .*\n/m, '');
  const file = join(work, `${name}.yaml`);
  writeFileSync(file, text.replace(/^workers:\n/m, `workers:\n  runtime: ${runtime}\n`));
  return file;
}

/** Run `config` for `steps` steps with a checkpoint every `every`; its run directory. */
function parentRun(config: string, out: string, steps: number, every: number): string {
  const r = detsimCheckout([
    'run',
    config,
    '--steps',
    String(steps),
    '--checkpoint-every',
    String(every),
    '--out',
    out,
  ]);
  expect(r.status, r.stderr).toBe(0);
  return join(out, readFileSync(config, 'utf8').match(/^sessionId: (.*)$/m)![1]! + '-1');
}

describe.skipIf(rustWorkerSkip !== null)('detsim fork --set params on Rust agent workers (CLI)', () => {
  beforeAll(() => {
    ensureRustWorker();
    work = tmpOut('detsim-fork-rs-');
  });

  it("a Rust-hosted walker's explore changed in a fork: the same run as the all-TypeScript fork", () => {
    const forks = ['[typescript, rust]', 'typescript'].map((runtime, i) => {
      const p = parentRun(
        withRuntime('examples/mixed-walkers.yaml', runtime, `mixed-${i}`),
        join(work, `m${i}`),
        180,
        60,
      );
      const out = join(work, `m${i}-fork`);
      // walker-5 is on worker-1: the Rust worker in the mixed run.
      const r = detsimCli([
        'fork',
        p,
        '--checkpoint',
        'ckpt-e1-120',
        '--set',
        'agents[5].params.explore=2',
        '--out',
        out,
      ]);
      expect(r.status, r.stderr).toBe(0);
      return { p, out };
    });
    const runtimes = (
      parseStrict(readFileSync(join(forks[0]!.out, 'run.json'))) as { workers: { runtime: string }[] }
    ).workers.map((w) => w.runtime.split('/')[0]);
    expect(runtimes).toEqual(['detsim-ts', 'detsim-ts', 'detsim-rs']);
    const same = detsimCli(['diff', forks[0]!.out, forks[1]!.out]);
    expect(same.status, same.stdout).toBe(0);
    const diff = detsimCli(['diff', forks[0]!.p, forks[0]!.out]);
    expect(diff.status, diff.stdout).toBe(1);
    expect(diff.stdout).toContain(
      'first divergence at step 120 (agent walker-5): steps[120].behaviour.agents[agentId=walker-5].',
    );
  }, 240_000);

  it('a param the model does not accept, slipped into the fork by hand, is refused by the worker: TypeScript, Rust and Python alike', () => {
    const runtimes = pythonWorkerSkip === null ? ['typescript', 'rust', 'python'] : ['typescript', 'rust'];
    if (pythonWorkerSkip === null) ensurePythonWorker();
    const lines = runtimes.map((runtime) => {
      const p = parentRun(
        withRuntime('examples/lif-pair.yaml', runtime, `lif-${runtime}`),
        join(work, `l-${runtime}`),
        40,
        20,
      );
      const fork = join(work, `l-${runtime}-fork`);
      expect(detsimCheckout(['fork', p, '--checkpoint', 'ckpt-e1-20', '--out', fork]).status).toBe(0);
      // What the coordinator refuses at fork time (lif takes no new neurons on restore), written by hand.
      const file = join(fork, 'run.json');
      const run = parseStrict(readFileSync(file)) as {
        agents: { agentId: string; params: object; profileDigest: string }[];
        fork: Record<string, unknown>;
      };
      const a = run.agents[0]!;
      run.fork.atCheckpoint = { agents: { [a.agentId]: { params: a.params, profileDigest: a.profileDigest } } };
      a.params = { neurons: 300 };
      writeFileSync(file, canonicalize(run as never));
      const r = detsimCheckout(['resume', fork, '--checkpoint', 'ckpt-e1-20']);
      expect(r.status, r.stderr).toBe(1);
      return r.stderr.trim();
    });
    for (const line of lines)
      expect(line).toContain(
        'refused State.StageRestore: INCOMPATIBLE_STATE: agent lif-a: params.neurons: model lif-v1 does not accept a change on restore (it accepts: none)',
      );
  }, 240_000);
});
