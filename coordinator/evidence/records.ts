// The PEBv1 records of a detsim bundle, built from the planned files and the facts export
// recomputed: one source per file, and per run an observation (its run record) and one claim with one
// evidence record per check; the investigation ledger, index, policy, the report and consumer guide.
// Deterministic for the same inputs except the export time. Not the writing (export.ts).
import type { CheckName, ClaimCheck } from './claims.js';
import { CONTENTS, SCHEMA_BASE } from './pebv1.js';

export type FileRole =
  | 'receipt'
  | 'run-record'
  | 'summary'
  | 'ledger'
  | 'ledger-head'
  | 'trace-index'
  | 'trace-segment'
  | 'store-manifest'
  | 'checkpoint'
  | 'attestation'
  | 'prediction-ledger'
  | 'conformance';

/** One file of a run (or the attestation) as the bundle records it. */
export interface PlannedFile {
  rel: string;
  from: string;
  sha256: string;
  bytes: number;
  copy: boolean;
  role: FileRole;
}

/** A claim export made about a run: its check, the values it recomputed and the files behind it. */
export interface PlannedClaim {
  check: CheckName;
  statement: string;
  facts: Record<string, unknown>;
  roles: readonly FileRole[];
  /** Files of another run the claim also rests on (a same-run claim's other run). */
  also?: readonly PlannedFile[];
}

export interface PlannedRun {
  name: string;
  bundlePath: string;
  files: PlannedFile[];
  claims: PlannedClaim[];
  summary: string;
}

type Rec = Record<string, unknown>;

const FRESH = (at: string): Rec => ({
  status: 'current',
  checked_at: at,
  explanation: 'Recomputed from the files at export; their SHA-256 digests bind them to this bundle.',
  effect: 'The claim holds for exactly these files; `detsim evidence verify` recomputes it from them.',
});

const BASIS: Record<CheckName, string> = {
  reprohash:
    'Recomputed from the bundled receipt and every step of the trace it binds by SHA-256 (physical fields stripped, docs/spec/diff0.md).',
  ledger: "Every line of the run's ledger links to the SHA-256 of the line before; the head file names the last.",
  checkpoints:
    "Each generation the store keeps has the envelope digest of the ledger's committed entry; present files hash to it.",
  replay: "The attestation's verdict hash binds its checks; its replay check names this configuration and ReproHash.",
  prediction:
    'The prediction ledger (verify --predict) is an intact chain; every evidence entry follows the prediction it names and agrees with it; the attestation records the same entries.',
  conformance:
    "The conformance file's SHA-256 is the one the attestation records; its requirement counts recomputed from it.",
  'same-run':
    "Both runs' ReproHashes recomputed from their receipts and traces are equal (a resumed run's later epochs rebased); its ledger names the checkpoint it was restored from.",
};

export function sourceRecords(files: readonly PlannedFile[]): Rec[] {
  return files.map((f, i) => ({
    id: sourceId(i),
    type: f.role === 'receipt' || f.role === 'attestation' ? 'proof_receipt' : 'file',
    locator: { path: f.rel, identity_kind: 'content' },
    provenance: { source_type: 'detsim', schema_version: f.role },
    integrity: { content_hash: f.sha256 },
    extensions: { detsim: { bytes: f.bytes, included: f.copy } },
  }));
}

const sourceId = (i: number): string => `src-${String(i + 1).padStart(4, '0')}`;

/** Claims, evidence, observations and investigation ledger entries of every run. */
export function runRecords(runs: readonly PlannedRun[], all: readonly PlannedFile[], at: string) {
  const idOf = new Map(all.map((f, i) => [f.rel, sourceId(i)]));
  const claims: Rec[] = [];
  const evidence: Rec[] = [];
  const observations: Rec[] = [];
  const ledger: Rec[] = [];
  runs.forEach((run, r) => {
    const obsId = `obs-${r + 1}-run`;
    observations.push(observationOf(run, obsId, idOf));
    for (const c of run.claims) {
      const claimId = `claim-${r + 1}-${c.check}`;
      const evId = `ev-${r + 1}-${c.check}`;
      const files = [...run.files, ...(c.also ?? [])].filter((f) => c.roles.includes(f.role));
      claims.push(claimOf(run, c, claimId, evId, obsId, files));
      evidence.push(evidenceOf(c, claimId, evId, files, idOf, at));
      ledger.push(ledgerEntryOf(ledger.length, c, evId, obsId, at));
    }
  });
  return { claims, evidence, observations, ledger };
}

function observationOf(run: PlannedRun, id: string, idOf: Map<string, string>): Rec {
  const record = run.files.find((f) => f.role === 'run-record')!;
  return {
    id,
    type: 'run_metadata',
    statement: run.summary,
    source_refs: [idOf.get(record.rel)!],
    proves: ['The configuration, master seed and derived seeds the run was made with, as its run record states them.'],
    does_not_prove: ['That the run gives the same ReproHash on another machine: a replay there shows that.'],
    limitations: [],
  };
}

function claimOf(run: PlannedRun, c: PlannedClaim, id: string, evId: string, obsId: string, files: PlannedFile[]): Rec {
  const referenced = files.filter((f) => !f.copy).length;
  const detsim: ClaimCheck = { check: c.check, run: run.bundlePath, expected: c.facts };
  return {
    id,
    statement: c.statement,
    status: 'supported',
    status_definition: 'detsim recomputed the stated values from the files named by its evidence at export.',
    evidence_refs: [evId],
    counter_evidence_refs: [],
    observation_refs: [obsId],
    basis: { type: c.check === 'replay' ? 'reproduced' : 'deterministic', explanation: BASIS[c.check] },
    limitations:
      referenced > 0
        ? [`${referenced} file(s) are referenced by SHA-256, not copied: verify them with --run <run-dir>.`]
        : [],
    smallest_next_action: `detsim evidence verify <bundle>${referenced > 0 ? ' --run <run-dir>' : ''}`,
    extensions: { detsim },
  };
}

function evidenceOf(
  c: PlannedClaim,
  claimId: string,
  id: string,
  files: PlannedFile[],
  idOf: Map<string, string>,
  at: string,
): Rec {
  const main = files[0]!;
  const replay = c.check === 'replay';
  return {
    id,
    proposition: c.statement,
    kind: replay ? 'test_result' : 'artifact_fact',
    strength: replay ? 'reproduced' : 'corroborated',
    strength_definition: replay
      ? 'detsim verify ran the configuration in fresh runs and recorded the outcome in its attestation.'
      : 'The files corroborate each other by SHA-256 and the values recompute from them.',
    source_refs: files.map((f) => idOf.get(f.rel)!),
    bindings: { paths: files.map((f) => f.rel), ...(replay ? { command: ['detsim', 'verify'] } : {}) },
    freshness: FRESH(at),
    supports: [claimId],
    contradicts: [],
    limitations: [],
    integrity: { content_hash: main.sha256, truncated: false },
  };
}

function ledgerEntryOf(n: number, c: PlannedClaim, evId: string, obsId: string, at: string): Rec {
  return {
    id: `ledger-${String(n + 1).padStart(3, '0')}`,
    timestamp: at,
    question: c.statement,
    hypothesis_ref: 'primary',
    action: 'inspect_proof',
    tool_name: 'detsim.evidence.export',
    output_ref: evId,
    observation_refs: [obsId],
    evidence_candidate_refs: [],
    effect: 'supports_primary',
    explanation: `Recomputed at export (${c.check}): ${BASIS[c.check]}`,
  };
}

export const POLICY: Rec = {
  schema_version: 'portable-investigation-policy/1.0',
  allowed_tools: ['detsim.evidence.export', 'detsim.evidence.verify'],
  denied_tools: [],
  budgets: {
    max_tool_calls: 1000,
    max_evidence_candidates: 0,
    max_verified_evidence: 1000,
    max_run_records_read: 1000,
    max_blob_bytes_read: 0,
  },
  command_policy: { allow_execution: false, allowed_command_prefixes: [] },
  workspace_policy: { read_only: true },
  privacy_policy: { redact_secrets: true, export_reasoning: false, export_raw_tool_output: false },
  require_competing_hypothesis: false,
  require_disconfirming_search: false,
};

export function indexRecord(
  bundleId: string,
  question: string,
  recs: ReturnType<typeof runRecords>,
  excluded: number,
): Rec {
  const ids = (list: Rec[]) => list.map((r) => String(r.id));
  return {
    schema_version: 'portable-evidence-bundle-index/1.0',
    bundle_id: bundleId,
    question,
    claim_refs: ids(recs.claims),
    evidence_refs: ids(recs.evidence),
    observation_refs: ids(recs.observations),
    reading_order: [CONTENTS.claims, CONTENTS.evidence, CONTENTS.observations],
    excluded: {
      count: excluded,
      reason:
        excluded > 0
          ? 'Large run files (trace segments, checkpoints) are referenced by SHA-256 and not copied; see archive/sources.jsonl.'
          : 'Every file the claims cite is in the bundle.',
    },
    archive_available: true,
    consumer_guidance: {
      must: [
        'Cite claim and evidence ids.',
        'Run `detsim evidence verify` (or check the file hashes) before relying on a claim.',
      ],
      must_not: [
        'Treat a referenced file that is not present as verified.',
        'Read a missing file as evidence that something did not happen.',
      ],
    },
  };
}

export const SCHEMA_URI = `${SCHEMA_BASE}manifest.schema.json`;

/** The bundle's README.md: how to check and read it (PEBv1's consumer guide is fixed text, pebv1.ts). */
export const BUNDLE_README = `# How to read this bundle

This is a Portable Evidence Bundle v1 written by \`detsim evidence export\`. It is a structured
source for a reviewer, not a final judgement.

1. Check it: \`detsim evidence verify <bundle>\` (add \`--run <run-dir>\` for files that are
   referenced by SHA-256 and not copied). Independently: every record validates against the PEBv1
   JSON Schemas, every file's SHA-256 is in \`manifest.json\` \`integrity.file_hashes\`, and
   \`bundle.content_hash\` is the SHA-256 of the canonical manifest with that field set to 64 zeros.
2. Read \`core/claims.jsonl\`: each claim names its evidence, and \`extensions.detsim\` names the
   check and the values it states (e.g. the ReproHash).
3. The run's own files are under \`runs/<run>/\`; \`archive/sources.jsonl\` lists each with its
   SHA-256 and whether it is included.

A referenced file that is not present is not verified; a missing file is not evidence of absence.
`;

/** One claim's reference line of the report, as PEBv1's projection words it. */
function refLine(label: string, refs: unknown): string[] {
  const list = refs as string[];
  return list.length === 0 ? [] : [`- ${label}：${list.map((r) => `\`${r}\``).join('、')}`];
}

/**
 * The bundle report (contents.report) in PEBv1's deterministic projection of the claims (its
 * headings and labels are the format's), so any PEBv1 validator can re-derive it.
 */
export function renderReport(question: string, claims: readonly Rec[]): string {
  const lines = ['# Portable Evidence Bundle', '', '## 调查问题', '', question, '', '## 调查结论', ''];
  for (const c of claims) {
    lines.push(`- \`${String(c.id)}\` [${String(c.status)}]：${String(c.statement)}`);
    lines.push(
      ...refLine('支持证据', c.evidence_refs),
      ...refLine('反证', c.counter_evidence_refs),
      ...refLine('观察', c.observation_refs),
    );
    for (const l of c.limitations as string[]) lines.push(`- 限制：${l}`);
    if (c.smallest_next_action) lines.push(`- 最小下一步：${String(c.smallest_next_action)}`);
    lines.push('');
  }
  return `${lines.join('\n').trimEnd()}\n`;
}
