// A SIGKILLed coordinator (the real CLI, `detsim run`) leaves nothing behind: every worker dies with
// it — one spinning forever in model code, one stopped with SIGSTOP — and the socket directory it
// could not remove is swept by the next launch, while a live coordinator's directory is untouched.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runSession } from '../../coordinator/run.js';
import { isRunning, loadPlan, loggedWorkerPids, tmpOut } from './helpers.js';

const CLI = ['--import', 'tsx', 'coordinator/cli/main.ts'];

async function waitFor(what: string, check: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Coordinator {
  child: ChildProcess;
  exited: Promise<void>;
  runDir: string;
  log(): string;
}

const started: Coordinator[] = [];
const workerPids: number[] = [];

/** Start `detsim run <config>` as its own process, like a user would. */
function startCoordinator(config: string, session: string): Coordinator {
  const out = tmpOut();
  const child = spawn(process.execPath, [...CLI, 'run', config, '--out', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr!.resume();
  const exited = new Promise<void>((res) => child.once('exit', () => res()));
  const runDir = join(out, `${session}-1`);
  const log = (): string => (existsSync(join(runDir, 'run.log')) ? readFileSync(join(runDir, 'run.log'), 'utf8') : '');
  const c = { child, exited, runDir, log };
  started.push(c);
  return c;
}

/** Wait until every worker said Hello; returns their pids and socket addresses (from run.log). */
async function readyWorkers(c: Coordinator, count: number): Promise<{ pids: number[]; listens: string[] }> {
  const listens = (): string[] => [...c.log().matchAll(/"listen":"([^"]+)","hello"/g)].map((m) => m[1]!);
  await waitFor('the workers to be ready', () => listens().length === count, 90_000);
  const pids = loggedWorkerPids(c.log());
  workerPids.push(...pids);
  return { pids, listens: listens() };
}

function socketDir(listens: string[]): string {
  return dirname(listens[0]!.slice('unix:'.length));
}

async function sigkill(c: Coordinator): Promise<void> {
  c.child.kill('SIGKILL');
  await c.exited;
}

afterEach(async () => {
  // A failed assertion must not leave spinning or stopped processes behind.
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
});

describe('workers die with a SIGKILLed coordinator', () => {
  it('a worker spinning forever in model code dies with it', async () => {
    const c = startCoordinator('test/coordinator/fixtures/spin-forever.yaml', 'spin-forever');
    const { pids } = await readyWorkers(c, 3);
    await waitFor('the model to spin', () => c.log().includes('spin-forever: spinning in prepare'), 60_000);
    await sigkill(c);
    await waitFor(`workers ${pids.join(', ')} to die`, () => pids.every((pid) => !isRunning(pid)), 10_000);
  }, 180_000);

  it('a stopped (SIGSTOP) worker dies with it', async () => {
    const c = startCoordinator('test/coordinator/fixtures/long-walkers.yaml', 'long-walkers');
    const { pids } = await readyWorkers(c, 3);
    await waitFor('steps to commit', () => existsSync(join(c.runDir, 'trace.jsonl')) && readFileSync(join(c.runDir, 'trace.jsonl'), 'utf8').split('\n').length > 3, 60_000);
    process.kill(pids[0]!, 'SIGSTOP');
    process.kill(pids[1]!, 'SIGSTOP');
    await sigkill(c);
    await waitFor(`workers ${pids.join(', ')} to die`, () => pids.every((pid) => !isRunning(pid)), 10_000);
  }, 180_000);
});

describe('socket directories', () => {
  it('the next launch sweeps the directory of a SIGKILLed coordinator, not that of a live one', async () => {
    const dead = startCoordinator('test/coordinator/fixtures/long-walkers.yaml', 'long-walkers');
    const live = startCoordinator('test/coordinator/fixtures/long-walkers.yaml', 'long-walkers');
    const deadDir = socketDir((await readyWorkers(dead, 3)).listens);
    const liveWorkers = await readyWorkers(live, 3);
    const liveDir = socketDir(liveWorkers.listens);
    // The live coordinator waits (idle) for a stopped worker while the rest of the test runs.
    process.kill(liveWorkers.pids[1]!, 'SIGSTOP');
    const liveSockets = readdirSync(liveDir).sort();
    await sigkill(dead);
    expect(existsSync(deadDir)).toBe(true);
    // Another run starts (and ends) in this process: its launch sweeps.
    const plan = loadPlan('examples/lif-pair.yaml');
    plan.steps = 1;
    await runSession(plan, { outDir: tmpOut() });
    expect(existsSync(deadDir)).toBe(false);
    expect(readdirSync(liveDir).sort()).toEqual(liveSockets);
    await sigkill(live);
    rmSync(liveDir, { recursive: true, force: true });
  }, 240_000);
});
