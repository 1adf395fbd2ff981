// A receipt whose steps are read one pass at a time — a run directory's (its trace, read again
// for each pass) or one held in memory — and the passes that hash it in flat memory, so that
// diff and replay compare runs of a million steps without holding them. With a classification
// table other than the published one (verify's --field-table) the steps are held and hashed
// whole, as reprohash.ts does. NOT the hash text (streamed.ts), the classification (canonical.ts)
// nor the divergence diagnosis (diff0/diagnosis.ts).
import { join } from 'node:path';
import type { JsonValue } from '../../core/formats/canonical-json.js';
import { readTraceSync, traceBindingOf } from '../trace/trace-store.js';
import { compareKeyValues, type CanonicalOptions, type UnknownField } from './canonical.js';
import { buildReceipt, checkReceiptBinding, readJsonFile, readSummary, type Receipt } from './receipt.js';
import { reproHashOfSteps } from './streamed.js';
import { epochOf, rebaseStep, type StepRepro } from './step-repro.js';

/** A receipt without its steps in memory: its head, and its steps one pass at a time. */
export interface ReceiptView {
  /** The receipt without `steps` (run, summary, evidence fields, final state digests). */
  readonly head: Record<string, unknown>;
  /** The steps in step order, later epochs rebased onto the first (rebase.ts); each call reads them again. */
  steps(): Iterable<unknown>;
}

/** A receipt or a view of one: what the comparisons take. */
export type ReceiptSource = Receipt | ReceiptView;

const isView = (s: unknown): s is ReceiptView =>
  s !== null && typeof s === 'object' && typeof (s as ReceiptView).steps === 'function';

/** Steps rebased onto the first step's epoch, one at a time. */
function* rebased(steps: Iterable<unknown>): Generator<unknown> {
  let base: string | undefined;
  let first = true;
  for (const s of steps) {
    if (first) base = epochOf(s);
    first = false;
    yield rebaseStep(s, base);
  }
}

const stepKey = (s: unknown) => (s as { behaviour?: { scope?: { step?: unknown } } }).behaviour?.scope?.step;

/** A view of a receipt held in memory (its steps put in step order, as R2 orders them). */
export function viewOf(source: ReceiptSource | unknown): ReceiptView {
  if (isView(source)) return source;
  const { steps, ...head } = (source ?? {}) as { steps?: unknown };
  const list = Array.isArray(steps) ? [...(steps as unknown[])] : [];
  list.sort((a, b) => compareKeyValues(stepKey(a), stepKey(b)));
  return { head, steps: () => rebased(list) };
}

/** Told how far a pass over a run directory's trace has read: every 1,024 steps. */
export type PassProgress = (p: { readonly runDir: string; readonly step: number; readonly steps: number }) => void;

/**
 * The receipt a run directory gives (buildReceipt over run.json, its trace and summary.json), its
 * steps read from the trace on each pass. A receipt.json that binds the trace is checked first (a
 * missing, tampered or reordered segment is refused, named); each pass checks the segments again.
 */
export function runReceiptView(runDir: string, progress?: PassProgress): ReceiptView {
  const run = readJsonFile(join(runDir, 'run.json'), 'run.json');
  const summary = readSummary(runDir);
  checkReceiptBinding(runDir);
  const { steps: _none, ...head } = buildReceipt({ run, summary, steps: [] });
  const total = progress ? traceBindingOf(runDir).steps : 0;
  const read = () => readTraceSync(runDir);
  return {
    head,
    steps: () => rebased(progress ? reporting(read(), (step) => progress({ runDir, step, steps: total })) : read()),
  };
}

function* reporting(steps: Iterable<unknown>, at: (step: number) => void): Generator<unknown> {
  let n = 0;
  for (const s of steps) {
    yield s;
    if ((++n & 1023) === 0) at(n);
  }
}

/** The receipt with every step in memory (rebased): for a classification table other than the published one. */
export function materialize(view: ReceiptView): Receipt {
  return { ...(view.head as Omit<Receipt, 'steps'>), steps: [...view.steps()] as JsonValue[] };
}

/** Whether passes over steps can hash as the published table does (a custom table hashes whole). */
export const streams = (opts: CanonicalOptions): boolean => opts.table === undefined;

/** What one pass over a view found: its ReproHash, unclassified fields and step count. */
export interface ViewHash {
  readonly reproHash: string;
  readonly unknownFields: readonly UnknownField[];
  readonly steps: number;
}

/**
 * One pass over a view: its ReproHash, as reprohash.ts gives for the whole receipt, with `each`
 * called on every step and its repro text in order (another hasher of the same steps shares them;
 * only with the published table, and a trace out of step order then throws StepsOutOfOrder).
 */
export function hashView(
  source: ReceiptSource,
  opts: CanonicalOptions = {},
  each?: (step: unknown, repro: StepRepro, index: number) => void,
): ViewHash {
  const view = viewOf(source);
  const known = hashed.get(view);
  if (each === undefined && known?.opts === opts) return known.hash;
  const hash = reproHashOfSteps(view.head, view.steps, opts, each);
  hashed.set(view, { opts, hash });
  return hash;
}

/**
 * The hashes already made of a view, with the options object they were made with: a replay hashes
 * each run once, though its report, checks and probes all ask (the trace is read once per pass).
 */
const hashed = new WeakMap<ReceiptView, { opts: CanonicalOptions; hash: ViewHash }>();
