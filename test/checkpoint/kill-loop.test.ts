// A short SIGKILL loop in CI: `detsim run --checkpoint-every 2` killed at a seeded random moment
// after its first commit; `detsim store verify` passes and `detsim resume` works every time, with
// traces and digest equal to an uninterrupted run. The long version: bench/resume-kill-loop.ts.
import { describe, expect, it } from 'vitest';
import { runResumeKillLoop } from '../../bench/resume-kill-loop.js';

describe('resume SIGKILL loop (short)', () => {
  it('[STORE-20] 2 iterations: store verifies, resume works, behaviour equals the uninterrupted run', async () => {
    const lines: string[] = [];
    const r = await runResumeKillLoop({
      iterations: 2,
      seed: 7,
      referenceSteps: 24,
      maxDelayMs: 800,
      log: (l) => lines.push(l),
    });
    for (const it of r.iterations) {
      expect(it.killed, lines.join('\n')).toBe(true);
      expect(it.storeVerified, lines.join('\n')).toBe(true);
      expect(it.resumed, lines.join('\n')).toBe(true);
      expect(it.equal, lines.join('\n')).toBe(true);
    }
  }, 600_000);
});
