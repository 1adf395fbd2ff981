// Timing with tinybench: run a few named tasks in one Bench and return their rates. NOT the
// receipt or the table (lib/receipt.ts); suites turn these rates into figures with limits.
import { Bench } from 'tinybench';

export interface Rate {
  /** Operations per second from the mean latency (1000 / mean ms). */
  opsPerSec: number;
  meanMs: number;
  rmePercent: number;
  samples: number;
}

export interface MeasureOptions {
  /** Sampling time per task, ms. */
  timeMs: number;
  /** Minimum iterations per task. */
  iterations: number;
  warmupMs?: number;
  warmupIterations?: number;
}

/** Run the tasks one after another (never concurrently: the machine is shared) and report rates. */
export async function measure(tasks: Record<string, () => unknown>, o: MeasureOptions): Promise<Record<string, Rate>> {
  const bench = new Bench({
    time: o.timeMs,
    iterations: o.iterations,
    warmupTime: o.warmupMs ?? Math.min(100, o.timeMs / 4),
    warmupIterations: o.warmupIterations ?? 2,
  });
  for (const [name, fn] of Object.entries(tasks)) bench.add(name, fn);
  await bench.run();
  const out: Record<string, Rate> = {};
  for (const task of bench.tasks) {
    const r = task.result;
    if (r.state === 'errored') throw r.error;
    if (r.state !== 'completed') throw new Error(`bench task ${task.name} ended ${r.state}`);
    out[task.name] = { opsPerSec: 1000 / r.period, meanMs: r.period, rmePercent: r.latency.rme, samples: r.latency.samplesCount };
  }
  return out;
}
