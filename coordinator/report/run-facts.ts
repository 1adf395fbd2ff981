// The facts of a run directory a report shows besides its trace: identities (run.json, summary.json,
// receipt.json), the checkpoint timeline, resumes and recoveries (the hash-chained ledger.jsonl, its
// chain checked) and notable run.log lines (worker deaths, recoveries, start and end), each file
// read as it is. NOT the trace (series.ts, read-run.ts) and not the page (html.ts).
import { closeSync, existsSync, openSync, readFileSync, readSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseStrict, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { readRunJson, type RunJson } from '../session/run-json.js';
import { LEDGER_FILE, LEDGER_HEAD_FILE, ledgerEntries, verifyLedgerBytes } from '../store/ledger.js';

type Obj = Record<string, JsonValue>;

/** A JSON file of the run directory, strict; null when absent. A file that is not JSON is refused, named. */
export function readJsonFileOrNull(path: string): Obj | null {
  if (!existsSync(path)) return null;
  try {
    const v = parseStrict(readFileSync(path));
    if (v === null || typeof v !== 'object' || Array.isArray(v))
      throw new DetsimError('struct_invalid_field', 'not a JSON object', path);
    return v;
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `${path}: ${e.message}`, path);
    throw e;
  }
}

/** run.json through its one schema (refused naming the file and field), with the raw record beside it. */
export function readRunRecord(runDir: string): { run: RunJson; raw: Obj } {
  const path = join(runDir, 'run.json');
  const raw = readJsonFileOrNull(path);
  if (raw === null)
    throw new DetsimError('struct_report_source', `${runDir}: no run.json (not a run directory)`, 'run.json');
  try {
    return { run: readRunJson(raw), raw };
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `${path}: ${e.message}`, e.field);
    throw e;
  }
}

/** One point of the checkpoint timeline: a ledger line, at the step it concerns. */
export interface TimelineEvent {
  seq: number;
  event: string;
  lane: TimelineLane;
  step: number;
  epoch: string | null;
  checkpointId: string | null;
  /** A short readable account of the line's detail. */
  note: string;
}

/** The timeline's lanes, bottom to top. */
export const TIMELINE_LANES = ['captured', 'committed', 'not committed', 'restored', 'recovery'] as const;
export type TimelineLane = (typeof TIMELINE_LANES)[number];

/** What the ledger says: its chain, the timeline, resumes and recoveries. */
export interface LedgerFacts {
  present: boolean;
  /** The chain check: ok, or the first problem (line, reason, message). */
  chain: { ok: boolean; lines: number; problem: string | null };
  timeline: TimelineEvent[];
}

const str = (v: JsonValue | undefined): string | null => (typeof v === 'string' ? v : null);

function laneOf(event: string, detail: Obj): TimelineLane | null {
  if (event === 'captured') return detail.durable === false ? 'not committed' : 'captured';
  if (event === 'committed') return 'committed';
  if (event === 'failed' || event === 'superseded') return 'not committed';
  if (event === 'restored') return 'restored';
  if (event === 'recovery') return 'recovery';
  return null;
}

function noteOf(event: string, d: Obj): string {
  const pick = (keys: string[]) =>
    keys
      .filter((k) => d[k] !== undefined && d[k] !== null)
      .map((k) => `${k} ${typeof d[k] === 'string' ? d[k] : JSON.stringify(d[k])}`)
      .join(', ');
  if (event === 'recovery')
    return `worker ${str(d.workerId) ?? '?'} ${str(d.reason) ?? ''} at step ${str(d.step) ?? '?'} (${str(d.phase) ?? '?'}); restart ${str(d.restart) ?? '?'} of ${str(d.maxRestarts) ?? '?'}, ${str(d.stepsRepeated) ?? '?'} steps repeated, ${str(d.fromEpoch) ?? '?'} → new epoch`;
  if (event === 'restored')
    return `${d.recovery !== undefined ? 'recovery' : 'resume'} from ${str(d.fromEpoch) ?? '?'}; ${pick(['abandonedSteps'])}`;
  return pick(['durable', 'byteLength', 'generation', 'error', 'reason', 'message']);
}

/** The ledger's lines as timeline events (a recovery at the step its worker was lost, the rest at their boundary). */
function timelineOf(bytes: Buffer): TimelineEvent[] {
  const out: TimelineEvent[] = [];
  for (const { line } of ledgerEntries(bytes)) {
    const detail = (line.detail ?? {}) as Obj;
    const lane = laneOf(line.event, detail);
    if (lane === null) continue;
    const at = line.event === 'recovery' ? (str(detail.step) ?? line.boundary) : line.boundary;
    out.push({
      seq: Number(line.seq),
      event: line.event,
      lane,
      step: Number(at ?? 0),
      epoch: line.epoch ?? null,
      checkpointId: line.checkpointId ?? null,
      note: noteOf(line.event, detail),
    });
  }
  return out;
}

/** The ledger of a run directory (absent: a run without checkpoints). A line that is not a ledger entry is refused. */
export function readLedgerFacts(runDir: string): LedgerFacts {
  const path = join(runDir, LEDGER_FILE);
  if (!existsSync(path)) return { present: false, chain: { ok: true, lines: 0, problem: null }, timeline: [] };
  const bytes = readFileSync(path);
  const headPath = join(runDir, LEDGER_HEAD_FILE);
  const verified = verifyLedgerBytes(bytes, existsSync(headPath) ? readFileSync(headPath) : null);
  const p = verified.problem;
  let timeline: TimelineEvent[];
  try {
    timeline = timelineOf(bytes);
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `${path}: ${e.message}`, LEDGER_FILE);
    throw e;
  }
  return {
    present: true,
    chain: { ok: verified.ok, lines: verified.lines, problem: p ? `line ${p.line}: [${p.reason}] ${p.message}` : null },
    timeline,
  };
}

/** One notable run.log line. */
export interface LogEvent {
  time: string;
  level: number;
  msg: string;
  detail: string;
}

/** run.log lines kept for the page (the first ones; the rest are counted). */
export const MAX_LOG_EVENTS = 200;
const NOTABLE = new Set([
  'run started',
  'resume started',
  'restored',
  'recovered from a lost worker',
  'run finished',
  'resume finished',
  'run interrupted',
  'resume interrupted',
]);

function notable(o: Obj): LogEvent | null {
  const msg = str(o.msg) ?? '';
  const level = typeof o.level === 'number' ? o.level : 0;
  const died = msg === 'worker exited' && (o.signal !== null || (o.code !== 0 && o.code !== undefined));
  if (!NOTABLE.has(msg) && !died && level < 50) return null;
  const time = typeof o.time === 'number' ? new Date(o.time).toISOString() : '';
  const keys = ['workerId', 'code', 'signal', 'checkpointId', 'boundary', 'epoch', 'steps', 'total', 'recovery', 'err'];
  const detail = keys
    .filter((k) => o[k] !== undefined)
    .map((k) => `${k}=${typeof o[k] === 'string' ? o[k] : JSON.stringify(o[k])}`)
    .join(' ');
  return { time, level, msg, detail: detail.slice(0, 400) };
}

/** The lines of a file, read in chunks (a long run.log is never held whole). */
function* linesOf(path: string): Generator<string> {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(1 << 16);
    let rest = '';
    for (let n = readSync(fd, buf); n > 0; n = readSync(fd, buf)) {
      const parts = (rest + buf.toString('utf8', 0, n)).split('\n');
      rest = parts.pop()!;
      yield* parts;
    }
    if (rest.length > 0) yield rest;
  } finally {
    closeSync(fd);
  }
}

/** Notable run.log lines (pino JSON; a line that is not JSON, e.g. a worker's raw stderr, is skipped). */
export function readLogEvents(runDir: string): { events: LogEvent[]; more: number } {
  const path = join(runDir, 'run.log');
  const events: LogEvent[] = [];
  let more = 0;
  if (!existsSync(path)) return { events, more };
  for (const line of linesOf(path)) {
    if (!line.startsWith('{')) continue;
    let o: unknown;
    try {
      o = JSON.parse(line);
    } catch {
      continue;
    }
    const e = o !== null && typeof o === 'object' ? notable(o as Obj) : null;
    if (e === null) continue;
    if (events.length < MAX_LOG_EVENTS) events.push(e);
    else more++;
  }
  return { events, more };
}

/** The run's id: its directory's name (`<session>-<n>`). */
export const runIdOf = (runDir: string): string => basename(runDir.replace(/\/+$/, ''));
