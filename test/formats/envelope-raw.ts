// Test helper: an independent, deliberately naive FLYSESS1 byte builder written from the spec's
// tables, with knobs to break one field at a time. Not the encoder under test (it shares no code).
import { createHash } from 'node:crypto';

export interface RawPayload {
  name: string;
  bytes: Buffer;
  /** Overrides of the table entry (raw values as written). */
  nameField?: Buffer;
  offset?: bigint;
  byteLength?: bigint;
  digest?: Buffer;
}

export interface RawOptions {
  magic?: string;
  version?: number;
  headerBytes?: number;
  manifestBytes?: number;
  payloadCount?: number;
  tableOffset?: number;
  reserved?: number;
  /** A non-zero first byte for the gap between manifest and table. */
  tablePadByte?: number;
  /** A non-zero first byte for each gap before a payload. */
  payloadPadByte?: number;
  /** Bytes inserted between the last payload and the footer. */
  trailing?: Buffer;
}

const a8 = (n: number): number => (n + 7) & ~7;
const sha = (b: Uint8Array): Buffer => createHash('sha256').update(b).digest();

/** Lay out header, manifest, table and payloads as the spec says, then seal with a footer. */
export function rawEnvelope(manifest: Buffer, payloads: RawPayload[], o: RawOptions = {}): Buffer {
  const chunks: Buffer[] = [];
  let pos = 0;
  const push = (b: Buffer): void => {
    chunks.push(b);
    pos += b.length;
  };
  const pad = (to: number, padByte: number | undefined): void => {
    if (to > pos) {
      const p = Buffer.alloc(to - pos);
      if (padByte !== undefined) p[0] = padByte;
      push(p);
    }
  };
  const tableOffset = a8(32 + manifest.length);
  const header = Buffer.alloc(32);
  header.write(o.magic ?? 'FLYSESS1', 0, 'latin1');
  header.writeUInt32LE(o.version ?? 1, 8);
  header.writeUInt32LE(o.headerBytes ?? 32, 12);
  header.writeUInt32LE(o.manifestBytes ?? manifest.length, 16);
  header.writeUInt32LE(o.payloadCount ?? payloads.length, 20);
  header.writeUInt32LE(o.tableOffset ?? tableOffset, 24);
  header.writeUInt32LE(o.reserved ?? 0, 28);
  push(header);
  push(manifest);
  pad(tableOffset, o.tablePadByte);
  let end = tableOffset + 112 * payloads.length;
  const offsets = payloads.map((p) => {
    const off = a8(end);
    end = off + p.bytes.length;
    return off;
  });
  payloads.forEach((p, i) => {
    const e = Buffer.alloc(112);
    (p.nameField ?? Buffer.from(p.name, 'latin1')).copy(e, 0);
    e.writeBigUInt64LE(p.offset ?? BigInt(offsets[i]!), 64);
    e.writeBigUInt64LE(p.byteLength ?? BigInt(p.bytes.length), 72);
    (p.digest ?? sha(p.bytes)).copy(e, 80);
    push(e);
  });
  payloads.forEach((p, i) => {
    pad(offsets[i]!, o.payloadPadByte);
    push(p.bytes);
  });
  if (o.trailing) push(o.trailing);
  return seal(Buffer.concat(chunks));
}

/** Append a correct footer (fileBytes, prefix SHA-256, FLYSESSF) to a prefix. */
export function seal(prefix: Buffer): Buffer {
  const footer = Buffer.alloc(48);
  footer.writeBigUInt64LE(BigInt(prefix.length + 48), 0);
  sha(prefix).copy(footer, 8);
  footer.write('FLYSESSF', 40, 'latin1');
  return Buffer.concat([prefix, footer]);
}

/** Replace the footer of a whole envelope with a correct one for its (possibly edited) prefix. */
export function reseal(envelope: Buffer): Buffer {
  return seal(envelope.subarray(0, envelope.length - 48));
}

/** The smallest manifest the FLYSESS1 encoder accepts: no agents, no coordinator payloads. */
export const MINIMAL_MANIFEST = {
  envelopeVersion: 1,
  checkpointId: 'c',
  sourceScope: { sessionId: 's', epoch: 'e', step: '0' },
  episodeId: 'e',
  worldTime: { numerator: '0', denominator: '1' },
  schedulerId: 'lockstep-v1',
  compositionDigest: '0'.repeat(64),
  portMap: [],
  compatibility: {},
  agents: [],
  coordinator: {},
  environment: {},
  helperState: [],
};
