// The worker's end of the socket wire (socket-wire.ts): a Unix socket server whose connections
// deliver whole messages to the same SessionHandler a gRPC server drives, and carry its replies back
// in order. For worker processes the coordinator starts itself (`--wire socket`); it listens only on
// `unix:/abs/path` — who may connect is who may open that path (the run's private socket directory).
// Transport only: what a request means is the worker runtime's business (workers/runtime.ts).
import { createServer, type Server, type Socket } from 'node:net';
import { DEFAULT_MAX_MESSAGE_BYTES, parseAddress, removeStaleSocket } from './contract.js';
import { DetsimError } from '../formats/errors.js';
import { DEFAULT_MAX_ATTACHMENT_BYTES } from './frames.js';
import type { SessionConnection, SessionHandler, StartedServer } from './server.js';
import { SocketReader, writeMessage } from './socket-wire.js';

/** Bind a socket-wire server on `listen` (a unix socket only). */
export async function startSocketServer(
  listen: string,
  handler: SessionHandler,
  maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES,
): Promise<StartedServer> {
  const address = parseAddress(listen, 'listen');
  if (address.kind !== 'unix')
    throw new DetsimError('struct_invalid_field', 'listen: --wire socket listens on unix:/abs/path only', 'listen');
  removeStaleSocket(address.path);
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    serveConnection(socket, handler, maxMessageBytes);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.path, () => {
      server.removeListener('error', reject);
      resolve();
    });
  });
  return { listen: address.target, close: () => closeServer(server, sockets, address.path) };
}

/** One connection: messages in, replies out, a framing error ends it (named to the handler). */
function serveConnection(socket: Socket, handler: SessionHandler, maxMessageBytes: number): void {
  const connection: SessionConnection = {
    send: (body, attachment) => writeMessage(socket, body, attachment),
    end: () => socket.end(),
  };
  const reader = new SocketReader({
    maxBodyBytes: maxMessageBytes,
    maxAttachmentBytes: DEFAULT_MAX_ATTACHMENT_BYTES,
    mayAttach: () => handler.mayAttach?.(connection) !== false,
  });
  socket.on('data', (chunk: Buffer) => {
    let messages;
    try {
      messages = reader.push(chunk);
    } catch (e) {
      handler.onProtocolError?.((e as Error).message);
      socket.destroy();
      return;
    }
    for (const m of messages) handler.onMessage(m, connection);
  });
  socket.on('end', () => socket.end());
  socket.on('error', () => socket.destroy());
}

function closeServer(server: Server, sockets: Set<Socket>, path: string): Promise<void> {
  return new Promise<void>((resolve) => {
    for (const s of sockets) s.end();
    let finished = false;
    const finish = (): void => {
      if (finished) return;
      finished = true;
      removeStaleSocket(path);
      resolve();
    };
    // A peer that never ends its half must not hold the shutdown forever.
    const force = setTimeout(() => {
      for (const s of sockets) s.destroy();
      finish();
    }, 500);
    server.close(() => {
      clearTimeout(force);
      finish();
    });
  });
}
