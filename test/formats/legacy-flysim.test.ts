// The FLYSIM01 legacy reader against hand-built bytes (docs/spec/checkpoint-envelope.md), its
// refusals in the reference order, the FLYSESS1 reader's legacy refusal, and single-byte flips.
import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeEnvelope } from '../../core/formats/envelope.js';
import { decodeLegacyFlysim, encodeLegacyFlysim, legacyMagicOf } from '../../core/formats/legacy-flysim.js';
import { refusal } from '../refusal.js';

const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
};
/** Hand-built legacy bytes: magic, u32 manifest length, manifest, (u32 length, bytes)*, CRC32. */
function handBuilt(manifestText: string, chunks: Buffer[], magic = 'FLYSIM01', tail = Buffer.alloc(0)): Buffer {
  const m = Buffer.from(manifestText);
  const body = Buffer.concat([
    Buffer.from(magic),
    u32(m.length),
    m,
    ...chunks.flatMap((c) => [u32(c.length), c]),
    tail,
  ]);
  return Buffer.concat([body, u32(crc32(body))]);
}
const MANIFEST = '{"agentVersion":1,"remainder":0.25,"schemaVersion":2,"chunks":["membrane","refractory"]}';
const membrane = Buffer.from(new Float32Array([1.5, -2]).buffer);
const refractory = Buffer.from([0, 3, 0]);
const good = (): Buffer => handBuilt(MANIFEST, [membrane, refractory]);

describe('FLYSIM01 reader', () => {
  it('zlib.crc32 is the IEEE CRC32 (check value of "123456789")', () => expect(crc32('123456789')).toBe(0xcbf43926));

  it('[ENV-13] decodes hand-built bytes: manifest, chunks as views, layout', () => {
    const bytes = good();
    const d = decodeLegacyFlysim(bytes);
    expect(d.format).toBe('FLYSIM01');
    expect(d.manifest).toEqual(JSON.parse(MANIFEST));
    expect(d.chunks.map((c) => c.name)).toEqual(['membrane', 'refractory']);
    expect(Buffer.from(d.chunks[0]!.bytes).equals(membrane)).toBe(true);
    expect(Buffer.from(d.chunks[1]!.bytes).equals(refractory)).toBe(true);
    expect(d.chunks[0]!.bytes.buffer).toBe(bytes.buffer);
    const mlen = Buffer.byteLength(MANIFEST);
    expect(d.layout).toEqual({
      magicBytes: 8,
      manifestOffset: 12,
      manifestBytes: mlen,
      chunks: [
        { name: 'membrane', lengthOffset: 12 + mlen, offset: 16 + mlen, byteLength: 8 },
        { name: 'refractory', lengthOffset: 24 + mlen, offset: 28 + mlen, byteLength: 3 },
      ],
      checksumOffset: 31 + mlen,
      checksum: bytes
        .readUInt32LE(31 + mlen)
        .toString(16)
        .padStart(8, '0'),
      totalBytes: 35 + mlen,
    });
  });

  it('the test writer produces the same bytes as the hand-built file', () => {
    const out = encodeLegacyFlysim({ agentVersion: 1, remainder: 0.25 }, [
      { name: 'membrane', bytes: membrane },
      { name: 'refractory', bytes: refractory },
    ]);
    expect(out.equals(good())).toBe(true);
  });

  it('[ENV-13] reads the same layout under FLYAGT01 and FLYENV01 when asked', () => {
    for (const magic of ['FLYAGT01', 'FLYENV01']) {
      const bytes = handBuilt(MANIFEST, [membrane, refractory], magic);
      expect(legacyMagicOf(bytes)).toBe(magic);
      expect(decodeLegacyFlysim(bytes, magic).format).toBe(magic);
      expect(refusal(() => decodeLegacyFlysim(bytes)).message).toMatch(/magic/);
    }
  });

  it('[ENV-9] the FLYSESS1 reader names a FLYSIM01 file as the legacy format at check 1', () => {
    const e = refusal(() => decodeEnvelope(good()));
    expect(e.reason).toBe('struct_envelope_legacy_format');
    expect(e.message).toMatch(/^check 1 \(magic\): .*legacy FLYSIM01 format/);
  });

  const cases: [string, () => Buffer, string, RegExp][] = [
    ['wrong magic', () => handBuilt(MANIFEST, [], 'FLYSIM02'), 'struct_legacy_envelope', /\(magic\)/],
    ['shorter than magic + length', () => Buffer.from('FLYSIM01\x01\x00'), 'struct_legacy_envelope', /\(magic\)/],
    [
      'manifest length past the end',
      () => {
        const b = good();
        b.writeUInt32LE(0xffffffff, 8);
        return b;
      },
      'struct_legacy_envelope',
      /\(manifest length\)/,
    ],
    [
      'invalid UTF-8 in the manifest',
      () => handBuilt('{"a":"\u00ff"}', []).fill(0xff, 18, 19),
      'struct_legacy_envelope',
      /struct_invalid_utf8/,
    ],
    ['manifest not JSON', () => handBuilt('{"schemaVersion":2,', []), 'struct_legacy_envelope', /\(manifest\)/],
    ['manifest an array', () => handBuilt('[2]', []), 'struct_legacy_envelope', /not a JSON object/],
    [
      'schemaVersion 1',
      () => handBuilt('{"schemaVersion":1,"chunks":[]}', []),
      'struct_legacy_envelope',
      /schemaVersion is 1/,
    ],
    [
      'CRC mismatch',
      () => {
        const b = good();
        b[b.length - 6]! ^= 0x10; // a chunk byte
        return b;
      },
      'audit_legacy_crc',
      /\(crc32\)/,
    ],
    [
      'chunks not an array',
      () => handBuilt('{"schemaVersion":2,"chunks":"membrane"}', []),
      'struct_legacy_envelope',
      /not an array/,
    ],
    [
      'chunk name with a digit',
      () => handBuilt('{"schemaVersion":2,"chunks":["rng2"]}', [Buffer.alloc(1)]),
      'struct_legacy_envelope',
      /"rng2" is not a chunk name/,
    ],
    [
      'repeated chunk name',
      () => handBuilt('{"schemaVersion":2,"chunks":["a","a"]}', [Buffer.alloc(1), Buffer.alloc(1)]),
      'struct_legacy_envelope',
      /repeats/,
    ],
    [
      'more chunks named than present',
      () => handBuilt('{"schemaVersion":2,"chunks":["a","b"]}', [Buffer.alloc(1)]),
      'struct_legacy_envelope',
      /chunk "b"/,
    ],
    [
      'chunk length past the checksum',
      () => {
        const text = '{"schemaVersion":2,"chunks":["a"]}';
        const body = Buffer.concat([
          Buffer.from('FLYSIM01'),
          u32(text.length),
          Buffer.from(text),
          u32(1000),
          Buffer.alloc(3),
        ]);
        return Buffer.concat([body, u32(crc32(body))]);
      },
      'struct_legacy_envelope',
      /chunk "a": 1000 bytes/,
    ],
    [
      'trailing data before the checksum',
      () => handBuilt(MANIFEST, [membrane, refractory], 'FLYSIM01', Buffer.alloc(2)),
      'struct_legacy_envelope',
      /\(trailing data\): 2 bytes/,
    ],
  ];
  for (const [name, build, reason, text] of cases) {
    it(`[ENV-13] refuses ${name}`, () => {
      const e = refusal(() => decodeLegacyFlysim(build()));
      expect(e.reason).toBe(reason);
      expect(e.message).toMatch(/^FLYSIM01 legacy file \(/);
      expect(e.message).toMatch(text);
    });
  }

  it('[ENV-13] refuses any single-byte flip by the check that owns the byte (the CRC32 for everything after the manifest)', () => {
    const bytes = good();
    const manifestEnd = 12 + Buffer.byteLength(MANIFEST);
    /** The checks that may refuse a flip at `at`: the ones reading that byte before the CRC, and the CRC. */
    const owners = (at: number): string[] =>
      at < 8
        ? ['magic']
        : at < 12
          ? ['manifest length', 'manifest', 'crc32']
          : at < manifestEnd
            ? ['manifest', 'schemaVersion', 'crc32']
            : ['crc32'];
    fc.assert(
      fc.property(fc.nat({ max: bytes.length - 1 }), fc.integer({ min: 1, max: 255 }), (at, x) => {
        const bad = Buffer.from(bytes);
        bad[at]! ^= x;
        const e = refusal(() => decodeLegacyFlysim(bad));
        expect(owners(at), `flip at ${at}: ${e.message}`).toContain(e.field);
        expect(e.reason).toBe(e.field === 'crc32' ? 'audit_legacy_crc' : 'struct_legacy_envelope');
      }),
      { numRuns: 300 },
    );
  });
});
