// CheckpointRefusal: why a capture or restore was refused or failed, as a protocol status
// (INVALID_PHASE, BUSY, IDENTITY_MISMATCH, INCOMPATIBLE_STATE, BUFFER_INVALID, STALE_EPOCH, …), a
// stable reason code, the participant it is attributed to and whether anything changed.
// NOT a run failure (a worker dying mid-step is RunFailure) and NOT the checks themselves.
import { DetsimError } from '../../core/formats/errors.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import type { Id } from '../../core/formats/scalars.js';
import { METHODS } from '../../core/protocol/envelope.js';
import { DEFAULT_MAX_ATTACHMENT_BYTES } from '../../core/protocol/frames.js';

export type CheckpointStatus =
  | 'INVALID_PHASE'
  | 'BUSY'
  | 'UNSUPPORTED'
  | 'IDENTITY_MISMATCH'
  | 'INCOMPATIBLE_STATE'
  | 'BUFFER_INVALID'
  | 'STALE_EPOCH'
  | 'CONFLICT'
  | 'FAILED';

/** `environment` or `agent <id>`: who a refusal is attributed to (null: the coordinator itself). */
export type Participant = string;

export class CheckpointRefusal extends DetsimError {
  constructor(
    readonly status: CheckpointStatus,
    reason: ReasonCode,
    message: string,
    readonly opts: {
      field?: string;
      participant?: Participant | null;
      mutation?: 'none' | 'applied' | 'unknown';
      workerCode?: string;
      /** The worker and protocol method that refused, when a participant did. */
      workerId?: Id;
      method?: string;
      /** The worker's own message, when a participant refused. */
      workerMessage?: string;
    } = {},
  ) {
    super(reason, message, opts.field);
    this.name = 'CheckpointRefusal';
  }

  get participant(): Participant | null {
    return this.opts.participant ?? null;
  }

  /** 'none': nothing changed anywhere (the usual case for a refusal before staging). */
  get mutation(): 'none' | 'applied' | 'unknown' {
    return this.opts.mutation ?? 'none';
  }

  /** The worker's own error code when a participant refused (e.g. INCOMPATIBLE_STATE, CONFLICT). */
  get workerCode(): string | undefined {
    return this.opts.workerCode;
  }
}

export function isCheckpointRefusal(e: unknown): e is CheckpointRefusal {
  return e instanceof CheckpointRefusal;
}

/**
 * A participant's model could not give its state (its capture threw, or returned what the state
 * codec cannot keep exactly, or what its restore does not rebuild): the worker's BACKEND_FAILURE to
 * State.Capture. A defect of the model that every later boundary meets again, not a refusal of the
 * moment (a busy writer, a full disk).
 */
export function isModelCaptureFailure(e: CheckpointRefusal): boolean {
  return e.workerCode === 'BACKEND_FAILURE' && e.opts.method === METHODS.capture;
}

export function participantOf(agentId: Id | null): Participant {
  return agentId === null ? 'environment' : `agent ${agentId}`;
}

/**
 * A payload too long for one streamed attachment (the gRPC link drops it and the worker stays
 * reachable): refused by name, so the save fails and the last committed checkpoint stays as it is.
 */
export function tooLargeToStream(who: Participant, byteLength: number): CheckpointRefusal {
  return new CheckpointRefusal(
    'UNSUPPORTED',
    'size_message_too_large',
    `${who}: its payload of ${byteLength} bytes is larger than one streamed attachment (at most ${DEFAULT_MAX_ATTACHMENT_BYTES} bytes); a worker that shares the coordinator's store moves a payload of any size through the envelope file instead (docs/spec/capture-file.md)`,
    { participant: who },
  );
}
