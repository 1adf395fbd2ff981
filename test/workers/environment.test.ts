// The environment worker (forage) as a real process: Initialize observations sorted by agent,
// Advance in port order with rewards and event ids, idempotent retries, CONFLICT, and refusals of
// a batch that is not in port order.
import { afterAll, describe, expect, it } from 'vitest';
import { canonicalDigest } from '../../core/formats/canonical-json.js';
import { METHODS } from '../../core/protocol/index.js';
import { STEP_60HZ, errorOf, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

const PORTS = [
  { portId: 'p0', agentId: 'b' },
  { portId: 'p1', agentId: 'a' },
];
const INIT = {
  environmentId: 'world',
  model: 'forage',
  params: { width: 8, height: 6, food: 5 },
  seed: 99,
  stepDuration: STEP_60HZ,
  ports: PORTS,
};

interface Obs {
  agentId: string;
  observation: { x: number; y: number; foodDx: number; foodDy: number; score: number };
}
interface AdvanceResult {
  batchId: string;
  appliedFromStep: string;
  nextStep: string;
  appliedControlsDigest: string;
  observations: Obs[];
  rewards: { agentId: string; eventId: string; ruleId: string; value: number }[];
  eventIds: string[];
  worldDigest: string;
}

function actionsToward(obs: Obs[]): Record<string, unknown>[] {
  const byAgent = new Map(obs.map((o) => [o.agentId, o.observation]));
  return PORTS.map((p) => {
    const o = byAgent.get(p.agentId)!;
    const move =
      o.foodDx > 0 ? 'east' : o.foodDx < 0 ? 'west' : o.foodDy > 0 ? 'south' : o.foodDy < 0 ? 'north' : 'stay';
    return { portId: p.portId, agentId: p.agentId, action: { move } };
  });
}

describe('environment worker (forage)', () => {
  it('[LOCK-10] initializes, advances with rewards for food eaten, and answers duplicates from its cache', async () => {
    const w = await spawnWorker('environment', 'env');
    const init = resultOf<{ boundary: string; modelVersion: string; observations: Obs[] }>(
      await w.client.call(METHODS.environmentInitialize, scope(0), INIT),
    );
    expect(init.boundary).toBe('0');
    expect(init.modelVersion).toBe('forage-v1');
    expect(init.observations.map((o) => o.agentId)).toEqual(['a', 'b']); // sorted by agent id
    let obs = init.observations;
    let eaten = 0;
    let last: AdvanceResult | undefined;
    for (let k = 0; k < 30; k++) {
      const params = { batchId: `batch-e1-${k}`, actions: actionsToward(obs) };
      const r = resultOf<AdvanceResult>(await w.client.callUnchecked(METHODS.environmentAdvance, scope(k), params));
      expect(r).toMatchObject({ appliedFromStep: String(k), nextStep: String(k + 1), batchId: `batch-e1-${k}` });
      expect(r.appliedControlsDigest).toBe(canonicalDigest(params.actions));
      for (const rw of r.rewards) {
        expect(rw).toMatchObject({ ruleId: 'eat', value: 1, eventId: `eat-${k}-${rw.agentId}` });
        expect(r.eventIds).toContain(rw.eventId);
      }
      eaten += r.rewards.length;
      obs = r.observations;
      last = r;
      if (k === 10) {
        const again = resultOf<AdvanceResult>(
          await w.client.callUnchecked(METHODS.environmentAdvance, scope(k), params),
        );
        expect(again).toEqual(r);
        const changed = { ...params, actions: params.actions.map((a) => ({ ...a, action: { move: 'stay' } })) };
        expect(errorOf(await w.client.callUnchecked(METHODS.environmentAdvance, scope(k), changed))).toMatchObject({
          code: 'CONFLICT',
          mutation: 'none',
        });
      }
    }
    expect(eaten).toBeGreaterThan(0); // greedy agents on a small torus do find food
    const total = obs.reduce((s, o) => s + o.observation.score, 0);
    expect(total).toBe(eaten);
    expect(last!.worldDigest).toMatch(/^[0-9a-f]{64}$/);
    await w.stop();
  });

  it('[LOCK-4, LOCK-9] refuses actions out of port order, unknown moves, and stale/future steps, before mutating', async () => {
    const w = await spawnWorker('environment', 'env2');
    await w.client.call(METHODS.environmentInitialize, scope(0), INIT);
    const ok = [
      { portId: 'p0', agentId: 'b', action: { move: 'east' } },
      { portId: 'p1', agentId: 'a', action: { move: 'stay' } },
    ];
    const swapped = [ok[1], ok[0]];
    const e1 = errorOf(
      await w.client.callUnchecked(METHODS.environmentAdvance, scope(0), { batchId: 'b0', actions: swapped }),
    );
    expect(e1).toMatchObject({ code: 'INVALID_ARGUMENT', mutation: 'none' });
    expect(e1.message).toMatch(/port order/);
    const e2 = errorOf(
      await w.client.callUnchecked(METHODS.environmentAdvance, scope(0), {
        batchId: 'b0',
        actions: [ok[0], { ...ok[1], action: { move: 'jump' } }],
      }),
    );
    expect(e2.message).toMatch(/move.*jump/);
    expect(
      errorOf(await w.client.call(METHODS.environmentAdvance, scope(1), { batchId: 'b1', actions: ok })),
    ).toMatchObject({ code: 'FUTURE_STEP' });
    expect(
      errorOf(await w.client.call(METHODS.environmentAdvance, scope(0, 'e0'), { batchId: 'b0', actions: ok })),
    ).toMatchObject({ code: 'STALE_EPOCH' });
    const r = resultOf<AdvanceResult>(
      await w.client.call(METHODS.environmentAdvance, scope(0), { batchId: 'b0', actions: ok }),
    );
    expect(r.nextStep).toBe('1');
    expect(errorOf(await w.client.call(METHODS.agentPrepare, scope(1), { agents: [{ agentId: 'a' }] }))).toMatchObject({
      code: 'UNSUPPORTED',
    });
    await w.stop();
  });
});
