// FLYSESS1: the reference fixture reproduced byte for byte, every layout offset, the six published
// corruptions, one refusal per sub-check (built by an independent raw writer), and property tests that name the check refusing each corruption.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import {
  decodeEnvelope,
  decodeEnvelopeAsync,
  encodeEnvelope,
  encodeEnvelopeParts,
  layoutEnvelope,
  SEAL_SLICE_BYTES,
  sealEnvelope,
  sealEnvelopeAsync,
  type EnvelopePayloadInput,
} from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import { rawEnvelope, reseal, type RawOptions, type RawPayload } from './envelope-raw.js';

interface Fixture {
  manifest: Record<string, unknown>;
  payloads: { name: string; base64: string }[];
  envelope: {
    base64: string;
    byteLength: number;
    layout: Record<string, unknown> & { entries: Record<string, unknown>[] };
  };
  corruption: { name: string; offset: number; reason: string }[];
}
const fixture = JSON.parse(
  readFileSync(new URL('../../fixtures/reference/checkpoint-envelope.json', import.meta.url), 'utf8'),
) as Fixture;
const reference = Buffer.from(fixture.envelope.base64, 'base64');
const fixturePayloads = (): EnvelopePayloadInput[] =>
  fixture.payloads.map((p) => ({ name: p.name, bytes: Buffer.from(p.base64, 'base64') }));
const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** The DetsimError a decode throws (fails the test if it throws anything else or nothing). */
function refusal(bytes: Uint8Array): DetsimError {
  try {
    decodeEnvelope(bytes);
  } catch (e) {
    if (e instanceof DetsimError) return e;
    throw new Error(`decodeEnvelope threw a non-DetsimError: ${String(e)}`);
  }
  throw new Error('decodeEnvelope accepted the bytes');
}

function expectRefused(bytes: Uint8Array, check: number, reason: ReasonCode, text?: RegExp): DetsimError {
  const e = refusal(bytes);
  expect(e.message).toMatch(new RegExp(`^check ${check} \\(`));
  expect(e.reason).toBe(reason);
  if (text) expect(e.message).toMatch(text);
  return e;
}

// A manifest (without payloads) that check 7 accepts: the fixture's.
const { payloads: _omit, ...baseManifest } = fixture.manifest;
const refsOf = (ps: { name: string; bytes: Uint8Array }[]) =>
  ps.map((p) => ({ name: p.name, byteLength: String(p.bytes.length), digest: sha256(p.bytes) }));
const manifestText = (ps: { name: string; bytes: Uint8Array }[], extra: Record<string, unknown> = {}): Buffer =>
  Buffer.from(canonicalize({ ...baseManifest, ...extra, payloads: refsOf(ps) }), 'utf8');

const P = (name: string, text: string, over: Partial<RawPayload> = {}): RawPayload => ({
  name,
  bytes: Buffer.from(text),
  ...over,
});
const twoPayloads = (): RawPayload[] => [P('world', 'abc'), P('agent-fly-a', 'hello world')];
function raw(ps: RawPayload[] = twoPayloads(), o: RawOptions = {}, extra: Record<string, unknown> = {}): Buffer {
  return rawEnvelope(manifestText(ps, extra), ps, o);
}

describe('FLYSESS1 reference fixture', () => {
  it('[ENV-10] encodeEnvelope reproduces the fixture byte for byte', () => {
    const out = encodeEnvelope(fixture.manifest, fixturePayloads());
    expect(out.length).toBe(fixture.envelope.byteLength);
    expect(out.equals(reference)).toBe(true);
  });

  it('[ENV-10] computes manifest.payloads when the caller omits it (same bytes)', () => {
    expect(encodeEnvelope(baseManifest, fixturePayloads()).equals(reference)).toBe(true);
  });

  it('[ENV-10] encodeEnvelopeParts: parts concatenate to the fixture, payloads are not copied, digest is the whole file', () => {
    const payloads = fixturePayloads();
    const enc = encodeEnvelopeParts(baseManifest, payloads);
    expect(Buffer.concat(enc.parts).equals(reference)).toBe(true);
    expect(enc.byteLength).toBe(reference.length);
    expect(enc.envelopeDigest).toBe(sha256(reference));
    for (const p of payloads) expect(enc.parts).toContain(p.bytes);
  });

  it('the independent raw writer also reproduces the fixture (so raw-built cases are meaningful)', () => {
    const ps = fixturePayloads().map((p) => ({ name: p.name, bytes: Buffer.from(p.bytes) }));
    expect(rawEnvelope(Buffer.from(canonicalize(fixture.manifest)), ps).equals(reference)).toBe(true);
  });

  it('decodes every layout offset, length and digest the fixture lists', () => {
    const d = decodeEnvelope(reference);
    const want = fixture.envelope.layout;
    for (const key of [
      'headerBytes',
      'manifestOffset',
      'manifestBytes',
      'tableOffset',
      'tableEntryBytes',
      'footerOffset',
      'footerBytes',
      'totalBytes',
    ]) {
      expect(d.layout[key as keyof typeof d.layout], key).toBe(Number(want[key]));
    }
    expect(d.layout.entries).toHaveLength(want.entries.length);
    want.entries.forEach((e, i) => {
      expect(d.layout.entries[i]).toEqual({
        name: e.name,
        offset: Number(e.offset),
        byteLength: Number(e.byteLength),
        digest: e.digest,
      });
    });
  });

  it('decodes the manifest, payload bytes (as views, not copies) and the whole-file digest', () => {
    const input = new Uint8Array(reference); // a plain Uint8Array, not a Buffer
    const d = decodeEnvelope(input);
    expect(d.manifest).toEqual(fixture.manifest);
    expect(d.envelopeDigest).toBe(sha256(reference));
    d.payloads.forEach((p, i) => {
      const want = fixture.payloads[i]!;
      expect(p.name).toBe(want.name);
      expect(Buffer.from(p.bytes).toString('base64')).toBe(want.base64);
      expect(p.digest).toBe(sha256(p.bytes));
      expect(p.bytes.buffer).toBe(input.buffer);
    });
  });

  const expectedCheck: Record<number, [number, ReasonCode]> = {
    0: [1, 'struct_envelope_magic'],
    8: [1, 'struct_envelope_magic'],
    32: [2, 'audit_envelope_digest'],
    2696: [2, 'audit_envelope_digest'],
    2840: [2, 'audit_envelope_digest'],
    2872: [2, 'audit_envelope_length'],
  };
  it('lists exactly six corruptions', () => expect(fixture.corruption).toHaveLength(6));
  for (const c of fixture.corruption) {
    it(`[ENV-${expectedCheck[c.offset]![0]}] refuses ${c.name} (offset ${c.offset}: ${c.reason})`, () => {
      const bad = Buffer.from(reference);
      bad[c.offset]! ^= 0x01;
      const [check, reason] = expectedCheck[c.offset]!;
      expectRefused(bad, check, reason);
    });
  }

  it('[ENV-3] a flipped manifest byte with a re-sealed footer is caught by check 3', () => {
    const bad = Buffer.from(reference);
    bad[32]! ^= 0x01; // '{' becomes 'z'
    expectRefused(reseal(bad), 3, 'struct_envelope_manifest');
  });

  it('[ENV-5] a flipped payload byte with a re-sealed footer is caught by check 5 naming the entry', () => {
    const bad = Buffer.from(reference);
    bad[2696]! ^= 0x01;
    expectRefused(reseal(bad), 5, 'audit_payload_digest_mismatch', /entry 0 "agent-fly-a"/);
  });
});

describe('decodeEnvelope: one refusal per check', () => {
  it('accepts the raw-built baseline (so each case below breaks one thing)', () => {
    const d = decodeEnvelope(raw());
    expect(d.payloads.map((p) => Buffer.from(p.bytes).toString())).toEqual(['abc', 'hello world']);
  });

  describe('check 1 (header)', () => {
    it('[ENV-1] refuses fewer than 80 bytes', () => {
      const short = Buffer.alloc(79);
      short.write('FLYSESS1');
      expectRefused(short, 1, 'size_envelope_too_short', /79 bytes/);
    });
    it('[ENV-1] refuses an empty input', () => expectRefused(new Uint8Array(0), 1, 'size_envelope_too_short'));
    it('[ENV-1, ENV-9] names a FLYSIM01 file as the legacy format, even a short one', () => {
      const legacy = Buffer.concat([Buffer.from('FLYSIM01'), Buffer.alloc(200)]);
      expectRefused(legacy, 1, 'struct_envelope_legacy_format', /legacy FLYSIM01 format/);
      expectRefused(Buffer.from('FLYSIM01\x02\x00\x00\x00{}'), 1, 'struct_envelope_legacy_format');
    });
    it('[ENV-1] refuses random bytes at the magic', () =>
      expectRefused(Buffer.alloc(200, 0x41), 1, 'struct_envelope_magic', /magic/));
    it('[ENV-1] refuses version 2', () =>
      expectRefused(raw(undefined, { version: 2 }), 1, 'struct_envelope_magic', /envelopeVersion 2 is not supported/));
    it('[ENV-1] refuses headerBytes 40', () =>
      expectRefused(raw(undefined, { headerBytes: 40 }), 1, 'struct_envelope_magic', /headerBytes/));
    it('[ENV-1] refuses a non-zero reserved field', () =>
      expectRefused(raw(undefined, { reserved: 1 }), 1, 'struct_envelope_magic', /reserved/));
  });

  describe('check 2 (footer)', () => {
    it('[ENV-2] refuses a truncated file (footer magic gone)', () =>
      expectRefused(raw().subarray(0, -1), 2, 'audit_envelope_length', /footer magic/));
    it('[ENV-2] refuses an extended file', () =>
      expectRefused(Buffer.concat([raw(), Buffer.alloc(8)]), 2, 'audit_envelope_length'));
    it('[ENV-2] refuses a footer whose fileBytes disagrees with the length', () => {
      const good = raw();
      const bad = Buffer.concat([good, good.subarray(-48)]); // a valid-looking footer at the new end
      expectRefused(bad, 2, 'audit_envelope_length', /file length/);
    });
    it('[ENV-2] refuses a wrong prefix digest', () => {
      const bad = raw();
      bad[bad.length - 40]! ^= 0x80;
      expectRefused(bad, 2, 'audit_envelope_digest', /footer digest/);
    });
  });

  describe('check 3 (manifest)', () => {
    it('[ENV-3] refuses a manifest length past the payload area (without allocating it)', () => {
      expectRefused(
        raw(undefined, { manifestBytes: 0xffffffff }),
        3,
        'struct_envelope_manifest',
        /past the payload area/,
      );
    });
    it('[ENV-3] refuses a manifest that is valid JSON but not canonical', () => {
      const ps = twoPayloads();
      const pretty = Buffer.from(JSON.stringify(JSON.parse(manifestText(ps).toString()), null, 1));
      expectRefused(rawEnvelope(pretty, ps), 3, 'struct_envelope_manifest', /struct_not_canonical/);
    });
    it('[ENV-3] refuses a duplicate key inside the manifest', () => {
      const ps = twoPayloads();
      const text = manifestText(ps).toString().replace('{"agents":', '{"agents":[],"agents":');
      expectRefused(rawEnvelope(Buffer.from(text), ps), 3, 'struct_envelope_manifest', /struct_duplicate_key/);
    });
    it('[ENV-3] refuses invalid UTF-8 in the manifest', () => {
      const ps = twoPayloads();
      const bytes = manifestText(ps);
      const at = bytes.indexOf('demo');
      bytes[at] = 0xff;
      expectRefused(rawEnvelope(bytes, ps), 3, 'struct_envelope_manifest', /struct_invalid_utf8/);
    });
    it('[ENV-3] refuses a manifest that is not an object', () =>
      expectRefused(rawEnvelope(Buffer.from('[]'), []), 3, 'struct_envelope_manifest', /not a JSON object/));
  });

  describe('check 4 (payload table)', () => {
    it('[ENV-4] refuses a tableOffset away from its laid-out position', () => {
      const ps = twoPayloads();
      const m = manifestText(ps);
      expectRefused(
        rawEnvelope(m, ps, { tableOffset: ((32 + m.length + 7) & ~7) + 8 }),
        4,
        'struct_envelope_table',
        /tableOffset/,
      );
    });
    it('[ENV-4] refuses a table that runs past the payload area (huge payloadCount, nothing allocated)', () => {
      expectRefused(raw([], { payloadCount: 0xffffffff }), 4, 'struct_envelope_table', /past the payload area/);
    });
    it('[ENV-4] refuses 65 payloads', () => {
      const ps = Array.from({ length: 65 }, (_, i) => P(`p${i}`, ''));
      expectRefused(raw(ps), 4, 'size_payload_count_over_64', /65/);
    });
    it('[ENV-4] refuses non-zero padding between manifest and table', () => {
      const ps = twoPayloads();
      const m = manifestText(ps);
      expect(m.length % 8).not.toBe(0); // there is a gap to corrupt
      expectRefused(rawEnvelope(m, ps, { tablePadByte: 1 }), 4, 'struct_envelope_table', /padding/);
    });
  });

  describe('check 5 (payload entries)', () => {
    it('[ENV-5] refuses a name that is not an Id', () => {
      const ps = [P('world', 'abc'), P('Agent', 'x')];
      expectRefused(raw(ps), 5, 'struct_envelope_entry', /entry 1: name "Agent" is not an Id/);
    });
    it('[ENV-5] refuses bytes after the name NUL', () => {
      const ps = [P('world', 'abc', { nameField: Buffer.from('world\0x') })];
      expectRefused(raw(ps), 5, 'struct_envelope_entry', /entry 0 "world".*after the name's NUL/);
    });
    it('[ENV-5] refuses a repeated name', () => {
      expectRefused(raw([P('world', 'a'), P('world', 'b')]), 5, 'struct_envelope_entry', /entry 1 "world".*repeats/);
    });
    it('[ENV-5] refuses an offset that is not the aligned end of the previous payload', () => {
      const ps = twoPayloads();
      const m = manifestText(ps);
      const first = ((32 + m.length + 7) & ~7) + 2 * 112;
      ps[1]!.offset = BigInt(first + 8 + 8); // correct would be align8(first + 3) = first + 8
      expectRefused(rawEnvelope(m, ps), 5, 'struct_envelope_entry', /entry 1 "agent-fly-a": offset/);
    });
    it('[ENV-5] refuses a byteLength past the payload area (u64 max, nothing allocated)', () => {
      const ps = [P('world', 'abc', { byteLength: 0xffffffffffffffffn })];
      expectRefused(raw(ps), 5, 'struct_envelope_entry', /entry 0 "world".*past the payload area/);
    });
    it('[ENV-5] refuses a payload whose digest does not match', () => {
      const ps = [P('world', 'abc'), P('agent-fly-a', 'hi', { digest: Buffer.alloc(32, 7) })];
      expectRefused(raw(ps), 5, 'audit_payload_digest_mismatch', /entry 1 "agent-fly-a"/);
    });
    it('[ENV-5] refuses non-zero padding before a payload', () => {
      expectRefused(
        raw(undefined, { payloadPadByte: 9 }),
        5,
        'struct_envelope_entry',
        /entry 1 "agent-fly-a": padding/,
      );
    });
  });

  describe('check 6 (no padding after the last payload)', () => {
    it('[ENV-6] refuses bytes between the last payload and the footer', () => {
      expectRefused(raw(undefined, { trailing: Buffer.alloc(5) }), 6, 'struct_envelope_padding', /5 bytes/);
    });
  });

  describe('check 7 (manifest fields)', () => {
    it('[ENV-7] refuses a missing required field', () => {
      const ps = twoPayloads();
      const m: Record<string, unknown> = { ...baseManifest, payloads: refsOf(ps) };
      delete m.helperState;
      expectRefused(
        rawEnvelope(Buffer.from(canonicalize(m)), ps),
        7,
        'struct_envelope_manifest_fields',
        /manifest\.helperState is missing/,
      );
    });
    it('[ENV-7] refuses an unknown top-level field', () =>
      expectRefused(raw(undefined, {}, { extra: 1 }), 7, 'struct_envelope_manifest_fields', /manifest\.extra/));
    it('[ENV-7] refuses envelopeVersion 2 in the manifest', () =>
      expectRefused(
        raw(undefined, {}, { envelopeVersion: 2 }),
        7,
        'struct_envelope_manifest_fields',
        /envelopeVersion/,
      ));
    it('[ENV-7] refuses a checkpointId that is not an Id', () =>
      expectRefused(
        raw(undefined, {}, { checkpointId: 'Ckpt 1' }),
        7,
        'struct_envelope_manifest_fields',
        /manifest\.checkpointId/,
      ));
    it('[ENV-7] refuses an unreduced worldTime', () => {
      expectRefused(
        raw(undefined, {}, { worldTime: { numerator: '2', denominator: '4' } }),
        7,
        'struct_envelope_manifest_fields',
        /manifest\.worldTime/,
      );
    });
    it('[ENV-7] refuses a bad sourceScope step', () => {
      expectRefused(
        raw(undefined, {}, { sourceScope: { sessionId: 'demo', epoch: 'e1', step: 42 } }),
        7,
        'struct_envelope_manifest_fields',
        /sourceScope\.step/,
      );
    });
    it('[ENV-7] refuses more than 60 agents', () => {
      const agents = Array.from({ length: 61 }, (_, i) => ({ agentId: `a${i}` }));
      expectRefused(raw(undefined, {}, { agents }), 7, 'size_agents_over_60');
    });
    it('[ENV-7] refuses manifest payloads that differ from the table', () => {
      const ps = twoPayloads();
      const refs = refsOf(ps);
      refs[1]!.byteLength = '12';
      const m = Buffer.from(canonicalize({ ...baseManifest, payloads: refs }));
      expectRefused(
        rawEnvelope(m, ps),
        7,
        'audit_manifest_payloads_mismatch',
        /manifest\.payloads\[1\].*entry 1 "agent-fly-a"/,
      );
    });
    it('[ENV-7] refuses manifest payloads listing fewer entries than the table', () => {
      const ps = twoPayloads();
      const m = Buffer.from(canonicalize({ ...baseManifest, payloads: refsOf(ps).slice(0, 1) }));
      expectRefused(rawEnvelope(m, ps), 7, 'audit_manifest_payloads_mismatch', /lists 1 payloads, the table has 2/);
    });
  });

  describe('order of the checks', () => {
    it('[ENV-8] reports check 3 before check 5 when both fail', () => {
      const ps = [P('world', 'abc', { digest: Buffer.alloc(32) })];
      const pretty = Buffer.from(JSON.stringify(JSON.parse(manifestText(ps).toString()), null, 1));
      expectRefused(rawEnvelope(pretty, ps), 3, 'struct_envelope_manifest');
    });
    it('[ENV-8] reports check 5 before check 7 when both fail', () => {
      const ps = [P('world', 'abc', { digest: Buffer.alloc(32) })];
      expectRefused(raw(ps, {}, { extra: true }), 5, 'audit_payload_digest_mismatch');
    });
    it('[ENV-8] reports check 1 before check 2 when both fail', () =>
      expectRefused(raw(undefined, { version: 9 }).subarray(0, -3), 1, 'struct_envelope_magic'));
  });
});

describe('encodeEnvelope refusals', () => {
  const enc = (m: object, ps: EnvelopePayloadInput[]): DetsimError => {
    try {
      encodeEnvelope(m, ps);
    } catch (e) {
      if (e instanceof DetsimError) return e;
      throw e;
    }
    throw new Error('encodeEnvelope accepted');
  };
  const bytes = (s: string): Uint8Array => Buffer.from(s);
  it('refuses manifest.payloads that differ from the payloads', () => {
    const m = { ...baseManifest, payloads: [{ name: 'world', byteLength: '4', digest: sha256(bytes('abc')) }] };
    expect(enc(m, [{ name: 'world', bytes: bytes('abc') }]).reason).toBe('audit_manifest_payloads_mismatch');
  });
  it('refuses 65 payloads', () => {
    const ps = Array.from({ length: 65 }, (_, i) => ({ name: `p${i}`, bytes: new Uint8Array(0) }));
    expect(enc(baseManifest, ps).reason).toBe('size_payload_count_over_64');
  });
  it('refuses a payload name that is not an Id', () => {
    const e = enc(baseManifest, [{ name: 'World', bytes: bytes('x') }]);
    expect(e.reason).toBe('struct_invalid_id');
    expect(e.message).toMatch(/payloads\[0\]\.name/);
  });
  it('refuses a repeated payload name', () => {
    expect(
      enc(baseManifest, [
        { name: 'w', bytes: bytes('x') },
        { name: 'w', bytes: bytes('y') },
      ]).reason,
    ).toBe('struct_envelope_entry');
  });
  it('refuses a manifest the reader would refuse (missing field)', () => {
    const { episodeId: _e, ...m } = baseManifest;
    expect(enc(m, []).message).toMatch(/check 7 .*episodeId is missing/);
  });
  it('refuses a manifest whose canonical text the reader would refuse (integer beyond 2^53)', () => {
    const agents = [{ agentId: 'fly-a', brainTicks: 2 ** 60 }];
    const e = enc({ ...baseManifest, agents }, []);
    expect(e.reason).toBe('struct_envelope_manifest');
  });
  it('refuses a manifest that is not an object', () =>
    expect(enc([] as unknown as object, []).reason).toBe('struct_envelope_manifest_fields'));
  it('encodes zero payloads and a 64-character name', () => {
    const empty = decodeEnvelope(encodeEnvelope(baseManifest, []));
    expect(empty.layout.footerOffset).toBe(empty.layout.tableOffset);
    const long = 'a'.repeat(64);
    const d = decodeEnvelope(encodeEnvelope(baseManifest, [{ name: long, bytes: bytes('z') }]));
    expect(d.payloads[0]!.name).toBe(long);
  });
});

/**
 * The check (and reason) that must refuse an envelope with byte `at` flipped: the header fields
 * check 1 validates, the footer's length and magic, and otherwise the prefix digest (check 2).
 */
function checkOwningFlip(at: number, length: number): [number, ReasonCode] {
  const footer = length - 48;
  if (at < 16 || (at >= 28 && at < 32)) return [1, 'struct_envelope_magic']; // magic, version, headerBytes, reserved
  if (at >= footer + 40 || (at >= footer && at < footer + 8)) return [2, 'audit_envelope_length']; // footer magic, fileBytes
  return [2, 'audit_envelope_digest']; // manifestBytes, payloadCount, tableOffset, body, recorded digest
}

/** The name a 64-byte table name field spells: the bytes before the first NUL (latin1). */
function nameOfField(field: Buffer): string {
  const nul = field.indexOf(0);
  return field.toString('latin1', 0, nul < 0 ? field.length : nul);
}

/** A name field check 5 accepts: an Id, then only NULs. */
function isHonestNameField(field: Buffer): boolean {
  const name = nameOfField(field);
  return /^[a-z0-9][a-z0-9._-]{0,63}$/.test(name) && field.subarray(name.length).every((b) => b === 0);
}

// ---------------------------------------------------------------------------------------------
// Property tests (modest run counts: CI has 2 cores)

const idArb = fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,63}$/);
const u64Arb = fc.bigInt({ min: 0n, max: 18446744073709551615n }).map(String);
const digestArb = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex'));
// JSON the strict parser round-trips: safe integers, finite non-integral doubles, well-formed strings.
const leaf = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer({ min: -(2 ** 53 - 1), max: 2 ** 53 - 1 }),
  fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e15, max: 1e15 }).filter((x) => !Number.isInteger(x)),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
);
const { json } = fc.letrec((tie) => ({
  json: fc.oneof(
    { depthSize: 'small', maxDepth: 3 },
    leaf,
    fc.array(tie('json'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 6 }), tie('json'), { maxKeys: 4 }),
  ),
}));
const objArb = fc.dictionary(fc.string({ maxLength: 8 }), json, { maxKeys: 4 });
const rationalArb = fc
  .tuple(fc.bigInt({ min: 0n, max: 10n ** 18n }), fc.bigInt({ min: 1n, max: 10n ** 18n }))
  .map(([n, d]) => {
    const g = ((a: bigint, b: bigint): bigint => {
      while (b) [a, b] = [b, a % b];
      return a;
    })(n, d);
    return { numerator: String(n / g), denominator: String(d / g) };
  });
const manifestArb = fc.record({
  envelopeVersion: fc.constant(1),
  checkpointId: idArb,
  sourceScope: fc.record({ sessionId: idArb, epoch: idArb, step: u64Arb }),
  episodeId: idArb,
  worldTime: rationalArb,
  schedulerId: idArb,
  compositionDigest: digestArb,
  portMap: fc.array(fc.record({ portId: idArb, agentId: idArb }), { maxLength: 3 }),
  compatibility: objArb,
  agents: fc.array(objArb, { maxLength: 3 }),
  coordinator: objArb,
  environment: objArb,
  helperState: fc.array(idArb, { maxLength: 3 }),
});
const payloadsArb = fc.uniqueArray(fc.record({ name: idArb, bytes: fc.uint8Array({ maxLength: 40 }) }), {
  selector: (p) => p.name,
  maxLength: 6,
});
const envelopeArb = fc.tuple(manifestArb, payloadsArb).map(([m, ps]) => ({ m, ps, bytes: encodeEnvelope(m, ps) }));

describe('decodeEnvelopeAsync (large payloads hashed on the thread pool beside the prefix)', () => {
  const big = Buffer.alloc(3 * 1024 * 1024 + 5);
  for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
  const good = encodeEnvelope(baseManifest, [
    { name: 'world', bytes: big },
    { name: 'agent-fly-a', bytes: Buffer.from('small') },
  ]);

  async function asyncRefusal(bytes: Buffer): Promise<DetsimError> {
    const e = await decodeEnvelopeAsync(bytes).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(DetsimError);
    return e as DetsimError;
  }

  it('gives what decodeEnvelope gives', async () => {
    const a = await decodeEnvelopeAsync(good);
    const d = decodeEnvelope(good);
    expect(a.envelopeDigest).toBe(d.envelopeDigest);
    expect(a.payloads.map((p) => p.digest)).toEqual([sha256(big), sha256(Buffer.from('small'))]);
    expect(canonicalize(a.manifest)).toBe(canonicalize(d.manifest));
  });

  it('refuses exactly like decodeEnvelope: a flipped payload byte (check 2), the same resealed (check 5), a truncation, a table pointing past the end', async () => {
    const flipped = Buffer.from(good);
    flipped[decodeEnvelope(good).layout.entries[0]!.offset + 1000]! ^= 1;
    const pastEnd = Buffer.from(good);
    pastEnd.writeBigUInt64LE(BigInt(good.length), decodeEnvelope(good).layout.tableOffset + 72);
    for (const bad of [flipped, reseal(flipped), good.subarray(0, good.length - 1), reseal(pastEnd)]) {
      const e = await asyncRefusal(bad);
      const s = refusal(bad);
      expect([e.reason, e.message, e.field]).toEqual([s.reason, s.message, s.field]);
    }
    expect((await asyncRefusal(reseal(flipped))).reason).toBe('audit_payload_digest_mismatch');
  });
});

describe('layout now, seal later (capture hands the writer a draft)', () => {
  it('[ENV-10] the fixture laid out with its payload digests and sealed, sync or a slice per turn, is the reference byte for byte', async () => {
    const declared = fixturePayloads().map((p) => ({ ...p, digest: sha256(p.bytes) }));
    const draft = layoutEnvelope(baseManifest, declared);
    expect(draft.byteLength).toBe(reference.length);
    expect(Buffer.concat(sealEnvelope(draft).parts).equals(reference)).toBe(true);
    const sealed = await sealEnvelopeAsync(draft);
    expect(Buffer.concat(sealed.parts).equals(reference)).toBe(true);
    expect(sealed.envelopeDigest).toBe(sha256(reference));
  });

  it('a payload with a reported digest is not hashed by the layout; sealing refuses a wrong one, naming it', () => {
    const lie = sha256(Buffer.from('something else'));
    const ps = fixturePayloads();
    const named = ps[1]!.name;
    const draft = layoutEnvelope(
      baseManifest,
      ps.map((p, i) => (i === 1 ? { ...p, digest: lie } : p)),
    );
    expect(draft.manifest.payloads[1]!.digest).toBe(lie);
    let e: unknown;
    try {
      sealEnvelope(draft);
    } catch (err) {
      e = err;
    }
    expect(e).toBeInstanceOf(DetsimError);
    expect((e as DetsimError).reason).toBe('audit_payload_digest_mismatch');
    expect((e as DetsimError).message).toBe(
      `payload ${JSON.stringify(named)}: its bytes hash to ${sha256(ps[1]!.bytes)}, its producer reported ${lie}`,
    );
  });

  it('sealing a large draft pauses once per slice, so a step loop sharing the thread keeps turning', async () => {
    const big = Buffer.alloc(5 * SEAL_SLICE_BYTES + 7, 3);
    const draft = layoutEnvelope(baseManifest, [{ name: 'world', bytes: big, digest: sha256(big) }]);
    let pauses = 0;
    const sealed = await sealEnvelopeAsync(draft, async () => void pauses++);
    expect(pauses).toBeGreaterThanOrEqual(6);
    expect(sealed.envelopeDigest).toBe(
      encodeEnvelopeParts(baseManifest, [{ name: 'world', bytes: big }]).envelopeDigest,
    );
  });
});

describe('FLYSESS1 properties', () => {
  it('random valid manifests and payloads round-trip (and re-encode to the same bytes)', () => {
    fc.assert(
      fc.property(manifestArb, payloadsArb, (m, ps) => {
        const bytes = encodeEnvelope(m, ps);
        const d = decodeEnvelope(bytes);
        expect(canonicalize(d.manifest)).toBe(canonicalize({ ...m, payloads: refsOf(ps) }));
        expect(d.payloads.map((p) => [p.name, Buffer.from(p.bytes).toString('hex')])).toEqual(
          ps.map((p) => [p.name, Buffer.from(p.bytes).toString('hex')]),
        );
        expect(encodeEnvelope(d.manifest, d.payloads).equals(bytes)).toBe(true);
        expect(d.envelopeDigest).toBe(sha256(bytes));
      }),
      { numRuns: 150 },
    );
  });

  it('[ENV-8] any single-byte flip is refused by the check that owns the byte', () => {
    fc.assert(
      fc.property(envelopeArb, fc.nat(), fc.integer({ min: 1, max: 255 }), ({ bytes }, n, x) => {
        const bad = Buffer.from(bytes);
        const at = n % bad.length;
        bad[at]! ^= x;
        expectRefused(bad, ...checkOwningFlip(at, bad.length));
      }),
      { numRuns: 300 },
    );
  });

  it('[ENV-1, ENV-2] any truncation is refused by check 1 (too short) or check 2 (footer gone)', () => {
    fc.assert(
      fc.property(envelopeArb, fc.nat(), ({ bytes }, n) => {
        const length = n % bytes.length;
        const [check, reason]: [number, ReasonCode] =
          length < 80 ? [1, 'size_envelope_too_short'] : [2, 'audit_envelope_length'];
        expectRefused(bytes.subarray(0, length), check, reason);
      }),
      { numRuns: 200 },
    );
  });

  it('random header fields behind a valid footer never crash the reader (only DetsimError)', () => {
    // Valid magic, version, headerBytes and footer, so checks 3-4 see random lengths and counts.
    const arb = fc.record({
      manifestBytes: fc.oneof(fc.nat({ max: 300 }), fc.constant(0xffffffff)),
      payloadCount: fc.oneof(fc.nat({ max: 70 }), fc.constant(0xffffffff)),
      tableOffset: fc.oneof(fc.nat({ max: 400 }), fc.constant(0xffffffff)),
      body: fc.uint8Array({ minLength: 0, maxLength: 600 }),
    });
    fc.assert(
      fc.property(arb, ({ manifestBytes, payloadCount, tableOffset, body }) => {
        const header = Buffer.alloc(32);
        header.write('FLYSESS1');
        header.writeUInt32LE(1, 8);
        header.writeUInt32LE(32, 12);
        header.writeUInt32LE(manifestBytes, 16);
        header.writeUInt32LE(payloadCount, 20);
        header.writeUInt32LE(tableOffset, 24);
        const bytes = reseal(Buffer.concat([header, Buffer.from(body), Buffer.alloc(48)]));
        expect(refusal(bytes).message).toMatch(/^check [3-7] \(/);
      }),
      { numRuns: 200 },
    );
  });

  it('[ENV-4, ENV-5] random table entries behind a valid header and manifest: an honest table is accepted, a hostile one refused by the check it breaks', () => {
    // A canonical manifest that lists either no payloads or exactly what the entries claim, then
    // entries with plausible or hostile names, offsets (overlapping, out of range), lengths and
    // digests, then random payload bytes. The oracle: a table is honest when its names are
    // distinct Ids and its bytes equal the independent writer's layout of the same payloads.
    const u64 = fc.oneof(
      fc.bigInt({ min: 0n, max: 1000n }),
      fc.constant(0xffffffffffffffffn),
      fc.bigInt({ min: 0n, max: 0xffffffffffffffffn }),
    );
    const nameField = fc.oneof(
      {
        weight: 4,
        arbitrary: fc.constantFrom('world', 'agent-a', 'agent-b', 'z.9').map((n) => Buffer.from(n, 'latin1')),
      },
      { weight: 1, arbitrary: fc.constantFrom('world\0x', 'World', '').map((n) => Buffer.from(n, 'latin1')) },
      { weight: 1, arbitrary: fc.uint8Array({ minLength: 64, maxLength: 64 }).map((b) => Buffer.from(b)) },
    );
    /** Mostly the honest value (null: the writer's own), sometimes a hostile override. */
    const override = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | null> =>
      fc.oneof({ weight: 5, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: arb });
    const entry = fc.record({
      nameField,
      offset: override(u64),
      byteLength: override(u64),
      digest: override(fc.uint8Array({ minLength: 32, maxLength: 32 })),
    });
    const arb = fc.record({
      entries: fc.array(entry, { maxLength: 4 }),
      payloadBytes: fc.array(fc.uint8Array({ maxLength: 20 }), { minLength: 4, maxLength: 4 }),
      tail: fc.oneof(
        { weight: 3, arbitrary: fc.constant(new Uint8Array(0)) },
        { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 16 }) },
      ),
      manifestListsEntries: fc.boolean(),
    });
    let accepted = 0;
    let refused = 0;
    fc.assert(
      fc.property(arb, ({ entries, payloadBytes, tail, manifestListsEntries }) => {
        const honest: RawPayload[] = entries.map((e, i) => ({
          name: nameOfField(e.nameField),
          bytes: Buffer.from(payloadBytes[i]!),
          nameField: e.nameField,
        }));
        const ps: RawPayload[] = entries.map((e, i) => ({
          ...honest[i]!,
          ...(e.offset !== null ? { offset: e.offset } : {}),
          ...(e.byteLength !== null ? { byteLength: e.byteLength } : {}),
          ...(e.digest !== null ? { digest: Buffer.from(e.digest) } : {}),
        }));
        const manifest = manifestText(manifestListsEntries ? honest : []);
        const bytes = rawEnvelope(manifest, ps, tail.length ? { trailing: Buffer.from(tail) } : {});
        const names = honest.map((p) => p.name);
        const entriesHonest =
          entries.every((e) => isHonestNameField(e.nameField)) &&
          new Set(names).size === names.length &&
          bytes.equals(rawEnvelope(manifest, honest, tail.length ? { trailing: Buffer.from(tail) } : {}));
        const manifestMatches = manifestListsEntries || entries.length === 0;
        if (entriesHonest && tail.length === 0 && manifestMatches) {
          accepted++;
          const d = decodeEnvelope(bytes);
          expect(d.payloads.map((p) => [p.name, Buffer.from(p.bytes).toString('hex')])).toEqual(
            honest.map((p) => [p.name, p.bytes.toString('hex')]),
          );
          return;
        }
        refused++;
        if (!entriesHonest)
          expectRefused(
            bytes,
            5,
            refusal(bytes).reason === 'audit_payload_digest_mismatch'
              ? 'audit_payload_digest_mismatch'
              : 'struct_envelope_entry',
          );
        else if (tail.length > 0) expectRefused(bytes, 6, 'struct_envelope_padding');
        else expectRefused(bytes, 7, 'audit_manifest_payloads_mismatch');
      }),
      { numRuns: 300 },
    );
    // Both sides of the oracle were exercised.
    expect(accepted).toBeGreaterThan(20);
    expect(refused).toBeGreaterThan(100);
  });

  it('[ENV-2] any extension is refused by check 2 (the footer is no longer at the end)', () => {
    fc.assert(
      fc.property(envelopeArb, fc.uint8Array({ minLength: 1, maxLength: 100 }), ({ bytes }, tail) => {
        expectRefused(Buffer.concat([bytes, tail]), 2, 'audit_envelope_length');
      }),
      { numRuns: 200 },
    );
  });
});
