// Whether a worker loaded the run's copy of a user model: a worker started by hand on another host
// (rendezvous) imports the model from its own disk, at the path (or on the module path) the
// coordinator names, where the files may differ. Each Initialize result of a user model names the
// identity of what the worker loaded (`modelIdentity`, docs/spec/model-identity.md); it must be the
// identity of the coordinator's copy, which run.json records, or the run would claim one model and
// run another. NOT the identities themselves (core/models/identity.ts, detsim_worker.model_source)
// and NOT a resumed or replayed run's check of its recorded models (coordinator/launch/model-source.ts).
import type { RunPlan } from '../config.js';
import { asSpecifiers, moduleFiles } from '../../core/models/identity.js';
import { recordedModel } from '../launch/model-source.js';

/** This machine's identity of each user model of one start, computed once per model. */
export class PlannedModels {
  private readonly identities = new Map<string, string | null>();

  constructor(private readonly plan: Pick<RunPlan, 'modelDigests'>) {}

  /** A module's or a Python user model's identity here; null for a model nothing is checked of (built-in). */
  identityOf(model: string): string | null {
    let id = this.identities.get(model);
    if (id === undefined) this.identities.set(model, (id = this.compute(model)));
    return id;
  }

  /** The identity run.json records (model-source.ts recordedModel); none when that is the model's own name. */
  private compute(model: string): string | null {
    const recorded = recordedModel(model, this.plan.modelDigests).model;
    return recorded === model ? null : recorded;
  }

  /**
   * Why `reported` (an Initialize result's modelIdentity) is not this machine's identity of
   * `model`, or undefined when it is (or when the model is not a user model).
   */
  mismatch(model: string, reported: unknown, who: string): string | undefined {
    const mine = this.identityOf(model);
    if (mine === null || reported === mine) return undefined;
    if (typeof reported !== 'string')
      return (
        `${who}: the worker did not say which copy of ${mine} it loaded — a worker older than this` +
        ` coordinator (for Python: reinstall detsim_worker from this detsim's workers/python)`
      );
    const files = model.startsWith('/') ? `the model's files (${filesOf(model)})` : PYTHON_PARTS;
    return (
      `${who}: the worker loaded ${reported}, and this machine's copy is ${mine}` +
      ` — ${files} differ on the worker's host: copy them there, laid out as here`
    );
  }
}

const PYTHON_PARTS = "the model's module, the modules of its own it imports or its distribution's version";

/** A module's files as relative specifiers from it (`./m.mjs, ./lib.mjs`). */
function filesOf(model: string): string {
  return asSpecifiers(
    model,
    moduleFiles(model).map((f) => f.path),
  ).join(', ');
}
