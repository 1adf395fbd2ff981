// Predictions before replay (`detsim verify --predict`, `detsim replay --predict`; docs/spec/diff0.md
// "Predictions"): the ReproHash and behaviour digest a replay is expected to give — from a golden, or
// from the receipt being replayed — appended to a hash-chained ledger (store/ledger.ts, the run
// ledger's format and code) in the report directory before any run starts; then each fresh run's
// observed values and the evaluation, chained after it; then the checks the attestation and the
// replay report carry, judged on the ledger as re-read from disk. It does NOT run replays
// (replay.ts), and what the entries mean and how they must be ordered is prediction-ledger.ts.
import { mkdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { canonicalBytes, sha256Hex, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { acquireRunLock, type RunLock } from '../session/run-lock.js';
import {
  Ledger,
  LEDGER_FILE,
  LEDGER_HEAD_FILE,
  ledgerEntries,
  verifyLedgerBytes,
  type LedgerLine,
} from '../store/ledger.js';
import { guardWrite } from '../write-failure.js';
import { type Check, makeCheck } from './check.js';
import { goldenFile, readGolden } from './goldens.js';
import {
  checkPredictionEntries,
  type EntryRef,
  type Expected,
  FALSIFIER,
  judge,
  type Mismatch,
  type ObservationDetail,
  type PredictionDetail,
  type PredictionResult,
  type PredictionSource,
  RESULT_REASON,
} from './prediction-ledger.js';

/** What a verify or replay predicts for one configuration, before any of its runs. */
export interface Prediction {
  readonly subject: string;
  readonly sessionId: string;
  readonly command: 'verify' | 'replay';
  readonly steps: number;
  readonly runs: number;
  /** null: nothing to predict from; recorded as "no prediction" with `why`. */
  readonly expected: Expected | null;
  readonly source: PredictionSource | null;
  readonly why?: string;
}

/** One fresh run's observed values (a run that wrote no behaviour digest: null). */
export type Observed = Pick<ObservationDetail, 'run' | 'dispatch' | 'reproHash' | 'behaviourDigest'>;

/** A prediction with its outcome and the ledger entries that record both. */
export interface Evaluated {
  readonly prediction: Prediction;
  readonly ref: EntryRef;
  readonly observed: readonly Observed[];
  readonly result: PredictionResult;
  readonly mismatches: readonly Mismatch[];
  /** The observation entries, then the evaluation entry. */
  readonly evidence: readonly (EntryRef & { event: 'observation' | 'evaluation' })[];
}

const refOf = (line: LedgerLine): EntryRef => ({ seq: line.seq, digest: sha256Hex(canonicalBytes(line)) });

function fileSha256(path: string): string {
  return sha256Hex(readFileSync(path));
}

/**
 * The prediction of a golden (`<goldenDir>/<example>.json`), or "no prediction" when there is none
 * (its `why` names the file, not the directory: the ledger holds no path of this machine).
 */
export function predictionFromGolden(
  goldenDir: string,
  example: string,
  base: { subject: string; sessionId: string; command: 'verify' | 'replay'; runs: number; steps: number },
): Prediction {
  const golden = readGolden(goldenDir, example);
  if (golden === null) return { ...base, expected: null, source: null, why: `no golden ${example}.json` };
  const source: PredictionSource = {
    kind: 'golden',
    file: `${example}.json`,
    sha256: fileSha256(goldenFile(goldenDir, example)),
  };
  const expected = { reproHash: golden.reproHash, behaviourDigest: golden.behaviourDigest };
  return { ...base, steps: golden.steps, expected, source };
}

/** The prediction of a recorded run: its receipt.json's reproHash and summary.behaviourDigest, at its steps. */
export function predictionFromReceipt(runDir: string, runs: number): Prediction {
  const path = join(runDir, 'receipt.json');
  const refuse = (why: string): never => {
    throw new DetsimError('struct_invalid_receipt', `--predict: ${path}: ${why}`, '--predict');
  };
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    return refuse(`cannot be read (${(e as NodeJS.ErrnoException).code}): a run predicts its replay from its receipt`);
  }
  let r: { reproHash?: unknown; summary?: { behaviourDigest?: unknown; stepsDone?: unknown; sessionId?: unknown } };
  try {
    r = JSON.parse(bytes.toString('utf8')) as typeof r;
  } catch {
    return refuse('is not JSON');
  }
  const s = r.summary ?? {};
  if (typeof r.reproHash !== 'string' || !/^[0-9a-f]{16}$/.test(r.reproHash)) return refuse('reproHash is not 16 hex');
  if (typeof s.behaviourDigest !== 'string' || !/^[0-9a-f]{64}$/.test(s.behaviourDigest))
    return refuse('summary.behaviourDigest is not 64 hex');
  if (typeof s.stepsDone !== 'number' || !Number.isInteger(s.stepsDone)) return refuse('summary.stepsDone is missing');
  if (typeof s.sessionId !== 'string') return refuse('summary.sessionId is missing');
  return {
    subject: s.sessionId,
    sessionId: s.sessionId,
    command: 'replay',
    steps: s.stepsDone,
    runs,
    expected: { reproHash: r.reproHash, behaviourDigest: s.behaviourDigest },
    source: { kind: 'receipt', file: `${basename(runDir)}/receipt.json`, sha256: sha256Hex(bytes) },
  };
}

function predictionDetail(p: Prediction): JsonValue {
  const d: PredictionDetail = {
    subject: p.subject,
    command: p.command,
    steps: String(p.steps),
    runs: String(p.runs),
    expected: p.expected,
    source: p.source,
    falsifier: FALSIFIER,
    ...(p.why === undefined ? {} : { why: p.why }),
  };
  return d as unknown as JsonValue;
}

/** One prediction in the ledger, collecting the evidence that follows it. */
export class OpenPrediction {
  private readonly observed: Observed[] = [];
  private readonly pending: Promise<LedgerLine>[] = [];
  evaluated: Evaluated | null = null;

  constructor(
    private readonly ledger: Ledger,
    readonly prediction: Prediction,
    readonly ref: EntryRef,
  ) {}

  /** Append one run's observation (in call order; a failed append surfaces in evaluate()). */
  observe(index: number, run: { dispatch: string; reproHash: string; behaviourDigest: string | null }): void {
    const o: Observed = {
      run: String(index + 1),
      dispatch: run.dispatch,
      reproHash: run.reproHash,
      behaviourDigest: run.behaviourDigest,
    };
    this.observed.push(o);
    const detail = { subject: this.prediction.subject, prediction: this.ref, ...o } as unknown as JsonValue;
    const line = this.ledger.append({ event: 'observation', sessionId: this.prediction.sessionId, detail });
    line.catch(() => undefined); // handled: evaluate() awaits it and throws
    this.pending.push(line);
  }

  /** Judge the observations and append the evaluation, chained after them. */
  async evaluate(): Promise<Evaluated> {
    const observations = (await Promise.all(this.pending)).map(refOf);
    const { result, mismatches } = judge(this.prediction.expected, this.observed);
    const detail = {
      subject: this.prediction.subject,
      prediction: this.ref,
      observations,
      expected: this.prediction.expected,
      result,
      reason: RESULT_REASON[result],
      mismatches,
    } as unknown as JsonValue;
    const line = await this.ledger.append({ event: 'evaluation', sessionId: this.prediction.sessionId, detail });
    const evidence = [
      ...observations.map((r) => ({ ...r, event: 'observation' as const })),
      { ...refOf(line), event: 'evaluation' as const },
    ];
    this.evaluated = {
      prediction: this.prediction,
      ref: this.ref,
      observed: this.observed,
      result,
      mismatches,
      evidence,
    };
    return this.evaluated;
  }
}

/**
 * The prediction ledger of one verify or replay: `<dir>/ledger.jsonl` (+ `ledger.head.json`), appended
 * to (a ledger already there keeps its lines), under `<dir>/run.lock` until {@link release}, so no
 * other verify or replay interleaves its lines.
 */
export class PredictionLedger {
  private readonly opened: OpenPrediction[] = [];

  private constructor(
    readonly dir: string,
    private readonly ledger: Ledger,
    private readonly lock: RunLock,
  ) {}

  static async open(dir: string, command: string): Promise<PredictionLedger> {
    guardWrite(dir, () => mkdirSync(dir, { recursive: true }));
    const lock = acquireRunLock(dir, command);
    try {
      return new PredictionLedger(dir, await Ledger.open(dir), lock);
    } catch (e) {
      lock.release();
      throw e;
    }
  }

  /** Append a prediction; resolves once its line is durable. */
  async predict(p: Prediction): Promise<OpenPrediction> {
    const line = await this.ledger.append({ event: 'prediction', sessionId: p.sessionId, detail: predictionDetail(p) });
    const open = new OpenPrediction(this.ledger, p, refOf(line));
    this.opened.push(open);
    return open;
  }

  /** Wait for every line and the head, then judge each evaluated prediction on the ledger as re-read from disk. */
  async finish(ledgerSubject: string): Promise<Check[]> {
    await this.ledger.flush();
    const evaluated = this.opened.flatMap((o) => (o.evaluated ? [o.evaluated] : []));
    return predictionChecks(this.dir, evaluated, ledgerSubject);
  }

  release(): void {
    this.lock.release();
  }
}

// ---------------------------------------------------------------------------------------------
// The checks (attestation and replay report)

/** The prediction check: expected (with its ledger entry) against observed; match or mismatch. */
export function predictionCheck(e: Evaluated): Check {
  const p = e.prediction;
  const prediction = { seq: e.ref.seq, digest: e.ref.digest, expected: p.expected, source: p.source, steps: p.steps };
  const outcome = { result: e.result, observed: e.observed, mismatches: e.mismatches };
  const detail = { prediction, outcome } as unknown as JsonValue;
  if (e.result === 'unpredicted')
    return makeCheck('prediction', p.subject, 'warn', 'meta_prediction_missing', {
      ...(detail as object),
      why: p.why ?? null,
    });
  return makeCheck(
    'prediction',
    p.subject,
    e.result === 'confirmed' ? 'pass' : 'fail',
    RESULT_REASON[e.result],
    detail,
  );
}

/** The order check: on disk, the prediction is the very line recorded and precedes every evidence entry. */
function orderCheck(
  e: Evaluated,
  digests: readonly string[],
  events: readonly string[],
  problemLine: number | null,
): Check {
  const detail = { prediction: e.ref, evidence: e.evidence } as unknown as JsonValue;
  const seq = Number(e.ref.seq);
  const wrong = [e.ref, ...e.evidence].find((r) => digests[Number(r.seq) - 1] !== r.digest);
  const late = e.evidence.find((r) => Number(r.seq) <= seq);
  const mine = [e.ref, ...e.evidence].some((r) => Number(r.seq) === problemLine);
  if (wrong === undefined && late === undefined && events[seq - 1] === 'prediction' && !mine)
    return makeCheck('prediction-order', e.prediction.subject, 'pass', 'audit_prediction_precedes', detail);
  const why = wrong
    ? `line ${wrong.seq} on disk is not the entry written`
    : late
      ? `evidence line ${late.seq} does not follow prediction line ${seq}`
      : `line ${seq} is not a prediction, or an entry about it is malformed`;
  return makeCheck('prediction-order', e.prediction.subject, 'fail', 'audit_prediction_order', {
    ...(detail as object),
    why,
  });
}

/** Re-read the ledger: its chain, its prediction entries, then one prediction and one order check per prediction, and the head. */
export function predictionChecks(dir: string, evaluated: readonly Evaluated[], ledgerSubject: string): Check[] {
  const bytes = readFileSync(join(dir, LEDGER_FILE));
  const chain = verifyLedgerBytes(bytes, readFileSync(join(dir, LEDGER_HEAD_FILE)));
  const checks: Check[] = evaluated.map(predictionCheck);
  if (!chain.ok) {
    const p = chain.problem!;
    checks.push(
      makeCheck('ledger', ledgerSubject, 'fail', p.reason, { file: LEDGER_FILE, line: p.line, message: p.message }),
    );
    return checks;
  }
  const entries = ledgerEntries(bytes);
  const { problem } = checkPredictionEntries(entries);
  const digests = entries.map((x) => x.digest);
  const events = entries.map((x) => x.line.event);
  for (const e of evaluated) checks.push(orderCheck(e, digests, events, problem?.line ?? null));
  const head = { file: LEDGER_FILE, lines: String(chain.lines), lastHash: chain.lastHash };
  checks.push(
    problem
      ? makeCheck('ledger', ledgerSubject, 'fail', problem.reason, {
          ...head,
          line: problem.line,
          message: problem.message,
        })
      : makeCheck('ledger', ledgerSubject, 'pass', 'audit_ledger_intact', head),
  );
  return checks;
}
