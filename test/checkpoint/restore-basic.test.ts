// In-process capture → restore round trip over real workers: uninterrupted traces equal the
// restored ones after the epoch rebase, and unequal without it.
import { describe, expect, it } from 'vitest';
import { captureGroup, checkpointIdFor } from '../../coordinator/checkpoint/capture.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import { compareBehaviours, type TraceBehaviour } from '../../coordinator/trace.js';
import { LIF, startSession } from './harness.js';

describe('capture and group restore (in process)', () => {
  it('restores Paused(2) in e2 and steps like the uninterrupted run', async () => {
    const s = await startSession(LIF(64));
    try {
      const all: TraceBehaviour[] = [];
      for (let i = 0; i < 2; i++) all.push((await s.group.step()).behaviour);
      const rec = await captureGroup(s.group, { checkpointId: checkpointIdFor('e1', 2) });
      expect((await rec.ticket.wait(10_000)).kind).toBe('Committed');
      for (let i = 0; i < 2; i++) all.push((await s.group.step()).behaviour);
      const rep = await restoreGroup(s.group, { store: s.ck.store }, { epoch: 'e2' });
      expect(rep.boundary).toBe(2n);
      expect(s.group.phase).toBe('paused');
      s.group.resume();
      const resumed: TraceBehaviour[] = [];
      for (let i = 0; i < 2; i++) resumed.push((await s.group.step()).behaviour);
      expect(resumed[0]!.scope.epoch).toBe('e2');
      expect(compareBehaviours(all.slice(2), resumed)).toBeNull();
    } finally {
      await s.close();
    }
  }, 120_000);
});
