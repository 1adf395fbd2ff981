// The short SIGKILL loop for CI: a child writing checkpoints continuously (writer + store + ledger)
// is killed at seeded random moments; after every kill the store verifies (library and
// `detsim store verify`), every acknowledged save is still committed, and the ledger chain holds.
// The long version is `node --import tsx bench/kill-loop.ts --iterations 50`.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { runKillLoop } from '../../bench/kill-loop.js';
import { removeDir, tempDir } from './helpers.js';

let dir: string;
beforeEach(async () => {
  dir = await tempDir('kill-loop');
});
afterEach(async () => {
  await removeDir(dir);
});

it('survives SIGKILL at random moments: store verify passes and acknowledged saves stay committed', async () => {
  const results = await runKillLoop({
    runDir: dir,
    iterations: 3,
    seed: 20261129,
    payloadBytes: 128 * 1024,
    minDelayMs: 80,
    maxDelayMs: 400,
  });
  expect(results).toHaveLength(3);
  // The loop did checkpoint between kills (otherwise it proves nothing).
  expect(results.reduce((a, r) => a + r.committedSeen, 0)).toBeGreaterThan(0);
  expect(results.at(-1)!.generations).toBeGreaterThan(0);
  const cli = spawnSync(
    process.execPath,
    ['--import', 'tsx', 'coordinator/cli/main.ts', 'store', 'verify', join(dir, 'checkpoints')],
    { encoding: 'utf8' },
  );
  expect(cli.stderr).toBe('');
  expect(cli.status).toBe(0);
  expect(cli.stdout).toMatch(/generation\(s\) verified/);
});
