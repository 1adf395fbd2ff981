// Calling into model code: loading a model with its params and strict flag, the strict-mode guard,
// and translation of a model's exception into a refusal that names the participant and the
// callback. Nothing about the protocol's phases or caches.
import { DetsimError } from '../core/formats/errors.js';
import type { JsonObject } from '../core/protocol/bodies.js';
import { type Mutation, ProtocolRefusal } from '../core/protocol/envelope.js';
import { type ResolvableModel, type ResolvedParams, resolveModelParams } from '../core/models/params.js';
import { runGuarded } from './strict.js';

export function callModel<T>(
  strict: boolean,
  participant: string,
  callback: string,
  mutation: Mutation,
  fn: () => T,
): T {
  try {
    return runGuarded(strict, participant, callback, fn);
  } catch (e) {
    if (e instanceof ProtocolRefusal) throw e;
    const msg = e instanceof Error ? e.message : String(e);
    throw new ProtocolRefusal('BACKEND_FAILURE', `${participant}: ${callback} failed: ${msg}`, mutation);
  }
}

/**
 * Tell a model that the worker dropped `state` for good (its optional `release` hook: it may give
 * the state's large arrays back for a later restore, sdk.ts recycle). Nothing the worker reports
 * depends on it, so a release that throws changes nothing.
 */
export function releaseState(model: { release?: (state: never) => void }, state: unknown): void {
  try {
    model.release?.(state as never);
  } catch {
    // The state is dropped either way; its memory is then left to the garbage collector.
  }
}

/** A refused input (DetsimError) as an INVALID_ARGUMENT refusal; anything else is rethrown. */
export function invalid(e: unknown): never {
  if (e instanceof DetsimError) throw new ProtocolRefusal('INVALID_ARGUMENT', e.message);
  throw e;
}

export interface LoadedModel<M> {
  model: M;
  /** Strict mode: the params' `strict` flag, else on for built-ins and the worker default for user models. */
  strict: boolean;
  /** The params after the model resolved them (defaults filled in): what the profile digest covers. */
  params: JsonObject;
  /** A built-in model (trusted code: checks aimed at a researcher's model skip it). */
  builtin: boolean;
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
  // The same check the coordinator runs at plan time (core/models/params.ts).
  let checked: ResolvedParams;
  try {
    checked = resolveModelParams(model, rawParams);
  } catch (err) {
    throw new ProtocolRefusal('INVALID_ARGUMENT', `${field}.${(err as Error).message}`);
  }
  const strict = checked.strict ?? (builtin ? true : strictUserModels);
  return { model, strict, params: checked.params as JsonObject, builtin };
}
