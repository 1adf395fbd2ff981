// Recovery from a lost worker (`--max-restarts N`, coordinator/checkpoint/recovery.ts) with real
// worker processes and threads: a worker SIGKILLed by pid at chosen steps, a model that exits or
// stalls past the step deadline once (a marker file in the test's temp dir makes the replacement
// go on), restarts exhausted, no committed checkpoint, the flags' refusals, a resume that recovers,
// and the short version of bench/recover-kill-loop.ts. Each recovered run must end with the
// ReproHash and behaviour digest of an uninterrupted run (the golden, or the same config again).
// The cut of the trace continues from the digest state its index saved per segment.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { killAtSteps, runRecoverKillLoop } from '../../bench/recover-kill-loop.js';
import { loadConfig } from '../../coordinator/config.js';
import { recoveryWith } from '../../coordinator/checkpoint/recovery.js';
import { CheckpointRun } from '../../coordinator/checkpoint/run-checkpoints.js';
import type { Fleet } from '../../coordinator/launch/launcher.js';
import { RunFailure } from '../../coordinator/session/run-failure.js';
import { runSession } from '../../coordinator/session/run.js';
import { verifyLedger } from '../../coordinator/store/ledger.js';
import { checkReceiptBinding, readReceipt } from '../../coordinator/receipt/receipt.js';
import { readReproTexts, readTraceIndex, traceFormatOf } from '../../coordinator/trace/trace-store.js';
import { expectCliRefusal } from '../cli-refusal.js';
import { FAULT_CONFIG, fault, referenceHash } from './fault-once-harness.js';
import { traceOf, traceStepsOf } from '../trace-read.js';

const GOLDEN = JSON.parse(readFileSync('fixtures/golden/lif-pair.json', 'utf8')) as {
  reproHash: string;
  behaviourDigest: string;
  steps: number;
};

/**
 * Where a worker that fails in Prepare(k) is found failed: Prepare(k) rides behind Commit(k-1)
 * (pipelining, the default), and whether Commit(k-1)'s reply reached the coordinator before the
 * failure is a race, so either call may be the one named — the Commit naming the Prepare behind it.
 */
function diedInPrepare(k: number): string {
  return `(step ${k}, phase prepare|step ${k - 1}, phase commit \\(the Prepare of step ${k} pipelined behind it\\))`;
}

function json(path: string): Record<string, any> {
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, any>;
}

function ledgerEvents(runDir: string, event: string): Record<string, any>[] {
  return readFileSync(join(runDir, 'ledger.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.includes(`"event":"${event}"`))
    .map((l) => JSON.parse(l) as Record<string, any>);
}

/** The fault config with `recovery: { maxRestarts }` (the model by absolute path: the same run.json), beside f's runs. */
function withRecovery(f: ReturnType<typeof fault>, maxRestarts: number | string): string {
  const text = readFileSync(FAULT_CONFIG, 'utf8').replace(
    './fault-once.ts',
    resolve(FAULT_CONFIG, '..', 'fault-once.ts'),
  );
  const path = join(f.out, '..', 'with-recovery.yaml');
  writeFileSync(path, `${text}recovery: { maxRestarts: ${maxRestarts} }\n`);
  return path;
}

/** `detsim run` of the fault config from source (its workers load the .ts model); run directory and ReproHash. */
function run(f: ReturnType<typeof fault>, args: string[], config = FAULT_CONFIG) {
  const r = detsimFrom(['run', config, '--out', f.out, ...args], f.env);
  const field = (name: string) => new RegExp(`^${name}\\s+(\\S+)`, 'm').exec(r.stdout)?.[1];
  return { ...r, runDir: field('run directory'), reproHash: field('repro hash') };
}

function detsimFrom(args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, ['--import', 'tsx', 'coordinator/cli/main.ts', ...args], {
    encoding: 'utf8',
    timeout: 240_000,
    env: { ...process.env, ...env },
  });
}

describe('recovery from a lost worker (--max-restarts)', () => {
  it('[STORE-21, STORE-24] workers SIGKILLed by pid at steps 17 and 43 (an agent worker, then the environment): the run recovers twice and ends with the golden ReproHash', async () => {
    const r = await killAtSteps(loadConfig('examples/lif-pair.yaml'), {
      steps: GOLDEN.steps,
      every: 10,
      maxRestarts: 2,
      kills: [
        { step: 17, worker: 2, phase: 'advance' },
        { step: 43, worker: 0, phase: 'commit' },
      ],
      outDir: mkdtempSync(join(tmpdir(), 'detsim-recover-')),
    });
    expect(r.reproHash).toBe(GOLDEN.reproHash);
    expect(r.behaviourDigest).toBe(GOLDEN.behaviourDigest);
    expect(traceStepsOf(r.runDir)).toEqual([...Array(GOLDEN.steps).keys()]);
    const summary = json(join(r.runDir, 'summary.json'));
    expect(summary.status).toBe('completed');
    expect(summary.recoveries).toBe(2);
    // The reward totals are the trace's (the steps run again after each recovery are not counted twice).
    const rewards = traceOf(r.runDir).flatMap((t) => t.behaviour.rewards);
    expect(rewards.length).toBeGreaterThan(0);
    expect(summary.rewards).toEqual({
      total: rewards.reduce((n, x) => n + x.value, 0),
      perAgent: Object.fromEntries(
        ['lif-a', 'lif-b'].map((a) => [a, rewards.filter((x) => x.agentId === a).reduce((n, x) => n + x.value, 0)]),
      ),
    });
    expect(summary.recovery.recovered.map((x: any) => [x.workerId, x.step, x.checkpointId, x.epoch])).toEqual([
      ['worker-1', '17', 'ckpt-e1-10', 'e2'],
      ['worker-env', '44', 'ckpt-e2-40', 'e3'],
    ]);
    const recoveries = ledgerEvents(r.runDir, 'recovery');
    expect(recoveries.map((l) => [l.detail.workerId, l.detail.reason, l.boundary, l.epoch])).toEqual([
      ['worker-1', 'worker-exited', '10', 'e2'],
      ['worker-env', 'worker-exited', '40', 'e3'],
    ]);
    expect((await verifyLedger(r.runDir)).ok).toBe(true);
    // The repeated steps' first segments were moved aside under each new epoch, never kept twice.
    const aside = readdirSync(join(r.runDir, 'trace')).filter((f) => f.startsWith('abandoned-'));
    expect(aside.some((f) => f.startsWith('abandoned-e2-'))).toBe(true);
    expect(aside.some((f) => f.startsWith('abandoned-e3-'))).toBe(true);
  }, 240_000);

  it('[STORE-23, STORE-24] segmented trace (4 steps a segment): a worker SIGKILLed at step 17 recovers to the golden; the cut keeps the segments before the checkpoint as they are and sets the later ones aside', async () => {
    const r = await killAtSteps(loadConfig('examples/lif-pair.yaml'), {
      trace: { segmentSteps: 4 },
      steps: GOLDEN.steps,
      every: 10,
      maxRestarts: 1,
      kills: [{ step: 17, worker: 1, phase: 'advance' }],
      outDir: mkdtempSync(join(tmpdir(), 'detsim-recover-seg-')),
    });
    expect([r.reproHash, r.behaviourDigest]).toEqual([GOLDEN.reproHash, GOLDEN.behaviourDigest]);
    expect(traceStepsOf(r.runDir)).toEqual([...Array(GOLDEN.steps).keys()]);
    expect(json(join(r.runDir, 'summary.json')).recovery.recovered).toMatchObject([
      { workerId: 'worker-0', boundary: '10', epoch: 'e2', stepsRepeated: 7 },
    ]);
    // The checkpoint at 10 sealed segment 2 (steps 8, 9): segments 0-2 are kept as written, segments
    // 3 and 4 (steps 10-16 of epoch e1) are set aside with their repro files, and epoch e2 goes on
    // from step 10 in a new segment 3.
    const index = readTraceIndex(r.runDir);
    expect(index.slice(0, 4).map((s) => [s.segment, s.firstStep, s.steps])).toEqual([
      ['000000.jsonl.gz', '0', 4],
      ['000001.jsonl.gz', '4', 4],
      ['000002.jsonl.gz', '8', 2],
      ['000003.jsonl.gz', '10', 4],
    ]);
    expect(readdirSync(join(r.runDir, 'trace')).filter((f) => f.startsWith('abandoned-'))).toEqual([
      'abandoned-e2-000003.jsonl.gz',
      'abandoned-e2-000003.repro.gz',
      'abandoned-e2-000004.jsonl.gz',
      'abandoned-e2-000004.repro.gz',
    ]);
    expect(readReproTexts(r.runDir)).not.toBeNull();
    expect(traceOf(r.runDir).map((t) => t.behaviour.scope.epoch)).toEqual(
      [...Array(GOLDEN.steps).keys()].map((i) => (i < 10 ? 'e1' : 'e2')),
    );
    expect(existsSync(join(r.runDir, 'trace.jsonl'))).toBe(false);
  }, 240_000);

  it('[STORE-21, STORE-24] fault-once: a worker process that SIGKILLs itself at step 7 recovers to the uninterrupted ReproHash', async () => {
    const f = fault({ faultStep: 7, mode: 'kill' });
    const r = run(f, ['--checkpoint-every', '3', '--max-restarts', '1']);
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(f.marker)).toBe(true);
    // It dies in Prepare(7), which rode behind Commit(6): either may be the call found failed.
    expect(r.stderr).toMatch(
      /^recovered: worker worker-1 worker-exited at step [67]; restored ckpt-e1-6 .* into epoch e2/m,
    );
    expect(traceFormatOf(r.runDir!)).toBe('segments');
    expect(traceStepsOf(r.runDir!)).toEqual([...Array(12).keys()]);
    expect(json(join(r.runDir!, 'summary.json')).recoveries).toBe(1);
    expect(r.reproHash).toBe(await referenceHash());
    // The receipt binds the recovered trace, segment by segment.
    const bound = readReceipt(join(r.runDir!, 'receipt.json')).trace;
    expect(bound?.format).toBe('detsim-trace-segments-v1');
    checkReceiptBinding(r.runDir!);
  }, 240_000);

  it('[STORE-21, STORE-24] thread transport: a model that calls process.exit at step 7 in its first epoch; one progress line, the uninterrupted ReproHash', async () => {
    const f = fault({ faultStep: 7, mode: 'exit' });
    const r = run(f, ['--transport', 'thread', '--checkpoint-every', '3', '--max-restarts', '2']);
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(f.marker)).toBe(true);
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('recovered:'));
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/worker worker-1 worker-exited at step [67]; restored ckpt-e1-6 .* into epoch e2/);
    expect(json(join(r.runDir!, 'summary.json')).recoveries).toBe(1);
    expect(r.reproHash).toBe(await referenceHash());
  }, 240_000);

  it('[STORE-21, STORE-24] a worker process that stalls past the step deadline is killed and replaced (recovery.maxRestarts in the config)', async () => {
    const f = fault({ faultStep: 5, mode: 'spin' });
    const config = withRecovery(f, 1);
    const r = run(f, ['--checkpoint-every', '2'], config);
    expect(r.status, r.stderr).toBe(0);
    const summary = json(join(r.runDir!, 'summary.json'));
    // Stalled in Prepare(5), which rode behind Commit(4): the deadline may expire on either call.
    expect(summary.recovery.recovered).toMatchObject([{ workerId: 'worker-1', reason: 'deadline' }]);
    expect(['4', '5']).toContain(summary.recovery.recovered[0].step);
    expect(r.reproHash).toBe(await referenceHash());
  }, 240_000);

  it('[STORE-21] a worker ended by SIGTERM just before the run is interrupted is not relaunched: the run says aborted, with no recovery', async () => {
    // Ctrl-C or scancel reaches every process, and the worker may see it first: recovering from that
    // death would start new workers (new srun steps) into a run that is being stopped.
    const checkpoints = new CheckpointRun({ every: 2 });
    checkpoints.recovery = recoveryWith({ maxRestarts: 3 })(checkpoints);
    const abort = new AbortController();
    const launched: Fleet[] = [];
    // Worker processes: one is sent SIGTERM (a thread's pid would be this process's own).
    const failure = await runSession(
      { ...loadConfig('examples/lif-pair.yaml'), transport: 'unix' },
      {
        steps: 40,
        outDir: mkdtempSync(join(tmpdir(), 'detsim-recover-int-')),
        extension: checkpoints,
        signal: abort.signal,
        hooks: {
          onLaunched: (f) => launched.push(f),
          beforePhase: (step, phase) => {
            if (step !== 5n || phase !== 'commit') return;
            process.kill(launched[0]!.agents[0]!.instance.pid, 'SIGTERM');
            setTimeout(() => abort.abort(), 300);
          },
        },
      },
    ).then(
      () => null,
      (e: unknown) => e as RunFailure,
    );
    expect(failure).toBeInstanceOf(RunFailure);
    expect(failure!.kind).toBe('aborted');
    expect(failure!.message).toMatch(/interrupted \(worker worker-0 \(agents lif-a\) died .*exited \(exit code 0\)\)$/);
    expect(failure!.message).not.toMatch(/recovery/);
    // Not even begun: the group was not fenced for a recovery, and no replacement was launched.
    const log = readFileSync(join(failure!.runDir!, 'run.log'), 'utf8');
    expect(log).not.toMatch(/"reason":"recovery"/);
    expect(log).not.toMatch(/launch failed/);
    expect(launched).toHaveLength(1);
    const summary = json(join(failure!.runDir!, 'summary.json'));
    expect(summary.status).toBe('aborted');
    expect(summary.recoveries ?? 0).toBe(0);
  }, 120_000);

  it('[STORE-22] restarts exhausted: the run fails as it would have, saying so; a resume with --max-restarts recovers and fails the same way', () => {
    const f = fault({ faultStep: 5, always: true });
    const r = run(f, ['--checkpoint-every', '2', '--max-restarts', '1']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(
        `worker worker-1 \\(agents fault-b\\) died at ${diedInPrepare(5)}: .*; restarts exhausted \\(1 used, at steps [45]; --max-restarts 1\\)`,
      ),
    );
    const runDir = join(f.out, 'recover-1');
    const summary = json(join(runDir, 'summary.json'));
    expect([summary.status, summary.recoveries]).toEqual(['failed', 1]);
    expect(ledgerEvents(runDir, 'recovery')).toHaveLength(1);

    const resumed = detsimFrom(['resume', runDir, '--max-restarts', '1'], f.env);
    expect(resumed.status).toBe(1);
    expect(resumed.stderr.split('\n').filter((l) => l.startsWith('recovered:'))).toHaveLength(1);
    expect(resumed.stderr).toMatch(/restarts exhausted \(1 used, at steps [45]; --max-restarts 1\)/);
    expect(ledgerEvents(runDir, 'recovery')).toHaveLength(2);

    // A resume that takes no checkpoints has nothing to recover to: refused before anything changes.
    const ledger = readFileSync(join(runDir, 'ledger.jsonl'), 'utf8');
    expectCliRefusal(
      detsimFrom(['resume', runDir, '--checkpoint-every', '0', '--max-restarts', '1'], {}),
      'struct_invalid_field',
      '--max-restarts',
    );
    expect(readFileSync(join(runDir, 'ledger.jsonl'), 'utf8')).toBe(ledger);
  }, 240_000);

  it('[STORE-22] no committed checkpoint to return to: the run fails, saying why', () => {
    const f = fault({ faultStep: 3, always: true });
    const r = run(f, ['--checkpoint-every', '10', '--max-restarts', '2']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(`died at ${diedInPrepare(3)}: .*; no committed checkpoint to recover from \\(--max-restarts 2\\)`),
    );
    expect(json(join(f.out, 'recover-1', 'summary.json')).recoveries).toBe(0);
  }, 240_000);

  it("--max-restarts (or the config's recovery.maxRestarts) is refused without checkpoints to return to, and when it is not a whole number", () => {
    const out = mkdtempSync(join(tmpdir(), 'detsim-recover-'));
    const flags = ['--out', join(out, 'runs')];
    expectCliRefusal(
      detsimFrom(['run', FAULT_CONFIG, ...flags, '--max-restarts', '2'], {}),
      'struct_invalid_field',
      '--max-restarts',
    );
    expectCliRefusal(
      detsimFrom(['run', FAULT_CONFIG, ...flags, '--checkpoint-every', '2', '--max-restarts', 'two'], {}),
      'struct_invalid_field',
      '--max-restarts',
    );
    expect(existsSync(join(out, 'runs'))).toBe(false);
    // The config's recovery.maxRestarts: the same check, naming the config field.
    const f = fault({ faultStep: 3 });
    const configured = ['--out', f.out];
    expectCliRefusal(
      detsimFrom(['run', withRecovery(f, 2), ...configured], {}),
      'struct_invalid_field',
      'recovery.maxRestarts',
    );
    expectCliRefusal(
      detsimFrom(['run', withRecovery(f, -1), ...configured], {}),
      'struct_invalid_field',
      'recovery.maxRestarts',
    );
    expect(existsSync(f.out)).toBe(false);
  });

  it('the kill loop (short, bench/recover-kill-loop.ts): seeded random kills of worker threads all recover to DIFF=0', async () => {
    const lines: string[] = [];
    const r = await runRecoverKillLoop({
      iterations: 1,
      seed: 5,
      steps: 30,
      kills: 2,
      transport: 'thread',
      log: (l) => lines.push(l),
    });
    for (const it of r.iterations) {
      expect(it.equal, lines.join('\n')).toBe(true);
      expect(it.recoveries, lines.join('\n')).toBe(2);
    }
  }, 240_000);
});
