// The detsim side of the Gymnasium comparison: a real `runSession` of N `walker` agents on the
// `forage` environment (real worker processes, gRPC over Unix sockets), timed from the run's own
// trace.jsonl step clock after a warm-up, so process start-up is not counted. NOT the lockstep suite.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseTraceLines } from '../../coordinator/trace.js';

export interface LockstepCase {
  n: number;
  steps: number;
  warmupSteps: number;
  agentsPerWorker: number;
  width: number;
  height: number;
}

export interface DetsimLockstepFigures {
  n: number;
  agentProcesses: number;
  steps: number;
  warmupSteps: number;
  seconds: number;
  agentStepsPerSec: number;
  behaviourDigest: string | null;
}

/** The run configuration, in the config file's shape (coordinator/config.ts). */
export function walkerConfig(c: LockstepCase, sessionId: string): Record<string, unknown> {
  return {
    sessionId,
    masterSeed: '42',
    steps: c.warmupSteps + c.steps,
    environment: { id: 'world', model: 'forage', params: { width: c.width, height: c.height } },
    agents: { count: c.n, prefix: 'walker-', model: 'walker' },
    workers: { agentsPerWorker: c.agentsPerWorker, transport: 'unix' },
  };
}

/** Find the trace.jsonl a run wrote under outDir (the run directory's name is the runner's business). */
export function findTrace(outDir: string): string | null {
  if (existsSync(join(outDir, 'trace.jsonl'))) return join(outDir, 'trace.jsonl');
  for (const entry of readdirSync(outDir).sort()) {
    const p = join(outDir, entry, 'trace.jsonl');
    if (statSync(join(outDir, entry)).isDirectory() && existsSync(p)) return p;
  }
  return null;
}

/**
 * Agent-steps/s over the steps after the warm-up, from the monotonic wallTimeNs each trace line
 * records when its step completed: N × (steps counted) ÷ (time between the two boundaries).
 */
export function rateFromTrace(traceText: string, c: LockstepCase): { seconds: number; agentStepsPerSec: number } {
  const traces = parseTraceLines(traceText);
  if (traces.length !== c.warmupSteps + c.steps) {
    throw new Error(`trace has ${traces.length} steps, expected ${c.warmupSteps + c.steps}`);
  }
  const startNs = c.warmupSteps === 0 ? 0n : BigInt(traces[c.warmupSteps - 1]!.operational.wallTimeNs);
  const endNs = BigInt(traces.at(-1)!.operational.wallTimeNs);
  const seconds = Number(endNs - startNs) / 1e9;
  if (!(seconds > 0)) throw new Error(`trace clock did not advance over the measured steps (${seconds} s)`);
  return { seconds, agentStepsPerSec: (c.n * c.steps) / seconds };
}
