// The param check of a model, in one place for both sides: a worker runs it when it loads a model
// (workers/model-call.ts loadModel), the coordinator runs the very same function at plan time
// (coordinator/config.ts) so wrong params are refused before any process starts. It splits off the
// runtime's `strict` flag, then calls the model's own resolveParams (the built-ins' onlyParams +
// intParam rules). NOT model resolution or loading (registry.ts): it never imports a user module.
import { type JsonObject, ParamError } from '../sdk.js';
import { BUILTIN_AGENT_MODELS, BUILTIN_ENVIRONMENT_MODELS } from './registry.js';

export interface ResolvableModel {
  resolveParams?(params: JsonObject): JsonObject;
}

export interface ResolvedParams {
  /** The params after the model resolved them (defaults filled in). */
  params: JsonObject;
  /** The `strict` flag if the params carried one. */
  strict: boolean | undefined;
}

/** Split `strict` off and let the model resolve the rest; throws ParamError naming the param. */
export function resolveModelParams(model: ResolvableModel | undefined, raw: JsonObject): ResolvedParams {
  const { strict, ...rest } = raw;
  if ('strict' in raw && typeof strict !== 'boolean') throw new ParamError('params.strict', 'params.strict must be true or false');
  const params = 'strict' in raw ? rest : raw;
  return { params: model?.resolveParams ? model.resolveParams(params) : params, strict: strict as boolean | undefined };
}

/**
 * The plan-time check: a built-in model's params go through its resolveParams; a user module's
 * params only through the `strict` check (its own rules live in code the coordinator does not run).
 */
export function checkModelParams(kind: 'agent' | 'environment', model: string, raw: JsonObject): void {
  const builtins: Record<string, ResolvableModel> = kind === 'agent' ? BUILTIN_AGENT_MODELS : BUILTIN_ENVIRONMENT_MODELS;
  resolveModelParams(Object.hasOwn(builtins, model) ? builtins[model] : undefined, raw);
}
