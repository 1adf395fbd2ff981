// Model module `ballast` for big-state checkpoint runs (bench/big-state.ts, and the same path at CI
// size in test/checkpoint/big-capture.test.ts): an agent whose state is `bytes` bytes of
// deterministic noise, so a single payload can be made any size up to 3 GiB (the built-in lif
// stops at 64 Mi neurons, about 800 MB). Filling and stepping cost one pass / a few words, so the
// run's time goes to capture, commit and restore. NOT a built-in model and NOT a neuron model.
import { Xorshift32, defineAgentModel, intParam, onlyParams, rngSeed } from '../../workers/sdk.js';

/** A TypeScript payload is one Buffer (4 GiB at most) and the encoder grows it 1.25× past the state. */
export const MAX_BALLAST_BYTES = 3 * 2 ** 30;
/** Words of state each prepare overwrites (the state changes every step; a restore must carry them). */
const WORDS_PER_STEP = 16;
const MOVES = ['north', 'east', 'south', 'west', 'stay'] as const;

interface Ballast {
  rng: Xorshift32;
  bytes: Uint8Array;
}

function ballastParams(params: Record<string, unknown>): { bytes: number } {
  onlyParams(params, ['bytes']);
  return { bytes: intParam(params, 'bytes', 4096, 8, MAX_BALLAST_BYTES) };
}

/** Fill with the generator, a 32-bit word at a time (the tail bytes from one more word). */
function fill(bytes: Uint8Array, rng: Xorshift32): void {
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.byteLength / 4));
  for (let i = 0; i < words.length; i++) words[i] = rng.nextUint();
  const last = rng.nextUint();
  for (let i = words.length * 4; i < bytes.byteLength; i++) bytes[i] = (last >>> (8 * (i % 4))) & 0xff;
}

export default defineAgentModel<Ballast>({
  modelVersion: 'ballast-v1',
  resolveParams: ballastParams,
  initialize(ctx) {
    const rng = new Xorshift32(rngSeed(ctx.seed));
    const bytes = new Uint8Array(ballastParams(ctx.params).bytes);
    fill(bytes, rng);
    return { rng, bytes };
  },
  prepare(state) {
    const { rng, bytes } = state;
    for (let k = 0; k < WORDS_PER_STEP; k++) bytes[rng.nextUint() % bytes.byteLength] = rng.nextUint() & 0xff;
    return { move: MOVES[bytes[rng.nextUint() % bytes.byteLength]! % MOVES.length]! };
  },
  commit() {},
  capture: (state) => ({ bytes: state.bytes, rng: state.rng.state }),
  restore(data, ctx) {
    const d = data as { bytes?: unknown; rng?: unknown };
    const n = ballastParams(ctx.params).bytes;
    if (!(d.bytes instanceof Uint8Array) || d.bytes.byteLength !== n)
      throw new Error(`ballast payload: bytes must be params.bytes (${n}) bytes`);
    if (typeof d.rng !== 'number') throw new Error('ballast payload: rng must be a number');
    const rng = new Xorshift32(0);
    rng.state = d.rng | 0;
    return { rng, bytes: d.bytes };
  },
});
