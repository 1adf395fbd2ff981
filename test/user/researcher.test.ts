// Plays the researcher of issue #27, outside the checkout: detsim installed from the packed tarball
// into a fresh project; a Python model whose state holds a numpy Generator (128-bit PCG64 state) and
// a numpy array, and a TypeScript model importing detsim/sdk, both beside the config; a run, the same
// run SIGKILLed after a checkpoint and resumed (DIFF=0 with the uninterrupted one); the config, models
// and run directory (without its store) copied to a colleague's directory with another HOME and replayed
// there (DIFF=0); the same study on the inline transport (DIFF=0). And the variants that must fail
// by name: a lossy capture (strict mode), a model whose behaviour depends on its own path (DIFF≠0
// naming the field), a changed model source.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { committedIds } from '../checkpoint/cli.js';
import { REPO_ROOT } from '../workers/harness.js';

const PY_MODEL = `import numpy as np
from detsim_worker.sdk import AgentModel, restore_rng, rng_state


class Forager(AgentModel):
    """Draws with a numpy Generator (uint32 draws use its half-word buffer) and learns a weight array."""
    model_version = 'forager-v1'
    accepted_params = ('rate',)

    def initialize(self, ctx):
        return {'rng': ctx.numpy_rng(), 'w': np.zeros((2, 2)), 'rate': float(ctx.params.get('rate', 0.5))}

    def prepare(self, state, ctx):
        x = int(state['rng'].integers(0, 2**32, dtype=np.uint32))
        state['w'][x % 2, (x >> 1) % 2] += state['rate']
        return {'move': ['north', 'south', 'east', 'west'][(x + int(state['w'].sum())) % 4]}

    def commit(self, state, ctx):
        state['w'] *= 0.99

    def capture(self, state):
        return {'rng': rng_state(state['rng']), 'w': state['w'], 'rate': state['rate']}

    def restore(self, data, ctx):
        return {'rng': restore_rng(data['rng']), 'w': data['w'], 'rate': data['rate']}


class Lossy(Forager):
    def capture(self, state):
        s = rng_state(state['rng'])
        return {'rng': {**s, 'state': {k: float(v) for k, v in s['state'].items()}}, 'w': state['w'], 'rate': state['rate']}

    def restore(self, data, ctx):
        s = data['rng']
        return {'rng': restore_rng({**s, 'state': {k: int(v) for k, v in s['state'].items()}}), 'w': data['w'],
                'rate': data['rate']}
`;

const TS_MODEL = (decide: string) => `import { defineAgentModel, Xorshift32 } from 'detsim/sdk';
export default defineAgentModel({
  modelVersion: 'walker-js-v1',
  initialize: ({ seed }) => ({ rng: new Xorshift32(seed || 1), steps: 0n }),
  prepare: (s) => { s.steps += 1n; return { move: ${decide} }; },
  commit: () => {},
  capture: (s) => ({ rng: s.rng.state, steps: s.steps }),
  restore: (d) => { const rng = new Xorshift32(1); rng.state = d.rng; return { rng, steps: d.steps }; },
});
`;
const MOVES = "['north', 'south', 'east', 'west'][s.rng.nextUint() % 4]";
// Path-dependent: the decision depends on where the module file lives.
const BY_PATH = "['north', 'south', 'east', 'west'][(s.rng.nextUint() + import.meta.url.length) % 4]";

const CONFIG = (py: string, ts: string, extra = '') => `sessionId: study
masterSeed: "20261205"
steps: 300
stepHz: 60
environment: { id: forage, model: forage, params: { width: 12, height: 12, food: 8 } }
agents:
  - { id: py-0, model: "${py}", params: { rate: 0.25${extra} } }
  - { id: py-1, model: "${py}" }
  - { id: js-0, model: ${ts} }
  - { id: js-1, model: ${ts} }
workers: { agentsPerWorker: 2, runtime: [python, typescript] }
`;

const home = mkdtempSync(join(tmpdir(), 'detsim-researcher-'));
const lab = join(home, 'lab');
const colleague = join(home, 'colleague');
let cli = '';
let python = '';

const detsim = (args: string[], cwd: string, env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [cli, ...args], {
    cwd,
    encoding: 'utf8',
    timeout: 240_000,
    env: { ...process.env, DETSIM_PYTHON: python, ...env },
  });

/** The ReproHash a run's receipt records. */
const reproHashOf = (runDir: string) =>
  (JSON.parse(readFileSync(join(runDir, 'receipt.json'), 'utf8')) as { reproHash: string }).reproHash;

/** A project as the researcher sets it up: detsim from the tarball, the models beside the config. */
function makeProject(dir: string, tarball: string, ts = MOVES): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'study', version: '1.0.0', type: 'module' }));
  const r = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', tarball], {
    cwd: dir,
    encoding: 'utf8',
  });
  expect(r.status, r.stderr).toBe(0);
  writeFileSync(join(dir, 'forager.py'), PY_MODEL);
  writeFileSync(join(dir, 'walker.mjs'), TS_MODEL(ts));
  writeFileSync(join(dir, 'study.yaml'), CONFIG('python:forager:Forager', './walker.mjs'));
}

describe('a researcher’s own models, outside the checkout, reproduced by a colleague', () => {
  let tarball = '';
  beforeAll(() => {
    const pack = join(home, 'pack');
    mkdirSync(pack);
    spawnSync('npm', ['pack', '--ignore-scripts', '--pack-destination', pack], { cwd: REPO_ROOT });
    tarball = join(
      pack,
      readdirSync(pack).find((f) => f.endsWith('.tgz'))!,
    );
    makeProject(lab, tarball);
    cli = join(lab, 'node_modules/detsim/dist/coordinator/cli/main.js');
    // The Python worker as the researcher installs it, from the package: pip install node_modules/detsim/workers/python.
    const venv = join(home, 'venv');
    expect(spawnSync('python3', ['-m', 'venv', venv]).status).toBe(0);
    const pkg = join(lab, 'node_modules/detsim/workers/python');
    const pip = spawnSync(join(venv, 'bin/pip'), ['install', '-q', '--disable-pip-version-check', pkg], {
      encoding: 'utf8',
    });
    expect(pip.status, pip.stderr).toBe(0);
    python = join(venv, 'bin/python');
  }, 300_000);

  it('runs; a run SIGKILLed after a checkpoint resumes to the same run (DIFF=0)', async () => {
    const whole = detsim(['run', 'study.yaml', '--checkpoint-every', '50', '--out', 'runs'], lab);
    expect(whole.status, whole.stderr).toBe(0);
    expect(whole.stdout).toContain('checkpoints      6 committed of 6 captured');
    const runDir = join(lab, 'killed', 'study-1');
    const child = spawn(process.execPath, [cli, 'run', 'study.yaml', '--checkpoint-every', '50', '--out', 'killed'], {
      cwd: lab,
      stdio: 'ignore',
      env: { ...process.env, DETSIM_PYTHON: python },
    });
    const exited = new Promise((r) => child.once('exit', r));
    while (committedIds(runDir).length < 2 && child.exitCode === null) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGKILL');
    await exited;
    expect(committedIds(runDir).length).toBeGreaterThanOrEqual(2);
    const resumed = detsim(['resume', runDir], lab);
    expect(resumed.status, resumed.stderr).toBe(0);
    const diff = detsim(['diff', join(lab, 'runs/study-1'), runDir], lab);
    expect(diff.stdout, diff.stderr).toMatch(/^DIFF=0: the same run \(ReproHash [0-9a-f]{16}, 300 steps\)/);
  }, 240_000);

  it('a run written with --out outside the lab resumes from anywhere: its Python model is found where it ran', () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'detsim-out-elsewhere-'));
    const r = detsim(['run', join(lab, 'study.yaml'), '--checkpoint-every', '50', '--out', elsewhere], home);
    expect(r.status, r.stderr).toBe(0);
    const runDir = join(elsewhere, 'study-1');
    const resumed = detsim(['resume', runDir, '--checkpoint', 'ckpt-e1-200'], tmpdir());
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(reproHashOf(runDir)).toBe(reproHashOf(join(lab, 'runs/study-1')));
  }, 240_000);

  it('the same study with --transport inline (its TypeScript model in the coordinator thread, Python still a process): DIFF=0', () => {
    const inline = detsim(['run', 'study.yaml', '--transport', 'inline', '--out', 'inline'], lab);
    expect(inline.status, inline.stderr).toBe(0);
    const diff = detsim(['diff', join(lab, 'runs/study-1'), join(lab, 'inline/study-1')], lab);
    expect(diff.stdout, diff.stderr).toMatch(/^DIFF=0: the same run/);
  }, 240_000);

  it('a colleague with the config, the models and the run directory (no store), elsewhere and with another HOME, replays it: DIFF=0', () => {
    mkdirSync(join(colleague, 'runs'), { recursive: true });
    for (const f of ['study.yaml', 'forager.py', 'walker.mjs', 'package.json', 'node_modules'])
      cpSync(join(lab, f), join(colleague, f), { recursive: true });
    cpSync(join(lab, 'runs/study-1'), join(colleague, 'runs/study-1'), {
      recursive: true,
      filter: (src) => !src.endsWith('/store'),
    });
    // As on another machine: the recorded path is gone, the module is found by name and digest beside the run.
    rmSync(join(lab, 'walker.mjs'));
    const otherHome = mkdtempSync(join(tmpdir(), 'detsim-home-'));
    const replay = detsim(['replay', 'runs/study-1', '--out', 'replays'], colleague, { HOME: otherHome });
    expect(replay.status, replay.stdout + replay.stderr).toBe(0);
    expect(replay.stdout).toMatch(/PASS replay/);
  }, 240_000);

  it("a colleague given the store too, the lab's files gone, resumes and forks it: checkpoints name no path, DIFF=0", () => {
    // The checkpoint bytes name a module by its identity, never the lab's path (the colleague's copy
    // has other paths, and the recorded one is gone: walker.mjs was removed above).
    const store = join(lab, 'runs/study-1/store');
    for (const f of readdirSync(store).filter((n) => n.endsWith('.flysess')))
      expect(readFileSync(join(store, f)).includes(Buffer.from(lab)), f).toBe(false);
    cpSync(join(lab, 'runs/study-1'), join(colleague, 'withstore/study-1'), { recursive: true });
    const resumed = detsim(['resume', 'withstore/study-1', '--checkpoint', 'ckpt-e1-250'], colleague);
    expect(resumed.status, resumed.stderr).toBe(0);
    const diff = detsim(['diff', join(lab, 'runs/study-1'), 'withstore/study-1'], colleague);
    expect(diff.stdout, diff.stderr).toMatch(/^DIFF=0: the same run/);
    const fork = detsim(['fork', 'withstore/study-1', '--checkpoint', 'ckpt-e1-250', '--out', 'forked'], colleague);
    expect(fork.status, fork.stderr).toBe(0);
    expect(fork.stdout).toContain(`repro hash       ${reproHashOf(join(lab, 'runs/study-1'))}`);
  }, 240_000);

  it('a changed model source is refused by name before any worker starts', () => {
    writeFileSync(join(colleague, 'walker.mjs'), TS_MODEL(MOVES) + '// tuned\n');
    const r = detsim(['replay', 'runs/study-1', '--out', 'changed'], colleague);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(
      /^detsim: \[ident_model_source_changed\] run\.json: agents\[2\]\.model: model source changed: module:walker\.mjs@sha256:[0-9a-f]{64} is recorded, and .*walker\.mjs has sha256 [0-9a-f]{64}\n$/,
    );
    writeFileSync(join(colleague, 'forager.py'), PY_MODEL + '# tuned\n');
    writeFileSync(join(colleague, 'walker.mjs'), TS_MODEL(MOVES));
    const py = detsim(['replay', 'runs/study-1', '--out', 'changed-py'], colleague);
    expect(py.stderr).toMatch(
      /\[ident_model_source_changed\] agents\[0\]\.model: model source changed: python:forager:Forager was sha256 [0-9a-f]{64}, its module is now sha256 [0-9a-f]{64}/,
    );
    writeFileSync(join(colleague, 'forager.py'), PY_MODEL);
    writeFileSync(join(lab, 'walker.mjs'), TS_MODEL(MOVES)); // back for the tests below
  }, 240_000);

  it('a model split over files: an edited import is a changed model, refused by name on resume; restored, the resume is the same run', () => {
    const policy = (mod: number) => `export const choose = (r) => ['north', 'south', 'east', 'west'][r % ${mod}];\n`;
    writeFileSync(join(lab, 'split-policy.mjs'), policy(4));
    writeFileSync(
      join(lab, 'split.mjs'),
      TS_MODEL('choose(s.rng.nextUint())').replace(/^/, "import { choose } from './split-policy.mjs';\n"),
    );
    writeFileSync(
      join(lab, 'split.yaml'),
      'sessionId: split\nmasterSeed: "7"\nsteps: 200\nstepHz: 60\nenvironment: { id: forage, model: forage, params: { width: 12, height: 12, food: 8 } }\nagents: { count: 2, prefix: s-, model: ./split.mjs }\n',
    );
    const whole = detsim(['run', 'split.yaml', '--checkpoint-every', '50', '--out', 'split'], lab);
    expect(whole.status, whole.stderr).toBe(0);
    const repro = (out: string) => /repro hash +([0-9a-f]{16})/.exec(out)?.[1];
    const sha = (f: string) =>
      createHash('sha256')
        .update(readFileSync(join(lab, f)))
        .digest('hex');
    const listing = `split-policy.mjs\t${sha('split-policy.mjs')}\nsplit.mjs\t${sha('split.mjs')}\n`;
    const identity = `module:split.mjs@sha256:${createHash('sha256').update(listing).digest('hex')}`;
    expect(JSON.parse(readFileSync(join(lab, 'split/split-1/run.json'), 'utf8')).agents[0].model).toBe(identity);

    writeFileSync(join(lab, 'split-policy.mjs'), policy(3)); // the researcher edits the imported file
    const edited = detsim(['resume', 'split/split-1', '--checkpoint', 'ckpt-e1-100'], lab);
    expect(edited.status, edited.stdout).toBe(2);
    expect(edited.stderr).toMatch(
      /^detsim: \[ident_model_source_changed\] .*run\.json: agents\[0\]\.model: model source changed: module:split\.mjs@sha256:[0-9a-f]{64} is recorded, and .*split\.mjs with the 1 file it imports has sha256 [0-9a-f]{64}\n$/,
    );
    rmSync(join(lab, 'split-policy.mjs')); // not copied along: named as what is missing
    const missing = detsim(['resume', 'split/split-1', '--checkpoint', 'ckpt-e1-100'], lab);
    expect(missing.status, missing.stdout).toBe(2);
    expect(missing.stderr).toMatch(
      /split\.mjs has sha256 [0-9a-f]{64}; it imports \.\/split-policy\.mjs, which is not there /,
    );
    writeFileSync(join(lab, 'split-policy.mjs'), policy(4));
    const resumed = detsim(['resume', 'split/split-1', '--checkpoint', 'ckpt-e1-100'], lab);
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(repro(resumed.stdout)).toBe(repro(whole.stdout));
  }, 240_000);

  it('a Python model importing modules of its own: all are in its digest, and an edited one is refused by name', () => {
    const pkg = join(lab, 'splitpy');
    mkdirSync(pkg, { recursive: true });
    const files: Record<string, string> = {
      'splitpy/__init__.py': '',
      'splitpy/moves.py': "MOVES = ['north', 'south', 'east', 'west']\n",
      'splitpy/model.py': PY_MODEL.replace('import numpy as np\n', 'import numpy as np\nfrom .moves import MOVES\n'),
    };
    for (const [f, text] of Object.entries(files)) writeFileSync(join(lab, f), text);
    writeFileSync(
      join(lab, 'splitpy.yaml'),
      CONFIG('python:splitpy.model:Forager', './walker.mjs').replace('study', 'splitpy'),
    );
    const run = detsim(['run', 'splitpy.yaml', '--out', 'splitpy-runs'], lab);
    expect(run.status, run.stderr).toBe(0);
    // By hand: the module's source, then "\n<path>=sha256:<digest>" per own file by path (numpy and
    // detsim_worker are installed packages, not the researcher's files; splitpy is no distribution).
    const h = createHash('sha256').update(files['splitpy/model.py']!);
    for (const f of ['splitpy/__init__.py', 'splitpy/moves.py'])
      h.update(`\n${f}=sha256:${createHash('sha256').update(files[f]!).digest('hex')}`);
    const recorded = JSON.parse(readFileSync(join(lab, 'splitpy-runs/splitpy-1/run.json'), 'utf8')).agents[0].model;
    expect(recorded).toBe(`python:splitpy.model:Forager@sha256:${h.digest('hex')}`);
    writeFileSync(join(lab, 'splitpy/moves.py'), "MOVES = ['south', 'north', 'east', 'west']\n");
    const edited = detsim(['replay', 'splitpy-runs/splitpy-1', '--out', 'splitpy-replays'], lab);
    expect(edited.status, edited.stdout).toBe(2);
    expect(edited.stderr).toMatch(
      /\[ident_model_source_changed\] agents\[0\]\.model: model source changed: python:splitpy\.model:Forager was sha256 [0-9a-f]{64}, its module is now sha256 [0-9a-f]{64}\n/,
    );
    rmSync(join(lab, 'splitpy/moves.py')); // not copied along: named as what Python cannot find
    const lost = detsim(['replay', 'splitpy-runs/splitpy-1', '--out', 'splitpy-replays'], lab);
    expect(lost.status, lost.stdout).toBe(2);
    expect(lost.stderr).toMatch(/; it imports splitpy\.moves, which Python cannot find here /);
  }, 240_000);

  it('a Python model that cannot be imported is named at its file and line, as the model field (no run directory)', () => {
    const cases: [string, Record<string, string>, string, RegExp][] = [
      [
        'a syntax error in a module it imports',
        { '__init__.py': '', 'moves.py': 'MOVES = [,,]\n', 'model.py': 'from .moves import MOVES\n' },
        'model:Forager',
        /^detsim: \[struct_invalid_field\] agents\[0\]\.model: brokenpy\/moves\.py:1: SyntaxError: invalid syntax\n$/,
      ],
      [
        'an error at its top level',
        { '__init__.py': '', 'model.py': 'import os\nSCALE = 1 / 0\n' },
        'model:Forager',
        /^detsim: \[struct_invalid_field\] agents\[0\]\.model: brokenpy\/model\.py:2: ZeroDivisionError: division by zero\n$/,
      ],
      [
        'a class it does not have',
        { '__init__.py': '', 'model.py': PY_MODEL },
        'model:Foragr',
        /^detsim: \[struct_invalid_field\] agents\[0\]\.model: python:brokenpy\.model:Foragr: brokenpy\/model\.py has no 'Foragr'\n$/,
      ],
    ];
    for (const [what, files, spec, expected] of cases) {
      rmSync(join(lab, 'brokenpy'), { recursive: true, force: true });
      mkdirSync(join(lab, 'brokenpy'));
      for (const [f, text] of Object.entries(files)) writeFileSync(join(lab, 'brokenpy', f), text);
      writeFileSync(join(lab, 'broken.yaml'), CONFIG(`python:brokenpy.${spec}`, './walker.mjs'));
      const r = detsim(['run', 'broken.yaml', '--out', 'broken-runs'], lab);
      expect(r.status, what).toBe(2);
      expect(r.stderr, what).toMatch(expected);
      expect(existsSync(join(lab, 'broken-runs')), what).toBe(false);
    }
  }, 240_000);

  it('a library of the project installed as a distribution (editable) is not the model’s own; a plain module beside it is', () => {
    mkdirSync(join(lab, 'libpkg/src/edlib'), { recursive: true });
    const lib = 'K = 3\n';
    writeFileSync(join(lab, 'libpkg/src/edlib/__init__.py'), lib);
    const model = PY_MODEL.replace('import numpy as np\n', 'import numpy as np\nimport edlib\n');
    writeFileSync(join(lab, 'edmodel.py'), model);
    writeFileSync(join(lab, 'ed.yaml'), CONFIG('python:edmodel:Forager', './walker.mjs').replace('study', 'ed'));
    const purelib = spawnSync(python, ['-c', "import sysconfig; print(sysconfig.get_paths()['purelib'])"], {
      encoding: 'utf8',
    }).stdout.trim();
    // What a legacy editable install (setup.py develop) leaves: a .pth entry, and its dist-info.
    writeFileSync(join(purelib, 'edlib.pth'), `${join(lab, 'libpkg/src')}\n`);
    const digestOf = (dir: string) => {
      expect(detsim(['run', 'ed.yaml', '--steps', '5', '--out', dir], lab).status).toBe(0);
      return JSON.parse(readFileSync(join(lab, dir, 'ed-1/run.json'), 'utf8')).agents[0].model as string;
    };
    const sha = (t: string) => createHash('sha256').update(t).digest('hex');
    // On the path only, edlib is a module of the project's own: in the digest.
    expect(digestOf('ed-plain')).toBe(
      `python:edmodel:Forager@sha256:${sha(`${model}\nlibpkg/src/edlib/__init__.py=sha256:${sha(lib)}`)}`,
    );
    const info = join(purelib, 'edlib-0.1.0.dist-info');
    mkdirSync(info);
    writeFileSync(join(info, 'METADATA'), 'Metadata-Version: 2.1\nName: edlib\nVersion: 0.1.0\n');
    writeFileSync(join(info, 'top_level.txt'), 'edlib\n');
    try {
      expect(digestOf('ed-installed')).toBe(`python:edmodel:Forager@sha256:${sha(model)}`);
    } finally {
      rmSync(info, { recursive: true });
      rmSync(join(purelib, 'edlib.pth'));
    }
  }, 240_000);

  it('a lossy capture fails by name under strict mode, never commits, and stops the run at that boundary', () => {
    writeFileSync(join(lab, 'lossy.yaml'), CONFIG('python:forager:Lossy', './walker.mjs', ', strict: true'));
    const r = detsim(['run', 'lossy.yaml', '--checkpoint-every', '100', '--out', 'lossy'], lab);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toMatch(
      /^detsim: \[audit_participant_refused\] run failed: worker worker-0 \(agents py-0\) answered with an error at step 100, phase capture: agent py-0: capture is not exact: state \$\.rng\.bit_generator\.state\.state\.(inc|state) differs after a restore.*; no checkpoint of this run can be taken, so it stops: .*docs\/spec\/state-codec\.md/m,
    );
    expect(committedIds(join(lab, 'lossy/study-1'))).toEqual([]);
    const summary = JSON.parse(readFileSync(join(lab, 'lossy/study-1/summary.json'), 'utf8'));
    expect(summary).toMatchObject({ status: 'failed', stepsDone: 100, failure: { phase: 'capture', step: '100' } });
  }, 240_000);

  it('a model whose behaviour depends on its own path gives DIFF≠0 elsewhere, naming step, agent and field', () => {
    const a = join(home, 'path-a');
    const b = join(home, 'path-b-longer');
    for (const dir of [a, b]) {
      mkdirSync(dir);
      cpSync(join(lab, 'node_modules'), join(dir, 'node_modules'), { recursive: true });
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
      writeFileSync(join(dir, 'forager.py'), PY_MODEL);
      writeFileSync(join(dir, 'walker.mjs'), TS_MODEL(BY_PATH));
      writeFileSync(join(dir, 'study.yaml'), CONFIG('python:forager:Forager', './walker.mjs'));
      expect(detsim(['run', 'study.yaml', '--out', 'runs'], dir).status).toBe(0);
    }
    const diff = detsim(['diff', join(a, 'runs/study-1'), join(b, 'runs/study-1')], home);
    expect(diff.status).toBe(1);
    expect(diff.stdout).toMatch(/first divergence at step 0 \(agent js-0\): .*move/);
  }, 240_000);
});

it('the researcher’s home is outside the checkout', () => {
  expect(home.startsWith(REPO_ROOT)).toBe(false);
  expect(existsSync(home)).toBe(true);
});
