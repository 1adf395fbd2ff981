// The walker-on-forage run plan the end-to-end bench suites share (receipts, soak): N walkers in
// P agent processes on a small torus with one food per agent. Not a suite; no measuring here.
import { resolveConfig, type RunPlan } from '../../coordinator/config.js';

export function walkerBenchPlan(sessionId: string, agents: number, processes: number, steps: number): RunPlan {
  return resolveConfig({
    sessionId,
    masterSeed: '1',
    steps,
    stepHz: 60,
    environment: { id: 'forage', model: 'forage', params: { width: 8, height: 8, food: agents } },
    agents: { count: agents, prefix: 'walker-', model: 'walker' },
    workers: { agentsPerWorker: agents / processes, transport: 'unix' }, // processes, as the figures say
    deadlines: { startupMs: 30_000, stepMs: 10_000 },
  });
}
