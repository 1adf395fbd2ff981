// The transport is physical (issue #13): every example run on Unix sockets, loopback TCP, worker
// threads and inline (the coordinator's own thread) gives one ReproHash and one behaviour digest,
// the golden ones; a run checkpointed on one
// transport resumes on another with the uninterrupted run's ReproHash; replay, diff and verify work
// on thread runs; and a thread run's coordinator exits as soon as it has printed its result (no
// worker thread keeps it alive). Real workers, real threads, real files. Not the thread failure
// cases (thread-isolation.test.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { exampleWithWorkers } from '../example-config.js';
import { TRANSPORTS, type Transport } from '../../coordinator/config.js';
import { DEFAULT_GOLDEN_DIR, exampleName, readGolden } from '../../coordinator/diff0/goldens.js';
import { defaultConfigs } from '../../coordinator/diff0/verify.js';
import { runSession } from '../../coordinator/session/run.js';
import { committedIds, detsim, detsimTimed, runAndKill } from '../checkpoint/cli.js';
import { prepareRuntimesFor } from '../cross-lang/example-runtimes.js';
import { builtWorkersFor, loadPlan, loggedWorkerRuns, osThreadCount, readRun, tmpOut } from './helpers.js';

const examples = defaultConfigs('examples');
const LIF = 'examples/lif-pair.yaml';
/** The short lif-pair run the resume and replay cases compare against. */
const LIF_STEPS = 12;

/**
 * One in-process run of `config` on `transport`: its ReproHash, behaviour digest and how its workers ran.
 * TypeScript worker processes are the built ones (not tsx from source; helpers.ts builtWorkersFor).
 */
async function runOn(config: string, transport: Transport, steps: number, environment?: 'workers') {
  const plan = { ...loadPlan(config), transport, ...(environment ? { environmentTransport: environment } : {}) };
  const result = await runSession(plan, {
    outDir: tmpOut('detsim-transport-'),
    steps,
    onWarning: () => undefined,
    hooks: { commandFor: builtWorkersFor(plan) },
  });
  return {
    runDir: result.runDir,
    reproHash: result.reproHash,
    behaviourDigest: result.behaviourDigest,
    runs: loggedWorkerRuns(readRun(result.runDir).log),
  };
}

const reproHashOf = (stdout: string) => /repro hash\s+([0-9a-f]{16})/.exec(stdout)?.[1];

describe('one ReproHash across transports', () => {
  expect(TRANSPORTS).toEqual(['unix', 'tcp', 'thread', 'inline']);

  for (const config of examples) {
    it(
      `[LOCK-19] ${config}: unix, tcp, thread and inline each give its golden ReproHash and behaviour digest`,
      { timeout: 600_000 },
      async (ctx) => {
        const skip = prepareRuntimesFor(config);
        if (skip) return ctx.skip(skip);
        const g = readGolden(DEFAULT_GOLDEN_DIR, exampleName(config))!;
        const plan = loadPlan(config);
        // Each transport, and threads and processes with the environment on a worker of its own too
        // (the default puts a built-in TypeScript environment of a thread or unix run in the coordinator's thread).
        const cases = [
          ...TRANSPORTS.map((t) => [t] as const),
          ['thread', 'workers'] as const,
          ['unix', 'workers'] as const,
        ];
        for (const [transport, environment] of cases) {
          const r = await runOn(config, transport, g.steps, environment);
          expect({ transport, reproHash: r.reproHash, behaviourDigest: r.behaviourDigest }).toEqual({
            transport,
            reproHash: g.reproHash,
            behaviourDigest: g.behaviourDigest,
          });
          // The transport was really used: TypeScript workers on threads or inline, the others in processes.
          const hosted = (transport === 'thread' || transport === 'inline') && transport;
          const builtInEnv = plan.environment.model === 'forage';
          const expected = Object.fromEntries(
            plan.workers.map((w) => {
              const ts = (w.runtime ?? 'typescript') === 'typescript';
              const local = transport === 'thread' || transport === 'unix';
              const envInline = w.role === 'environment' && ts && builtInEnv && local && !environment;
              return [w.workerId, envInline ? 'inline' : hosted && ts ? hosted : 'process'];
            }),
          );
          expect({ transport, environment, runs: r.runs }).toEqual({ transport, environment, runs: expected });
        }
      },
    );
  }
});

describe.each([
  ['thread', 'unix'],
  ['unix', 'thread'],
  ['inline', 'unix'],
] as const)('resume across transports: checkpointed on %s, resumed on %s', (from, to) => {
  it(
    "[LOCK-19, STORE-20] SIGKILLed after a committed checkpoint, resumed on the other transport: the uninterrupted run's (golden) ReproHash",
    { timeout: 300_000 },
    async () => {
      // The run total is part of the ReproHash: the killed run is planned for the golden's steps.
      const g = readGolden(DEFAULT_GOLDEN_DIR, 'lif-pair')!;
      const out = tmpOut('detsim-cross-');
      const runDir = join(out, 'lif-pair-1');
      const { killed } = await runAndKill(
        // --keep: a fast run may commit past ckpt-e1-2 before the kill lands; it must still be listed.
        [
          'run',
          LIF,
          '--steps',
          String(g.steps),
          '--checkpoint-every',
          '2',
          '--keep',
          '100',
          '--transport',
          from,
          '--out',
          out,
        ],
        runDir,
        (d) => committedIds(d).includes('ckpt-e1-2'),
      );
      expect(killed).toBe(true);
      expect(existsSync(join(runDir, 'summary.json'))).toBe(false);
      const r = detsim(['resume', runDir, '--checkpoint', 'ckpt-e1-2', '--transport', to]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/restored\s+ckpt-e1-2 at boundary 2 into epoch e2/);
      expect(reproHashOf(r.stdout)).toBe(g.reproHash);
      expect(readRun(runDir).summary.behaviourDigest).toBe(g.behaviourDigest);
      // Both sessions ran where they were told: the first "workers spawned" line is the killed
      // run's, the last the resume's.
      const spawned = readFileSync(join(runDir, 'run.log'), 'utf8')
        .split('\n')
        .filter((l) => l.includes('"workers spawned"'));
      expect(spawned).toHaveLength(2);
      const kinds = (line: string) => [...new Set(Object.values(loggedWorkerRuns(line)))].sort();
      // lif-pair's forage environment: in the coordinator's thread on threads and unix processes (the
      // default), and on resume where launch.json says it ran — inline after a thread or unix run, on
      // the workers after an all-inline one (whose launch.json records no environment placement).
      const expected: Record<string, string[][]> = {
        'thread>unix': [
          ['inline', 'thread'],
          ['inline', 'process'],
        ],
        'unix>thread': [
          ['inline', 'process'],
          ['inline', 'thread'],
        ],
        'inline>unix': [['inline'], ['process']],
      };
      expect(spawned.map(kinds)).toEqual(expected[`${from}>${to}`]);
    },
  );
});

describe('replay, diff and verify on threads and processes', () => {
  it(
    'detsim replay --transport thread (a config with --resume-at, a recorded unix run) reproduces the unix ReproHash; diff of a thread and a unix run is DIFF=0',
    { timeout: 300_000 },
    async () => {
      const plain = await runOn(LIF, 'unix', LIF_STEPS);
      const out = tmpOut('detsim-replay-thread-');
      const r = detsim([
        'replay',
        LIF,
        '--transport',
        'thread',
        '--steps',
        String(LIF_STEPS),
        '--resume-at',
        '4',
        '--out',
        out,
        '--json',
      ]);
      expect(r.status, r.stderr).toBe(0);
      const report = JSON.parse(r.stdout) as {
        stable: boolean;
        runs: { reproHash: string; runDir: string }[];
        checks: { check: string; status: string }[];
      };
      expect(report.runs.length).toBeGreaterThanOrEqual(2);
      // On threads lif-pair's built-in environment runs in the coordinator's thread (the default).
      const onThreads = new Set(['inline', 'thread']);
      for (const run of report.runs) {
        expect(run.reproHash).toBe(plain.reproHash);
        expect(new Set(Object.values(loggedWorkerRuns(readRun(run.runDir).log)))).toEqual(onThreads);
      }
      expect(report.checks.filter((c) => c.status !== 'pass')).toEqual([]);
      const diff = detsim(['diff', report.runs[0]!.runDir, plain.runDir]);
      expect(diff.status, diff.stdout + diff.stderr).toBe(0);
      expect(diff.stdout).toContain(`DIFF=0: the same run (ReproHash ${plain.reproHash}, ${LIF_STEPS} steps)`);
      // The recorded unix run replays on threads against its own record.
      const again = detsim(['replay', plain.runDir, '--transport', 'thread', '--out', out, '--json']);
      expect(again.status, again.stderr).toBe(0);
      const own = JSON.parse(again.stdout) as {
        reference: { reproHash: string };
        runs: { reproHash: string; runDir: string }[];
      };
      expect(own.reference.reproHash).toBe(plain.reproHash);
      for (const run of own.runs) {
        expect(run.reproHash).toBe(plain.reproHash);
        expect(new Set(Object.values(loggedWorkerRuns(readRun(run.runDir).log)))).toEqual(onThreads);
      }
    },
  );

  it(
    'detsim verify of a config with workers.transport: unix hits the example golden (grade full, green)',
    { timeout: 300_000 },
    () => {
      // The example (threads by default) with worker processes, under the example's own name: the golden applies.
      const dir = tmpOut('detsim-verify-unix-');
      const config = exampleWithWorkers(join(dir, 'cfg'), ['transport: unix']);
      const r = detsim([
        'verify',
        '--config',
        config,
        '--out',
        join(dir, 'report'),
        '--runs-dir',
        join(dir, 'runs'),
        '--no-golden-marker',
      ]);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/grade full, verdict green/);
      const checks = readFileSync(join(dir, 'report', 'attestation.jsonl'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { check?: string; status?: string; reason?: string });
      expect(checks.find((c) => c.check === 'golden')).toMatchObject({ status: 'pass', reason: 'audit_golden_hit' });
      const runDir = join(dir, 'runs', 'forage-walkers-1');
      // The agents in processes; forage, a built-in environment, in the coordinator's thread (the default).
      expect(loggedWorkerRuns(readRun(runDir).log)).toEqual({ 'worker-0': 'process', 'worker-env': 'inline' });
    },
  );
});

describe('thread workers never keep the coordinator alive', () => {
  it(
    'runSession on thread leaves no OS thread behind (/proc/self/task), run after run',
    { timeout: 120_000 },
    async () => {
      await runOn(LIF, 'thread', 2); // warm-up: libuv's pool and the like start once
      const before = osThreadCount();
      for (let i = 0; i < 3; i++) await runOn(LIF, 'thread', 2);
      expect(osThreadCount()).toBeLessThanOrEqual(before);
    },
  );

  it('detsim run --transport thread exits within 3 s of printing its result', { timeout: 120_000 }, async () => {
    const out = tmpOut('detsim-thread-exit-');
    const r = await detsimTimed(
      [
        'run',
        LIF,
        '--steps',
        '6',
        '--transport',
        'thread',
        '--environment-transport',
        'workers',
        '--checkpoint-every',
        '2',
        '--out',
        out,
      ],
      /checkpoints\s+\d+ committed/,
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.exitAfterResultMs).not.toBeNull();
    expect(r.exitAfterResultMs!).toBeLessThan(3_000);
    expect(new Set(Object.values(loggedWorkerRuns(readRun(join(out, 'lif-pair-1')).log)))).toEqual(new Set(['thread']));
  });
});
