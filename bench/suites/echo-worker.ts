// Bench helper process: a raw grpc-js server for the detsim.v1.Worker service that echoes every
// frame straight back. It is the transport limit the lockstep suite compares against: the same
// stream, the same messages per step, no worker runtime, no models. NOT a worker.
import * as grpc from '@grpc/grpc-js';
import { channelOptions, removeStaleSocket, workerServiceDefinition, type Frame } from '../../core/protocol/index.js';

const listen = process.argv[process.argv.indexOf('--listen') + 1]!;
const path = listen.slice('unix:'.length);
removeStaleSocket(path);
const server = new grpc.Server(channelOptions());
server.addService(workerServiceDefinition(), {
  Session: (call: grpc.ServerDuplexStream<Frame, Frame>) => {
    call.on('data', (frame: Frame) => call.write(frame));
    call.on('end', () => call.end());
  },
});
server.bindAsync(listen, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    process.stderr.write(`echo worker: ${err.message}\n`);
    process.exit(1);
  }
  process.stdout.write(`${JSON.stringify({ ready: true, listen, pid: process.pid })}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
