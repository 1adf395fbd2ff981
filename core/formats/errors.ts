// The one error type for refused input: it carries a stable reason code and the field or check
// that failed, so the CLI can print one line and exit non-zero. Not for programming errors.
import { type Decision, type ReasonCode, layerOf } from './reasons.js';

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

export function isDetsimError(e: unknown): e is DetsimError {
  return e instanceof DetsimError;
}
