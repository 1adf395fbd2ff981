// Strict mode with a real worker process and a user model module: Math.random, Date.now and
// new Date() inside a model callback fail the call, naming the agent and the call; without the
// flag the same model runs; a strict user model's prepare that changed another agent's state (shared
// state) fails naming that agent. Plus the guard's unit behaviour (globals restored, explicit dates ok).
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { METHODS } from '../../core/protocol/index.js';
import { runGuarded, StrictModeViolation } from '../../workers/strict.js';
import { REPO_ROOT, STEP_60HZ, errorOf, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

const MODEL = join(REPO_ROOT, 'test/workers/fixtures/nondeterministic-agent.ts');
const agent = (agentId: string, call: string, strict?: boolean) => ({
  agentId,
  model: MODEL,
  params: strict === undefined ? { call } : { call, strict },
  seed: 1,
  stepDuration: STEP_60HZ,
  observation: {},
});

describe('strict mode', () => {
  it('fails a user model that calls Math.random / Date.now / new Date() when strict: true, naming agent and call', async () => {
    const w = await spawnWorker('agent', 'w-strict', ['--model', MODEL]);
    const agents = [
      agent('u-date', 'date', true),
      agent('u-free', 'random'),
      agent('u-now', 'now', true),
      agent('u-rand', 'random', true),
      agent('u-ok', 'none', true),
    ];
    resultOf(await w.client.call(METHODS.agentInitialize, scope(0), { agents }));
    const one = async (agentId: string) => w.client.call(METHODS.agentPrepare, scope(0), { agents: [{ agentId }] });
    for (const [id, call] of [
      ['u-rand', 'Math.random()'],
      ['u-now', 'Date.now()'],
      ['u-date', 'new Date()'],
    ] as const) {
      const e = errorOf(await one(id));
      expect(e.code).toBe('BACKEND_FAILURE');
      expect(e.message).toContain(`agent ${id}`);
      expect(e.message).toContain(call);
    }
    // opt-in only: the same model without the flag runs, and explicit dates are fine under strict
    expect(resultOf<{ agents: unknown[] }>(await one('u-free')).agents).toHaveLength(1);
    expect(resultOf<{ agents: unknown[] }>(await one('u-ok')).agents).toHaveLength(1);
    await w.stop();
  });

  it('--strict makes strict the default for user models', async () => {
    const w = await spawnWorker('agent', 'w-strict2', ['--strict', '--model', MODEL]);
    resultOf(await w.client.call(METHODS.agentInitialize, scope(0), { agents: [agent('u-rand', 'random')] }));
    const e = errorOf(await w.client.call(METHODS.agentPrepare, scope(0), { agents: [{ agentId: 'u-rand' }] }));
    expect(e.message).toMatch(/agent u-rand called Math\.random\(\)/);
    await w.stop();
  });

  it("refuses a prepare that changed another agent's state (shared state), strict user models only", async () => {
    const shared = join(REPO_ROOT, 'test/coordinator/fixtures/shared-state-agent.ts');
    const w = await spawnWorker('agent', 'w-shared', ['--model', shared]);
    const two = (prefix: string, params: Record<string, unknown>) =>
      [`${prefix}-a`, `${prefix}-b`].map((agentId) => ({ ...agent(agentId, 'none'), model: shared, params }));
    const agents = [
      ...two('loose', { shared: true }),
      ...two('own', { shared: false, strict: true }),
      ...two('strict', { shared: true, strict: true }),
    ];
    resultOf(await w.client.call(METHODS.agentInitialize, scope(0), { agents }));
    const prepare = async (prefix: string) =>
      w.client.call(METHODS.agentPrepare, scope(0), {
        agents: [{ agentId: `${prefix}-a` }, { agentId: `${prefix}-b` }],
      });
    // Each prepare moves its own agent's state: that is what prepare is for.
    expect(resultOf<{ agents: unknown[] }>(await prepare('own')).agents).toHaveLength(2);
    const e = errorOf(await prepare('strict'));
    expect(e.code).toBe('BACKEND_FAILURE');
    expect(e.message).toBe(
      "agent strict-a: another agent's prepare changed this agent's state " +
        '(agents on one worker must not share mutable state: give each agent its own in initialize and restore)',
    );
    // opt-in, as the rest of strict mode: without it the shared state goes unnoticed
    expect(resultOf<{ agents: unknown[] }>(await prepare('loose')).agents).toHaveLength(2);
    await w.stop();
  });

  it('restores the real globals after a guarded call, even when it throws', () => {
    const random = Math.random;
    const RealDate = Date;
    expect(() => runGuarded(true, 'agent x', 'prepare', () => Math.random())).toThrow(StrictModeViolation);
    expect(() => runGuarded(true, 'agent x', 'prepare', () => Date())).toThrow(/agent x called Date\(\)/);
    expect(runGuarded(true, 'agent x', 'prepare', () => new Date(5).getTime())).toBe(5);
    expect(runGuarded(true, 'agent x', 'prepare', () => new Date(0) instanceof RealDate)).toBe(true);
    expect(Math.random).toBe(random);
    expect(Date).toBe(RealDate);
    expect(typeof Date.now()).toBe('number');
    expect(runGuarded(false, 'agent x', 'prepare', () => typeof Math.random())).toBe('number');
  });

  it('refuses performance.now, crypto.getRandomValues and crypto.randomUUID too, and they work outside', () => {
    const calls: [string, () => unknown][] = [
      ['performance.now()', () => performance.now()],
      ['crypto.getRandomValues()', () => crypto.getRandomValues(new Uint8Array(4))],
      ['crypto.randomUUID()', () => crypto.randomUUID()],
    ];
    for (const [call, fn] of calls)
      expect(() => runGuarded(true, 'agent x', 'prepare', fn)).toThrow(`agent x called ${call} inside prepare`);
    // Outside a guarded callback (and in a non-strict one) they are the real clock and randomness.
    const t0 = performance.now();
    expect(performance.now()).toBeGreaterThanOrEqual(t0);
    const { now } = performance;
    expect(typeof now.call(performance)).toBe('number');
    expect(crypto.getRandomValues(new Uint8Array(16)).some((b) => b !== 0)).toBe(true);
    expect(crypto.randomUUID()).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-/);
    expect(runGuarded(false, 'agent x', 'prepare', () => typeof performance.now())).toBe('number');
    // A nested guarded call still refuses, and the outer one after it.
    expect(() =>
      runGuarded(true, 'agent x', 'prepare', () => {
        runGuarded(true, 'agent y', 'commit', () => 1);
        return performance.now();
      }),
    ).toThrow('agent x called performance.now() inside prepare');
  });
});
