// The coordinator's side of authenticated workers: check a plan that asks for TLS (TCP transport,
// a readable set; every worker runtime — TypeScript, Python, Rust — serves TLS) before anything
// starts, and build the gRPC channel credentials (mutual TLS, the bearer token as call metadata)
// from a `detsim certs` directory. Also what a hand-started or rendezvous worker is reached with.
// Not the worker side (workers/process.ts) and not making the set (certs.ts). Never logs a key or
// the token.
import { isIP } from 'node:net';
import { checkServerIdentity, connect as tlsConnect } from 'node:tls';
import type * as grpc from '@grpc/grpc-js';
import type { RunPlan } from './config.js';
import { DetsimError } from '../core/formats/errors.js';
import { type TlsMaterial, readTlsMaterial, tlsPathsIn } from '../core/formats/tls-dir.js';
import { coordinatorChannelCredentials } from '../core/protocol/tls.js';

export { certificateFingerprint } from '../core/protocol/tls.js';

/** The field a TLS refusal names. */
export const TLS_FIELD = 'workers.tls.dir';

/** Read the coordinator's side of a `detsim certs` directory: CA, client pair, token. */
export function readCoordinatorTls(dir: string, field = TLS_FIELD): TlsMaterial {
  return readTlsMaterial(tlsPathsIn(dir, 'coordinator'), field);
}

/** Channel credentials for reaching a TLS worker (hand-started, rendezvous or launched) with `dir`'s set. */
export function coordinatorCredentials(dir: string, field = TLS_FIELD): grpc.ChannelCredentials {
  return coordinatorChannelCredentials(readCoordinatorTls(dir, field));
}

/**
 * Refuse a TLS plan that cannot work, before any worker starts: TLS is for the tcp transport; the
 * coordinator's and the workers' files must be readable. Undefined without TLS.
 */
export function checkWorkerTls(plan: RunPlan): CoordinatorTls | undefined {
  if (!plan.tls) return undefined;
  if (plan.transport !== 'tcp')
    throw new DetsimError(
      'struct_invalid_field',
      `${TLS_FIELD}: TLS is for TCP workers; set workers.transport: tcp (this run's transport is ${plan.transport})`,
      TLS_FIELD,
    );
  // Read the worker's files too: a set missing a worker file would fail every worker later, one by one.
  readTlsMaterial(tlsPathsIn(plan.tls.dir, 'worker'), TLS_FIELD);
  const material = readCoordinatorTls(plan.tls.dir);
  return { material, credentials: coordinatorChannelCredentials(material) };
}

/** The coordinator's TLS for one run: its material (for the handshake probe) and the gRPC credentials. */
export interface CoordinatorTls {
  material: TlsMaterial;
  credentials: grpc.ChannelCredentials;
}

/** How long the probe waits for the worker's first bytes after the handshake (a refusal closes at once). */
const PROBE_SETTLE_MS = 2_000;

/**
 * One TLS handshake with a worker before gRPC connects, so that a mismatched identity is named at
 * once instead of surfacing as a connect timeout: undefined when the worker accepts this run's
 * coordinator, else the named reason. The worker's certificate must chain to the run's CA and name
 * the host dialled; the worker must then accept ours (an HTTP/2 server speaks first, a refusing
 * one closes the connection).
 */
export function probeWorkerTls(
  address: string,
  material: TlsMaterial,
): Promise<{ reason: 'ident_foreign_certificate'; message: string } | undefined> {
  const m = /^(.+):([0-9]+)$/.exec(address);
  if (!m) return Promise.resolve(undefined);
  const host = m[1]!.replace(/^\[(.*)\]$/, '$1');
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const socket = tlsConnect({
      host,
      port: Number(m[2]),
      ca: material.ca,
      cert: material.cert,
      key: material.key,
      ALPNProtocols: ['h2'],
      rejectUnauthorized: false,
      ...(isIP(host) === 0 ? { servername: host } : {}),
    });
    const settle = (outcome: { reason: 'ident_foreign_certificate'; message: string } | undefined): void => {
      if (timer) clearTimeout(timer);
      socket.removeAllListeners();
      socket.on('error', () => undefined);
      socket.destroy();
      resolve(outcome);
    };
    const refusedOurs = (): void =>
      settle({
        reason: 'ident_foreign_certificate',
        message: "the worker refused this coordinator's certificate: it trusts another CA (another run's set?)",
      });
    socket.once('secureConnect', () => {
      const peer = socket.getPeerCertificate();
      if (!socket.authorized)
        return settle({
          reason: 'ident_foreign_certificate',
          message: `the worker's certificate is not signed by this run's CA (${String(socket.authorizationError)})`,
        });
      if (checkServerIdentity(host, peer) !== undefined)
        return settle({
          reason: 'ident_foreign_certificate',
          message: `the worker's certificate does not name ${host} (make the set with detsim certs --host ${host})`,
        });
      socket.once('data', () => settle(undefined));
      socket.once('close', refusedOurs);
      timer = setTimeout(() => settle(undefined), PROBE_SETTLE_MS);
    });
    // A TLS alert or a reset is the worker refusing us; anything else (refused, unreachable) is gRPC's to report.
    socket.once('error', (e: NodeJS.ErrnoException) =>
      e.code?.startsWith('ERR_SSL') || e.code === 'ECONNRESET' ? refusedOurs() : settle(undefined),
    );
  });
}
