// The worker's step cache (workers/op-cache.ts) on its own: eviction by step keeps the current and
// previous step and remembers evicted request ids (RESULT_EXPIRED), also around an agent's eviction;
// bodyKey tells decoded entries apart exactly when their canonical texts differ. Not the hosts'
// use of it (agent-steps.test.ts drives that through a real worker process).
import { describe, expect, it } from 'vitest';
import { decodeBody, encodeBody } from '../../core/protocol/index.js';
import { EXPIRED_MEMORY, StepCache, bodyKey, opKey } from '../../workers/op-cache.js';

const scope = (step: number) => ({ sessionId: 's', epoch: 'e1', step: String(step) });

describe('StepCache', () => {
  it('[LOCK-12] evicts whole steps before the bound, remembering their request ids, and keeps the rest', () => {
    const cache = new StepCache<string>();
    for (let step = 0; step < 4; step++)
      for (const agent of ['a', 'b'])
        cache.put(opKey(scope(step), 'Agent.Commit', agent), BigInt(step), {
          digest: 'd',
          result: `${step}${agent}`,
          requestId: `req-${step}`,
        });
    cache.evictAgent('b');
    cache.put(opKey(scope(3), 'Agent.Commit', 'b'), 3n, { digest: 'd', result: '3b', requestId: 'req-3' });
    cache.evictBefore(2n);
    expect(cache.size).toBe(3); // 2a, 3a and the re-put 3b
    expect(cache.get(opKey(scope(1), 'Agent.Commit', 'a'))).toBeUndefined();
    expect(cache.get(opKey(scope(2), 'Agent.Commit', 'a'))?.result).toBe('2a');
    expect(cache.get(opKey(scope(3), 'Agent.Commit', 'b'))?.result).toBe('3b');
    expect([cache.hasExpired('req-0'), cache.hasExpired('req-1'), cache.hasExpired('req-2')]).toEqual([
      true,
      true,
      false,
    ]);
  });
});

describe('StepCache expired memory', () => {
  it('remembers the request ids of the last EXPIRED_MEMORY evicted results, forgetting the oldest first', () => {
    const cache = new StepCache<string>();
    const total = EXPIRED_MEMORY + 5;
    for (let step = 0; step < total; step++) {
      cache.put(opKey(scope(step), 'Agent.Commit', 'a'), BigInt(step), {
        digest: '',
        result: '',
        requestId: `req-${step}`,
      });
      // The same request id evicted twice is remembered once (it keeps its place).
      if (step === 10)
        cache.put(opKey(scope(step), 'Agent.Commit', 'b'), BigInt(step), {
          digest: '',
          result: '',
          requestId: 'req-10',
        });
      cache.evictBefore(BigInt(step));
    }
    const remembered = (step: number) => cache.hasExpired(`req-${step}`);
    expect([0, 1, 2, 3].map(remembered)).toEqual([false, false, false, false]);
    expect([4, 10, total - 2].map(remembered)).toEqual([true, true, true]);
    expect(remembered(total - 1)).toBe(false); // not evicted yet
  });
});

describe('bodyKey', () => {
  it('is equal for entries decoded from the same canonical text and differs when the texts differ', () => {
    const decoded = (v: unknown) => decodeBody(encodeBody(v));
    const entry = { agentId: 'a', observation: { '10': 1, '9': 2, x: [0.5, 'é'] }, rewards: [] };
    expect(bodyKey(decoded(entry))).toBe(bodyKey(decoded(entry)));
    expect(bodyKey(decoded(entry))).not.toBe(bodyKey(decoded({ ...entry, rewards: [{ value: 1 }] })));
    expect(bodyKey(decoded({ a: 1, b: 2 }))).not.toBe(bodyKey(decoded({ a: 1, b: 3 })));
  });
});
