// The writer queue against a model (fast-check): random sequences of hot/durable submissions,
// BUSY refusals, released reservations, writer stalls and write failures (ENOSPC injected into the
// real store's file writes for chosen checkpoints) over a real store. Whatever the order, every
// accepted job ends Committed, Superseded or Failed as the model says (Failed exactly when its write
// was made to fail and it was not superseded first), only queued hot jobs are superseded, commits
// keep submission order, a failure leaves the last commit untouched, bounds hold, and the high-water
// mark is the last job committed. The fast-check seed varies per run (printed on failure).
import { readdirSync } from 'node:fs';
import fc from 'fast-check';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { DurableFs, errnoError } from '../../coordinator/store/durable-fs.js';
import { CheckpointStore, generationTemp } from '../../coordinator/store/store.js';
import {
  CheckpointWriter,
  WriterBusyError,
  type SaveOutcome,
  type SaveTicket,
} from '../../coordinator/store/writer.js';
import { jobOf, makeCheckpoint, removeDir, tempDir, turns } from './helpers.js';

let root: string;
beforeEach(async () => {
  root = await tempDir('writer-model');
});
afterEach(async () => {
  await removeDir(root);
});

type Op =
  | { kind: 'submit'; hot: boolean; failWrite: boolean }
  | { kind: 'reserve-release' }
  | { kind: 'stall' }
  | { kind: 'unstall' }
  | { kind: 'turns'; n: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('submit' as const),
      hot: fc.boolean(),
      failWrite: fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'reserve-release' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'stall' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'unstall' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('turns' as const), n: fc.integer({ min: 1, max: 20 }) }) },
);

let run = 0;
it('random submissions, some of whose writes fail, keep every writer invariant', async () => {
  let failuresMet = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 4 }),
      fc.array(op, { minLength: 1, maxLength: 12 }),
      async (capacity, ops) => {
        // The generation temp file of a checkpoint in failWrites cannot be written (a full disk for it).
        const failWrites = new Set<string>();
        const fs = new DurableFs({
          before(fsOp) {
            if (fsOp.kind === 'write' && [...failWrites].some((id) => fsOp.path.endsWith(`/${generationTemp(id)}`)))
              throw errnoError('ENOSPC', fsOp);
          },
        });
        const store = await CheckpointStore.open(`${root}/run-${run++}`, { create: true, keep: 100, fs });
        const writer = new CheckpointWriter(store, { capacity });
        const accepted: { id: string; hot: boolean; failWrite: boolean; ticket: SaveTicket }[] = [];
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
            if (o.failWrite) failWrites.add(id);
            accepted.push({
              id,
              hot: o.hot,
              failWrite: o.failWrite,
              ticket: writer.submit(r, jobOf(makeCheckpoint(id, n), o.hot)),
            });
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
        const failed = outcomes.filter((o) => o.kind === 'Failed').length;
        outcomes.forEach((o, i) => {
          const a = accepted[i]!;
          if (o.kind === 'Superseded') {
            // Only hot jobs are superseded, and only by a later hot submission.
            expect(a.hot).toBe(true);
            const by = accepted.findIndex((x) => x.id === o.by);
            expect(by).toBeGreaterThan(i);
            expect(accepted[by]!.hot).toBe(true);
          } else {
            // The model: a job that reached the store commits unless its write fails, and then it
            // fails as a write failure naming the injected errno.
            expect(o, a.id).toMatchObject(
              a.failWrite
                ? {
                    kind: 'Failed',
                    checkpointId: a.id,
                    reason: 'generation_write_failed',
                    message: expect.stringContaining('ENOSPC'),
                  }
                : { kind: 'Committed', checkpointId: a.id },
            );
          }
        });
        expect(stats).toMatchObject({
          queued: accepted.length,
          committed: committed.length,
          superseded: accepted.length - committed.length - failed,
          failed,
          rejected: busy,
          outstanding: 0,
          queued_bytes: 0,
        });
        expect(stats.peak_queue).toBeLessThanOrEqual(capacity);
        // Commits keep submission order; the high-water mark is the last of them.
        expect(store.generations().map((g) => g.checkpointId)).toEqual(committed);
        expect(store.highWater()?.checkpointId ?? null).toBe(committed.at(-1) ?? null);
        // A failed write leaves the last commit untouched: no file of a failed job, the store verifies.
        const files = readdirSync(store.dir);
        for (const a of accepted) if (a.failWrite) expect(files.some((f) => f.includes(a.id + '.'))).toBe(false);
        expect((await store.verify()).ok).toBe(true);
        failuresMet += failed;
      },
    ),
    { numRuns: 100 },
  );
  // The model met failures (not only the happy path).
  expect(failuresMet).toBeGreaterThan(10);
});
