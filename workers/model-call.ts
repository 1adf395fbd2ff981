// Calling into model code: strict-mode guard plus translation of a model's exception into a
// BACKEND_FAILURE refusal that names the participant and the callback. Nothing else.
import { type Mutation, ProtocolRefusal } from '../coordinator/protocol/index.js';
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
