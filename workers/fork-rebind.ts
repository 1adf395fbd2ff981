// A fork's params on restore (StageRestore `rebind`, `detsim fork --set …params…`): reading the
// field, and the worker's check once the payload was verified under the params it was captured
// with: every resolved param that changes must be one the model lists in `forkParams` (sdk.ts), and
// the new profile digest must be the one the coordinator recorded for the fork. Each refusal is
// INCOMPATIBLE_STATE naming the participant and the param. NOT the payload checks (checks.ts) and
// NOT the model's restore itself (the hosts call it with the new params).
import { readDigest, readObject, refuseUnknownFields } from '../core/formats/scalars.js';
import { changedParams } from '../core/models/params.js';
import { ProtocolRefusal } from '../core/protocol/envelope.js';
import type { JsonObject } from './sdk.js';

/** StageRestore params.rebind: the participant's new params (as configured) and its expected new profile digest. */
export interface Rebind {
  params: JsonObject;
  profileDigest: string;
}

/** params.rebind, or null when the request has none (every restore but a fork's that changes params). */
export function readRebind(value: unknown): Rebind | null {
  if (value === undefined) return null;
  const r = readObject(value, 'params.rebind');
  refuseUnknownFields(r, ['params', 'profileDigest'], 'params.rebind');
  return {
    params: readObject(r.params, 'params.rebind.params') as JsonObject,
    profileDigest: readDigest(r.profileDigest, 'params.rebind.profileDigest'),
  };
}

/** What the check needs of a participant: its model (version and forkParams) and resolved params, profile digest. */
interface Bound {
  model: { modelVersion: string; forkParams?: readonly string[] };
  params: JsonObject;
  profileDigest: string;
}

/**
 * Refuse a rebind the model does not accept: a changed param its `forkParams` does not list (named,
 * with what it does accept), or a new profile digest other than the one the fork recorded.
 */
export function checkRebind(who: string, before: Bound, after: Bound, rebind: Rebind): void {
  const accepted = after.model.forkParams ?? [];
  const refused = changedParams(before.params, after.params).find((k) => !accepted.includes(k));
  if (refused !== undefined)
    throw new ProtocolRefusal(
      'INCOMPATIBLE_STATE',
      `${who}: params.${refused}: model ${after.model.modelVersion} does not accept a change on restore (it accepts: ${accepted.join(', ') || 'none'})`,
    );
  if (after.profileDigest !== rebind.profileDigest)
    throw new ProtocolRefusal(
      'INCOMPATIBLE_STATE',
      `${who}: params.rebind.profileDigest ${rebind.profileDigest} differs from the recomputed ${after.profileDigest}`,
    );
}
