// Params are used or refused (issue #27): a param that a model of one's own does not declare is
// refused at plan time, naming it, before any run directory is made, for a Python model (the
// plan-time probe runs its resolve_params) and a JavaScript module (one node child loads it); and the
// same config without that param runs. Built CLI, models outside the checkout, no DETSIM_PYTHON.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI_MAIN } from '../cli-refusal.js';
import { REPO_ROOT } from '../workers/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'detsim-params-'));
writeFileSync(
  join(dir, 'quiet.py'),
  `from detsim_worker.sdk import AgentModel\n\nclass Quiet(AgentModel):\n    model_version = 'quiet-v1'\n    accepted_params = ('rate',)\n` +
    `    def initialize(self, ctx): return {'n': 0}\n    def prepare(self, state, ctx): return {'move': 'stay'}\n` +
    `    def commit(self, state, ctx): pass\n    def capture(self, state): return dict(state)\n    def restore(self, data, ctx): return dict(data)\n` +
    `\nclass Silent(Quiet):\n    accepted_params = ()\n`,
);
writeFileSync(
  join(dir, 'quiet.mjs'),
  `import { defineAgentModel } from '${join(REPO_ROOT, 'dist/workers/sdk.js')}';\nexport default defineAgentModel({ modelVersion: 'quiet-js-v1', ` +
    `initialize: () => ({}), prepare: () => ({ move: 'stay' }), commit: () => {}, capture: () => ({}), restore: () => ({}) });\n`,
);
const config = (name: string, agent: object) => {
  const path = join(dir, `${name}.json`);
  const env = { id: 'forage', model: 'forage', params: { width: 6, height: 6, food: 2 } };
  writeFileSync(
    path,
    JSON.stringify({
      sessionId: name,
      masterSeed: '3',
      steps: 3,
      environment: env,
      agents: [agent],
      workers: {
        agentsPerWorker: 1,
        ...(String((agent as { model: string }).model).startsWith('python:') ? { runtime: 'python' } : {}),
      },
    }),
  );
  return path;
};
const run = (path: string, out: string) => {
  const env = { ...process.env };
  delete env.DETSIM_PYTHON;
  return spawnSync(process.execPath, [join(REPO_ROOT, CLI_MAIN), 'run', path, '--out', out], {
    cwd: dir,
    encoding: 'utf8',
    env,
    timeout: 120_000,
  });
};

describe('a param the model does not take is refused at plan time, naming it', () => {
  // A model that declares no params is told how it would declare one, in its own language's words.
  const declare = (accepted: string, resolve: string) =>
    `: the model declares no params: list the ones it reads in its ${accepted}, or check them in ${resolve}`;
  it.each([
    ['python', { id: 'q-0', model: 'python:quiet:Quiet', params: { rate: 0.5, food: 12 } }, '(allowed: rate)'],
    [
      'python (no params)',
      { id: 'q-0', model: 'python:quiet:Silent', params: { food: 12 } },
      `(allowed: none)${declare('accepted_params', 'resolve_params')}`,
    ],
    [
      'javascript',
      { id: 'q-0', model: './quiet.mjs', params: { food: 12 } },
      `(allowed: none)${declare('acceptedParams', 'resolveParams')}`,
    ],
  ])(
    '%s model',
    (name, agent, why) => {
      const slug = name.replace(/\W+/g, '-');
      const out = join(dir, `${slug}-runs`);
      const r = run(config(`${slug}-bad`, agent), out);
      expect([r.status, r.stdout], r.stderr).toEqual([2, '']);
      expect(r.stderr).toBe(`detsim: [struct_unknown_field] agents[0].params: unknown field "food" ${why}\n`);
      expect(existsSync(out)).toBe(false);
      const { food: _food, ...rest } = agent.params as Record<string, unknown>;
      const ok = run(config(`${slug}-good`, { ...agent, params: rest }), out);
      expect(ok.status, ok.stderr).toBe(0);
    },
    120_000,
  );
});
