// Test helper: a coordinator as its own process (`detsim run` through the real CLI entry), its
// workers' pids and socket addresses read from run.log, a SIGKILL, and clean-up of whatever a failed
// test left running (spinning or stopped workers). Not a test.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { stepsOnDisk } from '../trace-read.js';
import { isRunning, loggedWorkerPids, tmpOut } from './helpers.js';

const CLI = ['--import', 'tsx', 'coordinator/cli/main.ts'];

export async function waitFor(what: string, check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface Coordinator {
  child: ChildProcess;
  exited: Promise<void>;
  runDir: string;
  log(): string;
}

const started: Coordinator[] = [];
const workerPids: number[] = [];

/**
 * Start `detsim run <config>` as its own process, like a user would. `stepByStep` seals a trace
 * segment per step (`--segment-steps 1`; a segment appears on disk only once sealed), for tests
 * that wait for steps to commit before they strike.
 */
export function startCoordinator(config: string, session: string, opts: { stepByStep?: boolean } = {}): Coordinator {
  const out = tmpOut();
  const segments = opts.stepByStep ? ['--segment-steps', '1'] : [];
  const child = spawn(process.execPath, [...CLI, 'run', config, '--out', out, ...segments], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.resume();
  const exited = new Promise<void>((res) => child.once('exit', () => res()));
  const runDir = join(out, `${session}-1`);
  const log = (): string => (existsSync(join(runDir, 'run.log')) ? readFileSync(join(runDir, 'run.log'), 'utf8') : '');
  const c = { child, exited, runDir, log };
  started.push(c);
  return c;
}

/** Wait until more than `steps` steps are in the trace on disk (a coordinator started with `stepByStep`). */
export async function stepsCommitted(c: Coordinator, steps: number): Promise<void> {
  await waitFor('steps to commit', () => stepsOnDisk(c.runDir) > steps, 60_000);
}

/** Wait until every worker said Hello; returns their pids and socket addresses (from run.log). */
export async function readyWorkers(c: Coordinator, count: number): Promise<{ pids: number[]; listens: string[] }> {
  const listens = (): string[] => [...c.log().matchAll(/"listen":"([^"]+)","hello"/g)].map((m) => m[1]!);
  await waitFor('the workers to be ready', () => listens().length === count, 90_000);
  const pids = loggedWorkerPids(c.log());
  workerPids.push(...pids);
  return { pids, listens: listens() };
}

export function socketDir(listens: string[]): string {
  return dirname(listens[0]!.slice('unix:'.length));
}

export async function sigkill(c: Coordinator): Promise<void> {
  c.child.kill('SIGKILL');
  await c.exited;
}

/** SIGKILL every worker and coordinator started here that still runs (use in afterEach). */
export async function killLeftovers(): Promise<void> {
  for (const pid of workerPids.splice(0)) {
    if (!isRunning(pid)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  for (const c of started.splice(0)) {
    if (c.child.exitCode === null && c.child.signalCode === null) await sigkill(c);
  }
}
