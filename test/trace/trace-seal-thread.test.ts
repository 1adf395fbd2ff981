// The trace's sealing thread (coordinator/trace/trace-seal-thread.ts): a segment large enough to be sealed
// on the thread gives exactly what sealing it here gives (gzip bytes, chain, digest state).
import { describe, expect, it } from 'vitest';
import {
  genesisHashes,
  sealSegment,
  sealSegmentOffLoop,
  THREAD_SEAL_MIN_CHARS,
} from '../../coordinator/trace/trace-seal-thread.js';

describe('sealSegmentOffLoop', () => {
  it('a segment over the thread threshold: the same gzip bytes and running hashes as sealing here', async () => {
    const lines = Array.from({ length: 20_000 }, (_, i) => `{"step":"${i}","pad":"${'x'.repeat(40)}"}\n`).join('');
    const behaviour = Array.from({ length: 20_000 }, (_, i) => `{"b":${i}}\n`).join('');
    const input = { text: lines, behaviour, from: genesisHashes() };
    expect(lines.length + behaviour.length).toBeGreaterThanOrEqual(THREAD_SEAL_MIN_CHARS);
    const there = await sealSegmentOffLoop(input);
    const here = sealSegment(input);
    expect(Buffer.from(there.gz).equals(Buffer.from(here.gz))).toBe(true);
    expect(there.to).toEqual(here.to);
  });
});
