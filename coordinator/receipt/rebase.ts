// Epoch rebase of a receipt: a resumed run continues in a new epoch, so its later steps carry
// another epoch in exactly the epoch-derived fields (scope.epoch, batchId, event ids). Rewriting
// those onto the run's first epoch (EpochRebase, which refuses anything else) makes a resumed
// run's ReproCore comparable with an uninterrupted one's. A no-op for a single-epoch run.
import { EpochRebase, type TraceBehaviour } from '../trace/trace.js';
import type { Receipt } from './receipt.js';

export function rebasedReceipt<R extends Pick<Receipt, 'steps'>>(r: R): R {
  const steps = (Array.isArray(r.steps) ? r.steps : []) as unknown as { behaviour?: TraceBehaviour }[];
  const base = steps[0]?.behaviour?.scope?.epoch;
  if (base === undefined || steps.every((s) => s.behaviour?.scope?.epoch === base)) return r;
  const rebased = steps.map((s) =>
    !s.behaviour || s.behaviour.scope.epoch === base
      ? s
      : { ...s, behaviour: new EpochRebase(s.behaviour.scope.epoch, base).apply(s.behaviour) },
  );
  return { ...r, steps: rebased as unknown as R['steps'] };
}
