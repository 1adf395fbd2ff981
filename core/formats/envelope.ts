// The FLYSESS1 checkpoint envelope (docs/spec/checkpoint-envelope.md): a byte-exact writer and a
// reader that applies the spec's seven checks in order and names the one that failed.
// Not the store: no files, no fsync, no rename here (the store writes the parts this returns).
import { createHash, webcrypto, type Hash } from 'node:crypto';
import { canonicalBytes, canonicalize, parseCanonical, type JsonValue } from './canonical-json.js';
import { DetsimError } from './errors.js';
import type { ReasonCode } from './reasons.js';
import {
  isId,
  RationalNs,
  readDigest,
  readId,
  readObject,
  readScope,
  type Digest,
  type Id,
  type RationalNsJson,
  type Scope,
  type U64,
} from './scalars.js';

/** The 8-byte magic that opens a FLYSESS1 checkpoint envelope. */
export const ENVELOPE_MAGIC = 'FLYSESS1';
export const ENVELOPE_FOOTER_MAGIC = 'FLYSESSF';
export const LEGACY_MAGIC = 'FLYSIM01';
export const ENVELOPE_VERSION = 1;
export const HEADER_BYTES = 32;
export const TABLE_ENTRY_BYTES = 112;
export const FOOTER_BYTES = 48;
export const MIN_ENVELOPE_BYTES = HEADER_BYTES + FOOTER_BYTES;
export const MAX_PAYLOADS = 64;
export const MAX_AGENTS = 60;
const NAME_BYTES = 64;
const U32_MAX = 0xffffffff;

/** The top-level manifest fields check 7 requires (and the only ones it allows). */
export const REQUIRED_MANIFEST_FIELDS = [
  'envelopeVersion',
  'checkpointId',
  'sourceScope',
  'episodeId',
  'worldTime',
  'schedulerId',
  'compositionDigest',
  'portMap',
  'compatibility',
  'agents',
  'coordinator',
  'environment',
  'helperState',
  'payloads',
] as const;

/** A JSON object as the envelope manifest holds it (canonical JSON values). */
export type JsonObject = { [key: string]: JsonValue };

/** One payload as the manifest lists it (mirrors the table). */
export interface EnvelopePayloadRef {
  name: Id;
  byteLength: U64;
  digest: Digest;
}

/** The checkpoint manifest. Nested shapes beyond those check 7 reads are left to their owners. */
export interface EnvelopeManifest {
  envelopeVersion: 1;
  checkpointId: Id;
  sourceScope: Scope;
  episodeId: Id;
  worldTime: RationalNsJson;
  schedulerId: Id;
  compositionDigest: Digest;
  portMap: JsonValue[];
  compatibility: JsonObject;
  agents: JsonObject[];
  coordinator: JsonObject;
  environment: JsonObject;
  helperState: JsonValue[];
  payloads: EnvelopePayloadRef[];
}

/** One payload to write: its name (an Id) and its bytes. */
export interface EnvelopePayloadInput {
  name: string;
  bytes: Uint8Array;
  /**
   * The SHA-256 its producer reported (e.g. a worker's capture reply). The layout uses it as given;
   * sealing hashes the bytes and refuses a mismatch. Absent: the payload is hashed during layout.
   */
  digest?: Digest;
}

/** One payload table entry as laid out: name, offset, length and digest. */
export interface EnvelopeEntry {
  name: Id;
  offset: number;
  byteLength: number;
  digest: Digest;
}

/** Where each part of an envelope lies (header, manifest, table, payloads, footer), in bytes. */
export interface EnvelopeLayout {
  headerBytes: number;
  manifestOffset: number;
  manifestBytes: number;
  tableOffset: number;
  tableEntryBytes: number;
  entries: EnvelopeEntry[];
  footerOffset: number;
  footerBytes: number;
  totalBytes: number;
}

/** An encoded envelope as buffers to write in order (payload bytes not copied), with its layout. */
export interface EncodedEnvelopeParts {
  /** Buffers to write in this order; payload parts are the caller's bytes (not copied). */
  parts: Uint8Array[];
  byteLength: number;
  /** SHA-256 (hex) of the whole file, footer included: what `sha256sum` prints. */
  envelopeDigest: Digest;
  manifest: EnvelopeManifest;
  layout: EnvelopeLayout;
}

/** One payload of a decoded envelope: its name, a view of its bytes and its digest. */
export interface DecodedPayload {
  name: Id;
  /** A view into the input bytes, not a copy. */
  bytes: Uint8Array;
  digest: Digest;
}

/** A verified FLYSESS1 envelope known by its manifest, layout and digest (payload bytes stay where they are). */
export interface VerifiedEnvelope {
  manifest: EnvelopeManifest;
  layout: EnvelopeLayout;
  /** SHA-256 (hex) of the whole file, footer included. */
  envelopeDigest: Digest;
}

/** A verified FLYSESS1 envelope in memory: also the payloads in table order. */
export interface DecodedEnvelope extends VerifiedEnvelope {
  payloads: DecodedPayload[];
}

/**
 * Random access to an envelope's bytes for the seven checks. The checks ask it for small ranges
 * only (header, footer, manifest, table, padding); the SHA-256 of the prefix and of every payload
 * come precomputed ({@link EnvelopeDigests}) when the source is not in memory (a file read in chunks).
 */
export interface EnvelopeSource {
  readonly length: number;
  /** The bytes [start, end); the caller keeps within [0, length). */
  bytes(start: number, end: number): Buffer;
}

export function align8(n: number): number {
  return Math.ceil(n / 8) * 8;
}

// ---------------------------------------------------------------------------------------------
// Shared between writer and reader

/** Refusal for one of the seven checks: the message starts with `check N (what): `. */
function refuse(check: number, what: string, reason: ReasonCode, detail: string, field?: string): never {
  throw new DetsimError(reason, `check ${check} (${what}): ${detail}`, field);
}

/** Run a scalar reader inside a check, re-labelling its refusal with the check. */
function within<T>(check: number, what: string, reason: ReasonCode, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof DetsimError) refuse(check, what, reason, `${e.message} [${e.reason}]`, e.field);
    throw e;
  }
}

function entryLabel(i: number, name?: string): string {
  return name === undefined ? `entry ${i}` : `entry ${i} ${JSON.stringify(name)}`;
}

/** Check 7: the required fields, their scalar shapes and `payloads` equal to the table. */
function checkManifestFields(value: JsonValue, entries: readonly EnvelopePayloadRef[]): EnvelopeManifest {
  const what = 'manifest fields';
  const r: ReasonCode = 'struct_envelope_manifest_fields';
  const m = within(7, what, r, () => readObject(value, 'manifest')) as JsonObject;
  for (const key of REQUIRED_MANIFEST_FIELDS) {
    if (!Object.hasOwn(m, key)) refuse(7, what, r, `manifest.${key} is missing`, `manifest.${key}`);
  }
  for (const key of Object.keys(m).sort()) {
    if (!(REQUIRED_MANIFEST_FIELDS as readonly string[]).includes(key)) {
      refuse(7, what, r, `manifest.${key} is not a field of envelope version 1`, `manifest.${key}`);
    }
  }
  if (m.envelopeVersion !== ENVELOPE_VERSION)
    refuse(
      7,
      what,
      r,
      `manifest.envelopeVersion is ${canonicalize(m.envelopeVersion)}, not 1`,
      'manifest.envelopeVersion',
    );
  within(7, what, r, () => {
    readId(m.checkpointId, 'manifest.checkpointId');
    readScope(m.sourceScope, 'manifest.sourceScope');
    readId(m.episodeId, 'manifest.episodeId');
    RationalNs.read(m.worldTime, 'manifest.worldTime');
    readId(m.schedulerId, 'manifest.schedulerId');
    readDigest(m.compositionDigest, 'manifest.compositionDigest');
    for (const key of ['compatibility', 'coordinator', 'environment'] as const) readObject(m[key], `manifest.${key}`);
  });
  for (const key of ['portMap', 'agents', 'helperState', 'payloads'] as const) {
    if (!Array.isArray(m[key])) refuse(7, what, r, `manifest.${key} is not an array`, `manifest.${key}`);
  }
  const agents = m.agents as JsonValue[];
  if (agents.length > MAX_AGENTS)
    refuse(
      7,
      what,
      'size_agents_over_60',
      `manifest.agents has ${agents.length} agents, more than ${MAX_AGENTS}`,
      'manifest.agents',
    );
  agents.forEach((a, i) => within(7, what, r, () => readObject(a, `manifest.agents[${i}]`)));
  checkPayloadList(m.payloads as JsonValue[], entries);
  return m as unknown as EnvelopeManifest;
}

function checkPayloadList(listed: JsonValue[], entries: readonly EnvelopePayloadRef[]): void {
  const what = 'manifest payloads';
  const r: ReasonCode = 'audit_manifest_payloads_mismatch';
  if (listed.length !== entries.length) {
    refuse(
      7,
      what,
      r,
      `manifest.payloads lists ${listed.length} payloads, the table has ${entries.length}`,
      'manifest.payloads',
    );
  }
  entries.forEach((entry, i) => {
    const got = listed[i];
    if (canonicalize(got) !== canonicalize(entry)) {
      refuse(
        7,
        what,
        r,
        `manifest.payloads[${i}] is ${canonicalize(got)}, the table ${entryLabel(i, entry.name)} is ${canonicalize(entry)}`,
        `manifest.payloads[${i}]`,
      );
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Writer

/**
 * A payload known by its size and digest only: laid out like any other, its bytes are written into
 * the file by their producer (store-files-v1) and checked against `digest` when the file is sealed.
 */
export interface SizedPayloadInput {
  name: string;
  byteLength: number;
  digest: Digest;
}

/** What a layout takes: payloads in memory, or known by size and digest. */
export type LayoutPayloadInput = EnvelopePayloadInput | SizedPayloadInput;

function isSized(p: LayoutPayloadInput): p is SizedPayloadInput {
  return !('bytes' in p);
}

function sizeOf(p: LayoutPayloadInput): number {
  return isSized(p) ? p.byteLength : p.bytes.byteLength;
}

function payloadRefs(payloads: readonly LayoutPayloadInput[]): EnvelopePayloadRef[] {
  if (payloads.length > MAX_PAYLOADS) {
    throw new DetsimError(
      'size_payload_count_over_64',
      `${payloads.length} payloads, at most ${MAX_PAYLOADS} fit one envelope`,
      'payloads',
    );
  }
  const seen = new Set<string>();
  return payloads.map((p, i) => {
    const name = readId(p.name, `payloads[${i}].name`);
    if (seen.has(name))
      throw new DetsimError(
        'struct_envelope_entry',
        `payloads[${i}].name ${JSON.stringify(name)} repeats an earlier payload name`,
        `payloads[${i}].name`,
      );
    seen.add(name);
    if (isSized(p)) {
      if (!Number.isSafeInteger(p.byteLength) || p.byteLength < 0)
        throw new DetsimError(
          'struct_invalid_field',
          `payloads[${i}].byteLength is not a byte count`,
          `payloads[${i}].byteLength`,
        );
      return { name, byteLength: String(p.byteLength), digest: readDigest(p.digest, `payloads[${i}].digest`) };
    }
    if (!(p.bytes instanceof Uint8Array))
      throw new DetsimError('struct_invalid_field', `payloads[${i}].bytes is not a Uint8Array`, `payloads[${i}].bytes`);
    const digest =
      p.digest === undefined
        ? createHash('sha256').update(p.bytes).digest('hex')
        : readDigest(p.digest, `payloads[${i}].digest`);
    return { name, byteLength: String(p.bytes.byteLength), digest };
  });
}

/** The manifest with `payloads` computed; a caller-given `payloads` must equal the computed one. */
function completeManifest(manifest: object, refs: EnvelopePayloadRef[]): JsonObject {
  const given = within(7, 'manifest fields', 'struct_envelope_manifest_fields', () => readObject(manifest, 'manifest'));
  if (Object.hasOwn(given, 'payloads') && canonicalize(given.payloads) !== canonicalize(refs)) {
    throw new DetsimError(
      'audit_manifest_payloads_mismatch',
      `manifest.payloads ${canonicalize(given.payloads)} differs from the payloads given ${canonicalize(refs)}`,
      'manifest.payloads',
    );
  }
  return { ...(given as JsonObject), payloads: refs as unknown as JsonValue };
}

function writeU64(buf: Buffer, offset: number, value: number): void {
  buf.writeBigUInt64LE(BigInt(value), offset);
}

/**
 * An envelope laid out but not yet sealed: header, manifest, table and payload views in file order,
 * everything except the footer (whose prefix digest needs a pass over every byte).
 */
export interface EnvelopeDraft {
  readonly manifest: EnvelopeManifest;
  readonly layout: EnvelopeLayout;
  readonly byteLength: number;
  /** Head, zero padding and payload views in file order; the footer is appended by sealing. */
  readonly body: readonly Uint8Array[];
  /** Payloads laid out with a producer-reported digest: sealing checks each against its bytes. */
  readonly declared: readonly { readonly part: number; readonly name: Id; readonly digest: Digest }[];
}

/** The laid-out head of an envelope: header, manifest, zero padding and table in one buffer. */
export interface EnvelopeHead {
  readonly manifest: EnvelopeManifest;
  readonly layout: EnvelopeLayout;
  /** Bytes [0, end of table): header, manifest, padding, table. */
  readonly head: Buffer;
}

/**
 * Lay out an envelope from payload sizes and digests: the manifest, header and table bytes and
 * every payload's offset. No payload byte is read. Refuses what the reader would refuse.
 */
export function layoutEnvelopeHead(manifest: object, payloads: readonly LayoutPayloadInput[]): EnvelopeHead {
  const refs = payloadRefs(payloads);
  const full = completeManifest(manifest, refs);
  // The writer refuses what the reader would refuse.
  const checked = checkManifestFields(full, refs);
  const manifestBytes = canonicalBytes(full);
  // The writer accepts any finite double, the reader refuses integer literals beyond 2^53-1: check
  // here so that nothing is written that check 3 would refuse.
  within(3, 'manifest', 'struct_envelope_manifest', () => parseCanonical(manifestBytes));
  if (manifestBytes.length > U32_MAX)
    throw new DetsimError(
      'size_message_too_large',
      `manifest is ${manifestBytes.length} bytes, more than a u32 can hold`,
      'manifest',
    );

  const tableOffset = align8(HEADER_BYTES + manifestBytes.length);
  const tableEnd = tableOffset + TABLE_ENTRY_BYTES * payloads.length;
  const entries: EnvelopeEntry[] = [];
  let end = tableEnd;
  refs.forEach((ref, i) => {
    const offset = align8(end);
    const byteLength = sizeOf(payloads[i]!);
    entries.push({ name: ref.name, offset, byteLength, digest: ref.digest });
    end = offset + byteLength;
  });
  const footerOffset = end;
  const totalBytes = footerOffset + FOOTER_BYTES;

  // Header, manifest, zero padding and table in one small buffer.
  const head = Buffer.alloc(tableEnd);
  head.write(ENVELOPE_MAGIC, 0, 'ascii');
  head.writeUInt32LE(ENVELOPE_VERSION, 8);
  head.writeUInt32LE(HEADER_BYTES, 12);
  head.writeUInt32LE(manifestBytes.length, 16);
  head.writeUInt32LE(payloads.length, 20);
  head.writeUInt32LE(tableOffset, 24);
  manifestBytes.copy(head, HEADER_BYTES);
  entries.forEach((e, i) => {
    const at = tableOffset + i * TABLE_ENTRY_BYTES;
    head.write(e.name, at, 'ascii');
    writeU64(head, at + 64, e.offset);
    writeU64(head, at + 72, e.byteLength);
    Buffer.from(e.digest, 'hex').copy(head, at + 80);
  });
  const layout: EnvelopeLayout = {
    headerBytes: HEADER_BYTES,
    manifestOffset: HEADER_BYTES,
    manifestBytes: manifestBytes.length,
    tableOffset,
    tableEntryBytes: TABLE_ENTRY_BYTES,
    entries,
    footerOffset,
    footerBytes: FOOTER_BYTES,
    totalBytes,
  };
  return { manifest: checked, layout, head };
}

/** The 48-byte footer: fileBytes, the prefix digest (raw), the footer magic. */
export function envelopeFooter(fileBytes: number, prefixDigest: Buffer): Buffer {
  const footer = Buffer.alloc(FOOTER_BYTES);
  writeU64(footer, 0, fileBytes);
  prefixDigest.copy(footer, 8);
  footer.write(ENVELOPE_FOOTER_MAGIC, 40, 'ascii');
  return footer;
}

/**
 * Lay out an envelope without touching the bytes of payloads that come with a digest (cheap and
 * synchronous: the manifest, header and table). Refuses what the reader would refuse.
 */
export function layoutEnvelope(manifest: object, payloads: readonly EnvelopePayloadInput[]): EnvelopeDraft {
  const { manifest: checked, layout, head } = layoutEnvelopeHead(manifest, payloads);
  const body: Uint8Array[] = [head];
  const declared: { part: number; name: Id; digest: Digest }[] = [];
  let at = head.byteLength;
  layout.entries.forEach((e, i) => {
    if (e.offset > at) body.push(Buffer.alloc(e.offset - at));
    if (payloads[i]!.digest !== undefined) declared.push({ part: body.length, name: e.name, digest: e.digest });
    body.push(payloads[i]!.bytes);
    at = e.offset + e.byteLength;
  });
  return { manifest: checked, layout, byteLength: layout.totalBytes, body, declared };
}

/** Bytes hashed per step of an incremental seal (about half a millisecond of SHA-256). */
export const SEAL_SLICE_BYTES = 256 * 1024;

/**
 * The seal as steps: one prefix-hash pass over the body (plus a check pass over each declared
 * payload), a slice per step; returns the finished parts. Sync and async sealing share it.
 */
function* sealSteps(draft: EnvelopeDraft): Generator<void, EncodedEnvelopeParts> {
  const prefix = createHash('sha256');
  const declared = new Map(draft.declared.map((d) => [d.part, d]));
  for (let i = 0; i < draft.body.length; i++) {
    const part = draft.body[i]!;
    const check = declared.has(i) ? createHash('sha256') : null;
    for (let at = 0; at < part.byteLength; at += SEAL_SLICE_BYTES) {
      const slice = part.subarray(at, Math.min(part.byteLength, at + SEAL_SLICE_BYTES));
      prefix.update(slice);
      check?.update(slice);
      yield;
    }
    const d = declared.get(i);
    if (check && d) {
      const actual = check.digest('hex');
      if (actual !== d.digest)
        throw new DetsimError(
          'audit_payload_digest_mismatch',
          `payload ${JSON.stringify(d.name)}: its bytes hash to ${actual}, its producer reported ${d.digest}`,
          `payloads.${d.name}.digest`,
        );
    }
  }
  const footer = envelopeFooter(draft.byteLength, prefix.copy().digest());
  const envelopeDigest = prefix.update(footer).digest('hex');
  return {
    parts: [...draft.body, footer],
    byteLength: draft.byteLength,
    envelopeDigest,
    manifest: draft.manifest,
    layout: draft.layout,
  };
}

/** Seal a draft at once (small envelopes, the CLI, tests). */
export function sealEnvelope(draft: EnvelopeDraft): EncodedEnvelopeParts {
  const steps = sealSteps(draft);
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/**
 * Seal a draft a slice at a time, awaiting `pause` between slices (default: one event-loop turn),
 * so that a step loop sharing the thread never waits more than one slice for it.
 */
export async function sealEnvelopeAsync(
  draft: EnvelopeDraft,
  pause: () => Promise<void> = nextTurn,
): Promise<EncodedEnvelopeParts> {
  const steps = sealSteps(draft);
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    await pause();
  }
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Lay out and encode an envelope as a list of buffers to write in order (no big concatenation). */
export function encodeEnvelopeParts(manifest: object, payloads: readonly EnvelopePayloadInput[]): EncodedEnvelopeParts {
  return sealEnvelope(layoutEnvelope(manifest, payloads));
}

/** Encode an envelope into one buffer (small envelopes; the store writes the parts instead). */
export function encodeEnvelope(manifest: object, payloads: readonly EnvelopePayloadInput[]): Buffer {
  const { parts, byteLength } = encodeEnvelopeParts(manifest, payloads);
  return Buffer.concat(parts, byteLength);
}

// ---------------------------------------------------------------------------------------------
// Reader

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function isZero(buf: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (buf[i] !== 0) return false;
  return true;
}

function bufferSource(buf: Buffer): EnvelopeSource {
  return { length: buf.length, bytes: (start, end) => buf.subarray(start, end) };
}

/** Check 1: length, magic, version, headerBytes, reserved. */
function checkHeader(src: EnvelopeSource): { manifestBytes: number; payloadCount: number; tableOffset: number } {
  const buf = src.bytes(0, Math.min(src.length, HEADER_BYTES));
  if (buf.length >= 8 && buf.toString('latin1', 0, 8) === LEGACY_MAGIC) {
    refuse(
      1,
      'magic',
      'struct_envelope_legacy_format',
      `this is the legacy FLYSIM01 format, not a FLYSESS1 envelope (read it with the FLYSIM01 reader)`,
      'magic',
    );
  }
  if (src.length < MIN_ENVELOPE_BYTES)
    refuse(
      1,
      'length',
      'size_envelope_too_short',
      `${src.length} bytes, a FLYSESS1 envelope has at least ${MIN_ENVELOPE_BYTES}`,
      'length',
    );
  if (buf.toString('latin1', 0, 8) !== ENVELOPE_MAGIC) {
    refuse(
      1,
      'magic',
      'struct_envelope_magic',
      `magic is ${JSON.stringify(buf.toString('latin1', 0, 8))}, not "FLYSESS1"`,
      'magic',
    );
  }
  const version = buf.readUInt32LE(8);
  if (version !== ENVELOPE_VERSION)
    refuse(
      1,
      'version',
      'struct_envelope_magic',
      `envelopeVersion ${version} is not supported (only 1)`,
      'envelopeVersion',
    );
  const headerBytes = buf.readUInt32LE(12);
  if (headerBytes !== HEADER_BYTES)
    refuse(
      1,
      'header size',
      'struct_envelope_magic',
      `headerBytes is ${headerBytes}, not ${HEADER_BYTES}`,
      'headerBytes',
    );
  const reserved = buf.readUInt32LE(28);
  if (reserved !== 0)
    refuse(1, 'reserved', 'struct_envelope_magic', `reserved header field is ${reserved}, not 0`, 'reserved');
  return { manifestBytes: buf.readUInt32LE(16), payloadCount: buf.readUInt32LE(20), tableOffset: buf.readUInt32LE(24) };
}

/**
 * SHA-256 work done before the checks run (decodeEnvelopeAsync, the store's chunked file reader):
 * the prefix hash state, and digests of byte ranges keyed by {@link rangeKey}. The checks use them
 * only for exactly the bytes they would hash themselves, so results and refusals are those of
 * decodeEnvelope.
 */
export interface EnvelopeDigests {
  prefix?: Hash;
  ranges?: Map<string, Buffer>;
}
type Precomputed = EnvelopeDigests;

/** The key of a precomputed range digest. */
export function rangeKey(offset: number, length: number): string {
  return `${offset}:${length}`;
}

/** Check 2: footer magic, fileBytes, prefix digest. Returns the hash state after the prefix. */
function checkFooter(src: EnvelopeSource, pre: Precomputed): { footerOffset: number; prefixHash: Hash } {
  const footerOffset = src.length - FOOTER_BYTES;
  const footer = src.bytes(footerOffset, src.length);
  const magic = footer.toString('latin1', FOOTER_BYTES - 8);
  if (magic !== ENVELOPE_FOOTER_MAGIC) {
    refuse(
      2,
      'footer magic',
      'audit_envelope_length',
      `footer magic is ${JSON.stringify(magic)}, not "FLYSESSF" (truncated or not an envelope)`,
      'footer.magic',
    );
  }
  const fileBytes = footer.readBigUInt64LE(0);
  if (fileBytes !== BigInt(src.length)) {
    refuse(
      2,
      'file length',
      'audit_envelope_length',
      `footer says the file is ${fileBytes} bytes, it is ${src.length}`,
      'footer.fileBytes',
    );
  }
  const prefixHash = pre.prefix ?? createHash('sha256').update(src.bytes(0, footerOffset));
  const actual = prefixHash.copy().digest();
  const recorded = footer.subarray(8, 40);
  if (!actual.equals(recorded)) {
    refuse(
      2,
      'footer digest',
      'audit_envelope_digest',
      `SHA-256 of the first ${footerOffset} bytes is ${actual.toString('hex')}, the footer records ${recorded.toString('hex')}`,
      'footer.digest',
    );
  }
  return { footerOffset, prefixHash };
}

/** Check 3: manifest inside the payload area, strict JSON, already canonical, an object. */
function checkManifest(src: EnvelopeSource, manifestBytes: number, footerOffset: number): JsonValue {
  if (HEADER_BYTES + manifestBytes > footerOffset) {
    refuse(
      3,
      'manifest',
      'struct_envelope_manifest',
      `manifest of ${manifestBytes} bytes at offset ${HEADER_BYTES} runs past the payload area (ends at ${footerOffset})`,
      'manifestBytes',
    );
  }
  const value = within(3, 'manifest', 'struct_envelope_manifest', () =>
    parseCanonical(src.bytes(HEADER_BYTES, HEADER_BYTES + manifestBytes)),
  );
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    refuse(3, 'manifest', 'struct_envelope_manifest', 'manifest is not a JSON object', 'manifest');
  return value;
}

/** Check 4: table at its laid-out position (zero padding before it), inside the area, ≤ 64 entries. */
function checkTable(
  src: EnvelopeSource,
  manifestBytes: number,
  payloadCount: number,
  tableOffset: number,
  footerOffset: number,
): number {
  const expected = align8(HEADER_BYTES + manifestBytes);
  if (tableOffset !== expected)
    refuse(
      4,
      'payload table',
      'struct_envelope_table',
      `tableOffset is ${tableOffset}, the layout puts it at ${expected}`,
      'tableOffset',
    );
  const tableEnd = tableOffset + TABLE_ENTRY_BYTES * payloadCount;
  if (tableEnd > footerOffset) {
    refuse(
      4,
      'payload table',
      'struct_envelope_table',
      `${payloadCount} entries of ${TABLE_ENTRY_BYTES} bytes at ${tableOffset} run past the payload area (ends at ${footerOffset})`,
      'payloadCount',
    );
  }
  if (payloadCount > MAX_PAYLOADS)
    refuse(
      4,
      'payload table',
      'size_payload_count_over_64',
      `payloadCount is ${payloadCount}, at most ${MAX_PAYLOADS}`,
      'payloadCount',
    );
  const padding = src.bytes(HEADER_BYTES + manifestBytes, tableOffset);
  if (!isZero(padding, 0, padding.length))
    refuse(
      4,
      'payload table',
      'struct_envelope_table',
      'padding between the manifest and the table is not zero',
      'tableOffset',
    );
  return tableEnd;
}

/** Check 5, one entry: name, NUL padding, uniqueness, offset, extent, digest. */
function checkEntry(
  src: EnvelopeSource,
  i: number,
  at: number,
  prevEnd: number,
  footerOffset: number,
  seen: Set<string>,
  pre: Precomputed,
): EnvelopeEntry {
  const expectedOffset = align8(prevEnd);
  const what = 'payload entry';
  const row = src.bytes(at, at + TABLE_ENTRY_BYTES);
  const nameField = row.subarray(0, NAME_BYTES);
  const nul = nameField.indexOf(0);
  const nameLen = nul === -1 ? NAME_BYTES : nul;
  const name = nameField.toString('latin1', 0, nameLen);
  if (!isId(name))
    refuse(
      5,
      what,
      'struct_envelope_entry',
      `${entryLabel(i)}: name ${JSON.stringify(name)} is not an Id`,
      `table[${i}].name`,
    );
  const label = entryLabel(i, name);
  if (!isZero(nameField, nameLen, NAME_BYTES))
    refuse(
      5,
      what,
      'struct_envelope_entry',
      `${label}: bytes after the name's NUL are not all NUL`,
      `table[${i}].name`,
    );
  if (seen.has(name))
    refuse(5, what, 'struct_envelope_entry', `${label}: the name repeats an earlier entry`, `table[${i}].name`);
  seen.add(name);
  const offset = row.readBigUInt64LE(64);
  if (offset !== BigInt(expectedOffset))
    refuse(
      5,
      what,
      'struct_envelope_entry',
      `${label}: offset ${offset} is not the aligned end of the previous payload (${expectedOffset})`,
      `table[${i}].offset`,
    );
  const padding = src.bytes(prevEnd, expectedOffset);
  if (!isZero(padding, 0, padding.length))
    refuse(5, what, 'struct_envelope_entry', `${label}: padding before the payload is not zero`, `table[${i}].offset`);
  const length = row.readBigUInt64LE(72);
  if (offset + length > BigInt(footerOffset)) {
    refuse(
      5,
      what,
      'struct_envelope_entry',
      `${label}: ${length} bytes at ${offset} run past the payload area (ends at ${footerOffset})`,
      `table[${i}].byteLength`,
    );
  }
  const byteLength = Number(length);
  const recorded = row.subarray(80, TABLE_ENTRY_BYTES);
  const actual =
    pre.ranges?.get(rangeKey(expectedOffset, byteLength)) ??
    createHash('sha256')
      .update(src.bytes(expectedOffset, expectedOffset + byteLength))
      .digest();
  if (!actual.equals(recorded)) {
    refuse(
      5,
      what,
      'audit_payload_digest_mismatch',
      `${label}: payload SHA-256 is ${actual.toString('hex')}, the table records ${recorded.toString('hex')}`,
      `table[${i}].digest`,
    );
  }
  return { name, offset: expectedOffset, byteLength, digest: actual.toString('hex') };
}

/** Check 5 over all entries (with zero padding between payloads) and check 6 after the last. */
function checkEntries(
  src: EnvelopeSource,
  payloadCount: number,
  tableOffset: number,
  tableEnd: number,
  footerOffset: number,
  pre: Precomputed,
): EnvelopeEntry[] {
  const entries: EnvelopeEntry[] = [];
  const seen = new Set<string>();
  let end = tableEnd;
  for (let i = 0; i < payloadCount; i++) {
    const entry = checkEntry(src, i, tableOffset + i * TABLE_ENTRY_BYTES, end, footerOffset, seen, pre);
    entries.push(entry);
    end = entry.offset + entry.byteLength;
  }
  if (end !== footerOffset)
    refuse(
      6,
      'trailing padding',
      'struct_envelope_padding',
      `${footerOffset - end} bytes between the end of the last payload (${end}) and the footer (${footerOffset})`,
      'footer',
    );
  return entries;
}

/** Decode and verify a FLYSESS1 envelope; refuses with the first failing check, in spec order. */
export function decodeEnvelope(bytes: Uint8Array): DecodedEnvelope {
  return decodeWith(asBuffer(bytes), {});
}

/** Payloads at least this large are hashed on the thread pool by decodeEnvelopeAsync. */
const POOL_HASH_MIN_BYTES = 1024 * 1024;

/**
 * decodeEnvelope with the two SHA-256 passes side by side: large payloads are hashed on the
 * thread pool (WebCrypto) while this thread hashes the prefix. Same checks, order and refusals.
 */
export async function decodeEnvelopeAsync(bytes: Uint8Array): Promise<DecodedEnvelope> {
  const buf = asBuffer(bytes);
  const jobs = claimedRanges(bufferSource(buf))
    .filter((r) => r.length >= POOL_HASH_MIN_BYTES)
    .map((r) => ({
      key: rangeKey(r.offset, r.length),
      digest: webcrypto.subtle.digest('SHA-256', buf.subarray(r.offset, r.offset + r.length)),
    }));
  const pre: Precomputed = {};
  if (buf.length >= MIN_ENVELOPE_BYTES)
    pre.prefix = createHash('sha256').update(buf.subarray(0, buf.length - FOOTER_BYTES));
  const settled = await Promise.allSettled(jobs.map((j) => j.digest));
  pre.ranges = new Map();
  settled.forEach((r, i) => {
    if (r.status === 'fulfilled') pre.ranges!.set(jobs[i]!.key, Buffer.from(r.value));
  });
  return decodeWith(buf, pre);
}

/** One payload range as the table claims it, before any check has judged it. */
export interface ClaimedRange {
  name: string;
  offset: number;
  length: number;
  /** The digest the table records (hex). */
  digest: Digest;
}

/**
 * The byte ranges the table claims, read leniently (the checks judge them later; check 5 hashes
 * only ranges among these); ranges outside the source are skipped.
 */
export function claimedRanges(src: EnvelopeSource): ClaimedRange[] {
  if (src.length < HEADER_BYTES) return [];
  const header = src.bytes(0, HEADER_BYTES);
  const count = Math.min(header.readUInt32LE(20), MAX_PAYLOADS);
  const tableOffset = header.readUInt32LE(24);
  const out: ClaimedRange[] = [];
  for (let i = 0; i < count; i++) {
    const at = tableOffset + i * TABLE_ENTRY_BYTES;
    if (at + TABLE_ENTRY_BYTES > src.length) break;
    const row = src.bytes(at, at + TABLE_ENTRY_BYTES);
    const offset = row.readBigUInt64LE(64);
    const length = row.readBigUInt64LE(72);
    if (offset + length > BigInt(src.length)) continue;
    const nul = row.subarray(0, NAME_BYTES).indexOf(0);
    out.push({
      name: row.toString('latin1', 0, nul === -1 ? NAME_BYTES : nul),
      offset: Number(offset),
      length: Number(length),
      digest: row.toString('hex', 80, TABLE_ENTRY_BYTES),
    });
  }
  return out;
}

function decodeWith(buf: Buffer, pre: Precomputed): DecodedEnvelope {
  const verified = verifyEnvelope(bufferSource(buf), pre);
  return {
    ...verified,
    payloads: verified.layout.entries.map((e) => ({
      name: e.name,
      bytes: buf.subarray(e.offset, e.offset + e.byteLength),
      digest: e.digest,
    })),
  };
}

/**
 * The seven checks in spec order over any source; refuses with the first that fails. A source not
 * in memory must come with `pre` holding the prefix hash and the digest of every claimed range.
 */
export function verifyEnvelope(src: EnvelopeSource, pre: EnvelopeDigests = {}): VerifiedEnvelope {
  const header = checkHeader(src);
  const { footerOffset, prefixHash } = checkFooter(src, pre);
  const manifestValue = checkManifest(src, header.manifestBytes, footerOffset);
  const tableEnd = checkTable(src, header.manifestBytes, header.payloadCount, header.tableOffset, footerOffset);
  const entries = checkEntries(src, header.payloadCount, header.tableOffset, tableEnd, footerOffset, pre);
  const refs = entries.map((e) => ({ name: e.name, byteLength: String(e.byteLength), digest: e.digest }));
  const manifest = checkManifestFields(manifestValue, refs);
  const envelopeDigest = prefixHash.update(src.bytes(footerOffset, src.length)).digest('hex');
  return {
    manifest,
    layout: {
      headerBytes: HEADER_BYTES,
      manifestOffset: HEADER_BYTES,
      manifestBytes: header.manifestBytes,
      tableOffset: header.tableOffset,
      tableEntryBytes: TABLE_ENTRY_BYTES,
      entries,
      footerOffset,
      footerBytes: FOOTER_BYTES,
      totalBytes: src.length,
    },
    envelopeDigest,
  };
}
