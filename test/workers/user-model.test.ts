// A user model named by path (the README's SDK example, given to the worker with --model) runs in a real worker process, and an
// unknown model name is refused at Initialize naming the field, before any agent is installed.
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { METHODS } from '../../coordinator/protocol/index.js';
import { REPO_ROOT, STEP_60HZ, errorOf, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

describe('user models', () => {
  it('runs the README example by path and captures it', async () => {
    const model = join(REPO_ROOT, 'test/workers/fixtures/readme-model.ts');
    const w = await spawnWorker('agent', 'w-user', ['--model', model]);
    const bad = errorOf(await w.client.call(METHODS.agentInitialize, scope(0), { agents: [{ agentId: 'u', model: 'nonesuch', params: {}, seed: 1, stepDuration: STEP_60HZ, observation: {} }] }));
    expect(bad).toMatchObject({ code: 'INVALID_ARGUMENT', mutation: 'none' });
    expect(bad.message).toMatch(/params\.agents\[0\]\.model.*nonesuch/);
    resultOf(await w.client.call(METHODS.agentInitialize, scope(0), { agents: [{ agentId: 'u', model, params: {}, seed: 77, stepDuration: STEP_60HZ, observation: {} }] }));
    const moves: unknown[] = [];
    for (let k = 0; k < 3; k++) {
      const p = await w.client.call(METHODS.agentPrepare, scope(k), { agents: [{ agentId: 'u' }] });
      moves.push(resultOf<{ agents: { decision: unknown }[] }>(p).agents[0]!.decision);
      resultOf(await w.client.call(METHODS.agentCommit, scope(k), { agents: [{ agentId: 'u', preparedRequestId: p.requestId, observation: {}, rewards: [] }] }));
    }
    expect(moves.every((m) => ['east', 'west'].includes((m as { move: string }).move))).toBe(true);
    const cap = await w.client.call(METHODS.capture, scope(3), { checkpointId: 'c3', agentId: 'u' });
    expect(cap.attachment!.length).toBeGreaterThan(0);
    await w.stop();
  });
});
