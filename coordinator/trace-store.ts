// The trace on disk and its one reader (docs/spec/trace-store.md). Two formats:
//   - `jsonl` (the old one): <runDir>/trace.jsonl, one canonical TransitionTrace per line.
//   - `segments`: <runDir>/trace/NNNNNN.jsonl.gz, each a gzip of the same canonical lines for a
//     run of consecutive steps, and <runDir>/trace/index.jsonl, one canonical line per segment
//     {segment, firstStep, steps, bytes, sha256} appended once the segment is durable.
// The segmented writer compresses off the step loop (zlib's thread pool), keeps at most a few
// sealed segments in flight (back-pressure: append returns a promise to await), and `sync()`
// seals the open segment and fsyncs segments, index and directory, so a checkpoint committed after
// it never points past durable trace. The reader detects the format, checks every segment against
// the digest the index (or a receipt) binds, and yields the steps in order.
// NOT the meaning of a step (trace.ts), the receipt (receipt/receipt.ts) or the step loop.
import { createHash } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { open as openAsync } from 'node:fs/promises';
import { join } from 'node:path';
import { gunzipSync, gzip, gzipSync, constants as zlibConstants } from 'node:zlib';
import { canonicalize, parseStrict } from '../core/formats/canonical-json.js';
import { DetsimError } from '../core/formats/errors.js';
import { fsyncDir, writeAll, writeFileDurable } from './durable-file.js';
import type { TransitionTrace } from './trace.js';
import { asWriteFailure, guardWrite } from './write-failure.js';

/** The old single-file trace (one canonical line per step). */
export const TRACE_JSONL = 'trace.jsonl';
/** The directory of a segmented trace and its index file. */
export const TRACE_DIR = 'trace';
export const TRACE_INDEX = 'index.jsonl';
export const TRACE_FORMATS = { jsonl: 'detsim-trace-jsonl-v1', segments: 'detsim-trace-segments-v1' } as const;
export type TraceFormat = keyof typeof TRACE_FORMATS;
/** Default steps per segment: ~4k steps of 16 walkers is ~32 MB of lines, ~1.7 MB on disk. */
export const DEFAULT_SEGMENT_STEPS = 4096;
/** Sealed segments allowed in flight (compressing or writing) before append makes the loop wait. */
export const DEFAULT_MAX_IN_FLIGHT = 2;

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
}

/** Where a trace sits on disk: the whole binding a receipt records (`receipt.trace`). */
export interface TraceBinding {
  format: (typeof TRACE_FORMATS)[TraceFormat];
  /** Total steps over all segments. */
  steps: number;
  /** In step order; a jsonl trace is one "segment", trace.jsonl itself. */
  segments: SegmentEntry[];
}

/** The writer a session appends to: the old TraceWriter (sync) and SegmentedTraceWriter (async) both fit. */
export interface TraceSink {
  /** Append one canonical trace line; a returned promise means "wait before the next step" (back-pressure). */
  appendLine(line: string): void | Promise<void>;
  /** Make every appended line durable (before a checkpoint at this boundary is committed). */
  sync(): void | Promise<void>;
  /** sync, then release the files; safe to call twice. */
  close(): void | Promise<void>;
}

const segmentName = (seq: number) => `${String(seq).padStart(6, '0')}.jsonl.gz`;
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

function gzipAsync(data: Buffer): Promise<Buffer> {
  return new Promise((ok, fail) =>
    gzip(data, { level: zlibConstants.Z_DEFAULT_COMPRESSION }, (e, out) => (e ? fail(e) : ok(out))),
  );
}

/**
 * Writes a segmented trace: lines are gathered in memory until `segmentSteps` of them (or a
 * `sync()`), then sealed: gzip runs in zlib's thread pool, and the segment file is written,
 * fsynced and recorded in index.jsonl in step order. At most `maxInFlight` sealed segments wait;
 * beyond that `appendLine` returns a promise that settles when the oldest is on disk.
 */
export class SegmentedTraceWriter implements TraceSink {
  readonly dir: string;
  private lines: string[] = [];
  private nextSeq: number;
  private nextStep: bigint;
  private firstOfOpen: bigint;
  private tail: Promise<void> = Promise.resolve();
  private inFlight = 0;
  private failure: unknown;
  private indexFd: number | undefined;
  private closed = false;

  constructor(
    readonly runDir: string,
    private readonly opts: { segmentSteps?: number; maxInFlight?: number } = {},
  ) {
    this.dir = join(runDir, TRACE_DIR);
    guardWrite(this.dir, () => mkdirSync(this.dir, { recursive: true }));
    const index = readTraceIndex(runDir);
    const last = index[index.length - 1];
    this.nextSeq = last ? Number(last.segment.slice(0, 6)) + 1 : 0;
    this.nextStep = last ? BigInt(last.firstStep) + BigInt(last.steps) : 0n;
    this.firstOfOpen = this.nextStep;
    const path = join(this.dir, TRACE_INDEX);
    this.indexFd = guardWrite(path, () => openSync(path, 'a'));
  }

  /** The step the next appended line must carry. */
  get step(): bigint {
    return this.nextStep;
  }

  appendLine(line: string): void | Promise<void> {
    this.throwIfFailed();
    if (this.closed) throw new Error('trace writer closed');
    this.lines.push(line);
    this.nextStep++;
    if (this.lines.length < (this.opts.segmentSteps ?? DEFAULT_SEGMENT_STEPS)) return;
    this.seal();
    if (this.inFlight > (this.opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT)) return this.drainOne();
  }

  /** Seal the open segment (if any), wait for every segment to be durable, fsync the index and directory. */
  async sync(): Promise<void> {
    this.throwIfFailed();
    if (this.lines.length > 0) this.seal();
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

  /** Hand the open lines to compression now; the write waits its turn behind earlier segments. */
  private seal(): void {
    const text = Buffer.from(`${this.lines.join('\n')}\n`, 'utf8');
    const steps = this.lines.length;
    const entry = { seq: this.nextSeq++, firstStep: this.firstOfOpen, steps };
    this.lines = [];
    this.firstOfOpen = this.nextStep;
    this.inFlight++;
    const compressed = gzipAsync(text);
    compressed.catch(() => undefined); // reported by the write below, in order
    this.tail = this.tail.then(async () => {
      try {
        if (this.failure === undefined) await this.writeSegment(entry, await compressed);
      } catch (e) {
        this.failure ??= asWriteFailure(e, join(this.dir, segmentName(entry.seq)));
      } finally {
        this.inFlight--;
      }
    });
  }

  private async writeSegment(e: { seq: number; firstStep: bigint; steps: number }, bytes: Buffer): Promise<void> {
    const name = segmentName(e.seq);
    const fh = await openAsync(join(this.dir, name), 'w');
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    const line: SegmentEntry = {
      segment: name,
      firstStep: e.firstStep.toString(),
      steps: e.steps,
      bytes: bytes.byteLength,
      sha256: sha256(bytes),
    };
    writeAll(this.indexFd!, Buffer.from(`${canonicalize(line)}\n`, 'utf8'));
  }
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
      yield parseStrict(line) as unknown as TransitionTrace;
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

/** Bytes a trace occupies on disk (every file of the binding, plus the index). */
export function traceBytesOnDisk(runDir: string): number {
  const b = traceBindingOf(runDir);
  const index = join(runDir, TRACE_DIR, TRACE_INDEX);
  const extra = b.format === TRACE_FORMATS.segments && existsSync(index) ? readFileSync(index).byteLength : 0;
  return b.segments.reduce((n, s) => n + s.bytes, 0) + extra;
}

/**
 * Cut a segmented trace back to the steps before `step` (recovery and resume rewind): segments
 * starting at or after it are removed, the one holding it is rewritten with its earlier lines,
 * and the index is replaced durably. The writer must be closed. Returns the removed step count.
 */
export function truncateSegmentedTrace(runDir: string, step: bigint): number {
  const dir = join(runDir, TRACE_DIR);
  const index = readTraceIndex(runDir);
  const kept: SegmentEntry[] = [];
  let removed = 0;
  for (const s of index) {
    const first = BigInt(s.firstStep);
    const end = first + BigInt(s.steps);
    if (end <= step) kept.push(s);
    else if (first >= step) removed += s.steps;
    else {
      const lines = gunzipSync(readFileSync(join(dir, s.segment)))
        .toString('utf8')
        .split('\n');
      const keep = Number(step - first);
      const bytes = gzipSyncCanonical(lines.slice(0, keep));
      const name = s.segment;
      writeFileDurable(join(dir, name), [bytes]);
      kept.push({ segment: name, firstStep: s.firstStep, steps: keep, bytes: bytes.byteLength, sha256: sha256(bytes) });
      removed += s.steps - keep;
    }
  }
  writeFileDurable(join(dir, TRACE_INDEX), kept.map((s) => `${canonicalize(s)}\n`).join(''));
  const keptNames = new Set(kept.map((s) => s.segment));
  for (const f of readdirSync(dir))
    if (f.endsWith('.jsonl.gz') && !keptNames.has(f)) guardWrite(join(dir, f), () => rmSync(join(dir, f)));
  fsyncDir(dir);
  return removed;
}

function gzipSyncCanonical(lines: string[]): Buffer {
  return gzipSync(Buffer.from(`${lines.join('\n')}\n`, 'utf8'));
}
