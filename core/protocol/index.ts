// The worker protocol module shared by the coordinator and the workers: contract (proto, digest,
// options, addresses), envelopes, bodies, frame codec, the links (gRPC, thread port, socket wire), the client
// and the server transport.
// Re-exports only; no logic lives here.
export * from './contract.js';
export * from './grpc-service.js';
export * from './envelope.js';
export * from './bodies.js';
export * from './methods.js';
export * from './frames.js';
export * from './body-codec.js';
export * from './link.js';
export * from './grpc-link.js';
export * from './rendezvous.js';
export * from './store-id.js';
export * from './port-link.js';
export * from './socket-wire.js';
export * from './socket-link.js';
export * from './socket-server.js';
export * from './client.js';
export * from './server.js';
export * from './tls.js';
