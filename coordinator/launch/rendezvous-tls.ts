// The check of each rendezvous record's worker before anything is written: the worker must answer
// at the address its record names (a record whose worker is gone, e.g. killed with -9, is stale:
// refused as unreachable), and on a TLS run present exactly the certificate the record names
// (lowercase hex SHA-256 of the DER), signed by the run's CA; a plaintext run refuses a record that
// names a certificate. One probe (worker-probe.ts) per record.
// Not the record format (core/protocol/rendezvous.ts) nor the gRPC credentials (tls.ts).
import { join } from 'node:path';
import type { RendezvousPlacement, RunPlan } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Id } from '../../core/formats/scalars.js';
import { rendezvousFileName } from '../../core/protocol/index.js';
import { derFingerprint } from '../../core/protocol/tls.js';
import type { ExistingWorker } from './launcher.js';
import { readCoordinatorTls } from './tls.js';
import { probeReason, probeWorker } from './worker-probe.js';

/**
 * The check of every record, in worker-id order, before anything is written: on a TLS run
 * (plan.tls) each record must name a fingerprint, on a plaintext run none (its worker would refuse
 * a plaintext connection); then the worker must answer at its recorded address (else it is
 * unreachable: a stale record) and, on a TLS run, present exactly that certificate, signed by the
 * run's CA and naming the host (with `pinned`, not the host: the caller connects pinned to the
 * record's fingerprint, e.g. Slurm steps on nodes whose names no certificate could list in
 * advance). A refusal names the record and the field.
 */
export async function checkRendezvousCertificates(
  plan: RunPlan,
  placement: RendezvousPlacement,
  found: ReadonlyMap<Id, ExistingWorker>,
  pinned = false,
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
    if (!identity && expected !== null)
      refuse('the worker serves TLS; give the run its TLS directory (workers.tls.dir or --tls-dir)');
    if (identity && expected === null)
      refuse('the worker serves no TLS, and this run reaches its workers only over TLS');
    const probe = await probeWorker(worker.address, identity, plan.deadlines.startupMs, !pinned);
    if (!probe.ok)
      throw new DetsimError(
        probeReason(probe.kind),
        probe.kind === 'unreachable'
          ? `${source}: address: worker ${workerId} is unreachable at ${worker.address} (${probe.message}); ` +
              'a stale record if its worker is gone (remove the record and start the worker again)'
          : `${source}: address: worker ${workerId} at ${worker.address}: ${probe.message}`,
        'address',
      );
    if (probe.certificate && derFingerprint(probe.certificate.raw) !== expected)
      refuse('the worker at its recorded address presents another certificate than the record names');
  }
}
