// The trace on disk and its one reader (docs/spec/trace-store.md). Runs write one format,
// `segments`: <runDir>/trace/NNNNNN.jsonl.gz, each a gzip of the canonical TransitionTrace lines of a
// run of consecutive steps, beside it NNNNNN.repro.gz (each step's ReproHash text, made when it was
// sealed, so a receipt walks no step again), and <runDir>/trace/index.jsonl, one canonical line per
// segment {segment, firstStep, steps, bytes, sha256, after, repro} appended once both are durable.
// With --trace-observations (physical: run.json's `traceObservations`, in no hash or index) each
// segment also has NNNNNN.observations.jsonl.gz, the canonical observations of each of its steps
// (the text its observationDigest hashes), written before the segment's index line (trace/observations.ts reads it).
// Runs of older versions wrote `jsonl`, <runDir>/trace.jsonl (one canonical line per step): the
// reader still reads it (verify, diff, replay), resume and recovery refuse it by name.
// The segmented writer compresses off the step loop (zlib's thread pool), keeps at most a few
// sealed segments in flight (back-pressure: append returns a promise to await), and `sync()`
// seals the open segment and fsyncs segments, index and directory, so a checkpoint committed after
// it never points past durable trace. The reader detects the format, checks every segment against
// the digest the index (or a receipt) binds, and yields the steps in order.
// NOT the meaning of a step (trace.ts), the receipt (receipt/receipt.ts) or the step loop.
import { createHash, type Hash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { open as openAsync } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { canonicalize, parseExpectedCanonical, parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import {
  discardStaged,
  fsyncDir,
  publishStaged,
  stageFileDurable,
  writeAll,
  type StagedFile,
} from '../durable-file.js';
import { canonicalBehaviour, type TransitionTrace } from './trace.js';
import type { UnknownField } from '../receipt/canonical.js';
import {
  advanceHashes,
  genesisHashes,
  sealSegment,
  sealSegmentOffLoop,
  ThreadSeal,
  warmSealThread,
  type SealedRepro,
  type SealOutput,
  type TraceHashState,
} from './trace-seal-thread.js';
import { asWriteFailure, guardWrite } from '../write-failure.js';
import type { Sha256State } from './sha256-state.js';

/** The old single-file trace (one canonical line per step): read, never written. */
export const TRACE_JSONL = 'trace.jsonl';
/** The directory of a segmented trace and its index file. */
export const TRACE_DIR = 'trace';
export const TRACE_INDEX = 'index.jsonl';
/** The format ids a receipt's `trace.format` names, by format. */
export const TRACE_FORMATS = { jsonl: 'detsim-trace-jsonl-v1', segments: 'detsim-trace-segments-v1' } as const;
/** A trace's on-disk format: `jsonl` (trace.jsonl) or `segments` (trace/ + index). */
export type TraceFormat = keyof typeof TRACE_FORMATS;
/** Default steps per segment: ~4k steps of 16 walkers is ~32 MB of lines, ~1.7 MB on disk. */
export const DEFAULT_SEGMENT_STEPS = 4096;
/** Sealed segments allowed in flight (compressing or writing) before append makes the loop wait. */
export const DEFAULT_MAX_IN_FLIGHT = 2;
/**
 * The open segment's steps go to the sealing thread in pieces of this many as they are appended
 * (ThreadSeal), so a sync (a checkpoint's) seals at most this many steps itself, not the whole
 * open segment (~160 µs a step of 16 walkers: a checkpoint every 1,000 steps waited ~0.2 s).
 */
export const SEAL_PIECE_STEPS = 32;
/**
 * A piece also goes once its texts reach this many characters (16 walkers' steps are ~14 k each):
 * posting one to the thread copies it, and past ~200 KB a post cost ~10× more per byte on this
 * machine (a 32-step piece of 16 walkers, ~440 k characters: ~0.5 ms of the step loop; in pieces
 * of ~96 k: ~15 µs each).
 */
export const SEAL_PIECE_CHARS = 96 * 1024;

/** One segment of a segmented trace, as the index (and a receipt) binds it. */
export interface SegmentEntry {
  /** File name inside trace/. */
  segment: string;
  /** U64 string: the step of its first line. */
  firstStep: string;
  /** Number of lines (steps). */
  steps: number;
  /** Bytes of the file (compressed). */
  bytes: number;
  /** SHA-256 of the file's bytes. */
  sha256: string;
  /** The behaviour digest's state after its last step (what resume continues from without reading earlier segments). */
  after?: TraceHashState;
  /** Its repro file: each step's ReproHash text made when the segment was sealed (a receipt hashes these). */
  repro?: ReproEntry;
}

/** A segment's repro file as the index records it. */
export interface ReproEntry {
  /** File name inside trace/ (NNNNNN.repro.gz beside NNNNNN.jsonl.gz). */
  file: string;
  bytes: number;
  sha256: string;
  /** The epoch its steps were rebased onto (the run's first). */
  base: string;
  /** Unclassified fields over its steps, by path. */
  unknownFields: UnknownField[];
}

/** Where a trace sits on disk: the whole binding a receipt records (`receipt.trace`). */
export interface TraceBinding {
  format: (typeof TRACE_FORMATS)[TraceFormat];
  /** Total steps over all segments. */
  steps: number;
  /** In step order; a jsonl trace is one "segment", trace.jsonl itself. */
  segments: SegmentEntry[];
}

/** The writer a session appends to (SegmentedTraceWriter; the bus is a parameter). */
export interface TraceSink {
  /**
   * Append one canonical trace line and the step's behaviour text as the behaviour digest hashes
   * it, and the step's canonical observations text (kept only by a writer with `observations`); a
   * returned promise means "wait before the next step" (back-pressure).
   */
  appendLine(line: string, behaviourText: string, observationsText?: string): void | Promise<void>;
  /** Make every appended line durable (before a checkpoint at this boundary is committed). */
  sync(): void | Promise<void>;
  /** sync, then release the files; safe to call twice. */
  close(): void | Promise<void>;
  /** After sync(): the digest of the index so far (indexDigestOf), recorded by each capture. */
  indexDigest(): string;
  /**
   * The behaviour digest's state over the steps whose index line is written: after a sync that did
   * not fail, every appended step (what a checkpoint at that boundary carries).
   */
  durable(): { state: Sha256State; steps: number };
}

const segmentName = (seq: number) => `${String(seq).padStart(6, '0')}.jsonl.gz`;
/** A segment's repro file name. */
const reproName = (segment: string) => segment.replace(/\.jsonl\.gz$/, '.repro.gz');
/** A segment's observations sidecar (--trace-observations): NNNNNN.observations.jsonl.gz. */
export const observationsName = (segment: string) => segment.replace(/\.jsonl\.gz$/, '.observations.jsonl.gz');
const SEGMENT_FILE = /^([0-9]{6})\.jsonl\.gz$/;

/** One past the highest segment number in the index or the directory (an orphan from a crash is never overwritten). */
function nextSegmentSeq(dir: string, index: readonly SegmentEntry[]): number {
  const names = [...index.map((s) => s.segment), ...(existsSync(dir) ? readdirSync(dir) : [])];
  return names.reduce((n, f) => Math.max(n, Number(SEGMENT_FILE.exec(f)?.[1] ?? -1) + 1), 0);
}
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** How a SegmentedTraceWriter cuts, bounds and keeps its trace. */
export interface TraceWriterOptions {
  /** Steps per segment (DEFAULT_SEGMENT_STEPS). */
  segmentSteps?: number;
  /** Sealed segments in flight before append makes the loop wait (DEFAULT_MAX_IN_FLIGHT). */
  maxInFlight?: number;
  /** Keep each step's observations text in a sidecar (`--trace-observations`). */
  observations?: boolean;
  /**
   * Steps the session means to append: more than SEAL_PIECE_STEPS, in segments longer than that,
   * starts the sealing thread at once.
   */
  expectedSteps?: number;
}

/**
 * Writes a segmented trace: lines are gathered in memory until `segmentSteps` of them (or a
 * `sync()`), then sealed: gzip runs in zlib's thread pool, and the segment file is written,
 * fsynced and recorded in index.jsonl in step order. At most `maxInFlight` sealed segments wait;
 * beyond that `appendLine` returns a promise that settles when the oldest is on disk.
 */
export class SegmentedTraceWriter implements TraceSink {
  readonly dir: string;
  /** The open segment's steps not yet fed to the sealing thread. */
  private lines: string[] = [];
  private behaviours: string[] = [];
  /** Characters of the unfed steps' texts (lines, behaviours, observations). */
  private pieceChars = 0;
  /** Steps in the open segment (fed or not). */
  private openSteps = 0;
  /** The open segment's seal on the thread, once a piece of it was fed. */
  private threadSeal: ThreadSeal | undefined;
  /** The open segment's observations texts (only with `opts.observations`). */
  private observations: string[] = [];
  /** The behaviour digest's state at the end of the last sealed segment. */
  private hashes: TraceHashState;
  /** The digest's state and step count at the end of the last segment whose index line is written. */
  private written: { state: Sha256State; steps: number };
  private nextSeq: number;
  private nextStep: bigint;
  private firstOfOpen: bigint;
  private tail: Promise<void> = Promise.resolve();
  private inFlight = 0;
  private failure: unknown;
  private indexFd: number | undefined;
  /** SHA-256 over the index lines written so far (indexDigestOf), continued as lines are appended. */
  private readonly indexHash: Hash;
  private closed = false;

  constructor(
    readonly runDir: string,
    private readonly opts: TraceWriterOptions = {},
  ) {
    this.dir = join(runDir, TRACE_DIR);
    guardWrite(this.dir, () => mkdirSync(this.dir, { recursive: true }));
    const index = readTraceIndex(runDir);
    const last = index[index.length - 1];
    this.nextSeq = nextSegmentSeq(this.dir, index);
    this.nextStep = last ? BigInt(last.firstStep) + BigInt(last.steps) : 0n;
    this.firstOfOpen = this.nextStep;
    if (last && !last.after) throw noHashes(this.dir, last);
    this.hashes = last?.after ? { digest: last.after.digest } : genesisHashes();
    this.written = { state: this.hashes.digest, steps: Number(this.nextStep) };
    this.indexHash = createHash('sha256');
    for (const e of index) this.indexHash.update(`${canonicalize(e)}\n`, 'utf8');
    const path = join(this.dir, TRACE_INDEX);
    this.indexFd = guardWrite(path, () => openSync(path, 'a'));
    // A run that will feed pieces starts the sealing thread while its workers start, not mid-run.
    const pieces = Math.min(opts.expectedSteps ?? 0, opts.segmentSteps ?? DEFAULT_SEGMENT_STEPS);
    if (pieces > SEAL_PIECE_STEPS) warmSealThread();
  }

  /** A new writer appending to the same trace with the same options (after a recovery cut it back). */
  reopen(): SegmentedTraceWriter {
    return new SegmentedTraceWriter(this.runDir, this.opts);
  }

  /** indexDigestOf the index as written so far (after `sync()`: every step appended; a capture records it). */
  indexDigest(): string {
    return this.indexHash.copy().digest('hex');
  }

  durable(): { state: Sha256State; steps: number } {
    return this.written;
  }

  /** The step the next appended line must carry. */
  get step(): bigint {
    return this.nextStep;
  }

  appendLine(line: string, behaviourText: string, observationsText?: string): void | Promise<void> {
    this.throwIfFailed();
    if (this.closed) throw new Error('trace writer closed');
    this.lines.push(line);
    this.behaviours.push(behaviourText);
    // The characters posted: each text and its newline.
    this.pieceChars += line.length + behaviourText.length + 2;
    if (this.opts.observations) {
      if (observationsText === undefined) throw new Error('trace writer: step without its observations text');
      this.observations.push(observationsText);
      this.pieceChars += observationsText.length + 1;
    }
    this.nextStep++;
    this.openSteps++;
    if (this.openSteps < (this.opts.segmentSteps ?? DEFAULT_SEGMENT_STEPS)) {
      if (this.lines.length >= SEAL_PIECE_STEPS || this.pieceChars >= SEAL_PIECE_CHARS) this.feed();
      return;
    }
    this.seal();
    if (this.inFlight > (this.opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT)) return this.drainOne();
  }

  /** Seal the open segment (if any), wait for every segment to be durable, fsync the index and directory. */
  async sync(): Promise<void> {
    this.throwIfFailed();
    if (this.openSteps > 0) this.seal();
    await this.tail;
    this.throwIfFailed();
    const fd = this.indexFd;
    if (fd !== undefined) guardWrite(join(this.dir, TRACE_INDEX), () => fsyncSync(fd));
    fsyncDir(this.dir);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.sync();
    } finally {
      this.closed = true;
      if (this.indexFd !== undefined) closeSync(this.indexFd);
      this.indexFd = undefined;
    }
  }

  private throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  /** Wait until fewer than the allowed segments are in flight. */
  private async drainOne(): Promise<void> {
    const limit = this.opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    while (this.inFlight > limit && this.failure === undefined) await this.tail;
    this.throwIfFailed();
  }

  /** The unfed steps of the open segment as one piece (their texts joined), taken out of the writer. */
  private takePiece(): { text: string; behaviour: string; observations?: string } {
    const piece = {
      text: this.lines.length > 0 ? `${this.lines.join('\n')}\n` : '',
      behaviour: this.behaviours.length > 0 ? `${this.behaviours.join('\n')}\n` : '',
      ...(this.opts.observations
        ? { observations: this.observations.length > 0 ? `${this.observations.join('\n')}\n` : '' }
        : {}),
    };
    this.lines = [];
    this.behaviours = [];
    this.observations = [];
    this.pieceChars = 0;
    return piece;
  }

  /** Hand the unfed steps of the open segment to the sealing thread ahead of its seal. */
  private feed(): void {
    const piece = this.takePiece();
    const seal = (this.threadSeal ??= new ThreadSeal());
    const file = join(this.dir, segmentName(this.nextSeq));
    seal.feed({ ...piece, repro: true }).catch((e: unknown) => {
      this.failure ??= asWriteFailure(e, file);
    });
  }

  /**
   * Hand the open segment to be sealed: it is gzipped and the digest's state advanced from the
   * previous segment's end (on the sealing thread when it was fed there or is large), so segments
   * are sealed one after another, each written, fsynced and recorded in the index in step order.
   */
  private seal(): void {
    const piece = this.takePiece();
    const threadSeal = this.threadSeal;
    const entry = { seq: this.nextSeq++, firstStep: this.firstOfOpen, steps: this.openSteps };
    this.threadSeal = undefined;
    this.openSteps = 0;
    this.firstOfOpen = this.nextStep;
    this.inFlight++;
    this.tail = this.tail.then(async () => {
      try {
        if (this.failure !== undefined) return;
        const input = { ...piece, from: this.hashes, repro: true };
        const sealed = threadSeal ? await threadSeal.finish(input, entry.steps) : await sealSegmentOffLoop(input);
        this.hashes = sealed.to;
        await this.writeSegment(entry, sealed);
      } catch (e) {
        this.failure ??= asWriteFailure(e, join(this.dir, segmentName(entry.seq)));
      } finally {
        this.inFlight--;
      }
    });
  }

  /** The segment file and its repro file, each written and fsynced, then the index line naming both. */
  private async writeSegment(e: { seq: number; firstStep: bigint; steps: number }, sealed: SealOutput): Promise<void> {
    const name = segmentName(e.seq);
    const bytes = bufferOf(sealed.gz);
    await writeFileSynced(join(this.dir, name), bytes);
    const repro = sealed.repro ? reproEntryOf(name, sealed.repro) : undefined;
    if (repro) await writeFileSynced(join(this.dir, repro.entry.file), repro.bytes);
    if (sealed.observationsGz)
      await writeFileSynced(join(this.dir, observationsName(name)), bufferOf(sealed.observationsGz));
    const line: SegmentEntry = {
      segment: name,
      firstStep: e.firstStep.toString(),
      steps: e.steps,
      bytes: bytes.byteLength,
      sha256: sha256(bytes),
      after: this.hashes,
      ...(repro ? { repro: repro.entry } : {}),
    };
    const text = `${canonicalize(line)}\n`;
    writeAll(this.indexFd!, Buffer.from(text, 'utf8'));
    this.indexHash.update(text, 'utf8');
    this.written = { state: sealed.to.digest, steps: Number(e.firstStep) + e.steps };
  }
}

/**
 * The digest of a list of index entries: SHA-256 over each one's canonical line and "\n". A
 * capture records the index's digest in its ledger event (traceIndex), and resume checks the
 * entries it keeps against it, so an index entry edited, moved or dropped since is refused.
 */
export function indexDigestOf(entries: readonly SegmentEntry[]): string {
  const h = createHash('sha256');
  for (const e of entries) h.update(`${canonicalize(e)}\n`, 'utf8');
  return h.digest('hex');
}

const bufferOf = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

async function writeFileSynced(path: string, bytes: Buffer): Promise<void> {
  const fh = await openAsync(path, 'w');
  try {
    await fh.writeFile(bytes);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function reproEntryOf(segment: string, r: SealedRepro): { entry: ReproEntry; bytes: Buffer } {
  const bytes = bufferOf(r.gz);
  const entry = { file: reproName(segment), bytes: bytes.byteLength, sha256: sha256(bytes), base: r.base };
  return { entry: { ...entry, unknownFields: r.unknownFields }, bytes };
}

// ---------------------------------------------------------------------------------------------
// Reading

/** Which format a run directory's trace is in, or null when it has none. */
export function traceFormatOf(runDir: string): TraceFormat | null {
  if (existsSync(join(runDir, TRACE_DIR, TRACE_INDEX))) return 'segments';
  if (existsSync(join(runDir, TRACE_JSONL))) return 'jsonl';
  return null;
}

/** The index of a segmented trace (a torn last line, written by a crash mid-append, is ignored). */
export function readTraceIndex(runDir: string): SegmentEntry[] {
  const path = join(runDir, TRACE_DIR, TRACE_INDEX);
  if (!existsSync(path)) return [];
  const lines = readFileSync(path, 'utf8').split('\n');
  const out: SegmentEntry[] = [];
  lines.forEach((line, i) => {
    if (line.length === 0) return;
    try {
      out.push(parseStrict(line) as unknown as SegmentEntry);
    } catch (e) {
      if (i === lines.length - 1) return; // torn: the segment it named is not part of the trace
      throw new DetsimError(
        'struct_invalid_receipt',
        `${path}: line ${i + 1}: ${(e as Error).message}`,
        `${TRACE_INDEX}:${i + 1}`,
      );
    }
  });
  return out;
}

/** The binding of the trace as it is on disk now (what a receipt records). */
export function traceBindingOf(runDir: string): TraceBinding {
  const format = traceFormatOf(runDir);
  if (format === null) throw missingTrace(runDir);
  if (format === 'segments') {
    const segments = readTraceIndex(runDir);
    return { format: TRACE_FORMATS.segments, steps: segments.reduce((n, s) => n + s.steps, 0), segments };
  }
  const bytes = readFileSync(join(runDir, TRACE_JSONL));
  const steps = bytes
    .toString('utf8')
    .split('\n')
    .filter((l) => l.length > 0).length;
  return {
    format: TRACE_FORMATS.jsonl,
    steps,
    segments: [{ segment: TRACE_JSONL, firstStep: '0', steps, bytes: bytes.byteLength, sha256: sha256(bytes) }],
  };
}

function missingTrace(runDir: string): DetsimError {
  return new DetsimError(
    'struct_invalid_receipt',
    `${runDir}: no trace (neither ${TRACE_JSONL} nor ${TRACE_DIR}/${TRACE_INDEX})`,
    TRACE_JSONL,
  );
}

/**
 * Check the trace on disk against a binding (a receipt's `trace`): every bound segment present
 * (audit_trace_segment_missing), in its place (audit_trace_segment_reordered: its bytes are those
 * bound to another position) and unchanged (audit_trace_segment_tampered); nothing more or less.
 */
export function checkTraceBinding(runDir: string, bound: TraceBinding, what = 'receipt.json'): void {
  const onDisk = traceFormatOf(runDir);
  const dir = bound.format === TRACE_FORMATS.segments ? join(runDir, TRACE_DIR) : runDir;
  if (onDisk === null || TRACE_FORMATS[onDisk] !== bound.format)
    throw new DetsimError(
      'audit_trace_segment_missing',
      `${runDir}: ${what} binds a ${bound.format} trace, the run directory holds ${onDisk ? TRACE_FORMATS[onDisk] : 'none'}`,
      'trace.format',
    );
  const byDigest = new Map(bound.segments.map((s, i) => [s.sha256, i]));
  bound.segments.forEach((s, i) => checkSegmentFile(dir, s, i, byDigest, what));
  if (bound.format === TRACE_FORMATS.segments) {
    const index = readTraceIndex(runDir);
    if (canonicalize(index) !== canonicalize(bound.segments))
      throw new DetsimError(
        'audit_trace_segment_tampered',
        `${join(dir, TRACE_INDEX)}: lists ${index.length} segments that differ from the ${bound.segments.length} ${what} binds`,
        `trace.segments`,
      );
  }
}

/** One segment file against its bound entry: present, then its own bytes, else named as moved or changed. */
function checkSegmentFile(
  dir: string,
  s: SegmentEntry,
  i: number,
  byDigest: ReadonlyMap<string, number>,
  what: string,
): Buffer {
  const path = join(dir, s.segment);
  if (!existsSync(path))
    throw new DetsimError(
      'audit_trace_segment_missing',
      `${path}: segment ${i} (steps from ${s.firstStep}, ${s.steps} steps) bound by ${what} is missing`,
      `trace.segments[${i}]`,
    );
  const bytes = readFileSync(path);
  const digest = sha256(bytes);
  if (digest === s.sha256) return bytes;
  const other = byDigest.get(digest);
  if (other !== undefined && other !== i)
    throw new DetsimError(
      'audit_trace_segment_reordered',
      `${path}: holds the bytes ${what} binds to segment ${other}, not those of segment ${i}`,
      `trace.segments[${i}]`,
    );
  throw new DetsimError(
    'audit_trace_segment_tampered',
    `${path}: segment ${i}'s bytes differ from the SHA-256 ${what} binds`,
    `trace.segments[${i}]`,
  );
}

/** Options of the reader. */
export interface ReadTraceOptions {
  /** Skip whole segments that end before this step (lines before it in the first kept segment are still yielded). */
  fromStep?: bigint;
  /** Called with each file the reader opens (instrumentation: resume must open only the last segments). */
  onOpen?: (path: string) => void;
  /**
   * stageSegmentedCut (resume): check every kept segment before its index entry is trusted —
   * `bytes`: in its place and its bytes those the index binds (the kept entries are then checked
   * against `keptIndexDigest`, recorded when the checkpoint was captured); `full`: also its steps
   * hashed again to the digest state its entry records (a run whose ledger recorded no digest).
   */
  verifyKept?: 'bytes' | 'full';
  /** The indexDigestOf the entries before the boundary, as the checkpoint's capture recorded it. */
  keptIndexDigest?: string;
  /** Names the recording in a refusal (e.g. "ledger.jsonl when ckpt-e1-4 was captured"). */
  keptIndexSource?: string;
}

/** The canonical lines of a run's trace, in step order, checked against the index; a jsonl trace as it is. */
export function* readTraceLinesSync(runDir: string, opts: ReadTraceOptions = {}): Generator<string> {
  const format = traceFormatOf(runDir);
  if (format === null) throw missingTrace(runDir);
  if (format === 'jsonl') {
    const path = join(runDir, TRACE_JSONL);
    opts.onOpen?.(path);
    for (const line of readFileSync(path, 'utf8').split('\n')) if (line.length > 0) yield line;
    return;
  }
  const dir = join(runDir, TRACE_DIR);
  const index = readTraceIndex(runDir);
  const byDigest = new Map(index.map((s, i) => [s.sha256, i]));
  for (const [i, s] of index.entries()) {
    if (opts.fromStep !== undefined && BigInt(s.firstStep) + BigInt(s.steps) <= opts.fromStep) continue;
    opts.onOpen?.(join(dir, s.segment));
    const bytes = checkSegmentFile(dir, s, i, byDigest, TRACE_INDEX);
    const lines = gunzipSync(bytes).toString('utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    if (lines.length !== s.steps)
      throw new DetsimError(
        'audit_trace_segment_tampered',
        `${join(dir, s.segment)}: holds ${lines.length} lines, ${TRACE_INDEX} says ${s.steps}`,
        `trace.segments[${i}]`,
      );
    yield* lines;
  }
}

/** The steps of a run's trace in order (either format), parsed strictly. Synchronous twin of {@link readTrace}. */
export function* readTraceSync(runDir: string, opts: ReadTraceOptions = {}): Generator<TransitionTrace> {
  let n = 0;
  for (const line of readTraceLinesSync(runDir, opts)) {
    n++;
    try {
      yield parseExpectedCanonical(line) as unknown as TransitionTrace;
    } catch (e) {
      if (!(e instanceof DetsimError)) throw e;
      throw new DetsimError('struct_invalid_receipt', `${runDir}: trace line ${n}: ${e.message}`, `trace:${n}`);
    }
  }
}

/**
 * THE trace reader: the steps of a run directory's trace as an async iterator, whatever the
 * format (trace.jsonl or trace/ segments), each segment checked against its digest first.
 */
export async function* readTrace(runDir: string, opts: ReadTraceOptions = {}): AsyncGenerator<TransitionTrace> {
  for (const t of readTraceSync(runDir, opts)) {
    yield t;
    // Let other work run between steps (a long trace is read without starving the event loop).
    if (Number(t.behaviour.scope.step) % 1024 === 1023) await new Promise((r) => setImmediate(r));
  }
}

/** Bytes a trace occupies on disk (every file of the binding with its repro file, plus the index). */
export function traceBytesOnDisk(runDir: string): number {
  const b = traceBindingOf(runDir);
  const index = join(runDir, TRACE_DIR, TRACE_INDEX);
  const extra = b.format === TRACE_FORMATS.segments && existsSync(index) ? readFileSync(index).byteLength : 0;
  return b.segments.reduce((n, s) => n + s.bytes + (s.repro?.bytes ?? 0), 0) + extra;
}

/** A repro file is missing or not the one the index names: the caller walks the trace itself instead. */
export class ReproFileUnusable extends Error {}

/** One segment's repro texts (comma-separated, in step order) and the unknown fields they hold. */
export interface ReproTexts {
  texts: Buffer;
  unknownFields: readonly UnknownField[];
}

/**
 * The repro texts of a whole segmented trace, segment by segment, when every segment has a repro
 * file made for the epoch its first step was taken in and the segments run from step 0 without a
 * gap; otherwise null (an older or jsonl trace: the caller walks the steps). A repro file whose
 * bytes differ from the index's digest throws ReproFileUnusable while iterating.
 */
export function readReproTexts(runDir: string): Iterable<ReproTexts> | null {
  if (traceFormatOf(runDir) !== 'segments') return null;
  const index = readTraceIndex(runDir);
  const base = index[0]?.repro?.base;
  let next = 0n;
  for (const s of index) {
    if (s.repro === undefined || s.repro.base !== base || BigInt(s.firstStep) !== next) return null;
    next += BigInt(s.steps);
  }
  if (base === undefined || firstEpochOf(runDir, index[0]!) !== base) return null;
  return reproTextsOf(join(runDir, TRACE_DIR), index);
}

function* reproTextsOf(dir: string, index: readonly SegmentEntry[]): Generator<ReproTexts> {
  for (const s of index) {
    const r = s.repro!;
    const path = join(dir, r.file);
    if (!existsSync(path)) throw new ReproFileUnusable(`${path}: missing`);
    const bytes = readFileSync(path);
    if (sha256(bytes) !== r.sha256) throw new ReproFileUnusable(`${path}: differs from ${TRACE_INDEX}`);
    yield { texts: gunzipSync(bytes), unknownFields: r.unknownFields };
  }
}

/** The epoch of the trace's first step (read from the first segment, checked against the index). */
function firstEpochOf(runDir: string, first: SegmentEntry): string | undefined {
  const dir = join(runDir, TRACE_DIR);
  const text = gunzipSync(checkSegmentFile(dir, first, 0, new Map(), TRACE_INDEX)).toString('utf8');
  const line = text.slice(0, text.indexOf('\n'));
  return (parseExpectedCanonical(line) as unknown as TransitionTrace).behaviour?.scope?.epoch;
}

/**
 * Cut a segmented trace back to the steps before `step` (recovery rewinds): later segments are
 * removed, one that straddles it is resealed with its earlier lines (hashes recomputed; `rebased`
 * gives a line's behaviour text as the digest hashes it — by default its canonical behaviour,
 * right for a run in one epoch), and the index is replaced durably. The writer must be closed.
 * Returns the number of steps removed.
 */
export function truncateSegmentedTrace(
  runDir: string,
  step: bigint,
  rebased: (line: string) => string = (line) =>
    canonicalBehaviour((parseStrict(line) as unknown as TransitionTrace).behaviour),
): number {
  const cut = stageSegmentedCut(runDir, step, rebased);
  publishStaged(cut.staged);
  const dir = join(runDir, TRACE_DIR);
  for (const name of cut.leaving) guardWrite(join(dir, name), () => rmSync(join(dir, name), { force: true }));
  fsyncDir(dir);
  return cut.abandonedSteps;
}

/** A segmented trace cut at a checkpoint boundary, staged: publishing it is renames only. */
export interface SegmentedCut {
  /** The behaviour digest's state after the kept steps (the checkpoint's must equal it). */
  hashes: TraceHashState;
  keptSteps: bigint;
  /** Steps of the killed run beyond the boundary (first and last), or null. */
  abandoned: { from: bigint; to: bigint } | null;
  abandonedSteps: number;
  staged: StagedFile[];
  /** Segment files that leave the trace: renamed to `abandoned-<epoch>-<name>` once the cut is published. */
  leaving: string[];
}

/**
 * Stage the cut of a segmented trace at boundary `k` reading only what it must: whole segments
 * before k are kept by their index entries (their saved digest states say where the digest
 * stands), a segment that straddles k is read and resealed with its earlier lines (`rebased`
 * gives each kept line's behaviour text as the digest hashes it), later segments are abandoned.
 */
export function stageSegmentedCut(
  runDir: string,
  k: bigint,
  rebased: (line: string) => string,
  opts: ReadTraceOptions = {},
): SegmentedCut {
  const dir = join(runDir, TRACE_DIR);
  const index = readTraceIndex(runDir);
  const kept: SegmentEntry[] = [];
  const leaving: string[] = [];
  let hashes = genesisHashes();
  let abandonedSteps = 0;
  let abandonedFrom: bigint | null = null;
  let resealed: { entry: SegmentEntry; gz: Buffer } | null = null;
  let resealedRepro: { entry: ReproEntry; bytes: Buffer } | undefined;
  let resealedObservations: Buffer | undefined;
  let nextSeq = nextSegmentSeq(dir, index);
  let looked: IndexLookup | undefined;
  const lookup = (): IndexLookup => (looked ??= indexLookup(index));
  for (const [i, s] of index.entries()) {
    const first = BigInt(s.firstStep);
    const end = first + BigInt(s.steps);
    if (end <= k) {
      if (!s.after) throw noHashes(dir, s);
      if (opts.verifyKept)
        checkKeptSegment(dir, lookup(), i, opts.verifyKept === 'full' ? hashes : null, rebased, opts);
      kept.push(s);
      hashes = { digest: s.after.digest };
      continue;
    }
    leaving.push(s.segment, ...(s.repro ? [s.repro.file] : []), observationsName(s.segment));
    abandonedFrom ??= first >= k ? first : k;
    abandonedSteps += Number(end - (first >= k ? first : k));
    if (first >= k) continue;
    if (opts.verifyKept) checkPlace(dir, lookup(), i);
    opts.onOpen?.(join(dir, s.segment));
    const lines = gunzipSync(checkSegmentFile(dir, s, i, new Map(), TRACE_INDEX))
      .toString('utf8')
      .split('\n');
    const keep = lines.slice(0, Number(k - first));
    const out = sealSegment({
      text: `${keep.join('\n')}\n`,
      behaviour: keep.map((l) => `${rebased(l)}\n`).join(''),
      from: hashes,
      repro: s.repro !== undefined,
    });
    const gz = bufferOf(out.gz);
    hashes = out.to;
    const segment = segmentName(nextSeq++);
    const repro = out.repro ? reproEntryOf(segment, out.repro) : undefined;
    const entry = { segment, firstStep: s.firstStep, steps: keep.length, bytes: gz.byteLength };
    resealed = { entry: { ...entry, sha256: sha256(gz), after: hashes, ...(repro ? { repro: repro.entry } : {}) }, gz };
    resealedRepro = repro;
    resealedObservations = observationsPrefix(join(dir, observationsName(s.segment)), keep.length);
  }
  if (opts.keptIndexDigest !== undefined && indexDigestOf(kept) !== opts.keptIndexDigest)
    throw new DetsimError(
      'audit_trace_segment_tampered',
      `${join(dir, TRACE_INDEX)}: its ${kept.length} entries before step ${k} differ from those recorded in ${opts.keptIndexSource ?? 'the checkpoint'}`,
      TRACE_INDEX,
    );
  const keptSteps = kept.reduce((n, s) => n + BigInt(s.steps), 0n) + BigInt(resealed?.entry.steps ?? 0);
  const staged: StagedFile[] = [];
  try {
    if (resealed) staged.push(stageFileDurable(join(dir, resealed.entry.segment), [resealed.gz]));
    if (resealedRepro) staged.push(stageFileDurable(join(dir, resealedRepro.entry.file), [resealedRepro.bytes]));
    if (resealed && resealedObservations)
      staged.push(stageFileDurable(join(dir, observationsName(resealed.entry.segment)), [resealedObservations]));
    const entries = resealed ? [...kept, resealed.entry] : kept;
    staged.push(stageFileDurable(join(dir, TRACE_INDEX), entries.map((e) => `${canonicalize(e)}\n`).join('')));
  } catch (e) {
    discardStaged(staged);
    throw e;
  }
  const abandoned =
    abandonedFrom === null ? null : { from: abandonedFrom, to: abandonedFrom + BigInt(abandonedSteps) - 1n };
  return { hashes, keptSteps, abandoned, abandonedSteps, staged, leaving };
}

/**
 * The first `steps` lines of an observations sidecar, gzipped again: the sidecar of a segment a
 * cut reseals. None when the segment has no sidecar (a run without --trace-observations), it
 * cannot be read or it holds fewer lines (the export then refuses the run's sidecar as missing).
 */
function observationsPrefix(path: string, steps: number): Buffer | undefined {
  let lines: string[];
  try {
    lines = gunzipSync(readFileSync(path)).toString('utf8').split('\n');
  } catch {
    return undefined; // missing or damaged: physical data never stops a resume; the export refuses it
  }
  if (lines.length - 1 < steps) return undefined;
  return gzipSync(Buffer.from(`${lines.slice(0, steps).join('\n')}\n`, 'utf8'));
}

/**
 * A segment kept by a resume, checked before anything is trusted from its index entry: in its place
 * (its firstStep continues the previous entry, its name is listed once) and its bytes those the
 * index binds (one read of the segment). With `from` (no recorded index digest to bind the entries)
 * also: it holds `steps` lines, and the digest state over its lines, continued from `from`, are
 * the `after` the index records, so an entry edited, moved or swapped is refused too (every step
 * hashed again: ~250 µs a 16-agent step). Repro files are checked where they are used (a receipt
 * walks the trace when one differs).
 */
function checkKeptSegment(
  dir: string,
  lookup: IndexLookup,
  i: number,
  from: TraceHashState | null,
  rebased: (line: string) => string,
  opts: ReadTraceOptions,
): void {
  const s = lookup.index[i]!;
  const at = `trace.segments[${i}]`;
  checkPlace(dir, lookup, i);
  opts.onOpen?.(join(dir, s.segment));
  const bytes = checkSegmentFile(dir, s, i, lookup.byDigest, TRACE_INDEX);
  if (from === null) return;
  const lines = gunzipSync(bytes).toString('utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const tampered = (why: string): DetsimError =>
    new DetsimError('audit_trace_segment_tampered', `${join(dir, s.segment)}: ${why}`, at);
  if (lines.length !== s.steps) throw tampered(`holds ${lines.length} lines, ${TRACE_INDEX} says ${s.steps}`);
  const after = advanceHashes({ from, behaviour: lines.map((l) => `${rebased(l)}\n`).join('') });
  if (canonicalize(after.digest) !== canonicalize(s.after!.digest))
    throw tampered(`its steps do not give the digest state ${TRACE_INDEX} records after it`);
}

/** An index with its entries found by digest and by segment name (first listing), built once per cut. */
interface IndexLookup {
  readonly index: readonly SegmentEntry[];
  readonly byDigest: ReadonlyMap<string, number>;
  readonly firstByName: ReadonlyMap<string, number>;
}

function indexLookup(index: readonly SegmentEntry[]): IndexLookup {
  const firstByName = new Map<string, number>();
  index.forEach((e, i) => firstByName.has(e.segment) || firstByName.set(e.segment, i));
  return { index, byDigest: new Map(index.map((e, i) => [e.sha256, i])), firstByName };
}

/** Index entry `i` continues the one before it (the first starts at step 0) and names a segment listed once. */
function checkPlace(dir: string, { index, firstByName }: IndexLookup, i: number): void {
  const s = index[i]!;
  const prev = index[i - 1];
  const expectFirst = prev === undefined ? 0n : BigInt(prev.firstStep) + BigInt(prev.steps);
  if (BigInt(s.firstStep) !== expectFirst || firstByName.get(s.segment) !== i)
    throw new DetsimError(
      'audit_trace_segment_reordered',
      `${join(dir, TRACE_INDEX)}: entry ${i} (${s.segment}, from step ${s.firstStep}) is out of place in the index`,
      `trace.segments[${i}]`,
    );
}

function noHashes(dir: string, s: SegmentEntry): DetsimError {
  return new DetsimError(
    'struct_run_record',
    `${join(dir, TRACE_INDEX)}: segment ${s.segment} records no digest state; this trace cannot be resumed`,
    TRACE_INDEX,
  );
}

/** Publish a staged cut: the new segment and the index by rename (the index last), then move the leaving files aside. */
export function publishSegmentedCut(runDir: string, cut: SegmentedCut, epoch: string): void {
  publishStaged(cut.staged);
  const dir = join(runDir, TRACE_DIR);
  for (const name of cut.leaving)
    if (existsSync(join(dir, name)))
      guardWrite(join(dir, name), () => renameSync(join(dir, name), join(dir, `abandoned-${epoch}-${name}`)));
  fsyncDir(dir);
}
