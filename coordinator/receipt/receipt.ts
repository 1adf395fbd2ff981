// The run receipt: run.json + the trace + summary.json of one run directory, with its evidence
// class and its ReproHash. receipt.json never copies the trace: it binds it by digest (`trace`,
// trace-store.ts TraceBinding), and the ReproHash is taken over the steps read back through the
// trace reader, one at a time. In memory (`buildReceipt`) a receipt carries its steps, for diff,
// replay and diagnosis. It does not run anything (replay.ts) and does not classify fields itself
// (fields.ts, canonical.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileDurable } from '../durable-file.js';
import { canonicalize, parseStrict, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { type UnknownField } from './canonical.js';
import { RECEIPT_VERSION } from './fields.js';
import { type Evidence, type HonestyWarning, SIMULATED, honestyWarnings } from './honesty.js';
import type { PlatformFingerprint } from './platform.js';
import { rebasedReceipt } from './rebase.js';
import { reproHash } from './reprohash.js';
import { ReproStepsHasher, reproHashOfSteps } from './streamed.js';
import {
  checkTraceBinding,
  readReproTexts,
  readTraceSync,
  ReproFileUnusable,
  traceBindingOf,
  type TraceBinding,
} from '../trace/trace-store.js';

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
  /** In memory: every step. receipt.json (written by writeReceipt) has none: it binds the trace as `trace`. */
  steps: JsonValue[];
  /** receipt.json: the trace files bound by SHA-256 (physical: the digests cover wall times). */
  trace?: TraceBinding;
  summary: JsonValue;
  finalStateDigests: FinalStateDigest[] | null;
  /** receipt.json (physical): the machine and software that finished the run (platform.ts); null when not given. */
  platformFingerprint?: PlatformFingerprint | null;
  /** Derived (physical): the ReproHash of this receipt and the unclassified fields found. */
  reproHash?: string;
  unknownFields?: UnknownField[];
}

/** receipt.json as written: no steps, the trace bound by digest instead. */
export type ReceiptFile = Omit<Receipt, 'steps'> & { trace: TraceBinding };

/** The files of a run directory a receipt is built from, parsed. */
export interface RunFiles {
  run: JsonValue;
  steps: JsonValue[];
  summary: JsonValue;
}

/** A run directory's JSON file, strictly parsed; missing or damaged: `struct_invalid_receipt` naming it. */
export function readJsonFile(path: string, what: string): JsonValue {
  if (!existsSync(path)) throw new DetsimError('struct_invalid_receipt', `${path}: ${what} is missing`, what);
  try {
    return parseStrict(readFileSync(path));
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError('struct_invalid_receipt', `${path}: ${e.message}`, what);
    throw e;
  }
}

/**
 * Read the three files of a run directory (strict JSON; the trace through the one reader, either
 * format). When the directory holds a receipt.json that binds its trace, the trace is checked
 * against that binding first (a missing, tampered or reordered segment is refused, named).
 */
export function readRunFiles(runDir: string): RunFiles {
  const run = readJsonFile(join(runDir, 'run.json'), 'run.json');
  const summary = readSummary(runDir);
  checkReceiptBinding(runDir);
  const steps = [...readTraceSync(runDir)] as unknown as JsonValue[];
  return { run, steps, summary };
}

/** A run's summary.json; without one (run.json is there) the run has not ended, and the refusal says what to do. */
export function readSummary(runDir: string): JsonValue {
  const path = join(runDir, 'summary.json');
  if (!existsSync(path) && existsSync(join(runDir, RECEIPT_FILE)))
    throw new DetsimError(
      'struct_invalid_receipt',
      `${path}: summary.json is missing, though receipt.json says the run ended: it was removed or not copied along (copy it back from where the run was made)`,
      'summary.json',
    );
  if (!existsSync(path))
    throw new DetsimError(
      'struct_invalid_receipt',
      `${path}: summary.json is missing: the run has not ended (it is still running, or it was killed: \`detsim resume ${runDir}\` finishes it from its last checkpoint)`,
      'summary.json',
    );
  return readJsonFile(path, 'summary.json');
}

/** A run directory's receipt.json and its trace verify together: the binding must hold (no-op without one). */
export function checkReceiptBinding(runDir: string): void {
  const path = join(runDir, RECEIPT_FILE);
  if (!existsSync(path)) return;
  const bound = readReceipt(path).trace;
  if (bound !== undefined) checkTraceBinding(runDir, bound, RECEIPT_FILE);
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
  /** As written to receipt.json (no steps; see {@link hydrateReceipt}). */
  readonly receipt: ReceiptFile;
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
 * (session.ts) calls it as the last act of every completed run and resume, with the platform
 * fingerprint of the process and fleet that finished it. The steps are read
 * through the trace reader one at a time (flat memory); the file binds the trace by digest.
 */
export function writeReceipt(
  runDir: string,
  opts: { evidence?: Evidence; generatedAt?: string; platform?: PlatformFingerprint } = {},
): ReceiptResult {
  const run = readJsonFile(join(runDir, 'run.json'), 'run.json');
  const summary = readJsonFile(join(runDir, 'summary.json'), 'summary.json');
  const trace = traceBindingOf(runDir);
  // generated_at is physical: excluded from the hash, recorded for people.
  const { steps: _none, ...built } = buildReceipt(
    { run, summary, steps: [] },
    opts.evidence ?? SIMULATED,
    opts.generatedAt ?? new Date().toISOString(),
  );
  // platformFingerprint is physical too: where the run was finished, never part of the hash.
  const head = { ...built, platformFingerprint: opts.platform ?? null };
  const sealed = sealedFromReproFiles(head, runDir) ?? sealedByWalkingTrace(head, runDir);
  const receipt: ReceiptFile = {
    ...head,
    trace,
    reproHash: sealed.reproHash,
    unknownFields: [...sealed.unknownFields],
  };
  const receiptPath = join(runDir, RECEIPT_FILE);
  writeFileDurable(receiptPath, `${canonicalize(receipt)}\n`);
  return {
    reproHash: sealed.reproHash,
    unknownFields: sealed.unknownFields,
    honesty: honestyWarnings(receipt),
    receiptPath,
    receipt,
  };
}

type Sealed = { reproHash: string; unknownFields: readonly UnknownField[] };

/**
 * The ReproHash from the trace's repro files (each step's text made when its segment was sealed):
 * SHA-256 over text already made, no step parsed or walked again. Null when the trace has none
 * (an older or jsonl trace) or one is not the file the index names.
 */
function sealedFromReproFiles(head: Omit<Receipt, 'steps'>, runDir: string): Sealed | null {
  const segments = readReproTexts(runDir);
  if (segments === null) return null;
  const hasher = new ReproStepsHasher(head as unknown as Record<string, unknown>);
  try {
    for (const s of segments) hasher.addTexts(s.texts, s.unknownFields);
  } catch (e) {
    if (e instanceof ReproFileUnusable) return null;
    throw e;
  }
  return hasher.finish();
}

/** The ReproHash by reading every step of the trace and walking it (streamed, flat memory). */
function sealedByWalkingTrace(head: Omit<Receipt, 'steps'>, runDir: string): Sealed {
  return reproHashOfSteps(head as unknown as Record<string, unknown>, () => readTraceSync(runDir));
}

/**
 * A receipt.json with its steps read back from the run directory's trace, after checking that the
 * trace is the one it binds: the in-memory receipt diff, replay and diagnosis compare.
 */
export function hydrateReceipt(runDir: string, file: Omit<Receipt, 'steps'> & { steps?: JsonValue[] }): Receipt {
  if (file.trace === undefined) return { ...file, steps: file.steps ?? [] };
  checkTraceBinding(runDir, file.trace, RECEIPT_FILE);
  return { ...file, steps: [...readTraceSync(runDir)] as unknown as JsonValue[] };
}

/**
 * Recompute a receipt.json's ReproHash from the trace it binds in `runDir`: the binding is checked
 * first (a missing, tampered or reordered segment is refused, named), then every step is read and
 * walked, not taken from the repro files. What `detsim evidence verify` re-checks a claim with.
 */
export function recomputeReproHash(runDir: string, file: ReceiptFile): string {
  const { trace, reproHash: _h, unknownFields: _u, ...head } = file;
  if (trace === undefined) return sealReceipt({ ...head, steps: [] }).reproHash;
  checkTraceBinding(runDir, trace, RECEIPT_FILE);
  return sealedByWalkingTrace(head, runDir).reproHash;
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

/**
 * When the run's receipt.json records another ReproHash than `recomputed` (what its trace, run.json
 * and summary.json give now): the file, both hashes and what that means; null when they agree or
 * there is no receipt. diff and replay rebuild a run's receipt from its files, and say so.
 */
export function receiptDisagreement(
  runDir: string,
  recomputed: string,
): { file: string; recorded: string; recomputed: string; message: string } | null {
  const file = join(runDir, RECEIPT_FILE);
  if (!existsSync(file)) return null;
  const recorded = readReceipt(file).reproHash;
  if (recorded === recomputed) return null;
  return {
    file,
    recorded: String(recorded),
    recomputed,
    message: `${file} records ReproHash ${String(recorded)}, and the run's trace, run.json and summary.json give ${recomputed}: a file of the run was changed after its receipt was written (or a resume of it has not ended)`,
  };
}

/** Read receipt.json back (strict). A receipt that binds its trace has no steps: see {@link hydrateReceipt}. */
export function readReceipt(path: string): Receipt {
  const v = readJsonFile(path, RECEIPT_FILE);
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new DetsimError('struct_invalid_receipt', `${path}: not a JSON object`, RECEIPT_FILE);
  return v as unknown as Receipt;
}
