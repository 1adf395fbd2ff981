// What a `detsim verify` attestation.jsonl proves about one configuration, re-derived from its lines:
// the verdict hash recomputed over the check and verdict lines (a changed check or verdict is
// refused), then that configuration's replay check. Reading only; the attestation is diff0/attestation.ts.
import { createHash } from 'node:crypto';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { checkAttestationBinding, checkPredictionEntries, recomputeVerdictHash } from '../diff0/prediction-ledger.js';
import { ledgerEntries, verifyLedgerBytes } from '../store/ledger.js';

export interface AttestationFacts {
  subject: string;
  reproHash: string;
  runs: number;
  verdict: string;
  verdictHash: string;
}

interface Line {
  type?: string;
  [k: string]: unknown;
}

/** The lines of attestation.jsonl, strict JSON each. */
export function attestationLines(bytes: Uint8Array): Line[] {
  return Buffer.from(bytes)
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => parseStrict(l) as Line);
}

/** The verdict line, refusing an attestation whose verdict_hash does not bind its checks. */
export function checkedVerdict(lines: Line[], where: string): Line {
  const verdict = lines.find((l) => l.type === 'verdict');
  if (!verdict) throw new DetsimError('audit_evidence_recheck_failed', `${where}: no verdict line`, where);
  const hash = recomputeVerdictHash(lines);
  if (hash !== verdict.verdict_hash)
    throw new DetsimError(
      'audit_evidence_recheck_failed',
      `${where}: verdict_hash ${String(verdict.verdict_hash)} does not bind its checks (they hash to ${hash})`,
      'verdict_hash',
    );
  return verdict;
}

/** The replay facts of `subject` in an attestation (null: the attestation has no replay of it). */
export function attestationFacts(bytes: Uint8Array, subject: string, where: string): AttestationFacts | null {
  const lines = attestationLines(bytes);
  const verdict = checkedVerdict(lines, where);
  const replay = lines.find((l) => l.type === 'check' && l.check === 'replay' && l.subject === subject);
  if (!replay || replay.status !== 'pass') return null;
  const detail = replay.detail as { reproHash: string; runs: number };
  return {
    subject,
    reproHash: detail.reproHash,
    runs: detail.runs,
    verdict: String(verdict.verdict),
    verdictHash: String(verdict.verdict_hash),
  };
}

/** Every subject whose replay passed, with the run directories it wrote (physical, as recorded). */
export function replayedSubjects(bytes: Uint8Array): { subject: string; runDirs: string[] }[] {
  return attestationLines(bytes)
    .filter((l) => l.type === 'check' && l.check === 'replay' && l.status === 'pass')
    .map((l) => ({
      subject: String(l.subject),
      runDirs: ((l.physical as { runDirs?: string[] }) ?? {}).runDirs ?? [],
    }));
}

/** The prediction ledger written beside an attestation (verify --predict) and the conformance file it ran with. */
export interface AttestationExtras {
  ledger: Uint8Array | null;
  head: Uint8Array | null;
  conformance: Uint8Array | null;
}

function ledgerProblem(where: string, line: number, message: string): never {
  throw new DetsimError('audit_evidence_recheck_failed', `${where} line ${line}: ${message}`, where);
}

/**
 * What the prediction ledger proves about `subject`: the chain holds, every evidence entry follows
 * the prediction it names and agrees with it, the attestation records the same entries — and the
 * prediction for `subject`, made before its runs, with its result. null: no ledger, or no prediction of it.
 */
export function predictionFacts(
  attestation: Uint8Array,
  x: AttestationExtras,
  subject: string,
  where: string,
): Record<string, unknown> | null {
  if (x.ledger === null) return null;
  const chain = verifyLedgerBytes(x.ledger, x.head);
  if (!chain.ok) ledgerProblem(where, chain.problem!.line, chain.problem!.message);
  const entries = ledgerEntries(x.ledger);
  const order = checkPredictionEntries(entries);
  if (order.problem) ledgerProblem(where, order.problem.line, order.problem.message);
  const bound = checkAttestationBinding(entries, Buffer.from(attestation).toString('utf8'));
  if (bound.problem) ledgerProblem(where, bound.problem.line, bound.problem.message);
  const at = entries.findIndex(
    (e) => e.line.event === 'prediction' && (e.line.detail as { subject?: string }).subject === subject,
  );
  if (at < 0) return null;
  const detail = entries[at]!.line.detail as { expected: { reproHash: string } | null };
  const evaluation = entries.find(
    (e) => e.line.event === 'evaluation' && (e.line.detail as { subject?: string }).subject === subject,
  );
  return {
    subject,
    predictedReproHash: detail.expected?.reproHash ?? null,
    predictionLine: at + 1,
    firstEvidenceLine:
      entries.findIndex((e, i) => i > at && (e.line.detail as { subject?: string }).subject === subject) + 1,
    result: (evaluation?.line.detail as { result?: string } | undefined)?.result ?? null,
  };
}

/** The conformance file an attestation's verdict line records: its SHA-256 must match, its counts recomputed. */
export function conformanceFacts(
  attestation: Uint8Array,
  conformance: Uint8Array | null,
  where: string,
): Record<string, unknown> | null {
  const verdict = attestationLines(attestation).find((l) => l.type === 'verdict');
  const recorded = verdict?.conformance as { present?: boolean; sha256?: string } | undefined;
  if (!recorded?.present || conformance === null) return null;
  const actual = createHash('sha256').update(conformance).digest('hex');
  if (actual !== recorded.sha256)
    throw new DetsimError(
      'audit_evidence_recheck_failed',
      `${where}: the conformance file hashes to ${actual}, the attestation records ${String(recorded.sha256)}`,
      where,
    );
  const doc = parseStrict(conformance) as { requirements?: { status: string }[] };
  const count = (st: string) => (doc.requirements ?? []).filter((r) => r.status === st).length;
  return {
    sha256: actual,
    requirements: (doc.requirements ?? []).length,
    passed: count('passed'),
    failed: count('failed'),
    untested: count('untested'),
    skipped: count('skipped'),
  };
}
