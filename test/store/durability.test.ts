// Durability at the file boundary: SIGKILL keeps the page cache, so the kill tests cannot see a
// missing fsync. Here the REAL fs calls of a store commit and of a whole checkpointed run are
// recorded (test/store/fs-recorder.ts: fd → path, so "fsync" means fsync of that very file or
// directory handle) and checked: a file is fsynced after its last write and before it is renamed
// into place, its directory is fsynced after the rename (before the next rename), an unlink is
// followed by a directory fsync, and the append-only trace and ledger end fsynced. Removing any
// one fsync from durable-fs.ts, store.ts, durable-file.ts or run-dir.ts fails a test here (each was
// tried). Not covered: truncateSynced (ledger crash recovery only); the ledger's own directory
// fsync after its first line is redundant with the head publish's, which also makes it durable.
import { basename, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CheckpointRun } from '../../coordinator/checkpoint/run-checkpoints.js';
import { runSession } from '../../coordinator/session/run.js';
import { CheckpointStore } from '../../coordinator/store/store.js';
import { loadPlan, tmpOut } from '../coordinator/helpers.js';
import { type RealOp, FsRecorder, durabilityViolations } from './fs-recorder.js';
import { makeCheckpoint, removeDir, tempDir } from './helpers.js';

let recorder: FsRecorder | undefined;
afterEach(() => {
  recorder?.stop();
  recorder = undefined;
});

/** open/fsync/rename/unlink as short lines, paths relative to `dir` ('.' is the directory itself). */
function sequence(ops: readonly RealOp[], dir: string): string[] {
  const rel = (p: string) => (p === dir ? '.' : p.startsWith(`${dir}/`) ? p.slice(dir.length + 1) : basename(p));
  return ops
    .filter((o) => o.kind !== 'write' && o.kind !== 'close')
    .map((o) => `${o.kind} ${rel(o.path)}${o.to ? ` -> ${rel(o.to)}` : ''}`);
}

describe('durability: the real fs calls of a commit', () => {
  it('[STORE-3] a store commit fsyncs the generation before its rename, the directory after it, then the manifest the same way, then rotation', async () => {
    const dir = await tempDir('durable');
    try {
      const store = await CheckpointStore.open(dir, { keep: 2 });
      for (const n of [1, 2]) {
        const c = makeCheckpoint(`ckpt-${n}`, n);
        await store.commit(c.identity, c.encoded);
      }
      recorder = await FsRecorder.start();
      const c = makeCheckpoint('ckpt-3', 3);
      await store.commit(c.identity, c.encoded);
      recorder.stop();
      const ops = recorder.under(dir);
      expect(sequence(ops, dir)).toEqual([
        'open tmp-ckpt-3.flysess',
        'fsync tmp-ckpt-3.flysess',
        'rename tmp-ckpt-3.flysess -> ckpt-3.flysess',
        'open .',
        'fsync .',
        'open tmp-manifest.json',
        'fsync tmp-manifest.json',
        'rename tmp-manifest.json -> manifest.json',
        'open .',
        'fsync .',
        'unlink ckpt-1.flysess',
        'open .',
        'fsync .',
      ]);
      // Each fsync came after the file's bytes: the writes precede it.
      const firstFsync = ops.findIndex((o) => o.kind === 'fsync');
      expect(
        ops.slice(0, firstFsync).some((o) => o.kind === 'write' && o.path === join(dir, 'tmp-ckpt-3.flysess')),
      ).toBe(true);
      expect(durabilityViolations(ops)).toEqual([]);
    } finally {
      await removeDir(dir);
    }
  });

  it('the rule checker catches a missing file fsync, a missing directory fsync and an unsynced append', () => {
    const d = '/x';
    const good: RealOp[] = [
      { kind: 'open', path: `${d}/tmp-a` },
      { kind: 'write', path: `${d}/tmp-a` },
      { kind: 'fsync', path: `${d}/tmp-a` },
      { kind: 'rename', path: `${d}/tmp-a`, to: `${d}/a` },
      { kind: 'fsync', path: d },
      { kind: 'write', path: `${d}/log` },
      { kind: 'fsync', path: `${d}/log` },
    ];
    expect(durabilityViolations(good, [`${d}/log`])).toEqual([]);
    expect(
      durabilityViolations(
        good.filter((_, i) => i !== 2),
        [`${d}/log`],
      ),
    ).toEqual([`${d}/tmp-a renamed without an fsync of that file after its last write`]);
    expect(
      durabilityViolations(
        good.filter((_, i) => i !== 4),
        [`${d}/log`],
      ),
    ).toEqual([`directory ${d} not fsynced after renaming to ${d}/a`]);
    expect(
      durabilityViolations(
        good.filter((_, i) => i !== 6),
        [`${d}/log`],
      ),
    ).toEqual([`${d}/log not fsynced after its last write`]);
    // An fsync of the file BEFORE its last write does not count.
    const early: RealOp[] = [good[0]!, good[2]!, good[1]!, ...good.slice(3)];
    expect(durabilityViolations(early)).toEqual([
      `${d}/tmp-a renamed without an fsync of that file after its last write`,
    ]);
  });

  it(
    '[STORE-3] a real checkpointed run: run.json, summary.json, every generation and manifest, the trace and the ledger are synced in order',
    { timeout: 120_000 },
    async () => {
      const { runDir, ops } = await recordedOnce();
      const index = join(runDir, 'trace', 'index.jsonl');
      const ledger = join(runDir, 'ledger.jsonl');
      expect(durabilityViolations(ops, [index, ledger])).toEqual([]);

      const renamesTo = (name: string) =>
        ops.filter((o) => o.kind === 'rename' && o.to !== undefined && basename(o.to) === name).length;
      expect(renamesTo('run.json')).toBe(1);
      expect(renamesTo('summary.json')).toBe(1);
      expect(renamesTo('ledger.head.json')).toBeGreaterThan(0);
      for (const step of [2, 4]) expect(renamesTo(`ckpt-e1-${step}.flysess`), `ckpt-e1-${step}`).toBe(1);
      expect(renamesTo('manifest.json')).toBe(2);
      expect(ops.filter((o) => o.kind === 'unlink' && basename(o.path) === 'ckpt-e1-2.flysess')).toHaveLength(1); // keep 1: rotated

      // A checkpoint never outlives its trace lines: the next test checks the trace's fsyncs before each.
      // The ledger's first line creates the file: the run directory is fsynced after it.
      const firstLedgerWrite = ops.findIndex((o) => o.kind === 'write' && o.path === ledger);
      expect(ops.slice(firstLedgerWrite).some((o) => o.kind === 'fsync' && o.path === runDir)).toBe(true);
    },
  );

  it(
    'a segmented trace: before each checkpoint is written (so before it is published), its segment, repro file, index and trace/ directory are fsynced, in that order',
    { timeout: 120_000 },
    async () => {
      const { runDir, ops } = await recordedOnce();
      const traceDir = join(runDir, 'trace');
      let from = 0;
      for (const [step, segment] of [
        [2, '000000'],
        [4, '000001'],
      ] as const) {
        // Cut where the generation is first written (after the capture, so before it is published):
        // the run steps on while the store writes it, so a later segment may be sealed before its rename.
        const at = ops.findIndex((o) => basename(o.path) === `tmp-ckpt-e1-${step}.flysess`);
        const renamed = ops.findIndex(
          (o) => o.kind === 'rename' && o.to !== undefined && basename(o.to) === `ckpt-e1-${step}.flysess`,
        );
        expect(at, `ckpt-e1-${step}`).toBeGreaterThan(from);
        expect(renamed).toBeGreaterThan(at);
        // Everything before this checkpoint's first write: its segment may have been sealed before the
        // previous checkpoint's (an in-memory envelope is written by the writer after the run stepped on).
        expect(segmentSyncedBefore(ops.slice(0, at), traceDir, segment), `ckpt-e1-${step}`).toEqual([]);
        from = at + 1;
      }
      // The control: the same record without the directory fsync, the index fsync or the segment's fsync is caught.
      const first = ops.slice(
        0,
        ops.findIndex((o) => basename(o.path) === 'tmp-ckpt-e1-2.flysess'),
      );
      const without = (kind: string, path: string) => first.filter((o) => !(o.kind === kind && o.path === path));
      expect(segmentSyncedBefore(without('fsync', traceDir), traceDir, '000000')).toEqual([
        'trace/ not fsynced after the index line',
      ]);
      expect(segmentSyncedBefore(without('fsync', join(traceDir, 'index.jsonl')), traceDir, '000000')).toContain(
        'index.jsonl not fsynced after its line',
      );
      // (Not "segment 000001 before ckpt-e1-2": the run steps on while the writer works, so that segment
      // may already be sealed and fsynced when ckpt-e1-2's first write comes.)
      expect(segmentSyncedBefore(without('fsync', join(traceDir, '000000.jsonl.gz')), traceDir, '000000')).toContain(
        'no segment fsynced',
      );
    },
  );
});

/** The recorded run, made once for both tests that read it. */
let recorded: Promise<{ runDir: string; ops: RealOp[] }> | undefined;
const recordedOnce = () => (recorded ??= recordedRun());

/** A real 5-step run checkpointed every 2 steps (keep 1), with its real fs calls recorded. */
async function recordedRun(): Promise<{ runDir: string; ops: RealOp[] }> {
  const out = tmpOut('detsim-durable-');
  recorder = await FsRecorder.start();
  const plan = loadPlan(join('test', 'receipt', 'fixtures', 'tiny-walkers.yaml'));
  const result = await runSession(plan, {
    outDir: out,
    steps: 5,
    onWarning: () => undefined,
    logLevel: 'warn',
    extension: new CheckpointRun({ every: 2, keep: 1 }),
  });
  recorder.stop();
  return { runDir: result.runDir, ops: [...recorder.under(result.runDir)] };
}

/**
 * What is missing, in the ops before a checkpoint is written, for its segment of the trace
 * (`segment`, e.g. 000000) to be durable: the segment and its repro file fsynced, then the index
 * line written and fsynced, then the trace/ directory fsynced (so the new names survive a power
 * cut). A later segment the run sealed meanwhile (it steps on while the writer works) is not
 * this checkpoint's to wait for.
 */
function segmentSyncedBefore(ops: readonly RealOp[], traceDir: string, segment: string): string[] {
  const missing: string[] = [];
  const last = (pred: (o: RealOp) => boolean) => ops.reduce((n, o, i) => (pred(o) ? i : n), -1);
  const firstAfter = (from: number, pred: (o: RealOp) => boolean) => {
    const i = ops.findIndex((o, n) => n > from && pred(o));
    return i < 0 ? Infinity : i;
  };
  const gz = last((o) => o.kind === 'fsync' && o.path === join(traceDir, `${segment}.jsonl.gz`));
  const repro = last((o) => o.kind === 'fsync' && o.path === join(traceDir, `${segment}.repro.gz`));
  const index = join(traceDir, 'index.jsonl');
  if (gz < 0) missing.push('no segment fsynced');
  if (repro < 0) missing.push('no repro file fsynced');
  const line = firstAfter(Math.max(gz, repro), (o) => o.kind === 'write' && o.path === index);
  if (line === Infinity) missing.push('no index line after the segment');
  const anchor = line === Infinity ? Math.max(gz, repro) : line;
  if (firstAfter(anchor, (o) => o.kind === 'fsync' && o.path === index) === Infinity)
    missing.push('index.jsonl not fsynced after its line');
  if (firstAfter(anchor, (o) => o.kind === 'fsync' && o.path === traceDir) === Infinity)
    missing.push('trace/ not fsynced after the index line');
  return missing;
}
