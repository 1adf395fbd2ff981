// sweep-replicate-seed-v1 (docs/spec/seed-derivation.md, "Replicate master seeds"): the master seed
// of replicate r of a sweep, from the master seed its grid point would run with. Every replicate's
// seed is derived (replicate 0 too), so replicates never silently share a seed, and the same base
// seed and r always give the same seed, in any language. NOT the per-agent derivation
// (core/formats/seed.ts), which each run then applies to its own master seed.
import { createHash } from 'node:crypto';
import { readU64, type U64 } from '../../core/formats/scalars.js';

/** The derivation's name, recorded in sweep.json. */
export const REPLICATE_SEED_ALGORITHM = 'sweep-replicate-seed-v1';
const PREFIX = 'detsim/sweep-replicate-seed-v1';

/** The text hashed for replicate `replicate` of base master seed `base` (both in canonical decimal). */
export function replicateSeedMaterial(base: U64, replicate: number): Buffer {
  return Buffer.from(`${PREFIX}\n${base}\n${replicate}\n`, 'utf8');
}

/** Replicate `replicate`'s master seed: the first 8 bytes of SHA-256(material), big-endian, as a U64. */
export function replicateSeed(baseSeed: string, replicate: number): U64 {
  const base = readU64(baseSeed, 'masterSeed');
  if (!Number.isSafeInteger(replicate) || replicate < 0)
    throw new RangeError(`replicate ${replicate} is not a whole number`);
  const digest = createHash('sha256').update(replicateSeedMaterial(base, replicate)).digest();
  return digest.readBigUInt64BE(0).toString();
}
