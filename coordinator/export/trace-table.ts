// The table view of a run's trace (docs/guide.md "Exporting a trace as a table"): one row per step
// and agent — run, step, epoch, agent, reward (the agent's reward total at the step), its
// decision flattened into `action.<field>` columns and, for a run with the observations sidecar
// (--trace-observations), the scalars of the observation it received flattened into
// `obs.<dotted.path>` columns (nested objects are walked, keys joined by '.'; lists, and
// everything inside them, are skipped), and the run's `--set` overrides as `set.<path>` columns
// (a sweep's grid values and replicate seed) — with the column set and each column's type
// decided over the whole export by a survey of every step first, so rows can be streamed after it.
// Types: a column whose values are all integers in ±(2^53−1) is int64, all numbers float64, all
// booleans bool, all strings string; arrays, objects and a column of mixed kinds are canonical JSON
// text (string). Missing and JSON null are null. NOT the reading of the trace (trace/trace-store.ts)
// nor the file formats (table-writers.ts). workers/python/detsim_worker/trace.py mirrors these rules.
import { canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import type { TransitionTrace } from '../trace/trace.js';
import type { Observation } from '../trace/observations.js';

/** A step's observations by agent id (a run with the sidecar), checked against the trace. */
export type StepObservations = ReadonlyMap<string, Observation>;

/** A column's type, as written to Parquet (INT64, DOUBLE, BOOLEAN, UTF8 string) and documented for CSV. */
export type ColumnType = 'int64' | 'float64' | 'bool' | 'string';

/** One column of the table. */
export interface Column {
  readonly name: string;
  readonly type: ColumnType;
  /** Whether a value may be missing (the fixed columns never are). */
  readonly nullable: boolean;
}

/** One cell: ints and floats are JS numbers (ints within ±(2^53−1)); null is missing. */
export type Cell = string | number | boolean | null;

/** The columns every export starts with, in this order. */
export const FIXED_COLUMNS: readonly Column[] = [
  { name: 'run', type: 'string', nullable: false },
  { name: 'step', type: 'int64', nullable: false },
  { name: 'epoch', type: 'string', nullable: false },
  { name: 'agent', type: 'string', nullable: false },
  { name: 'reward', type: 'float64', nullable: false },
];

/** What one decision value is, for the column type. */
type Kind = 'int' | 'float' | 'bool' | 'string' | 'json';

function kindOf(v: JsonValue): Kind | null {
  if (v === null) return null;
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isSafeInteger(v) ? 'int' : 'float';
  return 'json';
}

/** The action columns of one decision: `action.<field>` per field of an object, else `action` itself. */
function actionFields(decision: JsonValue): [string, JsonValue][] {
  if (decision !== null && typeof decision === 'object' && !Array.isArray(decision))
    return Object.entries(decision).map(([k, v]) => [`action.${k}`, v]);
  return [['action', decision]];
}

/**
 * The observation columns of one observation: `obs.<path>` for each scalar (number, string, boolean,
 * null) reached through nested objects, the keys joined by '.'; lists are skipped whole.
 */
export function observationFields(
  o: Observation,
  prefix = 'obs',
  out: [string, JsonValue][] = [],
): [string, JsonValue][] {
  for (const [k, v] of Object.entries(o)) {
    const name = `${prefix}.${k}`;
    if (v === null || typeof v !== 'object') out.push([name, v]);
    else if (!Array.isArray(v)) observationFields(v, name, out);
  }
  return out;
}

/** A run's own columns, the same on each of its rows: `set.<path>` per override its run.json records. */
export type RunFields = readonly [string, JsonValue][];

/**
 * The `set.<path>` columns of a run from its run.json `overrides` ([{path, value}]: `detsim run --set`
 * and `--master-seed`, a sweep's grid point and replicate seed); none when it has no overrides.
 */
export function overrideFields(overrides: unknown): RunFields {
  if (!Array.isArray(overrides)) return [];
  return overrides.flatMap((o: unknown) => {
    const { path, value } = (o ?? {}) as { path?: unknown; value?: JsonValue };
    return typeof path === 'string' && value !== undefined ? [[`set.${path}`, value] as [string, JsonValue]] : [];
  });
}

/** Every field column of an agent's row: its action's, its observation's (when the step has them), its run's. */
function rowFields(
  decision: JsonValue,
  observation: Observation | undefined,
  run: RunFields = [],
): [string, JsonValue][] {
  const fields = actionFields(decision);
  if (observation !== undefined) observationFields(observation, 'obs', fields);
  fields.push(...run);
  return fields;
}

/** Code-point order (the UTF-8 bytes' order), the same in Python's sorted(). */
function byCodePoint(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** A column's type from the kinds of its values, and whether its text is canonical JSON. */
function typeOfKinds(kinds: ReadonlySet<Kind>): { type: ColumnType; json: boolean } {
  const only = (...allowed: Kind[]) => kinds.size > 0 && [...kinds].every((k) => allowed.includes(k));
  if (only('int')) return { type: 'int64', json: false };
  if (only('int', 'float')) return { type: 'float64', json: false };
  if (only('bool')) return { type: 'bool', json: false };
  if (kinds.size === 0 || only('string')) return { type: 'string', json: false };
  return { type: 'string', json: true };
}

/** The columns and how each action column's values are written: the result of a survey. */
export interface TableLayout {
  readonly columns: readonly Column[];
  /** Action and observation column name → its index in `columns` and whether its values are canonical JSON text. */
  readonly fields: ReadonlyMap<string, { index: number; json: boolean }>;
}

/** Pass one: every step of every run seen once, the action and observation columns and the kinds of their values gathered. */
export class ColumnSurvey {
  private readonly kinds = new Map<string, Set<Kind>>();

  add(t: TransitionTrace, observations?: StepObservations, run?: RunFields): void {
    for (const a of t.behaviour.agents)
      for (const [name, v] of rowFields(a.decision, observations?.get(a.agentId), run)) {
        let set = this.kinds.get(name);
        if (!set) this.kinds.set(name, (set = new Set()));
        const k = kindOf(v);
        if (k !== null) set.add(k);
      }
  }

  layout(): TableLayout {
    const names = [...this.kinds.keys()].sort(byCodePoint);
    const fields = new Map<string, { index: number; json: boolean }>();
    const columns: Column[] = [...FIXED_COLUMNS];
    // In code-point order the action columns ('action', 'action.…') come first, then 'obs.…', then 'set.…'.
    for (const name of names) {
      const { type, json } = typeOfKinds(this.kinds.get(name)!);
      fields.set(name, { index: columns.length, json });
      columns.push({ name, type, nullable: true });
    }
    return { columns, fields };
  }
}

/** The reward total of each agent at a step (summed in the trace's order: by event, then rule). */
function rewardTotals(t: TransitionTrace): Map<string, number> {
  const totals = new Map<string, number>();
  for (const r of t.behaviour.rewards) totals.set(r.agentId, (totals.get(r.agentId) ?? 0) + r.value);
  return totals;
}

/**
 * Pass two: the rows of one step, one per agent in the trace's order (sorted by agent id). A value
 * the survey did not see (the trace changed between the passes) is refused by the caller's reader
 * first: each segment is checked against its digest on every read.
 */
export function rowsOfStep(
  run: string,
  t: TransitionTrace,
  layout: TableLayout,
  observations?: StepObservations,
  runFields?: RunFields,
): Cell[][] {
  const b = t.behaviour;
  const step = Number(b.scope.step);
  const totals = rewardTotals(t);
  return b.agents.map((a) => {
    const row: Cell[] = new Array<Cell>(layout.columns.length).fill(null);
    row[0] = run;
    row[1] = step;
    row[2] = b.scope.epoch;
    row[3] = a.agentId;
    row[4] = totals.get(a.agentId) ?? 0;
    for (const [name, v] of rowFields(a.decision, observations?.get(a.agentId), runFields)) {
      const col = layout.fields.get(name);
      if (col === undefined) throw new Error(`trace export: column ${name} was not surveyed`);
      row[col.index] = v === null ? null : col.json ? canonicalize(v) : (v as Cell);
    }
    return row;
  });
}
