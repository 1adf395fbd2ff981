// Bench suite `soak`: memory over a long lockstep run — 16 walkers in 4 agent processes for
// 1,000,000 agent-steps (62,500 steps; 4,000 agent-steps with --quick), sampling the coordinator's
// RSS and heap (process.memoryUsage) and the workers' RSS (/proc/<pid>/status VmRSS) at 100 points.
// Reports first-quarter vs last-quarter means and a verdict (flat, settled, growing); the figure, NOT an assertion.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { runSession } from '../../coordinator/session/run.js';
import { withLimit, type BenchSuite, type Figure } from '../lib/suite.js';
import { walkerBenchPlan } from '../lib/walkers.js';

const AGENTS = 16;
const PROCESSES = 4;
const SAMPLES = 100;
/** "flat": the last quarter's mean is less than this much above the first quarter's. */
export const FLAT_GROWTH = 0.1;
/** "settled": not flat, but the last quarter's mean is less than this much above the third's (a start-up climb, then a plateau). */
export const SETTLED_GROWTH = 0.025;
const MiB = 1024 * 1024;

export interface MemorySample {
  step: number;
  coordinatorRss: number;
  coordinatorHeapUsed: number;
  workersRss: number;
}

function vmRssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+([0-9]+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0; // the process has gone (end of run): this sample is dropped below
  }
}

/** Means of the first, third and last quarter of the samples for one quantity (the warm-up sample 0 excluded). */
function quarters(
  samples: MemorySample[],
  pick: (s: MemorySample) => number,
): { first: number; third: number; last: number } {
  const xs = samples.slice(1).map(pick);
  const q = Math.max(1, Math.floor(xs.length / 4));
  const mean = (a: number[]): number => a.reduce((s, x) => s + x, 0) / a.length;
  return { first: mean(xs.slice(0, q)), third: mean(xs.slice(-2 * q, -q)), last: mean(xs.slice(-q)) };
}

/**
 * flat: the last quarter within FLAT_GROWTH of the first; settled: above that, but within SETTLED_GROWTH
 * of the third (memory climbed at start-up and stopped); growing: still climbing at the end.
 */
export function soakVerdict(q: { first: number; third: number; last: number }): 'flat' | 'settled' | 'growing' {
  if (q.last / q.first - 1 < FLAT_GROWTH) return 'flat';
  return q.last / q.third - 1 < SETTLED_GROWTH ? 'settled' : 'growing';
}

export const soak: BenchSuite = {
  name: 'soak',
  description: `memory over a long run: ${AGENTS} walkers in ${PROCESSES} agent processes for 1,000,000 agent-steps; coordinator RSS/heap and workers' RSS, last quarter vs first quarter (flat = growth < ${FLAT_GROWTH * 100}%)`,
  async run(ctx) {
    const agentSteps = ctx.quick ? 4_000 : 1_000_000;
    const steps = agentSteps / AGENTS;
    const every = Math.max(1, Math.floor(steps / SAMPLES));
    const plan = walkerBenchPlan('bench-soak', AGENTS, PROCESSES, steps);
    const out = mkdtempSync(join(ctx.tmpDir, 'soak-'));
    const samples: MemorySample[] = [];
    let pids: number[] = [];
    const started = performance.now();
    try {
      ctx.log(
        `soak: ${AGENTS} walkers in ${PROCESSES} agent processes, ${steps} steps (${agentSteps} agent-steps), memory every ${every} steps`,
      );
      await runSession(plan, {
        outDir: out,
        onWarning: () => undefined,
        hooks: { onLaunched: (f) => (pids = f.pids().map((p) => p.pid)) },
        onProgress: (p) => {
          if (p.step % every !== 0 && p.step !== steps) return;
          const m = process.memoryUsage();
          const w = pids.map(vmRssBytes);
          if (w.some((x) => x === 0)) return;
          samples.push({
            step: p.step,
            coordinatorRss: m.rss,
            coordinatorHeapUsed: m.heapUsed,
            workersRss: w.reduce((a, b) => a + b, 0),
          });
          if (p.step % (every * 10) === 0)
            ctx.log(
              `soak: step ${p.step}/${steps}: coordinator RSS ${(m.rss / MiB).toFixed(0)} MiB, heap ${(m.heapUsed / MiB).toFixed(0)} MiB, workers RSS ${(samples.at(-1)!.workersRss / MiB).toFixed(0)} MiB`,
            );
        },
      });
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
    const seconds = (performance.now() - started) / 1000;
    const figures: Figure[] = [];
    const quantities: [string, string, (s: MemorySample) => number][] = [
      ['coordinator.rss', 'coordinator RSS', (s) => s.coordinatorRss],
      ['coordinator.heap', 'coordinator V8 heapUsed', (s) => s.coordinatorHeapUsed],
      ['workers.rss', `workers' RSS (sum of ${PROCESSES + 1} processes)`, (s) => s.workersRss],
    ];
    const verdicts: Record<string, string> = {};
    for (const [id, name, pick] of quantities) {
      const q = quarters(samples, pick);
      const { first, third, last } = q;
      const growth = last / first - 1;
      const verdict = soakVerdict(q);
      verdicts[id] = verdict;
      figures.push({
        ...withLimit(
          {
            id: `soak.${id}`,
            name: `${name}, mean of the last quarter of ${agentSteps.toLocaleString('en-US')} agent-steps`,
            value: Math.round((10 * last) / MiB) / 10,
            unit: 'MiB',
            higherIsBetter: false,
            samples: samples.length,
          },
          { name: 'mean of the first quarter, same run', value: Math.round((10 * first) / MiB) / 10 },
        ),
        note: `${verdict}: ${(100 * growth).toFixed(1)}% last vs first quarter, ${(100 * (last / third - 1)).toFixed(1)}% last vs third (flat = < ${FLAT_GROWTH * 100}% vs first; settled = < ${SETTLED_GROWTH * 100}% vs third)`,
      });
    }
    ctx.log(`soak: ${figures.map((f) => `${f.id} ${f.note}`).join('; ')}`);
    return {
      figures,
      details: {
        agents: AGENTS,
        processes: PROCESSES,
        steps,
        agentSteps,
        sampleEvery: every,
        flatGrowth: FLAT_GROWTH,
        settledGrowth: SETTLED_GROWTH,
        seconds,
        agentStepsPerSec: Math.round(agentSteps / seconds),
        verdicts,
        samples,
      },
    };
  },
};
