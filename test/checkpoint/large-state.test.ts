// State of any size: a ~32 MiB lif agent state (2.8 M neurons, 12 bytes each) captures through
// chunked attachments, commits durably, and restores into a new epoch where the next step equals
// the uninterrupted one, on worker processes and on worker threads (transferred port messages).
// (The 256 MiB version is bench/suites/checkpoint.ts: too slow for CI.)
import { describe, expect, it } from 'vitest';
import { captureGroup } from '../../coordinator/checkpoint/capture.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import { compareBehaviours } from '../../coordinator/trace/trace.js';
import { planOf, startSession } from './harness.js';

export const BIG_NEURONS = 2_800_000;

describe.each(['unix', 'thread'] as const)('large agent state (%s)', (transport) => {
  it('a 32 MiB agent state captures, commits and restores (chunked transfers)', async () => {
    const plan = planOf('examples/lif-pair.yaml', (c) => {
      c.agents[0].params = { neurons: BIG_NEURONS };
      c.agents[1].params = { neurons: 16 };
      c.workers = { ...c.workers, transport };
    });
    const s = await startSession(plan);
    try {
      await s.group.step();
      const rec = await captureGroup(s.group, { checkpointId: 'ckpt-e1-1' });
      expect(rec.byteLength).toBeGreaterThan(32 * 1024 * 1024);
      expect((await rec.ticket.wait(120_000)).kind).toBe('Committed');
      const loaded = await s.ck.store.load('ckpt-e1-1');
      const agent = loaded.envelope.payloads.find((p) => p.name === 'agent-lif-a')!;
      expect(agent.bytes.byteLength).toBeGreaterThan(BIG_NEURONS * 12);
      const uninterrupted = (await s.group.step()).behaviour;
      const rep = await restoreGroup(s.group, { store: s.ck.store }, { epoch: 'e2' });
      expect(rep.byteLength).toBe(rec.byteLength);
      s.group.resume();
      const resumed = (await s.group.step()).behaviour;
      expect(compareBehaviours([uninterrupted], [resumed])).toBeNull();
    } finally {
      await s.close();
    }
  }, 300_000);
});
