// A worker killed during a run is reported as "died … signal SIGKILL", never as "lost its stream":
// the coordinator diagnoses death from the process, not from the stream's error. Real runs, real
// worker processes, real kills — at every phase, many times, and with an exit observed late; and
// worker threads terminated at every phase.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveConfig, type RunPlan, type Transport } from '../../coordinator/config.js';
import type { Fleet } from '../../coordinator/launch/launcher.js';
import type { RunPhase } from '../../coordinator/session/run-failure.js';
import { RunFailure } from '../../coordinator/session/run-failure.js';
import { runSession, type RunOptions } from '../../coordinator/session/run.js';
import { BUILT_WORKER, builtWorkersFor, childPids, tmpOut } from './helpers.js';

function plan(transport: Transport = 'unix'): RunPlan {
  return resolveConfig({
    sessionId: 'diagnosis',
    masterSeed: '13',
    steps: 6,
    stepHz: 60,
    // On a worker of its own on every transport (on threads a built-in one would run inline by default).
    environment: { id: 'forage', model: 'forage', params: { width: 8, height: 8, food: 4 }, transport: 'workers' },
    agents: { count: 2, prefix: 'd-', model: 'walker' },
    workers: { agentsPerWorker: 1, transport },
    deadlines: { startupMs: 60_000, stepMs: 20_000 },
  });
}

async function failingRun(opts: RunOptions, transport: Transport = 'unix'): Promise<RunFailure> {
  try {
    await runSession(plan(transport), opts);
  } catch (e) {
    if (e instanceof RunFailure) return e;
    throw e;
  }
  throw new Error('the run succeeded');
}

/**
 * Where an agent worker killed just before `phase` of step 2 is found dead: Prepare(k+1) rides
 * behind Commit(k) (pipelining, the default), so its hook (2, prepare) runs as step 1's Commits go
 * out, and a worker killed before them fails its Commit(1); killed before (or during) step 2's
 * Advance or Commit, it fails its Commit(2). Each names the Prepare in flight behind it.
 */
function pipelinedCommitAt(phase: RunPhase): string {
  const k = phase === 'prepare' ? 1 : 2;
  return `step ${k}, phase commit \\(the Prepare of step ${k + 1} pipelined behind it\\)`;
}

type Victim = (fleet: Fleet) => number;
const environment: Victim = (fleet) => fleet.environment.instance.pid;
const firstAgent: Victim = (fleet) => fleet.agents[0]!.instance.pid;

/**
 * Run on built worker processes (14 runs of 3 workers here), SIGKILL the victim's pid just before
 * `phase` of step 2 goes out, return the failure.
 */
async function killAt(
  phase: RunPhase,
  victim: Victim,
  extra: Pick<NonNullable<RunOptions['hooks']>, 'commandFor'> = {},
): Promise<RunFailure> {
  let fleet: Fleet | undefined;
  return failingRun({
    outDir: tmpOut(),
    hooks: {
      commandFor: builtWorkersFor(plan()),
      ...extra,
      onLaunched: (f) => (fleet = f),
      beforePhase: (step, p) => {
        if (step === 2n && p === phase) process.kill(victim(fleet!), 'SIGKILL');
      },
    },
  });
}

/** The worker process under a wrapper (not, say, a tsx compiler service the wrapper also started). */
function workerChild(parent: number): number {
  const pid = childPids(parent).find((c) => readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('--worker-id'));
  if (pid === undefined) throw new Error(`no worker process under ${parent}`);
  return pid;
}

describe('death diagnosis', () => {
  it('the environment worker killed at a step is reported as died with the signal, every time (10 runs)', async () => {
    const phases: RunPhase[] = ['prepare', 'advance', 'commit'];
    for (let run = 0; run < 10; run++) {
      const failure = await killAt(phases[run % phases.length]!, environment);
      expect(failure.kind, failure.message).toBe('worker-exited');
      expect(failure.message).toMatch(
        /^worker worker-env \(environment\) died at step [23], phase advance: process \d+ exited \(signal SIGKILL\)/,
      );
    }
    expect(childPids()).toEqual([]);
  }, 300_000);

  it('an agent worker killed at a step is reported as died with the signal, every time (4 runs)', async () => {
    const phases: RunPhase[] = ['prepare', 'commit', 'advance', 'prepare'];
    for (const phase of phases) {
      const failure = await killAt(phase, firstAgent);
      expect(failure.kind, failure.message).toBe('worker-exited');
      expect(failure.message).toMatch(
        new RegExp(
          `^worker worker-0 \\(agents d-0\\) died at ${pipelinedCommitAt(phase)}: process \\d+ exited \\(signal SIGKILL\\)`,
        ),
      );
    }
    expect(childPids()).toEqual([]);
  }, 300_000);

  it('a worker whose exit is observed well after its stream broke is still reported as died', async () => {
    // The environment runs under a wrapper that dies 300 ms after the real worker (killed while
    // idle, during the agents' Commit): its stream breaks at once, its exit is seen much later.
    const base = BUILT_WORKER;
    const wrapper = {
      command: process.execPath,
      args: ['--import', 'tsx', join('test', 'coordinator', 'fixtures', 'late-exit.ts'), base.command, ...base.args],
    };
    const innerWorker: Victim = (fleet) => workerChild(fleet.environment.instance.pid);
    const failure = await killAt('commit', innerWorker, {
      commandFor: (w) => (w.role === 'environment' ? wrapper : BUILT_WORKER),
    });
    expect(failure.kind, failure.message).toBe('worker-exited');
    expect(failure.message).toMatch(
      /^worker worker-env \(environment\) died at step 3, phase advance: process \d+ exited \(signal SIGKILL\)/,
    );
    expect(childPids()).toEqual([]);
  }, 120_000);
});

describe('death diagnosis on the thread transport', () => {
  it('a worker thread terminated just before each phase of a step is reported as died, terminated by the coordinator', async () => {
    const cases: [RunPhase, 'environment' | 'agent'][] = [
      ['prepare', 'environment'],
      ['advance', 'environment'],
      ['commit', 'environment'],
      ['prepare', 'agent'],
      ['advance', 'agent'],
      ['commit', 'agent'],
    ];
    for (const [phase, who] of cases) {
      let fleet: Fleet | undefined;
      const failure = await failingRun(
        {
          outDir: tmpOut(),
          hooks: {
            onLaunched: (f) => (fleet = f),
            beforePhase: (step, p) => {
              if (step === 2n && p === phase)
                (who === 'environment' ? fleet!.environment : fleet!.agents[0]!).instance.kill();
            },
          },
        },
        'thread',
      );
      expect(failure.kind, failure.message).toBe('worker-exited');
      expect(failure.message).toMatch(
        who === 'environment'
          ? /^worker worker-env \(environment\) died at step [23], phase advance: thread \d+ exited \(terminated by the coordinator\)$/
          : new RegExp(
              `^worker worker-0 \\(agents d-0\\) died at ${pipelinedCommitAt(phase)}: thread \\d+ exited \\(terminated by the coordinator\\)$`,
            ),
      );
      for (const w of fleet!.all()) expect(w.instance.exitInfo, w.plan.workerId).toBeDefined();
    }
  }, 300_000);
});
