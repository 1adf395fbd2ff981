// seed-derivation-v1 against the published reference vectors (fixtures/reference/seed-vectors.json)
// and the Xorshift32 kernel vector.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { deriveSeed, deriveSeeds, seedMaterial } from '../../core/formats/seed.js';
import { Xorshift32 } from '../../core/formats/xorshift.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import { refusal } from '../refusal.js';

interface SeedVectors {
  prefix: string;
  vectors: { masterSeed: string; agentId: string; material: string; materialDigest: string; seed: number }[];
  composition: { masterSeed: string; agentIds: string[]; seeds: number[] };
  invalid: { masterSeed: string; agentId?: string; agentIds?: string[]; reason: string }[];
}
const fixture = JSON.parse(
  readFileSync(new URL('../../fixtures/reference/seed-vectors.json', import.meta.url), 'utf8'),
) as SeedVectors;

describe('seed-derivation-v1 reference vectors', () => {
  it('has all 20 vectors', () => expect(fixture.vectors).toHaveLength(20));
  for (const v of fixture.vectors) {
    it(`[SEED-2, SEED-3, SEED-4] master ${v.masterSeed} agent ${v.agentId} → ${v.seed}`, () => {
      const material = seedMaterial(v.masterSeed, v.agentId);
      expect(material.toString('utf8')).toBe(v.material);
      expect(createHash('sha256').update(material).digest('hex')).toBe(v.materialDigest);
      expect(deriveSeed(v.masterSeed, v.agentId)).toBe(v.seed);
    });
  }
  it('reproduces the composition in order', () => {
    const c = fixture.composition;
    const derived = deriveSeeds(c.masterSeed, c.agentIds);
    expect(derived.seeds.map((s) => s.seed)).toEqual(c.seeds);
    expect(derived.seeds.map((s) => s.agentId)).toEqual(c.agentIds);
    expect(derived.collisions).toEqual([]);
  });
  it('[SEED-6] refuses the three invalid inputs, each with its own reason code and field', () => {
    // Which check refused, not just that something did: an id check that wrongly fired on the
    // repeat (or a repeat check that fired on a bad id) would still throw a DetsimError.
    const expected: [ReasonCode, string][] = [
      ['struct_invalid_id', 'agentId'],
      ['struct_invalid_id', 'agentId'],
      ['struct_duplicate_agent_id', 'agentIds[1]'],
    ];
    expect(fixture.invalid).toHaveLength(expected.length);
    fixture.invalid.forEach((bad, i) => {
      const e = refusal(() =>
        bad.agentIds ? deriveSeeds(bad.masterSeed, bad.agentIds) : deriveSeed(bad.masterSeed, bad.agentId!),
      );
      expect([e.reason, e.field], bad.reason).toEqual(expected[i]);
    });
    expect(refusal(() => deriveSeeds('0', ['fly-a', 'fly-a'])).message).toBe(
      'agentIds[1]: "fly-a" is repeated; equal ids would share a seed',
    );
  });
});

describe('seed-derivation-v1 edge cases', () => {
  it('[SEED-6] refuses non-canonical master seeds rather than normalising them', () => {
    for (const m of ['01', '', '-1', '+1', '1.0', '1e3', ' 1', '18446744073709551616', '0x10']) {
      const e = refusal(() => deriveSeed(m, 'fly-a'));
      expect([e.reason, e.field], m).toEqual(['struct_invalid_u64', 'masterSeed']);
    }
    expect(deriveSeed('18446744073709551615', 'fly-a')).toBe(-125244523);
  });

  it('[SEED-4, SEED-5] skips zero lanes and rehashes with "1\\n" when all eight lanes are zero', () => {
    const calls: string[] = [];
    const digest = (material: Buffer): Uint8Array => {
      calls.push(material.toString('utf8'));
      if (calls.length === 1) return new Uint8Array(32); // all lanes zero
      const d = new Uint8Array(32);
      d[12] = 0x80; // lanes 0-2 zero, lane 3 = 0x80000000
      return d;
    };
    expect(deriveSeed('7', 'fly-a', digest)).toBe(-2147483648);
    expect(calls).toEqual(['flybrain/seed-derivation-v1\n7\nfly-a\n', 'flybrain/seed-derivation-v1\n7\nfly-a\n1\n']);
  });

  it('[SEED-5] fails after four all-zero rounds, never a fallback seed', () => {
    const seen: string[] = [];
    const zero = (m: Buffer) => (seen.push(m.toString('utf8').split('\n').slice(3).join('|')), new Uint8Array(32));
    const e = refusal(() => deriveSeed('7', 'fly-a', zero));
    expect([e.reason, e.field]).toEqual(['struct_seed_all_zero', 'agentId']);
    expect(seen).toEqual(['', '1|', '2|', '3|']);
  });

  it('[SEED-8] warns naming both ids when two different ids collide', () => {
    const constant = () => Uint8Array.from({ length: 32 }, (_, i) => (i === 3 ? 5 : 0));
    const derived = deriveSeeds('1', ['ant', 'bee', 'cat'], constant);
    expect(derived.collisions).toEqual([
      { seed: 5, agentIds: ['ant', 'bee'] },
      { seed: 5, agentIds: ['ant', 'cat'] },
    ]);
  });
});

describe('Xorshift32', () => {
  it('[SEED-9] seed 22222 gives the reference sequence', () => {
    const rng = new Xorshift32(22222);
    expect([rng.nextUint(), rng.nextUint(), rng.nextUint(), rng.nextUint()]).toEqual([
      1374414818, 2413927497, 829730269, 1025812730,
    ]);
  });
  it('keeps its state as a signed i32 and resumes from it', () => {
    const a = new Xorshift32(-184946063);
    for (let i = 0; i < 10; i++) a.nextUint();
    expect(Number.isInteger(a.state) && a.state >= -(2 ** 31) && a.state < 2 ** 31).toBe(true);
    const b = new Xorshift32(a.state);
    expect(b.nextUint()).toBe(a.nextUint());
  });
  it('nextF64 is in [0,1)', () => {
    const rng = new Xorshift32(1);
    for (let i = 0; i < 1000; i++) {
      const x = rng.nextF64();
      expect(x >= 0 && x < 1).toBe(true);
    }
  });
});
