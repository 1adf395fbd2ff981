// Worker placement by rendezvous (`workers.placement: rendezvous`): before anything is written,
// wait until every worker of the plan (but an inline environment, hosted in the coordinator's thread:
// inline-worker.ts) has announced itself in the rendezvous directory, check each
// record (form; worker id, role, session and contract against the plan), and hand the launcher
// where to connect. Records are read in worker-id order; fs.watch wakes the wait early, a poll
// covers filesystems that send no events (NFS). A timeout names every missing worker.
// Not the record format (core/protocol/rendezvous.ts) nor the connection (launcher.ts).
import { closeSync, constants, fstatSync, openSync, readSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import type { RendezvousPlacement, RunPlan } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import { requireExistingDirectory } from '../../core/formats/existing-dir.js';
import type { Id } from '../../core/formats/scalars.js';
import {
  CONTRACT_DIGEST,
  readRendezvousRecord,
  rendezvousFileName,
  type RendezvousRecord,
} from '../../core/protocol/index.js';
import type { ExistingWorker } from './launcher.js';
import { runsInline } from './inline-worker.js';
import { RunFailure } from '../session/run-failure.js';

/** How often the directory is read when no watch event comes. */
export const RENDEZVOUS_POLL_MS = 250;

/**
 * Wait for the record of every worker of `plan` in its rendezvous directory; return where each
 * worker is, by worker id. Refusals (exit 2, nothing written): the directory is missing, a record
 * is malformed or names another worker, role, session or contract, or the timeout passes first.
 */
export async function awaitRendezvous(
  plan: RunPlan,
  placement: RendezvousPlacement,
  signal?: AbortSignal,
  onWaiting?: (line: string) => void,
): Promise<Map<Id, ExistingWorker>> {
  requireExistingDirectory(placement.dir, `workers.rendezvous.dir: ${placement.dir}`, 'workers.rendezvous.dir');
  const needed = plan.workers
    .filter((w) => !runsInline(plan, w))
    .map((w) => w.workerId)
    .sort();
  const found = new Map<Id, ExistingWorker>();
  const deadline = performance.now() + placement.timeoutMs;
  const wake = new Wake(placement.dir);
  try {
    for (;;) {
      for (const workerId of needed) {
        if (found.has(workerId)) continue;
        const record = readRecordOf(placement.dir, workerId);
        if (record) found.set(workerId, acceptRecord(plan, workerId, record, placement.dir));
      }
      if (found.size === needed.length) return new Map(needed.map((id) => [id, found.get(id)!]));
      const missing = needed.filter((id) => !found.has(id));
      if (signal?.aborted)
        throw new RunFailure('aborted', `while waiting for ${missing.join(', ')} in ${placement.dir}`, {
          step: null,
          phase: 'startup',
        });
      if (onWaiting) onWaiting(waitingLine(placement, missing, needed.length));
      onWaiting = undefined; // said once
      const left = deadline - performance.now();
      if (left <= 0) throw timeout(placement, missing);
      await wake.next(Math.min(left, RENDEZVOUS_POLL_MS), signal);
    }
  } finally {
    wake.close();
  }
}

/** A record is a few hundred bytes; anything larger is refused before it is read. */
export const MAX_RECORD_BYTES = 64 * 1024;

/** One worker's record, or undefined while there is none (a record appears whole: renamed into place). */
function readRecordOf(dir: string, workerId: Id): RendezvousRecord | undefined {
  const source = join(dir, rendezvousFileName(workerId));
  const bytes = readRecordBytes(source);
  return bytes === undefined ? undefined : readRendezvousRecord(bytes, source);
}

/**
 * The bytes of a record file, or undefined when there is none. Opened non-blocking (a FIFO cannot
 * stall the coordinator), refused unless fstat says it is a regular file of at most MAX_RECORD_BYTES
 * (a symlink to a device is not), and never read past that limit (a file that grows meanwhile).
 */
function readRecordBytes(source: string): Buffer | undefined {
  const refuse = (why: string): never => {
    throw new DetsimError('struct_invalid_field', `${source}: ${why}`, 'workers.rendezvous.dir');
  };
  let fd: number;
  try {
    fd = openSync(source, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    return refuse(`cannot read this rendezvous record (${code ?? 'error'})`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) refuse('a rendezvous record must be a regular file, and this is not');
    if (stat.size > MAX_RECORD_BYTES) refuse(`a rendezvous record is at most ${MAX_RECORD_BYTES} bytes`);
    const buf = Buffer.alloc(MAX_RECORD_BYTES + 1);
    const n = readSync(fd, buf, 0, buf.length, 0);
    if (n > MAX_RECORD_BYTES) refuse(`a rendezvous record is at most ${MAX_RECORD_BYTES} bytes`);
    return buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/** Check a record against the worker the plan needs in its place; a mismatch names the field. */
function acceptRecord(plan: RunPlan, workerId: Id, record: RendezvousRecord, dir: string): ExistingWorker {
  const worker = plan.workers.find((w) => w.workerId === workerId)!;
  const source = join(dir, rendezvousFileName(workerId));
  const mismatch = (field: string, why: string): never => {
    throw new DetsimError('ident_rendezvous_mismatch', `${source}: ${field}: ${why}`, field);
  };
  if (record.workerId !== workerId) mismatch('workerId', `the record names another worker, not ${workerId}`);
  if (record.role !== worker.role)
    mismatch('role', `the record says ${record.role}; the plan needs ${worker.role} for ${workerId}`);
  if (record.session !== null && record.session !== plan.sessionId)
    mismatch('session', `the worker is bound to another session, not ${plan.sessionId}`);
  if (record.contractDigest !== CONTRACT_DIGEST)
    mismatch('contractDigest', 'the worker speaks another protocol contract than this coordinator');
  return { address: record.address, certificateFingerprint: record.certificateFingerprint };
}

/** What a run waiting for hand-started workers says once, so a silent terminal is not a hang. */
function waitingLine(placement: RendezvousPlacement, missing: Id[], of: number): string {
  return (
    `waiting up to ${placement.timeoutMs / 1000} s for ${missing.length} of ${of} workers to announce themselves` +
    ` in ${placement.dir}: ${missing.join(', ')} (start each with: detsim worker … --rendezvous ${placement.dir})`
  );
}

function timeout(placement: RendezvousPlacement, missing: Id[]): DetsimError {
  const seconds = placement.timeoutMs / 1000;
  return new DetsimError(
    'ident_rendezvous_timeout',
    `workers.rendezvous: no record from ${missing.join(', ')} in ${placement.dir} within ${seconds} s` +
      ` (start each with: detsim worker … --rendezvous ${placement.dir})`,
    'workers.rendezvous.timeoutSeconds',
  );
}

/** Wakes the wait when the directory changes (fs.watch), else after the poll interval. */
class Wake {
  private watcher: FSWatcher | undefined;
  private pending: (() => void) | undefined;

  constructor(dir: string) {
    try {
      this.watcher = watch(dir, () => this.pending?.());
      this.watcher.on('error', () => this.close());
    } catch {
      this.watcher = undefined; // no events here (e.g. some network filesystems): polling alone
    }
  }

  next(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.pending = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      this.pending = done;
    });
  }

  close(): void {
    this.watcher?.close();
    this.watcher = undefined;
  }
}
