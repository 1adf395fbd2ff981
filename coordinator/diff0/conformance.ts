// The conformance file a verification ran with (issue #31; docs/spec/README.md "Requirement ids"):
// reads the conformance.json that scripts/conformance.mjs writes after the tests, checks its shape
// and that its summary agrees with its requirements, and gives its path, SHA-256 and counts for
// the attestation (and for an evidence bundle). It runs no test, judges nothing, and is never part
// of the verdict hash: the record says which test evidence stood beside the DIFF=0 verdict.
import { existsSync, readFileSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { parseStrict, sha256Hex } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';

/** The version scripts/conformance.mjs writes (and the only one read). */
export const CONFORMANCE_VERSION = 'detsim-conformance-v1';
/** Where `detsim verify` looks when no `--conformance` is given (from the working directory). */
export const DEFAULT_CONFORMANCE_FILE = join('reports', 'conformance.json');

const STATUSES = ['passed', 'failed', 'untested', 'skipped'] as const;

/** A conformance file's counts of requirements by status. */
export interface ConformanceSummary {
  readonly passed: number;
  readonly failed: number;
  readonly untested: number;
  readonly skipped: number;
}

/** What {@link readConformance} gives: enough to name the exact file and what it claims. */
export interface ConformanceDigest {
  /** The file, relative to the working directory, `/`-separated. */
  readonly path: string;
  /** SHA-256 of the file's bytes as read. */
  readonly sha256: string;
  readonly conformanceVersion: string;
  /** How many requirements the file lists. */
  readonly requirements: number;
  readonly summary: ConformanceSummary;
}

/** The attestation's conformance record: the file verify ran with, or that it ran with none. */
export type ConformanceRecord =
  ({ readonly present: true } & ConformanceDigest) | { readonly present: false; readonly path: string };

const posixPath = (file: string) => relative(process.cwd(), resolve(file)).split(sep).join('/');

function refuse(
  file: string,
  why: string,
  reason: 'struct_invalid_field' | 'struct_missing_field' = 'struct_invalid_field',
): never {
  throw new DetsimError(reason, `--conformance: ${file}: ${why}`, '--conformance');
}

function parse(file: string, bytes: Buffer): Record<string, unknown> {
  let v: unknown;
  try {
    v = parseStrict(bytes);
  } catch (e) {
    if (e instanceof DetsimError)
      throw new DetsimError(e.reason, `--conformance: ${file}: ${e.message}`, '--conformance');
    throw e;
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) refuse(file, 'is not a JSON object');
  return v as Record<string, unknown>;
}

/** The summary, checked against the statuses of the requirements it counts. */
function summaryOf(file: string, doc: Record<string, unknown>): { requirements: number; summary: ConformanceSummary } {
  if (!Array.isArray(doc.requirements)) refuse(file, 'requirements is missing or not a list', 'struct_missing_field');
  const s = doc.summary as Record<string, unknown> | null | undefined;
  if (s === null || typeof s !== 'object' || Array.isArray(s))
    refuse(file, 'summary is missing', 'struct_missing_field');
  const counted = { passed: 0, failed: 0, untested: 0, skipped: 0 };
  (doc.requirements as unknown[]).forEach((r, i) => {
    const status = (r as { status?: unknown } | null)?.status;
    if (!STATUSES.includes(status as never))
      refuse(file, `requirements[${i}].status is not one of ${STATUSES.join(', ')}`);
    counted[status as keyof typeof counted]++;
  });
  for (const k of STATUSES)
    if (s[k] !== counted[k])
      refuse(file, `summary.${k} is ${JSON.stringify(s[k])} but ${counted[k]} requirement(s) are ${k}`);
  return { requirements: (doc.requirements as unknown[]).length, summary: counted };
}

/**
 * Read a conformance file (scripts/conformance.mjs's reports/conformance.json): its path from the
 * working directory, the SHA-256 of its bytes and its counts. Refuses (a DetsimError naming the file
 * and `--conformance`) a file that cannot be read, is not strict JSON, has another
 * conformanceVersion, or whose summary disagrees with its requirements.
 */
export function readConformance(file: string): ConformanceDigest {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (e) {
    return refuse(file, `cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  const doc = parse(file, bytes);
  if (doc.conformanceVersion !== CONFORMANCE_VERSION)
    refuse(file, `conformanceVersion is ${JSON.stringify(doc.conformanceVersion)}, not ${CONFORMANCE_VERSION}`);
  return {
    path: posixPath(file),
    sha256: sha256Hex(bytes),
    conformanceVersion: CONFORMANCE_VERSION,
    ...summaryOf(file, doc),
  };
}

/**
 * The record for the attestation: `file` when given (it must be readable and valid), else
 * {@link DEFAULT_CONFORMANCE_FILE} when it exists, else `{present: false}` naming where verify looked.
 */
export function conformanceRecord(file?: string): ConformanceRecord {
  if (file === undefined && !existsSync(DEFAULT_CONFORMANCE_FILE))
    return { present: false, path: posixPath(DEFAULT_CONFORMANCE_FILE) };
  return { present: true, ...readConformance(file ?? DEFAULT_CONFORMANCE_FILE) };
}

/** One line for people (attestation.md, the CLI): the file, its digest and counts, or that there was none. */
export function describeConformance(c: ConformanceRecord): string {
  // The script is the checkout's (CI runs it after the tests); an installed package has none.
  if (!c.present)
    return existsSync('scripts/conformance.mjs')
      ? `none (no ${c.path}; run node scripts/conformance.mjs after the tests)`
      : `none (no ${c.path})`;
  const s = c.summary;
  return `${c.path} sha256 ${c.sha256} (${c.requirements} requirements: ${s.passed} passed, ${s.failed} failed, ${s.untested} untested, ${s.skipped} skipped)`;
}
