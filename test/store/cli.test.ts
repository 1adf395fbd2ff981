// `detsim store ls|verify|gc` and `detsim ledger verify` as a user runs them: real processes, exit
// codes (0 ok, 1 verification failure, 2 input error) and one-line messages naming what failed.
import { spawnSync } from 'node:child_process';
import { readFile, writeFile, copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, LEDGER_FILE } from '../../coordinator/store/ledger.js';
import { CheckpointStore } from '../../coordinator/store/store.js';
import { makeCheckpoint, removeDir, tempDir } from './helpers.js';

function detsim(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'coordinator/cli/main.ts', ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

let dir: string;
beforeEach(async () => {
  dir = await tempDir('cli');
  const store = await CheckpointStore.open(dir);
  for (const n of [1, 2]) {
    const c = makeCheckpoint(`ckpt-${n}`, n);
    await store.commit(c.identity, c.encoded);
  }
});
afterEach(async () => {
  await removeDir(dir);
});

describe('detsim store', () => {
  it('ls --json lists generations with the high-water flag, unreferenced files and temporaries', async () => {
    await copyFile(join(dir, 'ckpt-1.flysess'), join(dir, 'ckpt-9.flysess'));
    await writeFile(join(dir, 'tmp-ckpt-3.flysess'), 'x');
    const r = detsim('store', 'ls', dir, '--json');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.highWater).toBe('ckpt-2');
    expect(out.generations.map((g: { checkpointId: string; highWater: boolean }) => [g.checkpointId, g.highWater])).toEqual([
      ['ckpt-1', false],
      ['ckpt-2', true],
    ]);
    expect(out.unreferenced).toEqual(['ckpt-9.flysess']);
    expect(out.temporaries).toEqual(['tmp-ckpt-3.flysess']);
    const text = detsim('store', 'ls', dir);
    expect(text.stdout).toMatch(/^\* ckpt-2\tboundary 2/m);
  });

  it('verify exits 0 when every generation verifies and 1 naming the generation and check otherwise', async () => {
    const ok = detsim('store', 'verify', dir);
    expect([ok.status, ok.stderr]).toEqual([0, '']);
    expect(ok.stdout).toContain('2 generation(s) verified');
    const bytes = await readFile(join(dir, 'ckpt-1.flysess'));
    await writeFile(join(dir, 'ckpt-1.flysess'), bytes.subarray(0, bytes.length - 1));
    const bad = detsim('store', 'verify', dir);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('[audit_generation_length] generation ckpt-1 (ckpt-1.flysess) fails check byteLength');
    expect(bad.stdout).toContain('ok\tckpt-2');
    await writeFile(join(dir, 'manifest.json'), '{"generations":[],"highWater":"ckpt-1","stateFormatId":"flysess-1","storeManifestVersion":1}');
    const broken = detsim('store', 'verify', dir);
    expect(broken.status).toBe(1);
    expect(broken.stderr.trim()).toMatch(/^detsim: \[struct_store_high_water\] .*manifest.json: manifest.highWater "ckpt-1" names no listed generation/);
  });

  it('gc lists what it removes; ls of a missing directory is a one-line input error', async () => {
    await writeFile(join(dir, 'tmp-manifest.json'), '{');
    const r = detsim('store', 'gc', dir);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('removed\ttmp-manifest.json');
    const missing = detsim('store', 'ls', join(dir, 'nope'));
    expect(missing.status).toBe(2);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
    expect(missing.stderr).toContain('ENOENT');
  });
});

describe('detsim ledger verify', () => {
  it('exits 0 on an intact ledger, 1 naming a changed line, 2 without a ledger', async () => {
    const ledger = await Ledger.open(dir);
    for (const n of [1, 2, 3]) await ledger.append({ event: 'committed', checkpointId: `ckpt-${n}`, boundary: String(n), epoch: 'e1' });
    const ok = detsim('ledger', 'verify', dir);
    expect(ok.status).toBe(0);
    expect(ok.stdout).toContain('3 line(s), hash chain intact');
    const path = join(dir, LEDGER_FILE);
    await writeFile(path, (await readFile(path, 'utf8')).replace('"boundary":"2"', '"boundary":"7"'));
    const bad = detsim('ledger', 'verify', dir);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/^detsim: \[audit_ledger_chain\] .*ledger\.jsonl line 2: line 2 was changed/);
    const none = detsim('ledger', 'verify', join(dir, 'elsewhere'));
    expect(none.status).toBe(2);
  });
});
