// The TypeScript built-in models' restore is faithful (issue #29): walker, lif and forage each run
// from their seed to step K with fixed inputs, are captured, and run on to K+N; a fresh instance
// restored from that capture (through the state codec, as the worker hands it over) gives the same
// outputs at steps K..K+N-1 and re-captures the same bytes at K+N, and the state at K is not the
// initial one (so a restore that re-initializes from the seed cannot pass by accident). The controls:
// each built-in wrapped here so that its restore re-initializes from the seed fails the same check,
// naming the step and output that diverged, and so does a lif whose restore zeroes its membrane; a
// walker and a lif whose restore drops rewardTotal fail on the re-capture. Model calls only: no
// worker process, no gRPC, not the host's restore path (the same through real TypeScript, Python and
// Rust workers: test/cross-lang/restore-faithful.test.ts).
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { forage } from '../../workers/models/forage.js';
import { lif } from '../../workers/models/lif.js';
import { walker } from '../../workers/models/walker.js';
import { firstDifference } from '../../workers/capture-check.js';
import type { AgentModel, EnvironmentModel, JsonObject } from '../../workers/sdk.js';
import { decodeState, encodeState } from '../../workers/state-codec.js';

const K = 12;
const N = 12;
// lif with 200 neurons: at 64, 300 kicks a tick fire nearly every neuron every tick, so a lost membrane goes unseen.
const LIF = { neurons: 200 };

/** A model under the check: start from the seed, restore decoded data, one step's outputs, capture bytes. */
interface Subject<S> {
  start(): S;
  restore(data: unknown): S;
  step(state: S, k: number): unknown;
  capture(state: S): Buffer;
}

interface Faithfulness {
  /** The capture at K differs from the capture at 0 (the check is not vacuous). */
  movedFromInitial: boolean;
  /** The first divergence of the restored copy from the uninterrupted run, or null. */
  divergence: string | null;
}

function restoreFaithfulness<S>(m: Subject<S>): Faithfulness {
  const live = m.start();
  const initial = m.capture(live);
  for (let k = 0; k < K; k++) m.step(live, k);
  const atK = m.capture(live);
  const expected: string[] = [];
  for (let k = K; k < K + N; k++) expected.push(canonicalize(m.step(live, k)));
  const atEnd = m.capture(live);
  const copy = m.restore(decodeState(atK));
  let divergence: string | null = null;
  for (let k = K; k < K + N && divergence === null; k++) {
    const got = canonicalize(m.step(copy, k));
    if (got !== expected[k - K])
      divergence = `step ${k}: the copy restored at ${K} output ${got}, the uninterrupted run ${expected[k - K]}`;
  }
  const again = m.capture(copy);
  if (divergence === null && !again.equals(atEnd))
    divergence = `the re-capture at ${K + N} differs from the uninterrupted run's at ${firstDifference(decodeState(again), decodeState(atEnd))}`;
  return { movedFromInitial: !atK.equals(initial), divergence };
}

/** Observation at boundary k: food offsets that vary, and now and then none. */
function obsAt(k: number): JsonObject {
  if (k % 7 === 3) return { x: 0, y: 0 };
  return { foodDx: ((k * 7) % 9) - 4, foodDy: ((k * 5) % 7) - 3, score: k, x: k % 5, y: k % 4 };
}

function agentSubject<S>(model: AgentModel<S>, seed: number, params: JsonObject): Subject<S> {
  const ctx = { agentId: 'a', seed, params, observation: obsAt(0) };
  return {
    start: () => model.initialize(ctx),
    restore: (data) => model.restore(data, ctx),
    step(state, k) {
      const decision = model.prepare(state, {
        agentId: 'a',
        step: BigInt(k),
        ticks: k % 3 === 0 ? 16 : 17,
        observation: obsAt(k),
      });
      model.commit(state, {
        agentId: 'a',
        step: BigInt(k),
        observation: obsAt(k + 1),
        rewards: [{ eventId: `r-${k}`, ruleId: 'r', value: (k % 4) * 0.25 }],
      });
      return decision;
    },
    capture: (state) => encodeState(model.capture(state)),
  };
}

const PORTS = [
  { portId: 'p0', agentId: 'a' },
  { portId: 'p1', agentId: 'b' },
  { portId: 'p2', agentId: 'c' },
];
const MOVES = ['north', 'east', 'south', 'west', 'stay'];

function environmentSubject<S>(model: EnvironmentModel<S>, seed: number, params: JsonObject): Subject<S> {
  const ctx = {
    environmentId: 'world',
    seed,
    params,
    ports: PORTS,
    stepDuration: { numerator: '1', denominator: '1' },
  };
  return {
    start: () => model.initialize(ctx),
    restore: (data) => model.restore(data, ctx),
    step(state, k) {
      const actions = PORTS.map((p, i) => ({ ...p, action: { move: MOVES[(k * 7 + i * 3) % 5]! } }));
      const outcome = model.advance(state, { step: BigInt(k), actions });
      return { outcome, observations: model.observe(state), digest: model.digest(state) };
    },
    capture: (state) => encodeState(model.capture(state)),
  };
}

// The defect under test, in test code only: a restore that ignores the captured data and starts over from the seed.
const reinitAgent = <S>(m: AgentModel<S>): AgentModel<S> => ({ ...m, restore: (_data, ctx) => m.initialize(ctx) });
const reinitEnvironment = <S>(m: EnvironmentModel<S>): EnvironmentModel<S> => ({
  ...m,
  restore: (_data, ctx) => m.initialize(ctx),
});

const BUILT_INS: [string, (reinit: boolean) => Subject<unknown>][] = [
  [
    'walker',
    (reinit) => agentSubject((reinit ? reinitAgent(walker) : walker) as AgentModel<unknown>, -424242, { explore: 3 }),
  ],
  ['lif', (reinit) => agentSubject((reinit ? reinitAgent(lif) : lif) as AgentModel<unknown>, 777, LIF)],
  [
    'forage',
    (reinit) =>
      environmentSubject((reinit ? reinitEnvironment(forage) : forage) as EnvironmentModel<unknown>, 31337, {
        width: 7,
        height: 5,
        food: 6,
      }),
  ],
];

describe('a built-in restored from its capture continues as the uninterrupted run (TypeScript)', () => {
  for (const [name, subject] of BUILT_INS) {
    it(`${name}: same outputs at steps ${K}..${K + N - 1} and the same re-capture at ${K + N}; the state at ${K} is not the initial one`, () => {
      const r = restoreFaithfulness(subject(false));
      expect(r.movedFromInitial, `the state at ${K} is the initial one: the check would be vacuous`).toBe(true);
      expect(r.divergence).toBeNull();
    });

    it(`control: ${name} whose restore re-initializes from the seed fails the check, naming the step`, () => {
      const r = restoreFaithfulness(subject(true));
      expect(r.movedFromInitial).toBe(true);
      expect(r.divergence).toMatch(
        new RegExp(`^step \\d+: the copy restored at ${K} output .+, the uninterrupted run `),
      );
      const step = Number(/^step (\d+)/.exec(r.divergence!)![1]);
      expect(step).toBeGreaterThanOrEqual(K);
      expect(step).toBeLessThan(K + N);
    });
  }

  it('control: a walker and a lif whose restore drops rewardTotal decide alike but fail on the re-capture', () => {
    // rewardTotal never steers a decision: only the byte-equal re-capture at K+N can see it lost.
    const dropTotal = <S extends { rewardTotal: number }>(m: AgentModel<S>): AgentModel<S> => ({
      ...m,
      restore: (data, ctx) => ({ ...m.restore(data, ctx), rewardTotal: 0 }),
    });
    for (const s of [
      agentSubject(dropTotal(walker) as AgentModel<unknown>, -424242, { explore: 3 }),
      agentSubject(dropTotal(lif) as AgentModel<unknown>, 777, LIF),
    ])
      expect(restoreFaithfulness(s).divergence).toBe(
        `the re-capture at ${K + N} differs from the uninterrupted run's at $.rewardTotal`,
      );
  });

  it('control: a lif whose restore zeroes its membrane fails the check, naming the step', () => {
    const zeroMembrane: AgentModel<unknown> = {
      ...(lif as AgentModel<unknown>),
      restore: (data, ctx) => lif.restore({ ...(data as object), membrane: new Uint8Array(LIF.neurons * 8) }, ctx),
    };
    expect(restoreFaithfulness(agentSubject(zeroMembrane, 777, LIF)).divergence).toMatch(
      new RegExp(`^step ${K}: the copy restored at ${K} output .+, the uninterrupted run `),
    );
  });
});
