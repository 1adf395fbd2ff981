// Timing with tinybench: run a few named tasks in interleaved rounds and return their rates. NOT
// the receipt or the table (lib/receipt.ts); suites turn these rates into figures with limits.
// Why rounds: the machine is shared, so load drifts during a run; alternating a figure's task with
// its limit's task (order reversed every other round) exposes both to the same drift.
import { Bench } from 'tinybench';

export interface Rate {
  /** Operations per second from the pooled mean latency (1000 / mean ms). */
  opsPerSec: number;
  meanMs: number;
  /** 95% relative margin of error of the pooled mean latency (normal approximation), percent. */
  rmePercent: number;
  samples: number;
}

export interface MeasureOptions {
  /** Total sampling time per task, ms, split over the rounds. */
  timeMs: number;
  /** Minimum iterations per task, split over the rounds. */
  iterations: number;
  /** Interleaved rounds (default 3). */
  rounds?: number;
  warmupMs?: number;
  warmupIterations?: number;
}

function pooled(samples: number[]): { mean: number; rme: number } {
  const n = samples.length;
  const mean = samples.reduce((a, b) => a + b, 0) / n;
  if (n < 2 || mean === 0) return { mean, rme: 0 };
  const variance = samples.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1);
  return { mean, rme: (100 * 1.96 * Math.sqrt(variance / n)) / mean };
}

/** Run the tasks one at a time (never concurrently), interleaved over rounds, and report rates. */
export async function measure(tasks: Record<string, () => unknown>, o: MeasureOptions): Promise<Record<string, Rate>> {
  const rounds = Math.max(1, o.rounds ?? 3);
  const names = Object.keys(tasks);
  const samples: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let round = 0; round < rounds; round++) {
    const bench = new Bench({
      time: o.timeMs / rounds,
      iterations: Math.max(1, Math.ceil(o.iterations / rounds)),
      warmupTime: round === 0 ? (o.warmupMs ?? Math.min(100, o.timeMs / 4)) : 0,
      warmupIterations: round === 0 ? (o.warmupIterations ?? 2) : 0,
      retainSamples: true,
    });
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) bench.add(name, tasks[name]!);
    await bench.run();
    for (const task of bench.tasks) {
      const r = task.result;
      if (r.state === 'errored') throw r.error;
      if (r.state !== 'completed') throw new Error(`bench task ${task.name} ended ${r.state}`);
      // Not push(...samples): a fast task leaves more samples than a call may take arguments.
      const into = samples[task.name]!;
      for (const x of r.latency.samples ?? []) into.push(x);
    }
  }
  const out: Record<string, Rate> = {};
  for (const name of names) {
    const { mean, rme } = pooled(samples[name]!);
    out[name] = { opsPerSec: 1000 / mean, meanMs: mean, rmePercent: rme, samples: samples[name]!.length };
  }
  return out;
}

/** Nearest-rank percentile of a sample (p in 0..100), e.g. per-step latencies; NaN for an empty one. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((x, y) => x - y);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}
