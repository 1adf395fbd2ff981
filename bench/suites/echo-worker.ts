// Bench helper process: a raw socket-wire echo (core/protocol/socket-wire.ts) on a Unix socket that
// sends every message straight back. It is the transport limit the lockstep suite compares the unix
// rows against: the same socket, the same framing and messages per step, no worker runtime, no
// models. NOT a worker.
import { createServer } from 'node:net';
import {
  DEFAULT_MAX_MESSAGE_BYTES,
  SocketReader,
  removeStaleSocket,
  socketMessageHead,
} from '../../core/protocol/index.js';

const listen = process.argv[process.argv.indexOf('--listen') + 1]!;
const path = listen.slice('unix:'.length);
removeStaleSocket(path);
const server = createServer((socket) => {
  const reader = new SocketReader({ maxBodyBytes: DEFAULT_MAX_MESSAGE_BYTES, maxAttachmentBytes: 0 });
  socket.on('data', (chunk: Buffer) => {
    for (const m of reader.push(chunk)) socket.write(socketMessageHead(m.body, 0));
  });
  socket.on('end', () => socket.end());
});
server.on('error', (err) => {
  process.stderr.write(`echo worker: ${err.message}\n`);
  process.exit(1);
});
server.listen(path, () => process.stdout.write(`${JSON.stringify({ ready: true, listen, pid: process.pid })}\n`));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
