// Recovery from a lost worker (`detsim run|resume --max-restarts N`): when a worker dies, loses its
// stream or stalls past its deadline, the session loop (session.ts) fences the old group and starts
// replacement workers through the same launcher; this decides whether it may recover (a restart
// left, a committed checkpoint to return to) and restores the whole replacement group from the
// store's high-water checkpoint into a new epoch with the resume code (restore.ts, group.ts), after
// cutting the trace back to the checkpoint's boundary exactly as `detsim resume` does (the steps
// re-executed are never in the trace twice). The trace is cut reading only the segment that
// straddles the boundary: the behaviour digest continues from the state its index saved per
// segment, and the cut-off segments move to trace/abandoned-<epoch>-*. The ledger records each recovery (`recovery`, after the restore's own
// `restored`); summary.json counts them. NOT the fencing or launching (session.ts, launcher.ts),
// not the restore flow itself, not the trace formats (trace-store.ts).
import type { Id } from '../../core/formats/scalars.js';
import { discardStaged } from '../durable-file.js';
import { epochId } from '../session/lockstep.js';
import { publishSegmentedCut, SegmentedTraceWriter, type TraceSink } from '../trace/trace-store.js';
import { RunFailure, type RunFailureKind } from '../session/run-failure.js';
import type { LiveSession, Recovered, RecoveryTarget, SessionRecovery } from '../session/session.js';
import type { GenerationRecord } from '../store/store.js';
import type { RestoreRebind } from './fork-rebind.js';
import type { BehaviourPrefix } from './manifest.js';
import { storeDirOf } from './checkpointing.js';
import { CheckpointGroup } from './group.js';
import { restoreGroup } from './restore.js';
import { epochsSeen, stageSegmentedResume } from './resume.js';
import type { CheckpointRun } from './run-checkpoints.js';

/** The losses a recovery answers: the worker died, its stream broke, or it stalled past its deadline. */
export const RECOVERABLE_KINDS: readonly RunFailureKind[] = ['worker-exited', 'stream-ended', 'deadline'];

/** How long a recovery waits for captures already submitted to settle before it picks the checkpoint. */
const SAVES_SETTLE_MS = 30_000;

/** One recovery as summary.json and the progress line report it. */
export interface RecoveryRecord {
  workerId: Id | null;
  reason: RunFailureKind;
  /** The step the loss happened at (not committed), its phase. */
  step: string | null;
  phase: string;
  checkpointId: Id;
  boundary: string;
  fromEpoch: Id;
  epoch: Id;
  /** Committed steps after the checkpoint that are executed again (their old lines are abandoned). */
  stepsRepeated: number;
}

interface Target extends RecoveryTarget {
  readonly lost: RunFailure;
  readonly record: GenerationRecord;
}

/** Options of a recovery: the restart budget and where its one progress line per recovery goes. */
export interface RecoveryOptions {
  maxRestarts: number;
  onEvent?: (line: string) => void;
}

/** What builds the recovery of a run's checkpoints (resume takes one from its caller). */
export type RecoveryFactory = (checkpoints: CheckpointRun) => SessionRecovery;

/**
 * Recovery with this restart budget, for `resumeRun(dir, { recover: recoveryWith({ maxRestarts: 2 }) })`
 * or a run's checkpoints: `ck.recovery = recoveryWith({ maxRestarts: 2 })(ck)`.
 */
export function recoveryWith(opts: RecoveryOptions): RecoveryFactory {
  return (checkpoints) => new LostWorkerRecovery(checkpoints, opts);
}

/** Recover a run's lost workers from its committed checkpoints, at most `maxRestarts` times. */
export class LostWorkerRecovery implements SessionRecovery {
  /** The recoveries so far, in order. */
  readonly done: RecoveryRecord[] = [];

  constructor(
    private readonly checkpoints: CheckpointRun,
    private readonly opts: RecoveryOptions,
  ) {}

  /** A lost worker with a restart left and a committed checkpoint: where to return; otherwise why not. */
  async consider(lost: RunFailure): Promise<Target | RunFailure | undefined> {
    if (!RECOVERABLE_KINDS.includes(lost.kind)) return undefined;
    const flag = `--max-restarts ${this.opts.maxRestarts}`;
    if (this.done.length >= this.opts.maxRestarts) {
      const at = this.done.map((r) => r.step ?? '?').join(', ');
      return cannot(lost, `restarts exhausted (${this.done.length} used, at steps ${at}; ${flag})`);
    }
    const ck = this.checkpoints.ck;
    if (ck) await this.checkpoints.savesSettled(SAVES_SETTLE_MS);
    const record = ck?.store.highWater() ?? null;
    if (!ck || record === null) return cannot(lost, `no committed checkpoint to recover from (${flag})`);
    return { storeDir: storeDirOf(this.checkpoints.context.runDir), lost, record };
  }

  /** Cut the trace back to the checkpoint and restore the replacement group into a new epoch. */
  async restore(target: RecoveryTarget, live: LiveSession & { traces: TraceSink }): Promise<Recovered> {
    const { lost, record } = target as Target;
    const ck = this.checkpoints.ck!;
    const ctx = this.checkpoints.context;
    const baseEpoch = this.checkpoints.baseEpoch;
    const cut = stageRecoveryCut(ctx.runDir, record, baseEpoch, live.traces);
    try {
      await ck.ledger.flush();
      const fromEpoch = live.lockstep.epoch;
      const epoch = epochId(Math.max(epochsSeen(ctx.runDir, baseEpoch), epochNumber(fromEpoch)) + 1);
      const group = new CheckpointGroup({
        ...live,
        plan: ctx.plan,
        writer: ck.writer,
        ledger: ck.ledger,
        baseEpoch,
        behaviourAt: this.checkpoints.behaviourAt,
      });
      await restoreGroup(
        group,
        { store: ck.store, checkpointId: record.checkpointId },
        {
          epoch,
          expectBehaviour: cut.expectBehaviour,
          ledgerDetail: { recovery: String(this.done.length + 1) },
          ...this.rebind(record),
        },
      );
      cut.publish(epoch);
      group.resume();
      const traces = cut.reopen();
      this.checkpoints.rebind(group, { fleet: live.fleet, lockstep: live.lockstep, traces, epoch });
      const done: RecoveryRecord = {
        workerId: lost.workerId ?? null,
        reason: lost.kind,
        step: lost.step,
        phase: lost.phase,
        checkpointId: record.checkpointId,
        boundary: record.boundary,
        fromEpoch,
        epoch,
        stepsRepeated: cut.stepsRepeated,
      };
      this.done.push(done);
      await this.note(done, ctx.plan.sessionId, live);
      return { epoch, keptDigest: cut.keptDigest, traces };
    } finally {
      cut.discard();
    }
  }

  /** A fork's base checkpoint restored with the fork's params (fork-rebind.ts); nothing for any other. */
  private rebind(record: GenerationRecord): { rebind?: RestoreRebind } {
    const rebind = this.checkpoints.opts.rebindFor?.(record);
    return rebind ? { rebind } : {};
  }

  /** summary.json: `recoveries` (a count) and `recovery` (the budget and each recovery); both physical. */
  summaryFields(): Record<string, unknown> {
    return { recoveries: this.done.length, recovery: { maxRestarts: this.opts.maxRestarts, recovered: this.done } };
  }

  /** The ledger's `recovery` line, the log line and the one progress line of a recovery. */
  private async note(r: RecoveryRecord, sessionId: Id, live: LiveSession): Promise<void> {
    await this.checkpoints.ck!.ledger.append({
      event: 'recovery',
      checkpointId: r.checkpointId,
      boundary: r.boundary,
      epoch: r.epoch,
      sessionId,
      detail: {
        workerId: r.workerId,
        reason: r.reason,
        step: r.step,
        phase: r.phase,
        fromEpoch: r.fromEpoch,
        stepsRepeated: String(r.stepsRepeated),
        restart: String(this.done.length),
        maxRestarts: String(this.opts.maxRestarts),
      },
    });
    live.logger.warn({ recovery: r }, 'recovered from a lost worker');
    this.opts.onEvent?.(
      `recovered: worker ${r.workerId ?? '?'} ${r.reason} at step ${r.step ?? '?'}; restored ${r.checkpointId} ` +
        `(boundary ${r.boundary}) into epoch ${r.epoch}, ${r.stepsRepeated} steps to repeat ` +
        `(restart ${this.done.length} of ${this.opts.maxRestarts})`,
    );
  }
}

/** The trace cut back to a checkpoint's boundary, staged (nothing in the run directory changed yet). */
interface RecoveryCut {
  /** The behaviour digest's state over the kept steps: the checkpoint's recorded state must equal it. */
  readonly expectBehaviour: BehaviourPrefix;
  /** Steps after the boundary that are cut off and executed again. */
  readonly stepsRepeated: number;
  /** What the session's behaviour digest continues from: the state saved at k. */
  readonly keptDigest: Recovered['keptDigest'];
  /** Put the cut trace in place (renames only), the cut-off part moved aside under the new epoch. */
  publish(epoch: Id): void;
  /** Drop whatever was staged and not published; safe after publish. */
  discard(): void;
  /** The writer new steps are appended with. */
  reopen(): TraceSink;
}

/**
 * Stage the cut of the run's trace at boundary k: only the segment that straddles k is read (the
 * digest continues from the index's saved states, as resume does).
 */
function stageRecoveryCut(
  runDir: string,
  record: { boundary: string; checkpointId: Id },
  baseEpoch: Id,
  closed: TraceSink,
): RecoveryCut {
  const k = BigInt(record.boundary);
  const { cut, expect } = stageSegmentedResume(
    runDir,
    k,
    baseEpoch,
    record.checkpointId,
    'the recovery stopped before the restore',
  );
  return {
    expectBehaviour: expect,
    stepsRepeated: cut.abandonedSteps,
    keptDigest: { state: cut.hashes.digest, steps: Number(k) },
    publish: (epoch) => publishSegmentedCut(runDir, cut, epoch),
    discard: () => discardStaged(cut.staged),
    // The same segment size as the writer it replaces.
    reopen: () => (closed instanceof SegmentedTraceWriter ? closed.reopen() : new SegmentedTraceWriter(runDir)),
  };
}

/** The loss as it is, saying why it was not recovered from. */
function cannot(lost: RunFailure, why: string): RunFailure {
  return lost.withDetail(`${lost.detail}; ${why}`);
}

function epochNumber(epoch: Id): number {
  const m = /^e([0-9]+)$/.exec(epoch);
  return m ? Number(m[1]) : 0;
}
