// The socket Link: the coordinator's end of the socket wire (socket-wire.ts) to a TypeScript worker
// process it started on a Unix socket. Connects, then carries whole messages in order; a failed
// write or a closed socket ends the link. Not request tracking (client.ts), not the worker's end
// (socket-server.ts), and never across machines: TCP workers speak gRPC.
import { connect, type Socket } from 'node:net';
import { DEFAULT_MAX_MESSAGE_BYTES, parseAddress } from './contract.js';
import { DEFAULT_MAX_ATTACHMENT_BYTES } from './frames.js';
import type { Body, Link, LinkReceiver } from './link.js';
import { SocketReader, writeMessage } from './socket-wire.js';

export interface SocketLinkOptions {
  /** How long to wait for the connection. */
  connectTimeoutMs: number;
  maxMessageBytes?: number;
  /** The longest reply attachment received (default 2 GiB − 1); a longer one is dropped and named. */
  maxAttachmentBytes?: number;
}

/** Why a socket link could not be opened: no connection within the time given. */
export class SocketConnectError extends Error {
  constructor(readonly why: string) {
    super(why);
    this.name = 'SocketConnectError';
  }
}

/** Connect to a worker's `unix:/abs/path` socket wire; rejects with SocketConnectError if it cannot. */
export async function connectSocketLink(address: string, options: SocketLinkOptions): Promise<Link> {
  const parsed = parseAddress(address, 'address');
  if (parsed.kind !== 'unix') throw new SocketConnectError(`${address} is not a unix socket`);
  const socket = await new Promise<Socket>((resolve, reject) => {
    const s = connect(parsed.path);
    const timer = setTimeout(() => {
      s.destroy();
      reject(new SocketConnectError(`not connected within ${options.connectTimeoutMs} ms`));
    }, options.connectTimeoutMs);
    s.once('connect', () => {
      clearTimeout(timer);
      s.removeAllListeners('error');
      resolve(s);
    });
    s.once('error', (e) => {
      clearTimeout(timer);
      reject(new SocketConnectError(e.message));
    });
  });
  return new SocketLink(address, socket, {
    maxBodyBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    maxAttachmentBytes: options.maxAttachmentBytes ?? DEFAULT_MAX_ATTACHMENT_BYTES,
  });
}

class SocketLink implements Link {
  private readonly reader: SocketReader;
  private receiver: LinkReceiver | undefined;
  private over = false;

  constructor(
    readonly address: string,
    private readonly socket: Socket,
    limits: { maxBodyBytes: number; maxAttachmentBytes: number },
  ) {
    this.reader = new SocketReader({ ...limits, dropOversized: true });
  }

  open(receiver: LinkReceiver): void {
    this.receiver = receiver;
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('end', () => this.end('stream-ended', 'the worker ended the stream'));
    this.socket.on('close', () => this.end('stream-ended', 'the worker closed the socket'));
    this.socket.on('error', (e: Error) => this.end('stream-ended', `socket error: ${e.message}`));
  }

  send(body: Body, attachment?: Uint8Array): Promise<void> {
    if (this.over) return Promise.reject(new Error('the socket link is closed'));
    return writeMessage(this.socket, body, attachment);
  }

  close(): void {
    this.over = true;
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    let messages;
    try {
      messages = this.reader.push(chunk);
    } catch (e) {
      this.end('protocol', `bad frame: ${(e as Error).message}`);
      this.socket.destroy();
      return;
    }
    for (const m of messages) {
      if (this.over) return;
      this.receiver!.message(m.body, m.attachment, m.droppedAttachmentBytes);
    }
  }

  private end(kind: 'stream-ended' | 'protocol', why: string): void {
    if (this.over) return;
    this.over = true;
    this.receiver!.ended(kind, why);
  }
}
