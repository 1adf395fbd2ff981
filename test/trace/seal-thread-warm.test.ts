// When the trace's sealing thread starts (coordinator/trace/trace-store.ts, issue 30): a writer told
// that its session will append more steps than one piece (SEAL_PIECE_STEPS) starts the thread at once,
// so the thread's start-up overlaps the workers' instead of stalling the run at its 32nd step; a
// writer for a shorter session, with segments no longer than a piece, or not told, starts none. Its own file: the thread is one per
// module instance, and vitest gives each test file its own.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sealThreadRunning } from '../../coordinator/trace/trace-seal-thread.js';
import { SEAL_PIECE_STEPS, SegmentedTraceWriter } from '../../coordinator/trace/trace-store.js';

const root = mkdtempSync(join(tmpdir(), 'detsim-seal-warm-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('SegmentedTraceWriter expectedSteps', () => {
  it('starts no sealing thread for a session of at most one piece, and starts it at once for a longer one', async () => {
    const short = new SegmentedTraceWriter(join(root, 'short'), { expectedSteps: SEAL_PIECE_STEPS });
    const untold = new SegmentedTraceWriter(join(root, 'untold'));
    // Segments no longer than a piece are sealed whole, never fed: no thread for them either.
    const cut = new SegmentedTraceWriter(join(root, 'cut'), { expectedSteps: 1000, segmentSteps: SEAL_PIECE_STEPS });
    expect(sealThreadRunning()).toBe(false);
    const long = new SegmentedTraceWriter(join(root, 'long'), { expectedSteps: SEAL_PIECE_STEPS + 1 });
    expect(sealThreadRunning()).toBe(true);
    await Promise.all([short.close(), untold.close(), cut.close(), long.close()]);
  });
});
