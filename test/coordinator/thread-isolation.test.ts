// Isolation on the thread transport (issue #13): a user model that throws, spins forever or exhausts
// its heap fails the run with the same named failure (kind, worker, agents, step, phase, the
// model's words) as on worker processes; the coordinator survives it and no thread is left behind;
// strict mode guards each thread on its own, its shared-state guard included. Real threads and
// processes, user model modules from test/coordinator/fixtures. Not the happy path across transports (transports.test.ts).
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveConfig, type RunPlan, type Transport } from '../../coordinator/config.js';
import type { Fleet } from '../../coordinator/launch/launcher.js';
import { RunFailure } from '../../coordinator/session/run-failure.js';
import { runSession } from '../../coordinator/session/run.js';
import { detsimTimed, SOURCE_CLI } from '../checkpoint/cli.js';
import { childPids, osThreadCount, readRun, tmpOut } from './helpers.js';
import { THREAD_YOUNG_GENERATION_MB } from '../../coordinator/launch/thread-worker.js';
import { traceOf } from '../trace-read.js';

const FIXTURES = resolve('test', 'coordinator', 'fixtures');

/** A small run: a walker (worker-0) beside the agents given, one agent per worker. */
function isolationPlan(
  transport: Transport,
  agents: Record<string, unknown>[],
  extra: { stepMs?: number; threadHeapMb?: number; agentsPerWorker?: number } = {},
): RunPlan {
  return resolveConfig(
    {
      sessionId: 'isolation',
      masterSeed: '5',
      steps: 6,
      stepHz: 60,
      environment: { id: 'forage', model: 'forage', params: { width: 8, height: 8, food: 4 } },
      agents: [{ id: 'walk-a', model: 'walker' }, ...agents],
      workers: {
        agentsPerWorker: extra.agentsPerWorker ?? 1,
        transport,
        ...(extra.threadHeapMb !== undefined ? { threadHeapMb: extra.threadHeapMb } : {}),
      },
      deadlines: { startupMs: 60_000, stepMs: extra.stepMs ?? 30_000 },
    },
    { baseDir: FIXTURES },
  );
}

interface Failed {
  failure: RunFailure;
  fleet: Fleet;
}

/** Run `plan`, which must fail; the failure and the fleet it ran on. */
async function failingRun(plan: RunPlan): Promise<Failed> {
  let fleet: Fleet | undefined;
  try {
    await runSession(plan, { outDir: tmpOut('detsim-isolation-'), hooks: { onLaunched: (f) => (fleet = f) } });
  } catch (e) {
    if (e instanceof RunFailure) return { failure: e, fleet: fleet! };
    throw e;
  }
  throw new Error('the run succeeded');
}

/** What a failure names, without the physical words (which process or thread) that differ by transport. */
function named(f: RunFailure) {
  return { kind: f.kind, workerId: f.workerId, agentIds: f.agentIds, step: f.step, phase: f.phase };
}

/** Every worker of the fleet has exited (processes reaped, threads ended), and no child process is left. */
function nothingLeft(fleet: Fleet): void {
  for (const w of fleet.all()) expect(w.instance.exitInfo, w.plan.workerId).toBeDefined();
  expect(childPids()).toEqual([]);
}

/** The run recorded the failure in summary.json as named. */
function recorded(f: RunFailure): void {
  expect(readRun(f.runDir!).summary).toMatchObject({ status: 'failed', failure: named(f) });
}

const BOTH: Transport[] = ['unix', 'thread'];

describe('a failing model on a thread fails the run as on a process', () => {
  it('a model that throws in Prepare: the same named failure and message on both transports', async () => {
    const seen: ReturnType<typeof named>[] = [];
    for (const transport of BOTH) {
      const { failure, fleet } = await failingRun(
        isolationPlan(transport, [{ id: 'thrower', model: './throw-in-prepare.ts' }]),
      );
      expect(failure.message, transport).toMatch(
        /^worker worker-1 \(agents thrower\) .* at step 2, phase prepare: .*BACKEND_FAILURE: agent thrower: prepare failed: throw-in-prepare: the model gave up at step 2/,
      );
      seen.push(named(failure));
      recorded(failure);
      nothingLeft(fleet);
    }
    expect(seen[0]).toMatchObject({ workerId: 'worker-1', agentIds: ['thrower'], step: '2', phase: 'prepare' });
    expect(seen[1]).toEqual(seen[0]);
  }, 180_000);

  it("a model that makes its worker print non-canonical replies (it replaces its isolate's JSON.stringify): the coordinator refuses the reply on both transports", async () => {
    const seen: ReturnType<typeof named>[] = [];
    for (const transport of BOTH) {
      const { failure, fleet } = await failingRun(
        isolationPlan(transport, [{ id: 'pretty', model: './pretty-printer.ts' }]),
      );
      expect(failure.message, transport).toMatch(/bad reply: body is not RFC 8785 canonical JSON/);
      seen.push(named(failure));
      nothingLeft(fleet);
    }
    expect(seen[0]).toMatchObject({ workerId: 'worker-1', step: '2', phase: 'prepare' });
    expect(seen[1]).toEqual(seen[0]);
  }, 180_000);

  it('a model that calls process.exit(7) in Prepare: worker-exited with exit code 7 at the same step and phase on both', async () => {
    const seen: ReturnType<typeof named>[] = [];
    for (const transport of BOTH) {
      const { failure, fleet } = await failingRun(
        isolationPlan(transport, [{ id: 'quitter', model: './exit-in-prepare.ts' }]),
      );
      const who = transport === 'thread' ? 'thread \\d+' : 'process \\d+';
      expect(failure.message, transport).toMatch(
        new RegExp(
          `^worker worker-1 \\(agents quitter\\) died at step 2, phase prepare: ${who} exited \\(exit code 7\\)`,
        ),
      );
      seen.push(named(failure));
      recorded(failure);
      nothingLeft(fleet);
    }
    expect(seen[0]).toMatchObject({ kind: 'worker-exited', workerId: 'worker-1', agentIds: ['quitter'] });
    expect(seen[1]).toEqual(seen[0]);
  }, 180_000);

  it('an uncaught exception outside any callback: worker-exited naming the error (a thread: "threw Error: …")', async () => {
    for (const transport of BOTH) {
      const { failure, fleet } = await failingRun(
        isolationPlan(transport, [{ id: 'late', model: './throw-later.ts' }]),
      );
      expect(named(failure), transport).toMatchObject({
        kind: 'worker-exited',
        workerId: 'worker-1',
        agentIds: ['late'],
      });
      // A process prints the error (its stack tail is what the failure quotes) and exits 1; a
      // thread's error is its cause of death.
      expect(failure.message).toMatch(
        transport === 'thread'
          ? /thread \d+ exited \(threw Error: throw-later: an uncaught error after step 2 prepared\)/
          : /process \d+ exited \(exit code 1\); last stderr: .*throw-later\.ts/,
      );
      recorded(failure);
      nothingLeft(fleet);
    }
  }, 180_000);

  it('an uncaught `throw null` outside any callback: the coordinator survives and names the death on both', async () => {
    for (const transport of BOTH) {
      const { failure, fleet } = await failingRun(
        isolationPlan(transport, [{ id: 'nul', model: './throw-null-later.ts' }]),
      );
      expect(named(failure), transport).toMatchObject({
        kind: 'worker-exited',
        workerId: 'worker-1',
        agentIds: ['nul'],
      });
      expect(failure.message).toMatch(
        transport === 'thread'
          ? /thread \d+ exited \(threw a value that is not an Error: null\)$/
          : /process \d+ exited \(exit code \d+\)/,
      );
      recorded(failure);
      nothingLeft(fleet);
    }
  }, 180_000);

  it('a model that spins forever in Prepare: a step deadline naming worker, step and phase; the thread is terminated', async () => {
    const stepMs = 1_500;
    const seen: ReturnType<typeof named>[] = [];
    for (const transport of BOTH) {
      const t0 = process.hrtime.bigint();
      const threads = osThreadCount();
      const { failure, fleet } = await failingRun(
        isolationPlan(transport, [{ id: 'spin-b', model: './spin-forever.ts' }], { stepMs }),
      );
      expect(Number(process.hrtime.bigint() - t0) / 1e6).toBeLessThan(60_000);
      expect(failure.kind, transport).toBe('deadline');
      expect(failure.message).toContain(`no reply within the step deadline of ${stepMs} ms`);
      seen.push(named(failure));
      recorded(failure);
      // The spinning worker was stopped (a thread terminated mid-loop), not left running.
      nothingLeft(fleet);
      expect(osThreadCount()).toBeLessThanOrEqual(threads);
    }
    expect(seen[0]).toMatchObject({ kind: 'deadline', workerId: 'worker-1', agentIds: ['spin-b'], phase: 'prepare' });
    expect(seen[1]).toEqual(seen[0]);
  }, 180_000);

  it('through the CLI, a spinning thread neither hangs the coordinator nor outlives it: exit 1 soon after the deadline', async () => {
    const dir = tmpOut('detsim-spin-cli-');
    const config = join(dir, 'spin.yaml');
    writeFileSync(
      config,
      JSON.stringify({
        sessionId: 'spin-cli',
        masterSeed: '9',
        steps: 4,
        environment: { id: 'forage', model: 'forage', params: { width: 8, height: 8, food: 4 } },
        agents: [
          { id: 'walk-a', model: 'walker' },
          { id: 'spin-b', model: join(FIXTURES, 'spin-forever.ts') },
        ],
        workers: { agentsPerWorker: 1, transport: 'thread' },
        deadlines: { startupMs: 60_000, stepMs: 1_500 },
      }),
    );
    // From source: the spinning model is a .ts module, which only a worker under tsx can load.
    const r = await detsimTimed(
      ['run', config, '--out', dir],
      /detsim: \[audit_worker_deadline\] run failed/,
      SOURCE_CLI,
    );
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      /detsim: \[audit_worker_deadline\] run failed: worker worker-1 \(agents spin-b\) sent no reply within the deadline at step \d+, phase prepare/,
    );
    expect(r.exitAfterResultMs).not.toBeNull();
    expect(r.exitAfterResultMs!).toBeLessThan(5_000);
  }, 120_000);

  it('a model blocked in a system call (terminate() cannot reach it): the run still fails at the deadline, the thread is abandoned, then ends', async () => {
    const threads = osThreadCount();
    const t0 = process.hrtime.bigint();
    const { failure, fleet } = await failingRun(
      isolationPlan('thread', [{ id: 'stuck', model: './block-in-syscall.ts' }], { stepMs: 1_500 }),
    );
    // Well before the model's `sleep 60` returns.
    expect(Number(process.hrtime.bigint() - t0) / 1e6).toBeLessThan(30_000);
    expect(named(failure)).toMatchObject({
      kind: 'deadline',
      workerId: 'worker-1',
      agentIds: ['stuck'],
      phase: 'prepare',
    });
    recorded(failure);
    const stuck = fleet.agents[1]!.instance;
    expect(stuck.exitInfo?.error).toMatch(
      /^terminated by the coordinator; still blocked outside JavaScript \d+ ms later, abandoned$/,
    );
    expect(readRun(failure.runDir!).log).toContain('abandoned');
    // End the system call (the model's sleep child): the abandoned thread then ends for good.
    const sleeper = childPids().filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep\0'));
    expect(sleeper).toHaveLength(1);
    process.kill(sleeper[0]!, 'SIGKILL');
    const until = Date.now() + 20_000;
    while (osThreadCount() > threads && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    expect(osThreadCount()).toBeLessThanOrEqual(threads);
    expect(childPids()).toEqual([]);
  }, 180_000);

  it('a worker thread runs with its heap limits: workers.threadHeapMb old, THREAD_YOUNG_GENERATION_MB young', async () => {
    const plan = isolationPlan(
      'thread',
      [{ id: 'heap', model: './heap-limits.ts', params: { strict: false }, actionFields: ['move'] }],
      { threadHeapMb: 512 },
    );
    const r = await runSession(plan, { outDir: tmpOut('detsim-heap-limits-') });
    const decision = (
      traceOf(r.runDir)[0] as { behaviour: { agents: { agentId: string; decision: unknown }[] } }
    ).behaviour.agents.find((a) => a.agentId === 'heap')!.decision;
    expect(decision).toEqual({ move: 'north', oldMb: 512, youngMb: THREAD_YOUNG_GENERATION_MB });
  }, 60_000);

  it('a model that exhausts its thread heap (workers.threadHeapMb: 64): worker-exited, "ran out of memory"; the coordinator goes on', async () => {
    const threads = osThreadCount();
    const { failure, fleet } = await failingRun(
      isolationPlan('thread', [{ id: 'hog', model: './grow-forever.ts' }], { threadHeapMb: 64 }),
    );
    expect(named(failure)).toMatchObject({ kind: 'worker-exited', workerId: 'worker-1', agentIds: ['hog'] });
    expect(failure.phase).toBe('prepare');
    expect(failure.message).toMatch(
      /^worker worker-1 \(agents hog\) died at step \d+, phase prepare: thread \d+ exited/,
    );
    expect(failure.message).toMatch(/ran out of memory/);
    recorded(failure);
    nothingLeft(fleet);
    expect(osThreadCount()).toBeLessThanOrEqual(threads);
    // The coordinator's own process survived and still runs threads: a fresh run completes.
    const after = await runSession(isolationPlan('thread', []), { outDir: tmpOut('detsim-isolation-') });
    expect(after.steps).toBe(6);
  }, 180_000);
});

describe('user model modules on a thread load as in a process', () => {
  it("a TypeScript model outside any package (no package.json: CommonJS by Node's rules) runs on both transports", async () => {
    const dir = tmpOut('detsim-loose-model-');
    const model = join(dir, 'stay-put.ts');
    const sdk = join(process.cwd(), 'workers', 'sdk.js');
    writeFileSync(
      model,
      [
        `import { defineAgentModel } from ${JSON.stringify(sdk)};`,
        'export default defineAgentModel<{ n: number }>({',
        "  modelVersion: 'stay-put-v1',",
        '  initialize: () => ({ n: 0 }),',
        "  prepare: (state) => ((state.n += 1), { move: 'stay' }),",
        '  commit() {},',
        '  capture: (state) => ({ n: state.n }),',
        '  restore: (data) => ({ n: (data as { n: number }).n }),',
        '});',
        '',
      ].join('\n'),
    );
    const digests: string[] = [];
    for (const transport of BOTH) {
      const result = await runSession(isolationPlan(transport, [{ id: 'loose', model }]), {
        outDir: tmpOut('detsim-isolation-'),
      });
      expect(result.steps, transport).toBe(6);
      digests.push(result.behaviourDigest);
    }
    expect(digests[1]).toBe(digests[0]);
  }, 180_000);
});

describe('a thread that refuses its options fails start-up as a process does', () => {
  it('a model module gone by launch: never-ready at startup naming [struct_unknown_model] on both transports', async () => {
    const seen: ReturnType<typeof named>[] = [];
    for (const transport of BOTH) {
      const dir = tmpOut('detsim-gone-model-');
      const model = join(dir, 'gone.ts');
      writeFileSync(model, "export default { kind: 'agent' };\n"); // never loaded: gone before the launch
      const plan = isolationPlan(transport, [{ id: 'gone', model }]);
      rmSync(model); // after the plan checked it, before a worker loads it
      const threads = osThreadCount();
      const { failure } = await failingRun(plan); // no fleet: the launch failed
      expect(failure.message, transport).toMatch(
        new RegExp(
          `^worker worker-1 \\(agents gone\\) never became ready at phase startup: its ${transport === 'thread' ? 'thread' : 'process'} exited before it was ready \\(exit code 2\\); last stderr: detsim: \\[struct_unknown_model\\] --model ".*gone\\.ts": no such model module file`,
        ),
      );
      seen.push(named(failure));
      expect(childPids()).toEqual([]);
      expect(osThreadCount()).toBeLessThanOrEqual(threads);
    }
    expect(seen[0]).toMatchObject({ kind: 'never-ready', workerId: 'worker-1', agentIds: ['gone'], phase: 'startup' });
    expect(seen[1]).toEqual(seen[0]);
  }, 180_000);
});

describe('strict mode per thread', () => {
  it('Math.random under strict fails with the StrictModeViolation text on both transports, the same failure', async () => {
    const seen: ReturnType<typeof named>[] = [];
    for (const transport of BOTH) {
      const { failure, fleet } = await failingRun(
        isolationPlan(transport, [{ id: 'strict-r', model: './random-walker.ts', params: { strict: true } }]),
      );
      expect(failure.message, transport).toContain(
        'agent strict-r: prepare failed: strict mode: agent strict-r called Math.random() inside prepare (nondeterministic; derive randomness from the seed and time from the step)',
      );
      seen.push(named(failure));
      nothingLeft(fleet);
    }
    expect(seen[0]).toMatchObject({ workerId: 'worker-1', agentIds: ['strict-r'], phase: 'prepare' });
    expect(seen[1]).toEqual(seen[0]);
  }, 180_000);

  it('a strict model whose agents share one state fails at step 0, phase prepare, naming the agent, on both', async () => {
    // walk-a, shared-a and shared-b on worker-0: shared-b's prepare moves shared-a's (the same) state.
    const seen: ReturnType<typeof named>[] = [];
    for (const transport of BOTH) {
      const sharing = ['shared-a', 'shared-b'].map((id) => ({
        id,
        model: './shared-state-agent.ts',
        params: { shared: true, strict: true },
      }));
      const { failure, fleet } = await failingRun(isolationPlan(transport, sharing, { agentsPerWorker: 3 }));
      expect(failure.message, transport).toMatch(
        /^worker worker-0 \(agents walk-a, shared-a, shared-b\) .* at step 0, phase prepare: .*BACKEND_FAILURE: agent shared-a: another agent's prepare changed this agent's state \(agents on one worker must not share mutable state/,
      );
      seen.push(named(failure));
      recorded(failure);
      nothingLeft(fleet);
    }
    expect(seen[0]).toMatchObject({ workerId: 'worker-0', step: '0', phase: 'prepare' });
    expect(seen[1]).toEqual(seen[0]);
  }, 180_000);

  it("one thread's strict guard does not reach another: strict built-ins beside a non-strict Math.random model complete", async () => {
    // walk-a (built-in walker, strict by default) and the environment run strict in their threads
    // while loose-r calls Math.random in its own, concurrently, every step; none is refused.
    const plan = isolationPlan('thread', [
      { id: 'loose-r', model: './random-walker.ts', params: { strict: false } },
      { id: 'walk-c', model: 'walker' },
    ]);
    const result = await runSession(plan, { outDir: tmpOut('detsim-isolation-') });
    expect(result.steps).toBe(6);
    const moves = readRun(result.runDir).traces.map(
      (t) => (t.behaviour.agents.find((a) => a.agentId === 'loose-r')!.decision as { move: string }).move,
    );
    expect(moves).toHaveLength(6);
  }, 180_000);
});
