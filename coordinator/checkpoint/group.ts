// CheckpointGroup: the checkpoint-side view of one live session — its phase (ready, paused,
// capturing, restoring, fenced), tainted participants, the per-boundary facts a capture seals
// (clocks, reward totals, behaviour so far) and attributed calls to workers.
// NOT the capture or restore flows themselves (capture.ts, restore.ts) and not the step protocol.
import type { Logger } from 'pino';
import type { RunPlan } from '../config.js';
import type { Id, Scope } from '../../core/formats/scalars.js';
import { EXIT_DIAGNOSIS_MS, exitWithin, type Fleet, type LaunchedWorker } from '../launch/launcher.js';
import type { Lockstep } from '../session/lockstep.js';
import { IllegalTransition } from '../session/illegal-transition.js';
import {
  describeExit,
  LIFECYCLE_REPLY_LIMIT,
  METHODS,
  WorkerCallError,
  type JsonObject,
  type Method,
  type ParamsOf,
  type ResultOf,
} from '../../core/protocol/index.js';
import type { Ledger } from '../store/ledger.js';
import type { CheckpointWriter } from '../store/writer.js';
import { Sha256Stream } from '../trace/sha256-state.js';
import { canonicalBehaviour, EpochRebase, type TraceBehaviour, type TransitionTrace } from '../trace/trace.js';
import type { LiveComposition } from './compatibility.js';
import type { AgentClock, BehaviourPrefix, CoordinatorState, RestoredCoordinatorState } from './manifest.js';
import { CheckpointRefusal, type CheckpointStatus, type Participant } from './refusal.js';

export type GroupPhase = 'ready' | 'paused' | 'capturing' | 'restoring' | 'fenced';

const STATUSES: readonly string[] = [
  'INVALID_PHASE',
  'BUSY',
  'UNSUPPORTED',
  'IDENTITY_MISMATCH',
  'INCOMPATIBLE_STATE',
  'BUFFER_INVALID',
  'STALE_EPOCH',
  'CONFLICT',
];

/**
 * The run's behaviour so far, rebased to its first epoch, as the behaviour digest's SHA-256 state
 * (the one running behaviour hash: summary.behaviourDigest is its digest). A group stepped on its
 * own hashes here, on the calling thread; a run's group takes the state from its trace writer
 * instead (GroupOptions.behaviourAt), which hashes off the step loop.
 */
export class HashedBehaviour {
  private readonly stream: Sha256Stream;
  private count: bigint;
  constructor(
    readonly baseEpoch: Id,
    from?: BehaviourPrefix,
  ) {
    this.stream = from ? Sha256Stream.from(from.state) : new Sha256Stream();
    this.count = from ? BigInt(from.steps) : 0n;
  }

  add(b: TraceBehaviour): void {
    const rebased = b.scope.epoch === this.baseEpoch ? b : new EpochRebase(b.scope.epoch, this.baseEpoch).apply(b);
    this.stream.update(`${canonicalBehaviour(rebased)}\n`);
    this.count++;
  }

  get steps(): bigint {
    return this.count;
  }

  prefix(): BehaviourPrefix {
    return { baseEpoch: this.baseEpoch, steps: this.count.toString(), state: this.stream.state() };
  }
}

export interface CallResult<T> {
  requestId: string;
  result: T;
  attachment?: Buffer;
  /** The reply's attachment was too long to receive and was dropped (CallReply.droppedAttachmentBytes). */
  droppedAttachmentBytes?: number;
}

export interface GroupOptions {
  plan: RunPlan;
  fleet: Fleet;
  lockstep: Lockstep;
  logger: Logger;
  writer?: CheckpointWriter;
  ledger?: Ledger;
  /** The run's first epoch: traces are rebased onto it (default: the lockstep's epoch). */
  baseEpoch?: Id;
  /** Deadline for capture/stage/activate calls (default plan.deadlines.captureMs). */
  captureDeadlineMs?: number;
  /**
   * The behaviour digest's state at a boundary, from elsewhere (a run: its trace writer, synced);
   * without it the group hashes every step it notes itself (HashedBehaviour).
   */
  behaviourAt?: (boundary: bigint) => BehaviourPrefix;
}

/**
 * The group's state machine. Outside code reads `phase` and `tainted`; only these methods move it
 * (a transition its phase does not allow throws IllegalTransition):
 *
 *   ready | paused --beginCapture()------------------------------> capturing
 *   capturing ------endCapture()--------------------------------> the phase beginCapture left
 *   ready | paused | fenced --beginRestore()--------------------> restoring
 *   restoring ------abandonRestore() (nothing staged yet)-------> the phase beginRestore left
 *   restoring ------fence(participants): taints them, fails the lockstep --> fenced
 *   restoring ------install(state): the coordinator state at k, lockstep Ready(k) --> paused
 *   paused ---------resume()------------------------------------> ready
 *   ready ----------step(), noteTrace(): k → k+1 (phase unchanged)
 */
export class CheckpointGroup {
  private currentPhase: GroupPhase = 'ready';
  /** The phase a capture or restore started from (where endCapture/abandonRestore return). */
  private phaseBefore: GroupPhase | undefined;
  private readonly taintedParticipants = new Set<Participant>();
  readonly plan: RunPlan;
  readonly fleet: Fleet;
  readonly lockstep: Lockstep;
  readonly logger: Logger;
  readonly writer: CheckpointWriter | undefined;
  readonly ledger: Ledger | undefined;
  readonly deadlineMs: number;
  /** Null when GroupOptions.behaviourAt gives the state. */
  private behaviour: HashedBehaviour | null;
  private readonly behaviourAt: ((boundary: bigint) => BehaviourPrefix) | undefined;
  private clocks = new Map<Id, AgentClock>();
  private rewardTotals = new Map<Id, number>();
  private eventsIssued = 0n;
  /** Each participant's payload size at its last capture in this session (physical: decides holding only). */
  private readonly payloadBytes = new Map<Participant, number>();
  private readonly agentWorkers = new Map<Id, LaunchedWorker>();

  constructor(opts: GroupOptions) {
    this.plan = opts.plan;
    this.fleet = opts.fleet;
    this.lockstep = opts.lockstep;
    this.logger = opts.logger;
    this.writer = opts.writer;
    this.ledger = opts.ledger;
    this.deadlineMs = opts.captureDeadlineMs ?? opts.plan.deadlines.captureMs;
    this.behaviourAt = opts.behaviourAt;
    this.behaviour = opts.behaviourAt ? null : new HashedBehaviour(opts.baseEpoch ?? opts.lockstep.epoch);
    for (const w of opts.fleet.agents) for (const id of w.plan.agentIds) this.agentWorkers.set(id, w);
  }

  get epoch(): Id {
    return this.lockstep.epoch;
  }

  get phase(): GroupPhase {
    return this.currentPhase;
  }

  /** Participants left in an unknown or half-restored state; they must be replaced before a restore. */
  get tainted(): ReadonlySet<Participant> {
    return this.taintedParticipants;
  }

  private expectPhase(transition: string, allowed: readonly GroupPhase[]): void {
    if (allowed.includes(this.currentPhase)) return;
    throw new IllegalTransition('checkpoint group', transition, this.currentPhase);
  }

  /** Ready | Paused → Capturing. */
  beginCapture(): void {
    this.expectPhase('beginCapture', ['ready', 'paused']);
    this.phaseBefore = this.currentPhase;
    this.currentPhase = 'capturing';
  }

  /** Capturing → the phase the capture started from (a capture changes no state, whatever its outcome). */
  endCapture(): void {
    this.expectPhase('endCapture', ['capturing']);
    this.currentPhase = this.phaseBefore!;
    this.phaseBefore = undefined;
  }

  /** Ready | Paused | Fenced → Restoring. */
  beginRestore(): void {
    this.expectPhase('beginRestore', ['ready', 'paused', 'fenced']);
    this.phaseBefore = this.currentPhase;
    this.currentPhase = 'restoring';
  }

  /** Restoring → the phase the restore started from: refused before anyone was staged, nothing changed. */
  abandonRestore(): void {
    this.expectPhase('abandonRestore', ['restoring']);
    this.currentPhase = this.phaseBefore!;
    this.phaseBefore = undefined;
  }

  /** Restoring → Fenced: the participants staged or activated so far are tainted and nothing steps. */
  fence(participants: readonly Participant[]): void {
    this.expectPhase('fence', ['restoring']);
    for (const p of participants) this.taintedParticipants.add(p);
    this.currentPhase = 'fenced';
    this.phaseBefore = undefined;
    this.lockstep.fail();
  }

  /**
   * Restoring → Paused(k) in `epoch`: the lockstep takes the environment's restored observations
   * at k, the group the coordinator state the checkpoint sealed (clocks, rewards, events, behaviour).
   */
  install(
    epoch: Id,
    boundary: bigint,
    observations: { agentId: Id; observation: JsonObject }[],
    state: RestoredCoordinatorState,
  ): void {
    this.expectPhase('install', ['restoring']);
    this.lockstep.installRestored(epoch, boundary, observations);
    this.clocks = state.clocks;
    this.rewardTotals = state.rewardTotals;
    this.eventsIssued = state.eventsIssued;
    if (this.behaviour) this.behaviour = new HashedBehaviour(state.behaviour.baseEpoch, state.behaviour);
    this.currentPhase = 'paused';
    this.phaseBefore = undefined;
  }

  get boundary(): bigint {
    return this.lockstep.boundary;
  }

  /** The size of `who`'s payload at its last capture in this session, if it was captured. */
  lastPayloadBytes(who: Participant): number | undefined {
    return this.payloadBytes.get(who);
  }

  recordPayloadBytes(who: Participant, byteLength: number): void {
    this.payloadBytes.set(who, byteLength);
  }

  workerOf(agentId: Id | null): LaunchedWorker {
    return agentId === null ? this.fleet.environment : this.agentWorkers.get(agentId)!;
  }

  live(): LiveComposition {
    const ids = this.lockstep.identities;
    if (!ids)
      throw new CheckpointRefusal(
        'INVALID_PHASE',
        'perm_invalid_phase',
        'the group is not initialized (no committed boundary yet)',
      );
    return {
      plan: this.plan,
      identities: ids,
      workers: this.fleet.all().map((w) => ({
        workerId: w.plan.workerId,
        role: w.plan.role,
        buildDigest: w.hello.buildDigest,
        runtime: w.hello.runtime,
      })),
    };
  }

  /** Record one committed step: clocks, reward totals, events and behaviour so far. */
  noteTrace(trace: TransitionTrace): void {
    const b = trace.behaviour;
    for (const a of b.agents) this.clocks.set(a.agentId, { brainTicks: a.brainTicks, remainder: a.remainder });
    for (const r of b.rewards) this.rewardTotals.set(r.agentId, (this.rewardTotals.get(r.agentId) ?? 0) + r.value);
    this.eventsIssued += BigInt(b.eventIds.length);
    this.behaviour?.add(b);
  }

  /** One lockstep step through the group: refused unless Ready (paused needs resume(), fenced a restore). */
  async step(): Promise<TransitionTrace> {
    if (this.phase !== 'ready' || this.lockstep.state !== 'ready') {
      throw new CheckpointRefusal(
        'INVALID_PHASE',
        'perm_invalid_phase',
        `cannot step: the group is ${this.phase === 'ready' ? this.lockstep.state : this.phase}${this.phase === 'paused' ? ' (resume it first)' : ''}`,
      );
    }
    const trace = await this.lockstep.step();
    this.noteTrace(trace);
    return trace;
  }

  /** Paused(k) → Ready(k): a restored group runs only when resumed explicitly. */
  resume(): void {
    if (this.phase !== 'paused')
      throw new CheckpointRefusal(
        'INVALID_PHASE',
        'perm_invalid_phase',
        `cannot resume: the group is ${this.phase}, not paused`,
      );
    this.currentPhase = 'ready';
  }

  /** The coordinator state at the committed boundary, as capture seals it. */
  coordinatorState(): CoordinatorState {
    return {
      boundary: this.boundary,
      epoch: this.epoch,
      observations: this.lockstep.currentObservations(),
      clocks: this.clocks,
      rewardTotals: this.rewardTotals,
      eventsIssued: this.eventsIssued,
      behaviour: this.behaviour?.prefix() ?? this.behaviourAt!(this.boundary),
    };
  }

  scope(epoch: Id, step: bigint): Scope {
    return { sessionId: this.plan.sessionId, epoch, step: step.toString() };
  }

  /** One attributed call: an error reply or a transport failure becomes a CheckpointRefusal naming the participant. */
  async call<M extends Method>(
    agentId: Id | null,
    participant: Participant,
    method: M,
    scope: Scope,
    params: ParamsOf<M>,
    opts: { attachment?: Uint8Array; reason?: 'audit_participant_refused' } = {},
  ): Promise<CallResult<ResultOf<M>>> {
    const w = this.workerOf(agentId);
    let rep;
    try {
      rep = await w.client.call(method, scope, params, {
        deadlineMs: this.deadlineMs,
        ...(opts.attachment ? { attachment: opts.attachment } : {}),
      });
    } catch (e) {
      // Transport failure, deadline or a dead process or thread: the participant's state is unknown.
      // A broken stream is seen a moment before the worker's exit: wait briefly for the exit, so that
      // a death is named as one whichever of the two arrived first (not the completion order).
      if (e instanceof WorkerCallError && e.kind !== 'deadline' && w.instance.alive)
        await exitWithin(w.instance, EXIT_DIAGNOSIS_MS);
      const why =
        e instanceof WorkerCallError && e.kind === 'deadline'
          ? `no reply within the capture deadline of ${this.deadlineMs} ms`
          : w.instance.exitInfo
            ? `${w.instance.describe()} exited (${describeExit(w.instance.exitInfo)})`
            : e instanceof Error
              ? e.message
              : String(e);
      throw new CheckpointRefusal(
        'FAILED',
        'audit_participant_refused',
        `${participant} (${w.plan.workerId}): ${method} failed: ${why}`,
        { participant, mutation: 'unknown' },
      );
    }
    const reply = rep.reply;
    if (reply.type === 'error') {
      const code = reply.error.code;
      const status = (STATUSES.includes(code) ? code : 'FAILED') as CheckpointStatus;
      throw new CheckpointRefusal(
        status,
        'audit_participant_refused',
        `${participant} (${w.plan.workerId}) refused ${method}: ${code}: ${reply.error.message}`,
        {
          participant,
          workerCode: code,
          mutation: reply.error.mutation,
          workerId: w.plan.workerId,
          method,
          workerMessage: reply.error.message,
        },
      );
    }
    const out: CallResult<ResultOf<M>> = { requestId: rep.requestId, result: reply.result };
    if (rep.attachment) out.attachment = rep.attachment;
    if (rep.droppedAttachmentBytes !== undefined) out.droppedAttachmentBytes = rep.droppedAttachmentBytes;
    return out;
  }

  /** Release cached lifecycle replies (capture payloads, stage/activate results) on each worker. Best effort. */
  async acknowledge(byWorker: Map<LaunchedWorker, string[]>): Promise<void> {
    // Workers are independent: each gets its batches in order, all workers side by side (one
    // round trip for the group instead of one per worker). Best effort: a failure is logged only.
    await Promise.all([...byWorker].map(([w, ids]) => this.acknowledgeOn(w, ids)));
  }

  private async acknowledgeOn(w: LaunchedWorker, ids: readonly string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += LIFECYCLE_REPLY_LIMIT) {
      try {
        await w.client.call(
          METHODS.acknowledge,
          null,
          { requestIds: ids.slice(i, i + LIFECYCLE_REPLY_LIMIT) },
          { deadlineMs: this.deadlineMs },
        );
      } catch (e) {
        this.logger.warn({ workerId: w.plan.workerId, err: (e as Error).message }, 'acknowledge failed');
      }
    }
  }
}
