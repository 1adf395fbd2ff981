// Built-in agent `walker`: a one-RNG-draw-per-step forager. Tiny state (its Xorshift32 and a
// reward total). Exact rules below are normative for the Rust port (bit for bit).
//
// RULES (modelVersion "walker-v1", plasticityVersion "none-v1", tick 1 ms, ticks ignored):
//   params: {explore: integer 1..1024, default 8}; nothing else allowed.
//   init:    rng = Xorshift32(seed == 0 ? 0x2545f491 : seed); rewardTotal = 0.0 (f64).
//   prepare: r = rng.nextUint()  -- exactly ONE draw per step, always.
//            o = observation; food = (o.foodDx, o.foodDy) when both are integers, else none.
//            if food is none or r % explore == 0:  move = DIRECTIONS[(r >>> 3) % 4]
//                                                  (DIRECTIONS = north, east, south, west)
//            else if dx == 0 and dy == 0:          move = "stay"
//            else if |dx| >= |dy|:                 move = dx > 0 ? "east" : "west"
//            else:                                 move = dy > 0 ? "south" : "north"
//            decision = {move}
//   commit:  rewardTotal += value for each reward in the given order (f64 addition).
//   capture: {rewardTotal: f64, rng: i32 state}   (msgpack, keys sorted)
//   fork:    `explore` may change on restore (forkParams): the restored walker draws with the new one.
import { Xorshift32, defineAgentModel, rngSeed } from '../sdk.js';
import { WALKER_FORK_PARAMS, walkerParams } from '../../core/models/params.js';
import { DIRECTIONS, foodOffset } from './moves.js';

interface WalkerState {
  rng: Xorshift32;
  explore: number;
  rewardTotal: number;
}

export const walker = defineAgentModel<WalkerState>({
  modelVersion: 'walker-v1',
  plasticityVersion: 'none-v1',
  resolveParams: walkerParams,
  forkParams: WALKER_FORK_PARAMS,
  initialize(ctx) {
    return { rng: new Xorshift32(rngSeed(ctx.seed)), explore: walkerParams(ctx.params).explore, rewardTotal: 0 };
  },
  prepare(state, ctx) {
    const r = state.rng.nextUint();
    const food = foodOffset(ctx.observation);
    let move: string;
    if (!food || r % state.explore === 0) move = DIRECTIONS[(r >>> 3) % 4]!;
    else if (food.dx === 0 && food.dy === 0) move = 'stay';
    else if (Math.abs(food.dx) >= Math.abs(food.dy)) move = food.dx > 0 ? 'east' : 'west';
    else move = food.dy > 0 ? 'south' : 'north';
    return { move };
  },
  commit(state, ctx) {
    for (const r of ctx.rewards) state.rewardTotal += r.value;
  },
  capture(state) {
    return { rewardTotal: state.rewardTotal, rng: state.rng.state };
  },
  restore(data, ctx) {
    const d = data as { rewardTotal?: unknown; rng?: unknown };
    if (typeof d.rewardTotal !== 'number' || typeof d.rng !== 'number' || !Number.isInteger(d.rng))
      throw new Error('walker payload: rewardTotal and rng must be numbers');
    const rng = new Xorshift32(0);
    rng.state = d.rng | 0;
    return { rng, explore: walkerParams(ctx.params).explore, rewardTotal: d.rewardTotal };
  },
});
export default walker;
