// Bench helper: read a run directory's trace.jsonl (wall times only matter here). NOT a verifier.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseTraceLines, type TransitionTrace } from '../../coordinator/trace.js';

export function readRunTraces(runDir: string): TransitionTrace[] {
  return parseTraceLines(readFileSync(join(runDir, 'trace.jsonl'), 'utf8'));
}
