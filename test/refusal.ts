// Test helper: run a call that must be refused and return the DetsimError it threw. Any other
// exception, or no exception at all, fails the test. Not a test itself.
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
