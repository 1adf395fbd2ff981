// The gRPC Link: a detsim.v1.Worker Session stream (one bidirectional stream of frames) carrying
// whole messages through the frame codec. Connects, waits for the channel, opens the stream.
// Not request tracking (client.ts) and not the worker's server side (server.ts).
import type * as grpc from '@grpc/grpc-js';
import { DEFAULT_MAX_MESSAGE_BYTES, type Frame, parseAddress } from './contract.js';
import { channelOptions, loadGrpc, workerServiceDefinition } from './grpc-service.js';
import { DEFAULT_MAX_ATTACHMENT_BYTES, FrameAssembler, FrameWriter } from './frames.js';
import type { Body, Link, LinkReceiver } from './link.js';
import { TOKEN_METADATA_KEY } from './tls.js';

type SessionStream = grpc.ClientDuplexStream<Frame, Frame>;

export interface GrpcLinkOptions {
  maxMessageBytes?: number;
  /** How long to wait for the channel to become ready. */
  connectTimeoutMs: number;
  credentials?: grpc.ChannelCredentials;
  /**
   * TLS only: the server name (SNI) to send instead of the address's host, e.g. a DNS name of the
   * worker's certificate when the address is an IP (which SNI must not carry). The credentials
   * then decide what the certificate is checked against (core/protocol/tls.ts).
   */
  serverName?: string;
  /** The longest reply attachment received (default 2 GiB − 1); tests lower it. */
  maxAttachmentBytes?: number;
  /** A plaintext TCP worker's per-run secret, sent as the stream's bearer token (TLS sends its own). */
  token?: string;
}

/** Why a gRPC link could not be opened: the channel never became ready in time. */
export class GrpcConnectError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`not ready within ${timeoutMs} ms`);
    this.name = 'GrpcConnectError';
  }
}

/** Connect to `address` and open its Session stream; rejects with GrpcConnectError if it never comes up. */
export async function connectGrpcLink(address: string, options: GrpcLinkOptions): Promise<Link> {
  const target = parseAddress(address, 'address').target;
  const { credentials, makeGenericClientConstructor, Metadata } = loadGrpc();
  const Ctor = makeGenericClientConstructor(workerServiceDefinition(), 'Worker');
  const client = new Ctor(target, options.credentials ?? credentials.createInsecure(), {
    ...channelOptions(options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES),
    ...(options.serverName !== undefined ? { 'grpc.ssl_target_name_override': options.serverName } : {}),
  });
  await new Promise<void>((resolve, reject) => {
    client.waitForReady(Date.now() + options.connectTimeoutMs, (err) => {
      if (!err) return resolve();
      client.close();
      reject(new GrpcConnectError(options.connectTimeoutMs));
    });
  });
  const metadata = new Metadata();
  if (options.token !== undefined) metadata.set(TOKEN_METADATA_KEY, `Bearer ${options.token}`);
  const stream = (client as unknown as { Session(m: grpc.Metadata): SessionStream }).Session(metadata);
  return new GrpcLink(address, client, stream, options.maxAttachmentBytes ?? DEFAULT_MAX_ATTACHMENT_BYTES);
}

class GrpcLink implements Link {
  private readonly writer: FrameWriter;
  // A reply's attachment past the limit is dropped, not a broken stream: the caller refuses that
  // one reply by name (a capture payload too large to stream), and the worker stays reachable.
  private readonly assembler: FrameAssembler;
  private receiver: LinkReceiver | undefined;
  private over = false;

  constructor(
    readonly address: string,
    private readonly client: grpc.Client,
    private readonly stream: SessionStream,
    maxAttachmentBytes: number,
  ) {
    this.writer = new FrameWriter(stream);
    this.assembler = new FrameAssembler(maxAttachmentBytes, true);
  }

  open(receiver: LinkReceiver): void {
    this.receiver = receiver;
    this.stream.on('data', (frame: Frame) => this.onFrame(frame));
    this.stream.on('end', () => this.end('stream-ended', 'the worker ended the stream'));
    this.stream.on('error', (e: Error) => this.end('stream-ended', `stream error: ${e.message}`));
  }

  send(body: Body, attachment?: Uint8Array): Promise<void> {
    return this.writer.send(body, attachment);
  }

  close(): void {
    this.over = true;
    try {
      this.stream.end();
    } catch {
      // already ended
    }
    this.stream.cancel();
    this.client.close();
  }

  private onFrame(frame: Frame): void {
    let message;
    try {
      message = this.assembler.push(frame);
    } catch (e) {
      this.end('protocol', `bad frame: ${(e as Error).message}`);
      this.stream.cancel();
      return;
    }
    if (message && !this.over) this.receiver!.message(message.body, message.attachment, message.droppedAttachmentBytes);
  }

  private end(kind: 'stream-ended' | 'protocol', why: string): void {
    if (this.over) return;
    this.over = true;
    this.receiver!.ended(kind, why);
  }
}
