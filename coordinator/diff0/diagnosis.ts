// Divergence diagnosis: when two receipts' ReproHashes differ, name the first diverging step, the
// field path, both values and the agent — never only "hashes differ". It compares the ReproCore
// views (canonical.ts), so physical fields can never be blamed: of two receipts in memory
// (diagnose), or of two runs of any length in flat memory (diagnoseViews, step by step). It runs
// nothing (replay.ts).
import type { JsonValue } from '../../core/formats/canonical-json.js';
import { type CanonicalOptions, canonicalSplit } from '../receipt/canonical.js';
import { materialize, runReceiptView, streams, viewOf, type ReceiptSource } from '../receipt/receipt-view.js';
import { stepRepro } from '../receipt/step-repro.js';

/** Where two runs first differ: the part, step, field path, agent and both values. */
export interface Divergence {
  /** Which part of the ReproCore diverged first. */
  readonly part: 'composition' | 'step' | 'steps-count' | 'summary' | 'receipt';
  /** The step (U64 string) where it diverged, for part 'step' / 'steps-count'. */
  readonly step: string | null;
  /** Field path in the ReproCore view, list elements named by their key, e.g. `steps[3].behaviour.agents[agentId=a1].decision.move`. */
  readonly path: string;
  /** The agent whose field diverged, when the path runs through one. */
  readonly agentId: string | null;
  readonly left: JsonValue | '(absent)';
  readonly right: JsonValue | '(absent)';
}

type Obj = Record<string, JsonValue>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);
const KEYS = ['agentId', 'viewId', 'participantId', 'workerId'];

interface Found {
  path: string;
  agentId: string | null;
  left: JsonValue | '(absent)';
  right: JsonValue | '(absent)';
}

/** How a list element is named in a path: by its key when it has one, else by index. */
function elementName(
  a: JsonValue | undefined,
  b: JsonValue | undefined,
  i: number,
): { label: string; agentId: string | null } {
  for (const k of KEYS) {
    const va = isObj(a) ? a[k] : undefined;
    const vb = isObj(b) ? b[k] : undefined;
    if (typeof va === 'string' && va === vb) return { label: `[${k}=${va}]`, agentId: k === 'agentId' ? va : null };
  }
  const aid = isObj(a) && typeof a.agentId === 'string' ? a.agentId : null;
  return { label: `[${i}]`, agentId: aid };
}

function firstDiff(
  a: JsonValue | undefined,
  b: JsonValue | undefined,
  path: string,
  agentId: string | null,
): Found | null {
  if (a === undefined || b === undefined) {
    if (a === b) return null;
    return { path, agentId, left: a === undefined ? '(absent)' : a, right: b === undefined ? '(absent)' : b };
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const { label, agentId: aid } = elementName(a[i], b[i], i);
      const d = firstDiff(a[i], b[i], `${path}${label}`, aid ?? agentId);
      if (d) return d;
    }
    return null;
  }
  if (isObj(a) && isObj(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    for (const k of keys) {
      // Within an agent entry, the agentId is the agent; elsewhere keep the enclosing one.
      const d = firstDiff(a[k], b[k], path === '' ? k : `${path}.${k}`, agentId);
      if (d) return d;
    }
    return null;
  }
  if (a === b) return null;
  return { path, agentId, left: a, right: b };
}

function stepOf(s: JsonValue | undefined): string | null {
  const b = isObj(s) ? s.behaviour : undefined;
  const scope = isObj(b) ? b.scope : undefined;
  const step = isObj(scope) ? scope.step : undefined;
  return typeof step === 'string' || typeof step === 'number' ? String(step) : null;
}

/** How to diagnose: `stepsFirst` compares the steps before the composition (see {@link diagnose}). */
export interface DiagnoseOptions extends CanonicalOptions {
  stepsFirst?: boolean;
}

/**
 * The first divergence between two receipts' ReproCore, or null when their ReproCores are equal.
 * The composition is compared first (a different composition explains every later step), unless
 * `stepsFirst`: a fork that changed params differs from its parent in composition by its own
 * overrides, and what is asked is the first step that behaves differently (the composition then
 * comes after the steps).
 */
export function diagnose(left: unknown, right: unknown, opts: DiagnoseOptions = {}): Divergence | null {
  const { stepsFirst, ...canonical } = opts;
  const A = asObj(canonicalSplit(left, canonical).repro);
  const B = asObj(canonicalSplit(right, canonical).repro);
  return diagnoseParts(A, B, () => firstStepDiff(A, B), stepsFirst === true);
}

/**
 * {@link diagnose} over two receipts of any length in flat memory: the heads as diagnose compares
 * them, the steps pairwise in step order (equal repro texts skipped; the first pair that differs
 * walked for its field). With a classification table other than the published one, the receipts
 * are held whole and diagnosed so.
 */
export function diagnoseViews(
  left: ReceiptSource,
  right: ReceiptSource,
  opts: DiagnoseOptions = {},
): Divergence | null {
  const { stepsFirst, ...canonical } = opts;
  const a = viewOf(left);
  const b = viewOf(right);
  if (!streams(canonical)) return diagnose(materialize(a), materialize(b), opts);
  const A = asObj(canonicalSplit({ ...a.head, steps: [] }, canonical).repro);
  const B = asObj(canonicalSplit({ ...b.head, steps: [] }, canonical).repro);
  return diagnoseParts(A, B, () => firstStepDiffStreamed(a.steps(), b.steps(), canonical), stepsFirst === true);
}

const asObj = (v: JsonValue): Obj => (isObj(v) ? v : {});

/** The order of diagnose: composition and steps (either first), then the summary, then the rest. */
function diagnoseParts(A: Obj, B: Obj, steps: () => Divergence | null, stepsFirst: boolean): Divergence | null {
  const comp = () => {
    const d = firstDiff(A.run, B.run, 'run', null);
    return d ? { part: 'composition' as const, step: null, ...d } : null;
  };
  const first = stepsFirst ? steps() : comp();
  if (first) return first;
  const second = stepsFirst ? comp() : steps();
  if (second) return second;
  const sum = firstDiff(A.summary, B.summary, 'summary', null);
  if (sum) return { part: 'summary', step: null, ...sum };
  const rest = firstDiff(
    { ...A, run: null, steps: null, summary: null },
    { ...B, run: null, steps: null, summary: null },
    '',
    null,
  );
  return rest ? { part: 'receipt', step: null, ...rest } : null;
}

/** The first step (or step count) where two ReproCore views differ, or null. */
function firstStepDiff(A: Obj, B: Obj): Divergence | null {
  const sa = Array.isArray(A.steps) ? A.steps : [];
  const sb = Array.isArray(B.steps) ? B.steps : [];
  for (let i = 0; i < Math.max(sa.length, sb.length); i++) {
    if (i >= sa.length || i >= sb.length) return stepsCount(stepOf(sa[i] ?? sb[i]), sa.length, sb.length);
    const d = firstDiff(sa[i], sb[i], `steps[${i}]`, null);
    if (d) return { part: 'step', step: stepOf(sa[i]), ...d };
  }
  return null;
}

function stepsCount(step: string | null, left: number, right: number): Divergence {
  return { part: 'steps-count', step, path: 'steps.length', agentId: null, left, right };
}

/** firstStepDiff over two step sequences (rebased, in step order), one pair at a time. */
function firstStepDiffStreamed(
  left: Iterable<unknown>,
  right: Iterable<unknown>,
  opts: CanonicalOptions,
): Divergence | null {
  const ia = left[Symbol.iterator]();
  const ib = right[Symbol.iterator]();
  for (let i = 0; ; i++) {
    const x = ia.next();
    const y = ib.next();
    if (x.done && y.done) return null;
    if (x.done || y.done) {
      const longer = x.done ? ib : ia;
      let total = i + 1;
      while (!longer.next().done) total++;
      const extra = x.done ? y.value : x.value;
      return stepsCount(stepOf(extra as JsonValue), x.done ? i : total, y.done ? i : total);
    }
    const ta = stepRepro(x.value, opts).text;
    const tb = stepRepro(y.value, opts).text;
    if (ta === tb) continue;
    const va = JSON.parse(ta) as JsonValue;
    const d = firstDiff(va, JSON.parse(tb) as JsonValue, `steps[${i}]`, null);
    if (d) return { part: 'step', step: stepOf(va), ...d };
  }
}

/** Diagnose two run directories (their run.json, trace and summary.json), in flat memory. */
export function diagnoseRunDirs(leftDir: string, rightDir: string, opts: CanonicalOptions = {}): Divergence | null {
  return diagnoseViews(runReceiptView(leftDir), runReceiptView(rightDir), opts);
}

/** A divergence in a user model's content: the same model name with another digest (…@sha256:…). */
function isModelSource(d: Divergence): boolean {
  const name = (v: unknown) => (typeof v === 'string' && v.includes('@sha256:') ? v.split('@sha256:')[0] : null);
  return d.path.endsWith('.model') && name(d.left) !== null && name(d.left) === name(d.right);
}

/** One line for people: where, which agent, both values ("model source changed" for a user model's content). */
export function describeDivergence(d: Divergence, names: [string, string] = ['run A', 'run B']): string {
  const where = d.part === 'step' || d.part === 'steps-count' ? `step ${d.step ?? '?'}` : d.part;
  const agent = d.agentId ? ` (agent ${d.agentId})` : '';
  if (isModelSource(d))
    return `first divergence at ${where}${agent}: model source changed: ${d.path}: ${names[0]} ${JSON.stringify(d.left)}, ${names[1]} ${JSON.stringify(d.right)}`;
  return `first divergence at ${where}${agent}: ${d.path}: ${names[0]} ${JSON.stringify(d.left)}, ${names[1]} ${JSON.stringify(d.right)}`;
}
