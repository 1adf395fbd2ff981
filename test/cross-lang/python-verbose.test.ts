// `detsim run --verbose` with a Python user model that raises: the run fails naming the worker,
// agent, step, phase and the model's error text; its Python traceback reaches the user only with
// --verbose (the launcher passes --verbose to Python workers); a NaN decision fails alike, and so do
// two strict agents that share one state (each prepare moves the other's); `replay --resume-at`
// passes --verbose on to its resume check. Not the
// in-process bad-model checks (workers/python/tests/test_strict.py) nor the missing interpreter and
// package refusals (python-run.test.ts).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../coordinator/config.js';
import { detsimAsync } from '../checkpoint/cli.js';
import { tmpOut } from '../coordinator/helpers.js';
import { REPO_ROOT } from '../workers/harness.js';
import { ensurePythonWorker, pythonWorkerSkip } from './python-worker.js';

const RAISING_MODEL = `from detsim_worker.sdk import AgentModel


class Raises(AgentModel):
    model_version = 'raises-v1'

    def initialize(self, ctx):
        return {}

    def prepare(self, state, ctx):
        return explode(ctx)

    def commit(self, state, ctx):
        pass

    def capture(self, state):
        return {}

    def restore(self, data, ctx):
        return {}


def explode(ctx):
    raise ValueError('the model broke')


class NotJson(Raises):
    def prepare(self, state, ctx):
        return {'move': float('nan')}


class Shared(Raises):
    counter = {'n': 0}

    def initialize(self, ctx):
        return Shared.counter

    def prepare(self, state, ctx):
        state['n'] += 1
        return {'move': 'east'}

    def capture(self, state):
        return {'n': state['n']}


class RestoreRaises(Raises):
    def prepare(self, state, ctx):
        return {'move': 'east'}

    def restore(self, data, ctx):
        return explode_restore(data)


def explode_restore(data):
    raise ValueError('the restore broke')
`;

/** A run config (one Python agent worker hosting `agents` of `model`, a TypeScript environment) and its module dir. */
function badModelRun(
  model = 'Raises',
  agents: Record<string, unknown>[] = [{ id: 'bad-0' }],
): { config: string; modules: string; out: string } {
  const source = 'examples/mixed-python.yaml';
  const example = parseConfigText(readFileSync(join(REPO_ROOT, source), 'utf8'), source) as Record<string, any>;
  const dir = tmpOut('detsim-pyverbose-');
  const modules = join(dir, 'modules');
  mkdirSync(modules);
  writeFileSync(join(modules, 'raising_model.py'), RAISING_MODEL);
  const config = join(dir, 'raises.json');
  writeFileSync(
    config,
    JSON.stringify({
      ...example,
      steps: 3,
      environment: { ...example.environment, runtime: 'typescript' },
      agents: agents.map((a) => ({ ...a, model: `python:raising_model:${model}` })),
      workers: { agentsPerWorker: agents.length, runtime: 'python' },
    }),
  );
  return { config, modules, out: join(dir, 'runs') };
}

describe.skipIf(pythonWorkerSkip !== null)('a Python model that raises, with and without --verbose', () => {
  beforeAll(() => ensurePythonWorker(), 60_000);

  it('fails the run naming worker, agent, step, phase and the error text; the traceback only with --verbose', async () => {
    const { config, modules, out } = badModelRun();
    const env = { PYTHONPATH: modules };
    const plain = await detsimAsync(['run', config, '--out', join(out, 'plain')], { env });
    const verbose = await detsimAsync(['run', config, '--out', join(out, 'verbose'), '--verbose'], { env });
    for (const r of [plain, verbose]) {
      expect(r.status, r.stderr).toBe(1);
      expect(r.stderr).toContain(
        'detsim: [audit_model_error] run failed: worker worker-0 (agents bad-0) answered with an error at step 0, phase prepare: ' +
          'Agent.Prepare req-4: BACKEND_FAILURE: agent bad-0: prepare failed: the model broke',
      );
    }
    expect(plain.stderr).toContain("prepare failed: the model broke (the worker's state may have changed)\n");
    expect(plain.stderr).not.toMatch(/Traceback|raising_model\.py/);
    expect(verbose.stderr).toMatch(/Traceback \(most recent call last\)/);
    expect(verbose.stderr).toMatch(/raising_model\.py", line \d+, in explode/);
    expect(verbose.stderr).toMatch(/ValueError: the model broke/);
    expect(verbose.stderr).not.toMatch(/detsim_worker[/\\]model_call\.py/);
  }, 120_000);

  it('a NaN in the decision fails the run the same way, naming the value as not JSON', async () => {
    const { config, modules, out } = badModelRun('NotJson');
    const r = await detsimAsync(['run', config, '--out', out], { env: { PYTHONPATH: modules } });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toContain(
      'detsim: [audit_model_error] run failed: worker worker-0 (agents bad-0) answered with an error at step 0, phase prepare: ' +
        'Agent.Prepare req-4: BACKEND_FAILURE: agent bad-0: prepare returned a decision that is not JSON',
    );
    expect(r.stderr).not.toMatch(/Traceback/);
  }, 120_000);

  it('replay --resume-at --verbose: a model failing only in the resume check carries its traceback', async () => {
    // The replay runs never restore; the resume check's resumed run does, and restore raises there.
    const { config, modules, out } = badModelRun('RestoreRaises');
    const r = await detsimAsync(['replay', config, '--resume-at', '1', '--out', out, '--verbose'], {
      env: { PYTHONPATH: modules },
    });
    expect(r.status, r.stderr).not.toBe(0);
    expect(r.stderr).toContain(
      'detsim: [audit_participant_refused] agent bad-0 (worker-0) refused State.StageRestore: BACKEND_FAILURE: ' +
        'agent bad-0: restore at boundary 1 failed: the restore broke',
    );
    expect(r.stderr).toMatch(/Traceback \(most recent call last\)/);
    expect(r.stderr).toMatch(/raising_model\.py", line \d+, in explode_restore/);
  }, 120_000);

  it("under strict, two agents sharing one state fail the run: the second prepare changed the first agent's state", async () => {
    const pair = ['bad-0', 'bad-1'].map((id) => ({ id, params: { strict: true } }));
    const { config, modules, out } = badModelRun('Shared', pair);
    const r = await detsimAsync(['run', config, '--out', out], { env: { PYTHONPATH: modules } });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toContain(
      'detsim: [audit_model_error] run failed: worker worker-0 (agents bad-0, bad-1) answered with an error at step 0, phase prepare: ' +
        "Agent.Prepare req-4: BACKEND_FAILURE: agent bad-0: another agent's prepare changed this agent's state " +
        '(agents on one worker must not share mutable state: give each agent its own in initialize and restore)',
    );
    expect(r.stderr).not.toMatch(/Traceback/);
  }, 120_000);
});
