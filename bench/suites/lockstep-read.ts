// Bench helper: read a run directory's trace.jsonl (wall times only matter here). NOT a verifier.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TransitionTrace } from '../../coordinator/trace.js';

export function readRunTraces(runDir: string): TransitionTrace[] {
  // JSON.parse, not the strict parser: only wall times are read, and speed matters here.
  return readFileSync(join(runDir, 'trace.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as TransitionTrace);
}
