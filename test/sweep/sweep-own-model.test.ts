// A sweep of a model of one's own binds the model's content: the researcher edits the model (a file
// it imports) and runs the same sweep file again — a new sweep directory, saying which model changed,
// never the old directory "continued" with every run skipped as done (the old model's results under
// the new model's sweep); a run of the old sweep started afterwards (a Slurm array task) is refused,
// naming the change. A Python model's source digest enters the plan the same way (one probe).
// Built CLI, models outside the checkout.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { planSweep, readSweepFile } from '../../coordinator/sweep/sweep-file.js';
import { sha256Hex } from '../../core/formats/canonical-json.js';
import { CLI_MAIN } from '../cli-refusal.js';
import { pythonWorkerSkip } from '../cross-lang/python-worker.js';
import { REPO_ROOT } from '../workers/harness.js';

const MODEL = `import { defineAgentModel, Xorshift32 } from 'detsim/sdk';
import { choose } from './policy.js';
export default defineAgentModel({
  modelVersion: 'greedy-v1',
  acceptedParams: ['greed'],
  initialize: ({ seed, params }) => ({ rng: new Xorshift32(seed || 1), greed: Number(params.greed ?? 30) }),
  prepare: (s) => ({ move: choose(s.rng.nextUint(), s.greed) }),
  commit: () => {},
  capture: (s) => ({ rng: s.rng.state, greed: s.greed }),
  restore: (d) => { const rng = new Xorshift32(1); rng.state = d.rng; return { rng, greed: d.greed }; },
});
`;
const policy = (east: string) =>
  `export const choose = (r, greed) => (r % 100 < greed ? 'north' : r % 2 ? '${east}' : 'west');\n`;
const BASE = `sessionId: lab
masterSeed: "7"
steps: 40
environment: { id: forage, model: forage, params: { width: 10, height: 10, food: 6 } }
agents: { count: 2, prefix: w-, model: ./my-model.js, params: { greed: 30 } }
workers: { agentsPerWorker: 2, transport: thread }
`;
const SWEEP = `base: lab.yaml
replicates: 1
checkpointEvery: 20
grid: { agents.params.greed: [10, 50] }
`;

/** A lab outside the checkout that imports detsim/sdk as an installed package would. */
function lab(): string {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-sweep-own-'));
  writeFileSync(join(dir, 'package.json'), '{"name":"lab","private":true,"type":"module"}');
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(REPO_ROOT, join(dir, 'node_modules', 'detsim'));
  writeFileSync(join(dir, 'my-model.js'), MODEL);
  writeFileSync(join(dir, 'policy.js'), policy('east'));
  writeFileSync(join(dir, 'lab.yaml'), BASE);
  writeFileSync(join(dir, 'sweep.yaml'), SWEEP);
  return dir;
}

const cli = (cwd: string, args: string[]) =>
  spawnSync(process.execPath, [join(REPO_ROOT, CLI_MAIN), ...args], { cwd, encoding: 'utf8', timeout: 120_000 });

const sweepJson = (dir: string) =>
  JSON.parse(readFileSync(join(dir, 'sweep.json'), 'utf8')) as { ownModels?: string[]; planDigest: string };

/** The module identity of my-model.js as docs/spec/model-identity.md defines it, by hand. */
function identity(dir: string): string {
  const file = (name: string) => sha256Hex(readFileSync(join(dir, name)));
  const listing = `my-model.js\t${file('my-model.js')}\npolicy.js\t${file('policy.js')}\n`;
  return `module:my-model.js@sha256:${sha256Hex(listing)}`;
}

describe('a sweep of a model of your own (CLI)', () => {
  it('an edited model is a new sweep, named as the reason; the old sweep refuses a run started after the edit', () => {
    const dir = lab();
    const first = cli(dir, ['sweep', 'sweep.yaml']);
    expect(first.status, first.stderr).toBe(0);
    const before = identity(dir);
    expect(sweepJson(join(dir, 'sweeps', 'sweep-1')).ownModels).toEqual([before]);

    // The same files again: the same sweep, continued (both runs skipped as done).
    const again = cli(dir, ['sweep', 'sweep.yaml']);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/^sweep sweeps\/sweep-1: 2 runs \(continued\), at most/m);
    expect(again.stdout.match(/^skipped /gm)).toHaveLength(2);

    writeFileSync(join(dir, 'policy.js'), policy('south'));
    const edited = cli(dir, ['sweep', 'sweep.yaml']);
    expect(edited.status, edited.stderr).toBe(0);
    expect(edited.stderr).toMatch(
      /^sweep sweeps\/sweep-2: 2 runs \(a new sweep: module:my-model\.js changed since sweeps\/sweep-1 ran\), at most/m,
    );
    expect(edited.stdout.match(/^done /gm)).toHaveLength(2);
    expect(readdirSync(join(dir, 'sweeps')).sort()).toEqual(['sweep-1', 'sweep-2']);
    const after = identity(dir);
    expect(after).not.toBe(before);
    expect(sweepJson(join(dir, 'sweeps', 'sweep-2')).ownModels).toEqual([after]);

    const task = cli(dir, ['sweep', 'task', 'sweeps/sweep-1', '0']);
    expect(task.status).toBe(2);
    expect(task.stderr.trim()).toMatch(
      /^detsim: \[struct_sweep_mismatch\] \S+sweep-1: the sweep file \S+sweep\.yaml \(or its base config, or a model of its own\) changed since this sweep began/,
    );
  }, 240_000);

  it.skipIf(pythonWorkerSkip !== null)(
    "a Python model's source digest is in the plan: an edited module, another plan",
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'detsim-sweep-py-'));
      const model = (move: string) =>
        `from detsim_worker.sdk import AgentModel\n\nclass Still(AgentModel):\n    model_version = 'still-v1'\n` +
        `    def initialize(self, ctx): return {}\n    def prepare(self, state, ctx): return {'move': '${move}'}\n` +
        `    def commit(self, state, ctx): pass\n    def capture(self, state): return {}\n    def restore(self, data, ctx): return {}\n`;
      writeFileSync(join(dir, 'still.py'), model('stay'));
      writeFileSync(
        join(dir, 'lab.yaml'),
        BASE.replace('./my-model.js, params: { greed: 30 }', 'python:still:Still').replace(
          'transport: thread',
          'runtime: python',
        ),
      );
      writeFileSync(
        join(dir, 'sweep.yaml'),
        SWEEP.replace('agents.params.greed: [10, 50]', 'environment.params.food: [4, 6]'),
      );
      const plan = () => planSweep(readSweepFile(join(dir, 'sweep.yaml')));
      const digest = (text: string) => sha256Hex(Buffer.from(text));
      const before = plan();
      expect(before.ownModels).toEqual([`python:still:Still@sha256:${digest(model('stay'))}`]);
      writeFileSync(join(dir, 'still.py'), model('east'));
      const after = plan();
      expect(after.ownModels).toEqual([`python:still:Still@sha256:${digest(model('east'))}`]);
      expect(after.planDigest).not.toBe(before.planDigest);
    },
    60_000,
  );
});
