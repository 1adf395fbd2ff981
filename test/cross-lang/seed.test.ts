// seed-derivation-v1 and Xorshift32 across languages: random master seeds and compositions
// (valid, malformed, repeated ids) give the same seeds and collisions in TypeScript and Rust, or
// the same refusal; random seeds give the same Xorshift32 draws. Not the reference vectors.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { deriveSeeds } from '../../core/formats/seed.js';
import { Xorshift32 } from '../../core/formats/xorshift.js';
import { buildRustCli, rustBatch, skipReason, tsOutcome } from './rust-cli.js';

const validId = fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,63}$/);
const anyId = fc.oneof(
  { weight: 6, arbitrary: validId },
  { weight: 1, arbitrary: fc.string({ maxLength: 90 }) },
  { weight: 1, arbitrary: fc.constantFrom('', 'Fly-A', 'a'.repeat(65), ' fly', 'fly\n') },
  { weight: 1, arbitrary: fc.constantFrom(3, null, false, ['fly-a'], { id: 'fly-a' }) as fc.Arbitrary<never> },
);
const validMaster = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String);
const anyMaster = fc.oneof(
  { weight: 6, arbitrary: validMaster },
  { weight: 1, arbitrary: fc.constantFrom(7, null, true, ['1'], { n: '1' }) as fc.Arbitrary<never> },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '01',
      '',
      '-1',
      '+1',
      '1.0',
      '1e3',
      ' 1',
      '18446744073709551616',
      '0x10',
      '99999999999999999999',
    ),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 100 }) },
);
/** A composition, sometimes with an id repeated. */
const composition = fc
  .tuple(fc.array(anyId, { minLength: 0, maxLength: 8 }), fc.nat(), fc.boolean())
  .map(([ids, at, repeat]) => (repeat && ids.length > 0 ? [...ids, ids[at % ids.length]!] : ids));

describe.skipIf(skipReason !== null)('seeds: TypeScript and Rust agree', () => {
  beforeAll(() => buildRustCli(), 600_000);

  it('[SEED-10] random compositions derive the same seeds and collisions, or the same refusal', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(anyMaster, composition), { minLength: 30, maxLength: 60 }), (drawn) => {
        // One composition that always derives, so a batch the generator drew all-refused still
        // compares a derivation (the check below keeps the property from passing vacuously).
        const cases: typeof drawn = [...drawn, ['0', ['anchor-agent']]];
        const rust = rustBatch(cases.map(([masterSeed, agentIds]) => ({ op: 'seed', masterSeed, agentIds })));
        let derived = 0;
        cases.forEach(([masterSeed, agentIds], i) => {
          const ts = tsOutcome(() => canonicalize(deriveSeeds(masterSeed, agentIds)));
          const r = rust[i]!;
          const got = 'ok' in r ? { ok: canonicalize(r.ok) } : r;
          expect(got, `${JSON.stringify(masterSeed)} ${JSON.stringify(agentIds)}`).toEqual(ts);
          if ('ok' in ts) derived++;
        });
        expect(derived).toBeGreaterThan(0);
      }),
      { numRuns: 20 },
    );
  });

  it('[SEED-10] a repeat before a malformed or non-string id is refused as the repeat in both languages, and the other way round', () => {
    const cases: [string, unknown[]][] = [
      ['0', ['i', 'i', '']],
      ['0', ['i', 'i', 3]],
      ['0', ['', 'i', 'i']],
      ['0', [3, 'i', 'i']],
    ];
    const rust = rustBatch(cases.map(([masterSeed, agentIds]) => ({ op: 'seed', masterSeed, agentIds })));
    const fields = cases.map(([masterSeed, agentIds], i) => {
      const ts = tsOutcome(() => canonicalize(deriveSeeds(masterSeed, agentIds as string[])));
      expect(rust[i], JSON.stringify(agentIds)).toEqual(ts);
      return (ts as { error: { field: string } }).error.field;
    });
    expect(fields).toEqual(['agentIds[1]', 'agentIds[1]', 'agentIds[0]', 'agentIds[0]']);
  });

  it('[SEED-10] Xorshift32 draws the same values from random seeds', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.integer({ min: 0, max: 40 })), {
          minLength: 20,
          maxLength: 40,
        }),
        (cases) => {
          const rust = rustBatch<{ state: number; values: number[] }>(
            cases.map(([seed, count]) => ({ op: 'xorshift', seed, count })),
          );
          cases.forEach(([seed, count], i) => {
            const rng = new Xorshift32(seed);
            const values = Array.from({ length: count }, () => rng.nextUint());
            expect(rust[i]).toEqual({ ok: { state: rng.state, values } });
          });
        },
      ),
      { numRuns: 10 },
    );
  });
});
