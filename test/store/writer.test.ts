// The checkpoint writer over a real store directory: the store-side STATE-01 fault cases of
// docs/spec/checkpoint-store.md (lost reply, renamed generation without manifest commit, stalled
// writer past a budget, queue stress, hot supersede), byte budget, write errors, event publication
// and stepping during a write.
import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex } from '../../core/formats/canonical-json.js';
import { SEAL_SLICE_BYTES } from '../../core/formats/envelope.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DetsimError } from '../../core/formats/errors.js';
import { DurableFs, errnoError, WRITE_SLICE } from '../../coordinator/store/durable-fs.js';
import { Ledger, verifyLedger } from '../../coordinator/store/ledger.js';
import { ledgerEventOfWriter } from '../../coordinator/store/ledger.js';
import { CheckpointStore } from '../../coordinator/store/store.js';
import {
  CheckpointWriter,
  DEFAULT_MAX_QUEUED_BYTES,
  WriterBusyError,
  type WriterEvent,
} from '../../coordinator/store/writer.js';
import { deferredJobOf, jobOf, makeCheckpoint, removeDir, tempDir, turns } from './helpers.js';

let dir: string;
beforeEach(async () => {
  dir = await tempDir('writer');
});
afterEach(async () => {
  await removeDir(dir);
});

function busy(fn: () => unknown): WriterBusyError {
  try {
    fn();
  } catch (e) {
    if (e instanceof WriterBusyError) return e;
    throw e;
  }
  throw new Error('expected BUSY');
}

/** A stand-in step loop: counts event-loop turns, the way a session's steps interleave with the writer. */
function stepLoop(): { steps: () => number; stop: () => void } {
  let n = 0;
  let running = true;
  const tick = (): void => {
    if (!running) return;
    n += 1;
    setImmediate(tick);
  };
  setImmediate(tick);
  return { steps: () => n, stop: () => void (running = false) };
}

describe('STATE-01 store-side cases', () => {
  it('[STORE-11, STORE-12] case 3, lost save reply: ReplyLost, durable mark unmoved, then found committed and not re-saved', async () => {
    const store = await CheckpointStore.open(dir);
    const writer = new CheckpointWriter(store);
    writer.testHooks.dropReplyFor('ckpt-1');
    const ticket = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 2)));
    const outcome = await ticket.wait();
    expect(outcome).toEqual({ kind: 'ReplyLost', checkpointId: 'ckpt-1' });
    expect(writer.durableMark()).toBeNull();
    // The writer did finish: the store manifest knows the same id.
    const envelopeDigest = sha256Hex(await readFile(join(dir, 'ckpt-1.flysess')));
    expect(writer.resolveDurable('ckpt-1')).toEqual({
      kind: 'Committed',
      checkpointId: 'ckpt-1',
      boundary: '2',
      file: 'ckpt-1.flysess',
      envelopeDigest,
    });
    expect(writer.durableMark()).toEqual({ checkpointId: 'ckpt-1', boundary: '2' });
    expect(store.commitCount()).toBe(1);
    expect(writer.stats().committed).toBe(1);
    // Re-saving the same id is refused, so a confused caller cannot save it twice.
    const again = writer.reserve();
    expect(() => writer.submit(again, jobOf(makeCheckpoint('ckpt-1', 2)))).toThrow(DetsimError);
    expect(writer.stats().outstanding).toBe(0);
    expect(store.commitCount()).toBe(1);
  });

  it('[STORE-4, STORE-11] case 4, renamed generation without manifest commit: Failed, the file exists, never a candidate', async () => {
    const store = await CheckpointStore.open(dir);
    const writer = new CheckpointWriter(store);
    expect((await writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1))).wait()).kind).toBe('Committed');
    writer.testHooks.stopBeforeManifestCommitFor('ckpt-2');
    const outcome = await writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-2', 2))).wait();
    expect(outcome).toMatchObject({ kind: 'Failed', checkpointId: 'ckpt-2', reason: 'stopped_before_manifest_commit' });
    expect(existsSync(join(dir, 'ckpt-2.flysess'))).toBe(true);
    expect(writer.resolveDurable('ckpt-2')).toBeNull();
    expect(() => store.select('ckpt-2')).toThrow(/never a restore candidate/);
    expect(store.highWater()?.checkpointId).toBe('ckpt-1');
    expect(writer.durableMark()?.checkpointId).toBe('ckpt-1');
    const reopened = await CheckpointStore.open(dir);
    expect(reopened.lookup('ckpt-2')).toBeNull();
    expect(reopened.select().checkpointId).toBe('ckpt-1');
    expect((await reopened.scan()).unreferenced).toEqual(['ckpt-2.flysess']);
  });

  it('[STORE-11] case 5, writer stalled past the caller budget: DeadlineExpired (not ReplyLost), commits after release', async () => {
    const store = await CheckpointStore.open(dir);
    const writer = new CheckpointWriter(store);
    const release = writer.testHooks.stall();
    const ticket = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1)));
    const first = await ticket.wait(100);
    expect(first).toEqual({ kind: 'DeadlineExpired', checkpointId: 'ckpt-1', budgetMs: 100 });
    expect(writer.durableMark()).toBeNull();
    expect(writer.resolveDurable('ckpt-1')).toBeNull();
    expect(store.highWater()).toBeNull();
    release();
    await writer.drain();
    expect(store.highWater()?.checkpointId).toBe('ckpt-1');
    expect(writer.resolveDurable('ckpt-1')?.kind).toBe('Committed');
    expect(writer.durableMark()?.checkpointId).toBe('ckpt-1');
    expect(await ticket.wait(100)).toMatchObject({ kind: 'Committed', checkpointId: 'ckpt-1' });
  });

  it('[STORE-9] case 7, queue stress: capacity 2 with a stalled writer, third reservation BUSY with no mutation, bounds held, both commit later', async () => {
    const store = await CheckpointStore.open(dir);
    const writer = new CheckpointWriter(store);
    expect(writer.capacity).toBe(2);
    expect(writer.maxQueuedBytes).toBe(DEFAULT_MAX_QUEUED_BYTES);
    const release = writer.testHooks.stall();
    const loop = stepLoop();
    const t1 = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1)));
    const t2 = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-2', 2)));
    const before = writer.stats();
    const e = busy(() => writer.reserve());
    expect(e.status).toBe('BUSY');
    expect(e.mutation).toBe('none');
    expect(e.reason).toBe('size_writer_queue_full');
    const after = writer.stats();
    expect({ ...after, rejected: before.rejected }).toEqual(before);
    expect(after.rejected).toBe(before.rejected + 1);
    // The caller keeps stepping while the writer is stalled.
    const s0 = loop.steps();
    await turns(20);
    expect(loop.steps()).toBeGreaterThan(s0);
    release();
    expect((await t1.wait()).kind).toBe('Committed');
    expect((await t2.wait()).kind).toBe('Committed');
    loop.stop();
    const stats = writer.stats();
    expect(stats.peak_queue).toBeLessThanOrEqual(2);
    expect(stats.peak_bytes).toBeLessThanOrEqual(64 * 1024 * 1024);
    expect(stats.committed).toBe(2);
    expect(store.generations().map((g) => g.checkpointId)).toEqual(['ckpt-1', 'ckpt-2']);
  });

  it('[STORE-10] case 8, hot supersede (capacity 3): durable in flight, hot queued, a newer hot supersedes it: 2 committed, 1 superseded', async () => {
    const store = await CheckpointStore.open(dir);
    const events: WriterEvent[] = [];
    const writer = new CheckpointWriter(store, { capacity: 3, onEvent: (e) => void events.push(e) });
    const release = writer.testHooks.stall();
    const durable = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1), false));
    const hot2 = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-2', 2), true));
    const hot3 = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-3', 3), true));
    expect(await hot2.wait()).toEqual({ kind: 'Superseded', checkpointId: 'ckpt-2', by: 'ckpt-3' });
    // The superseded job's slot is free again.
    expect(writer.stats().outstanding).toBe(2);
    release();
    expect((await durable.wait()).kind).toBe('Committed');
    expect((await hot3.wait()).kind).toBe('Committed');
    const stats = writer.stats();
    expect([stats.committed, stats.superseded]).toEqual([2, 1]);
    expect(store.generations().map((g) => g.checkpointId)).toEqual(['ckpt-1', 'ckpt-3']);
    expect(existsSync(join(dir, 'ckpt-2.flysess'))).toBe(false);
    expect(events.map((e) => `${e.event}:${e.checkpointId}`)).toEqual([
      'queued:ckpt-1',
      'queued:ckpt-2',
      'superseded:ckpt-2',
      'queued:ckpt-3',
      'committed:ckpt-1',
      'committed:ckpt-3',
    ]);
    expect(events.find((e) => e.event === 'superseded')?.supersededBy).toBe('ckpt-3');
  });
});

describe('queue rules', () => {
  it('[STORE-10] never supersedes a durable queued job or the job being written', async () => {
    const store = await CheckpointStore.open(dir);
    const writer = new CheckpointWriter(store, { capacity: 4 });
    const release = writer.testHooks.stall();
    const inFlightHot = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1), true));
    const queuedDurable = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-2', 2), false));
    const hot = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-3', 3), true));
    release();
    const outcomes = await Promise.all([inFlightHot.wait(), queuedDurable.wait(), hot.wait()]);
    expect(outcomes.map((o) => o.kind)).toEqual(['Committed', 'Committed', 'Committed']);
    expect(writer.stats().superseded).toBe(0);
  });

  it('[STORE-9] checks the byte budget at submit: over budget is BUSY and frees the slot; a superseded job’s bytes count back', async () => {
    const store = await CheckpointStore.open(dir);
    const small = makeCheckpoint('ckpt-2', 2);
    const budget = small.encoded.byteLength + 10;
    const writer = new CheckpointWriter(store, { capacity: 4, maxQueuedBytes: budget });
    const release = writer.testHooks.stall();
    // The idle writer takes the first job at once: it is never queued, whatever its size.
    const first = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1, { payloadBytes: 4096 })));
    const hot2 = writer.submit(writer.reserve(), jobOf(small, true));
    const r = writer.reserve();
    const e = busy(() => writer.submit(r, jobOf(makeCheckpoint('ckpt-x', 3), false)));
    expect(e.reason).toBe('size_writer_bytes_full');
    expect(e.mutation).toBe('none');
    expect(writer.stats()).toMatchObject({ outstanding: 2, rejected: 1, queued: 2 });
    // A hot one of the same size fits, because it supersedes ckpt-2's bytes.
    const hot3 = writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-3', 3), true));
    expect((await hot2.wait()).kind).toBe('Superseded');
    release();
    expect((await first.wait()).kind).toBe('Committed');
    expect((await hot3.wait()).kind).toBe('Committed');
    expect(writer.stats().peak_bytes).toBeLessThanOrEqual(budget);
  });

  it('a deferred envelope counts its memory bytes both ways: queued many times, the budget never leaks', async () => {
    const store = await CheckpointStore.open(dir);
    const c = (n: number) => makeCheckpoint(`ckpt-${n}`, n, { payloadBytes: 4096 });
    // Its file is ~4 KiB; only a 64-byte head is held in memory while it is queued (capture-file.ts).
    const deferred = (n: number) => {
      const job = deferredJobOf(c(n));
      return { ...job, envelope: { ...job.envelope, memoryBytes: 64 } };
    };
    const budget = 2 * c(1).encoded.byteLength;
    const writer = new CheckpointWriter(store, { capacity: 4, maxQueuedBytes: budget });
    // Each one queued behind a stalled writer, then written: ten times the budget's worth of files.
    for (let n = 1; n <= 20; n++) {
      const release = writer.testHooks.stall();
      const held = writer.submit(writer.reserve(), deferred(2 * n - 1));
      const queued = writer.submit(writer.reserve(), deferred(2 * n));
      release();
      expect((await held.wait()).kind).toBe('Committed');
      expect((await queued.wait()).kind).toBe('Committed');
      expect(writer.stats().queued_bytes).toBe(0);
    }
  });

  it('a released reservation frees its slot; a used one cannot be submitted twice', async () => {
    const store = await CheckpointStore.open(dir);
    const writer = new CheckpointWriter(store, { capacity: 1 });
    const r = writer.reserve();
    busy(() => writer.reserve());
    r.release();
    r.release();
    const r2 = writer.reserve();
    const t = writer.submit(r2, jobOf(makeCheckpoint('ckpt-1', 1)));
    expect(() => writer.submit(r2, jobOf(makeCheckpoint('ckpt-2', 2)))).toThrow(/already used/);
    expect((await t.wait()).kind).toBe('Committed');
  });

  it('drain() waits for queued and in-flight jobs; close() refuses new reservations', async () => {
    const store = await CheckpointStore.open(dir);
    const writer = new CheckpointWriter(store);
    const release = writer.testHooks.stall();
    writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1)));
    writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-2', 2)));
    let drained = false;
    const draining = writer.drain().then(() => (drained = true));
    await turns(10);
    expect(drained).toBe(false);
    release();
    await draining;
    expect(store.generations()).toHaveLength(2);
    await writer.close();
    expect(() => writer.reserve()).toThrow(/closed/);
  });

  it('[STORE-5] an injected ENOSPC fails the job; the last committed generation and the durable mark stay', async () => {
    let fail = false;
    const fs = new DurableFs({
      before(op) {
        if (fail && op.kind === 'write') throw errnoError('ENOSPC', op);
      },
    });
    const store = await CheckpointStore.open(dir, { fs });
    const writer = new CheckpointWriter(store);
    expect((await writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1))).wait()).kind).toBe('Committed');
    fail = true;
    const outcome = await writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-2', 2))).wait();
    expect(outcome).toMatchObject({ kind: 'Failed', reason: 'generation_write_failed' });
    expect(outcome.kind === 'Failed' && outcome.message).toContain('ENOSPC');
    expect(writer.durableMark()?.checkpointId).toBe('ckpt-1');
    expect(store.highWater()?.checkpointId).toBe('ckpt-1');
    expect((await store.verify()).ok).toBe(true);
    expect(writer.stats()).toMatchObject({ committed: 1, failed: 1 });
  });

  it('steps go on while a multi-MiB checkpoint is hashed and written', async () => {
    const store = await CheckpointStore.open(dir, { rehash: true });
    const writer = new CheckpointWriter(store);
    const c = makeCheckpoint('ckpt-big', 1, { payloadBytes: 4 * WRITE_SLICE });
    const loop = stepLoop();
    const ticket = writer.submit(writer.reserve(), jobOf(c));
    const s0 = loop.steps();
    expect((await ticket.wait()).kind).toBe('Committed');
    loop.stop();
    // Every slice write yields to the event loop at least once.
    expect(loop.steps() - s0).toBeGreaterThanOrEqual(4);
  });

  it('seals a deferred envelope itself, off the step loop: the same bytes as encoding at once, steps go on meanwhile', async () => {
    const store = await CheckpointStore.open(dir);
    const writer = new CheckpointWriter(store);
    const c = makeCheckpoint('ckpt-big', 1, { payloadBytes: 8 * SEAL_SLICE_BYTES });
    const loop = stepLoop();
    const ticket = writer.submit(writer.reserve(), deferredJobOf(c));
    const s0 = loop.steps();
    const outcome = await ticket.wait();
    loop.stop();
    expect(outcome).toMatchObject({ kind: 'Committed', envelopeDigest: c.encoded.envelopeDigest });
    // Sealing yields a turn per slice of every payload it hashes (besides the write's own yields).
    expect(loop.steps() - s0).toBeGreaterThanOrEqual(8);
    expect((await readFile(join(dir, 'ckpt-big.flysess'))).equals(Buffer.concat(c.encoded.parts))).toBe(true);
  });

  it('a payload whose bytes do not hash to its reported digest: Failed (seal_failed) naming it, nothing written, the last commit stays', async () => {
    const store = await CheckpointStore.open(dir);
    const writer = new CheckpointWriter(store);
    expect((await writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1))).wait()).kind).toBe('Committed');
    const lie = sha256Hex('not the agent payload');
    const outcome = await writer
      .submit(writer.reserve(), deferredJobOf(makeCheckpoint('ckpt-2', 2), { 'agent-fly-a': lie }))
      .wait();
    expect(outcome).toMatchObject({ kind: 'Failed', checkpointId: 'ckpt-2', reason: 'seal_failed' });
    expect(outcome.kind === 'Failed' && outcome.message).toContain(
      `payload "agent-fly-a": its bytes hash to ${sha256Hex(makeCheckpoint('ckpt-2', 2).payloads[1]!.bytes)}, its producer reported ${lie}`,
    );
    expect(readdirSync(dir).sort()).toEqual(['ckpt-1.flysess', 'manifest.json']);
    expect(store.highWater()?.checkpointId).toBe('ckpt-1');
    expect((await store.verify()).ok).toBe(true);
  });

  it('event sink failures are counted, never change durability; writer events land in a verified ledger', async () => {
    const store = await CheckpointStore.open(dir);
    const ledger = await Ledger.open(dir);
    let n = 0;
    const writer = new CheckpointWriter(store, {
      onEvent: (e) => {
        if (++n === 1) throw new Error('bus down');
        return ledger.append(ledgerEventOfWriter(e)).then(() => undefined);
      },
    });
    expect((await writer.submit(writer.reserve(), jobOf(makeCheckpoint('ckpt-1', 1))).wait()).kind).toBe('Committed');
    await ledger.flush();
    expect(writer.stats().events_dropped).toBe(1);
    const check = await verifyLedger(dir);
    expect(check).toMatchObject({ ok: true, lines: 1 });
  });
});
