// `detsim fork --set …params…` through the built CLI with real workers and files: a fork that changes
// an environment or agent param its model accepts on restore runs from the checkpoint under the new
// params (the checkpoint verified under the parent's), records its lineage with the params the
// checkpoint holds, and `detsim diff` names the first step that differs, at the boundary or later;
// the same fork twice, or through thread workers and an inline environment, is one run; resuming a
// fork from its base checkpoint restores with its params again; `detsim replay` of a fork forks its
// parent again and compares with the recorded fork (a missing or different parent refused); Python workers rebind as TypeScript
// ones do (Rust agent workers: test/cross-lang/fork-params.test.ts); a researcher's own TypeScript
// model module outside the checkout forks with the params its `forkParams` lists, and one it does not
// list or does not take is refused naming it, and so does a Python model class on Python workers.
// Refusals of params the built-in models do not accept, seeds and the composition: fork.test.ts.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalDigest, parseStrict } from '../../core/formats/canonical-json.js';
import { CLI_MAIN, detsimCli, expectCliRefusal } from '../cli-refusal.js';
import { REPO_ROOT } from '../workers/harness.js';
import { readRun, tmpOut } from '../coordinator/helpers.js';
import { ensurePythonWorker, pythonWorkerSkip } from '../cross-lang/python-worker.js';
import { rebindForFork } from '../../coordinator/checkpoint/fork-rebind.js';
import { recordedPlanWith } from '../../coordinator/checkpoint/run-record.js';
import { readRunJson } from '../../coordinator/session/run-json.js';

const EXAMPLE = 'examples/forage-walkers.yaml';

let work: string;
let parent: string;
let food: string;

/** The parent: 300 steps, a checkpoint every 100; the fork with food=48 from ckpt-e1-200. */
beforeAll(() => {
  work = tmpOut('detsim-fork-params-');
  const r = detsimCli(
    ['run', EXAMPLE, '--steps', '300', '--checkpoint-every', '100', '--out', join(work, 'runs')],
    110_000,
  );
  expect(r.status, r.stderr).toBe(0);
  parent = join(work, 'runs', 'forage-walkers-1');
  food = join(work, 'food');
  const f = fork(['--set', 'environment.params.food=48', '--out', food]);
  expect(f.status, f.stderr).toBe(0);
}, 120_000);

const fork = (args: string[], from = parent) =>
  detsimCli(['fork', from, '--checkpoint', 'ckpt-e1-200', ...args], 110_000);
const runJson = (dir: string) => readRun(dir).run as Record<string, Record<string, unknown>>;
const storeDigest = (dir: string, id: string) =>
  (
    parseStrict(readFileSync(join(dir, 'store', 'manifest.json'))) as {
      generations: { checkpointId: string; envelopeDigest: string }[];
    }
  ).generations.find((g) => g.checkpointId === id)!.envelopeDigest;

describe('detsim fork --set params (CLI)', () => {
  it('an environment param: the fork runs under it from boundary 200, records its lineage, and diff names step 200', () => {
    const run = runJson(food);
    const was = runJson(parent).environment!;
    expect(run.fork).toEqual({
      parent: 'forage-walkers-1',
      checkpoint: { id: 'ckpt-e1-200', envelopeDigest: storeDigest(parent, 'ckpt-e1-200'), boundary: '200' },
      overrides: [{ path: 'environment.params.food', value: 48 }],
      atCheckpoint: { environment: { params: { food: 24, height: 24, width: 24 }, profileDigest: was.profileDigest } },
    });
    const params = { food: 48, height: 24, width: 24 };
    expect(run.environment!.params).toEqual(params);
    expect(run.environment!.profileDigest).toBe(
      canonicalDigest({ model: 'forage', modelVersion: 'forage-v1', params }),
    );
    expect(readRun(food).summary).toMatchObject({ status: 'completed', stepsDone: 300 });
    // The profile digest the fork recorded is the one workers give a run of that config from the start.
    const whole = detsimCli([
      'run',
      EXAMPLE,
      '--steps',
      '5',
      '--set',
      'environment.params.food=48',
      '--out',
      join(work, 'w'),
    ]);
    expect(whole.status, whole.stderr).toBe(0);
    expect(runJson(join(work, 'w', 'forage-walkers-1')).environment!.profileDigest).toBe(
      run.environment!.profileDigest,
    );
    // Step k of the trace goes from boundary k to k + 1: the fork's first step is 200, and the food
    // it places as soon as food is eaten there changes the observations after it.
    const diff = detsimCli(['diff', parent, food]);
    expect(diff.status, diff.stdout).toBe(1);
    expect(diff.stdout).toContain(`first divergence at step 200: steps[200].behaviour.observationDigest: ${parent} "`);
    expect(diff.stdout).toContain(
      `fork: ${food} is a fork of ${parent} at checkpoint ckpt-e1-200 (boundary 200; steps from 200 on are its own; its params differ by environment.params.food=48)`,
    );
  }, 120_000);

  it('the same fork again, through thread workers and an inline environment, is the same run (DIFF=0)', () => {
    const again = join(work, 'again');
    const r = fork(['--set', 'environment.params.food=48', '--out', again, '--transport', 'thread']);
    expect(r.status, r.stderr).toBe(0);
    const inline = join(work, 'inline');
    const i = fork(['--set', 'environment.params.food=48', '--out', inline, '--environment-transport', 'inline']);
    expect(i.status, i.stderr).toBe(0);
    for (const dir of [again, inline]) {
      const same = detsimCli(['diff', food, dir]);
      expect(same.status, same.stdout).toBe(0);
      expect(same.stdout).toMatch(/^DIFF=0: the same run/);
    }
  }, 240_000);

  it("an agent param: the agent's first decision after the boundary is named", () => {
    const explore = join(work, 'explore');
    const r = fork(['--set', 'agents[2].params.explore=2', '--out', explore]);
    expect(r.status, r.stderr).toBe(0);
    expect(runJson(explore).fork!.atCheckpoint).toEqual({
      agents: {
        'walker-02': {
          params: {},
          profileDigest: (runJson(parent).agents as unknown as { profileDigest: string }[])[2]!.profileDigest,
        },
      },
    });
    const diff = detsimCli(['diff', parent, explore]);
    expect(diff.status, diff.stdout).toBe(1);
    expect(diff.stdout).toContain(
      'first divergence at step 200 (agent walker-02): steps[200].behaviour.agents[agentId=walker-02].decision.move: ',
    );
  }, 120_000);

  it('resuming the fork from its base checkpoint restores it with its params again: the same run', () => {
    const copy = join(work, 'resumed');
    cpSync(food, copy, { recursive: true });
    const r = detsimCli(['resume', copy, '--checkpoint', 'ckpt-e1-200'], 110_000);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('restored         ckpt-e1-200 at boundary 200');
    const same = detsimCli(['diff', food, copy]);
    expect(same.status, same.stdout).toBe(0);
    // From its own checkpoint (captured under the new params) it resumes as any run does.
    const own = join(work, 'own');
    cpSync(food, own, { recursive: true });
    const o = detsimCli(['resume', own, '--checkpoint', 'ckpt-e2-300', '--steps', '320'], 110_000);
    expect(o.status, o.stderr).toBe(0);
  }, 240_000);

  it('a model without param rules (run.json edited), or an environment on another runtime, is refused naming it; a Rust agent worker rebinds (before anything is written)', () => {
    const raw = parseStrict(readFileSync(join(parent, 'run.json'))) as Record<string, unknown>;
    const edited = (f: (r: Record<string, any>) => void) => {
      const r = JSON.parse(JSON.stringify(raw)) as Record<string, any>;
      f(r);
      return r as never;
    };
    const rebind = (rec: never, path: string, value: number) => {
      const overrides = [{ path, value }];
      return rebindForFork(readRunJson(rec), rec, recordedPlanWith(parent, overrides), 'ckpt-e1-200', overrides);
    };
    const python = edited((r) => (r.agents[1].model = 'python:my.walker:Walker@sha256:' + '0'.repeat(64)));
    expect(() => rebind(python, 'agents[1].params.explore', 3)).toThrow(
      '--set agents[1].params.explore: a fork cannot change it: agent walker-01 runs model python:my.walker:Walker@sha256:',
    );
    const envOnRust = edited((r) => (r.workers[0].runtime = 'detsim-rs/0.1.0'));
    expect(() => rebind(envOnRust, 'environment.params.food', 30)).toThrow(
      '--set environment.params.food: a fork cannot change it: the environment runs on the Rust worker (detsim-rs/0.1.0); only TypeScript and Python workers (and Rust agent workers) restore a checkpoint with new params',
    );
    const rs = edited((r) => (r.workers[1].runtime = 'detsim-rs/0.1.0 rustc/1.95.0'));
    expect(rebind(rs, 'agents[1].params.explore', 3).atCheckpoint).toEqual({
      agents: { 'walker-01': expect.objectContaining({ params: {} }) },
    });
  });
});

/** The CLI with the Python worker run from this checkout's source (the venv may hold an installed copy of another). */
const detsimPy = (args: string[]) =>
  spawnSync(process.execPath, [CLI_MAIN, ...args], {
    encoding: 'utf8',
    timeout: 110_000,
    env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'workers/python') },
  });

/** Two agents and a forage world, the world and walker-1 on `runtime` (walker-0 on TypeScript). */
function mixedConfig(runtime: 'python' | 'typescript'): string {
  const config = join(work, `mixed-${runtime}.yaml`);
  writeFileSync(
    config,
    [
      'sessionId: fork-py',
      'masterSeed: "7"',
      'steps: 40',
      'stepHz: 60',
      `environment: { id: forage, model: forage, params: { width: 12, height: 12, food: 8 }, runtime: ${runtime} }`,
      'agents: [{ id: walker-0, model: walker }, { id: walker-1, model: walker }]',
      `workers: { agentsPerWorker: 1, runtime: [typescript, ${runtime}] }`,
      '',
    ].join('\n'),
  );
  return config;
}

describe('detsim fork of a fork (CLI)', () => {
  it("at the fork's own base checkpoint: no --set is the fork again; another value is a sibling from the same point", () => {
    const again = join(work, 'fork-of-fork');
    const r = fork(['--out', again], food);
    expect(r.status, r.stderr).toBe(0);
    const same = detsimCli(['diff', food, again]);
    expect(same.status, same.stdout).toBe(0);
    expect(same.stdout).toMatch(/^DIFF=0: the same run/);
    const sibling = join(work, 'fork-of-fork-12');
    const s12 = fork(['--set', 'environment.params.food=12', '--out', sibling], food);
    expect(s12.status, s12.stderr).toBe(0);
    const lineage = runJson(sibling).fork as { parent: string; atCheckpoint: unknown };
    expect(lineage.parent).toBe('food');
    // The checkpoint still holds the first parent's params: that is what it is verified against.
    expect(lineage.atCheckpoint).toEqual(runJson(food).fork!.atCheckpoint);
    expect((runJson(sibling).environment as { params: { food: number } }).params.food).toBe(12);
    const differs = detsimCli(['diff', food, sibling]);
    expect(differs.status, differs.stdout).toBe(1);
    // Resumed from that base it reaches the same run again.
    const resumed = join(work, 'fork-of-fork-12-resumed');
    cpSync(sibling, resumed, { recursive: true });
    expect(detsimCli(['resume', resumed, '--checkpoint', 'ckpt-e1-200'], 110_000).status).toBe(0);
    expect(detsimCli(['diff', sibling, resumed]).status).toBe(0);
  }, 480_000);
});

describe('detsim replay of a fork (CLI)', () => {
  const lineageOf = (dir: string) => runJson(dir).fork;

  it('forks the parent again for each run and compares with the recorded fork (DIFF=0); the parent beside it or --parent', () => {
    const beside = fork(['--set', 'environment.params.food=48']);
    expect(beside.status, beside.stderr).toBe(0);
    const forkDir = `${parent}-fork-1`;
    const out = join(work, 'replayed');
    const r = detsimCli(['replay', forkDir, '--runs', '2', '--out', out], 240_000);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    const recorded = /recorded {2}([0-9a-f]{16}) {2}/.exec(r.stdout)![1]!;
    expect(r.stdout).toContain(`  forked    again from ckpt-e1-200 of ${parent} for each run\n`);
    expect(r.stdout).toContain('PASS replay        [audit_replay_stable]');
    for (const n of [1, 2]) {
      const dir = join(out, `forage-walkers-1-fork-1-replay-${n}`);
      expect(r.stdout).toMatch(new RegExp(`run ${n} {5}${recorded} {2}\\w+ +${dir}`));
      expect(lineageOf(dir)).toEqual(lineageOf(forkDir));
    }
    // A fork written elsewhere (--out) names its parent with --parent; another transport is the same run.
    const given = detsimCli(
      ['replay', food, '--parent', parent, '--out', join(work, 'given'), '--transport', 'unix'],
      240_000,
    );
    expect(given.status, given.stdout + given.stderr).toBe(0);
    expect(given.stdout).toContain('PASS replay        [audit_replay_stable]');
  }, 480_000);

  it('without its parent (a colleague given the fork alone), a fork replays from its own copy of the checkpoint', () => {
    const alone = join(work, 'colleague', 'food');
    cpSync(food, alone, { recursive: true });
    const r = detsimCli(['replay', alone, '--out', join(work, 'colleague', 'replays')], 240_000);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain(
      '  forked    again from its own copy of ckpt-e1-200 (no parent beside it) for each run\n',
    );
    expect(r.stdout).toContain('PASS replay        [audit_replay_stable]');
    // The fresh forks reproduce the original fork's ReproHash (its receipt, where it was made).
    const original = (JSON.parse(readFileSync(join(food, 'receipt.json'), 'utf8')) as { reproHash: string }).reproHash;
    expect(/recorded {2}([0-9a-f]{16}) {2}/.exec(r.stdout)![1]).toBe(original);
    expect(r.stdout.match(/^ {2}run [12] {5}([0-9a-f]{16}) /gm)).toEqual([
      `  run 1     ${original} `,
      `  run 2     ${original} `,
    ]);
  }, 240_000);

  it('a missing or different parent and --resume-at are refused before any run; a replay that differs fails', () => {
    const out = join(work, 'refused-replays');
    const missing = detsimCli(['replay', food, '--parent', join(work, 'nowhere'), '--out', out]);
    expectCliRefusal(missing, 'struct_fork_parent_missing', `--parent: ${food} is a fork of forage-walkers-1`);
    const other = join(work, 'other-seed');
    const o = detsimCli(
      ['run', EXAMPLE, '--steps', '200', '--checkpoint-every', '100', '--master-seed', '7', '--out', other],
      110_000,
    );
    expect(o.status, o.stderr).toBe(0);
    const wrong = detsimCli(['replay', food, '--parent', join(other, 'forage-walkers-1'), '--out', out]);
    expectCliRefusal(
      wrong,
      'ident_fork_parent_mismatch',
      `--parent ${join(other, 'forage-walkers-1')}: its checkpoint ckpt-e1-200`,
    );
    const resumeAt = detsimCli(['replay', food, '--parent', parent, '--resume-at', '100', '--out', out]);
    expectCliRefusal(resumeAt, 'struct_invalid_field', `--resume-at: ${food} is a fork`);
    expect(existsSync(out)).toBe(false);
    // The fresh forks are compared with the recorded one: stopped short at 250 steps they differ.
    const short = detsimCli(['replay', food, '--parent', parent, '--steps', '250', '--out', out], 240_000);
    expect(short.status, short.stdout + short.stderr).toBe(1);
    expect(short.stdout).toContain('FAIL replay        [audit_repro_hash_mismatch]');
  }, 480_000);
});

describe.skipIf(pythonWorkerSkip !== null)('detsim fork --set params with Python workers (CLI)', () => {
  it('the environment and an agent on Python workers fork with new params: the same run as on TypeScript', () => {
    ensurePythonWorker();
    const forks = (['python', 'typescript'] as const).map((runtime) => {
      const r = detsimPy(['run', mixedConfig(runtime), '--checkpoint-every', '20', '--out', join(work, runtime)]);
      expect(r.status, r.stderr).toBe(0);
      const out = join(work, `${runtime}-fork`);
      const set = ['--set', 'environment.params.food=12', '--set', 'agents[1].params.explore=2'];
      const f = detsimPy([
        'fork',
        join(work, runtime, 'fork-py-1'),
        '--checkpoint',
        'ckpt-e1-20',
        ...set,
        '--out',
        out,
      ]);
      expect(f.status, f.stderr).toBe(0);
      return out;
    });
    const runtimes = (runJson(forks[0]!).workers as unknown as { runtime: string }[]).map(
      (w) => w.runtime.split('/')[0],
    );
    expect(runtimes).toEqual(['detsim-py', 'detsim-ts', 'detsim-py']);
    const same = detsimPy(['diff', forks[0]!, forks[1]!]);
    expect(same.status, same.stdout).toBe(0);
  }, 240_000);
});

/** A model module: moves east with probability `east`% (a fork may change `east`, not `stubborn`). */
const BIASED = `import { defineAgentModel, Xorshift32 } from 'detsim/sdk';
export default defineAgentModel({
  modelVersion: 'biased-v1',
  acceptedParams: ['east', 'stubborn'],
  forkParams: ['east'],
  initialize: ({ seed, params }) => ({ rng: new Xorshift32(seed || 1), east: params.east ?? 50 }),
  prepare: (s) => ({ move: s.rng.nextUint() % 100 < s.east ? 'east' : 'west' }),
  commit: () => {},
  capture: (s) => ({ rng: s.rng.state }),
  restore: (d, { params }) => {
    const rng = new Xorshift32(1);
    rng.state = d.rng;
    return { rng, east: params.east ?? 50 };
  },
});
`;

/** The same model in Python (a class the Python worker imports from the study directory). */
const BIASED_PY = `from detsim_worker.sdk import AgentModel, Xorshift32, rng_seed


class Biased(AgentModel):
    model_version = 'biased-py-v1'
    accepted_params = ('east', 'stubborn')
    fork_params = ('east',)

    def initialize(self, ctx):
        return {'rng': Xorshift32(rng_seed(ctx.seed)), 'east': ctx.params.get('east', 50)}

    def prepare(self, state, ctx):
        return {'move': 'east' if state['rng'].next_uint() % 100 < state['east'] else 'west'}

    def commit(self, state, ctx):
        pass

    def capture(self, state):
        return {'rng': state['rng'].state}

    def restore(self, data, ctx):
        rng = Xorshift32(1)
        rng.state = data['rng']
        return {'rng': rng, 'east': ctx.params.get('east', 50)}
`;

/**
 * A study directory outside the checkout with the biased model as a module (`./biased.js`) or a
 * Python class (`python:biased:Biased`): run 300 steps, fork at 200 with agents[1].params.east=95
 * twice, and try the params the model does not let a fork change.
 */
function forkOwnModel(model: string, extra: string[]): void {
  const study = tmpOut('detsim-fork-own-');
  writeFileSync(join(study, 'package.json'), '{"name":"study","private":true,"type":"module"}');
  spawnSync('mkdir', ['-p', join(study, 'node_modules')]);
  spawnSync('ln', ['-s', REPO_ROOT, join(study, 'node_modules', 'detsim')]);
  writeFileSync(join(study, 'biased.js'), BIASED);
  writeFileSync(join(study, 'biased.py'), BIASED_PY);
  writeFileSync(
    join(study, 'run.yaml'),
    [
      'sessionId: biased',
      'masterSeed: "5"',
      'steps: 300',
      'stepHz: 60',
      'environment: { id: forage, model: forage, params: { width: 16, height: 16, food: 12 } }',
      `agents: { count: 4, prefix: b-, model: ${model}, params: { east: 50 } }`,
      ...extra,
      '',
    ].join('\n'),
  );
  const cli = (args: string[]) =>
    spawnSync(process.execPath, [join(REPO_ROOT, CLI_MAIN), ...args], {
      cwd: study,
      encoding: 'utf8',
      timeout: 110_000,
      env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'workers/python') },
    });
  const run = cli(['run', 'run.yaml', '--checkpoint-every', '100', '--out', 'runs']);
  expect(run.status, run.stderr).toBe(0);
  const from = ['fork', 'runs/biased-1', '--checkpoint', 'ckpt-e1-200', '--set', 'agents[1].params.east=95'];
  const a = cli([...from, '--out', 'a']);
  expect(a.status, a.stderr).toBe(0);
  const diff = cli(['diff', 'runs/biased-1', 'a']);
  expect(diff.status).toBe(1);
  expect(diff.stdout).toMatch(/^first divergence at step 2[0-9]{2} \(agent b-1\): /m);
  expect(diff.stdout).toContain('its params differ by agents[1].params.east=95');
  expect(cli([...from, '--out', 'b']).status).toBe(0);
  expect(cli(['diff', 'a', 'b']).stdout).toMatch(/^DIFF=0: the same run/);
  const lineage = (readRun(join(study, 'a')).run as { fork: { overrides: unknown } }).fork;
  expect(lineage.overrides).toEqual([{ path: 'agents[1].params.east', value: 95 }]);
  for (const [set, message] of [
    [
      'agents[1].params.stubborn=true',
      `does not accept a change of stubborn when it restores a state (it accepts: east); ${
        model.startsWith('python:')
          ? 'a Python model lists the params a fork may change in its fork_params'
          : 'a model lists the params a fork may change in its forkParams'
      }`,
    ],
    ['agents[1].params.west=1', 'west'],
  ] as const) {
    const r = cli(['fork', 'runs/biased-1', '--checkpoint', 'ckpt-e1-200', '--set', set, '--out', 'refused']);
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^detsim: \[struct_fork_override\] --set agents\[1\]\.params\.(stubborn|west)/);
    expect(r.stderr).toContain(message);
    expect(spawnSync('ls', [join(study, 'refused')]).status).not.toBe(0);
  }
}

describe('detsim fork --set params of your own model outside the checkout (CLI)', () => {
  it('a TypeScript module forks with the params it lists; diff names the agent at the boundary; twice is one run; others refused', () => {
    forkOwnModel('./biased.js', ['workers: { agentsPerWorker: 2, transport: thread }']);
  });

  it.skipIf(pythonWorkerSkip !== null)(
    'a Python model class does the same on Python workers',
    () => {
      forkOwnModel('python:biased:Biased', ['workers: { agentsPerWorker: 2, runtime: python }']);
    },
    240_000,
  );
});
