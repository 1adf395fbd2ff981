// The worker's end of the transport: a gRPC server bound to one address whose Session streams
// deliver reassembled messages to a handler and send its replies back in order with backpressure.
// Transport only: what a request means is the worker runtime's business (workers/runtime.ts).
import { lookup } from 'node:dns/promises';
import type { EventEmitter } from 'node:events';
import { isIP } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type * as grpc from '@grpc/grpc-js';
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  type Frame,
  LOCAL_LISTEN_RULE,
  parseListenAddress,
  removeStaleSocket,
} from './contract.js';
import { channelOptions, loadGrpc, workerServiceDefinition } from './grpc-service.js';
import { DetsimError } from '../formats/errors.js';
import { type AssembledMessage, FrameAssembler, FrameWriter } from './frames.js';
import { ATTACHMENT_BEFORE_HELLO, type Body } from './link.js';
import {
  TOKEN_METADATA_KEY,
  TOKEN_REFUSALS,
  type TlsCredentialsInput,
  type TokenRefusal,
  checkBearer,
  workerServerCredentials,
} from './tls.js';

/** True for an IP address on the loopback interface: 127.0.0.0/8, ::1, or 127.x mapped into IPv6. */
function isLoopbackIp(ip: string): boolean {
  const v4 = /^(?:::ffff:)?127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$/i;
  return v4.test(ip) || ip === '::1';
}

/**
 * A plaintext TCP listen address that is a host name (`localhost`) is checked by what it resolves
 * to, not by its name: every address must be loopback (a `localhost` that /etc/hosts maps to a LAN
 * address would otherwise serve plaintext to the network). IP literals were checked by parsing.
 */
export async function checkListenResolves(listen: string, field: string, tls: boolean): Promise<void> {
  const address = parseListenAddress(listen, field, tls);
  if (tls || address.kind !== 'tcp' || isIP(address.host.replace(/^\[(.*)\]$/, '$1')) !== 0) return;
  const found = await lookup(address.host, { all: true }).catch(() => []);
  const beyond = found.find((a) => !isLoopbackIp(a.address));
  if (found.length > 0 && beyond === undefined) return;
  throw new DetsimError(
    'perm_listen_not_local',
    `${field}: ${JSON.stringify(address.host)} ${beyond ? `resolves to ${beyond.address}, which is not a loopback address` : 'resolves to no address'}; ${LOCAL_LISTEN_RULE}`,
    field,
  );
}

/** One open session stream as seen by the handler. */
export interface SessionConnection {
  /** Send a reply message (body + optional attachment); frames of two replies never interleave. */
  send(body: Body, attachment?: Uint8Array): Promise<void>;
  /** End the stream from the worker side. */
  end(): void;
}

export interface SessionHandler {
  /** Called once per complete request message, in arrival order. */
  onMessage(message: AssembledMessage, connection: SessionConnection): void;
  /** A stream violated framing; the runtime decides (the server ends that stream). */
  onProtocolError?(why: string): void;
  /**
   * Whether this stream may send attachment chunks yet. A stream that may not (one that has not
   * said Hello) is ended at its first chunk, so a stranger cannot make the worker buffer up to the
   * attachment limit before any introduction. Default: always.
   */
  mayAttach?(connection: SessionConnection): boolean;
  /** A stream or a TLS handshake was refused (TLS workers only); the peer got no body, ever. */
  onAuthRefused?(reason: AuthRefusal, why: string): void;
}

export interface StartedServer {
  /** The bound address, e.g. `unix:/tmp/x.sock` or `127.0.0.1:40123` (the real port). */
  listen: string;
  /** Stop accepting, end open streams, release the socket. */
  close(): Promise<void>;
}

/**
 * Bind a worker server on `listen`. With `tls`, the handshake requires a client certificate signed
 * by `tls.ca` and every stream must carry `tls.token` before its first frame is read; without it,
 * the address must be a unix socket or loopback, and with `plainToken` (a plaintext TCP worker's
 * per-run secret) every stream must carry that as its bearer token.
 */
export async function startWorkerServer(
  listen: string,
  handler: SessionHandler,
  maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES,
  tls?: TlsCredentialsInput,
  plainToken?: string,
): Promise<StartedServer> {
  // A TLS worker's token, or a plaintext TCP worker's per-run secret: every stream must carry it.
  const token = tls?.token ?? plainToken;
  // The transport itself refuses a non-loopback plaintext TCP address, whoever asks for it.
  const address = parseListenAddress(listen, 'listen', tls !== undefined);
  await checkListenResolves(listen, 'listen', tls !== undefined);
  if (address.kind === 'unix') removeStaleSocket(address.path);
  const server = new (loadGrpc().Server)(channelOptions(maxMessageBytes));
  const streams = new Set<grpc.ServerDuplexStream<Frame, Frame>>();
  server.addService(workerServiceDefinition(), {
    Session: (call: grpc.ServerDuplexStream<Frame, Frame>) => {
      if (token !== undefined && refuseUnauthorized(call, token, handler)) return;
      streams.add(call);
      const assembler = new FrameAssembler();
      const writer = new FrameWriter(call);
      const connection: SessionConnection = {
        send: (body, attachment) => writer.send(body, attachment),
        end: () => call.end(),
      };
      call.on('data', (frame: Frame) => {
        let message: AssembledMessage | undefined;
        try {
          if (frame.chunk && frame.chunk.length > 0 && handler.mayAttach?.(connection) === false)
            throw new Error(ATTACHMENT_BEFORE_HELLO);
          message = assembler.push(frame);
        } catch (e) {
          handler.onProtocolError?.((e as Error).message);
          call.end();
          return;
        }
        if (message) handler.onMessage(message, connection);
      });
      call.on('end', () => {
        streams.delete(call);
        call.end();
      });
      call.on('error', () => streams.delete(call));
      call.on('cancelled', () => streams.delete(call));
    },
  });
  const bindTarget = address.kind === 'unix' ? address.target : `${address.host}:${address.port}`;
  const port = await bindServer(server, bindTarget, tls);
  if (tls) watchHandshakes(server, handler);
  const bound = address.kind === 'unix' ? address.target : `${address.host}:${port}`;
  return {
    listen: bound,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of streams) {
          try {
            s.end();
          } catch {
            // already closed
          }
        }
        let finished = false;
        const finish = (): void => {
          if (finished) return;
          finished = true;
          if (address.kind === 'unix') removeStaleSocket(address.path);
          resolve();
        };
        // A peer that never ends its half of the stream must not hold the shutdown forever.
        const force = setTimeout(() => {
          server.forceShutdown();
          finish();
        }, 500);
        server.tryShutdown(() => {
          clearTimeout(force);
          finish();
        });
      }),
  };
}

/**
 * End a stream whose bearer token is missing or wrong with UNAUTHENTICATED and the named refusal as
 * its status details, before any frame of it is read: a stranger gets no body, bytes or ids.
 */
function refuseUnauthorized(
  call: grpc.ServerDuplexStream<Frame, Frame>,
  token: string,
  handler: SessionHandler,
): boolean {
  const refusal = checkBearer(token, call.metadata.get(TOKEN_METADATA_KEY)[0]);
  if (refusal === undefined) return false;
  handler.onAuthRefused?.(refusal, TOKEN_REFUSALS[refusal]);
  call.emit('error', { code: loadGrpc().status.UNAUTHENTICATED, details: `[${refusal}] ${TOKEN_REFUSALS[refusal]}` });
  return true;
}

/** The named refusals of a TLS worker: the handshake's (certificate) and the stream's (token). */
export type AuthRefusal = TokenRefusal | 'ident_no_client_certificate' | 'ident_foreign_certificate';

/**
 * What a failed handshake means, from Node's TLS error code and the socket's verification error
 * (the peer itself only sees a TLS alert or a closed connection).
 */
export function handshakeRefusal(
  code: string | undefined,
  verifyError: string | null | undefined,
): { reason: AuthRefusal; why: string } {
  if (verifyError)
    return {
      reason: 'ident_foreign_certificate',
      why: `a client certificate this run's CA did not issue to a coordinator (${verifyError})`,
    };
  if (code === 'ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE')
    return { reason: 'ident_no_client_certificate', why: 'a TLS connection without a client certificate' };
  return {
    reason: 'ident_no_client_certificate',
    why: `a connection that did not complete mutual TLS (${code ?? 'no code'})`,
  };
}

/**
 * Name refused TLS handshakes on the worker's side. grpc-js rejects them inside its HTTP/2 servers
 * without telling its user, so listen on those (grpc-js 1.14's private `http2Servers`; were it
 * gone, the handshakes would still be refused, only unnamed in the worker's log).
 */
function watchHandshakes(server: grpc.Server, handler: SessionHandler): void {
  const servers = (server as unknown as { http2Servers?: Map<EventEmitter, unknown> }).http2Servers;
  for (const http2Server of servers?.keys() ?? []) {
    http2Server.on('tlsClientError', (err: NodeJS.ErrnoException, socket?: TLSSocket) => {
      const { reason, why } = handshakeRefusal(err.code, socket?.authorizationError?.toString());
      handler.onAuthRefused?.(reason, why);
    });
  }
}

/** Bind `server` to `target` (a unix path or host:port); the port bound, or the refusal of a failed bind. */
async function bindServer(server: grpc.Server, target: string, tls: TlsCredentialsInput | undefined): Promise<number> {
  const g = loadGrpc();
  // grpc-js logs a failed bind itself ("E No address added …"); the refusal says it in one line
  // (unless the user asked grpc-js for its own logs with GRPC_VERBOSITY).
  const quiet = process.env.GRPC_VERBOSITY === undefined;
  if (quiet) g.setLogVerbosity(g.logVerbosity.NONE);
  try {
    return await new Promise<number>((resolve, reject) => {
      const credentials = tls ? workerServerCredentials(tls) : g.ServerCredentials.createInsecure();
      server.bindAsync(target, credentials, (err: Error | null, p: number) =>
        err ? reject(bindFailure(target, err)) : resolve(p),
      );
    });
  } finally {
    if (quiet) g.setLogVerbosity(g.logVerbosity.ERROR);
  }
}

/** A failed bind as the one-line refusal it is (grpc-js says "No address added … errors: [listen EADDRINUSE …]"). */
function bindFailure(target: string, err: Error): Error {
  const why = /\[([^\]]*)\]/.exec(err.message)?.[1] ?? err.message;
  const inUse = /EADDRINUSE/.test(why);
  return new DetsimError(
    'perm_listen_failed',
    `--listen ${target}: cannot listen there: ${inUse ? 'the address is already in use (another worker, or another program, listens on it; pick another port)' : why}`,
    '--listen',
  );
}
