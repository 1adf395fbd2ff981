// The gRPC side of the contract: the detsim.v1.Worker service definition loaded from the proto file
// and the channel options both ends use (explicit size limits, no retries). Only the gRPC link, the
// gRPC server and tests that speak raw gRPC import it, so a worker thread never loads gRPC.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { DEFAULT_MAX_MESSAGE_BYTES, PROTO_PATH } from './contract.js';

let cachedService: grpc.ServiceDefinition | undefined;

/** The detsim.v1.Worker service definition, loaded with @grpc/proto-loader (cached). */
export function workerServiceDefinition(): grpc.ServiceDefinition {
  if (!cachedService) {
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
