// `detsim sweep status|summary <dir>` tables, from sweep.json and each run directory's files (no
// run is started or changed): status — one row per run (run, grid point, replicate, master seed,
// status, steps done/planned, reward total, ReproHash); summary — one row per grid point (runs done
// of its replicates, reward total min/mean/max over the done ones, and whether the done replicates'
// ReproHashes are distinct, as distinct seeds should give). Rendered as aligned text, JSON or CSV.
// NOT the report's charts (coordinator/report/) and not run state itself (run-state.ts).
import { join } from 'node:path';
import { canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import { isDetsimError } from '../../core/formats/errors.js';
import { runLockHeld } from '../session/run-lock.js';
import type { SweepIndex } from './sweep-dir.js';
import { runStateOf, type IndexedRun } from './run-state.js';

export interface StatusRow {
  run: string;
  overrides: Record<string, JsonValue>;
  replicate: number;
  masterSeed: string;
  /** done, running, stopped (resumable or to restart), failed, pending, damaged. */
  status: string;
  stepsDone: number | null;
  steps: number;
  rewardTotal: number | null;
  reproHash: string | null;
  /** For stopped runs: the checkpoint a continue resumes from; for damaged: why. */
  note: string | null;
}

export interface SummaryRow {
  overrides: Record<string, JsonValue>;
  replicates: number;
  done: number;
  rewardMin: number | null;
  rewardMean: number | null;
  rewardMax: number | null;
  distinctReproHashes: number;
}

const numberOr = (v: JsonValue | undefined): number | null => (typeof v === 'number' ? v : null);

function rowOf(sweepDir: string, r: IndexedRun): StatusRow {
  const runDir = join(sweepDir, r.dir);
  const base = { run: r.dir, overrides: r.overrides, replicate: r.replicate, masterSeed: r.masterSeed, steps: r.steps };
  let state;
  try {
    state = runStateOf(runDir, r);
  } catch (e) {
    if (!isDetsimError(e)) throw e;
    return {
      ...base,
      status: 'damaged',
      stepsDone: null,
      rewardTotal: null,
      reproHash: null,
      note: `[${e.reason}] ${e.message}`,
    };
  }
  if (state.kind === 'pending')
    return { ...base, status: 'pending', stepsDone: 0, rewardTotal: null, reproHash: null, note: null };
  const s = state.summary ?? {};
  const rewards = s.rewards as Record<string, JsonValue> | undefined;
  const done = {
    stepsDone: numberOr(s.stepsDone),
    rewardTotal: numberOr(rewards?.total),
  };
  if (state.kind === 'done') return { ...base, ...done, status: 'done', reproHash: state.reproHash, note: null };
  const status = runLockHeld(runDir) ? 'running' : s.status === 'failed' ? 'failed' : 'stopped';
  const note = state.kind === 'resumable' ? `resumes from ${state.checkpointId} (step ${state.boundary})` : state.why;
  return { ...base, ...done, status, reproHash: null, note };
}

/** One row per run, in the sweep's order. */
export function statusRows(sweepDir: string, index: SweepIndex): StatusRow[] {
  return index.runs.map((r) => rowOf(sweepDir, r));
}

/** One row per grid point, in the sweep's order. */
export function summaryRows(rows: readonly StatusRow[]): SummaryRow[] {
  const groups = new Map<string, StatusRow[]>();
  for (const r of rows) {
    const key = canonicalize(r.overrides);
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return [...groups.values()].map((g) => {
    const done = g.filter((r) => r.status === 'done');
    const rewards = done.map((r) => r.rewardTotal).filter((x): x is number => x !== null);
    const mean = rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null;
    return {
      overrides: g[0]!.overrides,
      replicates: g.length,
      done: done.length,
      rewardMin: rewards.length ? Math.min(...rewards) : null,
      rewardMean: mean,
      rewardMax: rewards.length ? Math.max(...rewards) : null,
      distinctReproHashes: new Set(done.map((r) => r.reproHash)).size,
    };
  });
}

type Cell = string | number | null;

/** Rows of cells as CSV (RFC 4180 quoting; null as empty). */
export function csvOf(header: readonly string[], rows: readonly Cell[][]): string {
  const cell = (c: Cell) => {
    const t = c === null ? '' : String(c);
    return /[",\n\r]/.test(t) ? `"${t.replaceAll('"', '""')}"` : t;
  };
  return [header, ...rows].map((r) => r.map(cell).join(',')).join('\n') + '\n';
}

/** Rows of cells as an aligned text table (null as -). */
export function tableOf(header: readonly string[], rows: readonly Cell[][]): string {
  const text = [header, ...rows].map((r) => r.map((c) => (c === null ? '-' : String(c))));
  const widths = header.map((_, i) => Math.max(...text.map((r) => r[i]!.length)));
  return text.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}

/** The grid's paths, in the order the runs' overrides list them: one column each. */
export const gridPaths = (rows: readonly { overrides: Record<string, JsonValue> }[]): string[] => [
  ...new Set(rows.flatMap((r) => Object.keys(r.overrides))),
];

const valueCell = (v: JsonValue | undefined): Cell =>
  v === undefined ? null : typeof v === 'string' || typeof v === 'number' ? v : JSON.stringify(v);
const round = (x: number | null) => (x === null ? null : Math.round(x * 1e6) / 1e6);

const STATUS_COLUMNS = ['replicate', 'masterSeed', 'status', 'stepsDone', 'steps', 'rewardTotal', 'reproHash'];

/** A grid path's column name: the path, or `set.<path>` where a column of the table has its name (`steps`). */
const gridColumn =
  (taken: readonly string[]) =>
  (path: string): string =>
    taken.includes(path) ? `set.${path}` : path;

/** The status table: header and cells, one column per grid path. */
export function statusTable(rows: readonly StatusRow[]): { header: string[]; cells: Cell[][] } {
  const paths = gridPaths(rows);
  return {
    header: ['run', ...paths.map(gridColumn(['run', ...STATUS_COLUMNS])), ...STATUS_COLUMNS],
    cells: rows.map((r) => [
      r.run,
      ...paths.map((p) => valueCell(r.overrides[p])),
      r.replicate,
      r.masterSeed,
      r.status,
      r.stepsDone,
      r.steps,
      round(r.rewardTotal),
      r.reproHash,
    ]),
  };
}

const SUMMARY_COLUMNS = ['done', 'rewardMin', 'rewardMean', 'rewardMax', 'distinctReproHashes'];

/** The summary table: header and cells, one column per grid path. */
export function summaryTable(rows: readonly SummaryRow[]): { header: string[]; cells: Cell[][] } {
  const paths = gridPaths(rows);
  return {
    header: [...paths.map(gridColumn(SUMMARY_COLUMNS)), ...SUMMARY_COLUMNS],
    cells: rows.map((r) => [
      ...paths.map((p) => valueCell(r.overrides[p])),
      `${r.done}/${r.replicates}`,
      round(r.rewardMin),
      round(r.rewardMean),
      round(r.rewardMax),
      r.distinctReproHashes,
    ]),
  };
}
