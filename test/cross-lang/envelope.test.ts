// FLYSESS1 across languages: random manifests and payloads encoded by TypeScript decode in Rust and
// re-encode to identical bytes, and the reverse; both writers refuse the same bad input alike; both
// readers refuse the same corruptions (flips, truncations, resealed field edits) with the same check,
// reason and message. Not the reference fixture (each language's own tests hold that).
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { decodeEnvelope, encodeEnvelope, type EnvelopePayloadInput } from '../../core/formats/envelope.js';
import { RationalNs } from '../../core/formats/scalars.js';
import { buildRustCli, rustBatch, rustCommand, skipReason, tsOutcome, type Outcome } from './rust-cli.js';
import { MINIMAL_MANIFEST } from '../formats/envelope-raw.js';

type Payload = { name: string; bytes: Uint8Array };
const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');
const wirePayloads = (ps: Payload[]) => ps.map((p) => ({ name: p.name, base64: b64(p.bytes) }));

// ---------------------------------------------------------------------------------------------
// Arbitraries: manifests that check 7 accepts, with random content where the schema leaves it open.

const validId = fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,20}$/);
const u64 = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String);
const digest = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex'));
const rational = fc
  .tuple(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.bigInt({ min: 1n, max: 2n ** 64n - 1n }))
  .map(([n, d]) => RationalNs.of(n, d).toJSON());
/** Integers beyond 2^53−1 become 0: the writer refuses them (tested with spoil 'unsafe-integer'). */
const safeNumbers = (v: unknown): unknown =>
  typeof v === 'number'
    ? Number.isInteger(v) && !Number.isSafeInteger(v)
      ? 0
      : v
    : Array.isArray(v)
      ? v.map(safeNumbers)
      : v !== null && typeof v === 'object'
        ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, safeNumbers(x)]))
        : v;
const content = fc.jsonValue({ maxDepth: 2 }).map(safeNumbers);
const openObject = fc.dictionary(fc.string({ maxLength: 6 }), content, { maxKeys: 3 });
const manifest = fc.record({
  envelopeVersion: fc.constant(1),
  checkpointId: validId,
  sourceScope: fc.record({ sessionId: validId, epoch: validId, step: u64 }),
  episodeId: validId,
  worldTime: rational,
  schedulerId: fc.oneof(fc.constant('lockstep-v1'), validId),
  compositionDigest: digest,
  portMap: fc.array(fc.record({ portId: validId, agentId: validId }), { maxLength: 3 }),
  compatibility: openObject,
  agents: fc.array(openObject, { maxLength: 3 }),
  coordinator: openObject,
  environment: openObject,
  helperState: fc.array(content, { maxLength: 2 }),
});
const payloads = fc.uniqueArray(fc.record({ name: validId, bytes: fc.uint8Array({ maxLength: 40 }) }), {
  selector: (p) => p.name,
  maxLength: 6,
});

/** Ways to spoil a writer's input; both writers must refuse each the same way. */
const spoil = fc.oneof(
  fc.constant('none'),
  fc.constant('none'),
  fc.constant('none'),
  fc.constantFrom(
    'drop-field',
    'extra-field',
    'bad-version',
    'bad-id',
    'bad-scope',
    'bad-rational',
    'bad-digest',
    'not-array',
    'bad-agent',
    'bad-payload-name',
    'dup-payload-name',
    'wrong-payloads',
    'right-payloads',
    'unsafe-integer',
    'too-many-agents',
    'too-many-payloads',
    'not-object',
  ),
);

function spoiled(
  kind: string,
  m: Record<string, unknown>,
  ps: Payload[],
  pick: number,
): { manifest: unknown; payloads: Payload[] } {
  const out: Record<string, unknown> = { ...m };
  const fields = Object.keys(out);
  switch (kind) {
    case 'drop-field':
      delete out[fields[pick % fields.length]!];
      break;
    case 'extra-field':
      out[['extra', 'Payloads', 'aaa', 'zzz'][pick % 4]!] = null;
      break;
    case 'bad-version':
      out.envelopeVersion = [2, '1', 1.5, null][pick % 4];
      break;
    case 'bad-id':
      out[['checkpointId', 'episodeId', 'schedulerId'][pick % 3]!] = ['Bad', '', 'x'.repeat(65), 7][pick % 4];
      break;
    case 'bad-scope':
      out.sourceScope = [{ sessionId: 's', epoch: 'e', step: 3 }, { sessionId: 's', epoch: 'e', step: '1', x: 1 }, []][
        pick % 3
      ];
      break;
    case 'bad-rational':
      out.worldTime = [
        { numerator: '2', denominator: '4' },
        { numerator: '1', denominator: '0' },
        { numerator: '01', denominator: '1' },
      ][pick % 3];
      break;
    case 'bad-digest':
      out.compositionDigest = ['A'.repeat(64), 'a'.repeat(63), 5][pick % 3];
      break;
    case 'not-array':
      out[['portMap', 'agents', 'helperState'][pick % 3]!] = {};
      break;
    case 'bad-agent':
      out.agents = [[], 'fly', null][pick % 3] === null ? [null] : [[]];
      break;
    case 'bad-payload-name':
      return {
        manifest: out,
        payloads: [...ps, { name: ['Bad', '', 'a b', 'é'][pick % 4]!, bytes: new Uint8Array(1) }],
      };
    case 'dup-payload-name':
      return { manifest: out, payloads: ps.length ? [...ps, { ...ps[pick % ps.length]! }] : ps };
    case 'wrong-payloads':
      out.payloads = [{ name: 'x', byteLength: '0', digest: '0'.repeat(64) }];
      break;
    case 'right-payloads':
      out.payloads = ps.map((p) => ({
        name: p.name,
        byteLength: String(p.bytes.length),
        digest: createHash('sha256').update(p.bytes).digest('hex'),
      }));
      break;
    case 'unsafe-integer':
      out.helperState = [2 ** 53 + [0, 2, 1e6][pick % 3]!];
      break;
    case 'too-many-agents':
      out.agents = Array.from({ length: 61 }, () => ({}));
      break;
    case 'too-many-payloads':
      return {
        manifest: out,
        payloads: Array.from({ length: 65 }, (_, i) => ({ name: `p${i}`, bytes: new Uint8Array(0) })),
      };
    case 'not-object':
      return { manifest: [[], 'manifest', null][pick % 3], payloads: ps };
  }
  return { manifest: out, payloads: ps };
}

// ---------------------------------------------------------------------------------------------
// Outcomes in one comparable shape

const tsEncode = (m: unknown, ps: Payload[]): Outcome<string> =>
  tsOutcome(() => b64(encodeEnvelope(m as object, ps as EnvelopePayloadInput[])));

function tsDecode(bytes: Uint8Array): Outcome<string> {
  return tsOutcome(() => {
    const d = decodeEnvelope(bytes);
    return canonicalize({ envelopeDigest: d.envelopeDigest, manifest: d.manifest, payloads: wirePayloads(d.payloads) });
  });
}

function rustEncode(cases: { manifest: unknown; payloads: Payload[] }[]): Outcome<string>[] {
  return rustBatch<string>(
    cases.map((c) => ({ op: 'encode-envelope', manifest: c.manifest, payloads: wirePayloads(c.payloads) })),
  );
}

function rustDecode(inputs: Uint8Array[]): Outcome<string>[] {
  return rustBatch(inputs.map((b) => ({ op: 'decode-envelope', base64: b64(b) }))).map((o) =>
    'ok' in o ? { ok: canonicalize(o.ok) } : o,
  );
}

// ---------------------------------------------------------------------------------------------
// Corruptions

function reseal(buf: Buffer): Buffer {
  if (buf.length >= 80)
    createHash('sha256')
      .update(buf.subarray(0, buf.length - 48))
      .digest()
      .copy(buf, buf.length - 40);
  return buf;
}

const corruption = fc.oneof(
  fc.record({ kind: fc.constant('flip'), at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }), reseal: fc.boolean() }),
  fc.record({ kind: fc.constant('truncate'), at: fc.nat() }),
  fc.record({
    kind: fc.constant('extend'),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }),
    reseal: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('header'),
    field: fc.constantFrom(8, 12, 16, 20, 24, 28),
    delta: fc.integer({ min: -70, max: 70 }),
  }),
  fc.record({
    kind: fc.constant('entry'),
    entry: fc.nat(),
    field: fc.constantFrom(0, 5, 63, 64, 72, 80),
    delta: fc.integer({ min: -70, max: 70 }),
  }),
  fc.record({ kind: fc.constant('legacy') }),
  fc.record({ kind: fc.constant('pad-before-footer'), bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
);
type Corruption = typeof corruption extends fc.Arbitrary<infer T> ? T : never;

function corrupt(good: Buffer, c: Corruption): Buffer {
  const buf = Buffer.from(good);
  switch (c.kind) {
    case 'flip': {
      const at = c.at % buf.length;
      buf[at] = buf[at]! ^ c.xor;
      return c.reseal ? reseal(buf) : buf;
    }
    case 'truncate':
      return buf.subarray(0, c.at % buf.length);
    case 'extend': {
      const out = Buffer.concat([buf, c.bytes]);
      return c.reseal ? reseal(out) : out;
    }
    case 'header': {
      buf.writeUInt32LE((buf.readUInt32LE(c.field) + c.delta + 2 ** 32) % 2 ** 32, c.field);
      return reseal(buf);
    }
    case 'entry': {
      const count = buf.readUInt32LE(20);
      if (count === 0) return reseal(buf.subarray(0, buf.length)); // unchanged: still valid
      const at = buf.readUInt32LE(24) + (c.entry % count) * 112 + c.field;
      if (c.field >= 64 && c.field < 80)
        buf.writeBigUInt64LE((buf.readBigUInt64LE(at) + BigInt(c.delta) + 2n ** 64n) % 2n ** 64n, at);
      else buf[at] = (buf[at]! + c.delta + 256) % 256;
      return reseal(buf);
    }
    case 'legacy':
      buf.write('FLYSIM01', 0, 'latin1');
      return buf;
    case 'pad-before-footer': {
      // Bytes between the last payload and a footer that is otherwise consistent: check 6.
      const footer = Buffer.from(buf.subarray(buf.length - 48));
      const out = Buffer.concat([buf.subarray(0, buf.length - 48), c.bytes, footer]);
      out.writeBigUInt64LE(BigInt(out.length), out.length - 48);
      return reseal(out);
    }
  }
}

// ---------------------------------------------------------------------------------------------

describe.skipIf(skipReason !== null)('FLYSESS1: TypeScript and Rust agree', () => {
  beforeAll(() => buildRustCli(), 600_000);

  it('[ENV-14] both writers give identical bytes for random manifests and payloads, or the same refusal', () => {
    const seen = { ok: 0, refused: new Set<string>() };
    fc.assert(
      fc.property(
        fc.array(fc.tuple(manifest, payloads, spoil, fc.nat()), { minLength: 10, maxLength: 20 }),
        (cases) => {
          const inputs = cases.map(([m, ps, kind, pick]) => spoiled(kind, m, ps, pick));
          const rust = rustEncode(inputs);
          inputs.forEach((input, i) => {
            const ts = tsEncode(input.manifest, input.payloads);
            if ('ok' in ts) seen.ok++;
            else seen.refused.add(ts.error.reason);
            expect(rust[i], `${cases[i]![2]}`).toEqual(ts);
          });
        },
      ),
      { numRuns: 25 },
    );
    // Not vacuous: many encodings succeeded, and the spoilt inputs met several different refusals.
    expect(seen.ok).toBeGreaterThan(100);
    expect(seen.refused.size).toBeGreaterThan(5);
  });

  it('[ENV-14] TypeScript bytes decode in Rust and re-encode identically, and the reverse', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(manifest, payloads), { minLength: 5, maxLength: 10 }), (cases) => {
        // TypeScript → Rust: decode, compare with TypeScript's own decode, re-encode in Rust.
        const tsBytes = cases.map(([m, ps]) => encodeEnvelope(m, ps));
        const rustDecoded = rustDecode(tsBytes);
        tsBytes.forEach((bytes, i) => expect(rustDecoded[i]).toEqual(tsDecode(bytes)));
        const again = rustEncode(
          rustDecoded.map((o) => {
            const d = JSON.parse((o as { ok: string }).ok) as {
              manifest: unknown;
              payloads: { name: string; base64: string }[];
            };
            return {
              manifest: d.manifest,
              payloads: d.payloads.map((p) => ({ name: p.name, bytes: Buffer.from(p.base64, 'base64') })),
            };
          }),
        );
        again.forEach((o, i) => expect(o).toEqual({ ok: b64(tsBytes[i]!) }));
        // Rust → TypeScript: Rust's bytes (from the original input) decode in TypeScript and re-encode identically.
        const rustBytes = rustEncode(cases.map(([m, ps]) => ({ manifest: m, payloads: ps }))).map((o) =>
          Buffer.from((o as { ok: string }).ok, 'base64'),
        );
        rustBytes.forEach((bytes) => {
          const d = decodeEnvelope(bytes);
          expect(encodeEnvelope(d.manifest, d.payloads).equals(bytes)).toBe(true);
        });
      }),
      { numRuns: 15 },
    );
  });

  it('[ENV-14] both readers refuse the same corruptions with the same check, reason and message', () => {
    const checksSeen = new Set<number | null>();
    fc.assert(
      fc.property(manifest, payloads, fc.array(corruption, { minLength: 30, maxLength: 60 }), (m, ps, cs) => {
        const good = encodeEnvelope(m, ps);
        const inputs = cs.map((c) => corrupt(good, c));
        const rust = rustDecode(inputs);
        inputs.forEach((bytes, i) => {
          const ts = tsDecode(bytes);
          if ('error' in ts) checksSeen.add(ts.error.check);
          expect(rust[i], `${JSON.stringify(cs[i])}`).toEqual(ts);
        });
      }),
      { numRuns: 25 },
    );
    // The corruptions reach every check, not only the footer digest.
    for (const check of [1, 2, 3, 4, 5, 6, 7]) expect(checksSeen, `check ${check}`).toContain(check);
  });

  it('[ENV-9] decode-envelope exits 1 with one line naming the check; the legacy magic is named', () => {
    const good = encodeEnvelope({ ...MINIMAL_MANIFEST }, [{ name: 'a', bytes: Buffer.from('x') }]);
    expect(rustCommand('decode-envelope', good).status).toBe(0);
    const legacy = Buffer.from(good);
    legacy.write('FLYSIM01', 0, 'latin1');
    const r = rustCommand('decode-envelope', legacy);
    expect(r.status).toBe(1);
    expect(r.stdout.length).toBe(0);
    expect(r.stderr).toBe(
      'detsim-formats: [struct_envelope_legacy_format] check 1 (magic): this is the legacy FLYSIM01 format, not a FLYSESS1 envelope (read it with the FLYSIM01 reader)\n',
    );
    const enc = rustCommand(
      'encode-envelope',
      JSON.stringify({ manifest: MINIMAL_MANIFEST, payloads: [{ name: 'a', base64: 'eA==' }] }),
    );
    expect(enc.status).toBe(0);
    expect(enc.stdout.equals(good)).toBe(true);
  });
});
