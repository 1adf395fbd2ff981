// Bench helper: read a run directory's trace, either format, through the library's reader (wall
// times only matter here). NOT a verifier.
import type { TransitionTrace } from '../../coordinator/trace/trace.js';
import { readTraceLinesSync } from '../../coordinator/trace/trace-store.js';

export function readRunTraces(runDir: string): TransitionTrace[] {
  // JSON.parse, not the strict parser: only wall times are read, and speed matters here.
  return [...readTraceLinesSync(runDir)].map((l) => JSON.parse(l) as TransitionTrace);
}
