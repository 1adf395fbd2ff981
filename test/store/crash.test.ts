// Crash points: a child process commits a checkpoint and SIGKILLs itself right after each step of
// the commit sequence. On reopen the last committed generation is intact, every listed generation
// verifies, none is half-written, and the store takes the next commit.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { COMMIT_STEPS, WRITE_SLICE, type CommitStep } from '../../coordinator/store/durable-fs.js';
import { CheckpointStore } from '../../coordinator/store/store.js';
import { makeCheckpoint, removeDir, tempDir } from './helpers.js';

const CHILD = fileURLToPath(new URL('./children/crash-commit.ts', import.meta.url));
const BIG = WRITE_SLICE + 4096; // two slices, so 'generation-temp-partial' leaves a really partial file

function runChild(
  args: string[],
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

let dir: string;
beforeEach(async () => {
  dir = await tempDir('crash');
});
afterEach(async () => {
  await removeDir(dir);
});

const committedAt = COMMIT_STEPS.indexOf('manifest-renamed');

describe('a process killed after each commit step', () => {
  expect(COMMIT_STEPS.length).toBeGreaterThanOrEqual(8);
  for (const [index, step] of COMMIT_STEPS.entries()) {
    it(`[STORE-4] after ${step}: the last committed generation is intact and every listed generation verifies`, async () => {
      const base = await CheckpointStore.open(dir, { keep: 2 });
      for (const n of [1, 2]) {
        const c = makeCheckpoint(`ckpt-${n}`, n);
        await base.commit(c.identity, c.encoded);
      }
      const run = await runChild([dir, step, 'ckpt-3', '3', String(BIG), '2']);
      expect(run.stderr).toBe('');
      expect(run.stdout).toBe(`crash ${step}\n`);
      expect(run.signal).toBe('SIGKILL');

      const store = await CheckpointStore.open(dir, { keep: 2 });
      const committed = index >= committedAt;
      expect(store.highWater()?.checkpointId).toBe(committed ? 'ckpt-3' : 'ckpt-2');
      expect(store.generations().map((g) => g.checkpointId)).toEqual(
        committed ? ['ckpt-2', 'ckpt-3'] : ['ckpt-1', 'ckpt-2'],
      );
      const report = await store.verify();
      expect(report.generations.filter((g) => !g.ok)).toEqual([]);
      // Every listed generation is whole: exactly the bytes the encoder produced.
      for (const g of store.generations()) {
        const expected =
          g.checkpointId === 'ckpt-3'
            ? makeCheckpoint('ckpt-3', 3, { payloadBytes: BIG })
            : makeCheckpoint(g.checkpointId, Number(g.boundary));
        const loaded = await store.load(g.checkpointId);
        expect(loaded.envelope.envelopeDigest).toBe(expected.encoded.envelopeDigest);
      }
      // A generation renamed but not committed is never a candidate.
      if (!committed) expect(() => store.select('ckpt-3')).toThrow(/never a restore candidate/);
      const renamed = index >= COMMIT_STEPS.indexOf('generation-renamed');
      expect(existsSync(join(dir, 'ckpt-3.flysess'))).toBe(renamed);
      // Before the rename the temp file is left behind (really half-written at the partial step).
      expect(existsSync(join(dir, 'tmp-ckpt-3.flysess'))).toBe(!renamed);
      if (step === 'generation-temp-partial')
        expect((await stat(join(dir, 'tmp-ckpt-3.flysess'))).size).toBeLessThan(BIG);
      // The store goes on: the next commit overwrites stale temporaries and succeeds.
      const next = makeCheckpoint('ckpt-4', 4);
      await store.commit(next.identity, next.encoded);
      expect(store.highWater()?.checkpointId).toBe('ckpt-4');
      expect((await store.verify()).ok).toBe(true);
    });
  }

  it('without a crash the child commits (the hook fires only at its step)', async () => {
    const run = await runChild([dir, 'no-such-step' as CommitStep, 'ckpt-1', '1', '64', '2']);
    expect(run.stdout).toBe('done\n');
    expect(run.code).toBe(0);
    expect((await CheckpointStore.open(dir)).highWater()?.checkpointId).toBe('ckpt-1');
  });
});
