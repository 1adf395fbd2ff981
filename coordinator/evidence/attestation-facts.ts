// What a `detsim verify` attestation.jsonl proves about one configuration, re-derived from its lines:
// the verdict hash recomputed over the check and verdict lines (a changed check or verdict is
// refused), then that configuration's replay check. Reading only; the attestation is diff0/attestation.ts.
import { canonicalize, parseStrict, sha256Hex } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';

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

const CHECK_FIELDS = ['check', 'subject', 'status', 'action', 'layer', 'reason', 'detail'] as const;
const VERDICT_FIELDS = ['attestationVersion', 'grade', 'verdict', 'exitCode', 'evidence_class', 'checklist'] as const;

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
  const pick = (l: Line, keys: readonly string[]) => Object.fromEntries(keys.map((k) => [k, l[k]]));
  const fields = {
    ...pick(verdict, VERDICT_FIELDS),
    checks: lines.filter((l) => l.type === 'check').map((l) => pick(l, CHECK_FIELDS)),
  };
  const hash = sha256Hex(canonicalize(fields));
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
