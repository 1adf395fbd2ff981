// Built-in agent `lif`: a leaky integrate-and-fire network with Xorshift32 noise kicks as in the
// reference kernel (docs/spec/seed-derivation.md) and a 4-way spike-count readout. State grows with `neurons` (12 bytes
// each). Exact rules below are normative for the Rust port (bit for bit, IEEE-754 f64).
//
// RULES (modelVersion "lif-v1", plasticityVersion "none-v1", tick 1 ms):
//   params: {neurons: integer 4..67108864, default 1000}; nothing else allowed.
//   init:   rng = Xorshift32(seed == 0 ? 0x2545f491 : seed)
//           for i in 0..n-1 (index order): baseline[i] = fround(rng.nextF64() * 0.06)  (f32)
//           membrane[i] = 0.0 (f64); rewardTotal = 0.0
//   prepare (ticks T from the accumulator):
//           drive[0..3] (f64) from the observation's food offset (dx, dy), when both are integers:
//             drive[0] = dy < 0 ? 0.05 : 0.0   (north)    drive[1] = dx > 0 ? 0.05 : 0.0   (east)
//             drive[2] = dy > 0 ? 0.05 : 0.0   (south)    drive[3] = dx < 0 ? 0.05 : 0.0   (west)
//           (all 0.0 without a food offset). spikes[0..3] = 0 (integers).
//           repeat T times (one 1-ms tick):
//             repeat 300 times: j = rng.nextUint() % n; membrane[j] = membrane[j] + 0.42
//             for i in 0..n-1: m = (membrane[i] * 0.9 + f64(baseline[i])) + drive[i & 3]
//                              if m >= 1.0 { spikes[i & 3] += 1; m = 0.0 }
//                              membrane[i] = m
//           readout: best = the lowest d in 0..3 with the largest spikes[d];
//                    move = spikes[best] == 0 ? "stay" : DIRECTIONS[best] (north, east, south, west)
//           decision = {move, spikes: [spikes[0], spikes[1], spikes[2], spikes[3]]}
//   commit: rewardTotal += value for each reward in order (f64). No ticks.
//   capture: {baseline: bytes (f32 LE), membrane: bytes (f64 LE), neurons, rewardTotal, rng: i32}
import { Xorshift32, bytesOf, defineAgentModel, f32FromBytes, f64FromBytes, recycle, rngSeed } from '../sdk.js';
import { lifParams } from '../../core/models/params.js';
import { DIRECTIONS, foodOffset } from './moves.js';

export const LIF_KICKS_PER_TICK = 300;

interface LifState {
  n: number;
  rng: Xorshift32;
  membrane: Float64Array;
  baseline: Float32Array;
  rewardTotal: number;
}

function runTicks(s: LifState, ticks: number, drive: Float64Array, spikes: number[]): void {
  const { n, rng, membrane, baseline } = s;
  for (let t = 0; t < ticks; t++) {
    for (let k = 0; k < LIF_KICKS_PER_TICK; k++) {
      const j = rng.nextUint() % n;
      membrane[j] = membrane[j]! + 0.42;
    }
    for (let i = 0; i < n; i++) {
      let m = membrane[i]! * 0.9 + baseline[i]! + drive[i & 3]!;
      if (m >= 1.0) {
        spikes[i & 3]!++;
        m = 0.0;
      }
      membrane[i] = m;
    }
  }
}

export const lif = defineAgentModel<LifState>({
  modelVersion: 'lif-v1',
  plasticityVersion: 'none-v1',
  resolveParams: lifParams,
  initialize(ctx) {
    const n = lifParams(ctx.params).neurons;
    const rng = new Xorshift32(rngSeed(ctx.seed));
    const baseline = new Float32Array(n);
    for (let i = 0; i < n; i++) baseline[i] = Math.fround(rng.nextF64() * 0.06);
    return { n, rng, membrane: new Float64Array(n), baseline, rewardTotal: 0 };
  },
  prepare(state, ctx) {
    const drive = new Float64Array(4);
    const food = foodOffset(ctx.observation);
    if (food) {
      drive[0] = food.dy < 0 ? 0.05 : 0.0;
      drive[1] = food.dx > 0 ? 0.05 : 0.0;
      drive[2] = food.dy > 0 ? 0.05 : 0.0;
      drive[3] = food.dx < 0 ? 0.05 : 0.0;
    }
    const spikes = [0, 0, 0, 0];
    runTicks(state, ctx.ticks, drive, spikes);
    let best = 0;
    for (let d = 1; d < 4; d++) if (spikes[d]! > spikes[best]!) best = d;
    return { move: spikes[best] === 0 ? 'stay' : DIRECTIONS[best]!, spikes };
  },
  commit(state, ctx) {
    for (const r of ctx.rewards) state.rewardTotal += r.value;
  },
  capture(state) {
    return {
      baseline: bytesOf(state.baseline),
      membrane: bytesOf(state.membrane),
      neurons: state.n,
      rewardTotal: state.rewardTotal,
      rng: state.rng.state,
    };
  },
  restore(data, ctx) {
    const d = data as {
      baseline?: unknown;
      membrane?: unknown;
      neurons?: unknown;
      rewardTotal?: unknown;
      rng?: unknown;
    };
    const n = lifParams(ctx.params).neurons;
    if (d.neurons !== n) throw new Error(`lif payload: neurons ${String(d.neurons)} differs from params.neurons ${n}`);
    if (!(d.membrane instanceof Uint8Array) || d.membrane.byteLength !== n * 8)
      throw new Error('lif payload: membrane must be n * 8 bytes');
    if (!(d.baseline instanceof Uint8Array) || d.baseline.byteLength !== n * 4)
      throw new Error('lif payload: baseline must be n * 4 bytes');
    if (typeof d.rewardTotal !== 'number' || typeof d.rng !== 'number')
      throw new Error('lif payload: rewardTotal and rng must be numbers');
    const rng = new Xorshift32(0);
    rng.state = d.rng | 0;
    return {
      n,
      rng,
      membrane: f64FromBytes(d.membrane),
      baseline: f32FromBytes(d.baseline),
      rewardTotal: d.rewardTotal,
    };
  },
  // Nothing keeps a dropped state's arrays: a later restore may read its fields into them.
  release(state) {
    recycle(state.membrane);
    recycle(state.baseline);
  },
});
export default lif;
