// Where a sweep's runs go and what state each is in: `<out>/<name>-<n>/` holding `sweep.json` (the
// index: the sweep's plan digest, the seed derivation, and per run its directory, grid point,
// replicate and master seed — the shape the report reads, docs/guide.md "Sweeps") and one run
// directory per run. The same sweep file run again continues the newest directory whose plan
// digest is its own; an edited sweep file (another plan) gets a new directory. A run's state comes
// from its files: done (a receipt.json whose trace binding holds and whose run.json is the planned
// run), resumable (a committed checkpoint), or to start afresh. NOT the planning (sweep-file.ts)
// nor the running (task.ts, runner.ts).
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseStrict, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { checkRunsParent, writeJsonDurable } from '../session/run-dir.js';
import { asWriteFailure, guardWrite } from '../write-failure.js';
import { REPLICATE_SEED_ALGORITHM } from './replicate-seed.js';
import type { SweepPlanned, SweepRun } from './sweep-file.js';

export const SWEEP_INDEX = 'sweep.json';
export const SWEEP_FORMAT = 'detsim-sweep-v1';
export const DEFAULT_SWEEPS_DIR = 'sweeps';

/** sweep.json as written: what the report, status and the Slurm array tasks read. */
export interface SweepIndex {
  format: typeof SWEEP_FORMAT;
  name: string;
  planDigest: string;
  /** The runs' own models by identity (present when there are any; SweepPlanned.ownModels). */
  ownModels?: string[];
  seedDerivation: typeof REPLICATE_SEED_ALGORITHM;
  /** Physical: where the sweep file and its base config were when the sweep began or last continued. */
  sweepFile: string;
  base: string;
  replicates: number;
  grid: Record<string, JsonValue[]>;
  runs: {
    dir: string;
    index: number;
    overrides: Record<string, JsonValue>;
    replicate: number;
    masterSeed: string;
    steps: number;
    agents: number;
    checkpointEvery: number;
  }[];
}

export function sweepIndexOf(p: SweepPlanned): SweepIndex {
  return {
    format: SWEEP_FORMAT,
    name: p.spec.name,
    planDigest: p.planDigest,
    ...(p.ownModels.length > 0 ? { ownModels: p.ownModels } : {}),
    seedDerivation: REPLICATE_SEED_ALGORITHM,
    sweepFile: p.spec.file,
    base: p.spec.base,
    replicates: p.spec.replicates,
    grid: Object.fromEntries(p.spec.grid.map((a) => [a.path, a.values])),
    runs: p.runs.map((r) => ({
      dir: r.id,
      index: r.index,
      overrides: r.point,
      replicate: r.replicate,
      masterSeed: r.masterSeed,
      steps: r.plan.steps,
      agents: r.plan.agents.length,
      checkpointEvery: r.checkpointEvery,
    })),
  };
}

/** A sweep directory's sweep.json, or null when it has none; a damaged one is refused naming it. */
export function readSweepIndex(sweepDir: string): SweepIndex | null {
  const path = join(sweepDir, SWEEP_INDEX);
  if (!existsSync(path)) return null;
  let doc: JsonValue;
  try {
    doc = parseStrict(readFileSync(path));
  } catch (e) {
    throw new DetsimError('struct_sweep_index', `${path}: ${(e as Error).message}`, SWEEP_INDEX);
  }
  const d = doc as Partial<SweepIndex> | null;
  if (d === null || typeof d !== 'object' || d.format !== SWEEP_FORMAT || !Array.isArray(d.runs))
    throw new DetsimError(
      'struct_sweep_index',
      `${path}: not a ${SWEEP_FORMAT} index written by detsim sweep`,
      SWEEP_INDEX,
    );
  return d as SweepIndex;
}

/** A sweep directory's sweep.json; a directory without one is refused naming it. */
export function requireSweepIndex(sweepDir: string): SweepIndex {
  const index = readSweepIndex(sweepDir);
  if (index === null)
    throw new DetsimError(
      'struct_sweep_index',
      `${sweepDir}: no sweep.json (not a directory detsim sweep made)`,
      'sweep.json',
    );
  return index;
}

/** `<out>/<name>-<n>` directories, highest n first. */
function sweepDirsOf(parent: string, name: string): string[] {
  if (!existsSync(parent)) return [];
  const re = new RegExp(`^${name.replace(/[.]/g, '\\.')}-([1-9][0-9]*)$`);
  return readdirSync(parent)
    .map((n) => ({ n, m: re.exec(n) }))
    .filter((x) => x.m !== null)
    .sort((a, b) => Number(b.m![1]) - Number(a.m![1]))
    .map((x) => join(parent, x.n));
}

/**
 * The directory this sweep runs in, without creating it: the newest `<out>/<name>-<n>` whose
 * sweep.json has this plan digest (continued), else the next free `<name>-<n>`.
 */
export function chooseSweepDir(outArg: string, p: SweepPlanned): ChosenSweepDir {
  checkRunsParent(outArg);
  const parent = resolve(outArg);
  const dirs = sweepDirsOf(parent, p.spec.name);
  for (const dir of dirs) if (readSweepIndex(dir)?.planDigest === p.planDigest) return { dir, continued: true };
  const next = dirs.length === 0 ? 1 : Number(/-([0-9]+)$/.exec(dirs[0]!)![1]) + 1;
  return { dir: join(parent, `${p.spec.name}-${next}`), continued: false, ...(dirs[0] ? { previous: dirs[0] } : {}) };
}

/** Where a sweep runs: a continued directory, or a new one (and the newest earlier one of its name). */
export interface ChosenSweepDir {
  dir: string;
  continued: boolean;
  /** A new sweep's newest earlier directory of the same name, whose plan differs. */
  previous?: string;
}

/**
 * Why a sweep is not `previous`'s continued: its own models' content changed (named), or another
 * plan (sweep file, base config, grid, replicates, checkpoints). `shown` is how to name `previous`.
 */
export function whyNotContinued(previous: string, shown: string, p: SweepPlanned): string {
  const before = readSweepIndex(previous)?.ownModels ?? [];
  const nameOf = (identity: string) => identity.replace(/@sha256:[0-9a-f]+$/, '');
  const changed = p.ownModels.filter((m) => !before.includes(m) && before.some((b) => nameOf(b) === nameOf(m)));
  if (changed.length > 0) return `${changed.map(nameOf).join(', ')} changed since ${shown} ran`;
  return `its sweep file, base config or models differ from ${shown}'s`;
}

/**
 * The directory this sweep runs in (chooseSweepDir): a continued one as it is, a new one made with
 * sweep.json written durably before any run (a name taken meanwhile moves on to the next n).
 */
export function openSweepDir(outArg: string, p: SweepPlanned): ChosenSweepDir {
  const chosen = chooseSweepDir(outArg, p);
  if (chosen.continued) {
    // The same plan from a sweep file that has moved (or a project moved whole): its tasks plan
    // again from the file sweep.json names, so it names where the file is now.
    const index = readSweepIndex(chosen.dir)!;
    if (index.sweepFile !== p.spec.file || index.base !== p.spec.base)
      writeJsonDurable(chosen.dir, SWEEP_INDEX, { ...index, sweepFile: p.spec.file, base: p.spec.base });
    return chosen;
  }
  const parent = dirname(chosen.dir);
  guardWrite(parent, () => mkdirSync(parent, { recursive: true }));
  for (let n = Number(/-([0-9]+)$/.exec(chosen.dir)![1]); ; n++) {
    const dir = join(parent, `${p.spec.name}-${n}`);
    try {
      mkdirSync(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw asWriteFailure(e, dir);
    }
    writeJsonDurable(dir, SWEEP_INDEX, sweepIndexOf(p));
    return { ...chosen, dir };
  }
}

/** The run directory of `run` in `sweepDir`. */
export const runDirOf = (sweepDir: string, run: Pick<SweepRun, 'id'>): string => join(sweepDir, run.id);
