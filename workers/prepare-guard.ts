// The shared-state guard of Agent.Prepare: a prepare may change its own agent's state (ticks run
// there), but never another agent's. Agents that share one mutable state (a module-level object
// returned by initialize, one array held by two states) are each prepared in turn, so the shared
// part moves once per agent per step ("mutated twice") and the run depends on how agents are
// grouped into processes. The guard keeps each agent's encoded capture right after its own
// prepare and compares it once every agent of the message has prepared. Not a check of hidden
// state a capture leaves out (check_model's restore round trip finds that), nor of commit.
import { ProtocolRefusal } from '../core/protocol/envelope.js';
import { encodeStateTransient } from './state-codec.js';

/** The refusal text for an agent whose state another agent's prepare changed (the same in Python). */
export function sharedStateMessage(agentId: string): string {
  return (
    `agent ${agentId}: another agent's prepare changed this agent's state ` +
    '(agents on one worker must not share mutable state: give each agent its own in initialize and restore)'
  );
}

interface Recorded {
  agentId: string;
  capture: () => unknown;
  bytes: Buffer;
}

/** One Prepare message's record of captures taken right after each agent's own prepare. */
export class PrepareStateGuard {
  private readonly recorded: Recorded[] = [];

  /**
   * Keep `capture()`'s encoded bytes for `agentId`. A state that cannot be captured or encoded
   * mid-step is left unguarded: capturing it at a boundary reports that in its own words.
   */
  record(agentId: string, capture: () => unknown): void {
    const bytes = encoded(capture);
    if (bytes) this.recorded.push({ agentId, capture, bytes: Buffer.from(bytes) });
  }

  /** Refuse (BACKEND_FAILURE) with the first agent whose state changed after its own prepare, if any. */
  check(onChanged: (agentId: string) => void): void {
    // The last agent prepared has no later prepare that could have changed it.
    for (const r of this.recorded.slice(0, -1)) {
      const now = encoded(r.capture);
      if (now && !now.equals(r.bytes) && capturesAgree(r.capture)) {
        onChanged(r.agentId);
        throw new ProtocolRefusal('BACKEND_FAILURE', sharedStateMessage(r.agentId), 'unknown');
      }
    }
  }
}

/** Two captures in a row agree: a capture that differs from itself is no evidence of shared state. */
function capturesAgree(capture: () => unknown): boolean {
  const first = encoded(capture);
  if (!first) return false;
  const copy = Buffer.from(first);
  return encoded(capture)?.equals(copy) ?? false;
}

/** The capture's encoded bytes, valid until the next call (encodeStateTransient), or undefined. */
function encoded(capture: () => unknown): Buffer | undefined {
  try {
    return encodeStateTransient(capture());
  } catch {
    return undefined; // the guard fails a run for shared state only, never for a capture of its own
  }
}
