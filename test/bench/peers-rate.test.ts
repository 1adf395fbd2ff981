// The peers bench's detsim rate arithmetic: agent-steps/s from the trace's step clocks after the
// warm-up, and the largest-gap pick. Hand-computed expectations; no timing is measured here.
import { describe, expect, it } from 'vitest';
import { rateFromTrace, walkerConfig, type LockstepCase } from '../../bench/peers/detsim-lockstep.js';
import { largestGap } from '../../bench/peers/table.js';
import type { PeersReport } from '../../bench/peers/peers.js';
import { resolveConfig } from '../../coordinator/config.js';

const trace = (wallNs: number[]): string =>
  wallNs.map((ns) => JSON.stringify({ behaviour: {}, operational: { wallTimeNs: String(ns) } })).join('\n') + '\n';
const c = (n: number, steps: number, warmupSteps: number): LockstepCase => ({
  n,
  transport: 'unix',
  steps,
  warmupSteps,
  agentsPerWorker: 4,
  width: 32,
  height: 32,
  food: 16,
});

describe('peers: detsim rate from the trace clock', () => {
  it('counts only the steps after the warm-up boundary', () => {
    // 2 warm-up steps end at 5 s; 4 measured steps end at 7 s: 4 steps × 8 agents in 2 s = 16/s.
    expect(rateFromTrace(trace([1e9, 5e9, 5.5e9, 6e9, 6.5e9, 7e9]), c(8, 4, 2))).toEqual({
      seconds: 2,
      agentStepsPerSec: 16,
    });
  });

  it('without warm-up measures from the run clock origin', () => {
    expect(rateFromTrace(trace([1e9, 2e9]), c(1, 2, 0)).agentStepsPerSec).toBe(1);
  });

  it('refuses a trace with the wrong number of steps or a clock that did not advance', () => {
    expect(() => rateFromTrace(trace([1e9, 2e9]), c(1, 2, 1))).toThrow(/trace has 2 steps, expected 3/);
    expect(() => rateFromTrace(trace([3e9, 3e9]), c(1, 1, 1))).toThrow(/did not advance/);
  });

  it('the walker config resolves: N walkers on forage, agents packed 4 per worker process', () => {
    const plan = resolveConfig(walkerConfig(c(16, 10, 2), 'peers-n16'));
    expect(plan.agents).toHaveLength(16);
    expect(plan.agents.every((a) => a.model === 'walker')).toBe(true);
    expect(plan.environment.model).toBe('forage');
    expect(plan.environment.params).toEqual({ width: 32, height: 32, food: 16 });
    expect(plan.workers.filter((w) => w.role === 'agent')).toHaveLength(4);
    expect(plan.steps).toBe(12);
    expect(plan.transport).toBe('unix');
  });

  it('a transport setup goes into the config’s workers beside agentsPerWorker', () => {
    const cfg = walkerConfig(c(16, 10, 2), 'peers-n16', { workers: { transport: 'thread' }, runOptions: {} });
    expect(cfg.workers).toEqual({ agentsPerWorker: 4, transport: 'thread' });
  });
});

describe('peers: largest gap', () => {
  it('is the ratio farthest from parity on a log scale, in either direction', () => {
    const report = {
      lockstep: {
        rows: [
          { n: 1, transport: 'unix', ratio: 0.5, ratioSync: 0.4 },
          { n: 4, transport: 'thread', ratio: null, ratioSync: null },
        ],
      },
      checkpoint: {
        rows: [
          { operation: 'save+fsync', ratio: 3 },
          { operation: 'load+verify', ratio: 0.9 },
        ],
      },
    } as unknown as PeersReport;
    expect(largestGap(report)).toEqual({ what: 'save+fsync MB/s (detsim ÷ safetensors)', ratio: 3 });
    const rows = report.lockstep.rows as { ratioSync: number | null }[];
    rows[0]!.ratioSync = 0.2; // now the farthest: 1/0.2 = 5 > 3
    expect(largestGap(report)).toEqual({
      what: 'steps/s at N=1 (detsim walker/forage, unix ÷ Gymnasium SyncVectorEnv)',
      ratio: 0.2,
    });
  });
});
