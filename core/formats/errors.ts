// The one error type for refused input: it carries a stable reason code and the field or check
// that failed, so the CLI can print one line and exit non-zero. Not for programming errors.
import { type Decision, type ReasonCode, layerOf } from './reasons.js';

/**
 * A refusal of input: `reason` is a stable code from {@link REASONS}, `field` names what failed. The CLI prints
 * it as one line `detsim: [reason] message` and exits 2; a library caller can branch on `reason`.
 */
export class DetsimError extends Error {
  readonly reason: ReasonCode;
  readonly field: string | undefined;

  constructor(reason: ReasonCode, message: string, field?: string) {
    super(message);
    this.name = 'DetsimError';
    this.reason = reason;
    this.field = field;
  }

  /** The coordinator decision this refusal amounts to. */
  get decision(): Decision {
    return { action: 'block', layer: layerOf(this.reason), reason: this.reason };
  }
}

/** Whether `e` is a {@link DetsimError} (works across module copies, unlike `instanceof`). */
export function isDetsimError(e: unknown): e is DetsimError {
  return e instanceof DetsimError;
}
