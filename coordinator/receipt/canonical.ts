// Receipt canonicalisation (docs/spec/diff0.md R1–R3): splits a receipt into its ReproCore view
// (repro and opaque fields, lists in stable order, fixed-point numbers) and its physical rest.
// It does not hash (reprohash.ts) and does not read files (receipt.ts).
import type { JsonValue } from '../../core/formats/canonical-json.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DEFAULT_PRECISION, type FieldRule, FIELD_TABLE, PHYSICAL_NAMES, childPath, fieldLookup } from './fields.js';

/** Options of receipt canonicalisation (another classification table, no stripping). */
export interface CanonicalOptions {
  /** The classification table; the published one by default. */
  readonly table?: readonly FieldRule[];
  /** false keeps physical fields in the repro view (only to prove the physical-diff check can fail). */
  readonly stripPhysical?: boolean;
}

/** A receipt field missing from the classification table: treated as physical, and reported. */
export interface UnknownField {
  readonly path: string;
  readonly count: number;
}

export interface CanonicalSplit {
  /** Repro and opaque fields, normalised: what the ReproHash covers. */
  readonly repro: JsonValue;
  /** The fields that were stripped (physical and unclassified), same structure; null when none. */
  readonly physical: JsonValue;
  /** Fields missing from the table: treated as physical, counted by path pattern (R1). */
  readonly unknownFields: readonly UnknownField[];
}

/** Keys that identify an element of a list of objects, in preference order (R2). */
export const STABLE_KEYS: readonly string[] = ['step', 'seq', 'agentId'];

interface Ctx {
  readonly table: TableIndex;
  readonly strip: boolean;
  readonly unknown: Map<string, number>;
}

/** A classification table prepared for walking: its rules by path, direct children, and child paths memoised. */
export interface TableIndex {
  readonly lookup: (path: string) => FieldRule | undefined;
  readonly children: Map<string, FieldRule[]>;
  /** pattern → key → childPath(pattern, key): a receipt repeats the same few thousand paths millions of times. */
  readonly paths: Map<string, Map<string, string>>;
}

const tableIndexes = new WeakMap<readonly FieldRule[], TableIndex>();

/** The prepared form of a table, made once per table. */
export function tableIndexOf(table: readonly FieldRule[]): TableIndex {
  let t = tableIndexes.get(table);
  if (t === undefined) {
    t = { lookup: fieldLookup(table), children: directChildren(table), paths: new Map() };
    tableIndexes.set(table, t);
  }
  return t;
}

function childPathOf(t: TableIndex, pattern: string, key: string): string {
  let byKey = t.paths.get(pattern);
  if (byKey === undefined) t.paths.set(pattern, (byKey = new Map()));
  let path = byKey.get(key);
  if (path === undefined) byKey.set(key, (path = childPath(pattern, key)));
  return path;
}

/** R3: a non-integer becomes a fixed-point string; an integer stays exact; -0 becomes 0. */
export function fixedPoint(x: number, precision: number = DEFAULT_PRECISION): number | string {
  if (!Number.isFinite(x)) return String(x); // refused later by canonicalize; kept visible here
  if (Number.isInteger(x)) return Object.is(x, -0) ? 0 : x;
  const s = x.toFixed(precision);
  // A value that rounds to zero must not keep its sign: "-0.000000000" is written "0.000000000".
  return /^-0(\.0*)?$/.test(s) ? s.slice(1) : s;
}

function directChildren(table: readonly FieldRule[]): Map<string, FieldRule[]> {
  const m = new Map<string, FieldRule[]>();
  for (const r of table) {
    const cut = r.path.lastIndexOf('.');
    const parent = cut < 0 ? '' : r.path.slice(0, cut);
    if (r.path.endsWith('[]')) continue;
    const list = m.get(parent) ?? [];
    list.push(r);
    m.set(parent, list);
  }
  return m;
}

const U64ish = /^(0|[1-9][0-9]*)$/;

/** Order of two sort-key values: numbers and decimal strings numerically, other strings by code unit. */
export function compareKeyValues(a: unknown, b: unknown): number {
  if (a === b) return 0;
  if (a === undefined || a === null) return -1;
  if (b === undefined || b === null) return 1;
  if (typeof a === 'number' && typeof b === 'number') return a < b ? -1 : 1;
  const sa = typeof a === 'number' ? String(a) : a;
  const sb = typeof b === 'number' ? String(b) : b;
  if (typeof sa === 'string' && typeof sb === 'string') {
    if (U64ish.test(sa) && U64ish.test(sb)) {
      const x = BigInt(sa);
      const y = BigInt(sb);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return sa < sb ? -1 : sa > sb ? 1 : 0;
  }
  const ta = typeof a;
  const tb = typeof b;
  return ta < tb ? -1 : ta > tb ? 1 : 0;
}

/** The value at a dotted key path inside `v` (undefined when a step of the path is not an object). */
export function getPath(v: unknown, keyPath: string): unknown {
  // One key (the usual sort key, agentId): no split.
  if (!keyPath.includes('.'))
    return v === null || typeof v !== 'object' || Array.isArray(v)
      ? undefined
      : (v as Record<string, unknown>)[keyPath];
  let cur: unknown = v;
  for (const k of keyPath.split('.')) {
    if (cur === null || typeof cur !== 'object' || Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[k];
  }
  return cur;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** The sort key of a list of objects: the table's, else the first stable key every element has. */
export function sortKeyFor(list: unknown[], rule: FieldRule | undefined): string | undefined {
  if (rule?.order) return rule.order === 'as-written' ? undefined : rule.order;
  if (list.length === 0 || !list.every(isPlainObject)) return undefined;
  return STABLE_KEYS.find((k) => list.every((e) => (e as Record<string, unknown>)[k] !== undefined));
}

type Pair = [repro: JsonValue | undefined, physical: JsonValue | undefined];

function walk(
  value: unknown,
  pattern: string,
  rule: FieldRule | undefined,
  inSubtree: boolean,
  precision: number,
  ctx: Ctx,
): Pair {
  if (value === undefined || value === null) return [null, undefined];
  if (typeof value === 'number') return [rule?.cls === 'opaque' ? value : fixedPoint(value, precision), undefined];
  if (typeof value === 'bigint') return [value.toString(), undefined];
  if (typeof value === 'string' || typeof value === 'boolean') return [value, undefined];
  if (Array.isArray(value)) return walkList(value, pattern, rule, inSubtree, precision, ctx);
  if (typeof value === 'object')
    return walkObject(value as Record<string, unknown>, pattern, rule, inSubtree, precision, ctx);
  return [String(value), undefined];
}

function walkList(
  list: unknown[],
  pattern: string,
  rule: FieldRule | undefined,
  inSubtree: boolean,
  precision: number,
  ctx: Ctx,
): Pair {
  const elem = `${pattern}[]`;
  const elemRule = inSubtree ? rule : (ctx.table.lookup(elem) ?? rule);
  // A list element listed as a subtree (free-form model JSON) is not classified field by field.
  const elemSub = inSubtree || elemRule?.subtree === true;
  const elemPrecision = elemRule?.precision ?? precision;
  const pairs = list.map((e) => walk(e, elem, elemRule, elemSub, elemPrecision, ctx));
  const key = sortKeyFor(list, inSubtree ? undefined : rule);
  let order = pairs.map((_, i) => i);
  if (key !== undefined) {
    // Stable key first; ties by canonical text so arrival order never decides (R2). The texts are
    // made only for elements whose keys tie (rare: keys are ids), not for every element.
    const keys = list.map((e) => getPath(e, key));
    const text: (string | undefined)[] = [];
    const textOf = (i: number) => (text[i] ??= canonicalize(pairs[i]![0] ?? null));
    order = order.sort((i, j) => {
      const byKey = compareKeyValues(keys[i], keys[j]);
      if (byKey !== 0) return byKey;
      const a = textOf(i);
      const b = textOf(j);
      return a < b ? -1 : a > b ? 1 : 0;
    });
  }
  const repro = order.map((i) => pairs[i]![0] ?? null);
  const phys = order.map((i) => pairs[i]![1] ?? null);
  return [repro, phys.some((p) => p !== null) ? phys : undefined];
}

function walkObject(
  obj: Record<string, unknown>,
  pattern: string,
  rule: FieldRule | undefined,
  inSubtree: boolean,
  precision: number,
  ctx: Ctx,
): Pair {
  const repro: Record<string, JsonValue> = {};
  const phys: Record<string, JsonValue> = {};
  for (const key of Object.keys(obj).sort()) {
    const path = childPathOf(ctx.table, pattern, key);
    let r: FieldRule | undefined;
    let sub = inSubtree;
    if (inSubtree && rule) r = rule;
    else {
      r = ctx.table.lookup(path);
      if (r === undefined) {
        if (!PHYSICAL_NAMES.includes(key)) ctx.unknown.set(path, (ctx.unknown.get(path) ?? 0) + 1);
        r = { path, cls: 'physical', summary: 'unclassified' };
      }
      sub = r.subtree === true;
    }
    const p = r.precision ?? precision;
    if (r.cls === 'physical') {
      // The whole value is stripped; walk it unstripped so that its own fields are still classified.
      const [full] = walk(obj[key], path, r, sub, p, ctx.strip ? { ...ctx, strip: false } : ctx);
      phys[key] = full ?? null;
      if (!ctx.strip) repro[key] = full ?? null;
    } else {
      const [cr, cp] = walk(obj[key], path, r, sub, p, ctx);
      repro[key] = cr ?? null;
      if (cp !== undefined) phys[key] = cp;
    }
  }
  // R3: an absent optional repro field is null, so {a} and {a, b: null} are the same receipt.
  if (!inSubtree) {
    for (const c of ctx.table.children.get(pattern) ?? []) {
      const key = c.path.slice(pattern === '' ? 0 : pattern.length + 1);
      if (c.cls !== 'physical' && !(key in obj)) repro[key] = null;
    }
  }
  return [repro, Object.keys(phys).length > 0 ? phys : undefined];
}

/** Split a receipt into the ReproCore view and the stripped physical rest, counting unclassified fields. */
export function canonicalSplit(receipt: unknown, opts: CanonicalOptions = {}): CanonicalSplit {
  const table = opts.table ?? FIELD_TABLE;
  const ctx: Ctx = {
    table: tableIndexOf(table),
    strip: opts.stripPhysical !== false,
    unknown: new Map(),
  };
  const [repro, physical] = walk(receipt, '', undefined, false, DEFAULT_PRECISION, ctx);
  const unknownFields = [...ctx.unknown.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([path, count]) => ({ path, count }));
  return { repro: repro ?? null, physical: ctx.strip ? (physical ?? null) : null, unknownFields };
}
