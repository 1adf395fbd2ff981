// `detsim bisect <run-a> <run-b>`: where do two runs of one config first diverge? The traces name
// the first diverging step, agent, field and both values (bisect-compare.ts). A worker's hidden
// state can diverge before anything it decides does, so the two runs' committed checkpoints are
// compared boundary by boundary (bisect-states.ts): a state that differs at a boundary no later
// than the trace's first divergence means the trace cannot say where it began. Then both runs'
// steps between the last boundary where every state agrees and the first where one differs are
// run again with a checkpoint after every step (bisect-rerun.ts), which names the exact step and
// participant, and the first differing field with both values. A re-run counts only if it gives
// back each run's own state at the window's end. NOT the CLI's lines (cli/bisect-command.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JsonValue } from '../../core/formats/canonical-json.js';
import { isDetsimError } from '../../core/formats/errors.js';
import { isRunFailure } from '../session/run-failure.js';
import { readSide, traceDivergence, type BisectSide, type CodeVersion } from './bisect-compare.js';
import { copyDirOf, rerunWindow } from './bisect-rerun.js';
import { compareStates, RunStates, type StateCodec, type StateDifference } from './bisect-states.js';
import type { Divergence } from './diagnosis.js';

/** When to re-run a window: only when the traces cannot say (auto), also to confirm them (always), or never. */
export const RERUN_MODES = ['auto', 'always', 'never'] as const;
export type RerunMode = (typeof RERUN_MODES)[number];

export interface BisectOptions {
  /** The capture payloads' codec (workers/state-codec.ts), handed in by the CLI. */
  readonly codec: StateCodec;
  readonly rerun?: RerunMode;
  /** Parent of the scratch directory the re-runs use (default: the OS temp directory); removed afterwards. */
  readonly scratchParent?: string;
  /** Progress, one line each (what is being re-run). */
  readonly onEvent?: (line: string) => void;
}

/** One run as bisect saw it. */
export interface BisectRunFacts {
  readonly runDir: string;
  readonly reproHash: string;
  readonly steps: number;
  /** Boundaries of its committed checkpoints. */
  readonly checkpoints: number[];
}

/** The checkpoints both runs committed, compared in order up to the first whose states differ. */
export interface StateScan {
  readonly common: number[];
  /** The last common boundary before `firstDiffering` (or of all, when none differs). */
  readonly lastEqual: number | null;
  readonly firstDiffering: number | null;
  /** The participants whose state differs at `firstDiffering`. */
  readonly differences: StateDifference[];
}

/** A window of steps re-run in both runs with a checkpoint after every step. */
export interface RerunReport {
  /** found: a step named; equal: no state differs in the window; not-reproduced / failed: no step claimed. */
  readonly outcome: 'found' | 'equal' | 'not-reproduced' | 'failed';
  /** The boundary the window starts at (0: a fresh run from step 0) and the checkpoints restored there. */
  readonly from: number;
  readonly checkpoints: [string | null, string | null];
  readonly to: number;
  /** The first boundary in the window whose states differ, and who differs there. */
  readonly boundary: number | null;
  readonly differences: StateDifference[];
  /** Per run: the re-run gave the run's own state at `to` (null: the run has no checkpoint there). */
  readonly reproduced: [boolean | null, boolean | null];
  readonly message: string | null;
}

/** The answer: where the runs first diverge, as exactly as the evidence allows. */
export interface FirstDivergence {
  /** step-state: a re-run named the step; checkpoint-state: a window of boundaries; trace: the trace. */
  readonly source: 'step-state' | 'checkpoint-state' | 'trace';
  /** The step (a trace step k takes boundary k to k + 1), when known exactly. */
  readonly step: string | null;
  /** For checkpoint-state: the boundaries (last equal, or 0; first differing) the divergence lies between. */
  readonly window: [number, number] | null;
  readonly participantId: string | null;
  readonly kind: 'agent' | 'environment' | null;
  readonly path: string;
  readonly left: JsonValue;
  readonly right: JsonValue;
}

export interface BisectReport {
  /** No divergence anywhere: the traces agree and so does every common checkpoint's state. */
  readonly same: boolean;
  readonly left: BisectRunFacts;
  readonly right: BisectRunFacts;
  readonly codeVersions: CodeVersion[];
  readonly trace: Divergence | null;
  readonly states: StateScan;
  /** A state differs at a common boundary no later than the trace's first divergence (or the traces agree). */
  readonly hidden: boolean;
  readonly rerun: RerunReport | null;
  readonly first: FirstDivergence | null;
}

/** Bisect two run directories. Refuses (DetsimError) two runs of different configs or a damaged run. */
export async function bisectRuns(a: string, b: string, opts: BisectOptions): Promise<BisectReport> {
  const left = readSide(a);
  const right = readSide(b);
  const { versions, divergence } = traceDivergence(left, right);
  const [sa, sb] = [await RunStates.open(a), await RunStates.open(b)];
  const states = await scanStates(sa, sb, opts.codec);
  const t = traceStep(divergence);
  const hidden = states.firstDiffering !== null && (t === null || states.firstDiffering <= t);
  const end = windowEnd(opts.rerun ?? 'auto', hidden, states, t);
  const rerun = end === null ? null : await rerunBoth([sa, sb], states, end, opts);
  const first = firstDivergence(divergence, states, hidden, rerun);
  return {
    same: first === null,
    left: facts(left, sa),
    right: facts(right, sb),
    codeVersions: versions,
    trace: divergence,
    states,
    hidden,
    rerun,
    first,
  };
}

function facts(side: BisectSide, states: RunStates): BisectRunFacts {
  return { runDir: side.runDir, reproHash: side.reproHash, steps: side.steps, checkpoints: states.boundaries() };
}

/** The trace's first diverging step as a number (null: the traces agree step for step). */
function traceStep(d: Divergence | null): number | null {
  return d && (d.part === 'step' || d.part === 'steps-count') && d.step !== null ? Number(d.step) : null;
}

/** Compare the common boundaries in order; stop at the first whose states differ. */
async function scanStates(a: RunStates, b: RunStates, codec: StateCodec): Promise<StateScan> {
  const inB = new Set(b.boundaries());
  const common = a.boundaries().filter((x) => inB.has(x));
  let lastEqual: number | null = null;
  for (const boundary of common) {
    const differences = compareStates(await a.at(boundary, codec), await b.at(boundary, codec));
    if (differences.length > 0) return { common, lastEqual, firstDiffering: boundary, differences };
    lastEqual = boundary;
  }
  return { common, lastEqual, firstDiffering: null, differences: [] };
}

/** The boundary a re-run goes to, or null for none. */
function windowEnd(mode: RerunMode, hidden: boolean, states: StateScan, t: number | null): number | null {
  if (mode === 'never') return null;
  if (mode === 'auto') return hidden ? states.firstDiffering : null;
  const ends = [states.firstDiffering, t === null ? null : t + 1].filter((x): x is number => x !== null);
  return ends.length === 0 ? null : Math.min(...ends);
}

/** Re-run both runs from the last common boundary before `end` where all states agree (or step 0). */
async function rerunBoth(
  runs: [RunStates, RunStates],
  states: StateScan,
  end: number,
  opts: BisectOptions,
): Promise<RerunReport> {
  const from =
    states.common.filter((x) => x < end && (states.firstDiffering === null || x < states.firstDiffering)).pop() ?? 0;
  const records = runs.map((r) => (from === 0 ? null : r.record(from)));
  const base = {
    from,
    checkpoints: [records[0]?.checkpointId ?? null, records[1]?.checkpointId ?? null] as [string | null, string | null],
    to: end,
  };
  const scratch = mkdtempSync(join(opts.scratchParent ?? tmpdir(), 'detsim-bisect-'));
  try {
    const dirs: string[] = [];
    for (const [i, r] of runs.entries()) {
      const what = records[i] ? `from ${records[i]!.checkpointId}` : 'afresh from step 0';
      opts.onEvent?.(`re-running ${r.runDir} ${what} to boundary ${end}, a checkpoint after every step`);
      const work = join(scratch, `run-${i}`);
      try {
        dirs.push(await rerunWindow({ runDir: r.runDir, record: records[i] ?? null }, end, work));
      } catch (e) {
        if (!isDetsimError(e) && !isRunFailure(e)) throw e;
        const reason = isDetsimError(e) ? `[${e.reason}] ` : '';
        // The scratch copy is gone when this is read: name the run directory it was copied from.
        const message = e.message.replaceAll(copyDirOf(work), r.runDir);
        return failed(base, `the re-run of ${r.runDir} failed: ${reason}${message}`);
      }
    }
    return await compareWindow(
      runs,
      [await RunStates.open(dirs[0]!), await RunStates.open(dirs[1]!)],
      base,
      opts.codec,
    );
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

type WindowBase = Pick<RerunReport, 'from' | 'checkpoints' | 'to'>;

function failed(base: WindowBase, message: string): RerunReport {
  return { ...base, outcome: 'failed', boundary: null, differences: [], reproduced: [null, null], message };
}

/** Step through the re-runs' checkpoints; then check each re-run against its run's own state at the end. */
async function compareWindow(
  runs: [RunStates, RunStates],
  reruns: [RunStates, RunStates],
  base: WindowBase,
  codec: StateCodec,
): Promise<RerunReport> {
  let found: { boundary: number; differences: StateDifference[] } | null = null;
  for (let k = base.from + 1; k <= base.to && !found; k++) {
    for (const r of reruns)
      if (r.record(k) === null)
        return failed(base, `the re-run of ${r.runDir} committed no checkpoint at boundary ${k}`);
    const differences = compareStates(await reruns[0].at(k, codec), await reruns[1].at(k, codec));
    if (differences.length > 0) found = { boundary: k, differences };
  }
  const reproduced: [boolean | null, boolean | null] = [null, null];
  for (const i of [0, 1] as const) {
    if (runs[i].record(base.to) === null) continue;
    const own = compareStates(await runs[i].at(base.to, codec), await reruns[i].at(base.to, codec));
    reproduced[i] = own.length === 0;
  }
  if (reproduced.includes(false)) {
    const which = runs.filter((_, i) => reproduced[i] === false).map((r) => r.runDir);
    const message = `the re-run did not give back the state of ${which.join(' and ')} at boundary ${base.to}: the run does not reproduce here, so no step is named`;
    return { ...base, outcome: 'not-reproduced', boundary: null, differences: [], reproduced, message };
  }
  if (!found) return { ...base, outcome: 'equal', boundary: null, differences: [], reproduced, message: null };
  return { ...base, outcome: 'found', ...found, reproduced, message: null };
}

function fromDifference(
  d: StateDifference,
): Pick<FirstDivergence, 'participantId' | 'kind' | 'path' | 'left' | 'right'> {
  return {
    participantId: d.participantId,
    kind: d.kind,
    path: d.field?.path ?? '',
    left: d.field?.left ?? d.leftDigest,
    right: d.field?.right ?? d.rightDigest,
  };
}

function firstDivergence(
  trace: Divergence | null,
  states: StateScan,
  hidden: boolean,
  rerun: RerunReport | null,
): FirstDivergence | null {
  if (
    rerun?.outcome === 'found' &&
    rerun.boundary !== null &&
    (hidden || trace === null || rerun.boundary <= traceStepOr(trace))
  )
    return {
      source: 'step-state',
      step: String(rerun.boundary - 1),
      window: null,
      ...fromDifference(rerun.differences[0]!),
    };
  if (hidden && states.firstDiffering !== null)
    return {
      source: 'checkpoint-state',
      step: null,
      window: [states.lastEqual ?? 0, states.firstDiffering],
      ...fromDifference(states.differences[0]!),
    };
  if (!trace) return null;
  return {
    source: 'trace',
    step: trace.step,
    window: null,
    participantId: trace.agentId,
    kind: trace.agentId ? 'agent' : null,
    path: trace.path,
    left: trace.left,
    right: trace.right,
  };
}

function traceStepOr(trace: Divergence): number {
  return traceStep(trace) ?? Number.MAX_SAFE_INTEGER;
}
