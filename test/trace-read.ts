// Test helper: a run directory's trace read through the library's one reader (trace-store.ts
// readTraceSync / readTraceLinesSync), whatever its on-disk format (segments, or the trace.jsonl of
// an older detsim), so tests see what every command sees; `editTrace`, which rewrites a trace's
// lines in place in either format, as a hand edit would (segment files and index re-bound, the
// saved digest states left as they were); and `asOlderRun`, which turns a run directory into what
// an older detsim wrote (one trace.jsonl). NOT a reader of its own, and not for production code.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { canonicalize } from '../core/formats/canonical-json.js';
import {
  readTraceIndex,
  readTraceLinesSync,
  readTraceSync,
  TRACE_DIR,
  TRACE_INDEX,
  TRACE_JSONL,
  traceFormatOf,
} from '../coordinator/trace/trace-store.js';
import type { TransitionTrace } from '../coordinator/trace/trace.js';
import { writeReceipt } from '../coordinator/receipt/receipt.js';

/** The trace's steps in order, parsed (either format). */
export function traceOf(runDir: string): TransitionTrace[] {
  return [...readTraceSync(runDir)];
}

/** The trace's canonical lines in order (either format). */
export function traceLinesOf(runDir: string): string[] {
  return [...readTraceLinesSync(runDir)];
}

/** The step number of every trace line, in order. */
export function traceStepsOf(runDir: string): number[] {
  return traceOf(runDir).map((t) => Number(t.behaviour.scope.step));
}

/**
 * Steps durable on disk so far while a run is going (0 before the trace exists): trace.jsonl's
 * lines, or the steps of the segments the index lists (a segment appears once sealed, e.g. at
 * each checkpoint). A probe for tests that wait on a live run; not the reader.
 */
export function stepsOnDisk(runDir: string): number {
  const format = traceFormatOf(runDir);
  if (format === null) return 0;
  if (format === 'jsonl') return readFileSync(join(runDir, TRACE_JSONL), 'utf8').split('\n').length - 1;
  return readTraceIndex(runDir).reduce((n, s) => n + s.steps, 0);
}

/** The trace's bytes on disk as one string (trace.jsonl, or the segments' compressed bytes): to see it unchanged. */
export function traceFingerprint(runDir: string): string {
  if (traceFormatOf(runDir) === 'jsonl') return readFileSync(join(runDir, TRACE_JSONL), 'utf8');
  const dir = join(runDir, TRACE_DIR);
  const index = readFileSync(join(dir, TRACE_INDEX), 'utf8');
  return [index, ...readTraceIndex(runDir).map((s) => readFileSync(join(dir, s.segment)).toString('base64'))].join();
}

/**
 * Rewrite the trace's lines in place (same count): `edit` gets every line in step order. A
 * segmented trace gets each changed segment recompressed and its index entry's bytes and SHA-256
 * updated, so the reader accepts it while a receipt that bound the old bytes does not.
 */
export function editTrace(runDir: string, edit: (lines: string[]) => string[]): void {
  const lines = edit(traceLinesOf(runDir));
  if (traceFormatOf(runDir) === 'jsonl') {
    writeFileSync(join(runDir, TRACE_JSONL), lines.map((l) => `${l}\n`).join(''));
    return;
  }
  const dir = join(runDir, TRACE_DIR);
  let at = 0;
  const index = readTraceIndex(runDir).map((s) => {
    const mine = lines.slice(at, (at += s.steps));
    const old = gunzipSync(readFileSync(join(dir, s.segment))).toString('utf8');
    const text = mine.map((l) => `${l}\n`).join('');
    if (text === old) return s;
    const gz = gzipSync(text);
    writeFileSync(join(dir, s.segment), gz);
    // The segment's repro file was made from its old lines: gone with them (a receipt then walks the lines).
    const { repro, ...rest } = s;
    if (repro) rmSync(join(dir, repro.file), { force: true });
    return { ...rest, bytes: gz.byteLength, sha256: createHash('sha256').update(gz).digest('hex') };
  });
  writeFileSync(join(dir, TRACE_INDEX), index.map((s) => `${canonicalize(s)}\n`).join(''));
}

/**
 * The run directory as an older detsim wrote it: the same lines in one trace.jsonl (trace/ gone)
 * and, when the run had one, receipt.json sealed again over it by the product's receipt writer.
 * Returns that receipt's ReproHash (null without a receipt).
 */
export function asOlderRun(runDir: string): string | null {
  const lines = traceLinesOf(runDir);
  writeFileSync(join(runDir, TRACE_JSONL), lines.map((l) => `${l}\n`).join(''));
  rmSync(join(runDir, TRACE_DIR), { recursive: true });
  return existsSync(join(runDir, 'receipt.json')) ? writeReceipt(runDir).reproHash : null;
}
