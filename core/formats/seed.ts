// seed-derivation-v1 (docs/spec/seed-derivation.md): one independent i32 seed per agent from a
// recorded master seed and a stable agent id. Not an RNG: the kernel RNG is in xorshift.ts.
import { createHash } from 'node:crypto';
import { DetsimError } from './errors.js';
import { readId, readU64, type Id, type U64 } from './scalars.js';

/** The name of the seed derivation (docs/spec/seed-derivation.md), recorded in run.json. */
export const SEED_ALGORITHM = 'seed-derivation-v1';
export const SEED_PREFIX = 'flybrain/seed-derivation-v1';
const MAX_ROUNDS = 4;

/** The hash under the seed derivation (SHA-256 by default; tests substitute one to force collisions). */
export type DigestFn = (material: Buffer) => Uint8Array;
const sha256: DigestFn = (material) => createHash('sha256').update(material).digest();

export function seedMaterial(masterSeed: U64, agentId: Id): Buffer {
  return Buffer.from(`${SEED_PREFIX}\n${masterSeed}\n${agentId}\n`, 'utf8');
}

/** The first nonzero big-endian u32 lane of a digest as a two's-complement i32, or null. */
export function firstNonzeroLane(digest: Uint8Array): number | null {
  const view = new DataView(digest.buffer, digest.byteOffset, digest.byteLength);
  for (let off = 0; off + 4 <= 32; off += 4) {
    const lane = view.getInt32(off, false);
    if (lane !== 0) return lane;
  }
  return null;
}

/**
 * Derive one agent's seed. `digest` is injectable only so the all-zero-lanes rehash path can be
 * tested; production always uses SHA-256.
 */
export function deriveSeed(masterSeed: string, agentId: string, digest: DigestFn = sha256): number {
  const master = readU64(masterSeed, 'masterSeed');
  const id = readId(agentId, 'agentId');
  const material = seedMaterial(master, id);
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const input = round === 0 ? material : Buffer.concat([material, Buffer.from(`${round}\n`, 'utf8')]);
    const lane = firstNonzeroLane(digest(input));
    if (lane !== null) return lane;
  }
  throw new DetsimError(
    'struct_seed_all_zero',
    `seed derivation for ${id} found only zero lanes after ${MAX_ROUNDS} rounds`,
    'agentId',
  );
}

/** One participant's derived i32 seed. */
export interface DerivedSeed {
  agentId: Id;
  seed: number;
}

/** Two agents whose derived seeds are equal (reported as a warning, never hidden). */
export interface SeedCollision {
  seed: number;
  agentIds: [Id, Id];
}

/** The seeds of a composition, in the order given, with the collisions among them. */
export interface DerivedSeeds {
  algorithm: typeof SEED_ALGORITHM;
  masterSeed: U64;
  seeds: DerivedSeed[];
  /** Pairs of different ids that derived the same seed (a warning, never silent). */
  collisions: SeedCollision[];
}

/** Derive seeds for a composition, in the order given; a repeated id is refused. */
export function deriveSeeds(masterSeed: string, agentIds: readonly string[], digest: DigestFn = sha256): DerivedSeeds {
  const master = readU64(masterSeed, 'masterSeed');
  const seen = new Set<string>();
  agentIds.forEach((id, i) => {
    readId(id, `agentIds[${i}]`);
    if (seen.has(id)) {
      throw new DetsimError(
        'struct_duplicate_agent_id',
        `agentIds[${i}]: ${JSON.stringify(id)} is repeated; equal ids would share a seed`,
        `agentIds[${i}]`,
      );
    }
    seen.add(id);
  });
  const seeds = agentIds.map((agentId) => ({ agentId, seed: deriveSeed(master, agentId, digest) }));
  const firstBySeed = new Map<number, Id>();
  const collisions: SeedCollision[] = [];
  for (const { agentId, seed } of seeds) {
    const other = firstBySeed.get(seed);
    if (other !== undefined) collisions.push({ seed, agentIds: [other, agentId] });
    else firstBySeed.set(seed, agentId);
  }
  return { algorithm: SEED_ALGORITHM, masterSeed: master, seeds, collisions };
}

export function collisionWarning(c: SeedCollision): string {
  return `warning [ident_seed_collision]: agents ${c.agentIds[0]} and ${c.agentIds[1]} derived the same seed ${c.seed}`;
}
