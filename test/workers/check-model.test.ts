// checkModel (detsim/sdk, workers/check-model.ts): passes the built-ins and a correct user model; finds
// a capture that drops one field of its RNG state that matters only at some steps, and a restore that
// rebuilds a field lossily, each named by step and path; a control shows the old three-boundary
// schedule misses the late defect; an error in restore names the boundary and phase.
import { describe, expect, it } from 'vitest';
import {
  checkModel,
  defineAgentModel,
  ModelCheckError,
  restoreBoundaries,
  Xorshift32,
  seedU32,
  type StateValue,
} from '../../workers/sdk.js';
import { forage } from '../../workers/models/forage.js';
import { lif } from '../../workers/models/lif.js';
import { walker } from '../../workers/models/walker.js';

/** A walker with a draw buffer: from step 40 on it draws four moves at once and keeps three for the next steps. */
interface State {
  rng: Xorshift32;
  spare: number[];
  energy: number;
}
const buffered = (capture: (s: State) => StateValue, restore: (d: Record<string, unknown>) => State) =>
  defineAgentModel<State>({
    modelVersion: 'buffered-v1',
    initialize: ({ seed }) => ({ rng: new Xorshift32(seed || 1), spare: [], energy: 0.1 }),
    prepare: (s, { step }) => {
      let x = s.spare.shift();
      if (x === undefined) {
        x = s.rng.nextUint();
        if (step >= 40n) s.spare = [s.rng.nextUint(), s.rng.nextUint(), s.rng.nextUint()];
      }
      s.energy = s.energy * 1.01 + 0.001;
      return { move: ['north', 'south', 'east', 'west'][x % 4]! };
    },
    commit: () => {},
    capture,
    restore,
  });
const good = buffered(
  (s) => ({ rng: s.rng.state, spare: s.spare, energy: s.energy }),
  (d) => {
    const rng = new Xorshift32(1);
    rng.state = d.rng as number;
    return { rng, spare: d.spare as number[], energy: d.energy as number };
  },
);
const dropsSpare = buffered(
  (s) => ({ rng: s.rng.state, energy: s.energy }),
  (d) => {
    const rng = new Xorshift32(1);
    rng.state = d.rng as number;
    return { rng, spare: [], energy: d.energy as number };
  },
);
const froundEnergy = buffered(
  (s) => ({ rng: s.rng.state, spare: s.spare, energy: s.energy }),
  (d) => {
    const rng = new Xorshift32(1);
    rng.state = d.rng as number;
    return { rng, spare: d.spare as number[], energy: Math.fround(d.energy as number) };
  },
);

const thrown = (fn: () => void): ModelCheckError => {
  try {
    fn();
  } catch (e) {
    if (e instanceof ModelCheckError) return e;
    throw e;
  }
  throw new Error('checkModel passed');
};

describe('checkModel', () => {
  it('passes the built-in models and a correct user model', () => {
    checkModel(walker, { params: { explore: 3 }, steps: 60 });
    checkModel(lif, { params: { neurons: 16 }, steps: 12 });
    checkModel(forage, {
      params: { width: 6, height: 5, food: 4 },
      steps: 30,
      action: (k) => ({ move: ['north', 'east', 'south', 'west', 'stay'][k % 5]! }),
    });
    checkModel(good, { steps: 120 });
  });

  it('names a capture that drops a field which matters only at some steps, by path, right after the restore', () => {
    const e = thrown(() => checkModel(dropsSpare, { steps: 120 }));
    expect(e.field).toBe('state.spare[0]');
    expect(e.message).toMatch(
      /^boundary \d+: state\.spare\[0\] differs right after a restore: \d+ live, undefined restored/,
    );
    expect(e.step).toBeGreaterThan(40);
  });

  it('names a restore that rebuilds a float lossily (Math.fround) at the first boundary', () => {
    const e = thrown(() => checkModel(froundEnergy, { steps: 120 }));
    expect([e.step, e.field]).toEqual([1, 'state.energy']);
  });

  it('control: the old three-boundary schedule (1, steps/2, steps-1) misses the late defect', () => {
    // At 1 nothing is buffered yet; at 60 and 120 (= 40 + 4k) the buffer is just empty.
    checkModel(dropsSpare, { steps: 121, boundaries: [1, 60, 120] });
    expect(restoreBoundaries(120, 12345).some((b) => b > 40 && (b - 40) % 4 !== 0)).toBe(true);
  });

  it('an error in restore names the boundary and the phase', () => {
    const broken = defineAgentModel({
      ...good,
      restore: () => {
        throw new Error('bad payload');
      },
    });
    const e = thrown(() => checkModel(broken, { steps: 10 }));
    expect(e.message).toBe('step 1: restore failed on the copy restored at boundary 1: bad payload');
  });

  it('what a run would refuse as not JSON (observations, rewards, decisions) fails the check, naming the step', () => {
    const forageParams = { params: { width: 6, height: 5, food: 4 }, steps: 5, action: () => ({ move: 'east' }) };
    const nanObserve = { ...forage, observe: (s: never) => ({ ...forage.observe(s), a0: { x: Number.NaN } }) };
    expect(thrown(() => checkModel(nanObserve, forageParams)).message).toMatch(
      /^step 0: what observe returned is not JSON: .*NaN/,
    );
    const badReward = {
      ...forage,
      advance: (s: never, ctx: never) => {
        const out = forage.advance(s, ctx);
        return { ...out, rewards: [{ agentId: 'a0', eventId: 'e', ruleId: 'r', value: Number.POSITIVE_INFINITY }] };
      },
    };
    expect(thrown(() => checkModel(badReward, forageParams)).message).toMatch(
      /^step 0: what advance returned is not JSON: .*Infinity/,
    );
    const badDecision = defineAgentModel({ ...good, prepare: () => ({ move: 'east', n: Number.NaN }) });
    expect(thrown(() => checkModel(badDecision, { steps: 5 })).message).toMatch(
      /^step 0: the decision prepare returned is not JSON: .*NaN/,
    );
  });

  it('seedU32 is the unsigned view of the signed 32-bit seed', () => {
    expect([seedU32(-5), seedU32(0), seedU32(2147483647), seedU32(-2147483648)]).toEqual([
      2 ** 32 - 5,
      0,
      2147483647,
      2 ** 31,
    ]);
  });
});
