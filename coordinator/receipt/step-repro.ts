// One step's share of the ReproHash text: the RFC 8785 text of the step's ReproCore view
// (canonical.ts over `{steps: [step]}`, the step rebased onto the run's first epoch as rebase.ts
// does) and the unclassified fields it holds. streamed.ts hashes these texts in step order; the
// trace's sealing thread makes them ahead of time into each segment's repro file (trace-store.ts),
// so sealing a receipt re-walks no step. NOT the hash (streamed.ts) nor the files (trace-store.ts).
import { canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import { EpochRebase, type TraceBehaviour } from '../trace/trace.js';
import { canonicalSplit, type CanonicalOptions, type UnknownField } from './canonical.js';
import { fastStepReproText } from './step-repro-fast.js';

/** A step's repro text and the unknown fields found in it. */
export interface StepRepro {
  readonly text: string;
  readonly unknownFields: readonly UnknownField[];
}

/** The epoch a trace step was taken in (undefined for a step without a scope). */
export function epochOf(step: unknown): string | undefined {
  return (step as { behaviour?: TraceBehaviour }).behaviour?.scope?.epoch;
}

/** rebase.ts per step: a later epoch's step is rewritten onto `base`, the run's first epoch. */
export function rebaseStep(step: unknown, base: string | undefined): unknown {
  const b = (step as { behaviour?: TraceBehaviour }).behaviour;
  if (!b || base === undefined || b.scope.epoch === base) return step;
  return { ...(step as object), behaviour: new EpochRebase(b.scope.epoch, base).apply(b) };
}

/** The repro text of a step already rebased onto the run's first epoch. */
export function stepRepro(rebasedStep: unknown, opts: CanonicalOptions = {}): StepRepro {
  // A step the walk would give back as its behaviour alone is printed so (step-repro-fast.ts proves it).
  if (opts.stripPhysical !== false && rebasedStep !== null && typeof rebasedStep === 'object') {
    const step = rebasedStep as Record<string, unknown>;
    const text = fastStepReproText(step, step.behaviour, opts.table);
    if (text !== undefined) return { text, unknownFields: [] };
  }
  const split = canonicalSplit({ steps: [rebasedStep] }, opts);
  const view = (split.repro as { steps: JsonValue[] }).steps[0]!;
  return { text: canonicalize(view), unknownFields: split.unknownFields };
}

/** Unknown-field counts summed over many steps, listed by path (R1's report order). */
export class UnknownTally {
  private readonly counts = new Map<string, number>();

  add(fields: readonly UnknownField[]): void {
    for (const u of fields) this.counts.set(u.path, (this.counts.get(u.path) ?? 0) + u.count);
  }

  list(): UnknownField[] {
    return [...this.counts.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([path, count]) => ({ path, count }));
  }
}
