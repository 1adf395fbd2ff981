// Agent workers as real processes over gRPC: batched Initialize/Prepare/Commit, the 60 Hz tick
// vector, idempotent retries after a dropped reply (no second tick, no second RNG draw),
// CONFLICT, STALE_EPOCH / STALE_STEP / FUTURE_STEP / RESULT_EXPIRED and phase refusals.
import { afterAll, describe, expect, it } from 'vitest';
import { METHODS, type WorkerClient } from '../../core/protocol/index.js';
import { STEP_60HZ, type SpawnedWorker, errorOf, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

const OBS = { x: 3, y: 4, foodDx: 2, foodDy: -1, score: 0 };
const AGENTS = [
  { agentId: 'a-lif', model: 'lif', params: { neurons: 64 }, seed: 1234567, stepDuration: STEP_60HZ, observation: OBS },
  { agentId: 'a-walk', model: 'walker', params: {}, seed: 22222, stepDuration: STEP_60HZ, observation: OBS },
];
const IDS = AGENTS.map((a) => ({ agentId: a.agentId }));

interface Prepared {
  agentId: string;
  ticksAdvanced: string;
  brainTicks: string;
  remainder: { numerator: string; denominator: string };
  decision: Record<string, unknown>;
}

async function boot(id: string): Promise<SpawnedWorker> {
  const w = await spawnWorker('agent', id);
  const init = resultOf<{ agents: { agentId: string; committedStep: string; tickDuration: unknown }[] }>(
    await w.client.call(METHODS.agentInitialize, scope(0), { agents: AGENTS }),
  );
  expect(init.agents.map((a) => a.agentId)).toEqual(['a-lif', 'a-walk']);
  expect(init.agents[0]!.tickDuration).toEqual({ numerator: '1000000', denominator: '1' });
  return w;
}

async function prepare(
  c: WorkerClient,
  k: number,
  requestId?: string,
): Promise<{ requestId: string; agents: Prepared[] }> {
  const r = await c.call(METHODS.agentPrepare, scope(k), { agents: IDS }, requestId ? { requestId } : {});
  return { requestId: r.requestId, agents: resultOf<{ agents: Prepared[] }>(r).agents };
}

function commitParams(prepId: string, k: number): Record<string, unknown> {
  const obs = { ...OBS, x: (OBS.x + k) % 16 };
  return {
    agents: AGENTS.map((a) => ({
      agentId: a.agentId,
      preparedRequestId: prepId,
      observation: obs,
      rewards: k % 2 === 0 ? [{ eventId: `eat-${k}-${a.agentId}`, ruleId: 'eat', value: 1 }] : [],
    })),
  };
}

async function commit(c: WorkerClient, prepId: string, k: number): Promise<void> {
  const r = resultOf<{ agents: { agentId: string; committedStep: string }[] }>(
    await c.callUnchecked(METHODS.agentCommit, scope(k), commitParams(prepId, k)),
  );
  expect(r.agents.map((a) => a.committedStep)).toEqual([String(k + 1), String(k + 1)]);
}

async function progress(c: WorkerClient): Promise<string> {
  return resultOf<{ progressCounter: string }>(await c.call(METHODS.status, null, {})).progressCounter;
}

describe('agent worker', () => {
  it('[LOCK-8] runs 16, 17, 17 ticks per 60 Hz step with 1 ms ticks, remainder 0 after three steps', async () => {
    const w = await boot('w-ticks');
    const seen: string[][] = [];
    for (let k = 0; k < 3; k++) {
      const p = await prepare(w.client, k);
      seen.push(p.agents.map((a) => a.ticksAdvanced));
      if (k === 2) {
        for (const a of p.agents) {
          expect(a.remainder).toEqual({ numerator: '0', denominator: '1' });
          expect(a.brainTicks).toBe('50');
        }
      }
      await commit(w.client, p.requestId, k);
    }
    expect(seen).toEqual([
      ['16', '16'],
      ['17', '17'],
      ['17', '17'],
    ]);
    await w.stop();
  });

  it('[LOCK-10, LOCK-14] a duplicate Prepare after a dropped reply returns the identical decision and advances no tick or RNG draw', async () => {
    const reference = await boot('w-ref');
    const tested = await boot('w-dup');
    const STEPS = 6;
    const refDecisions: Prepared[][] = [];
    for (let k = 0; k < STEPS; k++) {
      const p = await prepare(reference.client, k);
      refDecisions.push(p.agents);
      await commit(reference.client, p.requestId, k);
    }
    for (let k = 0; k < STEPS; k++) {
      let p: { requestId: string; agents: Prepared[] };
      if (k === 2) {
        tested.client.faults.dropNextReply(METHODS.agentPrepare);
        const lost = await tested.client
          .call(METHODS.agentPrepare, scope(k), { agents: IDS })
          .catch((e: unknown) => e as { kind: string; requestId: string });
        expect(lost).toMatchObject({ kind: 'reply-dropped', mutation: 'unknown' });
        const before = await progress(tested.client);
        p = await prepare(tested.client, k, (lost as { requestId: string }).requestId); // same id, same body
        const again = await prepare(tested.client, k, (lost as { requestId: string }).requestId);
        expect(await progress(tested.client)).toBe(before); // nothing re-executed
        expect(again.agents).toEqual(p.agents);
      } else {
        p = await prepare(tested.client, k);
      }
      expect(p.agents).toEqual(refDecisions[k]); // identical decisions, ticks, brainTicks, remainder
      await commit(tested.client, p.requestId, k);
    }
    await reference.stop();
    await tested.stop();
  });

  it('a retry under a new request id with the same body is also answered from the cache', async () => {
    const w = await boot('w-newid');
    const p = await prepare(w.client, 0);
    const before = await progress(w.client);
    const again = await prepare(w.client, 0);
    expect(again.requestId).not.toBe(p.requestId);
    expect(again.agents).toEqual(p.agents);
    expect(await progress(w.client)).toBe(before);
    await commit(w.client, again.requestId, 0); // either id names the Prepare
    await w.stop();
  });

  it('[LOCK-11] refuses a Commit that reuses the operation key with a different body (CONFLICT), keeping the first result', async () => {
    const w = await boot('w-conflict');
    const p = await prepare(w.client, 0);
    await commit(w.client, p.requestId, 0);
    const changed = commitParams(p.requestId, 0);
    (changed.agents as { observation: Record<string, unknown> }[])[0]!.observation = { x: 99 };
    const e = errorOf(await w.client.callUnchecked(METHODS.agentCommit, scope(0), changed));
    expect(e).toMatchObject({ code: 'CONFLICT', mutation: 'none' });
    expect(e.message).toMatch(/a-lif/);
    const same = resultOf<{ agents: unknown[] }>(
      await w.client.callUnchecked(METHODS.agentCommit, scope(0), commitParams(p.requestId, 0)),
    );
    expect(same.agents).toHaveLength(2);
    await w.stop();
  });

  it('[LOCK-9, LOCK-12] refuses old epochs, old and future steps, and out-of-phase calls before mutating', async () => {
    const w = await boot('w-stale');
    const prepIds: string[] = [];
    for (let k = 0; k < 3; k++) {
      const p = await prepare(w.client, k);
      prepIds.push(p.requestId);
      await commit(w.client, p.requestId, k);
    }
    const before = await progress(w.client);
    // the original request of an evicted step: RESULT_EXPIRED (it did run); a fresh id: STALE_STEP
    const expired = errorOf(
      await w.client.call(METHODS.agentPrepare, scope(0), { agents: IDS }, { requestId: prepIds[0] }),
    );
    expect(expired).toMatchObject({ code: 'RESULT_EXPIRED', mutation: 'applied' });
    const call = (method: string, s: ReturnType<typeof scope>, params: Record<string, unknown>) =>
      w.client.callUnchecked(method, s, params).then(errorOf);
    expect(await call(METHODS.agentPrepare, scope(3, 'e0'), { agents: IDS })).toMatchObject({
      code: 'STALE_EPOCH',
      mutation: 'none',
    });
    expect(await call(METHODS.agentPrepare, scope(0), { agents: IDS })).toMatchObject({
      code: 'STALE_STEP',
      mutation: 'none',
    });
    expect(await call(METHODS.agentPrepare, scope(5), { agents: IDS })).toMatchObject({
      code: 'FUTURE_STEP',
      mutation: 'none',
    });
    expect(await call(METHODS.agentCommit, scope(3), commitParams('req-1', 3))).toMatchObject({
      code: 'INVALID_PHASE',
      mutation: 'none',
    });
    expect(await call(METHODS.agentPrepare, scope(3), { agents: [{ agentId: 'nobody' }] })).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(await call(METHODS.agentPrepare, scope(3), { agents: IDS, extra: 1 })).toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(await call('Agent.Teleport', scope(3), {})).toMatchObject({ code: 'UNSUPPORTED' });
    expect(await call(METHODS.environmentAdvance, scope(3), {})).toMatchObject({ code: 'UNSUPPORTED' });
    expect(await progress(w.client)).toBe(before);
    const p = await prepare(w.client, 3); // still at Ready(3): nothing moved
    expect(p.agents[0]!.brainTicks).toBe('66');
    await w.stop();
  });

  it('keeps messages per step constant: one Prepare and one Commit carry every hosted agent', async () => {
    const w = await boot('w-batch');
    const p = await prepare(w.client, 0);
    expect(p.agents.map((a) => a.agentId)).toEqual(['a-lif', 'a-walk']);
    await commit(w.client, p.requestId, 0);
    await w.stop();
  });
});
