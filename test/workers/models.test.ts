// Unit checks of the worker building blocks without processes: the tick accumulator (60 Hz and
// Game Boy cadences against a closed-form oracle), the deterministic state codec, and the three
// reference models against independent re-implementations written from their RULES comments
// (what the Rust port will follow), so code and documentation cannot drift apart.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { canonicalDigest } from '../../core/formats/canonical-json.js';
import { RationalNs, U64_MAX } from '../../core/formats/scalars.js';
import { forage } from '../../workers/models/forage.js';
import { lif } from '../../workers/models/lif.js';
import { walker } from '../../workers/models/walker.js';
import { decodeState, encodeState, encodeStatePieces } from '../../workers/state-codec.js';
import { Packr } from 'msgpackr';
import fc from 'fast-check';
import { TickClock } from '../../workers/tick-clock.js';

const MS = RationalNs.of(1_000_000n, 1n);

/** Independent Xorshift32 from docs/spec/seed-derivation.md (not the project's class); `.state()` is the i32 state. */
function xs(seed: number): (() => number) & { state: () => number } {
  let s = seed | 0;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return s >>> 0;
  };
  return Object.assign(next, { state: () => s | 0 });
}

// Vectors for ports of the models (the Rust port matches them bit for bit): recorded from the
// independent implementations below, which the TypeScript models must also reproduce. Otherwise
// the file must match exactly. UPDATE_MODEL_VECTORS=1 (re)writes it, and then the run FAILS (the
// "vectors were compared" test): a rewrite compared nothing, so it can never pass for a check. In
// CI (CI set) it is refused: nothing is written.
const VECTORS = join(dirname(fileURLToPath(import.meta.url)), 'vectors', 'models-v1.json');
const updating = process.env.UPDATE_MODEL_VECTORS === '1';
const inCi = (process.env.CI ?? '') !== '';
const stored = existsSync(VECTORS) ? (JSON.parse(readFileSync(VECTORS, 'utf8')) as Record<string, unknown>) : {};
const recorded: Record<string, unknown> = {};
function vector(name: string, value: unknown): void {
  recorded[name] = value;
  if (!updating)
    expect(
      JSON.parse(JSON.stringify(value)),
      `vector ${name} differs from ${VECTORS} (UPDATE_MODEL_VECTORS=1 rewrites it)`,
    ).toEqual(stored[name]);
}

it('the model vectors were compared, not rewritten (UPDATE_MODEL_VECTORS is unset)', () => {
  expect(inCi && updating, 'UPDATE_MODEL_VECTORS=1 is refused in CI: nothing was written, nothing compared').toBe(
    false,
  );
  expect(
    updating,
    `UPDATE_MODEL_VECTORS=1: ${VECTORS} is rewritten and nothing was compared; review the diff, unset it and run again`,
  ).toBe(false);
});

afterAll(() => {
  if (!updating || inCi) return;
  mkdirSync(dirname(VECTORS), { recursive: true });
  writeFileSync(
    VECTORS,
    `${JSON.stringify({ about: 'detsim reference model vectors v1: inputs and expected outputs of walker-v1, lif-v1, forage-v1 (see the RULES comments in workers/models/)', ...recorded }, null, 1)}\n`,
  );
});

describe('TickClock', () => {
  it('[LOCK-8] 60 Hz world with 1 ms ticks: 16, 17, 17, total 50, remainder 0', () => {
    const c = new TickClock(RationalNs.of(50_000_000n, 3n), MS);
    expect([c.advance(), c.advance(), c.advance()]).toEqual([16n, 17n, 17n]);
    expect(c.brainTicks).toBe(50n);
    expect(c.remainder.toJSON()).toEqual({ numerator: '0', denominator: '1' });
  });

  it('[LOCK-8] matches floor((k+1)·S/T) − floor(k·S/T) for the Game Boy cadence over 1000 steps', () => {
    const S = { n: 8_572_265_625n, d: 512n };
    const c = new TickClock(RationalNs.of(S.n, S.d), MS);
    const T = 1_000_000n;
    const fl = (k: bigint): bigint => (k * S.n) / (S.d * T);
    const got: bigint[] = [];
    const want: bigint[] = [];
    for (let k = 0n; k < 1000n; k++) {
      got.push(c.advance());
      want.push(fl(k + 1n) - fl(k));
    }
    expect(got.slice(0, 4)).toEqual([16n, 17n, 17n, 16n]);
    expect(got).toEqual(want);
    // remainder = 1000·S − ticks·T, exactly
    const rem = RationalNs.of(1000n * S.n, S.d).sub(RationalNs.of(c.brainTicks * T, 1n));
    expect(c.remainder.equals(rem)).toBe(true);
  });

  it('[LOCK-8] resumes from a captured remainder and brainTicks exactly', () => {
    const a = new TickClock(RationalNs.of(50_000_000n, 3n), MS);
    a.advance();
    const b = new TickClock(RationalNs.of(50_000_000n, 3n), MS, a.remainder, a.brainTicks);
    for (let i = 0; i < 10; i++) expect(b.advance()).toBe(a.advance());
    expect(b.brainTicks).toBe(a.brainTicks);
  });

  it('refuses ticks or a total beyond U64 and leaves the clock as it was', () => {
    const oneNs = RationalNs.of(1n, 1n);
    const total = new TickClock(oneNs, oneNs, RationalNs.ZERO, U64_MAX);
    expect(() => total.advance()).toThrow(/brainTicks beyond U64/);
    expect(total.brainTicks).toBe(U64_MAX);
    // 2^64 ticks in one step: 2^40 ns steps of 2^-24 ns ticks.
    const step = new TickClock(RationalNs.of(2n ** 40n, 1n), RationalNs.of(1n, 2n ** 24n));
    expect(() => step.advance()).toThrow(/ticks beyond U64/);
    expect(step.brainTicks).toBe(0n);
    expect(step.remainder.toJSON()).toEqual({ numerator: '0', denominator: '1' });
  });
});

describe('state codec', () => {
  it('encodes independent of key insertion order (including integer-like keys)', () => {
    const x = encodeState({ b: 1, a: { '10': 1, z: [1.5, 'q'], '2': null }, c: new Uint8Array([1, 2, 3]) });
    const y = encodeState({ c: new Uint8Array([1, 2, 3]), a: { z: [1.5, 'q'], '2': null, '10': 1 }, b: 1 });
    expect(x.equals(y)).toBe(true);
    const back = decodeState(x) as { a: Record<string, unknown>; c: Uint8Array };
    expect(Object.keys(back)).toEqual(['a', 'b', 'c']);
    expect([...back.c]).toEqual([1, 2, 3]);
    expect(back.a.z).toEqual([1.5, 'q']);
  });

  it('a state with large bins encodes to the bytes msgpackr gives on its own, in a buffer of about their size', () => {
    // The reference: msgpackr with the codec's options over the same sorted tree, left to grow its buffer.
    const reference = (v: unknown): Buffer =>
      new Packr({ useRecords: false, variableMapSize: true }).pack(sortedTree(v));
    fc.assert(
      fc.property(stateWithBins, ({ big, tiny, extra }) => {
        const value = {
          ...extra,
          fields: Object.fromEntries(big.map((n, i) => [`f${i}`, bin(n, i)])),
          list: tiny.map((n, i) => bin(n, i + 7)),
        };
        const bytes = encodeState(value);
        expect(bytes.equals(reference(value))).toBe(true);
        if (big.reduce((a, b) => a + b, 0) >= 1024 * 1024) {
          expect(bytes.byteOffset).toBe(0);
          // Never grown (the codec grows by 25% at least): what is left is the codec's headroom.
          expect(bytes.buffer.byteLength - bytes.byteLength).toBeLessThan(4096);
        }
      }),
      { numRuns: 25 },
    );
  });

  it("encodeStatePieces gives encodeState's bytes, its large bins as the model's own arrays (no copy)", () => {
    fc.assert(
      fc.property(stateWithBins, ({ big, tiny, extra }) => {
        const arrays = big.map((n, i) => bin(n, i));
        const value = {
          ...extra,
          fields: arrays,
          list: tiny.map((n, i) => bin(n, i + 7)),
          nested: { last: arrays[0]! },
        };
        const pieces = encodeStatePieces(value);
        expect(Buffer.concat(pieces).equals(encodeState(value))).toBe(true);
        const total = big.reduce((a, b) => a + b, 0) + big[0]!;
        // A layout with 1 MiB of large bins comes apart; the arrays are the pieces themselves.
        if (total >= 1024 * 1024) for (const a of arrays) expect(pieces).toContain(a);
        else expect(pieces).toHaveLength(1);
      }),
      { numRuns: 25 },
    );
    // A key the layout scan cannot name (not ASCII): one piece, still the same bytes.
    const odd = { clé: bin(2 * 1024 * 1024, 1) };
    expect(encodeStatePieces(odd)).toHaveLength(1);
    expect(Buffer.from(encodeStatePieces(odd)[0]!).equals(encodeState(odd))).toBe(true);
  });

  it('refuses views that are not typed arrays, and non-finite numbers (typed arrays: state-codec-lossless.test.ts)', () => {
    expect(() => encodeState({ m: new DataView(new ArrayBuffer(2)) })).toThrow(/DataView cannot be captured/);
    expect(() => encodeState({ v: NaN })).toThrow(/finite/);
    expect(() => encodeState({ d: new Date(0) })).toThrow(/plain data/);
  });
});

/** Bytes of length `n` that differ with `seed`. */
const bin = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 13 + seed) & 0xff);

/** A state's makings: large bins (64-700 KiB, 1 to 3 of them), small bins, and small scalars by key. */
const stateWithBins = fc.record({
  big: fc.array(fc.integer({ min: 64 * 1024, max: 700 * 1024 }), { minLength: 1, maxLength: 3 }),
  tiny: fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 3 }),
  extra: fc.dictionary(
    fc.string({ maxLength: 6 }),
    // No -0: the codec writes it as float64 -0 where msgpackr writes the int 0 (its one documented
    // difference, workers/state-codec.ts; the lossless tests cover it), so plain msgpackr is no reference for it.
    fc.oneof(
      fc.integer(),
      fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Object.is(x, -0)),
      fc.string(),
      fc.boolean(),
    ),
    { maxKeys: 5 },
  ),
});

/** Plain data with every object's keys in sorted order (as Maps), the way the codec orders them. */
function sortedTree(v: unknown): unknown {
  if (v instanceof Uint8Array || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(sortedTree);
  const o = v as Record<string, unknown>;
  return new Map(
    Object.keys(o)
      .sort()
      .map((k) => [k, sortedTree(o[k])]),
  );
}

function obsAt(k: number): Record<string, unknown> {
  if (k % 11 === 5) return { x: 0, y: 0 }; // no food offset
  return { x: k % 9, y: k % 4, foodDx: ((k * 7) % 9) - 4, foodDy: ((k * 5) % 7) - 3 };
}

describe('walker follows its RULES', () => {
  it('matches an independent implementation over 2000 steps', () => {
    const seed = -123456789;
    const explore = 5;
    const s = walker.initialize({ agentId: 'w', seed, params: { explore }, observation: {} });
    const next = xs(seed);
    const dirs = ['north', 'east', 'south', 'west'];
    const steps: unknown[] = [];
    for (let k = 0; k < 2000; k++) {
      const o = obsAt(k);
      const r = next();
      let move: string;
      const hasFood = typeof o.foodDx === 'number' && typeof o.foodDy === 'number';
      const dx = o.foodDx as number;
      const dy = o.foodDy as number;
      if (!hasFood || r % explore === 0) move = dirs[(r >>> 3) % 4]!;
      else if (dx === 0 && dy === 0) move = 'stay';
      else if (Math.abs(dx) >= Math.abs(dy)) move = dx > 0 ? 'east' : 'west';
      else move = dy > 0 ? 'south' : 'north';
      expect(walker.prepare(s, { agentId: 'w', step: BigInt(k), ticks: 16, observation: o })).toEqual({ move });
      if (k < 300) steps.push({ observation: o, decision: { move } });
    }
    vector('walker', { seed, params: { explore }, steps, rngStateAfter: next.state() });
    expect(walker.capture(s)).toMatchObject({ rng: next.state() });
  });
});

describe('lif follows its RULES', () => {
  it('[SEED-11] matches an independent implementation (construction, kicks, sweep, readout)', () => {
    const n = 37;
    const seed = 777;
    const s = lif.initialize({ agentId: 'l', seed, params: { neurons: n }, observation: {} });
    const next = xs(seed);
    const base: number[] = [];
    for (let i = 0; i < n; i++) base.push(Math.fround((next() / 4294967296) * 0.06));
    const mem: number[] = new Array<number>(n).fill(0);
    const dirs = ['north', 'east', 'south', 'west'];
    const ticks = [16, 17, 17];
    const steps: unknown[] = [];
    for (let k = 0; k < 30; k++) {
      const o = obsAt(k);
      const d = [0, 0, 0, 0];
      if (typeof o.foodDx === 'number' && typeof o.foodDy === 'number') {
        d[0] = o.foodDy < 0 ? 0.05 : 0;
        d[1] = o.foodDx > 0 ? 0.05 : 0;
        d[2] = o.foodDy > 0 ? 0.05 : 0;
        d[3] = o.foodDx < 0 ? 0.05 : 0;
      }
      const spikes = [0, 0, 0, 0];
      const T = ticks[k % 3]!;
      for (let t = 0; t < T; t++) {
        for (let q = 0; q < 300; q++) {
          const j = next() % n;
          mem[j] = mem[j]! + 0.42;
        }
        for (let i = 0; i < n; i++) {
          let m = mem[i]! * 0.9 + base[i]! + d[i & 3]!;
          if (m >= 1.0) {
            spikes[i & 3]!++;
            m = 0;
          }
          mem[i] = m;
        }
      }
      let best = 0;
      for (let q = 1; q < 4; q++) if (spikes[q]! > spikes[best]!) best = q;
      const want = { move: spikes[best] === 0 ? 'stay' : dirs[best], spikes };
      expect(lif.prepare(s, { agentId: 'l', step: BigInt(k), ticks: T, observation: o })).toEqual(want);
      steps.push({ ticks: T, observation: o, decision: want });
    }
    const membraneSha256 = createHash('sha256')
      .update(new Uint8Array(Float64Array.from(mem).buffer))
      .digest('hex');
    const captured = lif.capture(s) as { membrane: Uint8Array; rng: number };
    expect(createHash('sha256').update(captured.membrane).digest('hex')).toBe(membraneSha256);
    expect(captured.rng).toBe(next.state());
    vector('lif', {
      seed,
      params: { neurons: n },
      steps,
      after: { rngState: next.state(), membraneF64LeSha256: membraneSha256 },
    });
  });

  it('capture → restore continues identically', () => {
    const a = lif.initialize({ agentId: 'l', seed: 9, params: { neurons: 50 }, observation: {} });
    lif.prepare(a, { agentId: 'l', step: 0n, ticks: 16, observation: obsAt(0) });
    const bytes = encodeState(lif.capture(a));
    const b = lif.restore(decodeState(bytes), { agentId: 'l', seed: 9, params: { neurons: 50 }, observation: {} });
    for (let k = 1; k < 10; k++) {
      expect(lif.prepare(b, { agentId: 'l', step: BigInt(k), ticks: 17, observation: obsAt(k) })).toEqual(
        lif.prepare(a, { agentId: 'l', step: BigInt(k), ticks: 17, observation: obsAt(k) }),
      );
    }
  });
});

describe('forage follows its RULES', () => {
  it('matches an independent implementation over 200 steps (placement, moves, eating, respawn, observations)', () => {
    const W = 9;
    const H = 6;
    const F = 5;
    const seed = 31337;
    const ports = [
      { portId: 'p0', agentId: 'z' },
      { portId: 'p1', agentId: 'a' },
      { portId: 'p2', agentId: 'm' },
    ];
    const s = forage.initialize({
      environmentId: 'w',
      seed,
      params: { width: W, height: H, food: F },
      ports,
      stepDuration: { numerator: '1', denominator: '1' },
    });
    // independent model
    const next = xs(seed);
    const ag = ports.map((p) => ({ id: p.agentId, x: next() % W, y: next() % H, score: 0 }));
    const food = new Set<number>();
    const place = (ex: number): void => {
      let c = next() % (W * H);
      while (food.has(c) || c === ex) c = (c + 1) % (W * H);
      food.add(c);
    };
    for (let f = 0; f < F; f++) place(-1);
    const wrap = (d: number, size: number): number => {
      const m = ((d % size) + size) % size;
      return m > Math.floor(size / 2) ? m - size : m;
    };
    const observe = (): Record<string, unknown> => {
      const out: Record<string, unknown> = {};
      for (const a of ag) {
        let best = Infinity;
        let bx = 0;
        let by = 0;
        for (const c of [...food].sort((p, q) => p - q)) {
          const dx = wrap((c % W) - a.x, W);
          const dy = wrap(Math.floor(c / W) - a.y, H);
          if (Math.abs(dx) + Math.abs(dy) < best) {
            best = Math.abs(dx) + Math.abs(dy);
            bx = dx;
            by = dy;
          }
        }
        out[a.id] = { x: a.x, y: a.y, foodDx: bx, foodDy: by, score: a.score };
      }
      return out;
    };
    expect(forage.observe(s)).toEqual(observe());
    const D: Record<string, [number, number]> = {
      stay: [0, 0],
      north: [0, -1],
      east: [1, 0],
      south: [0, 1],
      west: [-1, 0],
    };
    const names = Object.keys(D);
    const steps: unknown[] = [];
    const initialObservations = observe();
    for (let k = 0; k < 200; k++) {
      // mostly greedy toward the observed food (so eating and respawn happen), sometimes scripted
      const seen = observe() as Record<string, { foodDx: number; foodDy: number }>;
      const actions = ports.map((p, i) => {
        const o = seen[p.agentId]!;
        const greedy =
          o.foodDx > 0 ? 'east' : o.foodDx < 0 ? 'west' : o.foodDy > 0 ? 'south' : o.foodDy < 0 ? 'north' : 'stay';
        return { ...p, action: { move: (k + i) % 4 === 0 ? names[(k * 3 + i * 2) % 5]! : greedy } };
      });
      const got = forage.advance(s, { step: BigInt(k), actions });
      const rewards: unknown[] = [];
      actions.forEach((act, i) => {
        const a = ag[i]!;
        const [dx, dy] = D[act.action.move]!;
        a.x = (a.x + dx + W) % W;
        a.y = (a.y + dy + H) % H;
        const c = a.y * W + a.x;
        if (food.has(c)) {
          food.delete(c);
          a.score++;
          rewards.push({ agentId: a.id, eventId: `eat-${k}-${a.id}`, ruleId: 'eat', value: 1 });
          place(c);
        }
      });
      expect(got.rewards).toEqual(rewards);
      expect(forage.observe(s)).toEqual(observe());
      const world = {
        agents: ag.map((a) => [a.id, a.x, a.y, a.score]),
        food: [...food].sort((p, q) => p - q),
        rng: next.state(),
      };
      expect(canonicalDigest(forage.digest(s))).toBe(canonicalDigest(world));
      if (k < 100)
        steps.push({ moves: actions.map((a) => a.action.move), rewards, worldDigest: canonicalDigest(world) });
    }
    vector('forage', {
      seed,
      params: { width: W, height: H, food: F },
      ports,
      initialObservations,
      steps,
      finalObservations: observe(),
    });
    expect(ag.reduce((t, a) => t + a.score, 0)).toBeGreaterThan(20);
  });
});
