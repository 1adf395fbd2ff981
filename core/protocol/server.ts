// The worker's end of the transport: a gRPC server bound to one address whose Session streams
// deliver reassembled messages to a handler and send its replies back in order with backpressure.
// Transport only: what a request means is the worker runtime's business (workers/runtime.ts).
import * as grpc from '@grpc/grpc-js';
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  type Frame,
  channelOptions,
  parseListenAddress,
  removeStaleSocket,
  workerServiceDefinition,
} from './contract.js';
import { type AssembledMessage, FrameAssembler, FrameWriter } from './frames.js';

/** One open session stream as seen by the handler. */
export interface SessionConnection {
  /** Send a reply message (body + optional attachment); frames of two replies never interleave. */
  send(body: Uint8Array, attachment?: Uint8Array): Promise<void>;
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
}

/** Why a stream was ended when it sent a chunk before it was allowed to (see mayAttach). */
export const ATTACHMENT_BEFORE_HELLO = 'an attachment chunk before Worker.Hello on this stream';

export interface StartedServer {
  /** The bound address, e.g. `unix:/tmp/x.sock` or `127.0.0.1:40123` (the real port). */
  listen: string;
  server: grpc.Server;
  /** Stop accepting, end open streams, release the socket. */
  close(): Promise<void>;
}

export async function startWorkerServer(
  listen: string,
  handler: SessionHandler,
  maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES,
): Promise<StartedServer> {
  // The transport itself refuses a non-loopback TCP address, whoever asks for it.
  const address = parseListenAddress(listen);
  if (address.kind === 'unix') removeStaleSocket(address.path);
  const server = new grpc.Server(channelOptions(maxMessageBytes));
  const streams = new Set<grpc.ServerDuplexStream<Frame, Frame>>();
  server.addService(workerServiceDefinition(), {
    Session: (call: grpc.ServerDuplexStream<Frame, Frame>) => {
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
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(bindTarget, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  const bound = address.kind === 'unix' ? address.target : `${address.host}:${port}`;
  return {
    listen: bound,
    server,
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
