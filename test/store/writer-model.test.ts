// The writer queue against a model (fast-check): random sequences of hot/durable submissions,
// BUSY refusals, released reservations and writer stalls over a real store. Whatever the order,
// every accepted job ends Committed or Superseded, only queued hot jobs are superseded, commits keep
// submission order, bounds hold, and the high-water mark is the last job committed.
import fc from 'fast-check';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { CheckpointStore } from '../../coordinator/store/store.js';
import { CheckpointWriter, WriterBusyError, type SaveOutcome, type SaveTicket } from '../../coordinator/store/writer.js';
import { jobOf, makeCheckpoint, removeDir, tempDir, turns } from './helpers.js';

let root: string;
beforeEach(async () => {
  root = await tempDir('writer-model');
});
afterEach(async () => {
  await removeDir(root);
});

type Op = { kind: 'submit'; hot: boolean } | { kind: 'reserve-release' } | { kind: 'stall' } | { kind: 'unstall' } | { kind: 'turns'; n: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('submit' as const), hot: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'reserve-release' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'stall' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'unstall' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('turns' as const), n: fc.integer({ min: 1, max: 20 }) }) },
);

let run = 0;
it('random submissions keep every writer invariant', async () => {
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(op, { minLength: 1, maxLength: 12 }), async (capacity, ops) => {
      const store = await CheckpointStore.open(`${root}/run-${run++}`, { create: true, keep: 100 });
      const writer = new CheckpointWriter(store, { capacity });
      const accepted: { id: string; hot: boolean; ticket: SaveTicket }[] = [];
      let release: (() => void) | null = null;
      let busy = 0;
      let n = 0;
      for (const o of ops) {
        if (o.kind === 'submit' || o.kind === 'reserve-release') {
          let r;
          try {
            r = writer.reserve();
          } catch (e) {
            expect(e).toBeInstanceOf(WriterBusyError);
            busy += 1;
            continue;
          }
          if (o.kind === 'reserve-release') {
            r.release();
            continue;
          }
          n += 1;
          const id = `ckpt-${n}`;
          accepted.push({ id, hot: o.hot, ticket: writer.submit(r, jobOf(makeCheckpoint(id, n), o.hot)) });
        } else if (o.kind === 'stall') {
          release ??= writer.testHooks.stall();
        } else if (o.kind === 'unstall') {
          release?.();
          release = null;
        } else {
          await turns(o.n);
        }
        expect(writer.stats().outstanding).toBeLessThanOrEqual(capacity);
      }
      release?.();
      await writer.drain();
      const outcomes: SaveOutcome[] = await Promise.all(accepted.map((a) => a.ticket.wait()));
      const stats = writer.stats();
      const committed = accepted.filter((_, i) => outcomes[i]!.kind === 'Committed').map((a) => a.id);
      outcomes.forEach((o, i) => {
        expect(['Committed', 'Superseded']).toContain(o.kind);
        if (o.kind === 'Superseded') {
          // Only hot jobs are superseded, and only by a later hot submission.
          expect(accepted[i]!.hot).toBe(true);
          const by = accepted.findIndex((a) => a.id === o.by);
          expect(by).toBeGreaterThan(i);
          expect(accepted[by]!.hot).toBe(true);
        }
      });
      expect(stats).toMatchObject({ queued: accepted.length, committed: committed.length, superseded: accepted.length - committed.length, failed: 0, rejected: busy, outstanding: 0, queued_bytes: 0 });
      expect(stats.peak_queue).toBeLessThanOrEqual(capacity);
      // Commits keep submission order; the high-water mark is the last of them.
      expect(store.generations().map((g) => g.checkpointId)).toEqual(committed);
      expect(store.highWater()?.checkpointId ?? null).toBe(committed.at(-1) ?? null);
      expect((await store.verify()).ok).toBe(true);
    }),
    { numRuns: 100, seed: 4242 },
  );
});
