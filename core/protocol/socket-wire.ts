// The socket wire: whole messages (a body and an optional attachment) framed directly on a Unix
// stream socket, for the worker processes the coordinator starts itself (this is the TypeScript end;
// workers/python and crates-bridge/worker have theirs). A message is an
// 8-byte header — the body's length and the attachment's, unsigned 32-bit big-endian — then the body
// bytes, then the attachment bytes. The same envelopes as the gRPC Session stream carries, without
// HTTP/2 or protobuf around them (bench/README.md: a step's four messages cost both processes less).
// Its reader and writer serve both ends; not the Link or the server (socket-link.ts,
// socket-server.ts), and no envelope logic lives here.
import type { Socket } from 'node:net';
import type { Body } from './link.js';

/** Why a connection is ended when its header announces an attachment before that connection's Hello (no chunks on this wire). */
export const SOCKET_ATTACHMENT_BEFORE_HELLO = 'an attachment before Worker.Hello on this connection';

/** The header of every message: the body length and the attachment length, 4 bytes each. */
export const SOCKET_HEADER_BYTES = 8;

/** The header of one message; the body is the canonical JSON text's UTF-8 bytes. */
export function socketMessageHead(body: Body, attachmentLength: number): Buffer {
  const text = typeof body === 'string' ? body : undefined;
  const bodyLength = text !== undefined ? Buffer.byteLength(text, 'utf8') : body.length;
  const out = Buffer.allocUnsafe(SOCKET_HEADER_BYTES + bodyLength);
  out.writeUInt32BE(bodyLength, 0);
  out.writeUInt32BE(attachmentLength, 4);
  if (text !== undefined) out.write(text, SOCKET_HEADER_BYTES, 'utf8');
  else out.set(body as Uint8Array, SOCKET_HEADER_BYTES);
  return out;
}

/** Why the bytes on a socket are not messages: the peer broke the framing rules. */
export class SocketWireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SocketWireError';
  }
}

/** Limits a reader enforces on the header, before it buffers anything the header announces. */
export interface SocketReaderLimits {
  /** The longest body (the message size limit both ends use). */
  maxBodyBytes: number;
  /** The longest attachment delivered. */
  maxAttachmentBytes: number;
  /**
   * An attachment past the limit is read and dropped, and its message delivered without it saying how
   * long it was (the coordinator's side: a capture reply too large to carry); otherwise it ends the socket.
   */
  dropOversized?: boolean;
  /** Whether an attachment may come now (a worker: only after the socket's Hello). Default: always. */
  mayAttach?: () => boolean;
}

/** One message read from a socket. */
export interface SocketMessage {
  body: Buffer;
  attachment: Buffer | undefined;
  droppedAttachmentBytes?: number;
}

/**
 * Rebuilds messages from the chunks a socket delivers, in order. Small messages in one chunk are
 * views into it (no copy); a message split across chunks is joined once.
 */
export class SocketReader {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** The header of the message being read, once known. */
  private head: { body: number; attachment: number; drop: boolean } | undefined;
  /** An oversized attachment being discarded, and the message it belongs to. */
  private dropping: { left: number; message: SocketMessage } | undefined;

  constructor(private readonly limits: SocketReaderLimits) {}

  /** Bytes received and held for a message not yet complete (an attachment being dropped holds none). */
  get bufferedBytes(): number {
    return this.pendingBytes;
  }

  /** Feed one chunk; returns the messages it completed (throws SocketWireError on a broken rule). */
  push(chunk: Buffer): SocketMessage[] {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    const out: SocketMessage[] = [];
    for (;;) {
      if (this.dropping) {
        if (!this.discard()) return out;
        out.push(this.dropping.message);
        this.dropping = undefined;
      }
      if (!this.head) {
        if (this.pendingBytes < SOCKET_HEADER_BYTES) return out;
        this.head = this.readHead(this.take(SOCKET_HEADER_BYTES));
      }
      const { body, attachment, drop } = this.head;
      // An attachment to drop is discarded as it arrives, never buffered.
      if (this.pendingBytes < body + (drop ? 0 : attachment)) return out;
      const bodyBytes = this.take(body);
      this.head = undefined;
      if (drop) {
        const message = { body: bodyBytes, attachment: undefined, droppedAttachmentBytes: attachment };
        this.dropping = { left: attachment, message };
        continue;
      }
      out.push({ body: bodyBytes, attachment: attachment > 0 ? this.take(attachment) : undefined });
    }
  }

  /** Discard what is buffered of the attachment being dropped; true once all of it is gone. */
  private discard(): boolean {
    const dropping = this.dropping!;
    while (dropping.left > 0 && this.pendingBytes > 0) {
      const head = this.pending[0]!;
      const part = Math.min(head.length, dropping.left);
      dropping.left -= part;
      this.pendingBytes -= part;
      if (part === head.length) this.pending.shift();
      else this.pending[0] = head.subarray(part);
    }
    return dropping.left === 0;
  }

  private readHead(bytes: Buffer): { body: number; attachment: number; drop: boolean } {
    const body = bytes.readUInt32BE(0);
    const attachment = bytes.readUInt32BE(4);
    const { maxBodyBytes, maxAttachmentBytes, dropOversized, mayAttach } = this.limits;
    if (body === 0) throw new SocketWireError('a message without a body');
    if (body > maxBodyBytes) throw new SocketWireError(`a body of ${body} bytes exceeds ${maxBodyBytes}`);
    if (attachment > 0 && mayAttach?.() === false) throw new SocketWireError(SOCKET_ATTACHMENT_BEFORE_HELLO);
    const over = attachment > maxAttachmentBytes;
    if (over && !dropOversized) throw new SocketWireError(`attachment exceeds ${maxAttachmentBytes} bytes`);
    return { body, attachment, drop: over };
  }

  /** The next `n` buffered bytes (n ≤ pendingBytes): a view when one chunk holds them. */
  private take(n: number): Buffer {
    const first = this.pending[0]!;
    if (first.length >= n) {
      this.pendingBytes -= n;
      if (first.length === n) this.pending.shift();
      else this.pending[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const head = this.pending[0]!;
      const part = Math.min(head.length, n - at);
      head.copy(out, at, 0, part);
      at += part;
      if (part === head.length) this.pending.shift();
      else this.pending[0] = head.subarray(part);
    }
    this.pendingBytes -= n;
    return out;
  }
}

/**
 * Write one message: header and body in one write, the attachment (not copied) in a second. Settles
 * once the last write is handed to the kernel, so the sender may reuse its bytes after awaiting it.
 */
export function writeMessage(socket: Socket, body: Body, attachment?: Uint8Array): Promise<void> {
  const length = attachment?.length ?? 0;
  const head = socketMessageHead(body, length);
  if (length === 0) {
    socket.write(head);
    return Promise.resolve();
  }
  return new Promise<void>((resolve, reject) => {
    socket.write(head);
    socket.write(attachment!, (e) => (e ? reject(e) : resolve()));
  });
}
