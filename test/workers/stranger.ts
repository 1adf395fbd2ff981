// Test helper: a stranger on a worker's port — its own grpc-js client (credentials of its choosing,
// a bearer token or none) opens one Session, sends one request body (a Hello unless told otherwise)
// and reports the status that ended the stream and how many reply frames came first. Not a test.
import * as grpc from '@grpc/grpc-js';
import { type Frame, channelOptions, workerServiceDefinition } from '../../core/protocol/index.js';

export interface StrangerOutcome {
  code: number;
  details: string;
  frames: number;
}

export async function stranger(
  address: string,
  creds: grpc.ChannelCredentials,
  token?: string,
  method = 'Worker.Hello',
): Promise<StrangerOutcome> {
  const Client = grpc.makeGenericClientConstructor(workerServiceDefinition(), 'Worker');
  const client = new Client(address, creds, channelOptions());
  const metadata = new grpc.Metadata();
  if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
  const call = (client as unknown as { Session(m: grpc.Metadata): grpc.ClientDuplexStream<Frame, Frame> }).Session(
    metadata,
  );
  let frames = 0;
  call.on('data', () => frames++);
  const params =
    method === 'Worker.Hello' ? { sessionId: 's1', expectedWorkerId: 'w1', role: 'agent', supportedMajors: [1] } : {};
  call.write({ body: Buffer.from(JSON.stringify({ requestId: 'r1', method, params })) });
  const status = await new Promise<grpc.ServiceError>((res) => call.on('error', res));
  client.close();
  return { code: status.code, details: status.details, frames };
}
