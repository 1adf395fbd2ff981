// Reading a state payload with its large bin fields in memory of their own (workers/state-layout.ts,
// workers/payload-scatter.ts, workers/owned-bytes.ts, workers/recycled-bytes.ts): the layout names exactly the large bins,
// the scattered read hashes and decodes to what a whole read gives, a layout it cannot name falls
// back to the whole read, and f64FromBytes / f32FromBytes take such memory over once, never memory
// anyone else may hold; memory a model gives back is read into by a later field of its length.
// Real files in a temporary store.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { handOver } from '../../workers/owned-bytes.js';
import { readStorePayload } from '../../workers/checks.js';
import { MIN_SCATTER_BYTES, readStoreScattered } from '../../workers/payload-scatter.js';
import { giveBack, RECYCLE_MAX_BYTES, RECYCLE_MIN_BYTES, recycledBytes, reuse } from '../../workers/recycled-bytes.js';
import { f32FromBytes, f64FromBytes, recycle } from '../../workers/sdk.js';
import { decodeState, encodeState } from '../../workers/state-codec.js';
import { MIN_FIELD_BYTES, scanLayout } from '../../workers/state-layout.js';

const store = mkdtempSync(join(tmpdir(), 'detsim-scatter-'));
afterAll(() => rmSync(store, { recursive: true, force: true }));

const whole = (bytes: Uint8Array) => (start: number, end: number) => bytes.subarray(start, end);
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const filled = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);

/** A file in the store holding `payload` after `lead` bytes of something else. */
function stored(name: string, payload: Uint8Array, lead = 13): { path: string; offset: bigint } {
  const path = join(store, name);
  writeFileSync(path, Buffer.concat([Buffer.alloc(lead, 0xee), payload, Buffer.alloc(7, 0xee)]));
  return { path, offset: BigInt(lead) };
}

/** A lif-like agent payload: two typed-array fields beside small ones. */
function lifLike(neurons: number) {
  return {
    agentId: 'a',
    kind: 'agent',
    observation: { food: [1, 2], tag: 'x' },
    seed: 7,
    state: {
      baseline: filled(neurons * 4, 1),
      membrane: filled(neurons * 8, 2),
      neurons,
      rewardTotal: 1.5,
      rng: 12345,
    },
  };
}

describe('state layout', () => {
  it('names every bin of at least MIN_FIELD_BYTES by offset, length and path, and no other', () => {
    const bin = fc.integer({ min: 0, max: 3 * MIN_FIELD_BYTES }).map((n) => filled(n, n));
    const leaf = fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string(), bin);
    const tree = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        leaf,
        fc.array(tie('node'), { maxLength: 3 }),
        fc.dictionary(fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 6 }), tie('node'), { maxKeys: 3 }),
      ),
    })).node;
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom('a', 'b', 'state', 'x'), tree, { minKeys: 1 }), (value) => {
        fc.pre(!JSON.stringify(Object.keys(value)).includes('__proto__'));
        const bytes = encodeState(value);
        const fields = scanLayout(whole(bytes), bytes.length);
        const big: { path: (string | number)[]; bytes: Uint8Array }[] = [];
        const walk = (v: unknown, path: (string | number)[]): void => {
          if (v instanceof Uint8Array) {
            if (v.byteLength >= MIN_FIELD_BYTES) big.push({ path, bytes: v });
          } else if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...path, i]));
          else if (typeof v === 'object' && v !== null)
            for (const k of Object.keys(v).sort()) walk((v as Record<string, unknown>)[k], [...path, k]);
        };
        walk(value, []);
        if (big.some((b) => b.path.some((p) => p === '__proto__'))) return;
        expect(fields).not.toBeNull();
        expect(fields!.map((f) => f.path)).toEqual(big.map((b) => b.path));
        fields!.forEach((f, i) => {
          expect(f.length).toBe(big[i]!.bytes.byteLength);
          expect(Buffer.compare(bytes.subarray(f.at, f.at + f.length), big[i]!.bytes)).toBe(0);
        });
      }),
      { numRuns: 60 },
    );
  });

  it('gives null for a layout it cannot name exactly', () => {
    const withKey = (b: Buffer) => {
      const at = b.indexOf('_________');
      b.write('__proto__', at, 'latin1');
      return b;
    };
    const big = filled(MIN_FIELD_BYTES, 3);
    const cases: [string, Uint8Array][] = [
      ['a large bin as the whole payload', encodeState(big)],
      // The TypeScript codec refuses to write the key (it would come back renamed); another worker's may.
      ['a large bin under __proto__ (the codec renames the key)', withKey(encodeState({ _________: big, a: 1 }))],
      ['a large bin under a non-ASCII key', encodeState({ ['é']: big })],
      [
        'a large bin in a map with an integer key',
        Buffer.from([0x82, 0x01, 0x02, ...encodeState({ a: big }).subarray(1)]),
      ],
      ['a truncated payload', encodeState({ a: big }).subarray(0, 100)],
      ['trailing bytes', Buffer.concat([encodeState({ a: big }), Buffer.from([0])])],
      ['the unused type byte 0xc1', Buffer.from([0x81, 0xa1, 0x61, 0xc1])],
      ['an ext value (fixext 1), which the codec never writes', Buffer.from([0x81, 0xa1, 0x61, 0xd4, 0x01, 0x00])],
    ];
    for (const [what, bytes] of cases) expect(scanLayout(whole(bytes), bytes.length), what).toBeNull();
    // A repeated key (not made by the codec, which sorts unique keys): which value wins is the codec's business.
    const one = encodeState({ a: big });
    const twice = Buffer.concat([Buffer.from([0x82]), one.subarray(1), one.subarray(1)]);
    expect(scanLayout(whole(twice), twice.length)).toBeNull();
  });
});

describe('scattered payload read', () => {
  it('hashes the payload and decodes to what the whole read gives, each large field in memory of its own', async () => {
    const payload = encodeState(lifLike(40_000));
    expect(payload.length).toBeGreaterThan(MIN_SCATTER_BYTES);
    const file = stored('lif.flysess', payload);
    const got = await readStoreScattered(store, file, BigInt(payload.length));
    expect(got).not.toBeNull();
    expect(got!.digest).toBe(sha256(payload));
    expect(got!.decoded).toEqual(decodeState(payload));
    const state = (got!.decoded as { state: { baseline: Uint8Array; membrane: Uint8Array } }).state;
    for (const field of [state.baseline, state.membrane]) {
      expect(field.byteOffset).toBe(0);
      expect(field.byteLength).toBe(field.buffer.byteLength);
    }
    // The model takes the memory over, once: a second call copies.
    const membrane = f64FromBytes(state.membrane);
    expect(membrane.buffer).toBe(state.membrane.buffer);
    expect(f64FromBytes(state.membrane).buffer).not.toBe(state.membrane.buffer);
    expect(f32FromBytes(state.baseline).buffer).toBe(state.baseline.buffer);
    expect(Buffer.from(membrane.buffer).equals(Buffer.from(filled(40_000 * 8, 2)))).toBe(true);
  });

  it('gives the digest of the bytes read, so a changed payload is refused by its digest check', async () => {
    const payload = encodeState(lifLike(40_000));
    const changed = Buffer.from(payload);
    changed[changed.length - 100]! ^= 1; // inside the membrane field
    const file = stored('changed.flysess', changed);
    const got = await readStoreScattered(store, file, BigInt(changed.length));
    expect(got!.digest).toBe(sha256(changed));
    expect(got!.digest).not.toBe(sha256(payload));
  });

  it('reads a small payload or an unnameable layout whole (null), and readStorePayload then reads it as before', async () => {
    const small = encodeState(lifLike(1000));
    expect(await readStoreScattered(store, stored('small.flysess', small), BigInt(small.length))).toBeNull();
    const odd = encodeState({ ['é']: filled(MIN_SCATTER_BYTES, 4) });
    const file = stored('odd.flysess', odd);
    expect(await readStoreScattered(store, file, BigInt(odd.length))).toBeNull();
    const read = await readStorePayload(store, file, BigInt(odd.length));
    expect(Buffer.from(read.bytes).equals(odd)).toBe(true);
    expect(read.digest).toBe(sha256(odd));
  });

  it('refuses a file outside the store and a range past its end as the whole read does', async () => {
    const payload = encodeState(lifLike(40_000));
    const outside = mkdtempSync(join(tmpdir(), 'detsim-scatter-out-'));
    try {
      const path = join(outside, 'x.flysess');
      writeFileSync(path, payload);
      await expect(readStoreScattered(store, { path, offset: 0n }, BigInt(payload.length))).rejects.toThrow(
        "params.payload.file.path is not a regular file inside this worker's store directory",
      );
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
    const file = stored('short.flysess', payload);
    await expect(readStoreScattered(store, file, BigInt(payload.length + 8))).rejects.toThrow(
      'offset + byteLength run past the end of the payload file',
    );
  });
});

describe('taking memory over', () => {
  it('copies bytes nobody handed over, even when they span a whole aligned buffer', () => {
    const bytes = new Uint8Array(new ArrayBuffer(64)).fill(1);
    const out = f64FromBytes(bytes);
    expect(out.buffer).not.toBe(bytes.buffer);
    bytes.fill(2);
    expect(new Uint8Array(out.buffer)[0]).toBe(1);
  });

  it('refuses a length that is not whole elements without taking the buffer over', () => {
    const bytes = new Uint8Array(new ArrayBuffer(20));
    handOver(bytes);
    expect(() => f64FromBytes(bytes)).toThrow('20 bytes is not a whole number of f64');
    expect(f32FromBytes(bytes).buffer).toBe(bytes.buffer);
  });

  it('never marks a view of part of a buffer', () => {
    const backing = new ArrayBuffer(64);
    const part = new Uint8Array(backing, 8, 32);
    handOver(part);
    expect(f64FromBytes(part).buffer).not.toBe(backing);
    expect(f64FromBytes(new Uint8Array(backing)).buffer).not.toBe(backing);
  });
});

describe('memory a model gives back (recycled-bytes.ts)', () => {
  it('a field of the same length is read into it, every byte overwritten; other lengths get fresh memory', async () => {
    const payload = encodeState(lifLike(40_000));
    const file = stored('recycle.flysess', payload);
    const stale = new Float64Array(40_000).fill(-1); // the membrane's length, full of old values
    const other = new Float64Array(40_001);
    recycle(stale);
    recycle(other);
    const before = recycledBytes();
    const got = await readStoreScattered(store, file, BigInt(payload.length));
    const state = (got!.decoded as { state: { baseline: Uint8Array; membrane: Uint8Array } }).state;
    expect(state.membrane.buffer).toBe(stale.buffer);
    expect(state.baseline.buffer).not.toBe(other.buffer);
    expect(recycledBytes()).toBe(before - stale.byteLength);
    expect(got!.decoded).toEqual(decodeState(payload));
    expect(got!.digest).toBe(sha256(payload));
    // Taken once: the next read of the same payload gets fresh memory.
    const again = await readStoreScattered(store, file, BigInt(payload.length));
    expect((again!.decoded as { state: { membrane: Uint8Array } }).state.membrane.buffer).not.toBe(stale.buffer);
    expect(reuse(other.byteLength)?.buffer).toBe(other.buffer);
  });

  it('keeps only whole, unshared buffers of field size, each once, up to the cap', () => {
    const whole64 = new Uint8Array(RECYCLE_MIN_BYTES);
    expect(giveBack(whole64)).toBe(true);
    expect(giveBack(whole64)).toBe(false); // already kept
    expect(giveBack(new Uint8Array(RECYCLE_MIN_BYTES - 1))).toBe(false); // too small to be a field
    expect(giveBack(new Uint8Array(new ArrayBuffer(2 * RECYCLE_MIN_BYTES), 8))).toBe(false); // a part
    expect(giveBack(new Uint8Array(new SharedArrayBuffer(RECYCLE_MIN_BYTES)))).toBe(false);
    expect(reuse(RECYCLE_MIN_BYTES)?.buffer).toBe(whole64.buffer);
    expect(reuse(RECYCLE_MIN_BYTES)).toBeNull();
    // The cap: a buffer that would take the pool past RECYCLE_MAX_BYTES is left to the GC.
    const left = RECYCLE_MAX_BYTES - recycledBytes();
    const fits = new Uint8Array(left - RECYCLE_MIN_BYTES);
    expect(giveBack(fits)).toBe(true);
    expect(giveBack(new Uint8Array(RECYCLE_MIN_BYTES + 8))).toBe(false);
    expect(reuse(fits.byteLength)?.buffer).toBe(fits.buffer);
  });
});
