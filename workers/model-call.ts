// Calling into model code: loading a model with its params and strict flag, the strict-mode guard,
// and translation of a model's exception into a refusal that names the participant and the
// callback. Nothing about the protocol's phases or caches.
import { DetsimError } from '../coordinator/formats/errors.js';
import { type JsonObject, type Mutation, ProtocolRefusal } from '../coordinator/protocol/index.js';
import { runGuarded } from './strict.js';

export function callModel<T>(strict: boolean, participant: string, callback: string, mutation: Mutation, fn: () => T): T {
  try {
    return runGuarded(strict, participant, callback, fn);
  } catch (e) {
    if (e instanceof ProtocolRefusal) throw e;
    const msg = e instanceof Error ? e.message : String(e);
    throw new ProtocolRefusal('BACKEND_FAILURE', `${participant}: ${callback} failed: ${msg}`, mutation);
  }
}

/** Split the runtime's `strict` flag off a model's params. */
export function splitStrict(params: Record<string, unknown>, field: string): { params: Record<string, unknown>; strict: boolean | undefined } {
  if (!('strict' in params)) return { params, strict: undefined };
  const { strict, ...rest } = params;
  if (typeof strict !== 'boolean') throw new ProtocolRefusal('INVALID_ARGUMENT', `${field}.strict must be true or false`);
  return { params: rest, strict };
}

/** A refused input (DetsimError) as an INVALID_ARGUMENT refusal; anything else is rethrown. */
export function invalid(e: unknown): never {
  if (e instanceof DetsimError) throw new ProtocolRefusal('INVALID_ARGUMENT', e.message);
  throw e;
}

interface ResolvableModel {
  resolveParams?(params: JsonObject): JsonObject;
}

export interface LoadedModel<M> {
  model: M;
  /** Strict mode: the params' `strict` flag, else on for built-ins and the worker default for user models. */
  strict: boolean;
  /** The params after the model resolved them (defaults filled in): what the profile digest covers. */
  params: JsonObject;
}

/** Resolve a model spec and its params the same way for agents and environments; refusals name `field`. */
export async function loadModel<M extends ResolvableModel>(
  resolve: (spec: string) => Promise<{ model: M; builtin: boolean }>,
  modelSpec: string,
  rawParams: JsonObject,
  field: string,
  strictUserModels: boolean,
): Promise<LoadedModel<M>> {
  let resolved: { model: M; builtin: boolean };
  try {
    resolved = await resolve(modelSpec);
  } catch (err) {
    throw new ProtocolRefusal('INVALID_ARGUMENT', `${field}.model: ${(err as Error).message}`);
  }
  const { model, builtin } = resolved;
  const split = splitStrict(rawParams, `${field}.params`);
  const strict = split.strict ?? (builtin ? true : strictUserModels);
  try {
    const params = model.resolveParams ? model.resolveParams(split.params as JsonObject) : (split.params as JsonObject);
    return { model, strict, params };
  } catch (err) {
    throw new ProtocolRefusal('INVALID_ARGUMENT', `${field}.${(err as Error).message}`);
  }
}
