// A sweep file and the runs it means: `base` (a run config, relative to the sweep file), `grid` (a
// config path → a list of values), `replicates` (R, default 1), and optionally `name`,
// `checkpointEvery`, `keep`. The runs are the product of the grid's lists times the replicates, in
// a fixed order (grid paths as written, values as listed, replicates innermost); replicate r of a
// grid point runs with the master seed sweep-replicate-seed-v1 derives from that point's own master
// seed (replicate-seed.ts). Every run's overrides are resolved against the base config here, so a
// bad path or value is refused naming it before any run starts; the plan's digest binds the
// content of the runs' own models, so an edited model makes a new sweep, never a continued one.
// NOT where runs go (sweep-dir.ts) nor how they run (task.ts, runner.ts).
import { basename, dirname, extname, resolve } from 'node:path';
import { canonicalDigest, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { isId, type U64 } from '../../core/formats/scalars.js';
import { isPythonUserModel, readConfigDocument, type RunPlan } from '../config.js';
import { recordedModel } from '../launch/model-source.js';
import { pythonModelDigests } from '../launch/python-runtime.js';
import { MASTER_SEED_PATH, pathSegments, resolveWithOverrides, type Override } from '../overrides.js';
import { REPLICATE_SEED_ALGORITHM, replicateSeed } from './replicate-seed.js';

export type Scalar = string | number | boolean | null;

/** One grid axis: a config path and the values it takes, in the order written. */
export interface GridAxis {
  path: string;
  values: Scalar[];
}

/** A sweep file, checked. */
export interface SweepSpec {
  /** The sweep file, absolute. */
  file: string;
  name: string;
  /** The base run config, absolute. */
  base: string;
  baseDoc: unknown;
  grid: GridAxis[];
  replicates: number;
  /** Checkpoint interval of every run (0: none; undefined: a tenth of each run's steps). */
  checkpointEvery: number | undefined;
  keep: number;
}

/** One run of a sweep: where it sits in the product, its overrides and its resolved plan. */
export interface SweepRun {
  index: number;
  /** Its run directory's name inside the sweep directory. */
  id: string;
  /** The grid point: path → value (the master seed is not here: see masterSeed). */
  point: Record<string, Scalar>;
  replicate: number;
  masterSeed: U64;
  /** The overrides `detsim run` is given: the grid point and the replicate's master seed. */
  overrides: Override[];
  plan: RunPlan;
  checkpointEvery: number;
}

export interface SweepPlanned {
  spec: SweepSpec;
  runs: SweepRun[];
  /**
   * SHA-256 over what decides the runs (base config document, grid, replicates, checkpoints, name)
   * and, when its runs use models of one's own, their identities: an edited model is another sweep.
   */
  planDigest: string;
  /** The identities of the runs' own models as run.json records them (modules, Python models), sorted. */
  ownModels: string[];
}

const FIELDS = ['name', 'base', 'grid', 'replicates', 'checkpointEvery', 'keep'];
const MAX_RUNS = 100_000;
const DEFAULT_KEEP = 2;

function refuse(
  file: string,
  field: string,
  why: string,
  reason: 'struct_sweep_file' | 'struct_sweep_empty' = 'struct_sweep_file',
): never {
  throw new DetsimError(reason, `${file}: ${field}: ${why}`, field);
}

const isMapping = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

function wholeField(
  file: string,
  doc: Record<string, unknown>,
  field: string,
  min: number,
  dflt: number | undefined,
): number | undefined {
  const v = doc[field];
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    refuse(
      file,
      field,
      `${JSON.stringify(v)} is not a whole number ≥ ${min}`,
      min === 1 && v === 0 ? 'struct_sweep_empty' : 'struct_sweep_file',
    );
  return v;
}

function gridOf(file: string, v: unknown): GridAxis[] {
  if (v === undefined) return [];
  if (!isMapping(v)) refuse(file, 'grid', 'not a mapping from a config path to a list of values');
  return Object.entries(v).map(([path, values]) => {
    const field = `grid.${path}`;
    pathSegments(path, field);
    if (!Array.isArray(values)) refuse(file, field, 'not a list of values');
    if (values.length === 0) refuse(file, field, 'an empty list makes a sweep of zero runs', 'struct_sweep_empty');
    const seen = new Set<string>();
    for (const x of values) {
      if (x !== null && typeof x === 'object')
        refuse(file, field, `${JSON.stringify(x)}: grid values are scalars (a number, string, boolean or null)`);
      const key = JSON.stringify(x);
      if (seen.has(key)) refuse(file, field, `${key} is listed twice`);
      seen.add(key);
    }
    return { path, values: values as Scalar[] };
  });
}

/** The sweep's name: `name`, else the sweep file's name without its extension. */
function nameOf(file: string, v: unknown): string {
  const name = v === undefined ? basename(file, extname(file)) : v;
  if (typeof name !== 'string' || !isId(name) || !/^[A-Za-z0-9_.-]+$/.test(name))
    refuse(file, 'name', `${JSON.stringify(name)} is not a name of letters, digits, ".", "_" and "-"`);
  return name;
}

/** Read and check a sweep file (YAML or JSON) and its base config document. */
export function readSweepFile(path: string): SweepSpec {
  const file = resolve(path);
  const doc = readConfigDocument(file, 'a sweep file (a mapping with base, grid and replicates)');
  if (!isMapping(doc)) refuse(file, '(top level)', 'not a mapping with base, grid and replicates');
  for (const k of Object.keys(doc))
    if (!FIELDS.includes(k)) refuse(file, k, `unknown field (a sweep file has ${FIELDS.join(', ')})`);
  if (typeof doc.base !== 'string' || doc.base === '')
    refuse(file, 'base', 'missing: the run config the sweep varies, relative to the sweep file');
  const base = resolve(dirname(file), doc.base);
  return {
    file,
    name: nameOf(file, doc.name),
    base,
    baseDoc: readConfigDocument(base),
    grid: gridOf(file, doc.grid),
    replicates: wholeField(file, doc, 'replicates', 1, 1)!,
    checkpointEvery: wholeField(file, doc, 'checkpointEvery', 0, undefined),
    keep: wholeField(file, doc, 'keep', 1, DEFAULT_KEEP)!,
  };
}

/** The grid's points in order: the product of the lists, the last path varying fastest. */
function gridPoints(grid: readonly GridAxis[]): Record<string, Scalar>[] {
  let points: Record<string, Scalar>[] = [{}];
  for (const axis of grid) points = points.flatMap((p) => axis.values.map((v) => ({ ...p, [axis.path]: v })));
  return points;
}

/** A run directory name: index, the grid point's last path segments and values, the replicate. */
export function runIdOf(index: number, width: number, point: Record<string, Scalar>, replicate: number): string {
  const label = Object.entries(point)
    .map(
      ([path, v]) =>
        `${path
          .split('.')
          .pop()!
          .replace(/\[[0-9]+\]/g, '')}=${String(v)}`,
    )
    .join('-')
    .replace(/[^A-Za-z0-9._=+-]/g, '_')
    .slice(0, 60);
  return [String(index).padStart(width, '0'), ...(label ? [label] : []), `r${replicate}`].join('-');
}

/** Resolve one run, naming the sweep file in a refusal an override caused. */
function resolveRun(spec: SweepSpec, overrides: Override[]): RunPlan {
  try {
    return resolveWithOverrides(spec.baseDoc, overrides, { baseDir: dirname(spec.base) });
  } catch (e) {
    if (e instanceof DetsimError)
      throw new DetsimError(e.reason, `${spec.file}: ${e.message.replaceAll('--set ', 'grid ')}`, e.field);
    throw e;
  }
}

/** Every run of the sweep, resolved and checked, in the sweep's order. */
export function planSweep(spec: SweepSpec): SweepPlanned {
  const points = gridPoints(spec.grid);
  const total = points.length * spec.replicates;
  if (total > MAX_RUNS) refuse(spec.file, 'grid', `${total} runs; a sweep holds at most ${MAX_RUNS}`);
  const width = Math.max(2, String(total - 1).length);
  const runs: SweepRun[] = [];
  for (const point of points) {
    const gridOverrides = Object.entries(point).map(([path, value]) => ({ path, value: value as JsonValue }));
    const pointSeed = resolveRun(spec, gridOverrides).masterSeed;
    for (let replicate = 0; replicate < spec.replicates; replicate++) {
      const masterSeed = replicateSeed(pointSeed, replicate);
      const overrides = [
        ...gridOverrides.filter((o) => o.path !== MASTER_SEED_PATH),
        { path: MASTER_SEED_PATH, value: masterSeed },
      ];
      const plan = resolveRun(spec, overrides);
      const index = runs.length;
      runs.push({
        index,
        id: runIdOf(index, width, point, replicate),
        point,
        replicate,
        masterSeed,
        overrides,
        plan,
        checkpointEvery: spec.checkpointEvery ?? Math.max(1, Math.ceil(plan.steps / 10)),
      });
    }
  }
  const ownModels = ownModelsOf(runs);
  return { spec, runs, planDigest: planDigestOf(spec, ownModels), ownModels };
}

/**
 * The runs' models of one's own by identity: a module by its path-free content identity, a Python
 * model with its source digest (one probe for all); built-in models are their names and left out.
 */
function ownModelsOf(runs: readonly SweepRun[]): string[] {
  const own = new Set<string>();
  for (const { plan } of runs)
    for (const model of [plan.environment.model, ...plan.agents.map((a) => a.model)])
      if (model.startsWith('/') || isPythonUserModel(model)) own.add(model);
  const python = [...own].filter(isPythonUserModel);
  const digests = python.length > 0 ? pythonModelDigests(python, runs[0]!.plan.modelDirs ?? []) : {};
  return [...new Set([...own].map((m) => recordedModel(m, digests).model))].sort();
}

function planDigestOf(spec: SweepSpec, ownModels: readonly string[]): string {
  return canonicalDigest({
    seedDerivation: REPLICATE_SEED_ALGORITHM,
    name: spec.name,
    base: spec.baseDoc,
    grid: spec.grid.map((a) => ({ path: a.path, values: a.values })),
    replicates: spec.replicates,
    checkpointEvery: spec.checkpointEvery ?? null,
    keep: spec.keep,
    // Only when there are any: a sweep of built-in models keeps the digest it always had.
    ...(ownModels.length > 0 ? { ownModels } : {}),
  });
}
