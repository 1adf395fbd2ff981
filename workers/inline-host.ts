// The inline transport's worker side (`workers.transport: inline`): a TypeScript worker's runtime
// hosted in the coordinator's own thread, reached through a Link that hands each request to the
// runtime's queue and each reply straight back (one microtask hop, no copy beyond the one a
// transport would make). The same envelopes, checks and hashing as every transport; no isolation:
// a model that spins or exits takes the coordinator with it (docs/security.md), so it is for
// trusted models only. Loaded by coordinator/launch/inline-worker.ts by path (the coordinator
// never imports workers/). NOT the lifecycle of an instance (the coordinator's side) or a transport
// between processes.
import type { Role } from '../core/protocol/bodies.js';
import { isReplyValue, type Body, type Link, type LinkReceiver } from '../core/protocol/link.js';
import { RequestQueue } from './request-queue.js';
import { WorkerRuntime, type StreamState } from './runtime.js';

/** What the coordinator tells an inline worker: what a process worker gets as flags. */
export interface InlineWorkerSpec {
  role: Role;
  workerId: string;
  sessionId: string;
  models: readonly string[];
  storeDir?: string;
}

function own(body: Body): Body {
  return typeof body === 'string' ? body : Buffer.from(body);
}

class InlineLink implements Link {
  private receiver: LinkReceiver | undefined;
  private over = false;
  private readonly stream: StreamState = { introduced: false, printedHere: true, valueReplies: true };
  /** Both sides print with canonicalize in this thread (link.ts). */
  readonly printedHere = true as const;

  constructor(
    readonly address: string,
    private readonly queue: RequestQueue,
  ) {}

  open(receiver: LinkReceiver): void {
    this.receiver = receiver;
  }

  send(body: Body, attachment?: Uint8Array): Promise<void> {
    if (this.over) return Promise.reject(new Error('the inline link is closed'));
    // Copies, as a transport would: neither side may see the other's later writes to a buffer
    // (a text body is immutable: it crosses as it is).
    const copy = attachment ? Buffer.from(attachment) : undefined;
    this.queue.enqueue(own(body), copy, this.stream, (b, a) => {
      // A ReplyValue is already the runtime's own copy (canonicalCopy): it crosses as it is.
      if (!this.over) this.receiver!.message(isReplyValue(b) ? b : own(b), a ? Buffer.from(a) : undefined);
    });
    return Promise.resolve();
  }

  close(): void {
    this.over = true;
  }
}

/** A worker runtime in this thread and the Link to it; `onStop` runs once its Worker.Shutdown reply went out. */
export function inlineWorkerLink(spec: InlineWorkerSpec, onStop: () => void): Link {
  const runtime = new WorkerRuntime({
    role: spec.role,
    workerId: spec.workerId,
    sessionId: spec.sessionId,
    models: [...spec.models],
    ...(spec.storeDir !== undefined ? { storeDir: spec.storeDir } : {}),
  });
  const queue = new RequestQueue(runtime, onStop, () => undefined);
  return new InlineLink(`inline:${spec.workerId}`, queue);
}
