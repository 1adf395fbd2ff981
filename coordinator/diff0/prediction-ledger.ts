// What the prediction lines of a ledger mean (docs/spec/diff0.md "Predictions"): the detail of a
// `prediction`, `observation` and `evaluation` entry, the judging of a prediction against what the
// runs gave, and the checks over a ledger read from disk: every evidence entry refers, by seq and
// SHA-256, to a prediction that precedes it, and every evaluation agrees with its prediction and
// observations. Plus what binds the ledger to an attestation beyond its own chain: the entry digests
// and the head the attestation records, and its verdict_hash. Pure over entries and bytes; it does
// NOT check the hash chain itself (store/ledger.ts) nor write anything (prediction.ts).
import { canonicalize, parseStrict, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError, isDetsimError } from '../../core/formats/errors.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import { readDigest, readObject, readU64 } from '../../core/formats/scalars.js';
import type { LedgerEntry, LedgerProblem } from '../store/ledger.js';
import { verdictHashOf } from './attestation.js';

/** The values a replay is expected to give. */
export interface Expected {
  readonly reproHash: string;
  readonly behaviourDigest: string;
}

/** A ledger entry named by its position and the SHA-256 of its bytes (the next line's `prev`). */
export interface EntryRef {
  readonly seq: string;
  readonly digest: string;
}

/** Where the expected values come from: a golden file or a recorded receipt, bound by its SHA-256. */
export interface PredictionSource {
  readonly kind: 'golden' | 'receipt';
  /** The file's name (a golden's `<example>.json`, or `<run dir name>/receipt.json`): no absolute path. */
  readonly file: string;
  readonly sha256: string;
}

/** The detail of a `prediction` entry. */
export interface PredictionDetail {
  readonly subject: string;
  readonly command: 'verify' | 'replay';
  readonly steps: string;
  readonly runs: string;
  /** null: nothing to predict from (no golden); the entry records "no prediction" and `why`. */
  readonly expected: Expected | null;
  readonly source: PredictionSource | null;
  readonly falsifier: string;
  readonly why?: string;
}

/** The detail of an `observation` entry: one fresh run's values. */
export interface ObservationDetail {
  readonly subject: string;
  readonly prediction: EntryRef;
  readonly run: string;
  readonly dispatch: string;
  readonly reproHash: string;
  readonly behaviourDigest: string | null;
}

/** One value a run gave other than the predicted one. */
export interface Mismatch {
  readonly run: string;
  readonly field: 'reproHash' | 'behaviourDigest';
  readonly expected: string;
  readonly observed: string | null;
}

export type PredictionResult = 'confirmed' | 'refuted' | 'unpredicted';

/** The detail of an `evaluation` entry: the prediction judged against its observations. */
export interface EvaluationDetail {
  readonly subject: string;
  readonly prediction: EntryRef;
  readonly observations: readonly EntryRef[];
  readonly expected: Expected | null;
  readonly result: PredictionResult;
  readonly reason: ReasonCode;
  readonly mismatches: readonly Mismatch[];
}

/** The text of every prediction's falsifier: what outcome proves it wrong. */
export const FALSIFIER = 'any fresh run whose reproHash or behaviourDigest differs from expected';

/** The reason code of each result. */
export const RESULT_REASON: Record<PredictionResult, ReasonCode> = {
  confirmed: 'audit_prediction_confirmed',
  refuted: 'audit_prediction_refuted',
  unpredicted: 'meta_prediction_missing',
};

/** Judge observed runs against the expected values; the behaviour digest first, as the golden check does. */
export function judge(
  expected: Expected | null,
  observed: readonly Pick<ObservationDetail, 'run' | 'reproHash' | 'behaviourDigest'>[],
): { result: PredictionResult; mismatches: Mismatch[] } {
  if (expected === null) return { result: 'unpredicted', mismatches: [] };
  const mismatches: Mismatch[] = [];
  for (const o of observed)
    for (const field of ['behaviourDigest', 'reproHash'] as const)
      if (o[field] !== expected[field])
        mismatches.push({ run: o.run, field, expected: expected[field], observed: o[field] });
  return { result: mismatches.length === 0 ? 'confirmed' : 'refuted', mismatches };
}

// ---------------------------------------------------------------------------------------------
// Reading entry details (a malformed one is a struct_ledger_line problem naming the field)

const HASH16 = /^[0-9a-f]{16}$/;

function str(o: Record<string, unknown>, key: string, where: string): string {
  const v = o[key];
  if (typeof v !== 'string' || v.length === 0)
    throw new DetsimError('struct_invalid_field', `${where}.${key} is not a non-empty string`, key);
  return v;
}

function readRef(v: unknown, where: string): EntryRef {
  const o = readObject(v, where);
  return { seq: readU64(o.seq, `${where}.seq`), digest: readDigest(o.digest, `${where}.digest`) };
}

function readExpected(v: unknown, where: string): Expected | null {
  if (v === null) return null;
  const o = readObject(v, where);
  const reproHash = str(o, 'reproHash', where);
  if (!HASH16.test(reproHash))
    throw new DetsimError('struct_invalid_field', `${where}.reproHash is not 16 lowercase hex characters`, 'reproHash');
  return { reproHash, behaviourDigest: readDigest(o.behaviourDigest, `${where}.behaviourDigest`) };
}

function readPrediction(detail: unknown): PredictionDetail {
  const o = readObject(detail, 'detail');
  const command = str(o, 'command', 'detail');
  if (command !== 'verify' && command !== 'replay')
    throw new DetsimError(
      'struct_invalid_field',
      `detail.command ${JSON.stringify(command)} is not verify or replay`,
      'command',
    );
  return {
    subject: str(o, 'subject', 'detail'),
    command,
    steps: readU64(o.steps, 'detail.steps'),
    runs: readU64(o.runs, 'detail.runs'),
    expected: readExpected(o.expected, 'detail.expected'),
    source: o.source === null ? null : (readObject(o.source, 'detail.source') as unknown as PredictionSource),
    falsifier: str(o, 'falsifier', 'detail'),
  };
}

function readObservation(detail: unknown): ObservationDetail {
  const o = readObject(detail, 'detail');
  return {
    subject: str(o, 'subject', 'detail'),
    prediction: readRef(o.prediction, 'detail.prediction'),
    run: readU64(o.run, 'detail.run'),
    dispatch: str(o, 'dispatch', 'detail'),
    reproHash: str(o, 'reproHash', 'detail'),
    behaviourDigest: o.behaviourDigest === null ? null : str(o, 'behaviourDigest', 'detail'),
  };
}

function readEvaluation(detail: unknown): EvaluationDetail {
  const o = readObject(detail, 'detail');
  const observations = o.observations;
  if (!Array.isArray(observations))
    throw new DetsimError('struct_invalid_field', 'detail.observations is not a list', 'observations');
  const result = str(o, 'result', 'detail') as PredictionResult;
  if (!(result in RESULT_REASON))
    throw new DetsimError('struct_invalid_field', `detail.result ${JSON.stringify(result)} is not a result`, 'result');
  return {
    subject: str(o, 'subject', 'detail'),
    prediction: readRef(o.prediction, 'detail.prediction'),
    observations: observations.map((r, i) => readRef(r, `detail.observations[${i}]`)),
    expected: readExpected(o.expected, 'detail.expected'),
    result,
    reason: str(o, 'reason', 'detail') as ReasonCode,
    mismatches: (Array.isArray(o.mismatches) ? o.mismatches : []) as unknown as Mismatch[],
  };
}

/** A short name of a prediction-kind entry for messages, e.g. `observation lif-pair run 1`; '' for other events. */
export function describeEntry(bytes: Uint8Array | string): string {
  try {
    const o = parseStrict(bytes) as { event?: unknown; detail?: { subject?: unknown; run?: unknown } };
    if (o.event !== 'prediction' && o.event !== 'observation' && o.event !== 'evaluation') return '';
    const subject = typeof o.detail?.subject === 'string' ? ` ${o.detail.subject}` : '';
    const run = o.event === 'observation' && typeof o.detail?.run === 'string' ? ` run ${o.detail.run}` : '';
    return `${o.event}${subject}${run}`;
  } catch {
    return '';
  }
}

// ---------------------------------------------------------------------------------------------
// The order and consistency of the prediction entries of one ledger

/** What the prediction entries of a ledger hold, when they are in order. */
export interface PredictionSummary {
  readonly predictions: number;
  readonly confirmed: number;
  readonly refuted: number;
  readonly unpredicted: number;
  /** Predictions without an evaluation (a verify or replay that stopped before judging). */
  readonly open: number;
}

interface OpenEntry {
  readonly seq: number;
  readonly digest: string;
  readonly detail: PredictionDetail;
  readonly observations: { ref: EntryRef; detail: ObservationDetail }[];
  /** Set by its evaluation (checked to be what the observations give). */
  result: PredictionResult | null;
}

class Problem extends Error {
  constructor(
    readonly line: number,
    readonly reason: ReasonCode,
    message: string,
  ) {
    super(message);
  }
}

/** The prediction an observation or evaluation at `seq` refers to: it must precede it and be the very line named. */
function targetOf(
  entries: readonly LedgerEntry[],
  open: Map<number, OpenEntry>,
  seq: number,
  ref: EntryRef,
  subject: string,
): OpenEntry {
  const at = Number(ref.seq);
  if (at >= seq)
    throw new Problem(seq, 'audit_prediction_order', `its prediction is line ${at}, which does not precede it`);
  const target = open.get(at);
  if (target === undefined)
    throw new Problem(
      seq,
      'audit_prediction_order',
      `it refers to a prediction at line ${at}, which is ${at < 1 ? 'no line' : `a ${entries[at - 1]!.line.event} entry`}`,
    );
  if (target.digest !== ref.digest)
    throw new Problem(
      seq,
      'audit_prediction_order',
      `it refers to line ${at} by SHA-256 ${ref.digest.slice(0, 16)}…, line ${at}'s is ${target.digest.slice(0, 16)}…`,
    );
  if (target.detail.subject !== subject)
    throw new Problem(
      seq,
      'audit_prediction_order',
      `its subject ${subject} is not line ${at}'s prediction subject ${target.detail.subject}`,
    );
  if (target.result !== null)
    throw new Problem(seq, 'audit_prediction_order', `it follows the evaluation of its prediction (line ${at})`);
  return target;
}

/** An evaluation must repeat its prediction's expected values, list its observations and judge them as {@link judge} does. */
function checkEvaluation(seq: number, e: EvaluationDetail, target: OpenEntry): void {
  const inconsistent = (why: string) => new Problem(seq, 'audit_prediction_inconsistent', why);
  if (canonicalize(e.expected) !== canonicalize(target.detail.expected))
    throw inconsistent(`its expected values differ from those of its prediction (line ${target.seq})`);
  if (
    canonicalize(e.observations as unknown as JsonValue) !==
    canonicalize(target.observations.map((o) => o.ref) as unknown as JsonValue)
  )
    throw inconsistent(
      `it lists other observations than the ${target.observations.length} that refer to line ${target.seq}`,
    );
  if (target.detail.expected !== null && target.observations.length !== Number(target.detail.runs))
    throw inconsistent(`${target.observations.length} observation(s) for a prediction of ${target.detail.runs} runs`);
  const again = judge(
    target.detail.expected,
    target.observations.map((o) => o.detail),
  );
  if (
    e.result !== again.result ||
    e.reason !== RESULT_REASON[again.result] ||
    canonicalize(e.mismatches as unknown as JsonValue) !== canonicalize(again.mismatches as unknown as JsonValue)
  )
    throw inconsistent(`its result ${e.result} is not what its observations give (${again.result})`);
}

function readDetail<T>(seq: number, read: (d: unknown) => T, detail: unknown): T {
  try {
    return read(detail);
  } catch (e) {
    if (isDetsimError(e))
      throw new Problem(seq, 'struct_ledger_line', `not a well-formed entry: ${e.message} [${e.reason}]`);
    throw e;
  }
}

/** Walk the entries in order, keeping each prediction and the evidence that refers to it. */
function walk(entries: readonly LedgerEntry[]): Map<number, OpenEntry> {
  const open = new Map<number, OpenEntry>();
  entries.forEach(({ line, digest }, i) => {
    const seq = i + 1;
    if (line.event === 'prediction') {
      const detail = readDetail(seq, readPrediction, line.detail);
      open.set(seq, { seq, digest, detail, observations: [], result: null });
    } else if (line.event === 'observation') {
      const detail = readDetail(seq, readObservation, line.detail);
      targetOf(entries, open, seq, detail.prediction, detail.subject).observations.push({
        ref: { seq: String(seq), digest },
        detail,
      });
    } else if (line.event === 'evaluation') {
      const detail = readDetail(seq, readEvaluation, line.detail);
      const target = targetOf(entries, open, seq, detail.prediction, detail.subject);
      checkEvaluation(seq, detail, target);
      target.result = detail.result;
    }
  });
  return open;
}

/**
 * Check the prediction entries of a ledger whose chain holds: each evidence entry (observation,
 * evaluation) names, by seq and SHA-256, a prediction that precedes it and is not yet evaluated,
 * and each evaluation agrees with its prediction and observations. The first problem names its line.
 */
export function checkPredictionEntries(entries: readonly LedgerEntry[]): {
  problem?: LedgerProblem;
  summary: PredictionSummary;
} {
  const empty: PredictionSummary = { predictions: 0, confirmed: 0, refuted: 0, unpredicted: 0, open: 0 };
  let open: Map<number, OpenEntry>;
  try {
    open = walk(entries);
  } catch (e) {
    if (e instanceof Problem)
      return { problem: { line: e.line, reason: e.reason, message: e.message }, summary: empty };
    throw e;
  }
  const results = [...open.values()].map((p) => p.result);
  const count = (r: PredictionResult | null) => results.filter((x) => x === r).length;
  return {
    summary: {
      predictions: results.length,
      confirmed: count('confirmed'),
      refuted: count('refuted'),
      unpredicted: count('unpredicted'),
      open: count(null),
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The binding to an attestation: what a fully re-chained ledger cannot escape

/** What an attestation.jsonl records of its ledger, and whether its verdict_hash recomputes. */
export interface AttestationBinding {
  /** Ledger entries the attestation names (head included), all equal to the ledger's. */
  readonly entries: number;
  readonly head: EntryRef;
}

type Obj = Record<string, unknown>;

/** The entry refs an attestation's checks record: the ledger head, each prediction and its evidence. */
function recordedRefs(checks: readonly Obj[]): { head: EntryRef | null; refs: EntryRef[] } {
  let head: EntryRef | null = null;
  const refs: EntryRef[] = [];
  for (const c of checks) {
    const d = (c.detail ?? {}) as Obj;
    if (c.check === 'ledger' && typeof d.lines === 'string' && typeof d.lastHash === 'string')
      head = { seq: d.lines, digest: d.lastHash };
    if (c.check === 'prediction-order') {
      if (d.prediction) refs.push(readRef(d.prediction, 'prediction-order.detail.prediction'));
      if (Array.isArray(d.evidence))
        d.evidence.forEach((r, i) => refs.push(readRef(r, `prediction-order.detail.evidence[${i}]`)));
    }
  }
  return { head, refs };
}

/** The verdict_hash an attestation.jsonl's lines give (its check lines and its verdict line). */
export function recomputeVerdictHash(lines: readonly Obj[]): string {
  const checks = lines.filter((l) => l.type === 'check');
  const verdict = lines.find((l) => l.type === 'verdict') ?? {};
  return verdictHashOf({ ...(verdict as object), checks } as unknown as Parameters<typeof verdictHashOf>[0]);
}

/**
 * Check a ledger against the attestation.jsonl written with it: every entry the attestation names
 * (each prediction, its evidence and the head) has the SHA-256 recorded there, and the attestation's
 * verdict_hash recomputes from its lines. null when the attestation records no ledger. A ledger
 * rewritten and re-chained whole passes its own chain, but not this; an attestation edited to match
 * it no longer recomputes its verdict_hash, and one re-hashed differs from the verdict_hash the
 * verify printed (and from a verify re-run elsewhere: the ledger holds no physical fact).
 * A problem of the attestation itself (its verdict_hash) is given as line 0.
 */
export function checkAttestationBinding(
  entries: readonly LedgerEntry[],
  attestationText: string,
): { problem?: LedgerProblem; binding: AttestationBinding | null } {
  const lines = attestationText
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => parseStrict(l) as Obj);
  const { head, refs } = recordedRefs(lines.filter((l) => l.type === 'check'));
  if (head === null) return { binding: null };
  for (const ref of [...refs, head]) {
    const at = Number(ref.seq);
    const entry = entries[at - 1];
    if (entry === undefined)
      return {
        binding: null,
        problem: {
          line: at,
          reason: 'audit_attestation_ledger_mismatch',
          message: `attestation.jsonl records line ${at}, the ledger has ${entries.length} line(s)`,
        },
      };
    if (entry.digest !== ref.digest)
      return {
        binding: null,
        problem: {
          line: at,
          reason: 'audit_attestation_ledger_mismatch',
          message: `its SHA-256 is ${entry.digest.slice(0, 16)}…, attestation.jsonl records ${ref.digest.slice(0, 16)}…`,
        },
      };
  }
  const verdict = lines.find((l) => l.type === 'verdict');
  const recorded = verdict?.verdict_hash;
  const again = recomputeVerdictHash(lines);
  if (recorded !== again)
    return {
      binding: null,
      problem: {
        line: 0,
        reason: 'audit_verdict_hash_mismatch',
        message: `attestation.jsonl's verdict_hash ${String(recorded).slice(0, 16)}… does not recompute from its lines (${again.slice(0, 16)}…): the attestation was edited`,
      },
    };
  return { binding: { entries: refs.length + 1, head } };
}
