// Built-in environment `forage`: a W×H torus with food placed and respawned from the world's own
// Xorshift32; agents move one cell per step, in port order, and eat the food they land on.
// Exact rules below are normative for the Rust port (bit for bit).
//
// RULES (modelVersion "forage-v1"):
//   params: {width: 2..4096 (default 16), height: 2..4096 (default 16),
//            food: 1..width*height-1 (default 8)}; nothing else allowed. Cell index c = y*width + x.
//   init:   rng = Xorshift32(seed == 0 ? 0x2545f491 : seed)
//           for each port in port order: x = rng.nextUint() % width; y = rng.nextUint() % height
//           (agents may share cells); then `food` times: place(-1).
//   place(exclude): c = rng.nextUint() % (width*height);
//           while hasFood[c] or c == exclude: c = (c + 1) % (width*height);  hasFood[c] = true
//   advance(step k, one action per port in port order), action = {move: stay|north|east|south|west}:
//           for each action in port order: x = (x + dx + width) % width; y = (y + dy + height) % height
//             (north = y-1, east = x+1, south = y+1, west = x-1);
//             if hasFood[y*width + x]: hasFood = false; score += 1;
//               reward {agentId, eventId: "eat-<k>-<agentId>", ruleId: "eat", value: 1}, event id likewise;
//               place(that cell) while fewer than `food` cells hold food -- immediately, so later
//               agents in the same step see the new food (one place, as the count is always `food`
//               but in a fork that changed it: see fork below)
//   observe: per agent {x, y, foodDx, foodDy, score}: the food cell with the smallest torus Manhattan
//           distance |dx| + |dy|, ties to the lowest cell index, where
//           wrap(d, size) = ((d mod size) + size) mod size, minus size if that exceeds floor(size/2);
//           dx = wrap(fx - x, width), dy = wrap(fy - y, height).
//   digest:  canonical JSON {agents: [[agentId, x, y, score] in port order], food: [cells ascending],
//           rng: i32 state}; worldDigest = its SHA-256.
//   capture: {agents: [{agentId, portId, score, x, y}] in port order, food: [cells ascending],
//           height, rng: i32, width}
//   fork:    `food` may change on restore (forkParams; TypeScript only): the restored world keeps
//           its food cells (so the boundary's observations are the checkpoint's), and the new count
//           is reached as food is eaten: more food placed per eaten cell, or none until it is down.
import { Xorshift32, defineEnvironmentModel, rngSeed, type PortBinding } from '../sdk.js';
import { FORAGE_FORK_PARAMS, forageParams } from '../../core/models/params.js';
import { MOVE_DX, MOVE_DY, isMove } from './moves.js';

interface ForageAgent {
  agentId: string;
  portId: string;
  x: number;
  y: number;
  score: number;
}

interface ForageState {
  width: number;
  height: number;
  rng: Xorshift32;
  hasFood: Uint8Array;
  /** Food cells, ascending. */
  food: number[];
  /** How many cells hold food once eaten food is replaced: params.food. */
  target: number;
  agents: ForageAgent[];
}

function insertSorted(list: number[], c: number): void {
  let i = list.length;
  while (i > 0 && list[i - 1]! > c) i--;
  list.splice(i, 0, c);
}

function place(s: ForageState, exclude: number): void {
  const cells = s.width * s.height;
  let c = s.rng.nextUint() % cells;
  while (s.hasFood[c] === 1 || c === exclude) c = (c + 1) % cells;
  s.hasFood[c] = 1;
  insertSorted(s.food, c);
}

function wrap(d: number, size: number): number {
  const m = ((d % size) + size) % size;
  return m > Math.floor(size / 2) ? m - size : m;
}

function observeAgent(s: ForageState, a: ForageAgent): Record<string, unknown> {
  let best = -1;
  let bdx = 0;
  let bdy = 0;
  for (const c of s.food) {
    const dx = wrap((c % s.width) - a.x, s.width);
    const dy = wrap(Math.floor(c / s.width) - a.y, s.height);
    const dist = Math.abs(dx) + Math.abs(dy);
    if (best < 0 || dist < best) {
      best = dist;
      bdx = dx;
      bdy = dy;
    }
  }
  // Keys in RFC 8785 order: the reply carrying the observations then encodes on the canonical fast path.
  return { foodDx: bdx, foodDy: bdy, score: a.score, x: a.x, y: a.y };
}

function checkPorts(ports: PortBinding[]): void {
  if (ports.length === 0) throw new Error('forage needs at least one port');
}

export const forage = defineEnvironmentModel<ForageState>({
  modelVersion: 'forage-v1',
  resolveParams: forageParams,
  forkParams: FORAGE_FORK_PARAMS,
  initialize(ctx) {
    const p = forageParams(ctx.params);
    checkPorts(ctx.ports);
    const rng = new Xorshift32(rngSeed(ctx.seed));
    const agents = ctx.ports.map((port) => {
      const x = rng.nextUint() % p.width;
      const y = rng.nextUint() % p.height;
      return { agentId: port.agentId, portId: port.portId, x, y, score: 0 };
    });
    const s: ForageState = {
      width: p.width,
      height: p.height,
      rng,
      hasFood: new Uint8Array(p.width * p.height),
      food: [],
      target: p.food,
      agents,
    };
    for (let f = 0; f < p.food; f++) place(s, -1);
    return s;
  },
  checkAction(action, portId) {
    if (!isMove(action.move))
      return `actions[${portId}].move: ${JSON.stringify(action.move)} is not one of stay, north, east, south, west`;
    const extra = Object.keys(action).filter((k) => k !== 'move');
    return extra.length > 0 ? `actions[${portId}]: unknown field ${JSON.stringify(extra.sort()[0])}` : undefined;
  },
  advance(s, ctx) {
    const rewards: { agentId: string; eventId: string; ruleId: string; value: number }[] = [];
    const eventIds: string[] = [];
    for (let i = 0; i < ctx.actions.length; i++) {
      const act = ctx.actions[i]!;
      const a = s.agents[i]!;
      const move = act.action.move as keyof typeof MOVE_DX;
      a.x = (a.x + MOVE_DX[move] + s.width) % s.width;
      a.y = (a.y + MOVE_DY[move] + s.height) % s.height;
      const c = a.y * s.width + a.x;
      if (s.hasFood[c] === 1) {
        s.hasFood[c] = 0;
        s.food.splice(s.food.indexOf(c), 1);
        a.score += 1;
        const eventId = `eat-${ctx.step}-${a.agentId}`;
        rewards.push({ agentId: a.agentId, eventId, ruleId: 'eat', value: 1 });
        eventIds.push(eventId);
        while (s.food.length < s.target) place(s, c);
      }
    }
    return { rewards, eventIds };
  },
  observe(s) {
    const out: Record<string, Record<string, unknown>> = {};
    for (const a of s.agents) out[a.agentId] = observeAgent(s, a);
    return out;
  },
  digest(s) {
    return { agents: s.agents.map((a) => [a.agentId, a.x, a.y, a.score]), food: s.food, rng: s.rng.state };
  },
  capture(s) {
    return {
      agents: s.agents.map((a) => ({ agentId: a.agentId, portId: a.portId, score: a.score, x: a.x, y: a.y })),
      food: [...s.food],
      height: s.height,
      rng: s.rng.state,
      width: s.width,
    };
  },
  restore(data, ctx) {
    const p = forageParams(ctx.params);
    const d = data as { agents?: unknown; food?: unknown; height?: unknown; rng?: unknown; width?: unknown };
    if (d.width !== p.width || d.height !== p.height)
      throw new Error('forage payload: width/height differ from params');
    if (typeof d.rng !== 'number' || !Array.isArray(d.food) || !Array.isArray(d.agents))
      throw new Error('forage payload: rng, food and agents are required');
    const agents = (d.agents as ForageAgent[]).map((a) => ({
      agentId: a.agentId,
      portId: a.portId,
      x: a.x,
      y: a.y,
      score: a.score,
    }));
    if (
      agents.length !== ctx.ports.length ||
      agents.some((a, i) => a.agentId !== ctx.ports[i]!.agentId || a.portId !== ctx.ports[i]!.portId)
    ) {
      throw new Error('forage payload: agents differ from the configured ports');
    }
    const cells = p.width * p.height;
    const hasFood = new Uint8Array(cells);
    const food = (d.food as number[]).map((c) => {
      if (!Number.isInteger(c) || c < 0 || c >= cells)
        throw new Error(`forage payload: food cell ${c} is outside the world`);
      hasFood[c] = 1;
      return c;
    });
    const rng = new Xorshift32(0);
    rng.state = d.rng | 0;
    return { width: p.width, height: p.height, rng, hasFood, food, target: p.food, agents };
  },
});
export default forage;
