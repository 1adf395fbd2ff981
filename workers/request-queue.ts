// The worker's request queue, shared by every transport: requests are handled one at a time in
// arrival order, across all of the worker's streams, and each reply goes back on the stream its
// request came from, in request order (the protocol's correlation rule). Not the transport (the
// gRPC server in workers/process.ts, the thread port in workers/thread-main.ts), not the semantics (runtime.ts).
import type { StreamState, WorkerRuntime } from './runtime.js';

/** Sends one reply message back on the stream its request came from. */
export type ReplySender = (body: Uint8Array, attachment?: Uint8Array) => void | Promise<void>;

export class RequestQueue {
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly runtime: WorkerRuntime,
    /** Runs after the reply to Worker.Shutdown went out: the worker should stop. */
    private readonly onStop: () => void,
    /** A reply that could not be sent (the stream is gone): for the worker's log. */
    private readonly onReplyFailure: (why: string) => void,
  ) {}

  /** Queue one request that arrived on `stream`; its reply goes to `send` after every earlier reply. */
  enqueue(body: Buffer, attachment: Uint8Array | undefined, stream: StreamState, send: ReplySender): void {
    this.chain = this.chain
      .then(async () => {
        const out = await this.runtime.handle(body, attachment, stream);
        await send(out.body, out.attachment);
        if (out.stop) setImmediate(this.onStop);
      })
      .catch((e: unknown) => this.onReplyFailure((e as Error).message));
  }
}
