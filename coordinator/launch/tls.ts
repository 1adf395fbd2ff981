// The coordinator's side of authenticated workers: check a plan that asks for TLS (TCP transport,
// a readable set; every worker runtime — TypeScript, Python, Rust — serves TLS) before anything
// starts, and build the gRPC channel credentials (mutual TLS, the bearer token as call metadata)
// from a `detsim certs` directory. Also what a hand-started or rendezvous worker is reached with.
// Not the worker side (workers/process.ts) and not making the set (certs.ts). Never logs a key or
// the token.
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import type { RunPlan } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import { TLS_FILES, type TlsMaterial, readTlsMaterial, tlsPathsIn } from '../../core/formats/tls-dir.js';
import { parseAddress } from '../../core/protocol/contract.js';
import { certificateDnsName, coordinatorChannelCredentials, verifyDialledHost } from '../../core/protocol/tls.js';

export { certificateFingerprint } from '../../core/protocol/tls.js';

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
  const worker = readTlsMaterial(tlsPathsIn(plan.tls.dir, 'worker'), TLS_FIELD);
  const material = readCoordinatorTls(plan.tls.dir);
  refuseForeignLeaf(plan.tls.dir, TLS_FILES.workerCert, worker);
  refuseForeignLeaf(plan.tls.dir, TLS_FILES.coordinatorCert, material);
  refuseExpired(plan.tls.dir);
  return {
    material,
    credentials: coordinatorChannelCredentials(material),
    serverName: certificateDnsName(worker.cert),
  };
}

/**
 * Refuse a set whose certificate `name` is not signed by its own ca.pem (files mixed from two
 * `detsim certs` runs): every worker launched with it would be refused one by one; named now,
 * before anything is written.
 */
function refuseForeignLeaf(dir: string, name: string, side: TlsMaterial): void {
  const ca = parseCertificate(side.ca, join(dir, TLS_FILES.ca));
  const leaf = parseCertificate(side.cert, join(dir, name));
  if (leaf.checkIssued(ca) && leaf.verify(ca.publicKey)) return;
  throw new DetsimError(
    'ident_foreign_certificate',
    `${TLS_FIELD}: ${join(dir, name)} is not signed by ${join(dir, TLS_FILES.ca)} (files from two different sets?)`,
    TLS_FIELD,
  );
}

/** The certificates of a set that every handshake checks: the CA and both leaves. */
const SET_CERTIFICATES = [TLS_FILES.ca, TLS_FILES.coordinatorCert, TLS_FILES.workerCert] as const;

/** When each of the set's certificates in `dir` expires (ms since the epoch), in SET_CERTIFICATES order. */
function expiriesIn(dir: string): { path: string; notAfter: number }[] {
  return SET_CERTIFICATES.map((name) => {
    const path = join(dir, name);
    return { path, notAfter: Date.parse(parseCertificate(readFileSync(path), path).validTo) };
  });
}

/**
 * Refuse a set with an expired certificate before any worker starts: every worker would fail its
 * handshake, named only as a connection failure. The set is the user's (a per-run set is renewed
 * before this check: {@link setExpiresWithin}); the refusal names the file and says what to do.
 */
function refuseExpired(dir: string): void {
  const now = Date.now();
  for (const { path, notAfter } of expiriesIn(dir))
    if (!(notAfter > now))
      throw new DetsimError(
        'perm_tls_expired',
        `${TLS_FIELD}: ${path} expired on ${new Date(notAfter).toISOString()}; make a new set (detsim certs)`,
        TLS_FIELD,
      );
}

/**
 * Whether a certificate of the set in `dir` has expired or expires within `horizonMs` from now
 * (a resume renews its per-run set then, rather than have workers refused mid-run). A set that
 * cannot be read says false: the checks that follow refuse it by name.
 */
export function setExpiresWithin(dir: string, horizonMs: number): boolean {
  try {
    return expiriesIn(dir).some(({ notAfter }) => !(notAfter > Date.now() + horizonMs));
  } catch {
    return false;
  }
}

/** A PEM certificate read from `path`; one that does not parse is refused naming the file, never echoing it. */
function parseCertificate(pem: Buffer, path: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch {
    throw new DetsimError('perm_tls_unreadable', `${TLS_FIELD}: ${path} is not a readable certificate`, TLS_FIELD);
  }
}

/** The coordinator's TLS for one run: its material (for the handshake probe) and the gRPC credentials. */
export interface CoordinatorTls {
  material: TlsMaterial;
  credentials: grpc.ChannelCredentials;
  /** A DNS name of the set's worker certificate: the TLS server name sent to a worker dialled by IP address. */
  serverName: string | undefined;
}

/**
 * How to reach the TLS worker at `address`: by host name, with the run's credentials as they are
 * (the name is sent as TLS server name and checked against the certificate); by IP address, which
 * a TLS server name must not be (RFC 6066; Node warns DEP0123 for each connection), with the set's
 * worker DNS name sent instead, while the certificate is still checked against the IP address dialled.
 */
export function tlsChannelTo(
  tls: CoordinatorTls,
  address: string,
): { credentials: grpc.ChannelCredentials; serverName?: string } {
  const target = parseAddress(address, 'address');
  const host = target.kind === 'tcp' ? target.host.replace(/^\[(.*)\]$/, '$1') : undefined;
  if (host === undefined || isIP(host) === 0 || tls.serverName === undefined) return { credentials: tls.credentials };
  return {
    credentials: coordinatorChannelCredentials(tls.material, verifyDialledHost(host)),
    serverName: tls.serverName,
  };
}
