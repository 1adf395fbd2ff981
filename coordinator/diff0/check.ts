// One verdict line of replay/verify: what was checked, the decision {action, layer, reason}, its
// deterministic evidence (detail) and the physical facts kept apart (never hashed). Data only.
import type { JsonValue } from '../../core/formats/canonical-json.js';
import { type Action, type Layer, type ReasonCode, REASONS } from '../../core/formats/reasons.js';

/** The status of one verification check. */
export type CheckStatus = 'pass' | 'fail' | 'warn';

/** One verdict line: what was checked, the decision, and its evidence (physical detail kept apart). */
export interface Check {
  readonly check: string;
  readonly subject: string;
  readonly status: CheckStatus;
  readonly action: Action;
  readonly layer: Layer;
  readonly reason: ReasonCode;
  /** Deterministic facts (hashes, paths in the ReproCore, counts): part of the verdict. */
  readonly detail: JsonValue;
  /** Facts that differ every time (run directories, differing physical fields): never in the verdict. */
  readonly physical: JsonValue;
}

export function makeCheck(
  check: string,
  subject: string,
  status: CheckStatus,
  reason: ReasonCode,
  detail: JsonValue,
  physical: JsonValue = null,
): Check {
  const action: Action = status === 'pass' ? 'allow' : status === 'warn' ? 'advise' : 'block';
  return { check, subject, status, action, layer: REASONS[reason].layer as Layer, reason, detail, physical };
}
