// The certificate check of a rendezvous worker that serves TLS: open one TLS connection to the
// address its record names (presenting the coordinator's client certificate, since the worker
// requires one), read the certificate the worker presents, and return its fingerprint (lowercase
// hex SHA-256 of the DER), so the coordinator can compare it with the record before anything is
// written. Node's own TLS, not gRPC: nothing is sent but the handshake. A plaintext run refuses a
// record that names a certificate.
// Not the record format (core/protocol/rendezvous.ts) nor the gRPC credentials (tls.ts).
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { connect } from 'node:tls';
import type { RendezvousPlacement, RunPlan } from './config.js';
import { DetsimError } from '../core/formats/errors.js';
import type { Id } from '../core/formats/scalars.js';
import { parseAddress, rendezvousFileName } from '../core/protocol/index.js';
import type { ExistingWorker } from './launcher.js';
import { readCoordinatorTls } from './tls.js';

/** What the probe presents and trusts: PEM bytes of the run's CA and the coordinator's pair. */
export interface ProbeIdentity {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

/**
 * The fingerprint of the certificate the worker at `address` (host:port) presents, after the
 * chain is verified against `identity.ca`; rejects (with a message naming no bytes) when no TLS
 * handshake completes within `timeoutMs`. The host name is not checked here: the fingerprint is.
 */
export function presentedFingerprint(address: string, identity: ProbeIdentity, timeoutMs: number): Promise<string> {
  const target = parseAddress(address, 'address');
  if (target.kind !== 'tcp') return Promise.reject(new Error('TLS workers are reached over TCP'));
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: target.host.replace(/^\[(.*)\]$/, '$1'),
      port: target.port,
      ca: identity.ca,
      cert: identity.cert,
      key: identity.key,
      ALPNProtocols: ['h2'],
      checkServerIdentity: () => undefined,
    });
    const timer = setTimeout(() => fail(new Error(`no TLS handshake within ${timeoutMs} ms`)), timeoutMs);
    const fail = (e: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(e);
    };
    socket.once('error', (e) =>
      fail(new Error(`TLS handshake failed (${(e as NodeJS.ErrnoException).code ?? 'error'})`)),
    );
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      const der = socket.getPeerCertificate().raw;
      socket.end();
      resolve(createHash('sha256').update(der).digest('hex'));
    });
  });
}

/**
 * The certificate check of every record, in worker-id order, before anything is written: on a TLS
 * run (plan.tls) each record must name a fingerprint and the worker at its address must present
 * exactly that certificate (signed by the run's CA); on a plaintext run no record may name one (its
 * worker would refuse a plaintext connection). A refusal names the record and the field.
 */
export async function checkRendezvousCertificates(
  plan: RunPlan,
  placement: RendezvousPlacement,
  found: ReadonlyMap<Id, ExistingWorker>,
): Promise<void> {
  const identity = plan.tls ? readCoordinatorTls(plan.tls.dir) : undefined;
  for (const [workerId, worker] of found) {
    const source = join(placement.dir, rendezvousFileName(workerId));
    const refuse = (why: string): never => {
      throw new DetsimError(
        'ident_rendezvous_mismatch',
        `${source}: certificateFingerprint: ${why}`,
        'certificateFingerprint',
      );
    };
    const expected = worker.certificateFingerprint;
    if (!identity) {
      if (expected !== null)
        refuse('the worker serves TLS; give the run its TLS directory (workers.tls.dir or --tls-dir)');
      continue;
    }
    if (expected === null) refuse('the worker serves no TLS, and this run reaches its workers only over TLS');
    let presented: string;
    try {
      presented = await presentedFingerprint(worker.address, identity, plan.deadlines.startupMs);
    } catch (e) {
      return refuse(`no TLS handshake with the worker at its recorded address: ${(e as Error).message}`);
    }
    if (presented !== expected)
      refuse('the worker at its recorded address presents another certificate than the record names');
  }
}
