// The trace's sealing thread: for one segment of a segmented trace it gzips the lines and advances
// the two running hashes the index records at the segment's end — the behaviour chain
// (checkpoint/group.ts RollingBehaviour) and the behaviour digest's SHA-256 state (sha256-state.ts)
// — so none of that CPU work runs on the event loop the step loop shares. Small segments (tests)
// are sealed on the calling thread. NOT the file writing or the index (trace-store.ts).
import { createHash } from 'node:crypto';
import { ModuleThreadRpc, onModuleThread, serveModuleThread } from './module-thread.js';
import { gzipSync } from 'node:zlib';
import { Sha256Stream, type Sha256State } from './sha256-state.js';

/** The running hashes at a segment boundary: the chain value and the behaviour digest's state. */
export interface TraceHashState {
  chain: string;
  digest: Sha256State;
}

export interface SealInput {
  /** The segment's trace lines, each followed by "\n". */
  text: string;
  /** canonical(behaviour rebased to the run's first epoch) + "\n" for each step, in order. */
  behaviour: string;
  from: TraceHashState;
}

export interface SealOutput {
  gz: Uint8Array;
  to: TraceHashState;
}

/** The pure work: gzip the lines, run the chain and the digest over the behaviour texts. */
export function sealSegment(input: SealInput): SealOutput {
  let chain = input.from.chain;
  const digest = Sha256Stream.from(input.from.digest);
  digest.update(input.behaviour);
  let start = 0;
  for (let end = input.behaviour.indexOf('\n'); end >= 0; end = input.behaviour.indexOf('\n', start)) {
    chain = createHash('sha256')
      .update(`${chain}\n${input.behaviour.slice(start, end + 1)}`, 'utf8')
      .digest('hex');
    start = end + 1;
  }
  return { gz: gzipSync(Buffer.from(input.text, 'utf8')), to: { chain, digest: digest.state() } };
}

/** The behaviour chain's value before any step (checkpoint/group.ts BEHAVIOUR_CHAIN_GENESIS; a test holds them equal). */
export const CHAIN_GENESIS = createHash('sha256').update('detsim/behaviour-chain-v1\n').digest('hex');

/** The running hashes before step 0. */
export function genesisHashes(): TraceHashState {
  return { chain: CHAIN_GENESIS, digest: new Sha256Stream().state() };
}

/** Segments with fewer characters are sealed on the calling thread (a thread hop costs more). */
export const THREAD_SEAL_MIN_CHARS = 1 << 20;

const MARK = { detsimTraceSealThread: 1 } as const;
const sealThread = new ModuleThreadRpc<SealInput, SealOutput>(import.meta.url, MARK, 'trace sealing');

/** Seal a segment off the event loop (on the thread when it is large). */
export async function sealSegmentOffLoop(input: SealInput): Promise<SealOutput> {
  if (input.text.length + input.behaviour.length < THREAD_SEAL_MIN_CHARS) return sealSegment(input);
  return sealThread.call(input);
}

if (onModuleThread(MARK)) serveModuleThread((input: SealInput) => ({ value: sealSegment(input) }));
