// Shared helpers for the coordinator integration tests: temp run parents, reading a run
// directory back, and checking that no worker process outlived its run.
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type PlannedWorker, type RunPlan } from '../../coordinator/config.js';
import { exampleWithWorkers } from '../example-config.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import type { TransitionTrace } from '../../coordinator/trace/trace.js';
import type { Scope } from '../../core/formats/scalars.js';
import {
  launchedModelsFor,
  runsInline,
  runsOnThread,
  type Fleet,
  type WorkerCommand,
} from '../../coordinator/launch/launcher.js';
import { traceLinesOf } from '../trace-read.js';

/**
 * The built TypeScript worker (`node dist/workers/main.js`, what an installed detsim spawns; `npm test`
 * builds first), for in-process runs that start many worker processes (`hooks.commandFor`). From TS
 * source the coordinator starts each worker under tsx, which costs about 0.5 s of CPU a start.
 * Process workers only: a commandFor answer makes a thread-transport worker a process.
 */
export const BUILT_WORKER: WorkerCommand = {
  command: process.execPath,
  args: [fileURLToPath(new URL('../../dist/workers/main.js', import.meta.url))],
};

/**
 * A `commandFor` for `plan` that starts its TypeScript worker processes built (BUILT_WORKER). It leaves
 * be: threads (a command would make them processes), Rust and Python workers, and workers that load a
 * model module (a .ts model needs tsx, which the built worker does not load).
 */
export function builtWorkersFor(plan: RunPlan): (w: PlannedWorker) => WorkerCommand | undefined {
  return (w) =>
    runsOnThread(plan, w) ||
    runsInline(plan, w) ||
    (w.runtime ?? 'typescript') !== 'typescript' ||
    launchedModelsFor(plan, w).length > 0
      ? undefined
      : BUILT_WORKER;
}

export function tmpOut(prefix = 'detsim-run-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface RunFiles {
  run: Record<string, unknown>;
  summary: Record<string, unknown>;
  traceLines: string[];
  traces: TransitionTrace[];
  log: string;
}

export function readRun(dir: string): RunFiles {
  const traceLines = traceLinesOf(dir);
  return {
    // run.json is written once every participant initialized; a run that failed earlier has none.
    run: existsSync(join(dir, 'run.json'))
      ? (parseStrict(readFileSync(join(dir, 'run.json'))) as Record<string, unknown>)
      : {},
    summary: parseStrict(readFileSync(join(dir, 'summary.json'))) as Record<string, unknown>,
    traceLines,
    traces: traceLines.map((l) => parseStrict(l) as unknown as TransitionTrace),
    log: readFileSync(join(dir, 'run.log'), 'utf8'),
  };
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A process that can still run: it exists and is not a zombie. An orphan's zombie waits for init
 * to reap it (which may be slow, or never in a container without one); it is dead all the same.
 */
export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Live (non-zombie) child processes of this process, from /proc — but for the TypeScript loader's
 * own esbuild service: a thread started from source (a seal thread, a worker thread) registers tsx,
 * whose esbuild process is this process's child for its whole life and is no worker.
 */
export function childPids(parent = process.pid): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may contain spaces, so split after the last ')'
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(rest[1]) !== parent || rest[0] === 'Z') continue;
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (!(basename(argv[0]!) === 'esbuild' && argv[1]?.startsWith('--service='))) out.push(Number(name));
    } catch {
      // the process went away while we looked
    }
  }
  return out;
}

/** Worker pids recorded in run.log ("workers spawned"). */
export function loggedWorkerPids(log: string): number[] {
  for (const line of log.split('\n')) {
    if (!line.includes('"workers spawned"')) continue;
    const rec = JSON.parse(line) as { workers: { pid: number }[] };
    return rec.workers.map((w) => w.pid);
  }
  return [];
}

/** Load a config for a test; the start-up deadline is raised because CI machines are shared and busy. */
export function loadPlan(path: string): RunPlan {
  const plan = loadConfig(path);
  plan.deadlines.startupMs = Math.max(plan.deadlines.startupMs, 60_000);
  return plan;
}

/**
 * examples/forage-walkers.yaml with its 16 walkers in 4 agent workers (the example itself takes the
 * default layout: one worker on 2 cores), for tests about several workers; `workers` adds YAML lines.
 */
export function fourWorkerExample(workers: readonly string[] = []): RunPlan {
  return loadPlan(exampleWithWorkers(tmpOut('detsim-4w-'), ['agentsPerWorker: 4', ...workers]));
}

/** One step request sent to, or replied by, an agent worker (recordCalls). */
export interface CallEvent {
  worker: string;
  what: 'send' | 'reply';
  method: string;
  step: string;
}

/** Record, per agent worker, when each step request is sent and when its reply arrives (real clients, wrapped). */
export function recordCalls(fleet: Fleet, events: CallEvent[]): void {
  for (const w of fleet.agents) {
    const client = w.client;
    const call = client.call.bind(client);
    client.call = (method, scope, params, options) => {
      const step = (scope as Scope | null)?.step ?? '-';
      events.push({ worker: w.plan.workerId, what: 'send', method, step });
      const p = call(method, scope, params, options);
      p.then(
        () => events.push({ worker: w.plan.workerId, what: 'reply', method, step }),
        () => undefined,
      );
      return p;
    };
  }
}

/** Index of the first matching event, -1 when there is none. */
export const at = (
  events: CallEvent[],
  worker: string,
  what: CallEvent['what'],
  method: string,
  step: number,
): number =>
  events.findIndex((e) => e.worker === worker && e.what === what && e.method === method && e.step === String(step));

/** How each worker ran (run.log "workers spawned"): `process` or `thread`, by worker id. */
export function loggedWorkerRuns(log: string): Record<string, string> {
  for (const line of log.split('\n')) {
    if (!line.includes('"workers spawned"')) continue;
    const rec = JSON.parse(line) as { workers: { workerId: string; runs: string }[] };
    return Object.fromEntries(rec.workers.map((w) => [w.workerId, w.runs]));
  }
  return {};
}

/** OS threads of this process now (/proc/self/task): each live worker thread is one more. */
export function osThreadCount(): number {
  return readdirSync('/proc/self/task').length;
}
