// RunFailure: why a run stopped, naming the worker, its agents, the step and the phase. Kinds keep
// "never became ready", "no reply within the step deadline" and "the process died" apart.
// NOT an input refusal (that is DetsimError, exit 2): a RunFailure is a run that went wrong.
import { DetsimError } from '../../core/formats/errors.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import type { Id } from '../../core/formats/scalars.js';
import type { WriteFailure } from '../write-failure.js';

/** The phase of a run in which a {@link RunFailure} happened. */
export type RunPhase =
  | 'startup'
  | 'hello'
  | 'environment-initialize'
  | 'agent-initialize'
  | 'prepare'
  | 'advance'
  | 'evaluate'
  | 'commit'
  /** A checkpoint's capture at a boundary (a model that cannot give its state). */
  | 'capture'
  | 'shutdown';

/** Why a run stopped (the kinds keep "never ready", "no reply in time" and "process died" apart). */
export type RunFailureKind =
  /** The process never printed its ready line within the start-up deadline (or died before). */
  | 'never-ready'
  /** The worker's process exited (exit code or signal). */
  | 'worker-exited'
  /** The worker is alive but did not reply within the deadline. */
  | 'deadline'
  /** The stream ended or broke while the process was still alive. */
  | 'stream-ended'
  /** The worker answered with an in-band error reply. */
  | 'error-reply'
  /** The reply was malformed or contradicted the protocol (wrong batch, step, agents, …). */
  | 'protocol'
  /** Hello refused: wrong contract, identity or capability. */
  | 'identity'
  /** Stopped from outside (SIGINT/SIGTERM or an abort signal). */
  | 'aborted'
  /** A file of the run directory could not be written (disk full, I/O error): `reason` says which. */
  | 'io'
  /** The coordinator itself failed (an unexpected error). */
  | 'internal';

/** Who and where a {@link RunFailure} concerns: worker, agents, step, phase. */
export interface RunFailureContext {
  workerId?: Id;
  agentIds?: readonly Id[];
  step?: string | null;
  phase: RunPhase;
  /**
   * A Commit's failure while the same worker's Prepare of the next step rode behind it on the
   * stream (pipelining, lockstep StepOptions.prepareNext): that next step, named in the message.
   */
  pipelinedPrepare?: string;
}

/**
 * Why a run stopped: `kind` (e.g. never ready, step deadline, process died), the worker, its agents, the step
 * and the phase. Thrown by {@link runSession} and {@link resumeRun}; not an input refusal ({@link DetsimError}).
 */
export class RunFailure extends Error {
  readonly kind: RunFailureKind;
  readonly workerId: Id | undefined;
  readonly agentIds: readonly Id[];
  readonly step: string | null;
  readonly phase: RunPhase;
  readonly detail: string;
  /** Set when the failed call was a Commit with this next step's Prepare pipelined behind it. */
  readonly pipelinedPrepare: string | undefined;
  /** The run directory whose summary.json records this failure, once written. */
  runDir: string | undefined;
  /**
   * For kind io: the stable reason code of the write failure (size_no_space, perm_write_failed); for
   * kind identity: which identity check refused the worker (ident_worker_mismatch, ident_foreign_certificate, …).
   */
  reason: ReasonCode | undefined;

  constructor(kind: RunFailureKind, detail: string, ctx: RunFailureContext) {
    super(RunFailure.describe(kind, detail, ctx));
    this.name = 'RunFailure';
    this.kind = kind;
    this.workerId = ctx.workerId;
    this.agentIds = ctx.agentIds ?? [];
    this.step = ctx.step ?? null;
    this.phase = ctx.phase;
    this.detail = detail;
    this.pipelinedPrepare = ctx.pipelinedPrepare;
  }

  /** Who and where this failure concerns, as given to its constructor. */
  context(): RunFailureContext {
    const ctx = { workerId: this.workerId, agentIds: this.agentIds, step: this.step, phase: this.phase };
    return this.pipelinedPrepare === undefined ? ctx : { ...ctx, pipelinedPrepare: this.pipelinedPrepare };
  }

  /** The same failure (kind, worker, step, phase, reason) with another detail, e.g. more said after `;`. */
  withDetail(detail: string): RunFailure {
    return this.copy(detail, this.context());
  }

  /** The same failure, saying that the Prepare of step `next` was in flight behind the failed call. */
  withPipelinedPrepare(next: string): RunFailure {
    return this.copy(this.detail, { ...this.context(), pipelinedPrepare: next });
  }

  private copy(detail: string, ctx: RunFailureContext): RunFailure {
    const f = new RunFailure(this.kind, detail, ctx);
    f.reason = this.reason;
    return f;
  }

  private static describe(kind: RunFailureKind, detail: string, ctx: RunFailureContext): string {
    const who = ctx.workerId
      ? `worker ${ctx.workerId}${ctx.agentIds && ctx.agentIds.length > 0 ? ` (agents ${ctx.agentIds.join(', ')})` : ctx.workerId === 'worker-env' ? ' (environment)' : ''}`
      : 'the run';
    const behind = ctx.pipelinedPrepare ? ` (the Prepare of step ${ctx.pipelinedPrepare} pipelined behind it)` : '';
    const where = `${ctx.step !== undefined && ctx.step !== null ? `step ${ctx.step}, ` : ''}phase ${ctx.phase}${behind}`;
    const what: Record<RunFailureKind, string> = {
      'never-ready': 'never became ready',
      'worker-exited': 'died',
      deadline: 'sent no reply within the deadline',
      'stream-ended': 'lost its stream',
      'error-reply': 'answered with an error',
      protocol: 'broke the protocol',
      identity: 'is not the expected worker',
      aborted: 'was stopped',
      io: 'could not write its files',
      internal: 'failed inside the coordinator',
    };
    return `${who} ${what[kind]} at ${where}: ${detail}`;
  }

  /** The run stopped because a file could not be written. */
  static ofWrite(w: WriteFailure, ctx: RunFailureContext): RunFailure {
    const f = new RunFailure('io', w.message, ctx);
    f.reason = w.reason;
    return f;
  }

  /** The worker is not the one expected (its Hello, its certificate): `reason` names the check. */
  static ofIdentity(reason: ReasonCode, detail: string, ctx: RunFailureContext): RunFailure {
    const f = new RunFailure('identity', detail, ctx);
    f.reason = reason;
    return f;
  }

  toJSON(): Record<string, unknown> {
    return {
      kind: this.kind,
      workerId: this.workerId ?? null,
      agentIds: [...this.agentIds],
      step: this.step,
      phase: this.phase,
      message: this.message,
    };
  }
}

/** Whether `e` is a {@link RunFailure}. */
export function isRunFailure(e: unknown): e is RunFailure {
  return e instanceof RunFailure;
}

/**
 * A worker refused for its identity while the run was starting (its Hello, its certificate): the
 * run never began, so it is an input refusal (exit 2) and its run directory was removed: nothing
 * half-written. `reason` is the identity check's, the message the RunFailure's (worker, agents, phase).
 */
export class WorkerIdentityRefusal extends DetsimError {
  constructor(readonly failure: RunFailure) {
    super(
      failure.reason ?? 'ident_worker_mismatch',
      `${failure.message}; refused before the run started, nothing was written`,
      failure.workerId,
    );
    this.name = 'WorkerIdentityRefusal';
  }
}

/**
 * Whether `e` is a worker's identity failure during the start-up (launch, Hello), or at a fresh run's
 * Initialize (the worker loaded another copy of a model module): a refusal while the run has not begun.
 */
export function isStartupIdentityFailure(e: unknown): e is RunFailure {
  return e instanceof RunFailure && e.kind === 'identity' && STARTUP_PHASES.has(e.phase);
}

const STARTUP_PHASES: ReadonlySet<RunPhase> = new Set([
  'startup',
  'hello',
  'environment-initialize',
  'agent-initialize',
]);
