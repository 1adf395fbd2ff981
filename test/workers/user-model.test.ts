// A user model named by path (the user guide's SDK example, docs/guide.md; given to the worker with --model) runs in
// a real worker process: its own modelVersion is reported, its decisions are exactly the draws of
// its Xorshift32 (computed here independently of the worker), its capture holds its RNG state, and
// a fresh worker restores it and continues the same sequence. An unknown model name is refused at
// Initialize naming the field, before any agent is installed. Not the built-in models.
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Xorshift32 } from '../../core/formats/xorshift.js';
import { METHODS, type WorkerClient } from '../../core/protocol/index.js';
import { decodeState } from '../../workers/state-codec.js';
import { REPO_ROOT, STEP_60HZ, errorOf, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

const MODEL = join(REPO_ROOT, 'test/workers/fixtures/readme-model.ts');
const SEED = 77;

/** The README model's rule, written from its source: one draw per prepare, odd → east, even → west. */
function expectedMoves(rng: Xorshift32, n: number): string[] {
  return Array.from({ length: n }, () => (rng.nextUint() % 2 ? 'east' : 'west'));
}

/** Prepare and commit agent u for steps [from, to) in `epoch`; the decisions, in order. */
async function moves(client: WorkerClient, from: number, to: number, epoch = 'e1'): Promise<string[]> {
  const out: string[] = [];
  for (let k = from; k < to; k++) {
    const p = await client.call(METHODS.agentPrepare, scope(k, epoch), { agents: [{ agentId: 'u' }] });
    out.push(resultOf<{ agents: { decision: { move: string } }[] }>(p).agents[0]!.decision.move);
    resultOf(
      await client.call(METHODS.agentCommit, scope(k, epoch), {
        agents: [{ agentId: 'u', preparedRequestId: p.requestId, observation: {}, rewards: [] }],
      }),
    );
  }
  return out;
}

describe('user models', () => {
  it('runs the README example by path: its modelVersion, its exact draws, its captured RNG state, restored by a fresh worker', async () => {
    const w = await spawnWorker('agent', 'w-user', ['--model', MODEL]);
    const bad = errorOf(
      await w.client.call(METHODS.agentInitialize, scope(0), {
        agents: [{ agentId: 'u', model: 'nonesuch', params: {}, seed: 1, stepDuration: STEP_60HZ, observation: {} }],
      }),
    );
    expect(bad).toMatchObject({ code: 'INVALID_ARGUMENT', mutation: 'none' });
    expect(bad.message).toMatch(/params\.agents\[0\]\.model.*nonesuch/);
    const agent = { agentId: 'u', model: MODEL, params: {}, seed: SEED, stepDuration: STEP_60HZ, observation: {} };
    const init = resultOf<{ agents: { agentId: string; modelVersion: string }[] }>(
      await w.client.call(METHODS.agentInitialize, scope(0), { agents: [agent] }),
    );
    expect(init.agents).toMatchObject([{ agentId: 'u', modelVersion: 'my-model-v1' }]);

    const rng = new Xorshift32(SEED);
    const want = expectedMoves(rng, 12);
    // Both moves occur, so a model that always answered one of them would fail here.
    expect(new Set(want)).toEqual(new Set(['east', 'west']));
    expect(await moves(w.client, 0, 6)).toEqual(want.slice(0, 6));

    const cap = await w.client.call(METHODS.capture, scope(6), { checkpointId: 'c6', agentId: 'u' });
    const captured = resultOf<{ compatibilityDigest: string; payload: { digest: string; byteLength: string } }>(cap);
    const afterSix = new Xorshift32(SEED);
    expectedMoves(afterSix, 6);
    expect((decodeState(cap.attachment!) as { state: unknown }).state).toEqual({ rng: afterSix.state });

    // A fresh worker restores the capture and draws what the original would have drawn next.
    const fresh = await spawnWorker('agent', 'w-user-2', ['--model', MODEL]);
    const stage = {
      checkpointId: 'c6',
      agentId: 'u',
      sourceScope: scope(6),
      compatibilityDigest: captured.compatibilityDigest,
      payload: captured.payload,
    };
    const token = resultOf<{ restoreToken: string }>(
      await fresh.client.call(METHODS.stageRestore, scope(6, 'e2'), stage, { attachment: cap.attachment! }),
    ).restoreToken;
    resultOf(await fresh.client.call(METHODS.activateRestore, scope(6, 'e2'), { restoreToken: token, agentId: 'u' }));
    expect(await moves(fresh.client, 6, 12, 'e2')).toEqual(want.slice(6));
    await Promise.all([w.stop(), fresh.stop()]);
  });
});
