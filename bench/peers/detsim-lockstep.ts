// The detsim side of the Gymnasium comparison: a real `runSession` of N `walker` agents on the
// `forage` environment on one transport (gRPC worker processes over Unix sockets, worker threads, or
// inline: bench/lib/transports.ts), timed from the step clock in the run's own trace after a warm-up,
// so start-up is not counted. NOT the lockstep suite.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig } from '../../coordinator/config.js';
import { runSession } from '../../coordinator/session/run.js';
import { parseTraceLines } from '../../coordinator/trace/trace.js';
import { readTraceLinesSync } from '../../coordinator/trace/trace-store.js';
import { transportPlan, type BenchTransport, type TransportSetup } from '../lib/transports.js';

export interface LockstepCase {
  n: number;
  transport: BenchTransport;
  steps: number;
  warmupSteps: number;
  /** Absent: the product's default layout (coordinator/config.ts defaultAgentsPerWorker). */
  agentsPerWorker?: number;
  width: number;
  height: number;
  food: number;
}

export interface DetsimLockstepFigures {
  n: number;
  transport: BenchTransport;
  /** Agent workers: processes (unix) or threads (thread); 0 inline. */
  agentWorkers: number;
  steps: number;
  warmupSteps: number;
  seconds: number;
  agentStepsPerSec: number;
  behaviourDigest: string | null;
}

/** The run configuration, in the config file's shape (coordinator/config.ts); `setup` from transportPlan. */
export function walkerConfig(
  c: LockstepCase,
  sessionId: string,
  setup: TransportSetup = { workers: { transport: 'unix' }, runOptions: {} },
): Record<string, unknown> {
  return {
    sessionId,
    masterSeed: '42',
    steps: c.warmupSteps + c.steps,
    stepHz: 60,
    environment: {
      id: 'world',
      model: 'forage',
      params: { width: c.width, height: c.height, food: c.food },
      ...setup.environment,
    },
    agents: { count: c.n, prefix: 'walker-', model: 'walker' },
    workers: { ...(c.agentsPerWorker === undefined ? {} : { agentsPerWorker: c.agentsPerWorker }), ...setup.workers },
    // The machine is shared: generous deadlines so a busy neighbour slows the run, not fails it.
    deadlines: { startupMs: 60_000, stepMs: 20_000 },
  };
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

/**
 * One real run (launch, initialize, warm-up + measured steps, shutdown) in a scratch directory.
 * Throws when this build lacks the transport (callers check transportPlan first to skip instead).
 */
export async function measureDetsimLockstep(
  c: LockstepCase,
  scratch: string = tmpdir(),
  log: (line: string) => void = () => undefined,
): Promise<DetsimLockstepFigures> {
  const t = transportPlan(c.transport);
  if (!t.available) throw new Error(t.reason);
  const plan = resolveConfig(walkerConfig(c, `peers-n${c.n}`, t.setup));
  const outDir = mkdtempSync(join(scratch, 'peers-run-'));
  try {
    const result = await runSession(plan, { ...t.setup.runOptions, outDir, onWarning: log });
    const rate = rateFromTrace([...readTraceLinesSync(result.runDir)].map((l) => `${l}\n`).join(''), c);
    return {
      n: c.n,
      transport: c.transport,
      agentWorkers: c.transport === 'inline' ? 0 : plan.workers.filter((w) => w.role === 'agent').length,
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
