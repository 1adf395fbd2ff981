// A payload too long for one streamed attachment (2 GiB − 1 on the gRPC link; lowered here) over
// real worker processes without a store: the capture is refused by name (UNSUPPORTED,
// size_message_too_large), the link drops the oversized reply's bytes instead of ending the stream,
// so the run steps on and the last committed checkpoint stays; a restore that would have to send
// such a payload is refused before anything is staged, and the group steps on from where it was.
import { readdirSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup } from '../../coordinator/checkpoint/capture.js';
import { storeDirOf } from '../../coordinator/checkpoint/checkpointing.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import { LIF, startSession, type Session } from './harness.js';

const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

const LIMIT = 64 * 1024;
const NEURONS = 20_000; // 12 bytes each: ~240 KB per agent, past LIMIT

async function refusalOf(p: Promise<unknown>): Promise<CheckpointRefusal> {
  const e = await p.then(
    () => new Error('not refused'),
    (err: unknown) => err,
  );
  if (!(e instanceof CheckpointRefusal)) throw e;
  return e;
}

describe('a payload too long to stream', () => {
  it('a capture reply past the link limit is refused by name; the worker stays reachable and the run steps on', async () => {
    const s = await startSession(LIF(NEURONS), { streamed: true, maxAttachmentBytes: LIMIT });
    open.push(s);
    await s.group.step();
    for (const id of ['ckpt-e1-1', 'ckpt-e1-2']) {
      const e = await refusalOf(captureGroup(s.group, { checkpointId: id }));
      expect([e.status, e.reason, e.participant]).toEqual(['UNSUPPORTED', 'size_message_too_large', 'agent lif-a']);
      expect(e.message).toMatch(
        /^agent lif-a: its payload of \d+ bytes is larger than one streamed attachment \(at most 2147483647 bytes\); a worker that shares the coordinator's store moves a payload of any size through the envelope file instead/,
      );
      expect(Number(/payload of (\d+) bytes/.exec(e.message)![1])).toBeGreaterThan(LIMIT);
      // The workers answer on: the group steps (a broken stream would fail this step).
      await s.group.step();
    }
    expect(s.ck.store.highWater()).toBeNull();
    expect(readdirSync(storeDirOf(s.runDir)).filter((n) => n.startsWith('tmp-'))).toEqual([]);
  }, 120_000);

  it('a restore that would send a payload past the limit is refused before anything is staged, and the group steps on', async () => {
    const s = await startSession(LIF(NEURONS), { streamed: true });
    open.push(s);
    await s.group.step();
    const rec = await captureGroup(s.group, { checkpointId: 'ckpt-e1-1' });
    expect(await rec.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
    await s.group.step();
    const e = await refusalOf(
      restoreGroup(s.group, { store: s.ck.store }, { epoch: 'e2', hooks: { maxAttachmentBytes: LIMIT } }),
    );
    expect([e.status, e.reason, e.participant]).toEqual(['UNSUPPORTED', 'size_message_too_large', 'agent lif-a']);
    // Nothing changed anywhere: the group is as it stood (ready) and steps; the same restore then succeeds.
    expect(s.group.phase).toBe('ready');
    await s.group.step();
    await restoreGroup(s.group, { store: s.ck.store }, { epoch: 'e2' });
    s.group.resume();
    await s.group.step();
  }, 120_000);
});
