// The report's series builder (coordinator/report/series.ts) on long step streams made here: at
// most MAX_POINTS points per series however long the run, buckets of ⌈steps / MAX_POINTS⌉ steps
// whose x is their last step, cumulative values exact at those steps, rewards in at most
// REWARD_BINS bins summing to the totals, rates over the intervals of one epoch only, and the
// agents beyond MAX_AGENT_SERIES counted in the totals without a series of their own.
import { describe, expect, it } from 'vitest';
import { MAX_AGENT_SERIES, MAX_POINTS, REWARD_BINS, SeriesBuilder } from '../../coordinator/report/series.js';
import type { TransitionTrace } from '../../coordinator/trace/trace.js';

/** A step as the builder reads it: scope, rewards and wall time (the rest of a trace line is not read). */
function step(n: number, epoch: string, wallNs: number, rewards: [string, number][]): TransitionTrace {
  return {
    behaviour: {
      scope: { sessionId: 's', epoch, step: String(n) },
      rewards: rewards.map(([agentId, value]) => ({ agentId, eventId: `e-${n}`, ruleId: 'r', value })),
    },
    operational: { wallTimeNs: String(wallNs) },
  } as unknown as TransitionTrace;
}

describe('report series', () => {
  it('a 10,001-step run: 1,667 points of 6 steps each, cumulative exact at each bucket end, rewards in 100 bins', () => {
    const steps = 10_001;
    const agents = ['a', 'b'];
    const b = new SeriesBuilder(steps, agents);
    let a = 0;
    const cumulativeA: number[] = [];
    for (let n = 0; n < steps; n++) {
      const r: [string, number][] = n % 7 === 0 ? [['a', 0.5]] : n % 11 === 0 ? [['b', 2]] : [];
      if (n % 7 === 0) a += 0.5;
      cumulativeA.push(a);
      b.add(step(n, 'e1', 1_000_000 * n + 1, r));
    }
    const s = b.finish();
    expect(s.bucket).toBe(Math.ceil(steps / MAX_POINTS));
    expect([s.bucket, s.x.length]).toEqual([6, 1667]);
    expect(s.x.length).toBeLessThanOrEqual(MAX_POINTS);
    s.x.forEach((x, i) => expect(x).toBe(Math.min(steps - 1, (i + 1) * s.bucket - 1)));
    s.x.forEach((x, i) => expect(s.cumulative[0]![i]).toBe(cumulativeA[x]));
    expect(s.rewardX.length).toBeLessThanOrEqual(REWARD_BINS);
    expect(s.rewardPerBin[0]!.reduce((x, y) => x + y, 0)).toBe(a);
    expect(s.agentTotals).toEqual([
      { agentId: 'a', reward: a },
      { agentId: 'b', reward: s.cumulative[1]!.at(-1) },
    ]);
    expect(s.totalCumulative.at(-1)).toBe(s.totalReward);
    // 1 ms between steps: 1000 steps/s in every bucket.
    for (const r of s.stepsPerSecond) expect(r).toBeCloseTo(1000, 6);
  });

  it('a new epoch restarts the clock: the interval across it is not a rate', () => {
    const b = new SeriesBuilder(4, ['a']);
    b.add(step(0, 'e1', 5e9, []));
    b.add(step(1, 'e1', 5.5e9, []));
    b.add(step(2, 'e2', 1e9, []));
    b.add(step(3, 'e2', 1.25e9, []));
    const s = b.finish();
    expect(s.stepsPerSecond).toEqual([null, 2, null, 4]);
    expect(s.epochs).toEqual([
      { epoch: 'e1', fromStep: 0 },
      { epoch: 'e2', fromStep: 2 },
    ]);
  });

  it(`agents beyond ${MAX_AGENT_SERIES} have no series but count in the totals`, () => {
    const agents = Array.from({ length: MAX_AGENT_SERIES + 3 }, (_, i) => `w-${String(i).padStart(3, '0')}`);
    const b = new SeriesBuilder(2, agents);
    b.add(step(0, 'e1', 1, [[agents.at(-1)!, 1]]));
    b.add(step(1, 'e1', 2, [[agents[0]!, 1]]));
    const s = b.finish();
    expect(s.agents).toHaveLength(MAX_AGENT_SERIES);
    expect(s.agentsNotDrawn).toBe(3);
    expect(s.totalCumulative).toEqual([1, 2]);
    expect(s.agentTotals.find((t) => t.agentId === agents.at(-1))!.reward).toBe(1);
  });
});
