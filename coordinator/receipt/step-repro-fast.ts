// The fast path of one step's repro text (step-repro.ts), for the trace sealing thread. When the
// walk of canonical.ts would give a step's behaviour back unchanged — every field classified, nothing
// stripped but the physical `operational` (itself free of unclassified fields), no number to
// rewrite, no list to reorder, no absent field to fill with null — the step's ReproCore view is
// `{behaviour}` and its text is `{"behaviour":` + the behaviour's canonical text + `}`. This proves
// that on the parsed values, reading the same table through the same helpers, and otherwise
// answers "not proven" (undefined): the caller then takes the general walk. NOT a second
// classifier, and not a walk that builds anything: it only checks (tests hold it to canonicalSplit).
import { compareKeyValues, getPath, sortKeyFor, tableIndexOf, type TableIndex } from './canonical.js';
import { childPath, FIELD_TABLE, type FieldRule } from './fields.js';

/** Nesting followed; anything deeper is left to the general walk (and its limits). */
const MAX_DEPTH = 64;

/** One classified path: its rule as the walk resolves it, the fields it fills when absent, its children. */
interface PathNode {
  readonly path: string;
  /** The rule the walk applies at this path (a list element without a row of its own inherits its list's). */
  readonly rule: FieldRule | undefined;
  /** The keys the walk adds as null when absent (the non-physical direct children). */
  readonly required: readonly string[];
  readonly kids: Map<string, PathNode>;
  elem?: PathNode;
}

/** The table's paths as nodes, made once per table (the walk builds a path string per field instead). */
interface FastTable {
  readonly index: TableIndex;
  readonly root: PathNode;
  /** Root-level nodes, checked once: `steps`, `steps[]`, `steps[].behaviour`, `steps[].operational`. */
  readonly step: PathNode | undefined;
}

const fastTables = new WeakMap<readonly FieldRule[], FastTable>();

function nodeOf(index: TableIndex, path: string, rule: FieldRule | undefined): PathNode {
  const required: string[] = [];
  for (const c of index.children.get(path) ?? [])
    if (c.cls !== 'physical') required.push(c.path.slice(path === '' ? 0 : path.length + 1));
  return { path, rule, required, kids: new Map() };
}

/** The child at `key` of an object at `node` (the walk's childPath and lookup, memoised). */
function kidOf(t: FastTable, node: PathNode, key: string): PathNode {
  let kid = node.kids.get(key);
  if (kid === undefined) {
    const path = childPath(node.path, key);
    node.kids.set(key, (kid = nodeOf(t.index, path, t.index.lookup(path))));
  }
  return kid;
}

/** The element node of a list at `node`: walkList's `lookup(elem) ?? rule`. */
function elemOf(t: FastTable, node: PathNode): PathNode {
  if (node.elem === undefined) {
    const path = `${node.path}[]`;
    node.elem = nodeOf(t.index, path, t.index.lookup(path) ?? node.rule);
  }
  return node.elem;
}

const plainRepro = (r: FieldRule | undefined): r is FieldRule =>
  r !== undefined && r.cls !== 'physical' && r.subtree !== true;

function fastTableOf(table: readonly FieldRule[]): FastTable {
  let t = fastTables.get(table);
  if (t === undefined) {
    const index = tableIndexOf(table);
    const root = nodeOf(index, '', undefined);
    t = { index, root, step: undefined };
    const steps = kidOf(t, root, 'steps');
    const step = elemOf(t, steps);
    // The receipt {steps: [step]} must reach the step as plain repro objects, and the step's only
    // field filled when absent must be its behaviour.
    const fits =
      plainRepro(steps.rule) && plainRepro(step.rule) && step.required.length === 1 && step.required[0] === 'behaviour';
    t = { index, root, step: fits ? step : undefined };
    fastTables.set(table, t);
  }
  return t;
}

const U64ish = /^(0|[1-9][0-9]*)$/;

/** A sort key's kind: a number, a decimal U64 string, another string; '' for anything else. */
function kindOf(k: unknown): string {
  return typeof k === 'number' ? 'n' : typeof k === 'string' ? (U64ish.test(k) ? 'u' : 's') : '';
}

/**
 * The keys of `list` at `key` when they are all of one kind (all numbers, all decimal U64 strings,
 * or all other strings): on such keys compareKeyValues is a strict total order, 0 only for equal
 * values. Otherwise undefined (not proven).
 */
function uniformKeys(list: readonly unknown[], key: string): unknown[] | undefined {
  const keys: unknown[] = [];
  let kind = '';
  for (let i = 0; i < list.length; i++) {
    const k = getPath(list[i], key);
    const kKind = kindOf(k);
    if (kKind === '' || (i > 0 && kKind !== kind)) return undefined;
    kind = kKind;
    keys.push(k);
  }
  return keys;
}

/**
 * Whether walkList's sort of `list` by `key` (compareKeyValues, ties by canonical text) certainly
 * leaves it as it is: keys of one kind and strictly increasing, so no two tie and the order is the
 * only sorted one.
 */
function orderKept(list: readonly unknown[], key: string): boolean {
  const keys = uniformKeys(list, key);
  if (keys === undefined) return false;
  for (let i = 1; i < keys.length; i++) if (compareKeyValues(keys[i - 1], keys[i]) >= 0) return false;
  return true;
}

/** Whether walkList's sort of `list` by `key` certainly meets no tie (so makes no canonical text, which may throw). */
function noTies(list: readonly unknown[], key: string): boolean {
  const keys = uniformKeys(list, key);
  return keys !== undefined && new Set(keys).size === keys.length;
}

/** Plain data the way JSON.parse makes it: an array, or an object with the ordinary prototype (or none). */
function isPlainContainer(v: object): boolean {
  const proto = Object.getPrototypeOf(v);
  return Array.isArray(v) ? proto === Array.prototype : proto === Object.prototype || proto === null;
}

/** Own keys strictly increasing in UTF-16 code units (what JSON.stringify then prints canonically). */
function sortedKeys(obj: object): string[] | undefined {
  const keys = Object.keys(obj);
  for (let i = 1; i < keys.length; i++) if (!(keys[i - 1]! < keys[i]!)) return undefined;
  return keys;
}

/**
 * Whether the walk keeps `v` (below a subtree row: nothing classified, `opaque` the row's class)
 * exactly, and JSON.stringify prints it canonically.
 */
function keptInSubtree(v: unknown, opaque: boolean, depth: number): boolean {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v) && (opaque || Number.isInteger(v));
  if (typeof v !== 'object' || depth > MAX_DEPTH || !isPlainContainer(v)) return false;
  if (Array.isArray(v)) {
    for (const e of v) if (!keptInSubtree(e, opaque, depth + 1)) return false;
    const key = sortKeyFor(v, undefined);
    return key === undefined || orderKept(v, key);
  }
  const keys = sortedKeys(v);
  if (keys === undefined) return false;
  for (const k of keys) if (!keptInSubtree((v as Record<string, unknown>)[k], opaque, depth + 1)) return false;
  return true;
}

/** Whether the walk keeps `v` at the classified path `node` exactly, and JSON.stringify prints it canonically. */
function kept(t: FastTable, v: unknown, node: PathNode, depth: number): boolean {
  const rule = node.rule;
  if (rule?.subtree === true) return keptInSubtree(v, rule.cls === 'opaque', depth);
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
  if (typeof v === 'number') return Number.isFinite(v) && (rule?.cls === 'opaque' || Number.isInteger(v));
  if (typeof v !== 'object' || depth > MAX_DEPTH || !isPlainContainer(v)) return false;
  if (Array.isArray(v)) {
    const elem = elemOf(t, node);
    for (const e of v) if (!kept(t, e, elem, depth + 1)) return false;
    const key = sortKeyFor(v, rule);
    return key === undefined || orderKept(v, key);
  }
  const keys = sortedKeys(v);
  if (keys === undefined) return false;
  for (const k of keys) {
    const kid = kidOf(t, node, k);
    // Unclassified (reported) or physical (stripped): the walk changes the object.
    if (kid.rule === undefined || kid.rule.cls === 'physical') return false;
    if (!kept(t, (v as Record<string, unknown>)[k], kid, depth + 1)) return false;
  }
  for (const k of node.required) if (!(k in v)) return false;
  return true;
}

/**
 * Whether walking a physical value (kept whole, only classified) reports no unclassified field and
 * cannot fail: every field below it classified, every list it sorts in a provable order already.
 */
function clean(t: FastTable, v: unknown, node: PathNode, inSubtree: boolean, depth: number): boolean {
  if (v === null || typeof v !== 'object') return true;
  if (depth > MAX_DEPTH || !isPlainContainer(v)) return false;
  if (Array.isArray(v)) {
    const elem = inSubtree ? node : elemOf(t, node);
    const elemSub = inSubtree || elem.rule?.subtree === true;
    for (const e of v) if (!clean(t, e, elem, elemSub, depth + 1)) return false;
    // The value is stripped, so its order does not matter; only a tie would make a text.
    const key = sortKeyFor(v, inSubtree ? undefined : node.rule);
    return key === undefined || noTies(v, key);
  }
  for (const k of Object.keys(v)) {
    const kid = inSubtree ? node : kidOf(t, node, k);
    if (kid.rule === undefined) return false;
    if (!clean(t, (v as Record<string, unknown>)[k], kid, inSubtree || kid.rule.subtree === true, depth + 1))
      return false;
  }
  return true;
}

/**
 * The repro text of the step `{...rest, behaviour}` (stepRepro's text, with no unknown fields), or
 * undefined when that is not proven here. `rest` is the trace line's other fields (its own
 * `behaviour`, if any, is replaced, as in the general path). `behaviourText`: the canonical text
 * `behaviour` was parsed from, when the caller has it (the trace's sealing thread); once kept() holds,
 * JSON.stringify would print exactly that text again, so it is used as it is.
 */
export function fastStepReproText(
  rest: Record<string, unknown>,
  behaviour: unknown,
  table: readonly FieldRule[] = FIELD_TABLE,
  behaviourText?: string,
): string | undefined {
  const t = fastTableOf(table);
  const step = t.step;
  if (step === undefined) return undefined;
  for (const k of Object.keys(rest)) {
    if (k === 'behaviour') continue;
    const kid = kidOf(t, step, k);
    // Another field of the step: only a physical one, walked for classification only, is allowed.
    if (kid.rule === undefined || kid.rule.cls !== 'physical') return undefined;
    if (!clean(t, rest[k], kid, kid.rule.subtree === true, 1)) return undefined;
  }
  const b = kidOf(t, step, 'behaviour');
  if (b.rule === undefined || b.rule.cls === 'physical' || !kept(t, behaviour, b, 0)) return undefined;
  // kept() checked what canonicalize's own fast path checks (plain data, sorted keys, finite
  // numbers); JSON.stringify then prints the canonical text unless a lone surrogate was escaped.
  const text = behaviourText ?? JSON.stringify(behaviour);
  return text.includes('\\ud') ? undefined : `{"behaviour":${text}}`;
}
