// The self-attestation report (docs/spec/diff0.md "Attestation"): grades a list of checks
// (full / sampled / incompatible), derives the verdict and exit code (0 green, 1 red, 2 yellow),
// maps the checks onto the D1–D10 checklist, hashes the verdict (ts_build and every physical
// field left out) and renders attestation.md and attestation.jsonl, with the conformance file the
// verification ran with beside the verdict (outside the hash). It runs no check itself.
import { dirname, join, resolve } from 'node:path';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, rmdirSync, statSync } from 'node:fs';
import { canonicalize, sha256Hex, type JsonValue } from '../../core/formats/canonical-json.js';
import { REASONS } from '../../core/formats/reasons.js';
import { writeFileDurable } from '../receipt/receipt.js';
import { guardWrite, WriteFailure } from '../write-failure.js';
import type { Check, CheckStatus } from './replay.js';
import { predictionSection } from './prediction-markdown.js';
import { type ConformanceRecord, describeConformance } from './conformance.js';

/** How much determinism a verification may claim (docs/spec/diff0.md "Grades"). */
export type Grade = 'full' | 'sampled' | 'incompatible';
/** The outcome of a verification: green (exit 0), red (exit 1) or yellow (exit 2, warnings only). */
export type Verdict = 'green' | 'yellow' | 'red';

/** One item of the D1-D10 checklist with the checks and tests behind it. */
export interface ChecklistItem {
  readonly id: string;
  readonly title: string;
  readonly status: CheckStatus;
  /** The check names that carry the evidence in this report. */
  readonly checks: readonly string[];
  /** The tests (test/receipt/*.test.ts) named after the item. */
  readonly tests: string;
}

/** The attestation report of {@link verify}: grade, verdict, checks, checklist and verdict hash. */
export interface Attestation {
  readonly attestationVersion: string;
  readonly grade: Grade;
  readonly verdict: Verdict;
  readonly exitCode: 0 | 1 | 2;
  readonly checks: readonly Check[];
  readonly checklist: readonly ChecklistItem[];
  readonly evidence_class: 'simulated';
  /** SHA-256 of the canonical verdict fields (never ts_build, never a physical field). */
  readonly verdict_hash: string;
  /** When the report was built: physical, outside the hash. */
  readonly ts_build: string;
  /**
   * The conformance file the verification ran with (its path, SHA-256 and counts), or that there was
   * none: metadata beside the verdict, outside the hash (the same DIFF=0 verdict on a machine whose
   * test run differed keeps its hash). Absent when the attestation was built without asking.
   */
  readonly conformance?: ConformanceRecord;
}

export const ATTESTATION_VERSION = 'detsim-attestation-v1';

/** Failing any of these means no determinism claim at all. */
const INCOMPATIBLE_ON_FAIL = ['replay', 'sensitivity', 'table', 'canonical'];

export function verdictOf(checks: readonly Check[]): { verdict: Verdict; exitCode: 0 | 1 | 2 } {
  if (checks.some((c) => c.status === 'fail')) return { verdict: 'red', exitCode: 1 };
  if (checks.some((c) => c.status === 'warn')) return { verdict: 'yellow', exitCode: 2 };
  return { verdict: 'green', exitCode: 0 };
}

/**
 * full: every configuration replays, hits its golden, passes sensitivity and physical diff, and no
 * check fails; incompatible: an unstable hash, a broken table or canonical form, or a failed
 * sensitivity check; sampled: everything else (e.g. a configuration without a golden value).
 */
export function gradeOf(checks: readonly Check[]): Grade {
  if (checks.some((c) => c.status === 'fail' && INCOMPATIBLE_ON_FAIL.includes(c.check))) return 'incompatible';
  if (!checks.some((c) => c.check === 'replay')) return 'incompatible';
  if (checks.some((c) => c.status === 'fail')) return 'sampled';
  const subjects = [...new Set(checks.filter((c) => c.check === 'replay').map((c) => c.subject))];
  const allGolden = subjects.every((s) =>
    checks.some((c) => c.subject === s && c.check === 'golden' && c.status === 'pass'),
  );
  return allGolden ? 'full' : 'sampled';
}

const ITEMS: [string, string, string[], string][] = [
  [
    'D1',
    'classification table published, unknown fields counted',
    ['table', 'field-table'],
    'canonical.test.ts D1 ×2, reasons.test.ts D1, verify.test.ts D1 (exit 2)',
  ],
  ['D2', 'lists sorted before canonicalisation', ['canonical'], 'canonical.test.ts D2'],
  ['D3', 'fixed-point numbers, enum values', ['canonical'], 'canonical.test.ts D3'],
  [
    'D4',
    'two independent runs agree (and their physical fields differ)',
    ['replay', 'physical-diff'],
    'replay.test.ts D4',
  ],
  ['D5', 'tampering with ReproCore changes the hash', ['sensitivity'], 'canonical.test.ts D5 ×2, replay.test.ts D5'],
  [
    'D6',
    'goldens (ReproHash and behaviour digest) frozen with the [golden] review marker',
    ['golden', 'golden-marker'],
    'check-goldens.test.ts D6 ×2 and its shallow-clone cases, goldens.test.ts D6, verify.test.ts D6 ×2 (exit 1)',
  ],
  ['D7', 'every decision has a non-empty reason', [], 'reasons.test.ts D7 ×2'],
  ['D8', 'receipts carry evidence_class; measured ones a source and time', ['honesty'], 'honesty.test.ts D8 ×3'],
  ['D9', 'verdict_hash reproducible, ts_build outside it', [], 'verify.test.ts D9 ×2'],
  ['D10', 'one CI entry with exit codes 0/1/2', [], 'verify.test.ts D10 (with D1 exit 2, D6 exit 1)'],
];

function worst(statuses: CheckStatus[]): CheckStatus {
  if (statuses.includes('fail')) return 'fail';
  if (statuses.includes('warn') || statuses.length === 0) return 'warn';
  return 'pass';
}

/** The verdict fields: everything a second verify must reproduce; no ts_build, no physical. */
function verdictFields(a: Omit<Attestation, 'verdict_hash' | 'ts_build'>): JsonValue {
  return {
    attestationVersion: a.attestationVersion,
    grade: a.grade,
    verdict: a.verdict,
    exitCode: a.exitCode,
    evidence_class: a.evidence_class,
    checklist: a.checklist.map((i) => ({ id: i.id, status: i.status })),
    checks: a.checks.map((c) => ({
      check: c.check,
      subject: c.subject,
      status: c.status,
      action: c.action,
      layer: c.layer,
      reason: c.reason,
      detail: c.detail,
    })),
  };
}

export function verdictHashOf(a: Omit<Attestation, 'verdict_hash' | 'ts_build'>): string {
  return sha256Hex(canonicalize(verdictFields(a)));
}

/** Judge a set of checks. Checks are ordered by (subject, check) so the order they ran in never matters. */
export function buildAttestation(checksIn: readonly Check[], tsBuild: string): Attestation {
  const checks = [...checksIn].sort((x, y) =>
    x.subject < y.subject ? -1 : x.subject > y.subject ? 1 : x.check < y.check ? -1 : x.check > y.check ? 1 : 0,
  );
  const { verdict, exitCode } = verdictOf(checks);
  const grade = gradeOf(checks);
  const reasonsOk =
    checks.length > 0 &&
    checks.every((c) => c.reason.length > 0 && c.reason in REASONS && c.layer === REASONS[c.reason].layer);
  const checklist: ChecklistItem[] = ITEMS.map(([id, title, names, tests]) => {
    let status: CheckStatus = worst(checks.filter((c) => names.includes(c.check)).map((c) => c.status));
    if (id === 'D7') status = reasonsOk ? 'pass' : 'fail';
    if (id === 'D9' || id === 'D10') status = 'pass'; // by construction below, proven by the named tests
    return { id, title, status, checks: names, tests };
  });
  const base = {
    attestationVersion: ATTESTATION_VERSION,
    grade,
    verdict,
    exitCode,
    checks,
    checklist,
    evidence_class: 'simulated' as const,
  };
  const verdict_hash = verdictHashOf(base);
  return { ...base, verdict_hash, ts_build: tsBuild };
}

/** attestation.jsonl: one check per line, then one verdict line. */
export function renderJsonl(a: Attestation): string {
  const lines = a.checks.map((c) => canonicalize({ type: 'check', ...c }));
  lines.push(
    canonicalize({
      type: 'verdict',
      attestationVersion: a.attestationVersion,
      grade: a.grade,
      verdict: a.verdict,
      exitCode: a.exitCode,
      checklist: a.checklist.map((i) => ({ id: i.id, status: i.status })),
      evidence_class: a.evidence_class,
      measure_source: null,
      measure_ts: null,
      verdict_hash: a.verdict_hash,
      ts_build: a.ts_build,
      ...(a.conformance ? { conformance: a.conformance } : {}),
    }),
  );
  return `${lines.join('\n')}\n`;
}

const CLAIM: Record<Grade, string> = {
  full: 'replayable / DIFF=0',
  sampled: 'limited replay (not every configuration is covered by a golden value or a check did not pass)',
  incompatible: 'no determinism claim',
};

const mark = (s: CheckStatus) => (s === 'pass' ? 'pass' : s === 'warn' ? '**warn**' : '**FAIL**');

/** attestation.md: for people. */
export function renderMarkdown(a: Attestation): string {
  const out = [
    '# detsim self-attestation',
    '',
    `- grade: **${a.grade}** — allowed claim: ${CLAIM[a.grade]}`,
    `- verdict: **${a.verdict}** (exit ${a.exitCode}: 0 green, 1 red, 2 yellow)`,
    `- verdict_hash: \`${a.verdict_hash}\` (SHA-256 of the canonical verdict fields; excludes ts_build and every physical field)`,
    `- evidence_class: ${a.evidence_class}`,
    `- ts_build: ${a.ts_build} (physical, not hashed)`,
    ...(a.conformance ? [`- conformance: ${describeConformance(a.conformance)} (not hashed)`] : []),
    '',
    '## Checklist',
    '',
    '| item | status | evidence in this report | tests |',
    '| --- | --- | --- | --- |',
    ...a.checklist.map(
      (i) =>
        `| ${i.id} ${i.title} | ${mark(i.status)} | ${i.checks.length ? i.checks.join(', ') : i.id === 'D7' ? 'every check line below carries a registered reason' : i.id === 'D9' ? 'verdict_hash above' : 'the exit code above'} | ${i.tests} |`,
    ),
    '',
    '## Checks',
    '',
    '| subject | check | status | action | layer | reason | detail |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...a.checks.map(
      (c) =>
        `| ${c.subject} | ${c.check} | ${mark(c.status)} | ${c.action} | ${c.layer} | \`${c.reason}\` | ${canonicalize(c.detail).replace(/\|/g, '\\|')} |`,
    ),
    '',
    ...predictionSection(a.checks),
    'Physical facts (run directories, the physical fields that differed) are in attestation.jsonl under `physical`.',
    '',
  ];
  return out.join('\n');
}

/** Where the attestation files go in `outDir`. */
function attestationPaths(outDir: string): { md: string; jsonl: string } {
  return { md: join(outDir, 'attestation.md'), jsonl: join(outDir, 'attestation.jsonl') };
}

/**
 * Check, before any run, that the attestation can be written into `outDir`, leaving no trace: the
 * nearest existing directory on the way to it must be a directory (else ENOTDIR, as the late mkdir
 * would fail) in which a probe directory can be made and removed (else its errno), and neither
 * report path may be a directory (EISDIR). A refusal is the WriteFailure the late write raises,
 * naming the same path, so an unwritable --out costs no replay. A disk that fills meanwhile is
 * still caught by the late write.
 */
export function checkAttestationWritable(outDir: string): void {
  let existing = resolve(outDir);
  while (!existsSync(existing) && dirname(existing) !== existing) existing = dirname(existing);
  if (!statSync(existing).isDirectory()) throw new WriteFailure(outDir, 'ENOTDIR');
  guardWrite(outDir, () => rmdirSync(mkdtempSync(join(existing, '.attestation-probe-'))));
  for (const path of Object.values(attestationPaths(outDir)))
    if (lstatSync(path, { throwIfNoEntry: false })?.isDirectory()) throw new WriteFailure(path, 'EISDIR');
}

/** Write attestation.jsonl and attestation.md into `outDir`; a failed write is a WriteFailure naming the path. */
export function writeAttestation(outDir: string, a: Attestation): { md: string; jsonl: string } {
  guardWrite(outDir, () => mkdirSync(outDir, { recursive: true }));
  const { md, jsonl } = attestationPaths(outDir);
  writeFileDurable(jsonl, renderJsonl(a));
  writeFileDurable(md, renderMarkdown(a));
  return { md, jsonl };
}
