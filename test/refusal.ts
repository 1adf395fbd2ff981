// Test helper: run a call that must be refused and return the DetsimError it threw (or await a
// promise that must reject with a given error type). Any other exception, or no exception at all,
// fails the test. Not a test itself.
import { DetsimError } from '../core/formats/errors.js';

export function refusal(fn: () => unknown): DetsimError {
  try {
    fn();
  } catch (e) {
    if (e instanceof DetsimError) return e;
    throw new Error(`threw a non-DetsimError: ${String(e)}`);
  }
  throw new Error('accepted: expected a refusal');
}

/** Await `p`, which must reject with an instance of `type`; return that error. */
export async function rejectionOf<E extends Error>(
  p: Promise<unknown>,
  type: abstract new (...args: never[]) => E,
): Promise<E> {
  const outcome = await p.then(
    () => ({ accepted: true as const }),
    (e: unknown) => ({ accepted: false as const, e }),
  );
  if (outcome.accepted) throw new Error(`accepted: expected a ${type.name}`);
  if (outcome.e instanceof type) return outcome.e;
  throw new Error(`rejected with something else than a ${type.name}: ${String(outcome.e)}`);
}
