// The "Predictions" section of attestation.md (verify --predict): per configuration the prediction
// (expected values, source, ledger line and entry SHA-256), the outcome (observed values, match or
// mismatch) and whether the prediction's line precedes every evidence line; then the ledger head.
// Rendering only, from the checks' details (prediction.ts makes them); empty without predictions.
import type { Check } from './check.js';

type Obj = Record<string, unknown>;
type Ref = { seq: string; digest: string };

const short = (h: unknown) => (typeof h === 'string' ? `\`${h.slice(0, 16)}\`` : 'none');
const mark = (s: Check['status']) => (s === 'pass' ? 'pass' : s === 'warn' ? '**warn**' : '**FAIL**');

function expectedCell(p: Obj): string {
  const e = p.expected as Obj | null;
  if (e === null) return 'no prediction';
  const src = p.source as Obj;
  return `ReproHash ${short(e.reproHash)}, behaviour ${short(e.behaviourDigest)} (${String(src.kind)} ${String(src.file)}, SHA-256 ${short(src.sha256)})`;
}

function observedCell(o: Obj): string {
  const runs = (o.observed as Obj[]).map(
    (r) => `run ${String(r.run)} ${short(r.reproHash)} ${short(r.behaviourDigest)}`,
  );
  const mismatches = (o.mismatches as Obj[]).map(
    (m) => `run ${String(m.run)} ${String(m.field)}: expected ${short(m.expected)}, observed ${short(m.observed)}`,
  );
  return [...runs, ...mismatches].join('; ');
}

function row(c: Check, order: Check | undefined): string {
  const d = c.detail as { prediction: Obj & Ref; outcome: Obj };
  const od = (order?.detail ?? {}) as { evidence?: Ref[] };
  const evidence = (od.evidence ?? []).map((r) => r.seq).join(', ');
  const result =
    d.outcome.result === 'confirmed' ? 'match' : d.outcome.result === 'refuted' ? 'MISMATCH' : 'not predicted';
  const precedes = order ? `${mark(order.status)}: line ${d.prediction.seq} < ${evidence || '—'}` : 'not checked';
  return `| ${c.subject} | ${expectedCell(d.prediction)} | line ${d.prediction.seq} ${short(d.prediction.digest)} | ${observedCell(d.outcome)} | ${mark(c.status)} ${result} | ${precedes} |`;
}

/** The Predictions section of attestation.md: [] when the attestation carries no prediction check. */
export function predictionSection(checks: readonly Check[]): string[] {
  const predictions = checks.filter((c) => c.check === 'prediction');
  if (predictions.length === 0) return [];
  const ledger = checks.find((c) => c.check === 'ledger');
  const head = (ledger?.detail ?? {}) as Obj;
  return [
    '## Predictions',
    '',
    'Each prediction was appended to `ledger.jsonl` beside this report (hash-chained, `detsim ledger verify <this directory>`) before any run of its configuration started; the observations and the evaluation follow it, each naming it by line and SHA-256.',
    '',
    '| subject | expected | prediction entry | observed | outcome | prediction precedes evidence |',
    '| --- | --- | --- | --- | --- | --- |',
    ...predictions.map((c) =>
      row(
        c,
        checks.find((o) => o.check === 'prediction-order' && o.subject === c.subject),
      ),
    ),
    '',
    `- ledger head: ${String(head.lines ?? '?')} line(s), last SHA-256 \`${String(head.lastHash ?? '?')}\` (${ledger ? mark(ledger.status) : 'not checked'}; covered by verdict_hash)`,
    '',
  ];
}
