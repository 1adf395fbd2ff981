// The trace's observations sidecar, read back (`detsim run --trace-observations`; docs/guide.md
// "Exporting a trace as a table"): beside each segment NNNNNN.jsonl.gz the index lists,
// NNNNNN.observations.jsonl.gz holds one line per step, the canonical JSON text of the observations
// the environment returned (in its order), the very text whose SHA-256 is the step's
// observationDigest. The sidecar is physical (in no hash, no index), so it is trusted only step by
// step against the hashed trace: a line whose SHA-256 is not the trace's digest is refused
// (audit_trace_observations_mismatch), naming the file and the step. Only the segments the index
// lists are read, so a resumed run's abandoned-* sidecars never count.
// NOT the writing (trace-store.ts writes it with the segments) nor the table (export/trace-table.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { parseExpectedCanonical, sha256Hex, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { observationsName, readTraceIndex, traceFormatOf, TRACE_DIR } from './trace-store.js';
import type { TransitionTrace } from './trace.js';

/** One agent's observation: a JSON object (the step loop refuses any other). */
export type Observation = Record<string, JsonValue>;

/** One step's line of a sidecar, and the file it is in. */
export interface ObservationsLine {
  readonly file: string;
  readonly line: string;
}

/** Whether a run records its observations sidecar: run.json says `traceObservations: true`. */
export function recordsObservations(runDir: string): boolean {
  const path = join(runDir, 'run.json');
  if (!existsSync(path)) return false;
  try {
    const run = JSON.parse(readFileSync(path, 'utf8')) as { traceObservations?: unknown } | null;
    return run?.traceObservations === true;
  } catch {
    return false; // a malformed run.json is refused by what reads it for real (the receipt check)
  }
}

const missing = (path: string, why: string, field: string) =>
  new DetsimError('audit_trace_observations_missing', `${path}: ${why}`, field);

/** The lines of one segment's sidecar: present, readable, one per step the index says it holds. */
function sidecarLines(dir: string, segment: string, steps: number, i: number): string[] {
  const path = join(dir, observationsName(segment));
  const field = `trace.segments[${i}]`;
  if (!existsSync(path))
    throw missing(
      path,
      `the observations of segment ${segment} are missing (run.json records traceObservations)`,
      field,
    );
  let lines: string[];
  try {
    lines = gunzipSync(readFileSync(path)).toString('utf8').split('\n');
  } catch (e) {
    throw new DetsimError(
      'audit_trace_observations_mismatch',
      `${path}: not a readable gzip (${(e as Error).message})`,
      field,
    );
  }
  if (lines[lines.length - 1] === '') lines.pop();
  if (lines.length !== steps)
    throw new DetsimError(
      'audit_trace_observations_mismatch',
      `${path}: holds ${lines.length} steps' observations, segment ${segment} holds ${steps} steps`,
      field,
    );
  return lines;
}

/** Each step's sidecar line, in step order, over the segments the index lists. */
export function* readObservationLines(runDir: string): Generator<ObservationsLine> {
  if (traceFormatOf(runDir) !== 'segments')
    throw missing(runDir, 'run.json records traceObservations but the trace has no segments', 'trace');
  const dir = join(runDir, TRACE_DIR);
  for (const [i, s] of readTraceIndex(runDir).entries()) {
    const file = join(dir, observationsName(s.segment));
    for (const line of sidecarLines(dir, s.segment, s.steps, i)) yield { file, line };
  }
}

/**
 * One step's observations by agent id, once its sidecar line is proved to be the text the trace's
 * observationDigest hashes (re-hashed exactly as the step loop hashed it: SHA-256 of the canonical text).
 */
export function checkedObservations(at: ObservationsLine | undefined, t: TransitionTrace): Map<string, Observation> {
  const step = t.behaviour.scope.step;
  if (at === undefined)
    throw new DetsimError(
      'audit_trace_observations_mismatch',
      `the observations sidecar ends before step ${step}`,
      'trace',
    );
  const digest = sha256Hex(at.line);
  if (digest !== t.behaviour.observationDigest)
    throw new DetsimError(
      'audit_trace_observations_mismatch',
      `${at.file}: step ${step}: the observations hash to ${digest}, the trace's observationDigest is ${t.behaviour.observationDigest}`,
      `step ${step}`,
    );
  // The text hashes to the digest the step loop took of canonical text: the native parse, proven.
  const list = parseExpectedCanonical(at.line) as unknown as { agentId: string; observation: JsonValue }[];
  const out = new Map<string, Observation>();
  for (const o of list) out.set(o.agentId, o.observation as Observation);
  return out;
}
