// The trace's sealing thread: for one segment of the trace it gzips the lines, advances the
// behaviour digest's SHA-256 state (sha256-state.ts) that the index records at the segment's end
// and a checkpoint carries, and makes the segment's repro file (each step's ReproHash text, receipt/step-repro.ts)
// and, with --trace-observations, gzips its observations sidecar, so
// none of that CPU work runs on the event loop the step loop shares. Small segments (tests)
// are sealed on the calling thread. A segment may also be sealed piece by piece (ThreadSeal): its
// steps are fed to the thread as they come (gzip streams and repro texts advance there), so that a
// sync, e.g. a checkpoint's, finds only the last few steps and the digest left to do; the bytes
// are the same as a one-shot seal's. NOT the file writing or the index (trace-store.ts).
import { ModuleThreadRpc, onModuleThread, serveModuleThread, type ThreadAnswer } from '../module-thread.js';
import { once } from 'node:events';
import { createGzip, gzipSync, type Gzip } from 'node:zlib';
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
  const unknown = new UnknownTally();
  const { texts, base } = reproTexts(input.text, input.behaviour, unknown);
  return { gz: gzipSync(Buffer.from(texts.join(','), 'utf8')), base, unknownFields: unknown.list() };
}

/** The repro texts of some consecutive steps (their lines and behaviour texts), and the epoch of the first. */
function reproTexts(text: string, behaviourText: string, unknown: UnknownTally): { texts: string[]; base: string } {
  const lines = text.split('\n');
  const behaviours = behaviourText.split('\n');
  const texts: string[] = [];
  let base = '';
  for (let i = 0; i < behaviours.length - 1; i++) {
    const behaviour = JSON.parse(behaviours[i]!) as TraceBehaviour;
    const rest = lineRest(lines[i]!, behaviours[i]!);
    base ||= behaviour.scope.epoch;
    const fast = fastStepReproText(rest, behaviour, undefined, behaviours[i]);
    if (fast !== undefined) {
      texts.push(fast);
      continue;
    }
    const r = stepRepro({ ...rest, behaviour });
    texts.push(r.text);
    unknown.add(r.unknownFields);
  }
  return { texts, base };
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

/** What the thread is asked: seal a whole segment, or feed / finish a segment sealed piece by piece. */
type SealRequest =
  | { op: 'seal'; input: SealInput }
  | { op: 'feed'; key: string; piece: SealPiece }
  | { op: 'finish'; key: string; input: SealInput; steps: number };

/** Some consecutive steps of a segment: their lines, behaviour texts (and observations texts). */
export type SealPiece = Pick<SealInput, 'text' | 'behaviour' | 'observations' | 'repro'>;

const sealThread = new ModuleThreadRpc<SealRequest, SealOutput | null>(import.meta.url, MARK, 'trace sealing');

/** Start the sealing thread ahead of the first piece (ThreadSeal.feed): its start-up then overlaps the run's. */
export function warmSealThread(): void {
  sealThread.warm();
}

/** Whether the sealing thread is running (started by a piece, a large seal or warmSealThread). */
export function sealThreadRunning(): boolean {
  return sealThread.threadId !== undefined;
}

/** Seal a segment off the event loop (on the thread when it is large). */
export async function sealSegmentOffLoop(input: SealInput): Promise<SealOutput> {
  const chars = input.text.length + input.behaviour.length + (input.observations?.length ?? 0);
  if (chars < THREAD_SEAL_MIN_CHARS) return sealSegment(input);
  return (await sealThread.call({ op: 'seal', input }))!;
}

let nextSealKey = 0;

/**
 * One segment sealed piece by piece on the thread: `feed` its steps in order as they come, then
 * `finish` with the rest and the digest's state at its start. The output is the one-shot seal's.
 */
export class ThreadSeal {
  private readonly key = `seal-${nextSealKey++}`;

  feed(piece: SealPiece): Promise<void> {
    return sealThread.call({ op: 'feed', key: this.key, piece }).then(() => undefined);
  }

  /** The last piece, with the digest's state at the segment's start; `steps` is the segment's step count, checked. */
  async finish(input: SealInput, steps: number): Promise<SealOutput> {
    return (await sealThread.call({ op: 'finish', key: this.key, input, steps }))!;
  }
}

/** A gzip stream whose output is collected: the bytes gzipSync gives for everything written. */
class GzipCollector {
  private readonly gz: Gzip = createGzip();
  private readonly chunks: Buffer[] = [];

  constructor() {
    this.gz.on('data', (c: Buffer) => this.chunks.push(c));
  }

  write(text: string): void {
    if (text.length > 0) this.gz.write(Buffer.from(text, 'utf8'));
  }

  async end(): Promise<Buffer> {
    const ended = once(this.gz, 'end');
    this.gz.end();
    await ended;
    return Buffer.concat(this.chunks);
  }
}

/** On the thread: a segment being sealed piece by piece (its gzip streams, repro texts, behaviour texts). */
class OpenSegment {
  private readonly lines = new GzipCollector();
  private readonly repro = new GzipCollector();
  private observations: GzipCollector | undefined;
  private readonly behaviours: string[] = [];
  private readonly unknown = new UnknownTally();
  private base = '';
  private reproSteps = 0;
  /** Steps fed so far (behaviour texts). */
  private steps = 0;
  /** Why a piece could not be taken: the segment is then never finished. */
  broken: unknown;

  feed(piece: SealPiece): void {
    this.steps += linesIn(piece.behaviour);
    this.lines.write(piece.text);
    this.behaviours.push(piece.behaviour);
    if (piece.observations !== undefined) (this.observations ??= new GzipCollector()).write(piece.observations);
    if (!piece.repro || piece.behaviour.length === 0) return;
    const { texts, base } = reproTexts(piece.text, piece.behaviour, this.unknown);
    this.base ||= base;
    if (texts.length > 0) this.repro.write(`${this.reproSteps > 0 ? ',' : ''}${texts.join(',')}`);
    this.reproSteps += texts.length;
  }

  async finish(input: SealInput, steps: number): Promise<SealOutput> {
    if (this.broken !== undefined) throw this.broken;
    this.feed(input);
    if (this.steps !== steps) throw new Error(`the sealing thread got ${this.steps} of the segment's ${steps} steps`);
    const to = advanceHashes({ from: input.from, behaviour: this.behaviours.join('') });
    const out: SealOutput = { gz: await this.lines.end(), to };
    const repro = await this.repro.end();
    if (input.repro && this.reproSteps > 0)
      out.repro = { gz: repro, base: this.base, unknownFields: this.unknown.list() };
    if (this.observations) out.observationsGz = await this.observations.end();
    return out;
  }
}

/** How many lines `text` holds (each ends with "\n"). */
function linesIn(text: string): number {
  let n = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) n++;
  return n;
}

/** The thread's side: the segments being sealed piece by piece, by key. */
const open = new Map<string, OpenSegment>();

function answer(request: SealRequest): ThreadAnswer<SealOutput | null> | Promise<ThreadAnswer<SealOutput | null>> {
  if (request.op === 'seal') return { value: sealSegment(request.input) };
  let segment = open.get(request.key);
  if (request.op === 'feed') {
    if (!segment) open.set(request.key, (segment = new OpenSegment()));
    try {
      segment.feed(request.piece);
    } catch (e) {
      segment.broken = e;
      throw e;
    }
    return { value: null };
  }
  open.delete(request.key);
  return (segment ?? new OpenSegment()).finish(request.input, request.steps).then((value) => ({ value }));
}

if (onModuleThread(MARK)) serveModuleThread(answer);
