// Pipelined Prepare (lockstep StepOptions.prepareNext, runSession's `pipeline`, on by default):
// Prepare(k+1) really leaves behind Commit(k) before that Commit's reply, the behaviour traces equal
// an unpipelined run's, and a boundary that a checkpoint captures is reached with every agent Ready.
// With `pipeline: false` (lockstep-v1 Phase D exactly) no worker gets Prepare(k+1) before every
// Commit(k) replied.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CheckpointRun } from '../../coordinator/checkpoint/run-checkpoints.js';
import { parseConfigText, resolveConfig } from '../../coordinator/config.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import type { Fleet } from '../../coordinator/launch/launcher.js';
import { METHODS } from '../../core/protocol/index.js';
import { RunFailure } from '../../coordinator/session/run-failure.js';
import { runSession, type RunOptions } from '../../coordinator/session/run.js';
import type { TransitionTrace } from '../../coordinator/trace/trace.js';
import { at, childPids, fourWorkerExample, readRun, recordCalls, tmpOut, type CallEvent as Event } from './helpers.js';

const behaviourLines = (dir: string) => readRun(dir).traces.map((t) => canonicalize(t.behaviour));

describe('pipelined Prepare', () => {
  const plan = fourWorkerExample();
  const steps = 6;

  it('[LOCK-6, LOCK-7] sends Prepare(k+1) before the reply to Commit(k) on every worker, never past the last step, with the traces of an unpipelined run', async () => {
    const out = tmpOut();
    const run = async (pipeline: boolean | undefined) => {
      const events: Event[] = [];
      const opts: RunOptions = {
        outDir: out,
        steps,
        ...(pipeline === undefined ? {} : { pipeline }),
        hooks: { onLaunched: (f) => recordCalls(f, events) },
      };
      return { r: await runSession(plan, opts), events };
    };
    const piped = await run(undefined); // the default
    const plain = await run(false);
    const workers = plan.workers.filter((w) => w.role === 'agent').map((w) => w.workerId);
    expect(workers).toHaveLength(4);
    for (const worker of workers) {
      for (let k = 0; k < steps - 1; k++) {
        const prepareNext = at(piped.events, worker, 'send', METHODS.agentPrepare, k + 1);
        const commitSent = at(piped.events, worker, 'send', METHODS.agentCommit, k);
        expect(prepareNext).toBeGreaterThan(commitSent);
        expect(prepareNext).toBeLessThan(at(piped.events, worker, 'reply', METHODS.agentCommit, k));
        // Unpipelined, the same Prepare waits for EVERY worker's Commit reply (the check can fail: piped fails it).
        const lastCommitReply = Math.max(...workers.map((w) => at(plain.events, w, 'reply', METHODS.agentCommit, k)));
        expect(at(plain.events, worker, 'send', METHODS.agentPrepare, k + 1)).toBeGreaterThan(lastCommitReply);
      }
      // No Prepare beyond the run's last step.
      expect(at(piped.events, worker, 'send', METHODS.agentPrepare, steps)).toBe(-1);
    }
    expect(piped.r.steps).toBe(steps);
    expect(piped.r.behaviourDigest).toBe(plain.r.behaviourDigest);
    expect(behaviourLines(piped.r.runDir)).toEqual(behaviourLines(plain.r.runDir));
    // Operational data still names every Prepare's request id.
    for (const t of readRun(piped.r.runDir).traces)
      expect(t.operational.prepareRequestIds.map((p) => p.agentId)).toHaveLength(16);
    expect(childPids()).toEqual([]);
  }, 240_000);

  it('[LOCK-2, LOCK-7] does not pipeline into a boundary that a checkpoint captures: every agent worker reports Ready there', async () => {
    const out = tmpOut();
    const events: Event[] = [];
    let fleet: Fleet | undefined;
    const statuses: { boundary: string; states: string[]; preparedAhead: boolean }[] = [];
    const every = 3;
    class ProbedCheckpointRun extends CheckpointRun {
      override async afterStep(trace: TransitionTrace): Promise<void> {
        const boundary = trace.behaviour.acknowledgedBoundary;
        if (BigInt(boundary) % BigInt(every) === 0n) {
          // Ask the workers themselves, before the capture runs.
          const states: string[] = [];
          for (const w of fleet!.agents) {
            const { reply } = await w.client.call(METHODS.status, null, {}, { deadlineMs: 10_000 });
            states.push(reply.type === 'result' ? String(reply.result.state) : `error ${reply.error.code}`);
          }
          statuses.push({ boundary, states, preparedAhead: this.group!.lockstep.preparedAhead });
        }
        await super.afterStep(trace);
      }
    }
    const ext = new ProbedCheckpointRun({ every, keep: 3 });
    const r = await runSession(plan, {
      outDir: out,
      steps: 7,
      pipeline: true,
      extension: ext,
      hooks: {
        onLaunched: (f) => {
          fleet = f;
          recordCalls(f, events);
        },
      },
    });
    expect(statuses).toEqual([
      { boundary: '3', states: ['ready', 'ready', 'ready', 'ready'], preparedAhead: false },
      { boundary: '6', states: ['ready', 'ready', 'ready', 'ready'], preparedAhead: false },
    ]);
    expect(ext.result.refused).toEqual([]);
    expect(ext.result.captured).toHaveLength(2);
    for (const w of fleet!.agents.map((a) => a.plan.workerId)) {
      // Into a capture boundary: Prepare(3) and Prepare(6) only after the Commit replies; elsewhere pipelined.
      expect(at(events, w, 'send', METHODS.agentPrepare, 3)).toBeGreaterThan(
        at(events, w, 'reply', METHODS.agentCommit, 2),
      );
      expect(at(events, w, 'send', METHODS.agentPrepare, 6)).toBeGreaterThan(
        at(events, w, 'reply', METHODS.agentCommit, 5),
      );
      expect(at(events, w, 'send', METHODS.agentPrepare, 4)).toBeLessThan(
        at(events, w, 'reply', METHODS.agentCommit, 3),
      );
    }
    // The captures change nothing in behaviour: same digest as a plain unpipelined run.
    const plain = await runSession(plan, { outDir: out, steps: 7, pipeline: false });
    expect(r.behaviourDigest).toBe(plain.behaviourDigest);
    expect(childPids()).toEqual([]);
  }, 240_000);

  it('with 8 agent workers (16 calls in flight) an abort stops the pipelined run, without a listener-leak warning', async () => {
    const out = tmpOut();
    const eight = resolveConfig({
      ...(parseConfigText(readFileSync('examples/forage-walkers.yaml', 'utf8'), 'x') as object),
      steps: 40,
      workers: { agentsPerWorker: 2 },
    });
    eight.deadlines.startupMs = 60_000;
    expect(eight.workers.filter((w) => w.role === 'agent')).toHaveLength(8);
    const warnings: string[] = [];
    const onWarning = (w: Error) => void warnings.push(w.name);
    process.on('warning', onWarning);
    const controller = new AbortController();
    let failure: unknown;
    try {
      await runSession(eight, {
        outDir: out,
        pipeline: true,
        signal: controller.signal,
        // Fires in step 2, before its Commits and the pipelined Prepare(3) go out.
        hooks: {
          beforePhase: (step, phase) => void (step === 3n && phase === 'prepare' ? controller.abort() : undefined),
        },
      });
    } catch (e) {
      failure = e;
    } finally {
      process.off('warning', onWarning);
    }
    expect(failure).toBeInstanceOf(RunFailure);
    expect((failure as RunFailure).kind).toBe('aborted');
    expect(readRun((failure as RunFailure).runDir!).summary).toMatchObject({ status: 'aborted', stepsDone: 2 });
    expect(warnings).not.toContain('MaxListenersExceededWarning');
    expect(childPids()).toEqual([]);
  }, 120_000);
});
