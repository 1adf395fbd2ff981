// `detsim trace export`'s work: the run directories of a source (one run directory, or a directory
// whose children are run directories, e.g. a sweep), each checked against its receipt.json, read
// twice through the one trace reader (readTrace: only the segments its index lists, so the
// abandoned segments of a resumed run never count) — once to survey the columns, once to stream
// the rows — into a temp file beside --out that is published by a hard link only when whole (an
// --out that exists, or appears meanwhile, is refused and never overwritten). Progress is reported
// to a callback at most every few seconds. NOT the table's rules (trace-table.ts), the file
// formats (table-writers.ts) or the command line (cli/trace-command.ts).
// A run whose run.json records the observations sidecar (--trace-observations) is read with it,
// every step's observations checked against the trace's observationDigest on both passes
// (trace/observations.ts): a mismatch is refused during the first, before a byte is written.
import {
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { fsyncDir, tempPathOf } from '../durable-file.js';
import { checkReceiptBinding } from '../receipt/receipt.js';
import { readTrace, traceBindingOf } from '../trace/trace-store.js';
import { checkedObservations, readObservationLines, recordsObservations } from '../trace/observations.js';
import type { TransitionTrace } from '../trace/trace.js';
import { asWriteFailure, guardWrite } from '../write-failure.js';
import { tableWriter, type ExportFormat, type TableWriter } from './table-writers.js';
import {
  ColumnSurvey,
  overrideFields,
  rowsOfStep,
  type Column,
  type RunFields,
  type StepObservations,
  type TableLayout,
} from './trace-table.js';

/** One run of an export: its id (the run directory's name, the `run` column) and its directory. */
export interface ExportRun {
  readonly id: string;
  readonly dir: string;
}

/**
 * A run's `set.<path>` columns at a step: its run.json's overrides and, for a fork, from each fork's
 * boundary on, that fork's own overrides (its lineage, the oldest fork first: run.json `fork`,
 * its `parentFork`, …), so a fork's steps carry the values they ran with and its parent's steps
 * the parent's.
 */
function runFieldsOf(run: ExportRun): (step: string) => RunFields {
  const json = parseStrict(readFileSync(join(run.dir, RUN_FILE))) as { overrides?: unknown; fork?: unknown };
  const levels: { from: bigint; fields: RunFields }[] = [{ from: 0n, fields: overrideFields(json.overrides) }];
  for (const fork of forkChain(json.fork)) {
    const fields = new Map(levels.at(-1)!.fields);
    for (const [name, value] of overrideFields(fork.overrides)) fields.set(name, value);
    levels.push({ from: BigInt(fork.boundary), fields: [...fields] });
  }
  if (levels.length === 1) return () => levels[0]!.fields;
  return (step) => levels.findLast((l) => BigInt(step) >= l.from)!.fields;
}

/** The forks of a lineage, the oldest first: each one's boundary and its own overrides. */
function forkChain(fork: unknown): { boundary: string; overrides: unknown }[] {
  const chain: { boundary: string; overrides: unknown }[] = [];
  for (let f = fork; typeof f === 'object' && f !== null; f = (f as { parentFork?: unknown }).parentFork) {
    const { checkpoint, overrides } = f as { checkpoint?: { boundary?: unknown }; overrides?: unknown };
    if (typeof checkpoint?.boundary === 'string') chain.unshift({ boundary: checkpoint.boundary, overrides });
  }
  return chain;
}

/** Where an export stands (for a progress line). */
export interface ExportProgress {
  /** `checking`: the first pass (columns and types); `writing`: the rows. */
  readonly phase: 'checking' | 'writing';
  readonly run: string;
  /** 1-based position of the run, of `runs`. */
  readonly runIndex: number;
  readonly runs: number;
  /** Steps of this run read so far, of `steps`. */
  readonly step: number;
  readonly steps: number;
  /** Rows written so far (over every run). */
  readonly rows: number;
}

export interface ExportOptions {
  readonly format: ExportFormat;
  readonly out: string;
  /** Called at most every `progressEveryMs` while reading (checked every 256 steps). */
  readonly progress?: (p: ExportProgress) => void;
  /** Default 3000. */
  readonly progressEveryMs?: number;
  /** Stops the export between steps; nothing is left behind. */
  readonly signal?: AbortSignal;
}

export interface ExportResult {
  readonly runs: readonly ExportRun[];
  readonly rows: number;
  readonly steps: number;
  readonly columns: readonly Column[];
  readonly out: string;
}

/** An export stopped by its signal (SIGINT/SIGTERM on the command line): nothing was written. */
export class ExportInterrupted extends Error {}

const RUN_FILE = 'run.json';
const isRunDir = (dir: string) => existsSync(join(dir, RUN_FILE));
const isDir = (p: string) => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};
const byCodePoint = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/**
 * The runs of a source: the source itself when it holds run.json, else each child directory that
 * does (sorted by name); files and other directories beside them (a sweep.json) are not runs.
 */
export function runsOf(source: string): ExportRun[] {
  const refuse = (why: string) => new DetsimError('struct_export_source', `${source}: ${why}`, source);
  if (!isDir(source)) throw refuse('is not an existing directory');
  if (isRunDir(source)) return [{ id: basename(resolve(source)), dir: source }];
  const runs = readdirSync(source)
    .sort(byCodePoint)
    .map((name) => ({ id: name, dir: join(source, name) }))
    .filter((r) => isDir(r.dir) && isRunDir(r.dir));
  if (runs.length === 0)
    throw refuse(
      `neither a run directory (no ${RUN_FILE}) nor a directory of run directories (none of its children holds one)`,
    );
  return runs;
}

/**
 * The runs whose rows stop short: no summary.json (still running, or killed) or one whose status is
 * not `completed` (failed, aborted), each with where it stopped — a table mixing them with whole
 * runs would average partial rewards in with the rest, so the command says so.
 */
export function unfinishedRuns(runs: readonly ExportRun[]): { id: string; why: string }[] {
  return runs.flatMap((r) => {
    const path = join(r.dir, 'summary.json');
    if (!existsSync(path)) return [{ id: r.id, why: 'not ended (no summary.json: still running, or killed)' }];
    let s: { status?: unknown; stepsDone?: unknown; stepsPlanned?: unknown };
    try {
      s = parseStrict(readFileSync(path)) as typeof s;
    } catch {
      return [{ id: r.id, why: 'summary.json unreadable' }];
    }
    if (s.status === 'completed') return [];
    return [{ id: r.id, why: `${String(s.status)} at ${String(s.stepsDone)} of ${String(s.stepsPlanned)} steps` }];
  });
}

/** --out must not exist and its directory must. */
function checkOut(out: string): void {
  if (existsSync(out))
    throw new DetsimError(
      'perm_export_exists',
      `${out}: exists; an export never overwrites a file (remove it or choose another --out)`,
      '--out',
    );
  if (!isDir(dirname(resolve(out))))
    throw new DetsimError(
      'struct_invalid_field',
      `--out: ${dirname(resolve(out))} is not an existing directory`,
      '--out',
    );
}

/** Reports progress at most every `progressEveryMs` (none for an export shorter than that). */
function progressReporter(opts: ExportOptions): (p: ExportProgress) => void {
  const every = opts.progressEveryMs ?? 3000;
  let last = Date.now();
  return (p) => {
    if (!opts.progress) return;
    const now = Date.now();
    if (now - last < every) return;
    last = now;
    opts.progress(p);
  };
}

/** One run's pass: `onStep` per step of its trace, progress as it goes. Returns its steps. */
type RunPass = (
  run: ExportRun,
  runIndex: number,
  onStep: (t: TransitionTrace, observations?: StepObservations) => void,
) => Promise<number>;

function passOver(
  runs: readonly ExportRun[],
  phase: ExportProgress['phase'],
  opts: ExportOptions,
  rows: () => number,
): RunPass {
  const report = progressReporter(opts);
  return async (run, runIndex, onStep) => {
    const steps = traceBindingOf(run.dir).steps;
    let step = 0;
    const at = () => ({ phase, run: run.id, runIndex: runIndex + 1, runs: runs.length, step, steps, rows: rows() });
    const sidecar = recordsObservations(run.dir) ? readObservationLines(run.dir) : undefined;
    for await (const t of readTrace(run.dir)) {
      if (opts.signal?.aborted) throw new ExportInterrupted('trace export interrupted');
      onStep(t, sidecar && checkedObservations(sidecar.next().value ?? undefined, t));
      step++;
      if ((step & 255) === 0) report(at());
    }
    return step;
  };
}

/** Pass one: each run's receipt binding checked, then every step surveyed. Returns the layout and the step count. */
async function survey(
  runs: readonly ExportRun[],
  opts: ExportOptions,
): Promise<{ layout: TableLayout; steps: number }> {
  const columns = new ColumnSurvey();
  const pass = passOver(runs, 'checking', opts, () => 0);
  let steps = 0;
  for (const [i, run] of runs.entries()) {
    checkReceiptBinding(run.dir);
    const fields = runFieldsOf(run);
    steps += await pass(run, i, (t, observations) => columns.add(t, observations, fields(t.behaviour.scope.step)));
  }
  return { layout: columns.layout(), steps };
}

/** Pass two: every row into the writer. Returns the rows written. */
async function writeRows(
  runs: readonly ExportRun[],
  layout: TableLayout,
  writer: TableWriter,
  opts: ExportOptions,
): Promise<number> {
  let rows = 0;
  const pass = passOver(runs, 'writing', opts, () => rows);
  for (const [i, run] of runs.entries()) {
    const fields = runFieldsOf(run);
    await pass(run, i, (t, observations) => {
      for (const row of rowsOfStep(run.id, t, layout, observations, fields(t.behaviour.scope.step))) {
        writer.add(row);
        rows++;
      }
    });
  }
  writer.finish();
  return rows;
}

/** Link the whole temp file in as --out (refused if --out appeared meanwhile), then drop the temp name. */
function publish(tmp: string, out: string): void {
  try {
    linkSync(tmp, out);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST')
      throw new DetsimError(
        'perm_export_exists',
        `${out}: appeared while exporting; an export never overwrites a file`,
        '--out',
      );
    throw asWriteFailure(e, out);
  }
  rmSync(tmp, { force: true });
  fsyncDir(dirname(resolve(out)));
}

/**
 * Export the trace of every run of `source` as one table (trace-table.ts) in `opts.format` to
 * `opts.out`: all or nothing. A damaged trace (a segment that differs from its index or the
 * receipt, missing, or moved) is refused by the reader's own checks during the first pass, before
 * a byte is written.
 */
export async function exportTrace(source: string, opts: ExportOptions): Promise<ExportResult> {
  checkOut(opts.out);
  const runs = runsOf(source);
  const { layout, steps } = await survey(runs, opts);
  const tmp = tempPathOf(opts.out);
  const fd = guardWrite(tmp, () => openSync(tmp, 'w'));
  let open = true;
  let rows: number;
  try {
    rows = await guardWrites(tmp, () => writeRows(runs, layout, tableWriter(opts.format, fd, layout.columns), opts));
    guardWrite(tmp, () => fsyncSync(fd));
    open = false;
    closeSync(fd);
    publish(tmp, opts.out);
  } catch (e) {
    if (open) closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  return { runs, rows, steps, columns: layout.columns, out: opts.out };
}

/**
 * An errno failure of a write to the temp file (the writers write by descriptor: no path on the
 * error) becomes a WriteFailure naming it; a read error of the trace carries its own path and passes.
 */
async function guardWrites<T>(tmp: string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw typeof err?.code === 'string' && err.path === undefined ? asWriteFailure(e, tmp) : e;
  }
}
