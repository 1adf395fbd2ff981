// Config overrides, the one module for the concept: `--set path=value` and `--master-seed N` of
// `detsim run` (and `detsim fork`, and sweeps) as {path, value}, applied to the parsed config
// document BEFORE it is resolved, so every value meets the config's own schema (config.ts) and a
// path the schema does not have is refused naming it (`struct_override_path`). A value is read as
// one YAML scalar or flow value (24, true, [1, 2], {food: 3}, "text"). The overrides a run was
// made with are recorded in run.json as `overrides` (physical: the resolved composition is what is
// hashed, so `--set x=1` and a config that says x: 1 give the same ReproHash).
// NOT the schema nor its checks (config.ts) and NOT what a fork may change (checkpoint/fork.ts).
import { dirname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { readConfigDocument, resolveConfig, type RunPlan } from './config.js';
import type { JsonValue } from '../core/formats/canonical-json.js';
import { DetsimError, isDetsimError } from '../core/formats/errors.js';

/** One override: a config field path (`environment.params.food`, `agents[0].params.explore`) and its value. */
export interface Override {
  readonly path: string;
  readonly value: JsonValue;
}

/** The config path `--master-seed N` sets. */
export const MASTER_SEED_PATH = 'masterSeed';

/** One path segment: a mapping key or a list index. */
export type PathSegment = string | number;

const KEY = '[A-Za-z0-9_][A-Za-z0-9_-]*';
const PATH = new RegExp(`^${KEY}(\\[[0-9]+\\])*(\\.${KEY}(\\[[0-9]+\\])*)*$`);

/** `path` as segments, or struct_override_path naming the text when it is no field path. */
export function pathSegments(path: string, flag = '--set'): PathSegment[] {
  if (!PATH.test(path))
    throw new DetsimError(
      'struct_override_path',
      `${flag} ${path}: not a config field path (keys joined by ".", list entries as [n], e.g. environment.params.food or agents[0].params.explore)`,
      flag,
    );
  const out: PathSegment[] = [];
  for (const part of path.split('.')) {
    const [key, ...indexes] = part.split('[');
    out.push(key!);
    for (const i of indexes) out.push(Number(i.slice(0, -1)));
  }
  return out;
}

/** A YAML integer beyond ±(2^53−1) would silently round: refused; safe ones become numbers. */
function plainValue(v: unknown, where: string): JsonValue {
  if (typeof v === 'bigint') {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(-Number.MAX_SAFE_INTEGER))
      throw new DetsimError(
        'struct_unsafe_integer',
        `${where}: ${v} is beyond ±(2^53−1) and would be rounded; quote it if the field takes a string (a U64)`,
        where,
      );
    return Number(v);
  }
  if (Array.isArray(v)) return v.map((x) => plainValue(x, where));
  if (v !== null && typeof v === 'object') {
    const o: Record<string, JsonValue> = {};
    for (const [k, x] of Object.entries(v)) o[k] = plainValue(x, where);
    return o;
  }
  if (typeof v === 'number' && !Number.isFinite(v))
    throw new DetsimError('struct_non_finite_number', `${where}: ${v} is not a finite number`, where);
  return v as JsonValue;
}

/** A value as YAML reads it: one scalar or flow value (a number, true/false, [list], {map}, "quoted text"). */
export function parseOverrideValue(text: string, where: string): JsonValue {
  let v: unknown;
  try {
    v = parseYaml(text, { strict: true, uniqueKeys: true, intAsBigInt: true, prettyErrors: false });
  } catch (e) {
    const why = (e as Error).message.split('\n')[0];
    throw new DetsimError(
      'struct_invalid_field',
      `${where}: ${JSON.stringify(text)} is not a YAML value: ${why}`,
      where,
    );
  }
  return plainValue(v, where);
}

/** `path=value` (`--set environment.params.food=24`): the path checked for form, the value read as YAML. */
export function parseOverride(text: string, flag = '--set'): Override {
  const eq = text.indexOf('=');
  if (eq <= 0)
    throw new DetsimError(
      'struct_invalid_field',
      `${flag} ${JSON.stringify(text)}: expected path=value (e.g. environment.params.food=24)`,
      flag,
    );
  const path = text.slice(0, eq);
  pathSegments(path, flag);
  return { path, value: parseOverrideValue(text.slice(eq + 1), `${flag} ${path}`) };
}

/** `--master-seed N`: the master seed path with N as the U64 string the schema checks (no YAML reading). */
export function masterSeedOverride(text: string): Override {
  return { path: MASTER_SEED_PATH, value: text };
}

/** Several `--set` texts (and `--master-seed`) as overrides; a path given twice is refused, naming it. */
export function parseOverrides(texts: readonly string[] = [], masterSeed?: string): Override[] {
  const out = texts.map((t) => parseOverride(t));
  if (masterSeed !== undefined) out.push(masterSeedOverride(masterSeed));
  const seen = new Set<string>();
  for (const o of out) {
    if (seen.has(o.path))
      throw new DetsimError(
        'struct_invalid_field',
        `--set ${o.path}: given twice${o.path === MASTER_SEED_PATH ? ' (--master-seed sets it too)' : ''}`,
        o.path,
      );
    seen.add(o.path);
  }
  return out;
}

/** `path=value` as shown to people and in sweep labels: the value as JSON. */
export function formatOverride(o: Override): string {
  return `${o.path}=${JSON.stringify(o.value)}`;
}

const isMapping = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);
const kindOf = (v: unknown): string =>
  Array.isArray(v) ? 'a list' : v === null ? 'null' : isMapping(v) ? 'a mapping' : `a ${typeof v}`;

/** Set one override in `doc` (mutated); a missing mapping on the way is made, anything else in the way refused. */
function setAt(doc: Record<string, unknown>, o: Override): void {
  const segs = pathSegments(o.path);
  let node: unknown = doc;
  let at = '';
  for (let i = 0; i < segs.length; i++) {
    const seg = segs[i]!;
    const last = i === segs.length - 1;
    const refuse = (why: string): never => {
      throw new DetsimError('struct_override_path', `--set ${o.path}: ${at || '(top level)'} ${why}`, o.path);
    };
    if (typeof seg === 'number') {
      if (!Array.isArray(node)) return refuse(`is ${kindOf(node)}, not a list`);
      if (seg >= node.length) return refuse(`has ${node.length} entries, no [${seg}]`);
      if (last) node[seg] = o.value;
      else node = node[seg];
      at += `[${seg}]`;
      continue;
    }
    if (!isMapping(node)) return refuse(`is ${kindOf(node)}, not a mapping`);
    if (last) node[seg] = o.value;
    else {
      // A mapping the document does not have yet: the schema says whether the field exists.
      if (node[seg] === undefined) node[seg] = {};
      node = node[seg];
    }
    at = at ? `${at}.${seg}` : seg;
  }
}

/**
 * The config document with the overrides applied in order (a new document; `doc` is not changed).
 * Nothing is validated here but the paths' shape: resolve the result (resolveWithOverrides, or
 * config.ts resolveConfig) so the schema checks every value.
 */
export function applyOverrides(doc: unknown, overrides: readonly Override[]): unknown {
  if (!isMapping(doc))
    throw new DetsimError('struct_invalid_field', `the config is ${kindOf(doc)}, not a mapping`, '(top level)');
  const out = structuredClone(doc);
  for (const o of overrides) setAt(out, o);
  return out;
}

/** Whether config field `field` (as a refusal names it) is `path`, lies under it, or contains it. */
function related(field: string, path: string): boolean {
  const under = (a: string, b: string) => a === b || a.startsWith(`${b}.`) || a.startsWith(`${b}[`);
  return under(field, path) || under(path, field);
}

/** A schema refusal that concerns an override says so; an unknown field an override made is struct_override_path. */
function overrideRefusal(e: DetsimError, overrides: readonly Override[]): DetsimError {
  const o = e.field === undefined ? undefined : [...overrides].reverse().find((x) => related(e.field!, x.path));
  if (!o) return e;
  if (e.reason === 'struct_unknown_field')
    return new DetsimError('struct_override_path', `--set ${o.path}: no such config field (${e.message})`, o.path);
  return new DetsimError(e.reason, `${e.message} (overridden: ${formatOverride(o)})`, e.field);
}

/**
 * Apply the overrides and resolve the document into a RunPlan that records them (`plan.overrides`,
 * run.json `overrides`). A refusal caused by an override names it.
 */
export function resolveWithOverrides(
  doc: unknown,
  overrides: readonly Override[],
  opts: { baseDir?: string } = {},
): RunPlan {
  const applied = applyOverrides(doc, overrides);
  try {
    const plan = resolveConfig(applied, opts);
    return overrides.length > 0 ? { ...plan, overrides: overrides.map((o) => ({ ...o })) } : plan;
  } catch (e) {
    if (isDetsimError(e) && overrides.length > 0) throw overrideRefusal(e, overrides);
    throw e;
  }
}

/**
 * Read a config file, apply the overrides, resolve: config.ts loadConfig with `--set`. With
 * `launcher: 'slurm'` (`--launcher slurm`, `detsim slurm submit`) the config is read as if it named
 * Slurm (a launcher it names as `{ kind: slurm, … }` kept), so the defaults that follow from the
 * launcher — Unix sockets, groups of four agents — are the ones a config naming Slurm gets, and
 * the layout never depends on the cores of the machine that submitted it.
 */
export function loadConfigWithOverrides(file: string, overrides: readonly Override[], launcher?: 'slurm'): RunPlan {
  const doc = readConfigDocument(file);
  return resolveWithOverrides(launcher === 'slurm' ? namingSlurm(doc) : doc, overrides, {
    baseDir: dirname(resolve(file)),
  });
}

/** A config document that names Slurm as its launcher: as it is when it does, else with `launcher: slurm`. */
function namingSlurm(doc: unknown): unknown {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return doc; // refused as it is
  const named = (doc as { launcher?: unknown }).launcher;
  const kind = typeof named === 'string' ? named : (named as { kind?: unknown } | undefined)?.kind;
  return kind === 'slurm' ? doc : { ...doc, launcher: 'slurm' };
}
