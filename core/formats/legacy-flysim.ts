// The reference's legacy FLYSIM01 envelope (docs/spec/checkpoint-envelope.md): a reader that
// applies the reference reader's checks in its order, and a small writer for tests and fixtures.
// Not FLYSESS1 (envelope.ts), and not a converter: detsim never writes this format in a run.
import { crc32 } from 'node:zlib';
import { parseStrict, type JsonValue } from './canonical-json.js';
import { DetsimError } from './errors.js';
import type { ReasonCode } from './reasons.js';

/** The magic of a legacy FLYSIM01 session file (read-only). */
export const LEGACY_FLYSIM_MAGIC = 'FLYSIM01';
/** The same layout is reused for agent capture (FLYAGT01) and world (FLYENV01) payloads. */
export const LEGACY_MAGICS = ['FLYSIM01', 'FLYAGT01', 'FLYENV01'] as const;
export const LEGACY_SCHEMA_VERSION = 2;
const CHUNK_NAME_RE = /^[A-Za-z]+$/;

/** One chunk of a legacy file: its name and a view of its bytes. */
export interface LegacyChunk {
  name: string;
  /** A view into the input bytes, not a copy. */
  bytes: Uint8Array;
  /** Offset of the chunk's bytes (after its u32 length prefix). */
  offset: number;
  byteLength: number;
}

/** Where the parts of a legacy file lie, in bytes. */
export interface LegacyLayout {
  magicBytes: number;
  manifestOffset: number;
  manifestBytes: number;
  chunks: { name: string; lengthOffset: number; offset: number; byteLength: number }[];
  checksumOffset: number;
  /** The CRC32 as 8 lowercase hex digits. */
  checksum: string;
  totalBytes: number;
}

/** A verified legacy FLYSIM01 (or FLYAGT01, FLYENV01) file: its format (magic), manifest and chunks. */
export interface DecodedLegacy {
  format: string;
  manifest: { [key: string]: JsonValue };
  chunks: LegacyChunk[];
  layout: LegacyLayout;
}

export interface LegacyChunkInput {
  name: string;
  bytes: Uint8Array;
}

function refuse(magic: string, what: string, detail: string, reason: ReasonCode = 'struct_legacy_envelope'): never {
  throw new DetsimError(reason, `${magic} legacy file (${what}): ${detail}`, what);
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function checkMagic(magic: string): void {
  if (magic.length === 0 || !/^[\x20-\x7e]+$/.test(magic))
    throw new DetsimError(
      'struct_invalid_field',
      `legacy magic ${JSON.stringify(magic)} is not nonempty printable ASCII`,
      'magic',
    );
}

/** Does this look like a legacy envelope (one of the known magics)? */
export function legacyMagicOf(bytes: Uint8Array): string | undefined {
  const head = asBuffer(bytes).toString('latin1', 0, 8);
  return (LEGACY_MAGICS as readonly string[]).find((m) => m === head);
}

/** Read and verify a legacy envelope with the given magic, in the reference reader's order. */
export function decodeLegacyFlysim(bytes: Uint8Array, magic: string = LEGACY_FLYSIM_MAGIC): DecodedLegacy {
  checkMagic(magic);
  const buf = asBuffer(bytes);
  const m = magic.length;
  // 1. magic, and room for the manifest length.
  if (buf.length < m + 4 || buf.toString('latin1', 0, m) !== magic)
    refuse(magic, 'magic', `does not start with ${JSON.stringify(magic)} followed by a manifest length`);
  // 2. manifest length within the file (leaving room for the CRC).
  const manifestBytes = buf.readUInt32LE(m);
  const manifestOffset = m + 4;
  if (manifestOffset + manifestBytes + 4 > buf.length)
    refuse(
      magic,
      'manifest length',
      `manifest of ${manifestBytes} bytes at ${manifestOffset} runs past the end (${buf.length} bytes)`,
    );
  // 3-4. UTF-8, JSON, an object.
  let manifest: JsonValue;
  try {
    manifest = parseStrict(buf.subarray(manifestOffset, manifestOffset + manifestBytes));
  } catch (e) {
    if (e instanceof DetsimError) refuse(magic, 'manifest', `${e.message} [${e.reason}]`);
    throw e;
  }
  if (typeof manifest !== 'object' || manifest === null || Array.isArray(manifest))
    refuse(magic, 'manifest', 'manifest is not a JSON object');
  // 5. schemaVersion.
  if (manifest.schemaVersion !== LEGACY_SCHEMA_VERSION)
    refuse(
      magic,
      'schemaVersion',
      `schemaVersion is ${JSON.stringify(manifest.schemaVersion) ?? 'missing'}, not ${LEGACY_SCHEMA_VERSION}`,
    );
  // 6. CRC32 over everything before the last 4 bytes.
  const checksumOffset = buf.length - 4;
  const recorded = buf.readUInt32LE(checksumOffset);
  const actual = crc32(buf.subarray(0, checksumOffset));
  if (recorded !== actual)
    refuse(
      magic,
      'crc32',
      `CRC32 of the first ${checksumOffset} bytes is ${hex32(actual)}, the file records ${hex32(recorded)}`,
      'audit_legacy_crc',
    );
  // 7-8. chunk names, and each chunk within the file in manifest order.
  const names = chunkNames(magic, manifest.chunks);
  const {
    chunks,
    layoutChunks,
    end: pos,
  } = readChunks(magic, buf, names, manifestOffset + manifestBytes, checksumOffset);
  // 9. exactly the CRC remains.
  if (pos !== checksumOffset)
    refuse(magic, 'trailing data', `${checksumOffset - pos} bytes after the last chunk, before the checksum`);
  return {
    format: magic,
    manifest,
    chunks,
    layout: {
      magicBytes: m,
      manifestOffset,
      manifestBytes,
      chunks: layoutChunks,
      checksumOffset,
      checksum: hex32(recorded),
      totalBytes: buf.length,
    },
  };
}

/** Check 7: manifest.chunks is an array of distinct chunk names (ASCII letters). */
function chunkNames(magic: string, names: JsonValue | undefined): string[] {
  if (!Array.isArray(names)) refuse(magic, 'chunks', 'manifest.chunks is not an array');
  const seen = new Set<string>();
  names.forEach((n, i) => {
    if (typeof n !== 'string' || !CHUNK_NAME_RE.test(n))
      refuse(magic, 'chunks', `manifest.chunks[${i}] ${JSON.stringify(n)} is not a chunk name (ASCII letters)`);
    if (seen.has(n)) refuse(magic, 'chunks', `manifest.chunks[${i}] ${JSON.stringify(n)} repeats an earlier chunk`);
    seen.add(n);
  });
  return names as string[];
}

/** Check 8: each chunk (u32 length, bytes) from `pos`, in manifest order, before the checksum. */
function readChunks(
  magic: string,
  buf: Buffer,
  names: readonly string[],
  pos: number,
  checksumOffset: number,
): { chunks: LegacyChunk[]; layoutChunks: LegacyLayout['chunks']; end: number } {
  const chunks: LegacyChunk[] = [];
  const layoutChunks: LegacyLayout['chunks'] = [];
  for (const name of names) {
    if (pos + 4 > checksumOffset)
      refuse(magic, 'chunk length', `chunk ${JSON.stringify(name)}: no room for its length at ${pos}`);
    const byteLength = buf.readUInt32LE(pos);
    const offset = pos + 4;
    if (offset + byteLength > checksumOffset)
      refuse(
        magic,
        'chunk length',
        `chunk ${JSON.stringify(name)}: ${byteLength} bytes at ${offset} run past the checksum (${checksumOffset})`,
      );
    chunks.push({ name, bytes: buf.subarray(offset, offset + byteLength), offset, byteLength });
    layoutChunks.push({ name, lengthOffset: pos, offset, byteLength });
    pos = offset + byteLength;
  }
  return { chunks, layoutChunks, end: pos };
}

function hex32(n: number): string {
  return n.toString(16).padStart(8, '0');
}

/**
 * Write a legacy envelope (for tests and fixtures only). Like the reference writer it forces
 * `schemaVersion: 2` and `chunks: [names]` into the manifest and serialises it with JSON.stringify.
 */
export function encodeLegacyFlysim(
  manifest: object,
  chunks: readonly LegacyChunkInput[],
  magic: string = LEGACY_FLYSIM_MAGIC,
): Buffer {
  checkMagic(magic);
  const names = chunks.map((c) => c.name);
  const json = Buffer.from(
    JSON.stringify({ ...manifest, schemaVersion: LEGACY_SCHEMA_VERSION, chunks: names }),
    'utf8',
  );
  const parts: Buffer[] = [Buffer.from(magic, 'latin1'), u32(json.length), json];
  for (const c of chunks)
    parts.push(u32(c.bytes.byteLength), Buffer.from(c.bytes.buffer, c.bytes.byteOffset, c.bytes.byteLength));
  const body = Buffer.concat(parts);
  return Buffer.concat([body, u32(crc32(body))]);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}
