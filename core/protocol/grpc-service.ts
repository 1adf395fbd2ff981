// The gRPC side of the contract: @grpc/grpc-js loaded on first use (loadGrpc), the detsim.v1.Worker
// service definition loaded from the proto file and the channel options both ends use (explicit
// size limits, no retries). A run whose workers are all threads never loads gRPC (~50 ms of every
// start-up), and a worker thread never imports this module.
import { createRequire } from 'node:module';
import type * as grpc from '@grpc/grpc-js';
import type * as ProtoLoader from '@grpc/proto-loader';
import { DEFAULT_MAX_MESSAGE_BYTES, PROTO_PATH } from './contract.js';

const requireModule = createRequire(import.meta.url);
let grpcModule: typeof grpc | undefined;

/** @grpc/grpc-js (CommonJS), loaded the first time a gRPC channel, server or credential is made. */
export function loadGrpc(): typeof grpc {
  return (grpcModule ??= requireModule('@grpc/grpc-js') as typeof grpc);
}

let cachedService: grpc.ServiceDefinition | undefined;

/** The detsim.v1.Worker service definition, loaded with @grpc/proto-loader (cached). */
export function workerServiceDefinition(): grpc.ServiceDefinition {
  if (!cachedService) {
    const protoLoader = requireModule('@grpc/proto-loader') as typeof ProtoLoader;
    const pkg = protoLoader.loadSync(PROTO_PATH, { keepCase: true, defaults: false, longs: String, enums: String });
    cachedService = pkg['detsim.v1.Worker'] as grpc.ServiceDefinition;
    if (!cachedService || !('Session' in cachedService))
      throw new Error(`${PROTO_PATH} does not define detsim.v1.Worker.Session`);
  }
  return cachedService;
}

/** Channel/server options used on both ends: explicit size limits, retries off, keepalive off. */
export function channelOptions(maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES): grpc.ChannelOptions {
  return {
    'grpc.max_receive_message_length': maxMessageBytes,
    'grpc.max_send_message_length': maxMessageBytes,
    'grpc.enable_retries': 0,
  };
}
