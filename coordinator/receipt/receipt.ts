// The run receipt: run.json + trace.jsonl + summary.json of one run directory gathered into
// receipt.json with its evidence class, and its ReproHash. It does not run anything (replay.ts)
// and does not classify fields itself (fields.ts, canonical.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileDurable } from '../durable-file.js';
import { canonicalize, parseStrict, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { type UnknownField } from './canonical.js';
import { RECEIPT_VERSION } from './fields.js';
import { type Evidence, type HonestyWarning, SIMULATED, honestyWarnings } from './honesty.js';
import { rebasedReceipt } from './rebase.js';
import { reproHash } from './reprohash.js';

/** The receipt's file name inside a run directory. */
export const RECEIPT_FILE = 'receipt.json';

/** The state digest of one participant at the end of a run. */
export interface FinalStateDigest {
  participantId: string;
  digest: string;
}

/** A run receipt (receipt.json): run.json, every step trace and summary.json, with its evidence class. */
export interface Receipt {
  receiptVersion: string;
  evidence_class: Evidence['evidence_class'];
  measure_source: string | null;
  measure_ts: string | null;
  generated_at: string | null;
  run: JsonValue;
  steps: JsonValue[];
  summary: JsonValue;
  finalStateDigests: FinalStateDigest[] | null;
  /** Derived (physical): the ReproHash of this receipt and the unclassified fields found. */
  reproHash?: string;
  unknownFields?: UnknownField[];
}

/** The files of a run directory a receipt is built from, parsed. */
export interface RunFiles {
  run: JsonValue;
  steps: JsonValue[];
  summary: JsonValue;
}

function readJsonFile(path: string, what: string): JsonValue {
  if (!existsSync(path)) throw new DetsimError('struct_invalid_receipt', `${path}: ${what} is missing`, what);
  try {
    return parseStrict(readFileSync(path));
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError('struct_invalid_receipt', `${path}: ${e.message}`, what);
    throw e;
  }
}

/** Read the three files of a run directory (strict JSON; one trace per line). */
export function readRunFiles(runDir: string): RunFiles {
  const run = readJsonFile(join(runDir, 'run.json'), 'run.json');
  const summary = readJsonFile(join(runDir, 'summary.json'), 'summary.json');
  const tracePath = join(runDir, 'trace.jsonl');
  if (!existsSync(tracePath))
    throw new DetsimError('struct_invalid_receipt', `${tracePath}: trace.jsonl is missing`, 'trace.jsonl');
  const steps = readFileSync(tracePath, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((line, i) => {
      try {
        return parseStrict(line);
      } catch (e) {
        if (e instanceof DetsimError)
          throw new DetsimError(
            'struct_invalid_receipt',
            `${tracePath}: line ${i + 1}: ${e.message}`,
            `trace.jsonl:${i + 1}`,
          );
        throw e;
      }
    });
  return { run, steps, summary };
}

/** Final state digests recorded by the run, if it recorded any (summary.finalStateDigests). */
function finalDigestsOf(summary: JsonValue): FinalStateDigest[] | null {
  if (summary === null || typeof summary !== 'object' || Array.isArray(summary)) return null;
  const f = (summary as Record<string, JsonValue>).finalStateDigests;
  return Array.isArray(f) ? (f as unknown as FinalStateDigest[]) : null;
}

/** Assemble a receipt (without its derived fields). `generatedAt` is physical. */
export function buildReceipt(
  files: RunFiles,
  evidence: Evidence = SIMULATED,
  generatedAt: string | null = null,
): Receipt {
  return {
    receiptVersion: RECEIPT_VERSION,
    evidence_class: evidence.evidence_class,
    measure_source: evidence.measure_source,
    measure_ts: evidence.measure_ts,
    generated_at: generatedAt,
    run: files.run,
    steps: files.steps,
    summary: files.summary,
    finalStateDigests: finalDigestsOf(files.summary),
  };
}

/** A written receipt: its ReproHash, path, unknown fields and honesty warnings. */
export interface ReceiptResult {
  readonly reproHash: string;
  readonly unknownFields: readonly UnknownField[];
  readonly honesty: readonly HonestyWarning[];
  readonly receiptPath: string;
  readonly receipt: Receipt;
}

export { writeFileDurable };

/**
 * Hash a receipt and attach its derived fields (the hash never covers itself). A resumed run's
 * later epochs are rebased onto its first for the hash (rebase.ts), so it equals the
 * uninterrupted run's; the receipt itself keeps the steps as they were recorded.
 */
export function sealReceipt(receipt: Receipt): {
  receipt: Receipt;
  reproHash: string;
  unknownFields: readonly UnknownField[];
} {
  const { reproHash: _h, unknownFields: _u, ...unsealed } = receipt;
  const h = reproHash(rebasedReceipt(unsealed));
  return {
    receipt: { ...unsealed, reproHash: h.reproHash, unknownFields: [...h.unknownFields] },
    reproHash: h.reproHash,
    unknownFields: h.unknownFields,
  };
}

/**
 * Build receipt.json for a finished run directory and return its ReproHash. The session loop
 * (session.ts) calls it as the last act of every completed run and resume.
 */
export function writeReceipt(runDir: string, opts: { evidence?: Evidence; generatedAt?: string } = {}): ReceiptResult {
  const files = readRunFiles(runDir);
  // generated_at is physical: excluded from the hash, recorded for people.
  const receipt = buildReceipt(files, opts.evidence ?? SIMULATED, opts.generatedAt ?? new Date().toISOString());
  const sealed = sealReceipt(receipt);
  const receiptPath = join(runDir, RECEIPT_FILE);
  writeFileDurable(receiptPath, `${canonicalize(sealed.receipt)}\n`);
  return {
    reproHash: sealed.reproHash,
    unknownFields: sealed.unknownFields,
    honesty: honestyWarnings(sealed.receipt),
    receiptPath,
    receipt: sealed.receipt,
  };
}

/** One line per unclassified field or honesty warning of a written receipt (for stderr). */
export function receiptWarnings(r: Pick<ReceiptResult, 'unknownFields' | 'honesty'>): string[] {
  return [
    ...r.unknownFields.map(
      (u) =>
        `detsim: [meta_unclassified_field] receipt field ${u.path} (${u.count}×) is not in the classification table: treated as physical`,
    ),
    ...r.honesty.map((h) => `detsim: [${h.reason}] ${h.check}: ${h.message}`),
  ];
}

/** Read receipt.json back (strict). */
export function readReceipt(path: string): Receipt {
  const v = readJsonFile(path, RECEIPT_FILE);
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new DetsimError('struct_invalid_receipt', `${path}: not a JSON object`, RECEIPT_FILE);
  return v as unknown as Receipt;
}
