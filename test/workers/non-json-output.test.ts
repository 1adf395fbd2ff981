// A model whose output is not JSON data (NaN in a decision) gets its request answered with a named
// BACKEND_FAILURE instead of no reply at all (which left the coordinator waiting for the step
// deadline), and the worker keeps serving. Real worker process over gRPC. NOT strict mode.
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { METHODS } from '../../core/protocol/index.js';
import { REPO_ROOT, STEP_60HZ, errorOf, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

const MODEL = join(REPO_ROOT, 'test/workers/fixtures/nan-agent.ts');

describe('model output that is not JSON data', () => {
  it('a decision carrying NaN is refused as BACKEND_FAILURE naming the method and the value; the worker still answers', async () => {
    const w = await spawnWorker('agent', 'w-nan', ['--model', MODEL]);
    const agents = [{ agentId: 'u-nan', model: MODEL, params: {}, seed: 1, stepDuration: STEP_60HZ, observation: {} }];
    resultOf(await w.client.call(METHODS.agentInitialize, scope(0), { agents }));
    const reply = await w.client.call(
      METHODS.agentPrepare,
      scope(0),
      { agents: [{ agentId: 'u-nan' }] },
      { deadlineMs: 10_000 },
    );
    const e = errorOf(reply);
    expect(e.code).toBe('BACKEND_FAILURE');
    expect(e.message).toMatch(/^Agent\.Prepare: the model returned a value that is not JSON data: .*NaN/);
    expect(resultOf<{ state: string }>(await w.client.call(METHODS.status, null, {})).state).toBeTypeOf('string');
    await w.stop();
  });
});
