// Model params, in one place for both sides of the kernel: the ParamError a refused param raises,
// the SDK's param helpers (intParam, onlyParams), the built-in models' param rules (with the params
// a fork may change on restore, changedParams), and the `strict` split. A worker runs these when it loads a model (workers/model-call.ts); the
// coordinator runs the very same functions at plan time (coordinator/config.ts), so wrong params
// are refused before any process starts. NOT model code: it never imports or runs a model.
import { canonicalize } from '../formats/canonical-json.js';

/** A model's params as plain JSON data. */
export type ParamObject = Record<string, unknown>;

/**
 * A refused model param: `param` is its path under the participant (`params.width`), so a worker
 * and the coordinator's plan-time check can both name the field.
 */
export class ParamError extends Error {
  constructor(
    readonly param: string,
    message: string,
    /** true when the param is not defined by the model (a misspelling), false for a bad value. */
    readonly unknown = false,
  ) {
    super(message);
    this.name = 'ParamError';
  }
}

/** Read an integer param with a default and bounds; throws naming the param. */
export function intParam(params: ParamObject, name: string, dflt: number, min: number, max: number): number {
  const v = params[name] ?? dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new ParamError(
      `params.${name}`,
      `params.${name}: ${JSON.stringify(v)} must be an integer in [${min}, ${max}]`,
    );
  }
  return v;
}

/**
 * Refuse params the model does not define (a misspelled param fails, it never defaults silently);
 * `hint` follows the message (how the model would declare one).
 */
export function onlyParams(params: ParamObject, allowed: readonly string[], hint?: string): void {
  for (const key of Object.keys(params).sort()) {
    if (!allowed.includes(key)) {
      throw new ParamError(
        `params.${key}`,
        `params: unknown field ${JSON.stringify(key)} (allowed: ${allowed.join(', ') || 'none'})${hint ? `: ${hint}` : ''}`,
        true,
      );
    }
  }
}

/** What the author of a model without resolveParams and acceptedParams reads beside a refused param. */
export const DECLARE_PARAMS_HINT =
  'the model declares no params: list the ones it reads in its acceptedParams, or check them in resolveParams';

/** The largest `neurons` a lif agent accepts (about 800 MB of state). */
export const MAX_LIF_NEURONS = 67_108_864;

/** walker: `explore` in [1, 1024], default 8. */
export function walkerParams(params: ParamObject): { explore: number } {
  onlyParams(params, ['explore']);
  return { explore: intParam(params, 'explore', 8, 1, 1024) };
}

/** lif: `neurons` in [4, MAX_LIF_NEURONS], default 1000. */
export function lifParams(params: ParamObject): { neurons: number } {
  onlyParams(params, ['neurons']);
  return { neurons: intParam(params, 'neurons', 1000, 4, MAX_LIF_NEURONS) };
}

/** forage: a width × height torus (each in [2, 4096], default 16) with `food` cells (default 8, fewer than the cells). */
export function forageParams(params: ParamObject): { width: number; height: number; food: number } {
  onlyParams(params, ['width', 'height', 'food']);
  const width = intParam(params, 'width', 16, 2, 4096);
  const height = intParam(params, 'height', 16, 2, 4096);
  const food = intParam(params, 'food', 8, 1, width * height - 1);
  return { width, height, food };
}

/** A model that can resolve its own params (fill defaults, refuse bad ones). */
export interface ResolvableModel {
  resolveParams?(params: ParamObject): ParamObject;
  /** Without resolveParams: the params the model reads; any other is refused (none declared: none taken). */
  acceptedParams?: readonly string[];
  /** The resolved params a fork may change when it restores the model's state (none declared: none). */
  forkParams?: readonly string[];
}

/** walker's params a fork may change: `explore` is read at every step, the state does not hold it. */
export const WALKER_FORK_PARAMS: readonly string[] = ['explore'];
/** forage's params a fork may change: `food`, the count the world tops up to when food is eaten. */
export const FORAGE_FORK_PARAMS: readonly string[] = ['food'];

/** The built-in models' param rules by role and name (the models themselves use the same functions). */
const BUILTIN_PARAM_RULES: Record<'agent' | 'environment', Record<string, ResolvableModel>> = {
  agent: {
    walker: { resolveParams: walkerParams, forkParams: WALKER_FORK_PARAMS },
    lif: { resolveParams: lifParams },
  },
  environment: { forage: { resolveParams: forageParams, forkParams: FORAGE_FORK_PARAMS } },
};

/** A built-in model's param rules (the coordinator's view of it), or undefined for any other model. */
export function builtinParamRules(kind: 'agent' | 'environment', model: string): ResolvableModel | undefined {
  const rules = BUILTIN_PARAM_RULES[kind];
  return Object.hasOwn(rules, model) ? rules[model] : undefined;
}

/**
 * The resolved params that differ between `before` and `after` (a key in either, its canonical
 * value not the same), sorted; the first one `accepted` does not list is refused by the caller.
 */
export function changedParams(before: ParamObject, after: ParamObject): string[] {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return keys.filter((k) => canonicalize(before[k] ?? null) !== canonicalize(after[k] ?? null));
}

export interface ResolvedParams {
  /** The params after the model resolved them (defaults filled in). */
  params: ParamObject;
  /** The `strict` flag if the params carried one. */
  strict: boolean | undefined;
}

/** Split `strict` off and let the model resolve the rest; throws ParamError naming the param. */
export function resolveModelParams(model: ResolvableModel | undefined, raw: ParamObject): ResolvedParams {
  const { strict, ...rest } = raw;
  if ('strict' in raw && typeof strict !== 'boolean')
    throw new ParamError('params.strict', 'params.strict must be true or false');
  const params = 'strict' in raw ? rest : raw;
  if (model !== undefined && !model.resolveParams) {
    const declared = model.acceptedParams ?? [];
    onlyParams(params, declared, declared.length === 0 ? DECLARE_PARAMS_HINT : undefined);
  }
  return { params: model?.resolveParams ? model.resolveParams(params) : params, strict: strict as boolean | undefined };
}

/**
 * The plan-time check: a built-in model's params go through its rules; a user module's params
 * only through the `strict` check (its own rules live in code the coordinator does not run).
 */
export function checkModelParams(kind: 'agent' | 'environment', model: string, raw: ParamObject): void {
  resolveModelParams(builtinParamRules(kind, model), raw);
}
