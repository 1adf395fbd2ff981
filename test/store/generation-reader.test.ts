// The chunked generation reader (coordinator/store/generation-reader.ts) against the in-memory
// reader: for the reference envelope and for damaged copies of it (each byte flipped, with and
// without a resealed footer, truncated), verifyGeneration with chunks of a few bytes accepts exactly
// what decodeEnvelope accepts and refuses with exactly its reason and message, whether a payload's
// check-5 digest is hashed here or left to a delegate that does not confirm it; the ranges asked
// for with `keep` come back as the very bytes the pass hashed.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { claimedRanges, decodeEnvelope, rangeKey } from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import { generationIdentityOf, verifyGeneration, type GenerationRecord } from '../../coordinator/store/store.js';
import type { ReadEnvelopeOptions } from '../../coordinator/store/generation-reader.js';
import { reseal } from '../formats/envelope-raw.js';

const fixture = JSON.parse(
  readFileSync(new URL('../../fixtures/reference/checkpoint-envelope.json', import.meta.url), 'utf8'),
) as { envelope: { base64: string } };
const reference = Buffer.from(fixture.envelope.base64, 'base64');
const identity = generationIdentityOf(decodeEnvelope(reference).manifest);
const dir = mkdtempSync(join(tmpdir(), 'detsim-generation-reader-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The record fields an envelope implies when it decodes (the reference's otherwise). */
function identityOf(bytes: Buffer): typeof identity {
  try {
    return generationIdentityOf(decodeEnvelope(bytes).manifest);
  } catch {
    return identity;
  }
}

/** Write `bytes` as the generation of the reference's checkpoint, with a record that matches them. */
function generation(bytes: Buffer): GenerationRecord {
  const file = `${identity.checkpointId}.flysess`;
  writeFileSync(join(dir, file), bytes);
  return {
    ...identityOf(bytes),
    checkpointId: identity.checkpointId,
    byteLength: String(bytes.length),
    envelopeDigest: createHash('sha256').update(bytes).digest('hex'),
    file,
  };
}

/** What the in-memory reader says: ok, or the refusal as the store words it. */
function expected(bytes: Buffer): { ok: true } | { reason: string; message: string } {
  try {
    decodeEnvelope(bytes);
    return { ok: true };
  } catch (e) {
    if (!(e instanceof DetsimError)) throw e;
    return { reason: e.reason, message: `${identity.checkpointId}.flysess: envelope: ${e.message}` };
  }
}

async function streamed(
  bytes: Buffer,
  options: ReadEnvelopeOptions,
): Promise<{ ok: true } | { reason: string; message: string }> {
  try {
    const g = await verifyGeneration(dir, generation(bytes), options);
    expect(g.envelope).toEqual((({ payloads: _p, ...rest }) => rest)(decodeEnvelope(bytes)));
    return { ok: true };
  } catch (e) {
    if (!(e instanceof DetsimError)) throw e;
    return { reason: e.reason, message: e.message };
  }
}

/** A delegate that takes every claimed range and confirms none (a worker that read other bytes). */
const unconfirmed: ReadEnvelopeOptions['delegate'] = (claimed) =>
  new Map(claimed.map((r) => [rangeKey(r.offset, r.length), Promise.resolve(false)]));

/** The reference with byte `at` flipped, as it is and with its footer digest made to match again. */
function damaged(at: number): Buffer[] {
  const b = Buffer.from(reference);
  b[at]! ^= 0x01;
  return at < b.length - 48 ? [b, reseal(b)] : [b];
}

describe('verifyGeneration reads in bounded chunks, with the in-memory reader’s outcomes', () => {
  it('accepts the reference with chunks of 1, 7 and 4096 bytes, layout and digest as decodeEnvelope gives', async () => {
    for (const chunkBytes of [1, 7, 4096]) expect(await streamed(reference, { chunkBytes })).toEqual({ ok: true });
  });

  it('every flipped byte (footer resealed or not) and every truncation: the same refusal, chunks of 7', async () => {
    const cases: Buffer[] = [];
    for (let at = 0; at < reference.length; at += 17) cases.push(...damaged(at));
    for (const cut of [0, 10, 79, 80, 200, reference.length - 49, reference.length - 1])
      cases.push(reference.subarray(0, cut));
    const reasons = new Set<string>();
    // A flip that renames the checkpoint is a different generation file: not this test's concern.
    for (const bytes of cases.filter((c) => identityOf(c).checkpointId === identity.checkpointId)) {
      const want = expected(bytes);
      expect(await streamed(bytes, { chunkBytes: 7 })).toEqual(want);
      if ('reason' in want) reasons.add(want.reason);
    }
    // The cases reach checks 1, 2, 3, 5 (digest) and 7, not only the footer digest.
    expect(reasons).toContain('audit_envelope_digest');
    expect(reasons).toContain('audit_payload_digest_mismatch');
    expect(reasons).toContain('struct_envelope_manifest');
    expect(reasons).toContain('size_envelope_too_short');
  });

  it('a damaged payload behind a resealed footer: a delegate that does not confirm it changes nothing', async () => {
    const ranges = claimedRanges({ length: reference.length, bytes: (s, e) => reference.subarray(s, e) });
    for (const r of ranges) {
      const [, resealed] = damaged(r.offset + Math.floor(r.length / 2));
      const want = expected(resealed!);
      expect(want).toMatchObject({ reason: 'audit_payload_digest_mismatch' });
      expect(await streamed(resealed!, { chunkBytes: 3, delegate: unconfirmed })).toEqual(want);
      expect(await streamed(resealed!, { chunkBytes: 3 })).toEqual(want);
    }
  });

  it('a confirmed delegate stands in for check 5 of its range (that range is not hashed here)', async () => {
    let asked = 0;
    const confirmed: ReadEnvelopeOptions['delegate'] = (claimed) => {
      asked = claimed.length;
      return new Map(claimed.map((r) => [rangeKey(r.offset, r.length), Promise.resolve(true)]));
    };
    expect(await streamed(reference, { chunkBytes: 5, delegate: confirmed })).toEqual({ ok: true });
    expect(asked).toBeGreaterThan(0);
  });

  it('`keep`: the pass hands back the bytes of the ranges asked for (chunks of 1, 7, 4096), none other, none confirmed elsewhere', async () => {
    const payloads = decodeEnvelope(reference).payloads;
    const entries = decodeEnvelope(reference).layout.entries;
    const wanted = new Set(payloads.filter((_, i) => i % 2 === 0).map((p) => p.name));
    expect(wanted.size).toBeGreaterThan(1);
    for (const chunkBytes of [1, 7, 4096]) {
      const g = await verifyGeneration(dir, generation(reference), { chunkBytes, keep: (r) => wanted.has(r.name) });
      const byKey = new Map(entries.map((e) => [rangeKey(e.offset, e.byteLength), e.name]));
      expect([...g.kept.keys()].map((k) => byKey.get(k)).sort()).toEqual([...wanted].sort());
      for (const e of entries.filter((x) => wanted.has(x.name)))
        expect(g.kept.get(rangeKey(e.offset, e.byteLength))).toEqual(payloads.find((p) => p.name === e.name)!.bytes);
    }
    // A range a delegate confirmed was not hashed here, so its bytes were not kept either.
    const confirmed: ReadEnvelopeOptions['delegate'] = (claimed) =>
      new Map(claimed.map((r) => [rangeKey(r.offset, r.length), Promise.resolve(true)]));
    const g = await verifyGeneration(dir, generation(reference), { delegate: confirmed, keep: () => true });
    expect(g.kept.size).toBe(0);
  });
});
