// What resume's check of the kept trace costs (#28 item 4): times stageSegmentedCut at boundary K
// of a segmented run directory, three alternating rounds of each mode — no check, `bytes` (each kept
// segment hashed, the kept entries against the index digest the ledger recorded) and `full` (every
// kept step hashed again: a run whose ledger recorded no digest). Staged files are discarded, so the
// run directory is left as it was. Usage:
//   node --import tsx bench/resume-trace-check.ts <run-dir> <K>
// The run of bench/README.md: `detsim run fw.yaml --checkpoint-every 1000 --out runs` with fw.yaml
// examples/forage-walkers.yaml at steps: 20000 and workers.transport: thread; K = 19000.
// NOT a CI test: it needs a long run directory.
import { discardStaged } from '../coordinator/durable-file.js';
import { canonicalBehaviour, type TransitionTrace } from '../coordinator/trace/trace.js';
import { indexDigestOf, readTraceIndex, stageSegmentedCut } from '../coordinator/trace/trace-store.js';
import { parseStrict } from '../core/formats/canonical-json.js';

const [runDir, boundary] = process.argv.slice(2);
if (!runDir || !boundary) {
  console.error('usage: node --import tsx bench/resume-trace-check.ts <run-dir> <K>');
  process.exit(2);
}
const k = BigInt(boundary);
const rebased = (l: string) => canonicalBehaviour((parseStrict(l) as unknown as TransitionTrace).behaviour);
const kept = readTraceIndex(runDir).filter((s) => BigInt(s.firstStep) + BigInt(s.steps) <= k);
const keptIndexDigest = indexDigestOf(kept);
const modes = {
  none: {},
  bytes: { verifyKept: 'bytes' as const, keptIndexDigest },
  full: { verifyKept: 'full' as const },
};
for (let round = 1; round <= 3; round++)
  for (const [mode, opts] of Object.entries(modes)) {
    const t = performance.now();
    discardStaged(stageSegmentedCut(runDir, k, rebased, opts).staged);
    console.log(`round ${round}  ${mode.padEnd(5)} ${(performance.now() - t).toFixed(0)} ms`);
  }
