// Failures with real processes: a worker SIGKILLed mid-step (and, on the thread transport, a worker
// thread terminated), a worker that stalls (SIGSTOP), a worker that never becomes ready and one
// that dies at start-up. Each run stops promptly, names
// worker, agents, step and phase, records the failure, and leaves no process behind.
import { describe, expect, it } from 'vitest';
import { resolveConfig, type RunPlan, type Transport } from '../../coordinator/config.js';
import { whoRanOutOfStartup, type Fleet } from '../../coordinator/launch/launcher.js';
import { RunFailure } from '../../coordinator/session/run-failure.js';
import { runSession, type RunOptions } from '../../coordinator/session/run.js';
import { childPids, isAlive, readRun, tmpOut } from './helpers.js';

function plan(deadlines: Record<string, number>, transport: Transport = 'unix'): RunPlan {
  return resolveConfig({
    sessionId: 'faults',
    masterSeed: '3',
    steps: 50,
    stepHz: 60,
    environment: { id: 'forage', model: 'forage' },
    agents: { count: 6, prefix: 'w-', model: 'walker' },
    workers: { agentsPerWorker: 2, transport },
    deadlines,
  });
}

/** The pids of the fleet's worker processes (an inline worker reports the coordinator's own). */
function workerProcessPids(fleet: Fleet): number[] {
  const pids = fleet.pids().map(({ pid }) => pid);
  expect(pids.filter((pid) => pid !== process.pid).length).toBeGreaterThan(0);
  return pids.filter((pid) => pid !== process.pid);
}

async function failingRun(p: RunPlan, opts: RunOptions): Promise<RunFailure> {
  try {
    await runSession(p, opts);
  } catch (e) {
    if (e instanceof RunFailure) return e;
    throw e;
  }
  throw new Error('the run succeeded');
}

/** How a killed worker's death reads: a process is SIGKILLed, a thread terminated. */
const KILLED: Record<'unix' | 'thread', RegExp> = {
  unix: /process \d+ exited \(signal SIGKILL\)/,
  thread: /thread \d+ exited \(terminated by the coordinator\)/,
};

describe.each(['unix', 'thread'] as const)('run failures (%s)', (transport) => {
  it('[LOCK-6, LOCK-7] a worker killed mid-step: stops within the step deadline, names worker, agents, step and phase, no orphans', async () => {
    const out = tmpOut();
    let fleet: Fleet | undefined;
    let killedAt = 0n;
    const stepMs = 4_000;
    const failure = await failingRun(plan({ startupMs: 60_000, stepMs }, transport), {
      outDir: out,
      hooks: {
        onLaunched: (f) => (fleet = f),
        // After step 2's Prepare and Advance, kill worker-1 just before Commit goes out.
        beforePhase: (step, phase) => {
          if (step === 2n && phase === 'commit') {
            killedAt = process.hrtime.bigint();
            fleet!.agents[1]!.instance.kill();
          }
        },
      },
    });
    const elapsedMs = Number(process.hrtime.bigint() - killedAt) / 1e6;
    expect(failure.kind).toBe('worker-exited');
    expect(failure.workerId).toBe('worker-1');
    expect(failure.agentIds).toEqual(['w-2', 'w-3']);
    expect(failure.step).toBe('2');
    expect(failure.phase).toBe('commit');
    // Its Prepare(3) rode behind the Commit(2) it never answered (pipelining): the failure says so.
    expect(failure.pipelinedPrepare).toBe('3');
    expect(failure.message).toMatch(
      /^worker worker-1 \(agents w-2, w-3\) died at step 2, phase commit \(the Prepare of step 3 pipelined behind it\): /,
    );
    expect(failure.message).toMatch(KILLED[transport]);
    expect(elapsedMs).toBeLessThan(stepMs);
    // Nothing was committed past the failed step: two full steps in the trace, the failure recorded.
    const r = readRun(failure.runDir!);
    expect(r.traces).toHaveLength(2);
    expect(r.summary).toMatchObject({
      status: 'failed',
      stepsDone: 2,
      failure: { kind: 'worker-exited', workerId: 'worker-1', step: '2', phase: 'commit' },
    });
    for (const w of fleet!.all()) expect(w.instance.exitInfo, w.plan.workerId).toBeDefined();
    // Every worker process is gone (an inline environment reports this process's pid: it is no process).
    if (transport === 'unix') for (const pid of workerProcessPids(fleet!)) expect(isAlive(pid)).toBe(false);
    expect(childPids()).toEqual([]);
  }, 120_000);
});

describe('run failures', () => {
  it('a worker ended by SIGTERM just before the run is interrupted: the run says aborted; with no interruption, the death', async () => {
    // Ctrl-C or scancel reaches every process, and the worker may see it first: its death is then
    // a consequence of the interruption, which arrives here a moment later (at most the grace).
    const outcomes: RunFailure[] = [];
    for (const interrupt of [true, false]) {
      let fleet: Fleet | undefined;
      const abort = new AbortController();
      outcomes.push(
        await failingRun(plan({ startupMs: 60_000 }), {
          outDir: tmpOut(),
          signal: abort.signal,
          hooks: {
            onLaunched: (f) => (fleet = f),
            beforePhase: (step, phase) => {
              if (step !== 2n || phase !== 'commit') return;
              process.kill(fleet!.agents[1]!.instance.pid, 'SIGTERM');
              if (interrupt) setTimeout(() => abort.abort(), 300);
            },
          },
        }),
      );
    }
    const [interrupted, died] = outcomes;
    expect(interrupted!.kind).toBe('aborted');
    expect(interrupted!.message).toMatch(/the run was interrupted \(.*worker-1 .*exited \(exit code 0\)/);
    expect(readRun(interrupted!.runDir!).summary).toMatchObject({ status: 'aborted' });
    expect(died!.kind).toBe('worker-exited');
    expect(died!.workerId).toBe('worker-1');
    expect(readRun(died!.runDir!).summary).toMatchObject({ status: 'failed' });
    expect(childPids()).toEqual([]);
  }, 120_000);

  it('a worker that stalls mid-step: "no reply within the step deadline", distinct from a death', async () => {
    const out = tmpOut();
    let fleet: Fleet | undefined;
    const failure = await failingRun(plan({ startupMs: 60_000, stepMs: 1_000 }), {
      outDir: out,
      // Step 1's Prepare as a phase of its own: pipelined, it would leave behind step 0's Commits.
      pipeline: false,
      hooks: {
        onLaunched: (f) => (fleet = f),
        beforePhase: (step, phase) => {
          if (step === 1n && phase === 'prepare') process.kill(fleet!.agents[2]!.instance.pid, 'SIGSTOP');
        },
      },
    });
    expect(failure.kind).toBe('deadline');
    expect(failure.workerId).toBe('worker-2');
    expect(failure.agentIds).toEqual(['w-4', 'w-5']);
    expect(failure.step).toBe('1');
    expect(failure.phase).toBe('prepare');
    expect(failure.message).toMatch(
      /sent no reply within the deadline at step 1, phase prepare: no reply within the step deadline of 1000 ms/,
    );
    for (const pid of workerProcessPids(fleet!)) expect(isAlive(pid)).toBe(false);
    expect(childPids()).toEqual([]);
  }, 120_000);

  it('an error reply mid-step (the environment refuses the batch) fails the epoch: no Commit, no next step', async () => {
    const out = tmpOut();
    const phases: string[] = [];
    const p = resolveConfig(
      {
        sessionId: 'refused',
        masterSeed: '3',
        steps: 6,
        environment: { id: 'forage', model: 'forage' },
        agents: [
          { id: 'w-0', model: 'walker' },
          { id: 'bad', model: './fixtures/bad-mover.ts' },
        ],
        workers: { agentsPerWorker: 1 },
        deadlines: { startupMs: 60_000 },
      },
      { baseDir: 'test/coordinator' },
    );
    const failure = await failingRun(p, {
      outDir: out,
      hooks: { beforePhase: (step, phase) => void phases.push(`${step}:${phase}`) },
    });
    expect(failure.kind).toBe('error-reply');
    expect(failure.workerId).toBe('worker-env');
    expect(failure.step).toBe('2');
    expect(failure.phase).toBe('advance');
    expect(failure.message).toMatch(/INVALID_ARGUMENT: .*teleport/);
    // Step 2 prepared and advanced (refused) but never committed, and step 3 never began.
    expect(phases.slice(-3)).toEqual(['1:commit', '2:prepare', '2:advance']);
    expect(readRun(failure.runDir!).traces).toHaveLength(2);
    expect(childPids()).toEqual([]);
  }, 120_000);

  it('a worker that never becomes ready is reported as such, and nothing is left running', async () => {
    const out = tmpOut();
    const t0 = Date.now();
    // The environment worker is a real process that never prints its ready line. (If the machine is
    // slow for everyone, the others' Hello may time out first; the budget rule still names it.)
    const failure = await failingRun(plan({ startupMs: 2_500 }), {
      outDir: out,
      hooks: {
        commandFor: (w) =>
          w.workerId === 'worker-env'
            ? { command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)', '--'] }
            : undefined,
      },
    });
    expect(failure.kind).toBe('never-ready');
    expect(failure.workerId).toBe('worker-env');
    expect(failure.phase).toBe('startup');
    expect(failure.message).toMatch(
      /^worker worker-env \(environment\) never became ready at phase startup: no ready line within the start-up deadline of 2500 ms/,
    );
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(readRun(failure.runDir!).summary).toMatchObject({
      status: 'failed',
      stepsDone: 0,
      failure: { kind: 'never-ready', workerId: 'worker-env' },
    });
    expect(childPids()).toEqual([]);
  }, 120_000);

  it('a worker that exits during start-up is reported with its exit code', async () => {
    const out = tmpOut();
    const failure = await failingRun(plan({ startupMs: 60_000 }), {
      outDir: out,
      hooks: {
        commandFor: (w) =>
          w.workerId === 'worker-0' ? { command: process.execPath, args: ['-e', 'process.exit(3)', '--'] } : undefined,
      },
    });
    expect(failure.kind).toBe('never-ready');
    expect(failure.workerId).toBe('worker-0');
    expect(failure.message).toMatch(/exited before it was ready \(exit code 3\)/);
    expect(childPids()).toEqual([]);
  }, 120_000);
});

describe('the shared start-up budget', () => {
  const where = (workerId: string) => ({ workerId, agentIds: [], step: null, phase: 'startup' as const });
  const after = (ms: number, f: RunFailure) => new Promise<never>((_, rej) => setTimeout(() => rej(f), ms));

  it('names the worker that never became ready even when a healthy Hello timed out first', async () => {
    const hello = new RunFailure('deadline', 'no reply within the start-up deadline', where('worker-0'));
    const silent = new RunFailure('never-ready', 'no ready line', where('worker-env'));
    const attempts = [after(5, hello), Promise.resolve('ready'), after(150, silent)];
    attempts.forEach((a) => a.catch(() => {}));
    await expect(whoRanOutOfStartup(attempts, hello)).resolves.toBe(silent);
  });

  it('keeps the first failure when nobody was silent, or when another attempt does not settle in the grace', async () => {
    const a = new RunFailure('deadline', 'a', where('worker-0'));
    const b = new RunFailure('deadline', 'b', where('worker-1'));
    const both = [after(40, a), after(5, b)];
    both.forEach((x) => x.catch(() => {}));
    // Plan order, not completion order: worker-0 is named though worker-1 failed first.
    await expect(whoRanOutOfStartup(both, b)).resolves.toBe(a);
    const hung = [after(5, b), new Promise<never>(() => {})];
    await expect(whoRanOutOfStartup(hung, b, 50)).resolves.toBe(b);
  });
});
