// The thread Link: whole messages over a worker_threads port (the coordinator's `Worker` object on
// one side, the thread's `parentPort` on the other), with no framing and no sockets. A body crosses
// as its text and is delivered as text (a string clone measured ~30% less CPU per round trip than a
// buffer, and neither side encodes or decodes UTF-8; bodies are canonical JSON, so the text is the bytes). An
// attachment crosses as one copy into a fresh buffer that is then transferred (moved, not cloned):
// the sender keeps its own bytes, because a worker's idempotency cache may have to replay them.
// The coordinator's bodies sent in one synchronous run (a Commit and the Prepare pipelined behind
// it) cross as one message: waking a sleeping thread is what a message costs on a small machine.
// Not the thread's lifecycle (coordinator/launch/thread-worker.ts) and not request tracking (client.ts).
import { bodyText } from './body-codec.js';
import type { Body, Link, LinkReceiver } from './link.js';

/** One message as it crosses a port. */
export interface PortMessage {
  /** The body's UTF-8 text. */
  body: string;
  attachment?: Uint8Array;
}

/** What both ends of a thread offer: a worker_threads `Worker` or `MessagePort`. */
export interface MessagePortLike {
  postMessage(value: unknown, transferList?: readonly ArrayBuffer[]): void;
  on(event: 'message', listener: (value: unknown) => void): unknown;
  off(event: 'message', listener: (value: unknown) => void): unknown;
}

/**
 * The first message a worker thread posts, once its options are checked and it listens: its ready
 * line. It comes before any reply, and before the coordinator opens its link to the thread.
 */
export const THREAD_READY = { detsimThreadReady: true } as const;

export function isThreadReady(value: unknown): boolean {
  return (
    typeof value === 'object' && value !== null && (value as { detsimThreadReady?: unknown }).detsimThreadReady === true
  );
}

/** Copy `bytes` into a buffer of its own, so that buffer can be transferred without touching the sender's. */
function owned(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(bytes);
}

/** Post one message (body text, optional attachment) on `port`, transferring the attachment's copy. */
export function postPortMessage(port: MessagePortLike, body: Body, attachment?: Uint8Array): void {
  if (attachment && attachment.length > 0) {
    const a = owned(attachment);
    port.postMessage({ body: bodyText(body), attachment: a } satisfies PortMessage, [a.buffer as ArrayBuffer]);
  } else {
    port.postMessage({ body: bodyText(body) } satisfies PortMessage);
  }
}

/**
 * Bodies without attachment sent in one synchronous run (a Commit and the Prepare pipelined behind
 * it) cross as one port message: the receiving thread is woken once for them.
 */
export interface PortBatch {
  bodies: string[];
}

/** The bodies of a batch posted by a PortLink; undefined for anything else. */
export function readPortBatch(value: unknown): string[] | undefined {
  const m = value as Partial<PortBatch> | null;
  if (typeof m !== 'object' || m === null || !Array.isArray(m.bodies)) return undefined;
  return m.bodies.every((b) => typeof b === 'string') ? m.bodies : undefined;
}

/** Read a message posted by postPortMessage; undefined for anything else. */
export function readPortMessage(value: unknown): { body: string; attachment: Buffer | undefined } | undefined {
  const m = value as Partial<PortMessage> | null;
  if (typeof m !== 'object' || m === null || typeof m.body !== 'string') return undefined;
  const a = m.attachment;
  return {
    body: m.body,
    attachment: a instanceof Uint8Array ? Buffer.from(a.buffer, a.byteOffset, a.length) : undefined,
  };
}

/** The coordinator's Link to a worker thread. `onGone` is how the thread's end reaches the link. */
export class PortLink implements Link {
  private receiver: LinkReceiver | undefined;
  private over = false;
  private readonly listener = (value: unknown): void => this.onMessage(value);

  constructor(
    readonly address: string,
    private readonly port: MessagePortLike,
  ) {}

  open(receiver: LinkReceiver): void {
    this.receiver = receiver;
    this.port.on('message', this.listener);
  }

  /** Bodies waiting for the end of this synchronous run, to cross as one message (PortBatch). */
  private batch: string[] = [];

  send(body: Body, attachment?: Uint8Array): Promise<void> {
    if (this.over) return Promise.reject(new Error('the thread link is closed'));
    if (attachment && attachment.length > 0) {
      this.flush();
      postPortMessage(this.port, body, attachment);
      return Promise.resolve();
    }
    if (this.batch.push(bodyText(body)) === 1) queueMicrotask(() => this.flush());
    return Promise.resolve();
  }

  private flush(): void {
    const bodies = this.batch;
    if (bodies.length === 0 || this.over) return;
    this.batch = [];
    this.port.postMessage(
      bodies.length === 1 ? ({ body: bodies[0]! } satisfies PortMessage) : ({ bodies } satisfies PortBatch),
    );
  }

  /** The thread is gone (it exited or was terminated): the link ends. */
  threadGone(why: string): void {
    if (this.over) return;
    this.over = true;
    this.port.off('message', this.listener);
    this.receiver?.ended('stream-ended', why);
  }

  close(): void {
    if (this.over) return;
    this.over = true;
    this.port.off('message', this.listener);
  }

  private onMessage(value: unknown): void {
    if (this.over) return;
    const message = readPortMessage(value);
    if (!message) {
      this.over = true;
      this.port.off('message', this.listener);
      this.receiver!.ended('protocol', 'a message that is not {body, attachment?} arrived on the thread port');
      return;
    }
    this.receiver!.message(message.body, message.attachment);
  }
}
