// A worker started by hand on "another host" whose copy of the run's model module differs: each
// hand-started worker of a rendezvous run loads the model from its own disk at the path the
// coordinator names. Another host is simulated by a private mount namespace (`unshare --mount`) in
// which the model's imported file ./policy.mjs is bind-mounted over by another version — the same
// path, other bytes, as on a second machine. A run must be refused before it starts (exit 2,
// `ident_model_source_changed`, naming the worker, its agents and the model's files, no run
// directory), never run one model under the other's identity; a resume onto such a worker is
// refused by the restore naming the copy the worker loaded. The same workers with the same files
// run (the control). Skips (saying why) only when not root or without util-linux's unshare.
// A worker given the model at another path than the coordinator names is refused before the run too.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { moduleIdentity } from '../../core/models/identity.js';
import { CLI_MAIN } from '../cli-refusal.js';
import { ensurePythonWorker } from '../cross-lang/python-worker.js';
import { REPO_ROOT } from '../workers/harness.js';
import { HAND_SECRET, startHandWorker, stopAll, type HandWorker } from './hand-workers.js';

function namespaceSkip(): string | null {
  if (process.getuid?.() !== 0) return 'model-copy rendezvous test skipped: needs root (unshare --mount)';
  if (spawnSync('unshare', ['--version']).error) return 'model-copy rendezvous test skipped: no unshare (util-linux)';
  return null;
}
const skip = namespaceSkip();
if (skip) console.warn(skip);

afterEach(stopAll);

const MODEL = `import { defineAgentModel, Xorshift32 } from 'detsim/sdk';
import { choose } from './policy.mjs';
export default defineAgentModel({
  modelVersion: 'copy-v1',
  initialize: ({ seed }) => ({ rng: new Xorshift32(seed || 1) }),
  prepare: (s) => ({ move: choose(s.rng.nextUint()) }),
  commit: () => {},
  capture: (s) => ({ rng: s.rng.state }),
  restore: (d) => { const rng = new Xorshift32(1); rng.state = d.rng; return { rng }; },
});
`;
const policy = (dir: string) => `export const choose = (r) => (r % 3 === 0 ? '${dir}' : r % 2 ? 'east' : 'west');\n`;

/** A lab: the model importing ./policy.mjs, detsim as its package, a config placing 1 agent + the environment by rendezvous. */
function lab(): { dir: string; rv: string; config: string; other: string } {
  const dir = mkdtempSync(join(tmpdir(), 'ds-model-copy-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(REPO_ROOT, join(dir, 'node_modules', 'detsim'));
  writeFileSync(join(dir, 'my-model.mjs'), MODEL);
  writeFileSync(join(dir, 'policy.mjs'), policy('north'));
  const other = join(dir, 'other-host-policy.mjs');
  writeFileSync(other, policy('south'));
  const rv = join(dir, 'rv');
  mkdirSync(rv);
  const config = join(dir, 'study.json');
  const workers = { placement: 'rendezvous', rendezvous: { dir: rv, timeoutSeconds: 60, tokenFile: HAND_SECRET } };
  writeFileSync(
    config,
    JSON.stringify({
      sessionId: 'copy',
      masterSeed: '7',
      steps: 40,
      stepHz: 60,
      environment: { id: 'forage', model: 'forage', params: { width: 8, height: 8, food: 4 } },
      agents: { count: 2, prefix: 'w-', model: './my-model.mjs' },
      workers,
    }),
  );
  return { dir, rv, config, other };
}

/** The two workers of the lab's run, the agent worker inside a mount namespace that sees `policyOver` as ./policy.mjs. */
function startWorkers(l: ReturnType<typeof lab>, policyOver?: string): HandWorker[] {
  const extra = ['--session', 'copy'];
  const env = startHandWorker({ workerId: 'worker-env', role: 'environment', rendezvous: l.rv, extra });
  const model = join(l.dir, 'my-model.mjs');
  const agentExtra = [...extra, '--model', model];
  if (!policyOver)
    return [env, startHandWorker({ workerId: 'worker-0', role: 'agent', rendezvous: l.rv, extra: agentExtra })];
  // Inside the namespace: bind the other host's policy over this one, then exec the worker (its argv follows "$@").
  const mount = `mount --bind "${policyOver}" "${join(l.dir, 'policy.mjs')}" && exec "$@"`;
  const prefix = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', mount, 'sh'];
  return [env, startHandWorker({ workerId: 'worker-0', role: 'agent', rendezvous: l.rv, extra: agentExtra, prefix })];
}

function detsim(args: string[], cwd: string) {
  return spawnSync(process.execPath, [join(REPO_ROOT, CLI_MAIN), ...args], { cwd, encoding: 'utf8', timeout: 60_000 });
}

describe('a hand-started worker with another copy of the model', () => {
  it.skipIf(skip !== null)(
    'a run is refused before it starts (exit 2, the worker and files named, no run directory); with the same files it runs',
    async () => {
      const l = lab();
      const mine = moduleIdentity(join(l.dir, 'my-model.mjs'));
      await Promise.all(startWorkers(l, l.other).map((w) => w.ready));
      const out = join(l.dir, 'runs');
      const refused = detsim(['run', l.config, '--out', out], l.dir);
      expect(refused.status, refused.stderr).toBe(2);
      const line = refused.stderr.trim();
      expect(line.split('\n')).toHaveLength(1);
      expect(line).toMatch(/^detsim: \[ident_model_source_changed\] worker worker-0 \(agents w-0, w-1\)/);
      expect(line).toContain(`this machine's copy is ${mine}`);
      expect(line).toContain("the model's files (./my-model.mjs, ./policy.mjs) differ on the worker's host");
      expect(line).toContain('nothing was written');
      expect(readdirSync(out)).toEqual([]);
      // The loaded identity the worker named is its own copy's: the other policy under the same names.
      const other = mkdtempSync(join(tmpdir(), 'ds-model-copy-other-'));
      writeFileSync(join(other, 'my-model.mjs'), MODEL);
      writeFileSync(join(other, 'policy.mjs'), policy('south'));
      expect(line).toContain(`the worker loaded ${moduleIdentity(join(other, 'my-model.mjs'))}`);

      await stopAll();
      await Promise.all(startWorkers(l).map((w) => w.ready));
      const ran = detsim(['run', l.config, '--out', out, '--json'], l.dir);
      expect(ran.status, ran.stderr).toBe(0);
      const runJson = JSON.parse(readFileSync(join(out, 'copy-1', 'run.json'), 'utf8'));
      expect(runJson.agents.map((a: { model: string }) => a.model)).toEqual([mine, mine]);
    },
  );

  it('a worker given the model at another path is refused before the run starts (exit 2, no run directory)', async () => {
    const l = lab();
    const elsewhere = join(l.dir, 'elsewhere');
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, 'my-model.mjs'), MODEL);
    writeFileSync(join(elsewhere, 'policy.mjs'), policy('north'));
    const extra = ['--session', 'copy'];
    const workers = [
      startHandWorker({ workerId: 'worker-env', role: 'environment', rendezvous: l.rv, extra }),
      startHandWorker({
        workerId: 'worker-0',
        role: 'agent',
        rendezvous: l.rv,
        extra: [...extra, '--model', join(elsewhere, 'my-model.mjs')],
      }),
    ];
    await Promise.all(workers.map((w) => w.ready));
    const out = join(l.dir, 'runs');
    const refused = detsim(['run', l.config, '--out', out], l.dir);
    expect(refused.status, refused.stderr).toBe(2);
    const line = refused.stderr.trim();
    expect(line.split('\n')).toHaveLength(1);
    expect(line).toMatch(
      /^detsim: \[perm_model_not_launched\] worker worker-0 \(agents w-0, w-1\) is not the expected worker at step 0, phase agent-initialize: /,
    );
    expect(line).toContain(`model "${join(l.dir, 'my-model.mjs')}" was not launched with this worker`);
    expect(line).toContain(
      'a worker started by hand must be given each model with --model at the path this coordinator names',
    );
    expect(line).toMatch(/nothing was written$/);
    expect(readdirSync(out)).toEqual([]);
  });

  it.skipIf(skip !== null)(
    'a resume onto such a worker is refused by the restore, naming the copy the worker loaded',
    async () => {
      const l = lab();
      await Promise.all(startWorkers(l).map((w) => w.ready));
      const out = join(l.dir, 'runs');
      const ran = detsim(['run', l.config, '--out', out, '--checkpoint-every', '20', '--steps', '20'], l.dir);
      expect(ran.status, ran.stderr).toBe(0);
      const runDir = join(out, 'copy-1');
      // Asked for 40 steps in all, it continues from ckpt-e1-20 on fresh hand-started workers.
      await stopAll();
      await Promise.all(startWorkers(l, l.other).map((w) => w.ready));
      const resumed = detsim(['resume', runDir, '--steps', '40'], l.dir);
      expect(resumed.status, resumed.stderr).toBe(1);
      const other = mkdtempSync(join(tmpdir(), 'ds-model-copy-other-'));
      writeFileSync(join(other, 'my-model.mjs'), MODEL);
      writeFileSync(join(other, 'policy.mjs'), policy('south'));
      expect(resumed.stderr).toContain(`this worker loaded ${moduleIdentity(join(other, 'my-model.mjs'))}`);
      expect(resumed.stderr).toContain("the checkpoint was taken with another copy of the model's files");
    },
  );
});

const PY_AGENT = `from detsim_worker.sdk import AgentModel
from .policy import choose


class Agent(AgentModel):
    model_version = 'pycopy-v1'

    def initialize(self, ctx):
        return {'n': ctx.seed & 0xFFFF}

    def prepare(self, state, ctx):
        state['n'] = (state['n'] * 1103515245 + 12345) % 2147483648
        return {'move': choose(state['n'])}

    def commit(self, state, ctx):
        pass

    def capture(self, state):
        return {'n': state['n']}

    def restore(self, data, ctx):
        return {'n': data['n']}
`;
const pyPolicy = (dir: string) =>
  `def choose(r):\n    return '${dir}' if r % 3 == 0 else ('east' if r % 2 else 'west')\n`;
const sha = (b: string) => createHash('sha256').update(b).digest('hex');

/** The lab with a Python package model (its own module pymod/policy.py) on a hand-started Python agent worker. */
function pyLab() {
  const python = ensurePythonWorker();
  const l = lab();
  mkdirSync(join(l.dir, 'pymod'));
  writeFileSync(join(l.dir, 'pymod', '__init__.py'), '');
  writeFileSync(join(l.dir, 'pymod', 'agent.py'), PY_AGENT);
  writeFileSync(join(l.dir, 'pymod', 'policy.py'), pyPolicy('north'));
  const other = join(l.dir, 'other-policy.py');
  writeFileSync(other, pyPolicy('south'));
  const spec = 'python:pymod.agent:Agent';
  const cfg = JSON.parse(readFileSync(l.config, 'utf8'));
  cfg.agents.model = spec;
  cfg.workers.runtime = 'python';
  writeFileSync(l.config, JSON.stringify(cfg));
  /** The identity docs/spec/model-identity.md defines, computed here by hand. */
  const identity = (policyText: string) =>
    `${spec}@sha256:${sha(`${PY_AGENT}\npymod/__init__.py=sha256:${sha('')}\npymod/policy.py=sha256:${sha(policyText)}`)}`;
  /** The environment (TypeScript) and the Python agent worker, the latter seeing the other policy when `otherHost`. */
  const start = async (otherHost: boolean): Promise<void> => {
    const env = startHandWorker({
      workerId: 'worker-env',
      role: 'environment',
      rendezvous: l.rv,
      extra: ['--session', 'copy'],
    });
    const mount = `mount --bind "${other}" "${join(l.dir, 'pymod', 'policy.py')}" && exec "$@"`;
    const agent = startHandWorker({
      workerId: 'worker-0',
      role: 'agent',
      rendezvous: l.rv,
      python,
      extra: ['--session', 'copy', '--model', spec, '--model-path', l.dir],
      ...(otherHost ? { prefix: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', mount, 'sh'] } : {}),
    });
    await Promise.all([env.ready, agent.ready]);
  };
  const cli = (args: string[]) =>
    spawnSync(process.execPath, [join(REPO_ROOT, CLI_MAIN), ...args], {
      cwd: l.dir,
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, DETSIM_PYTHON: python },
    });
  return { ...l, identity, start, cli, out: join(l.dir, 'runs') };
}

describe('a hand-started Python worker with another copy of the model', () => {
  it.skipIf(skip !== null)(
    'the run is refused before it starts, naming both identities (each recomputed here by hand)',
    async () => {
      const l = pyLab();
      await l.start(true);
      const refused = l.cli(['run', l.config, '--out', l.out]);
      expect(refused.status, refused.stderr).toBe(2);
      const line = refused.stderr.trim();
      expect(line).toMatch(/^detsim: \[ident_model_source_changed\] worker worker-0 \(agents w-0, w-1\)/);
      expect(line).toContain(`the worker loaded ${l.identity(pyPolicy('south'))}`);
      expect(line).toContain(`this machine's copy is ${l.identity(pyPolicy('north'))}`);
      expect(readdirSync(l.out)).toEqual([]);
    },
  );

  it.skipIf(skip !== null)('a resume onto it is refused at its restore, naming both identities', async () => {
    const l = pyLab();
    await l.start(false);
    const ran = l.cli(['run', l.config, '--out', l.out, '--checkpoint-every', '20', '--steps', '20']);
    expect(ran.status, ran.stderr).toBe(0);
    await stopAll();
    await l.start(true);
    const resumed = l.cli(['resume', join(l.out, 'copy-1'), '--steps', '40']);
    expect(resumed.status, resumed.stderr).toBe(1);
    expect(resumed.stderr).toContain('[ident_model_source_changed] agent w-0 (worker-0): agent w-0');
    expect(resumed.stderr).toContain(`the worker loaded ${l.identity(pyPolicy('south'))}`);
    expect(resumed.stderr).toContain(`this machine's copy is ${l.identity(pyPolicy('north'))}`);
  });
});
