// The detsim side of the Gymnasium comparison: a real `runSession` of N `walker` agents on the
// `forage` environment (real worker processes, gRPC over Unix sockets), timed from the run's own
// trace.jsonl step clock after a warm-up, so process start-up is not counted. NOT the lockstep suite.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../../coordinator/config.js';
import { runSession } from '../../coordinator/run.js';
import { parseTraceLines } from '../../coordinator/trace.js';

export interface LockstepCase {
  n: number;
  steps: number;
  warmupSteps: number;
  agentsPerWorker: number;
  width: number;
  height: number;
  food: number;
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
    environment: { id: 'world', model: 'forage', params: { width: c.width, height: c.height, food: c.food } },
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

/** One real run (launch, initialize, warm-up + measured steps, shutdown) in a scratch directory. */
export async function measureDetsimLockstep(c: LockstepCase, log: (line: string) => void = () => undefined): Promise<DetsimLockstepFigures> {
  const plan = resolveConfig(walkerConfig(c, `peers-n${c.n}`));
  const outDir = mkdtempSync(join(tmpdir(), 'detsim-peers-run-'));
  try {
    const result = await runSession(plan, { outDir, onWarning: log });
    const trace = findTrace(outDir);
    if (trace === null) throw new Error(`runSession wrote no trace.jsonl under ${outDir}`);
    const rate = rateFromTrace(readFileSync(trace, 'utf8'), c);
    return {
      n: c.n,
      agentProcesses: plan.workers.filter((w) => w.role === 'agent').length,
      steps: c.steps,
      warmupSteps: c.warmupSteps,
      seconds: rate.seconds,
      agentStepsPerSec: rate.agentStepsPerSec,
      behaviourDigest: result.behaviourDigest,
    };
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
}
