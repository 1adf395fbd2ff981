// The ReproHash of a receipt whose steps are read from the trace one at a time: the same text
// `reproHash(receipt)` would hash with every step in memory (canonical.ts R1–R3, the epoch rebase
// of rebase.ts), fed to SHA-256 piece by piece, so a million-step run is sealed in flat memory.
// NOT the classification (canonical.ts) nor the trace format (trace-store.ts).
import { createHash } from 'node:crypto';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { EpochRebase, type TraceBehaviour } from '../trace.js';
import { canonicalSplit, compareKeyValues, type UnknownField } from './canonical.js';
import { REPRO_HASH_HEX } from './reprohash.js';

/** Stands in for the step list in the head's canonical text; a NUL never occurs in canonical receipt text otherwise. */
const STEPS_SENTINEL = '\u0000detsim-steps\u0000';

/** A step list that is not in increasing step order: the caller hashes it in memory instead (R2 sorts it). */
export class StepsOutOfOrder extends Error {}

/**
 * ReproHash over `head` (a receipt without steps) with `steps` as its step list. Steps must come
 * in strictly increasing `behaviour.scope.step` order (what every trace holds); otherwise
 * StepsOutOfOrder is thrown and nothing is returned.
 */
export function streamedReproHash(
  head: Record<string, unknown>,
  steps: Iterable<unknown>,
): { reproHash: string; unknownFields: UnknownField[] } {
  const headSplit = canonicalSplit({ ...head, steps: [STEPS_SENTINEL] });
  const text = canonicalize(headSplit.repro);
  const marker = canonicalize([STEPS_SENTINEL]);
  const at = text.indexOf(marker);
  if (at < 0 || text.indexOf(marker, at + 1) >= 0) throw new Error('streamedReproHash: the steps marker is not unique');
  const hash = createHash('sha256').update(text.slice(0, at + 1), 'utf8');
  const unknown = new Map<string, number>(headSplit.unknownFields.map((u) => [u.path, u.count]));
  let base: string | undefined;
  let previous: unknown;
  let first = true;
  for (const raw of steps) {
    const step = rebaseStep(raw, (base ??= epochOf(raw)));
    const key = (step as { behaviour?: { scope?: { step?: unknown } } }).behaviour?.scope?.step;
    if (!first && compareKeyValues(previous, key) >= 0) throw new StepsOutOfOrder();
    const split = canonicalSplit({ steps: [step] });
    for (const u of split.unknownFields) unknown.set(u.path, (unknown.get(u.path) ?? 0) + u.count);
    const view = (split.repro as { steps: unknown[] }).steps[0];
    hash.update(`${first ? '' : ','}${canonicalize(view as never)}`, 'utf8');
    previous = key;
    first = false;
  }
  hash.update(text.slice(at + marker.length - 1), 'utf8');
  const unknownFields = [...unknown.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([path, count]) => ({ path, count }));
  return { reproHash: hash.digest('hex').slice(0, REPRO_HASH_HEX), unknownFields };
}

function epochOf(step: unknown): string | undefined {
  return (step as { behaviour?: TraceBehaviour }).behaviour?.scope?.epoch;
}

/** rebase.ts per step: a later epoch's step is rewritten onto the first step's epoch. */
function rebaseStep(step: unknown, base: string | undefined): unknown {
  const b = (step as { behaviour?: TraceBehaviour }).behaviour;
  if (!b || base === undefined || b.scope.epoch === base) return step;
  return { ...(step as object), behaviour: new EpochRebase(b.scope.epoch, base).apply(b) };
}
