// A sweep for a report: a directory of run directories, with or without the index `sweep.json`
// {runs: [{dir, overrides: {path: value}, replicate}]} a sweep writes beside them (the shape is in
// docs/guide.md "Reports"). Each run is read as a run report reads it (read-run.ts: its trace checked
// and its ReproHash recomputed), one at a time, keeping only its outcome — the total reward of all
// agents over the run — so memory does not grow with the runs' lengths. Then one chart per override
// path: the outcome per value, min/mean/max across replicates and every replicate as a point, and
// one chart of every run's outcome. NOT the running of a sweep and not the page (html.ts).
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, isAbsolute, join, relative, resolve } from 'node:path';
import { canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { matchAttestation, type AttestationMatch, type AttestationSource } from './attestation.js';
import type { ChartSpec, SeriesSpec } from './charts.js';
import { readRun, type ReceiptVerdict } from './read-run.js';
import { readJsonFileOrNull } from './run-facts.js';
import { SWEEP_FORMAT, SWEEP_INDEX } from '../sweep/sweep-dir.js';

/** The index a sweep writes beside its run directories (coordinator/sweep/sweep-dir.ts). */
export { SWEEP_INDEX };
/** Groups (combinations of the other overrides) drawn per parameter chart; the rest are in the table only. */
export const MAX_GROUPS = 8;

export type Scalar = string | number | boolean | null;

/** One run of a sweep as its index lists it (without an index: every run directory, no overrides). */
export interface SweepEntry {
  dir: string;
  overrides: Record<string, Scalar>;
  replicate: number | null;
}

/** One run's outcome and identities. */
export interface SweepRun {
  entry: SweepEntry;
  runId: string;
  sessionId: string;
  masterSeed: string;
  status: string;
  stepsDone: number;
  totalReward: number;
  reproHash: string | null;
  verdict: ReceiptVerdict['status'];
  behaviourDigest: string | null;
  attestation: AttestationMatch | null;
}

export interface SweepData {
  sweepDir: string;
  index: string | null;
  runs: SweepRun[];
  /** How many runs the sweep's own sweep.json plans (null: no detsim sweep index); runs has those with a run directory. */
  planned: number | null;
  paths: string[];
  charts: ChartSpec[];
}

const isRunDir = (dir: string) => existsSync(join(dir, 'run.json'));

function refuse(path: string, field: string, why: string): never {
  throw new DetsimError('struct_sweep_index', `${path}: ${field}: ${why}`, field);
}

/** An entry, or null for a run `detsim sweep` has not started yet (its index lists every planned run). */
function entryOf(sweepDir: string, path: string, v: JsonValue, i: number, planned: boolean): SweepEntry | null {
  const at = `runs[${i}]`;
  if (v === null || typeof v !== 'object' || Array.isArray(v)) refuse(path, at, 'not an object');
  if (typeof v.dir !== 'string' || v.dir === '') refuse(path, `${at}.dir`, 'not a non-empty string');
  const dir = isAbsolute(v.dir) ? v.dir : resolve(sweepDir, v.dir);
  if (!isRunDir(dir)) {
    if (planned) return null;
    refuse(path, `${at}.dir`, `${dir} is not a run directory (no run.json)`);
  }
  const o = v.overrides ?? {};
  if (o === null || typeof o !== 'object' || Array.isArray(o)) refuse(path, `${at}.overrides`, 'not an object');
  for (const [k, x] of Object.entries(o))
    if (x !== null && typeof x === 'object')
      refuse(path, `${at}.overrides.${k}`, 'not a string, number, boolean or null');
  const r = v.replicate ?? null;
  if (r !== null && !(typeof r === 'number' && Number.isInteger(r) && r >= 0))
    refuse(path, `${at}.replicate`, 'not a whole number ≥ 0');
  return { dir, overrides: o as Record<string, Scalar>, replicate: r as number | null };
}

/** The runs of a sweep directory: sweep.json's list, else every run directory in it by name. */
export function sweepEntries(sweepDir: string): {
  index: string | null;
  entries: SweepEntry[];
  planned: number | null;
} {
  const path = join(sweepDir, SWEEP_INDEX);
  const doc = readJsonFileOrNull(path);
  if (doc !== null) {
    if (!Array.isArray(doc.runs) || doc.runs.length === 0) refuse(path, 'runs', 'not a non-empty list');
    // A detsim sweep's own index lists runs not started yet: those are left out, not refused.
    const planned = doc.format === SWEEP_FORMAT;
    const entries = doc.runs.flatMap((v, i) => entryOf(sweepDir, path, v, i, planned) ?? []);
    if (entries.length === 0) refuse(path, 'runs', 'no run of this sweep has started yet');
    return { index: path, entries, planned: planned ? doc.runs.length : null };
  }
  const dirs = readdirSync(sweepDir)
    .sort()
    .map((n) => join(sweepDir, n))
    .filter((d) => statSync(d).isDirectory() && isRunDir(d));
  if (dirs.length === 0)
    throw new DetsimError(
      'struct_report_source',
      `${sweepDir}: neither a run directory (run.json) nor a sweep directory (${SWEEP_INDEX} or run directories in it)`,
      'source',
    );
  return { index: null, entries: dirs.map((dir) => ({ dir, overrides: {}, replicate: null })), planned: null };
}

function readSweepRun(sweepDir: string, entry: SweepEntry, attestation: AttestationSource | null): SweepRun {
  const d = readRun(entry.dir, 1);
  const s = d.summary ?? {};
  const reproHash = d.verdict.receiptReproHash;
  const inside = relative(resolve(sweepDir), resolve(entry.dir));
  return {
    entry,
    // Its place in the sweep (run ids repeat across a sweep's sub-directories), else its directory.
    runId: inside !== '' && !inside.startsWith('..') && !isAbsolute(inside) ? inside : d.runId,
    sessionId: d.run.sessionId,
    masterSeed: d.run.masterSeed,
    status: typeof s.status === 'string' ? s.status : 'unknown',
    stepsDone: d.series.steps,
    totalReward: d.series.totalReward,
    reproHash,
    verdict: d.verdict.status,
    behaviourDigest: typeof s.behaviourDigest === 'string' ? s.behaviourDigest : null,
    attestation: matchAttestation(attestation, reproHash),
  };
}

const labelOf = (v: Scalar): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** The distinct values of `path` in order (numbers ascending, else by label) and whether they are all numbers. */
function valuesOf(path: string, runs: SweepRun[]): { values: Scalar[]; numeric: boolean } {
  const byKey = new Map<string, Scalar>();
  for (const r of runs) byKey.set(canonicalize(r.entry.overrides[path]!), r.entry.overrides[path]!);
  const values = [...byKey.values()];
  const numeric = values.every((v) => typeof v === 'number');
  values.sort((a, b) => (numeric ? (a as number) - (b as number) : labelOf(a) < labelOf(b) ? -1 : 1));
  return { values, numeric };
}

/** The other overrides of a run, as a group key and a label. */
function othersOf(r: SweepRun, path: string): string {
  const rest = Object.entries(r.entry.overrides).filter(([k]) => k !== path);
  return rest.map(([k, v]) => `${k}=${labelOf(v)}`).join(', ');
}

function stats(xs: number[]): { min: number; mean: number; max: number } | null {
  if (xs.length === 0) return null;
  return { min: Math.min(...xs), mean: xs.reduce((a, b) => a + b, 0) / xs.length, max: Math.max(...xs) };
}

/** The series of one group on a parameter chart: min/mean/max lines, and each replicate as points. */
function groupSeries(cells: SweepRun[][], label: string, color: number): SeriesSpec[] {
  const st = cells.map((c) => stats(c.map((r) => r.totalReward)));
  const prefix = label === '' ? '' : `${label}: `;
  const out: SeriesSpec[] = [
    { label: `${prefix}mean`, values: st.map((s) => s?.mean ?? null), style: 'line', color },
    { label: `${prefix}min`, values: st.map((s) => s?.min ?? null), style: 'dashed', color },
    { label: `${prefix}max`, values: st.map((s) => s?.max ?? null), style: 'dashed', color },
  ];
  const reps = [...new Set(cells.flatMap((c) => c.map((r, k) => r.entry.replicate ?? k)))].sort((a, b) => a - b);
  for (const rep of reps) {
    const values = cells.map((c) => c.find((r, k) => (r.entry.replicate ?? k) === rep)?.totalReward ?? null);
    out.push({ label: `${prefix}replicate ${rep}`, values, style: 'points', color });
  }
  return out;
}

function paramChart(path: string, all: SweepRun[], n: number): ChartSpec | null {
  const runs = all.filter((r) => r.status === 'completed' && path in r.entry.overrides);
  if (runs.length === 0) return null;
  const { values, numeric } = valuesOf(path, runs);
  const keys = [...new Set(runs.map((r) => othersOf(r, path)))].sort();
  const series = keys.slice(0, MAX_GROUPS).flatMap((key, g) => {
    const group = runs.filter((r) => othersOf(r, path) === key);
    const cells = values.map((v) => group.filter((r) => canonicalize(r.entry.overrides[path]!) === canonicalize(v)));
    return groupSeries(cells, key, g);
  });
  const dropped = keys.length > MAX_GROUPS ? ` ${keys.length - MAX_GROUPS} more groups are in the table only.` : '';
  return {
    id: `sweep-param-${n}`,
    title: `Total reward by ${path}`,
    note: `Completed runs only: the total reward of all agents over each run, min/mean/max across replicates at each value of ${path}, every replicate as a point${keys.length > 1 ? ', one colour per combination of the other overrides' : ''}.${dropped}`,
    xLabel: path,
    yLabel: 'total reward',
    x: numeric ? (values as number[]) : values.map((_, i) => i),
    series,
    ...(numeric ? {} : { xCategories: values.map(labelOf) }),
  };
}

function outcomeChart(runs: SweepRun[]): ChartSpec {
  return {
    id: 'sweep-runs',
    title: 'Total reward per run',
    note: 'Every run of the sweep in index order (the directory names without sweep.json), completed or not.',
    xLabel: 'run',
    yLabel: 'total reward',
    x: runs.map((_, i) => i),
    series: [{ label: 'total reward', values: runs.map((r) => r.totalReward), style: 'points' }],
    xCategories: runs.map((r) => r.runId),
  };
}

/** Read a sweep directory for a report (see the file comment). */
export function readSweep(sweepDir: string, attestation: AttestationSource | null): SweepData {
  const { index, entries, planned } = sweepEntries(sweepDir);
  const runs = entries.map((e) => readSweepRun(sweepDir, e, attestation));
  const paths = [...new Set(entries.flatMap((e) => Object.keys(e.overrides)))].sort();
  const charts = paths.flatMap((p, i) => paramChart(p, runs, i) ?? []);
  return { sweepDir, index, runs, planned, paths, charts: [...charts, outcomeChart(runs)] };
}

/** A directory's name for the page title. */
export const nameOf = (dir: string): string => basename(resolve(dir));
