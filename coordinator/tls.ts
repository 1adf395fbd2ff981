// The coordinator's side of authenticated workers: check a plan that asks for TLS (TCP transport,
// runtimes that serve TLS, a readable set) before anything starts, and build the gRPC channel
// credentials (mutual TLS, the bearer token as call metadata) from a `detsim certs` directory.
// Also what a hand-started or rendezvous worker is reached with. Not the worker side
// (workers/process.ts) and not making the set (certs.ts). Never logs a key or the token.
import type * as grpc from '@grpc/grpc-js';
import type { PlannedWorker, RunPlan } from './config.js';
import { DetsimError } from '../core/formats/errors.js';
import { type TlsMaterial, readTlsMaterial, tlsPathsIn } from '../core/formats/tls-dir.js';
import { coordinatorChannelCredentials } from '../core/protocol/tls.js';

export { certificateFingerprint } from '../core/protocol/tls.js';

/** The field a TLS refusal names. */
export const TLS_FIELD = 'workers.tls.dir';

/** Runtimes whose worker serves mutual TLS with a token (the Rust worker does not yet). */
const TLS_RUNTIMES: ReadonlySet<string> = new Set(['typescript', 'python']);

/** Read the coordinator's side of a `detsim certs` directory: CA, client pair, token. */
export function readCoordinatorTls(dir: string, field = TLS_FIELD): TlsMaterial {
  return readTlsMaterial(tlsPathsIn(dir, 'coordinator'), field);
}

/** Channel credentials for reaching a TLS worker (hand-started, rendezvous or launched) with `dir`'s set. */
export function coordinatorCredentials(dir: string, field = TLS_FIELD): grpc.ChannelCredentials {
  return coordinatorChannelCredentials(readCoordinatorTls(dir, field));
}

/**
 * Refuse a TLS plan that cannot work, before any worker starts: TLS is for the tcp transport; every
 * worker's runtime must serve TLS; the coordinator's files must be readable. Undefined without TLS.
 */
export function checkWorkerTls(plan: RunPlan): grpc.ChannelCredentials | undefined {
  if (!plan.tls) return undefined;
  if (plan.transport !== 'tcp')
    throw new DetsimError(
      'struct_invalid_field',
      `${TLS_FIELD}: TLS is for TCP workers; set workers.transport: tcp (this run's transport is ${plan.transport})`,
      TLS_FIELD,
    );
  const plain = plan.workers.find((w) => !TLS_RUNTIMES.has(runtimeOf(w)));
  if (plain)
    throw new DetsimError(
      'perm_tls_unsupported',
      `${TLS_FIELD}: worker ${plain.workerId} runs on ${runtimeOf(plain)}, whose worker does not serve TLS; use typescript or python workers on a TLS run`,
      TLS_FIELD,
    );
  // Read the worker's files too: a set missing a worker file would fail every worker later, one by one.
  readTlsMaterial(tlsPathsIn(plan.tls.dir, 'worker'), TLS_FIELD);
  return coordinatorCredentials(plan.tls.dir);
}

function runtimeOf(worker: PlannedWorker): string {
  return worker.runtime ?? 'typescript';
}
