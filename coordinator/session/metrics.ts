// The numbers a session ends with, for people: wall time, mean steps per second of stepping, and
// the reward totals per agent and overall. summary.json carries them (all physical in the field
// table, receipt/fields.ts: the rewards are behaviour, but they are already hashed step by step in
// the trace, and a new repro summary field would move every recorded ReproHash), and `detsim run`
// and `detsim resume` print them. Rewards are summed in step order, then in each step's reward
// order, so equal traces give equal totals. NOT the behaviour digest (session.ts) nor the trace.
import type { Id } from '../../core/formats/scalars.js';
import { readTraceLinesSync } from '../trace/trace-store.js';
import type { TraceBehaviour } from '../trace/trace.js';

/** Reward totals: overall and per agent (every agent of the run, in port order, 0 when it got none). */
export interface RewardTotals {
  total: number;
  perAgent: Record<Id, number>;
}

/** What a session ends with besides its digests. */
export interface SessionMetrics {
  /** From the session's start (launch included) to its end. */
  wallTimeMs: number;
  /** Steps committed by this session per second of stepping (start-up and restore excluded); 0 if none. */
  stepsPerSecond: number;
  /** Over every step of the trace on disk (a resumed run: the kept steps too); null when it could not be read. */
  rewards: RewardTotals | null;
}

/** Running reward totals over steps, fed one behaviour at a time. */
export class RewardTally {
  private total = 0;
  private readonly perAgent = new Map<Id, number>();

  constructor(agentIds: readonly Id[]) {
    for (const a of agentIds) this.perAgent.set(a, 0);
  }

  add(rewards: TraceBehaviour['rewards']): void {
    for (const r of rewards) {
      const v = typeof r.value === 'number' ? r.value : 0;
      this.total += v;
      this.perAgent.set(r.agentId, (this.perAgent.get(r.agentId) ?? 0) + v);
    }
  }

  totals(): RewardTotals {
    return { total: this.total, perAgent: Object.fromEntries(this.perAgent) };
  }
}

/**
 * The reward totals over a run directory's whole trace, read back (a resumed or recovered session
 * did not see its kept steps: one pass over the trace); null when it cannot be read. Each segment is
 * checked against its digest as it is read, and its lines are then read with the native JSON
 * parser, not proven canonical again: a sum for people, not a verification (the receipt is that),
 * and the strict reader took 80 s of a resume near the end of a 1,000,000-step run (bench/README.md).
 */
export function rewardTotalsOnDisk(runDir: string, agentIds: readonly Id[]): RewardTotals | null {
  const tally = new RewardTally(agentIds);
  try {
    for (const line of readTraceLinesSync(runDir)) {
      const rewards = rewardsOf(line);
      if (!Array.isArray(rewards)) return null;
      tally.add(rewards as TraceBehaviour['rewards']);
    }
  } catch {
    return null;
  }
  return tally.totals();
}

/**
 * A trace line's behaviour.rewards. A line is canonical JSON, so its behaviour ends with
 * `"rewards":[…],"scope":{…},"worldDigest":"…"}` just before `,"operational":{` — the last of each
 * marker (ids, digests and reward entries hold no quote or brace): only that small array is parsed,
 * not the agents' decisions. A line without the markers is parsed whole.
 */
function rewardsOf(line: string): unknown {
  const operational = line.lastIndexOf('},"operational":{');
  const scope = operational < 0 ? -1 : line.lastIndexOf(',"scope":{', operational);
  const start = scope < 0 ? -1 : line.lastIndexOf(',"rewards":[', scope);
  if (start < 0) return (JSON.parse(line) as { behaviour?: { rewards?: unknown } }).behaviour?.rewards;
  return JSON.parse(line.slice(start + ',"rewards":'.length, scope));
}

/** Steps per second, to two decimals; 0 when no time passed. */
export function stepsPerSecond(steps: number, ms: number): number {
  return ms > 0 ? Math.round((steps * 100_000) / ms) / 100 : 0;
}

/** The summary lines `detsim run` and `detsim resume` end with (wall time and rate; rewards). */
export function metricsLines(m: SessionMetrics): string[] {
  const secs = (m.wallTimeMs / 1000).toFixed(1);
  const lines = [`wall time        ${secs} s (${m.stepsPerSecond.toFixed(1)} steps/s stepping)`];
  if (m.rewards) {
    const per = Object.entries(m.rewards.perAgent)
      .map(([a, v]) => `${a} ${formatReward(v)}`)
      .join(', ');
    lines.push(`rewards          total ${formatReward(m.rewards.total)}; per agent: ${per}`);
  } else lines.push('rewards          (the trace could not be read back)');
  return lines;
}

/** A reward total as printed: integers as they are, others to at most 6 decimals. */
function formatReward(v: number): string {
  return Number.isInteger(v) ? String(v) : String(Math.round(v * 1e6) / 1e6);
}
