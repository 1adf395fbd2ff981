// The series a report draws from one run's trace, built while the trace streams by (one step at a
// time, never the whole trace in memory): reward per agent, cumulative reward per agent and in
// total, and steps per second from the steps' physical wall times (operational.wallTimeNs; run.log
// has no progress lines). Long runs are downsampled into buckets of consecutive steps so that no
// series has more than MAX_POINTS points (docs/guide.md "Reports"). NOT the reading of the trace
// (trace/trace-store.ts), the other facts of a run (run-facts.ts) or the page (html.ts).
import type { TransitionTrace } from '../trace/trace.js';

/** At most this many points per series on the page; a longer run is drawn in buckets of steps. */
export const MAX_POINTS = 2000;
/** Agents drawn one series each (the first, in run.json's order); every agent counts in the totals. */
export const MAX_AGENT_SERIES = 64;
/**
 * Reward per agent is drawn in at most this many bins of steps: rewards are sparse events (a walker
 * eats now and then), and a bin's sum reads as a rate where single steps read as a barcode.
 */
export const REWARD_BINS = 100;

/** One run's series, downsampled: `x[b]` is the last step of bucket b. */
export interface RunSeries {
  /** Steps per bucket (1: every step is a point). */
  bucket: number;
  steps: number;
  x: number[];
  /** The agents drawn, in run.json's order (at most MAX_AGENT_SERIES). */
  agents: string[];
  /** Agents not drawn one by one (counted in the totals). */
  agentsNotDrawn: number;
  /** Steps per reward bin, and each bin's last step. */
  rewardBin: number;
  rewardX: number[];
  /** Reward of each drawn agent in each bin (the sum over the bin's steps). */
  rewardPerBin: number[][];
  /** Reward of each drawn agent up to and including the bucket's last step. */
  cumulative: number[][];
  /** Reward of all agents up to each bucket's last step. */
  totalCumulative: number[];
  /** Every agent's reward over the run (all agents, drawn or not), in first-seen order after run.json's. */
  agentTotals: { agentId: string; reward: number }[];
  totalReward: number;
  /** Steps per second in each bucket: intervals between consecutive steps of one epoch over their wall time; null when none. */
  stepsPerSecond: (number | null)[];
  /** The epochs in step order and the first step of each. */
  epochs: { epoch: string; fromStep: number }[];
}

/** Steps per bucket so that `steps` steps make at most `maxPoints` points. */
export function bucketSize(steps: number, maxPoints = MAX_POINTS): number {
  return Math.max(1, Math.ceil(steps / maxPoints));
}

/** Builds RunSeries from the steps of one trace, in order; memory grows with the buckets, not the steps. */
export class SeriesBuilder {
  private readonly bucket: number;
  private readonly bin: number;
  private readonly drawn: Map<string, number>;
  private readonly totals = new Map<string, number>();
  private readonly out: RunSeries;
  private seen = 0;
  private current = -1;
  private total = 0;
  private dtSum = 0;
  private dtCount = 0;
  private prev: { epoch: string; wallNs: number } | null = null;

  constructor(plannedSteps: number, agentIds: readonly string[], maxPoints = MAX_POINTS) {
    this.bucket = bucketSize(plannedSteps, maxPoints);
    this.bin = Math.max(this.bucket, bucketSize(plannedSteps, REWARD_BINS));
    const drawn = agentIds.slice(0, MAX_AGENT_SERIES);
    this.drawn = new Map(drawn.map((a, i) => [a, i]));
    for (const a of agentIds) this.totals.set(a, 0);
    this.out = {
      bucket: this.bucket,
      steps: 0,
      x: [],
      agents: drawn,
      agentsNotDrawn: agentIds.length - drawn.length,
      rewardBin: this.bin,
      rewardX: [],
      rewardPerBin: drawn.map(() => []),
      cumulative: drawn.map(() => []),
      totalCumulative: [],
      agentTotals: [],
      totalReward: 0,
      stepsPerSecond: [],
      epochs: [],
    };
  }

  add(t: TransitionTrace): void {
    const b = Math.floor(this.seen / this.bucket);
    if (b !== this.current) this.openBucket(b);
    const step = Number(t.behaviour.scope.step);
    const epoch = t.behaviour.scope.epoch;
    this.out.x[b] = step;
    const bin = Math.floor(this.seen / this.bin);
    if (this.out.rewardX.length === bin) for (const series of this.out.rewardPerBin) series[bin] = 0;
    this.out.rewardX[bin] = step;
    for (const r of t.behaviour.rewards) {
      this.totals.set(r.agentId, (this.totals.get(r.agentId) ?? 0) + r.value);
      this.total += r.value;
      const i = this.drawn.get(r.agentId);
      if (i !== undefined) this.out.rewardPerBin[i]![bin] = this.out.rewardPerBin[i]![bin]! + r.value;
    }
    this.time(epoch, Number(t.operational.wallTimeNs), step);
    this.seen++;
  }

  /** The wall time between this step and the one before it, when both are of one epoch (a resume restarts the clock). */
  private time(epoch: string, wallNs: number, step: number): void {
    const last = this.out.epochs[this.out.epochs.length - 1];
    if (last?.epoch !== epoch) this.out.epochs.push({ epoch, fromStep: step });
    if (this.prev !== null && this.prev.epoch === epoch && wallNs > this.prev.wallNs) {
      this.dtSum += wallNs - this.prev.wallNs;
      this.dtCount++;
    }
    this.prev = { epoch, wallNs };
  }

  /** Close the open bucket (its cumulative values and rate) and start bucket `b`. */
  private openBucket(b: number): void {
    if (this.current >= 0) this.closeBucket(this.current);
    this.current = b;
  }

  private closeBucket(b: number): void {
    for (const [agentId, i] of this.drawn) this.out.cumulative[i]![b] = this.totals.get(agentId) ?? 0;
    this.out.totalCumulative[b] = this.total;
    this.out.stepsPerSecond[b] = this.dtCount === 0 ? null : this.dtCount / (this.dtSum / 1e9);
    this.dtSum = 0;
    this.dtCount = 0;
  }

  finish(): RunSeries {
    if (this.current >= 0) this.closeBucket(this.current);
    this.current = -1;
    this.out.steps = this.seen;
    this.out.totalReward = this.total;
    this.out.agentTotals = [...this.totals].map(([agentId, reward]) => ({ agentId, reward }));
    return this.out;
  }
}
