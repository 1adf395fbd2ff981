// The frame codec: a message is zero or more chunk frames (the attachment, <= 1 MiB each) followed
// by one body frame. FrameWriter sends messages in order with backpressure; FrameAssembler rebuilds
// {body, attachment} on the receiving side. Knows nothing of envelopes or of who is calling.
import type { Frame } from './contract.js';
import type { Body } from './link.js';

export const MAX_CHUNK_BYTES = 1024 * 1024;
/** Upper bound on one reassembled attachment (a 256 MiB state fits with room to spare). */
export const DEFAULT_MAX_ATTACHMENT_BYTES = 2 * 1024 * 1024 * 1024 - 1;

export interface AssembledMessage {
  body: Buffer;
  attachment: Buffer | undefined;
  /** With `dropOversized`: the length of an attachment past the limit, whose bytes were dropped. */
  droppedAttachmentBytes?: number;
}

/** Split a message into frames: chunk views (no copy) then the body. */
export function encodeFrames(body: Uint8Array, attachment?: Uint8Array): Frame[] {
  const frames: Frame[] = [];
  if (attachment) {
    for (let off = 0; off < attachment.length; off += MAX_CHUNK_BYTES) {
      frames.push({ chunk: attachment.subarray(off, Math.min(off + MAX_CHUNK_BYTES, attachment.length)) });
    }
  }
  frames.push({ body });
  return frames;
}

export class FrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FrameError';
  }
}

/**
 * Collects chunk frames until a body frame completes the message. An attachment past the limit
 * breaks the framing rules (FrameError), unless `dropOversized`: then its bytes are dropped as they
 * come, and its message arrives whole without them, saying how long it was. The stream stays
 * usable, and the receiver refuses that one message by name (a capture reply too large to stream).
 */
export class FrameAssembler {
  private chunks: Buffer[] = [];
  private bytes = 0;
  private dropping = false;

  constructor(
    private readonly maxAttachmentBytes = DEFAULT_MAX_ATTACHMENT_BYTES,
    private readonly dropOversized = false,
  ) {}

  /** Feed one frame; returns the completed message on its body frame, else undefined. */
  push(frame: Frame): AssembledMessage | undefined {
    const body = frame.body;
    const chunk = frame.chunk;
    const hasBody = body !== undefined && body.length > 0;
    const hasChunk = chunk !== undefined && chunk.length > 0;
    if (hasBody && hasChunk) throw new FrameError('a frame carries both body and chunk');
    if (hasChunk) {
      if (chunk.length > MAX_CHUNK_BYTES)
        throw new FrameError(`a chunk of ${chunk.length} bytes exceeds ${MAX_CHUNK_BYTES}`);
      this.bytes += chunk.length;
      if (this.bytes > this.maxAttachmentBytes && !this.dropping) {
        if (!this.dropOversized) throw new FrameError(`attachment exceeds ${this.maxAttachmentBytes} bytes`);
        this.dropping = true;
        this.chunks = [];
      }
      if (!this.dropping)
        this.chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
      return undefined;
    }
    if (!hasBody) throw new FrameError('an empty frame (neither body nor chunk)');
    const bodyBuffer = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.length);
    if (this.dropping) {
      const droppedAttachmentBytes = this.bytes;
      this.dropping = false;
      this.bytes = 0;
      return { body: bodyBuffer, attachment: undefined, droppedAttachmentBytes };
    }
    const attachment =
      this.chunks.length === 0
        ? undefined
        : this.chunks.length === 1
          ? this.chunks[0]
          : Buffer.concat(this.chunks, this.bytes);
    this.chunks = [];
    this.bytes = 0;
    return { body: bodyBuffer, attachment };
  }

  /** True while chunks wait for their body frame. */
  get partial(): boolean {
    return this.chunks.length > 0 || this.dropping;
  }
}

/** The part of a gRPC duplex stream the writer needs. */
export interface FrameSink {
  write(frame: Frame): boolean;
  once(event: 'drain' | 'close' | 'error', listener: (...args: unknown[]) => void): unknown;
  removeListener(event: 'drain' | 'close' | 'error', listener: (...args: unknown[]) => void): unknown;
}

function waitDrain(sink: FrameSink): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = (): void => {
      sink.removeListener('drain', done);
      sink.removeListener('close', closed);
      sink.removeListener('error', closed);
    };
    const drained = (): void => {
      done();
      resolve();
    };
    const closed = (): void => {
      done();
      reject(new FrameError('stream closed while writing an attachment'));
    };
    sink.once('drain', drained);
    sink.once('close', closed);
    sink.once('error', closed);
  });
}

/**
 * Writes whole messages in order. A message without attachment goes out synchronously when
 * nothing is queued (the hot path); attachments respect backpressure and later messages queue
 * behind them so frames of two messages never interleave.
 */
export class FrameWriter {
  private queued = 0;
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly sink: FrameSink) {}

  send(text: Body, attachment?: Uint8Array): Promise<void> {
    const body = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
    if (this.queued === 0 && (!attachment || attachment.length === 0)) {
      this.sink.write({ body });
      return Promise.resolve();
    }
    this.queued++;
    const run = this.tail.then(() => this.writeAll(body, attachment));
    const settled = run.finally(() => {
      this.queued--;
    });
    this.tail = settled.catch(() => undefined);
    return settled;
  }

  private async writeAll(body: Uint8Array, attachment: Uint8Array | undefined): Promise<void> {
    for (const frame of encodeFrames(body, attachment)) {
      if (!this.sink.write(frame) && frame.chunk) await waitDrain(this.sink);
    }
  }
}
