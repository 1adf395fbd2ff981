// The trace's sealing thread: for one segment of the trace it gzips the lines, advances the
// behaviour digest's SHA-256 state (sha256-state.ts) that the index records at the segment's end
// and a checkpoint carries, and makes the segment's repro file (each step's ReproHash text, receipt/step-repro.ts)
// and, with --trace-observations, gzips its observations sidecar, so
// none of that CPU work runs on the event loop the step loop shares. Small segments (tests)
// are sealed on the calling thread. NOT the file writing or the index (trace-store.ts).
import { ModuleThreadRpc, onModuleThread, serveModuleThread } from '../module-thread.js';
import { gzipSync } from 'node:zlib';
import type { UnknownField } from '../receipt/canonical.js';
import { stepRepro, UnknownTally } from '../receipt/step-repro.js';
import { fastStepReproText } from '../receipt/step-repro-fast.js';
import { Sha256Stream, type Sha256State } from './sha256-state.js';
import type { TraceBehaviour } from './trace.js';

/**
 * The running hash at a segment boundary: the behaviour digest's SHA-256 state (the index's
 * `after`; an older index also holds `chain`, the behaviour chain detsim no longer keeps or reads).
 */
export interface TraceHashState {
  digest: Sha256State;
}

export interface SealInput {
  /** The segment's trace lines, each followed by "\n". */
  text: string;
  /** canonical(behaviour rebased to the run's first epoch) + "\n" for each step, in order. */
  behaviour: string;
  from: TraceHashState;
  /** Also make the segment's repro file (needs `behaviour`). */
  repro?: boolean;
  /** The observations sidecar's lines (each step's canonical observations + "\n"), gzipped beside the segment. */
  observations?: string;
}

/** A segment's repro file: the steps' ReproHash texts (step-repro.ts), comma-separated, gzipped. */
export interface SealedRepro {
  gz: Uint8Array;
  /** The epoch every step was rebased onto. */
  base: string;
  unknownFields: UnknownField[];
}

export interface SealOutput {
  gz: Uint8Array;
  to: TraceHashState;
  repro?: SealedRepro;
  /** The gzipped observations sidecar, when `observations` was given. */
  observationsGz?: Uint8Array;
}

/** The pure work: gzip the lines, run the digest over the behaviour texts, make the repro file. */
export function sealSegment(input: SealInput): SealOutput {
  const hashed = advanceHashes(input);
  const gz = gzipSync(Buffer.from(input.text, 'utf8'));
  const out: SealOutput =
    input.repro && input.behaviour.length > 0 ? { gz, to: hashed, repro: reproOf(input) } : { gz, to: hashed };
  if (input.observations !== undefined) out.observationsGz = gzipSync(Buffer.from(input.observations, 'utf8'));
  return out;
}

/** The digest's state after the behaviour texts of `input` (the seal's hashing without the gzip). */
export function advanceHashes(input: Pick<SealInput, 'from' | 'behaviour'>): TraceHashState {
  const digest = Sha256Stream.from(input.from.digest);
  digest.update(input.behaviour);
  return { digest: digest.state() };
}

/**
 * Each step's repro text: the trace line with its behaviour replaced by the rebased one (exactly
 * what streamed.ts walks when it reads the trace), so a receipt can hash these instead. The usual
 * step takes the proven fast path (step-repro-fast.ts), any other the general walk.
 */
function reproOf(input: SealInput): SealedRepro {
  const lines = input.text.split('\n');
  const behaviours = input.behaviour.split('\n');
  const unknown = new UnknownTally();
  const texts: string[] = [];
  let base = '';
  for (let i = 0; i < behaviours.length - 1; i++) {
    const behaviour = JSON.parse(behaviours[i]!) as TraceBehaviour;
    const rest = lineRest(lines[i]!, behaviours[i]!);
    base ||= behaviour.scope.epoch;
    const fast = fastStepReproText(rest, behaviour);
    if (fast !== undefined) {
      texts.push(fast);
      continue;
    }
    const r = stepRepro({ ...rest, behaviour });
    texts.push(r.text);
    unknown.add(r.unknownFields);
  }
  return { gz: gzipSync(Buffer.from(texts.join(','), 'utf8')), base, unknownFields: unknown.list() };
}

const BEHAVIOUR_KEY = '{"behaviour":';
const OPERATIONAL_KEY = ',"operational":';

/**
 * A trace line's fields, as JSON.parse gives them, for a step whose behaviour is then replaced.
 * The usual line is `{"behaviour":` + the behaviour text itself + `,"operational":` + X + `}`: the
 * behaviour text is one complete JSON value (it was parsed), so when X parses the line is exactly
 * `{behaviour, operational: X}`, and only X is parsed again. Any other line is parsed whole.
 */
export function lineRest(line: string, behaviourText: string): Record<string, unknown> {
  const at = BEHAVIOUR_KEY.length + behaviourText.length;
  if (
    line.startsWith(BEHAVIOUR_KEY) &&
    // slice + === compares as memory; startsWith at an offset goes character by character.
    line.slice(BEHAVIOUR_KEY.length, at) === behaviourText &&
    line.startsWith(OPERATIONAL_KEY, at) &&
    line.endsWith('}')
  ) {
    try {
      return { operational: JSON.parse(line.slice(at + OPERATIONAL_KEY.length, -1)) as unknown };
    } catch {
      // not that shape after all: the whole line's parse accepts or refuses it
    }
  }
  return { ...(JSON.parse(line) as object) } as Record<string, unknown>;
}

/** The running hash before step 0. */
export function genesisHashes(): TraceHashState {
  return { digest: new Sha256Stream().state() };
}

/** Segments with fewer characters are sealed on the calling thread (a thread hop costs more). */
export const THREAD_SEAL_MIN_CHARS = 1 << 20;

const MARK = { detsimTraceSealThread: 1 } as const;
const sealThread = new ModuleThreadRpc<SealInput, SealOutput>(import.meta.url, MARK, 'trace sealing');

/** Seal a segment off the event loop (on the thread when it is large). */
export async function sealSegmentOffLoop(input: SealInput): Promise<SealOutput> {
  const chars = input.text.length + input.behaviour.length + (input.observations?.length ?? 0);
  if (chars < THREAD_SEAL_MIN_CHARS) return sealSegment(input);
  return sealThread.call(input);
}

if (onModuleThread(MARK)) serveModuleThread((input: SealInput) => ({ value: sealSegment(input) }));
