// The one session loop (coordinator/session/session.ts) that run and resume share: a library call to
// runSession writes receipt.json as the run's last act (the ReproHash `detsim run` prints for the
// same config); a resumed run steps through the same loop (pipelining and lockstep hooks reach it,
// its receipt is written, its ReproHash equals the uninterrupted run's); and one abort wiring stops
// a run and a resume alike (the same summary shape, SIGINT/SIGTERM handled while either runs).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resumeRun } from '../../coordinator/checkpoint/resume.js';
import { CheckpointRun } from '../../coordinator/checkpoint/run-checkpoints.js';
import { readReceipt } from '../../coordinator/receipt/receipt.js';
import { readLogEvents } from '../../coordinator/report/run-facts.js';
import { isRunFailure } from '../../coordinator/session/run-failure.js';
import { runSession, type RunOptions } from '../../coordinator/session/run.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { METHODS } from '../../core/protocol/index.js';
import { detsimCli } from '../cli-refusal.js';
import { at, loadPlan, recordCalls, tmpOut, type CallEvent } from './helpers.js';

const CONFIG = 'examples/lif-pair.yaml';
const STEPS = 6;
const T = 240_000;
const quiet: Pick<RunOptions, 'onWarning' | 'logLevel'> = { onWarning: () => undefined, logLevel: 'warn' };

/** A completed run of STEPS steps with a checkpoint every 2 (resumable from ckpt-e1-2 or ckpt-e1-4). */
async function checkpointedRun(out: string) {
  return runSession(loadPlan(CONFIG), {
    ...quiet,
    outDir: out,
    steps: STEPS,
    extension: new CheckpointRun({ every: 2 }),
  });
}

const summaryOf = (runDir: string) =>
  parseStrict(readFileSync(join(runDir, 'summary.json'))) as Record<string, unknown>;

/** The RunFailure a session ended with (it must end with one). */
async function failureOf(p: Promise<unknown>) {
  const e = await p.then(
    () => null,
    (x: unknown) => x,
  );
  if (!isRunFailure(e)) throw new Error(`expected a RunFailure, got ${String(e)}`);
  return e;
}

describe('one session loop for run and resume', () => {
  it(
    'a library call to runSession writes receipt.json, with the ReproHash `detsim run` prints for the same config',
    async () => {
      const r = await runSession(loadPlan(CONFIG), { ...quiet, outDir: tmpOut(), steps: 3 });
      const receiptPath = join(r.runDir, 'receipt.json');
      expect(existsSync(receiptPath)).toBe(true);
      expect(readReceipt(receiptPath).reproHash).toBe(r.reproHash);
      const cli = detsimCli(['run', CONFIG, '--steps', '3', '--out', tmpOut()], T);
      expect(cli.status, cli.stderr).toBe(0);
      expect(/^repro hash +(\S+)$/m.exec(cli.stdout)?.[1]).toBe(r.reproHash);
    },
    T,
  );

  it(
    'a resume steps through the same loop: pipelined Prepare and lockstep hooks reach it, and it writes the receipt of the whole run',
    async () => {
      const whole = await checkpointedRun(tmpOut());
      const events: CallEvent[] = [];
      const phases: string[] = [];
      const r = await resumeRun(whole.runDir, {
        checkpointId: 'ckpt-e1-2',
        checkpointEvery: 0,
        pipeline: true,
        logLevel: 'warn',
        hooks: {
          onLaunched: (fleet) => recordCalls(fleet, events),
          beforePhase: (step, phase) => void phases.push(`${step}:${phase}`),
        },
      });
      expect(r.steps).toBe(STEPS);
      expect(phases).toContain('2:prepare');
      expect(phases).toContain(`${STEPS - 1}:commit`);
      const workers = [...new Set(events.map((e) => e.worker))];
      expect(workers.length).toBeGreaterThan(0);
      for (const worker of workers) {
        for (let k = 2; k < STEPS - 1; k++) {
          // Pipelined: Prepare(k+1) leaves before the reply to Commit(k).
          expect(at(events, worker, 'send', METHODS.agentPrepare, k + 1)).toBeGreaterThan(
            at(events, worker, 'send', METHODS.agentCommit, k),
          );
          expect(at(events, worker, 'send', METHODS.agentPrepare, k + 1)).toBeLessThan(
            at(events, worker, 'reply', METHODS.agentCommit, k),
          );
        }
        expect(at(events, worker, 'send', METHODS.agentPrepare, STEPS)).toBe(-1);
      }
      // The session loop wrote receipt.json last; the resumed run's ReproHash is the uninterrupted run's.
      expect(readReceipt(join(r.runDir, 'receipt.json')).reproHash).toBe(r.reproHash);
      expect(r.reproHash).toBe(whole.reproHash);
      expect(r.behaviourDigest).toBe(whole.behaviourDigest);
    },
    T,
  );

  it(
    'one abort wiring: an abort stops a run and a resume with the same summary shape, and both handle SIGINT/SIGTERM while they run',
    async () => {
      const whole = await checkpointedRun(tmpOut());
      const baseline = { int: process.listenerCount('SIGINT'), term: process.listenerCount('SIGTERM') };
      const during: { int: number; term: number }[] = [];
      /**
       * Hooks that note the signal listeners and abort before the Advance of step `at` (its Prepare
       * rode behind the Commits of step `at` - 1, so steps before `at` are all committed).
       */
      const abortAt = (stepAt: number) => {
        const controller = new AbortController();
        const hooks = {
          beforePhase: (step: bigint, phase: string) => {
            if (phase !== 'advance' || step !== BigInt(stepAt)) return;
            during.push({ int: process.listenerCount('SIGINT'), term: process.listenerCount('SIGTERM') });
            controller.abort();
          },
        };
        return { signal: controller.signal, handleSignals: true, hooks };
      };

      const run = await failureOf(
        runSession(loadPlan(CONFIG), { ...quiet, outDir: tmpOut(), steps: STEPS, ...abortAt(3) }),
      );
      const resumed = await failureOf(
        resumeRun(whole.runDir, { checkpointId: 'ckpt-e1-2', checkpointEvery: 0, logLevel: 'warn', ...abortAt(4) }),
      );

      expect(run.kind).toBe('aborted');
      expect(resumed.kind).toBe('aborted');
      for (const f of [run, resumed]) expect(f.message).toMatch(/was interrupted/);
      const runSummary = summaryOf(run.runDir!);
      const resumedSummary = summaryOf(resumed.runDir!);
      for (const s of [runSummary, resumedSummary])
        expect(s).toMatchObject({ status: 'aborted', failure: { kind: 'aborted' } });
      expect(runSummary.stepsDone).toBe(3);
      expect(resumedSummary.stepsDone).toBe(4);
      // The same summary, plus the resume block.
      expect(Object.keys(resumedSummary).filter((k) => k !== 'resume')).toEqual(Object.keys(runSummary));
      // SIGINT and SIGTERM became an abort while each ran (one listener each), and were released after.
      expect(during).toEqual([
        { int: baseline.int + 1, term: baseline.term + 1 },
        { int: baseline.int + 1, term: baseline.term + 1 },
      ]);
      expect({ int: process.listenerCount('SIGINT'), term: process.listenerCount('SIGTERM') }).toEqual(baseline);
      // run.log (and so the report's timeline) says each was interrupted, not that it failed.
      const said = (dir: string) => readLogEvents(dir).events.map((e) => e.msg);
      expect(said(run.runDir!)).toContain('run interrupted');
      expect(said(run.runDir!)).not.toContain('run failed');
      expect(said(resumed.runDir!)).toContain('resume interrupted');
      expect(said(resumed.runDir!)).not.toContain('resume failed');
    },
    T,
  );
});
