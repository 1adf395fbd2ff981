// Rendezvous records: the one file a worker started by hand (`detsim worker --rendezvous DIR`) writes
// so that a coordinator, possibly on another host sharing DIR, can find it: worker id, role, the
// address it is reachable at, session, contract digest and TLS certificate fingerprint, as canonical
// JSON written atomically (temp + fsync + rename + directory fsync). The TypeScript and the Python
// worker write the same bytes for the same facts. Physical: a record never enters a ReproHash.
// Not the coordinator's waiting and checking (coordinator/launch/rendezvous.ts).
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalize, parseStrict } from '../formats/canonical-json.js';
import { DetsimError } from '../formats/errors.js';
import { isId, type Id } from '../formats/scalars.js';
import type { Role } from './bodies.js';
import { parseAddress } from './contract.js';

export const RENDEZVOUS_FORMAT = 'detsim-rendezvous-v1' as const;

/** One worker's record in a rendezvous directory (`<workerId>.json`). */
export interface RendezvousRecord {
  format: typeof RENDEZVOUS_FORMAT;
  workerId: Id;
  role: Role;
  /** Where the coordinator connects: `host:port` (or `unix:/abs/path` on one host). */
  address: string;
  /** The session the worker was bound to with `--session`, else null. */
  session: Id | null;
  /** SHA-256 of the worker's proto file: a stale worker is refused before any connection. */
  contractDigest: string;
  /** Lowercase hex SHA-256 of the worker's DER server certificate when it serves TLS, else null. */
  certificateFingerprint: string | null;
}

const FIELDS = [
  'format',
  'workerId',
  'role',
  'address',
  'session',
  'contractDigest',
  'certificateFingerprint',
] as const;
const HEX64 = /^[0-9a-f]{64}$/;

/** The record's file name inside the rendezvous directory. */
export function rendezvousFileName(workerId: Id): string {
  return `${workerId}.json`;
}

/** The record's bytes: RFC 8785 canonical JSON and one newline. */
export function rendezvousRecordBytes(record: RendezvousRecord): Buffer {
  return Buffer.from(`${canonicalize(record)}\n`, 'utf8');
}

/**
 * Write `record` into `dir` atomically: a reader sees no file or the whole record, never half.
 * Returns the record's path. A temporary is a dot file, which no reader looks at.
 */
export function writeRendezvousRecord(dir: string, record: RendezvousRecord): string {
  const path = join(dir, rendezvousFileName(record.workerId));
  const tmp = join(dir, `.${rendezvousFileName(record.workerId)}.tmp-${process.pid}`);
  const bytes = rendezvousRecordBytes(record);
  try {
    const fd = openSync(tmp, 'w', 0o644);
    try {
      let off = 0;
      while (off < bytes.byteLength) off += writeSync(fd, bytes, off, bytes.byteLength - off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  const dirFd = openSync(dir, 'r');
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
  return path;
}

/**
 * Remove this worker's record on its way out, but only while it is still the one it wrote (a
 * newer worker of the same id may have replaced it): a record never outlives its worker knowingly.
 */
export function removeRendezvousRecord(path: string, written: Buffer): void {
  try {
    if (readFileSync(path).equals(written)) rmSync(path, { force: true });
  } catch {
    // already gone or unreadable: nothing of ours to remove
  }
}

function isAddress(text: string): boolean {
  try {
    parseAddress(text, 'address');
    return true;
  } catch {
    return false;
  }
}

/**
 * Parse and check one record's bytes; a refusal names `<source>: <field>` and never echoes the
 * bytes. Checks form only: whether the record is the worker the plan needs is the coordinator's.
 */
export function readRendezvousRecord(bytes: Uint8Array, source: string): RendezvousRecord {
  let value: unknown;
  try {
    value = parseStrict(bytes);
  } catch (e) {
    const reason = e instanceof DetsimError ? e.reason : 'struct_invalid_json';
    throw new DetsimError(reason, `${source}: not a rendezvous record (not strict JSON)`, source);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new DetsimError('struct_invalid_field', `${source}: not a rendezvous record (not an object)`, source);
  const obj = value as Record<string, unknown>;
  const field = (name: string): string => `${source}: ${name}`;
  // An unknown field is refused without echoing its name: a record's bytes are never repeated (docs/security.md).
  if (Object.keys(obj).some((k) => !(FIELDS as readonly string[]).includes(k)))
    throw new DetsimError(
      'struct_unknown_field',
      `${source}: not a rendezvous record (a field this format does not define; fields: ${FIELDS.join(', ')})`,
      source,
    );
  for (const name of FIELDS)
    if (!(name in obj))
      throw new DetsimError('struct_missing_field', `${field(name)}: required field is missing`, name);
  const refuse = (name: string, why: string): never => {
    throw new DetsimError('struct_invalid_field', `${field(name)}: ${why}`, name);
  };
  if (obj.format !== RENDEZVOUS_FORMAT) refuse('format', `is not ${RENDEZVOUS_FORMAT}`);
  if (!isId(obj.workerId)) refuse('workerId', 'is not an Id');
  if (obj.role !== 'agent' && obj.role !== 'environment') refuse('role', 'must be agent or environment');
  if (typeof obj.address !== 'string' || !isAddress(obj.address))
    refuse('address', 'is not host:port or unix:/abs/path');
  if (obj.session !== null && !isId(obj.session)) refuse('session', 'is neither null nor an Id');
  if (typeof obj.contractDigest !== 'string' || !HEX64.test(obj.contractDigest))
    refuse('contractDigest', 'is not 64 lowercase hex characters');
  const fp = obj.certificateFingerprint;
  if (fp !== null && (typeof fp !== 'string' || !HEX64.test(fp)))
    refuse('certificateFingerprint', 'is neither null nor 64 lowercase hex characters');
  return obj as unknown as RendezvousRecord;
}

/** A wildcard listen host (every interface): no address a peer could dial, so a record needs --advertise. */
export function isWildcardHost(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]';
}

/**
 * Check `--advertise HOST:PORT` (only with --rendezvous; required when listening on a wildcard
 * host). Port 0 stands for the port the worker binds. Refusals name the flag.
 */
export function checkAdvertise(listen: string, rendezvous: string | undefined, advertise: string | undefined): void {
  if (advertise !== undefined) {
    if (rendezvous === undefined)
      throw new DetsimError('struct_invalid_field', '--advertise is only used with --rendezvous DIR', '--advertise');
    if (parseAddress(advertise, '--advertise').kind !== 'tcp')
      throw new DetsimError('struct_invalid_field', '--advertise must be HOST:PORT', '--advertise');
    return;
  }
  const address = parseAddress(listen, '--listen');
  if (rendezvous !== undefined && address.kind === 'tcp' && isWildcardHost(address.host))
    throw new DetsimError(
      'struct_missing_field',
      `--advertise HOST:PORT is required with --rendezvous when listening on ${address.host} (no peer can dial it)`,
      '--advertise',
    );
}

/** The address a record announces: `--advertise` (its port 0 = the bound port), else the bound address. */
export function advertisedAddress(bound: string, advertise: string | undefined): string {
  if (advertise === undefined) return bound;
  const wanted = parseAddress(advertise, '--advertise');
  const actual = parseAddress(bound, 'listen');
  if (wanted.kind !== 'tcp' || wanted.port !== 0 || actual.kind !== 'tcp') return advertise;
  return `${wanted.host}:${actual.port}`;
}
