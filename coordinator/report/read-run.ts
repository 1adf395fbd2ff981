// One run directory read for a report, in one pass over its trace: the trace checked against the
// receipt that binds it (a missing, tampered or reordered segment is refused, named), the ReproHash
// recomputed from the steps as they stream by (the DIFF=0 verdict against receipt.json) while the
// same steps feed the series (series.ts); then the ledger and run.log facts (run-facts.ts).
// Flat memory: one trace segment at a time. NOT the page (html.ts) and not a sweep (sweep.ts).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { JsonValue } from '../../core/formats/canonical-json.js';
import { recomputeReproHash, RECEIPT_FILE, readReceipt, sealReceipt, type ReceiptFile } from '../receipt/receipt.js';
import { StepsOutOfOrder, streamedReproHash } from '../receipt/streamed.js';
import type { RunJson } from '../session/run-json.js';
import { checkTraceBinding, readTraceSync, traceBindingOf } from '../trace/trace-store.js';
import type { TransitionTrace } from '../trace/trace.js';
import {
  readJsonFileOrNull,
  readLedgerFacts,
  readLogEvents,
  readRunRecord,
  runIdOf,
  type LedgerFacts,
  type LogEvent,
} from './run-facts.js';
import { MAX_POINTS, SeriesBuilder, type RunSeries } from './series.js';

/** The DIFF=0 verdict a report can give: the receipt's ReproHash against the one its trace gives now. */
export interface ReceiptVerdict {
  /** `diff0`: the same; `differs`: not the same (the report says so, the command exits 1); `none`: no receipt.json. */
  status: 'diff0' | 'differs' | 'none';
  receiptReproHash: string | null;
  recomputedReproHash: string | null;
  generatedAt: string | null;
  platform: JsonValue | null;
}

/** Everything a report shows of one run. */
export interface RunData {
  runDir: string;
  runId: string;
  run: RunJson;
  raw: Record<string, JsonValue>;
  summary: Record<string, JsonValue> | null;
  verdict: ReceiptVerdict;
  series: RunSeries;
  ledger: LedgerFacts;
  log: { events: LogEvent[]; more: number };
  /** run.lock present: a run or resume may be writing this directory now. */
  locked: boolean;
}

/** The steps of `runDir`'s trace, each also handed to `builder` as it passes. */
function* feeding(runDir: string, builder: SeriesBuilder): Generator<TransitionTrace> {
  for (const t of readTraceSync(runDir)) {
    builder.add(t);
    yield t;
  }
}

function drain(steps: Iterable<unknown>): void {
  for (const _ of steps);
}

/** Read the trace once: the series, and the ReproHash recomputed when there is a receipt. */
function walk(runDir: string, builder: () => SeriesBuilder): { series: RunSeries; verdict: ReceiptVerdict } {
  const path = join(runDir, RECEIPT_FILE);
  if (!existsSync(path)) {
    const b = builder();
    drain(feeding(runDir, b));
    const none = { receiptReproHash: null, recomputedReproHash: null, generatedAt: null, platform: null };
    return { series: b.finish(), verdict: { status: 'none', ...none } };
  }
  const file = readReceipt(path) as unknown as ReceiptFile & { steps?: JsonValue[] };
  const { trace, reproHash: recorded, unknownFields: _u, steps: inline, ...head } = file;
  let b = builder();
  let recomputed: string;
  if (trace === undefined) {
    drain(feeding(runDir, b));
    recomputed = sealReceipt({ ...head, steps: inline ?? [] }).reproHash;
  } else {
    checkTraceBinding(runDir, trace, RECEIPT_FILE);
    try {
      recomputed = streamedReproHash(head as Record<string, unknown>, feeding(runDir, b)).reproHash;
    } catch (e) {
      if (!(e instanceof StepsOutOfOrder)) throw e;
      // An old trace out of step order: the receipt's own path hashes it in memory; the series read again.
      recomputed = recomputeReproHash(runDir, file);
      b = builder();
      drain(feeding(runDir, b));
    }
  }
  const verdict: ReceiptVerdict = {
    status: recorded === recomputed ? 'diff0' : 'differs',
    receiptReproHash: recorded ?? null,
    recomputedReproHash: recomputed,
    generatedAt: file.generated_at ?? null,
    platform: (file.platformFingerprint ?? null) as JsonValue,
  };
  return { series: b.finish(), verdict };
}

/** Read one run directory for a report (see the file comment). */
export function readRun(runDir: string, maxPoints = MAX_POINTS): RunData {
  const { run, raw } = readRunRecord(runDir);
  const summary = readJsonFileOrNull(join(runDir, 'summary.json'));
  const planned = traceBindingOf(runDir).steps;
  const agentIds = run.agents.map((a) => a.agentId);
  const { series, verdict } = walk(runDir, () => new SeriesBuilder(planned, agentIds, maxPoints));
  return {
    runDir,
    runId: runIdOf(runDir),
    run,
    raw,
    summary,
    verdict,
    series,
    ledger: readLedgerFacts(runDir),
    log: readLogEvents(runDir),
    locked: existsSync(join(runDir, 'run.lock')),
  };
}
