// The walker and lif agents across languages: random seeds, params, observations, ticks and rewards
// drive the TypeScript models (workers/models/) and their Rust ports (crates-bridge detsim-models):
// the same decisions (RNG draws, spikes) and the same captured state bytes, with and without a
// restore each step; the state codec and the tick clock agree too. Not the gRPC worker (not built).
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { RationalNs } from '../../core/formats/scalars.js';
import { lif } from '../../workers/models/lif.js';
import { walker } from '../../workers/models/walker.js';
import { decodeState, encodeState } from '../../workers/state-codec.js';
import { TickClock } from '../../workers/tick-clock.js';
import { buildRustCli, rustBatch, rustModelsPath, skipReason } from './rust-cli.js';

const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');

/** Any thrown Error as {error: {message}}: the models throw plain Errors naming the param. */
function outcome<T>(fn: () => T): { ok: T } | { error: { message: string } } {
  try {
    return { ok: fn() };
  } catch (e) {
    return { error: { message: (e as Error).message } };
  }
}

function rustOutcomes(requests: object[]): ({ ok: unknown } | { error: { message: string } })[] {
  return rustBatch(requests, rustModelsPath).map((o) => ('ok' in o ? o : { error: { message: o.error.message } }));
}

interface WalkerCase {
  seed: number;
  params: Record<string, unknown>;
  observation: Record<string, unknown>;
  steps: { observation: Record<string, unknown>; rewards: number[] }[];
  restoreEachStep: boolean;
}

function tsWalker(c: WalkerCase): { decisions: unknown[]; captures: string[] } {
  const ctx = { agentId: 'w', seed: c.seed, params: c.params, observation: c.observation };
  let state = walker.initialize(ctx);
  let observation = c.observation;
  const decisions: unknown[] = [];
  const captures: string[] = [];
  c.steps.forEach((s, i) => {
    decisions.push(walker.prepare(state, { agentId: 'w', step: BigInt(i), ticks: 1, observation }));
    const rewards = s.rewards.map((value, j) => ({ eventId: `e${j}`, ruleId: 'r', value }));
    walker.commit(state, { agentId: 'w', step: BigInt(i), observation: s.observation, rewards });
    observation = s.observation;
    const bytes = encodeState(walker.capture(state));
    if (c.restoreEachStep) state = walker.restore(decodeState(bytes), ctx);
    captures.push(b64(bytes));
  });
  return { decisions, captures };
}

interface LifCase {
  seed: number;
  params: Record<string, unknown>;
  observation: Record<string, unknown>;
  steps: { ticks: number; observation: Record<string, unknown>; rewards: number[] }[];
  restoreEachStep: boolean;
}

function tsLif(c: LifCase): { decisions: unknown[]; captures: string[] } {
  const ctx = { agentId: 'l', seed: c.seed, params: c.params, observation: c.observation };
  let state = lif.initialize(ctx);
  let observation = c.observation;
  const decisions: unknown[] = [];
  const captures: string[] = [];
  c.steps.forEach((s, i) => {
    decisions.push(lif.prepare(state, { agentId: 'l', step: BigInt(i), ticks: s.ticks, observation }));
    const rewards = s.rewards.map((value, j) => ({ eventId: `e${j}`, ruleId: 'r', value }));
    lif.commit(state, { agentId: 'l', step: BigInt(i), observation: s.observation, rewards });
    observation = s.observation;
    const bytes = encodeState(lif.capture(state));
    if (c.restoreEachStep) state = lif.restore(decodeState(bytes), ctx);
    captures.push(b64(bytes));
  });
  return { decisions, captures };
}

const coordinate = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: -30, max: 30 }) },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
  { weight: 1, arbitrary: fc.constantFrom('3', null, true, 2 ** 60, -0) },
);
const observation = fc.oneof(
  { weight: 6, arbitrary: fc.record({ foodDx: coordinate, foodDy: coordinate }) },
  { weight: 1, arbitrary: fc.record({ foodDx: coordinate }) },
  { weight: 1, arbitrary: fc.constant({}) },
  { weight: 1, arbitrary: fc.record({ foodDx: coordinate, foodDy: coordinate, energy: fc.integer() }) },
);
const params = fc.oneof(
  { weight: 8, arbitrary: fc.record({ explore: fc.integer({ min: 1, max: 1024 }) }) },
  { weight: 2, arbitrary: fc.constant({}) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      { explore: 0 },
      { explore: 1025 },
      { explore: 1.5 },
      { explore: '8' },
      { explore: null },
      { explor: 3 },
      { explore: 4, extra: 1 },
    ),
  },
);
const reward = fc.oneof(
  { weight: 8, arbitrary: fc.double({ min: -10, max: 10, noNaN: true }) },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
);
const walkerCase: fc.Arbitrary<WalkerCase> = fc.record({
  seed: fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.constant(0)),
  params,
  observation,
  steps: fc.array(fc.record({ observation, rewards: fc.array(reward, { maxLength: 3 }) }), { maxLength: 30 }),
  restoreEachStep: fc.boolean(),
});

const lifCase: fc.Arbitrary<LifCase> = fc.record({
  seed: fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.constant(0)),
  params: fc.oneof(
    { weight: 8, arbitrary: fc.record({ neurons: fc.integer({ min: 4, max: 48 }) }) },
    { weight: 1, arbitrary: fc.constantFrom({ neurons: 3 }, { neurons: 4.5 }, { neurons: '8' }, { neuron: 8 }) },
  ),
  observation,
  steps: fc.array(
    fc.record({ ticks: fc.integer({ min: 0, max: 20 }), observation, rewards: fc.array(reward, { maxLength: 2 }) }),
    { maxLength: 12 },
  ),
  restoreEachStep: fc.boolean(),
});

/** State values with bytes; sent to Rust with Uint8Array as {$bin: base64}. */
const stateValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.oneof(
      fc.integer(),
      fc.integer({ min: -(2 ** 33), max: 2 ** 33 }),
      // No -0: the values reach Rust as JSON, which has no -0, so Rust would encode another value (a CI flake).
      fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Object.is(x, -0)),
    ),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.string({ unit: 'grapheme-ascii', minLength: 25, maxLength: 300 }),
    fc.uint8Array({ maxLength: 300 }),
    fc.array(tie('value'), { maxLength: 20 }),
    fc.dictionary(fc.string({ maxLength: 6 }), tie('value'), { maxKeys: 18 }),
  ),
})).value;

function toTransport(v: unknown): unknown {
  if (v instanceof Uint8Array) return { $bin: b64(v) };
  if (Array.isArray(v)) return v.map(toTransport);
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toTransport(x)]));
  return v;
}

describe.skipIf(skipReason !== null)('walker, state codec and tick clock: TypeScript and Rust agree', () => {
  beforeAll(() => buildRustCli(), 600_000);

  it('random walker runs make the same decisions and capture the same bytes (or refuse alike)', () => {
    let runs = 0;
    fc.assert(
      fc.property(fc.array(walkerCase, { minLength: 10, maxLength: 20 }), (cases) => {
        const rust = rustOutcomes(cases.map((c) => ({ op: 'walker', ...c })));
        cases.forEach((c, i) => {
          const ts = outcome(() => tsWalker(c));
          if ('ok' in ts) runs++;
          expect(rust[i], JSON.stringify(c)).toEqual(ts);
        });
      }),
      { numRuns: 20 },
    );
    expect(runs).toBeGreaterThan(100);
  });

  it('random lif runs spike, decide and capture identically (IEEE-754 f64/f32, no FMA)', () => {
    let runs = 0;
    fc.assert(
      fc.property(fc.array(lifCase, { minLength: 5, maxLength: 10 }), (cases) => {
        const rust = rustOutcomes(cases.map((c) => ({ op: 'lif', ...c })));
        cases.forEach((c, i) => {
          const ts = outcome(() => tsLif(c));
          if ('ok' in ts) runs++;
          expect(rust[i], JSON.stringify(c)).toEqual(ts);
        });
      }),
      { numRuns: 15 },
    );
    expect(runs).toBeGreaterThan(50);
  });

  it('state values encode to the same msgpack bytes and decode back', () => {
    fc.assert(
      fc.property(fc.array(stateValue, { minLength: 10, maxLength: 30 }), (values) => {
        const encoded = rustOutcomes(values.map((v) => ({ op: 'encode-state', value: toTransport(v) })));
        values.forEach((v, i) => {
          const ts = outcome(() => b64(encodeState(v)));
          expect(encoded[i], JSON.stringify(toTransport(v))).toEqual(ts);
        });
        const decoded = rustOutcomes(values.map((v) => ({ op: 'decode-state', base64: b64(encodeState(v)) })));
        values.forEach((v, i) => {
          const back = decoded[i] as { ok: unknown };
          expect(canonicalize(back.ok)).toBe(canonicalize(toTransport(decodeState(encodeState(v)))));
        });
      }),
      { numRuns: 15 },
    );
  });

  it('the tick clock gives the same ticks, brainTicks and remainder', () => {
    const duration = fc
      .tuple(fc.bigInt({ min: 1n, max: 2n ** 40n }), fc.bigInt({ min: 1n, max: 2n ** 20n }))
      .map(([n, d]) => RationalNs.of(n, d));
    fc.assert(
      fc.property(
        fc.array(fc.tuple(duration, duration, fc.integer({ min: 0, max: 50 })), { minLength: 10, maxLength: 20 }),
        (cases) => {
          const rust = rustOutcomes(
            cases.map(([step, tick, steps]) => ({
              op: 'tick-clock',
              stepDuration: step.toJSON(),
              tickDuration: tick.toJSON(),
              steps,
            })),
          );
          cases.forEach(([step, tick, steps], i) => {
            // Both refuse a clock that leaves U64 with the same message (a tick of 1/2^20 ns lets
            // 2^40 ns steps reach it within 50 steps).
            const ts = outcome(() => {
              const clock = new TickClock(step, tick);
              const ticks = Array.from({ length: steps }, () => clock.advance().toString());
              return { ticks, brainTicks: clock.brainTicks.toString(), remainder: clock.remainder.toJSON() };
            });
            expect(rust[i]).toEqual(ts);
          });
        },
      ),
      { numRuns: 10 },
    );
  });
});
