// What a participant host (agent or environment) needs from the runtime: identity, the bound
// session, the progress counter and the strict-mode default. An interface only; runtime.ts owns it.
import type { PrefetchedPayloads } from './restore-prefetch.js';

export interface HostContext {
  readonly workerId: string;
  readonly incarnationId: string;
  /** The session bound at Hello. */
  readonly sessionId: string;
  /** Strict mode for user models unless their params say otherwise (built-ins default to strict). */
  readonly strictUserModels: boolean;
  /** The absolute model module paths this worker was launched with; no other module is loaded. */
  readonly launchedModels: readonly string[];
  /** The run's checkpoint store (`--store-dir`): the only place store-files-v1 may read or write; none: no payload files. */
  readonly storeDir?: string | undefined;
  /** The restore prefetch (store-files-v1): payloads read and hashed ahead of their StageRestore (runtime.ts owns them). */
  readonly prefetched?: PrefetchedPayloads;
  /** Record real progress: bumps progressCounter and lastCompletedRequestId. */
  progress(requestId: string): void;
}

/** A handler's reply: its result body (typed by the method table when the handler is a table row). */
export interface HostReply<R extends object = object> {
  result: R;
  attachment?: Uint8Array;
  /** A held capture's payload (store-files-v1), in order, kept for State.WritePayload; never sent. */
  pieces?: readonly Uint8Array[];
}
