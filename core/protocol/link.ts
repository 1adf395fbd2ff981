// The transport seam: a Link is one ordered, bidirectional channel of whole messages (a canonical
// JSON body, as text or bytes, and an optional attachment) between the coordinator and one worker. The gRPC stream
// (grpc-link.ts) and a worker thread's message port (port-link.ts) are Links; request ids,
// in-order replies, deadlines and failure naming live once above them, in client.ts.
// Not the envelopes (envelope.ts), not the process or thread that runs the worker.

/**
 * A message body: its canonical JSON text, or that text's UTF-8 bytes. A link carries whichever
 * suits it — a thread's port the text (no encoding on either side), a gRPC stream the bytes — and
 * delivers what it carried; readers take both (body-codec.ts).
 */
export type Body = Uint8Array | string;

/**
 * A reply handed over as the value its worker built, never printed: only from a worker runtime in
 * the coordinator's own thread (an inline link, `valueReplies`). The envelope is a canonicalCopy
 * (core/formats/canonical-json.ts): plain data, checked as printing would check it, and a snapshot
 * the worker's models cannot reach. A reply that is not such data crosses as text, as on any link.
 */
export interface ReplyValue {
  readonly envelope: object;
}

export function isReplyValue(body: Body | ReplyValue): body is ReplyValue {
  return typeof body === 'object' && !(body instanceof Uint8Array);
}

/** Why a stream or thread was ended when it sent a chunk before Worker.Hello (gRPC server, worker thread). */
export const ATTACHMENT_BEFORE_HELLO = 'an attachment chunk before Worker.Hello on this stream';

/** Why a link ended: the peer or the carrier closed it, or it broke the framing rules. */
export type LinkEndKind = 'stream-ended' | 'protocol';

/** What a link reports to the one client that opened it. */
export interface LinkReceiver {
  /**
   * One complete message, in the order the worker sent them. `droppedAttachmentBytes`: its
   * attachment was longer than the link carries (gRPC: 2 GiB − 1) and was dropped, not delivered.
   */
  message(body: Body | ReplyValue, attachment: Buffer | undefined, droppedAttachmentBytes?: number): void;
  /** The link is over; no message follows. Called at most once. */
  ended(kind: LinkEndKind, why: string): void;
}

export interface Link {
  /** Where the worker is, for messages: `unix:/…`, `127.0.0.1:40123`, `thread:worker-0`. */
  readonly address: string;
  /**
   * The worker's replies are printed by canonicalize in this very thread (the inline link): they
   * are not proven canonical again (body-codec.ts decodeBody). Never set for a link whose peer runs
   * elsewhere — a worker thread's replies are proven like a process's (its user models share its isolate).
   */
  readonly printedHere?: true;
  /** Start delivering to `receiver`; called once, before the first send. */
  open(receiver: LinkReceiver): void;
  /**
   * Send one message. Messages arrive whole and in order; a message without attachment may go out
   * synchronously. Rejects (or throws) when the link is broken. The caller keeps ownership of
   * `attachment`: a link never detaches or mutates the caller's bytes.
   */
  send(body: Body, attachment?: Uint8Array): Promise<void>;
  /** End the link from this side; nothing is delivered after it. */
  close(): void;
}
