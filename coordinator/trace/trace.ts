// TransitionTrace (docs/spec/lockstep.md): one record per lockstep step, split into behaviour (must be
// identical across runs; hashed) and operational (wall time, request ids, pids; recorded, never
// hashed). Also the behaviour digest and the EpochRebase comparison. NOT the step loop itself.
import { createHash, type Hash } from 'node:crypto';
import { canonicalDigest, canonicalize, parseStrict, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { Sha256Stream, type Sha256State } from './sha256-state.js';
import type { Digest, Id, RationalNsJson, Scope, U64 } from '../../core/formats/scalars.js';

/** One agent's part of a step's behaviour: ticks, remainder, decision digest, committed step. */
export interface TraceAgent {
  agentId: Id;
  profileDigest: Digest;
  ticksAdvanced: U64;
  brainTicks: U64;
  remainder: RationalNsJson;
  decision: JsonValue;
  decisionDigest: Digest;
  committedStep: U64;
}

/** One reward of a step, with its event and rule. */
export interface TraceReward {
  agentId: Id;
  eventId: Id;
  ruleId: Id;
  value: number;
}

/** The part of a step trace that must be identical across runs (docs/spec/lockstep.md "The trace"). */
export interface TraceBehaviour {
  scope: Scope;
  /** Sorted by agentId. */
  agents: TraceAgent[];
  batchId: Id;
  /** Canonical digest of the action batch sent to Environment.Advance (port order). */
  controlDigest: Digest;
  acknowledgedBoundary: U64;
  /** Canonical digest of the observations the environment returned (sorted by agentId). */
  observationDigest: Digest;
  worldDigest: Digest;
  /** Sorted by (agentId, eventId, ruleId). */
  rewards: TraceReward[];
  /** In the environment's (task) order. */
  eventIds: Id[];
  publishedBoundary: U64;
}

/** The part of a step trace that is recorded but never compared (wall time, request ids). */
export interface TraceOperational {
  /** Nanoseconds since the run started (monotonic clock), U64. */
  wallTimeNs: U64;
  prepareRequestIds: { agentId: Id; requestId: string }[];
  commitRequestIds: { agentId: Id; requestId: string }[];
  advanceRequestId: string;
  /** Worker ids in the order their replies arrived, per phase. */
  completionOrder: { prepare: Id[]; commit: Id[] };
  pids: { workerId: Id; pid: number }[];
}

/** One line of trace.jsonl: a step's behaviour and operational records. */
export interface TransitionTrace {
  behaviour: TraceBehaviour;
  operational: TraceOperational;
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

const byAgent = (x: TraceAgent, y: TraceAgent) => byString(x.agentId, y.agentId);
const byReward = (x: TraceReward, y: TraceReward) =>
  byString(x.agentId, y.agentId) || byString(x.eventId, y.eventId) || byString(x.ruleId, y.ruleId);

function isSorted<T>(list: readonly T[], order: (x: T, y: T) => number): boolean {
  for (let i = 1; i < list.length; i++) if (order(list[i - 1]!, list[i]!) > 0) return false;
  return true;
}

/**
 * The comparison form: agents sorted by id, rewards by (agentId, eventId, ruleId). A behaviour
 * already in that form (every step the lockstep builds) is returned as it is, not copied.
 */
export function normalizeBehaviour(b: TraceBehaviour): TraceBehaviour {
  if (isSorted(b.agents, byAgent) && isSorted(b.rewards, byReward)) return b;
  return { ...b, agents: [...b.agents].sort(byAgent), rewards: [...b.rewards].sort(byReward) };
}

/** The canonical JSON line of one step's behaviour (what the behaviour digest hashes). */
export function canonicalBehaviour(b: TraceBehaviour): string {
  return canonicalize(normalizeBehaviour(b));
}

/** Canonical digest of one step's normalized behaviour. */
export function behaviourStepDigest(b: TraceBehaviour): Digest {
  return canonicalDigest(normalizeBehaviour(b));
}

/**
 * The run's behaviour digest: SHA-256 over the canonical behaviour of every step, in step order,
 * each followed by "\n" (so it can be computed while stepping, and equals hashing the behaviour
 * lines of trace.jsonl re-canonicalized).
 */
export class BehaviourDigest {
  private readonly hash: Hash | undefined;
  /** A digest continued from a saved state (a resume that did not re-read the trace before it). */
  private readonly continued: Sha256Stream | undefined;
  private count: number;

  constructor(from?: { state: Sha256State; steps: number }) {
    this.continued = from ? Sha256Stream.from(from.state) : undefined;
    this.hash = from ? undefined : createHash('sha256');
    this.count = from?.steps ?? 0;
  }

  add(b: TraceBehaviour): void {
    this.addCanonical(canonicalBehaviour(b));
  }

  /** Add one step given its canonicalBehaviour() text (saves canonicalizing twice). */
  addCanonical(text: string): void {
    if (this.continued) this.continued.update(`${text}\n`);
    else this.hash!.update(`${text}\n`, 'utf8');
    this.count++;
  }

  get steps(): number {
    return this.count;
  }

  digest(): Digest {
    return this.continued ? this.continued.digest() : this.hash!.copy().digest('hex');
  }
}

export function behaviourDigest(behaviours: readonly TraceBehaviour[]): Digest {
  const d = new BehaviourDigest();
  for (const b of behaviours) d.add(b);
  return d.digest();
}

export function batchIdFor(epoch: Id, step: U64 | number | bigint): Id {
  return `batch-${epoch}-${step}`;
}

// ---------------------------------------------------------------------------------------------
// EpochRebase: a resumed run runs in a new epoch; its behaviour equals the uninterrupted run's
// after rewriting exactly the epoch-derived fields. Anything else that differs is a failure.

/** An event id is epoch-derived when the epoch appears in it as a whole dash-separated token. */
function epochTokenPattern(epoch: Id): RegExp {
  const esc = epoch.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|-)${esc}(?=-|$)`, 'g');
}

export class EpochRebase {
  constructor(
    readonly from: Id,
    readonly to: Id,
  ) {}

  /**
   * Rewrite one step's behaviour from epoch `from` to `to`: scope.epoch, batchId, and event ids
   * (and the rewards' event ids) that carry the epoch as a token. Refuses a trace whose
   * epoch-derived fields do not have the derived form (so a rebase never hides a real change).
   */
  apply(b: TraceBehaviour): TraceBehaviour {
    const at = `step ${b.scope.step}`;
    if (b.scope.epoch !== this.from) {
      throw new DetsimError(
        'audit_trace_mismatch',
        `${at}: scope.epoch is ${JSON.stringify(b.scope.epoch)}, the rebase expects ${JSON.stringify(this.from)}`,
        'scope.epoch',
      );
    }
    const expectedBatch = batchIdFor(this.from, b.scope.step);
    if (b.batchId !== expectedBatch) {
      throw new DetsimError(
        'audit_trace_mismatch',
        `${at}: batchId ${JSON.stringify(b.batchId)} is not the epoch-derived ${JSON.stringify(expectedBatch)}`,
        'batchId',
      );
    }
    const re = epochTokenPattern(this.from);
    const rewriteEvent = (id: Id) => id.replace(re, (_m, lead: string) => `${lead}${this.to}`);
    return {
      ...b,
      scope: { ...b.scope, epoch: this.to },
      batchId: batchIdFor(this.to, b.scope.step),
      eventIds: b.eventIds.map(rewriteEvent),
      rewards: b.rewards.map((r) => ({ ...r, eventId: rewriteEvent(r.eventId) })),
    };
  }
}

export interface TraceDifference {
  /** Index into the compared lists. */
  index: number;
  step: U64 | null;
  /** JSON path of the first differing field, e.g. `agents[3].decision.move`. */
  path: string;
  expected: unknown;
  actual: unknown;
}

function firstDifference(
  a: unknown,
  b: unknown,
  path: string,
): { path: string; expected: unknown; actual: unknown } | null {
  if (a === b) return null;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i >= a.length || i >= b.length) return { path: `${path}.length`, expected: a.length, actual: b.length };
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return null;
  }
  if (
    typeof a === 'object' &&
    typeof b === 'object' &&
    a !== null &&
    b !== null &&
    !Array.isArray(a) &&
    !Array.isArray(b)
  ) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort(byString);
    for (const k of keys) {
      const d = firstDifference(
        (a as Record<string, unknown>)[k],
        (b as Record<string, unknown>)[k],
        path ? `${path}.${k}` : k,
      );
      if (d) return d;
    }
    return null;
  }
  return { path: path || '(root)', expected: a, actual: b };
}

/**
 * Compare two behaviour sequences step by step. When a step's epochs differ, the actual step is
 * rebased onto the expected step's epoch first (EpochRebase); a rebase refusal is a difference.
 * Returns the first difference, or null when equal.
 */
export function compareBehaviours(
  expected: readonly TraceBehaviour[],
  actual: readonly TraceBehaviour[],
): TraceDifference | null {
  const n = Math.max(expected.length, actual.length);
  for (let i = 0; i < n; i++) {
    const e = expected[i];
    const a = actual[i];
    if (e === undefined || a === undefined) {
      return {
        index: i,
        step: (e ?? a)!.scope.step,
        path: '(steps)',
        expected: expected.length,
        actual: actual.length,
      };
    }
    let rebased = a;
    if (a.scope.epoch !== e.scope.epoch) {
      try {
        rebased = new EpochRebase(a.scope.epoch, e.scope.epoch).apply(a);
      } catch (err) {
        if (!(err instanceof DetsimError)) throw err;
        return { index: i, step: a.scope.step, path: err.field ?? '(rebase)', expected: null, actual: err.message };
      }
    }
    const d = firstDifference(normalizeBehaviour(e), normalizeBehaviour(rebased), '');
    if (d) return { index: i, step: e.scope.step, ...d };
  }
  return null;
}

export function describeDifference(d: TraceDifference): string {
  return `step ${d.step ?? '?'}: ${d.path}: expected ${JSON.stringify(d.expected)}, got ${JSON.stringify(d.actual)}`;
}

/**
 * The canonical trace.jsonl line of a step, built from its canonical behaviour text: RFC 8785 sorts
 * "behaviour" before "operational", so the line is exactly canonicalize({behaviour, operational})
 * with the behaviour normalized.
 */
export function traceLine(behaviourText: string, operational: TraceOperational): string {
  return `{"behaviour":${behaviourText},"operational":${canonicalize(operational)}}`;
}

/** Read trace.jsonl text into traces (strict JSON per line). */
export function parseTraceLines(text: string): TransitionTrace[] {
  return text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => parseStrict(l) as unknown as TransitionTrace);
}
