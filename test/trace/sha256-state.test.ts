// The exportable SHA-256 (coordinator/trace/sha256-state.ts) against node:crypto: any data fed in
// any chunks gives node's digest, and a state saved at any point and restored continues to it.
// Also a state recorded by the former implementation (Uint32 words) is read and continued the same.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Sha256Stream } from '../../coordinator/trace/sha256-state.js';

const nodeHex = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

describe('Sha256Stream', () => {
  it('any chunking, with a save and restore between chunks, gives node:crypto digest', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 700 }),
        fc.array(fc.nat({ max: 150 }), { maxLength: 12 }),
        (data, cuts) => {
          let s = new Sha256Stream();
          let at = 0;
          for (const c of cuts) {
            s.update(data.subarray(at, at + c));
            at = Math.min(data.length, at + c);
            const state = s.state();
            expect(BigInt(state.length)).toBe(BigInt(at));
            expect(state.tail).toBe(Buffer.from(data.subarray(at - (at % 64), at)).toString('hex'));
            s = Sha256Stream.from(state);
          }
          s.update(data.subarray(at));
          expect(s.digest()).toBe(nodeHex(data));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('strings hash as UTF-8, over many blocks in one update', () => {
    const text = `${'détsim 😀 '.repeat(5000)}\n`;
    expect(new Sha256Stream().update(text).digest()).toBe(nodeHex(Buffer.from(text, 'utf8')));
  });

  it('continues a recorded state: chaining words above 2^31 included', () => {
    // The state after "abc" * 30 (90 bytes), as the earlier implementation (Uint32 words) recorded it.
    const data = Buffer.from('abc'.repeat(30));
    const recorded = {
      h: '47afa2061ca2df6e3ceb998796fb5f8ed81825503687566159e87975cbe81304',
      length: '90',
      tail: '6263616263616263616263616263616263616263616263616263',
    };
    expect(new Sha256Stream().update(data).state()).toEqual(recorded);
    expect(recorded.h).toMatch(/^[0-9a-f]{64}$/);
    expect(recorded.h.match(/.{8}/g)!.some((w) => parseInt(w, 16) >= 2 ** 31)).toBe(true);
    expect(Sha256Stream.from(recorded).state()).toEqual(recorded);
    expect(Sha256Stream.from(recorded).update('x').digest()).toBe(nodeHex(Buffer.concat([data, Buffer.from('x')])));
  });
});
