// Periodic checkpoints of a run (`detsim run --checkpoint-every K [--keep N]`): a RunExtension that
// captures the group every K committed steps into `<runDir>/store/`, lets the writer commit off the
// step loop, and at the end waits (bounded) for outstanding saves and reports honestly which
// became durable. Failure policy: continue — a refused or failed capture is reported and recorded
// in the ledger, never reported as durable, and the run carries on; but a model that cannot give
// its state fails the run at that boundary (it would at every one). NOT the capture flow itself.
import type { Digest, Id } from '../../core/formats/scalars.js';
import type { RunExtension, RunExtensionContext, SessionRecovery } from '../session/run.js';
import { RunFailure } from '../session/run-failure.js';
import type { DurableFs } from '../store/durable-fs.js';
import type { SaveOutcome } from '../store/writer.js';
import type { TransitionTrace } from '../trace/trace.js';
import { captureGroup, checkpointIdFor } from './capture.js';
import { openCheckpointing, storeDirOf, STORE_DIR, type Checkpointing } from './checkpointing.js';
import { CheckpointGroup } from './group.js';
import type { RestoreRebind } from './fork-rebind.js';
import type { BehaviourPrefix } from './manifest.js';
import { isCheckpointRefusal, isModelCaptureFailure, type CheckpointRefusal } from './refusal.js';

export const DEFAULT_KEEP = 3;
/** How long the end of a run waits for outstanding durable saves (reference durable-ack wait). */
export const DEFAULT_DURABLE_WAIT_MS = 60_000;
export const FAILURE_POLICY = 'continue';

/** Options of {@link CheckpointRun}: the interval `every`, how many generations to keep, writer bounds. */
export interface CheckpointRunOptions {
  every: number;
  keep?: number;
  durableWaitMs?: number;
  /** Writer bounds (defaults: 2 outstanding, 64 MiB queued). */
  capacity?: number;
  maxQueuedBytes?: number;
  /** Mark captures replaceable (hot); default durable. */
  hot?: boolean;
  /** Base epoch of the run (a resumed run passes its first epoch). */
  baseEpoch?: Id;
  /** The checkpoint a resumed run was restored from (recorded in the ledger's `run` event). */
  resumedFrom?: Id;
  /** @internal A fork that changed params: the rebind a recovery to its base checkpoint needs (fork-rebind.ts forkRebind). */
  rebindFor?: (record: { checkpointId: Id; envelopeDigest: Digest }) => RestoreRebind | undefined;
  /** The store's file layer (tests inject write errors). */
  fs?: DurableFs;
  /** Called with each outcome / refusal as it happens (the CLI prints them). */
  onEvent?: (line: string) => void;
  /**
   * Wait for each capture's save to settle before the run steps on: every capture is taken (none
   * refused because the writer is busy), at the price of a durable write per capture in the step loop.
   */
  settleEach?: boolean;
}

/** What a run's checkpoints came to: captured, committed (durable), not durable, refused. */
export interface CheckpointRunReport {
  every: number;
  keep: number;
  policy: typeof FAILURE_POLICY;
  store: string;
  /** Captures submitted to the writer, in order. */
  captured: Id[];
  /** Only these are durable: their Committed outcome arrived (or the store manifest lists them). */
  committed: Id[];
  /** Captured but not durable: Failed, Superseded, or still unresolved when the wait ran out. */
  notDurable: { checkpointId: Id; outcome: string; reason: string }[];
  /** Captures refused before submission (BUSY, a participant refusal, …) with their boundary. */
  refused: { boundary: string; reason: string; message: string }[];
  highWater: Id | null;
}

/**
 * Checkpoints for a run: pass `new CheckpointRun({ every: K })` as {@link RunOptions.extension} to capture
 * the whole group every K steps into the run's STATE-01 store; summary.json says which became durable.
 */
export class CheckpointRun implements RunExtension {
  group: CheckpointGroup | undefined;
  ck: Checkpointing | undefined;
  /** Recovery from a lost worker, when enabled (`--max-restarts N`: checkpoint/recovery.ts). */
  recovery: SessionRecovery | undefined;
  private ctx: RunExtensionContext | undefined;
  private base: Id | undefined;
  private readonly outcomes = new Map<Id, SaveOutcome | null>();
  private readonly waits: Promise<void>[] = [];
  private readonly report: CheckpointRunReport;

  constructor(readonly opts: CheckpointRunOptions) {
    if (!Number.isInteger(opts.every) || opts.every < 1)
      throw new Error(`checkpoint every must be a positive integer, got ${opts.every}`);
    this.report = {
      every: opts.every,
      keep: opts.keep ?? DEFAULT_KEEP,
      policy: FAILURE_POLICY,
      store: STORE_DIR,
      captured: [],
      committed: [],
      notDurable: [],
      refused: [],
      highWater: null,
    };
  }

  /**
   * Continue on a group that already exists (a resumed run restores its own group from this
   * store) instead of opening the store and making one when the session starts.
   */
  adopt(group: CheckpointGroup, ck: Checkpointing): void {
    this.group = group;
    this.ck = ck;
  }

  /** Workers get the run's store so that co-located ones write capture payloads into it (store-files-v1). */
  storeDirFor(runDir: string): string {
    return storeDirOf(runDir);
  }

  async started(ctx: RunExtensionContext): Promise<void> {
    const ck =
      this.ck ??
      (await openCheckpointing(ctx.runDir, {
        keep: this.report.keep,
        capacity: this.opts.capacity,
        maxQueuedBytes: this.opts.maxQueuedBytes,
        fs: this.opts.fs,
      }));
    this.group ??= new CheckpointGroup({
      plan: ctx.plan,
      fleet: ctx.fleet,
      lockstep: ctx.lockstep,
      logger: ctx.logger,
      writer: ck.writer,
      ledger: ck.ledger,
      baseEpoch: this.opts.baseEpoch ?? ctx.epoch,
      behaviourAt: this.behaviourAt,
    });
    const resumed: Record<string, string> =
      this.opts.resumedFrom === undefined ? {} : { resumedFrom: this.opts.resumedFrom };
    await ck.ledger.append({
      event: 'run',
      epoch: ctx.epoch,
      sessionId: ctx.plan.sessionId,
      boundary: ctx.lockstep.boundary.toString(),
      detail: {
        checkpointEvery: String(this.opts.every),
        keep: String(this.report.keep),
        policy: FAILURE_POLICY,
        steps: String(ctx.steps),
        ...resumed,
      },
    });
    this.ctx = ctx;
    this.ck = ck;
    this.base = this.opts.baseEpoch ?? ctx.epoch;
  }

  /** What the session is stepping on now (its fleet, lockstep and trace writer), once started. */
  get context(): RunExtensionContext {
    if (!this.ctx) throw new Error('checkpoints: the session has not started');
    return this.ctx;
  }

  /** The run's first epoch, onto which behaviour is rebased. */
  get baseEpoch(): Id {
    return this.base ?? this.opts.baseEpoch ?? this.context.epoch;
  }

  /**
   * The behaviour digest's state at the boundary, from the run's trace writer (synced before each
   * capture; it hashes off the step loop): this run's groups take it instead of hashing each step.
   */
  readonly behaviourAt = (boundary: bigint): BehaviourPrefix => {
    const { state, steps } = this.context.traces.durable();
    if (BigInt(steps) !== boundary)
      throw new Error(`checkpoints: the trace holds ${steps} durable steps at boundary ${boundary}`);
    return { baseEpoch: this.baseEpoch, steps: boundary.toString(), state };
  };

  /** Go on capturing a recovered session: its restored group, fleet, lockstep, trace writer and epoch. */
  rebind(group: CheckpointGroup, live: Pick<RunExtensionContext, 'fleet' | 'lockstep' | 'traces' | 'epoch'>): void {
    this.group = group;
    this.ctx = { ...this.context, ...live };
  }

  /** How long the run waits for outstanding durable saves (at its last boundary and at its end). */
  private get durableWaitMs(): number {
    return this.opts.durableWaitMs ?? DEFAULT_DURABLE_WAIT_MS;
  }

  /** Wait (at most budgetMs) for the saves submitted so far to settle, so the store's high-water is current. */
  async savesSettled(budgetMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.waits), new Promise<void>((r) => (timer = setTimeout(r, budgetMs)))]);
    if (timer) clearTimeout(timer);
  }

  /** A capture at this boundary needs every agent Ready: the run must not pipeline a Prepare into it. */
  needsReadyAt(boundary: bigint): boolean {
    return boundary % BigInt(this.opts.every) === 0n;
  }

  async afterStep(trace: TransitionTrace): Promise<void> {
    this.group!.noteTrace(trace);
    await this.maybeCapture();
  }

  /** Capture when the committed boundary is a multiple of `every` (the trace is already noted). */
  async maybeCapture(): Promise<void> {
    const group = this.group!;
    const k = group.boundary;
    if (k % BigInt(this.opts.every) !== 0n) return;
    // The trace lines of every step before k reach the disk before a checkpoint at k can: the
    // trace seals and syncs while the participants are asked, and the capture waits for it before
    // it builds the checkpoint. A trace that cannot be made durable fails the run, whatever the
    // capture came to (a refused capture lets the run go on; a lost trace never does).
    // The run's last boundary: the saves in flight settle first (the run waits for them at its end
    // anyway), so its last checkpoint is never refused because the writer is still busy.
    if (k >= BigInt(this.ctx!.steps)) await this.savesSettled(this.durableWaitMs);
    const traces = this.ctx!.traces;
    const traceSynced = Promise.resolve(traces.sync()).then(() => traces.indexDigest());
    traceSynced.catch(() => undefined); // awaited below on every path
    const checkpointId = checkpointIdFor(group.epoch, k);
    try {
      const rec = await captureGroup(group, { checkpointId, replaceable: this.opts.hot ?? false, traceSynced });
      this.report.captured.push(checkpointId);
      this.outcomes.set(checkpointId, null);
      const settled = rec.ticket.wait().then((o) => this.settle(o));
      this.waits.push(settled);
      if (this.opts.settleEach) await settled;
    } catch (e) {
      await traceSynced;
      if (!isCheckpointRefusal(e)) throw e;
      // Policy continue: the run goes on; the last committed generation is untouched.
      this.report.refused.push({ boundary: k.toString(), reason: e.reason, message: e.message });
      this.opts.onEvent?.(`checkpoint ${checkpointId} not taken: [${e.reason}] ${e.message}`);
      if (isModelCaptureFailure(e)) throw modelCaptureFailed(e, k);
      this.ctx!.logger.warn({ checkpointId, reason: e.reason, err: e.message }, 'capture refused; the run continues');
    }
  }

  private settle(o: SaveOutcome): void {
    this.outcomes.set(o.checkpointId, o);
    if (o.kind === 'Committed') this.opts.onEvent?.(`checkpoint ${o.checkpointId} committed (boundary ${o.boundary})`);
    else {
      this.ctx?.logger.warn({ outcome: o }, 'checkpoint not durable');
      this.opts.onEvent?.(
        `checkpoint ${o.checkpointId} NOT durable: ${o.kind}${o.kind === 'Failed' ? ` (${o.reason}: ${o.message})` : ''}`,
      );
    }
  }

  /** Wait (bounded) for outstanding saves; the report says exactly which became durable. */
  async finish(_failure: RunFailure | undefined): Promise<Record<string, unknown>> {
    if (!this.ck) return {};
    const budget = this.durableWaitMs;
    await this.savesSettled(budget);
    for (const id of this.report.captured) {
      let o = this.outcomes.get(id) ?? null;
      // A lost or late reply is resolved by asking the store manifest about the same id; never re-saved.
      if (o === null || o.kind === 'ReplyLost' || o.kind === 'DeadlineExpired')
        o = this.ck.writer.resolveDurable(id) ?? o;
      if (o?.kind === 'Committed') this.report.committed.push(id);
      else {
        const reason =
          o === null
            ? `still being written after ${budget} ms`
            : o.kind === 'Failed'
              ? `${o.reason}: ${o.message}`
              : o.kind === 'Superseded'
                ? `superseded by ${o.by}`
                : o.kind;
        this.report.notDurable.push({ checkpointId: id, outcome: o?.kind ?? 'Pending', reason });
      }
    }
    this.report.highWater = this.ck.store.snapshot().highWater;
    await this.ck.ledger.flush().catch(() => undefined);
    return { checkpoints: this.report, ...this.recovery?.summaryFields() };
  }

  get result(): CheckpointRunReport {
    return this.report;
  }
}

/**
 * A model that cannot give its state fails the run at the first boundary it meets: every later
 * checkpoint would be refused the same way, and a run that asked for checkpoints must not go on for
 * hours without one (the policy continue is for refusals of the moment: a busy writer, a full disk).
 */
function modelCaptureFailed(e: CheckpointRefusal, boundary: bigint): RunFailure {
  const agent = e.participant?.startsWith('agent ') ? [e.participant.slice('agent '.length)] : [];
  const f = new RunFailure(
    'error-reply',
    `${e.opts.workerMessage ?? e.message}; no checkpoint of this run can be taken, so it stops: make the model's capture return plain data that its restore rebuilds exactly (docs/spec/state-codec.md), or run without --checkpoint-every`,
    {
      ...(e.opts.workerId ? { workerId: e.opts.workerId } : {}),
      agentIds: agent,
      step: boundary.toString(),
      phase: 'capture',
    },
  );
  f.reason = e.reason;
  return f;
}
