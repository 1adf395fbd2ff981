// Replay's self-checks on receipts (docs/spec/diff0.md "Replay"): the sensitivity probes (a hash
// that cannot change proves nothing: one agent's decision, the master seed and the last world
// digest are changed in a copy and the ReproHash must change) and the physical differences (the
// physical fields stripped must really differ between two runs). Each runs in flat memory over
// receipt views — the probes in the same pass that hashes the receipt — and holds the receipts
// whole only for a classification table other than the published one. NOT the replay (replay.ts).
import { canonicalize } from '../../core/formats/canonical-json.js';
import { type CanonicalOptions, canonicalSplit } from '../receipt/canonical.js';
import { type Receipt } from '../receipt/receipt.js';
import {
  hashView,
  materialize,
  streams,
  viewOf,
  type ReceiptSource,
  type ReceiptView,
  type ViewHash,
} from '../receipt/receipt-view.js';
import { reproHash } from '../receipt/reprohash.js';
import { ReproStepsHasher, StepsOutOfOrder } from '../receipt/streamed.js';
import { stepRepro } from '../receipt/step-repro.js';

/** One sensitivity probe: the field changed and the hashes before and after. */
export interface SensitivityProbe {
  readonly field: string;
  readonly before: string;
  readonly after: string;
}

type Obj = Record<string, unknown>;
type Path = (string | number)[];

function firstLeaf(v: unknown, path: Path): Path | null {
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return path;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const p = firstLeaf(v[i], [...path, i]);
      if (p) return p;
    }
  } else if (v !== null && typeof v === 'object') {
    for (const k of Object.keys(v).sort()) {
      const p = firstLeaf((v as Obj)[k], [...path, k]);
      if (p) return p;
    }
  }
  return null;
}

function getAt(root: unknown, path: Path): unknown {
  let cur = root as Obj;
  for (const p of path) cur = (cur as Record<string | number, unknown>)[p] as Obj;
  return cur;
}

/** Change one character (or one unit) of the leaf at `path` in a copy of the receipt. */
export function tamperAt(receipt: unknown, path: Path): unknown {
  const copy = structuredClone(receipt) as Obj;
  const parent = getAt(copy, path.slice(0, -1)) as Record<string | number, unknown>;
  const key = path[path.length - 1]!;
  const v = parent[key];
  if (typeof v === 'string') parent[key] = v.length === 0 ? 'x' : `${v.slice(0, -1)}${v.endsWith('x') ? 'y' : 'x'}`;
  else if (typeof v === 'number') parent[key] = v + 1;
  else if (typeof v === 'boolean') parent[key] = !v;
  else parent[key] = 'x';
  return copy;
}

/** Within a step: the first agent's first decision leaf (or its decision digest), if the step has agents. */
function decisionTarget(step: unknown): Path | null {
  const agents = ((step as Obj | undefined)?.behaviour as Obj | undefined)?.agents;
  if (!Array.isArray(agents) || agents.length === 0) return null;
  return (
    firstLeaf((agents[0] as Obj).decision, ['behaviour', 'agents', 0, 'decision']) ?? [
      'behaviour',
      'agents',
      0,
      'decisionDigest',
    ]
  );
}

const MASTER_SEED: Path = ['run', 'masterSeed'];
const WORLD_DIGEST: Path = ['behaviour', 'worldDigest'];

/** The ReproCore fields the self-check changes: one agent's decision, the master seed, the last world digest. */
export function sensitivityTargets(receipt: Receipt): Path[] {
  const steps = Array.isArray(receipt.steps) ? receipt.steps : [];
  const decision = steps.length > 0 ? decisionTarget(steps[0]) : null;
  return [
    ...(decision ? [['steps', 0, ...decision]] : []),
    MASTER_SEED,
    ...(steps.length > 0 ? [['steps', steps.length - 1, ...WORLD_DIGEST]] : []),
  ];
}

/** The probes on a receipt held whole (any classification table). */
function wholeProbes(receipt: Receipt, opts: CanonicalOptions): SensitivityProbe[] {
  const before = reproHash(receipt, opts).reproHash;
  return sensitivityTargets(receipt).map((path) => ({
    field: path.join('.'),
    before,
    after: reproHash(tamperAt(receipt, path), opts).reproHash,
  }));
}

/** A hasher of the receipt with one change, fed the same step texts as the receipt's own. */
interface Probe {
  field: string;
  hasher: ReproStepsHasher;
}

/**
 * The receipt's hash and its probes in one pass: the master seed's probe hashes the changed head
 * with every step; the decision's changes step 0; the world digest's lags one step behind and
 * changes whichever step turns out to be the last.
 */
function streamedProbes(view: ReceiptView, opts: CanonicalOptions): { hash: ViewHash; probes: SensitivityProbe[] } {
  const seed: Probe = {
    field: MASTER_SEED.join('.'),
    hasher: new ReproStepsHasher(tamperAt(view.head, MASTER_SEED) as Obj, opts),
  };
  const last = new ReproStepsHasher(view.head, opts);
  let decision: Probe | undefined;
  let previous: { step: unknown; text: string } | undefined;
  const hash = hashView(view, opts, (step, repro, i) => {
    seed.hasher.addTexts(repro.text, []);
    if (i === 0) {
      const target = decisionTarget(step);
      if (target) {
        decision = { field: ['steps', 0, ...target].join('.'), hasher: new ReproStepsHasher(view.head, opts) };
        decision.hasher.addTexts(stepRepro(tamperAt(step, target), opts).text, []);
      }
    } else decision?.hasher.addTexts(repro.text, []);
    if (previous) last.addTexts(previous.text, []);
    previous = { step, text: repro.text };
  });
  const probes: Probe[] = [...(decision ? [decision] : []), seed];
  if (previous) {
    last.addTexts(stepRepro(tamperAt(previous.step, WORLD_DIGEST), opts).text, []);
    probes.push({ field: ['steps', hash.steps - 1, ...WORLD_DIGEST].join('.'), hasher: last });
  }
  const before = hash.reproHash;
  return { hash, probes: probes.map((p) => ({ field: p.field, before, after: p.hasher.finish().reproHash })) };
}

/**
 * The sensitivity probes of a receipt (and its own hash, found in the same pass): each changes one
 * ReproCore field and must change the ReproHash. Streamed with the published table; whole otherwise
 * (or for an old trace out of step order).
 */
export function hashWithProbes(
  source: ReceiptSource,
  opts: CanonicalOptions = {},
): { hash: ViewHash; probes: SensitivityProbe[] } {
  const view = viewOf(source);
  const known = probed.get(view);
  if (known?.opts === opts) return known.result;
  const result = probesOf(view, opts);
  probed.set(view, { opts, result });
  return result;
}

/** Probes already made of a view (a replay's first run is probed once, in the pass that hashes it). */
const probed = new WeakMap<
  ReceiptView,
  { opts: CanonicalOptions; result: { hash: ViewHash; probes: SensitivityProbe[] } }
>();

function probesOf(view: ReceiptView, opts: CanonicalOptions): { hash: ViewHash; probes: SensitivityProbe[] } {
  if (streams(opts)) {
    try {
      return streamedProbes(view, opts);
    } catch (e) {
      if (!(e instanceof StepsOutOfOrder)) throw e;
    }
  }
  const receipt = materialize(view); // its steps come rebased
  return { hash: hashView(receipt, opts), probes: wholeProbes(receipt, opts) };
}

/** The sensitivity probes of a receipt (see {@link hashWithProbes}). */
export function sensitivityProbes(source: ReceiptSource, opts: CanonicalOptions = {}): SensitivityProbe[] {
  return hashWithProbes(source, opts).probes;
}

/** Add the paths (patterns, list elements as `[]`) where two physical views differ. */
function collectDifferences(x: unknown, y: unknown, path: string, out: Set<string>): void {
  if (x !== null && y !== null && typeof x === 'object' && typeof y === 'object') {
    const keys = new Set([...Object.keys(x as object), ...Object.keys(y as object)]);
    for (const k of keys)
      collectDifferences((x as Obj)[k], (y as Obj)[k], Array.isArray(x) ? `${path}[]` : path ? `${path}.${k}` : k, out);
  } else if (canonicalize(x ?? null) !== canonicalize(y ?? null)) out.add(path);
}

/** A step's physical view, as the whole receipt's `steps[i]` entry holds it (null: nothing physical). */
function stepPhysical(step: unknown, opts: CanonicalOptions): unknown {
  const p = canonicalSplit({ steps: [step] }, opts).physical as { steps?: unknown[] } | null;
  return p?.steps?.[0] ?? null;
}

/**
 * Paths (patterns) of the physical leaves that differ between two receipts: the heads, then the
 * steps pairwise in step order (a step only one of them has counts when it holds anything physical).
 */
export function physicalDifferences(a: ReceiptSource, b: ReceiptSource, opts: CanonicalOptions = {}): string[] {
  const out = new Set<string>();
  const [va, vb] = [viewOf(a), viewOf(b)];
  if (!streams(opts)) {
    const [pa, pb] = [materialize(va), materialize(vb)].map((r) => canonicalSplit(r, opts).physical);
    if (pa !== null && pb !== null) collectDifferences(pa, pb, '', out);
    return [...out].sort();
  }
  const head = (v: ReceiptView) => canonicalSplit({ ...v.head, steps: [] }, opts).physical;
  collectDifferences(head(va) ?? {}, head(vb) ?? {}, '', out);
  const ia = va.steps()[Symbol.iterator]();
  const ib = vb.steps()[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done && y.done) break;
    const px = x.done ? undefined : stepPhysical(x.value, opts);
    const py = y.done ? undefined : stepPhysical(y.value, opts);
    collectDifferences({ steps: [px] }, { steps: [py] }, '', out);
  }
  return [...out].sort();
}
