// How a bench row asks for a worker transport: the config `workers` fields and the runSession
// options each transport needs, or why this build cannot run it. Shared by the lockstep and peers
// suites so that a transport is wired once. NOT a transport and never a measurement.
import { resolveConfig } from '../../coordinator/config.js';
import type { RunOptions } from '../../coordinator/session/run.js';

/**
 * `unix`: gRPC worker processes over Unix sockets, the environment in a process of its own too
 * (`environment.transport: workers`). `thread`: TypeScript workers in worker_threads of the
 * coordinator's process (`workers.transport: thread`), the environment on a thread of its own too.
 * `inline`: agents and environment stepped in the coordinator's own thread, no transport
 * (`workers.transport: inline`). `unix-env-inline` and `thread-env-inline`: the agents on processes
 * or threads, the environment in the coordinator's thread — a local run's default for a built-in
 * environment (`environment.transport: inline`; the peers suite's rows).
 */
export type BenchTransport = 'unix' | 'thread' | 'inline' | 'unix-env-inline' | 'thread-env-inline';

/** What a run on a transport needs: merged into the config's `workers` (and `environment`) and into runSession's options. */
export interface TransportSetup {
  workers: Record<string, unknown>;
  /** Fields merged into the config's `environment` (e.g. its transport). */
  environment?: Record<string, unknown>;
  runOptions: Partial<RunOptions>;
}

export type TransportPlan = { available: true; setup: TransportSetup } | { available: false; reason: string };

/** The prefix of every skip reason, so receipts and tests can tell a skip from a failure. */
export const NOT_AVAILABLE = 'transport not available in this build';

/** Why resolveConfig refuses these `workers` (and `environment`) fields, or null when it accepts them (a probe, no run). */
export function configRefusal(
  workers: Record<string, unknown>,
  environment: Record<string, unknown> = {},
): string | null {
  try {
    resolveConfig({
      sessionId: 'transport-probe',
      masterSeed: '1',
      steps: 1,
      environment: { id: 'world', model: 'forage', ...environment },
      agents: { count: 1, prefix: 'walker-', model: 'walker' },
      workers,
    });
    return null;
  } catch (e) {
    return (e instanceof Error ? e.message : String(e)).split('\n')[0]!;
  }
}

/** A transport selected through config: available exactly when this build's config accepts it. */
function configTransport(transport: BenchTransport): TransportPlan {
  const split = transport.endsWith('-env-inline');
  const workers = { transport: split ? transport.slice(0, -'-env-inline'.length) : transport };
  // Without `-env-inline` the environment stays on the workers' transport (the default would put a built-in one inline).
  const environment = transport === 'inline' ? {} : { transport: split ? 'inline' : 'workers' };
  const refused = configRefusal(workers, environment);
  if (refused !== null) return { available: false, reason: `${NOT_AVAILABLE} (config refuses it: ${refused})` };
  const placed = Object.keys(environment).length > 0;
  return { available: true, setup: { workers, ...(placed ? { environment } : {}), runOptions: {} } };
}

/** The config `workers` fields and runSession options of a transport, or why it cannot run here. */
export function transportPlan(transport: BenchTransport): TransportPlan {
  return configTransport(transport);
}

/** How a row names where its agents run, e.g. "4 agent processes", "4 agent threads", "inline". */
export function placement(transport: BenchTransport, workers: number): string {
  if (transport === 'inline') return "inline (the coordinator's thread, no transport)";
  const threads = transport.startsWith('thread');
  const noun = threads ? 'thread' : 'process';
  const agents = `${workers} agent ${noun}${workers === 1 ? '' : threads ? 's' : 'es'}`;
  return transport.endsWith('-env-inline')
    ? `${agents}, environment inline (the default)`
    : `${agents}, environment on a ${noun}`;
}
