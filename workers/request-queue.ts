// The worker's request queue, shared by every transport: requests are handled one at a time in
// arrival order, across all of the worker's streams, and each reply goes back on the stream its
// request came from, in request order (the protocol's correlation rule). Not the transport (the
// gRPC server in workers/process.ts, the thread port in workers/thread-main.ts), not the semantics (runtime.ts).
import type { Body, ReplyValue } from '../core/protocol/link.js';
import type { StreamState, WorkerRuntime } from './runtime.js';

/**
 * Sends one reply message back on the stream its request came from: a ReplyValue only on a stream
 * that asked for them (runtime.ts valueReplies); other links print it (body-codec.ts replyBody).
 */
export type ReplySender = (body: Body | ReplyValue, attachment?: Uint8Array) => void | Promise<void>;

export class RequestQueue {
  private chain: Promise<void> = Promise.resolve();
  /** A reply was sent in this turn of the event loop (flushBetween): the next request waits one turn. */
  private unflushed = false;

  constructor(
    private readonly runtime: WorkerRuntime,
    /** Runs after the reply to Worker.Shutdown went out: the worker should stop. */
    private readonly onStop: () => void,
    /** A reply that could not be sent (the stream is gone): for the worker's log. */
    private readonly onReplyFailure: (why: string) => void,
    /**
     * Let the event loop reach its check phase between a reply and the next request: a gRPC reply
     * leaves the process only then, and a request pipelined behind it (a Prepare behind its Commit)
     * must not hold it back, nor take it down unsent if its model ends the process.
     */
    private readonly flushBetween = false,
  ) {}

  /** Queue one request that arrived on `stream`; its reply goes to `send` after every earlier reply. */
  enqueue(body: Body, attachment: Uint8Array | undefined, stream: StreamState, send: ReplySender): void {
    this.chain = this.chain
      .then(async () => {
        if (this.unflushed) await new Promise((next) => setImmediate(next));
        const out = await this.runtime.handle(body, attachment, stream);
        await send(out.body, out.attachment);
        if (out.stop) setImmediate(this.onStop);
        else if (this.flushBetween) this.markUnflushed();
      })
      .catch((e: unknown) => this.onReplyFailure((e as Error).message));
  }

  /** A reply was just sent: until the event loop's next check phase it may not have left the process. */
  private markUnflushed(): void {
    if (this.unflushed) return;
    this.unflushed = true;
    setImmediate(() => {
      this.unflushed = false;
    });
  }
}
