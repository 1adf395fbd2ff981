// `detsim store ls|verify|gc` and `detsim ledger verify` as a user runs them: real processes, exit
// codes (0 ok, 1 verification failure, 2 input error) and one-line messages naming what failed.
import { spawn, spawnSync } from 'node:child_process';
import { copyFile, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger, LEDGER_FILE, LEDGER_HEAD_FILE } from '../../coordinator/store/ledger.js';
import { CheckpointStore } from '../../coordinator/store/store.js';
import { makeCheckpoint, removeDir, tempDir } from './helpers.js';
import { CLI_MAIN } from '../cli-refusal.js';

/** The built CLI (`npm test` builds first): from source, tsx compiles it on every start. */
function detsim(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI_MAIN, ...args], { encoding: 'utf8' });
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
    expect(
      out.generations.map((g: { checkpointId: string; highWater: boolean }) => [g.checkpointId, g.highWater]),
    ).toEqual([
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
    await writeFile(
      join(dir, 'manifest.json'),
      '{"generations":[],"highWater":"ckpt-1","stateFormatId":"flysess-1","storeManifestVersion":1}',
    );
    const broken = detsim('store', 'verify', dir);
    expect(broken.status).toBe(1);
    expect(broken.stderr.trim()).toMatch(
      /^detsim: \[struct_store_high_water\] .*manifest.json: manifest.highWater "ckpt-1" names no listed generation/,
    );
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

  it('verify of a directory that holds no store is an input error (exit 2), not "0 generation(s) verified"', async () => {
    const empty = await tempDir('cli-empty');
    const r = detsim('store', 'verify', empty);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      `detsim: [struct_invalid_field] ${empty} is not a checkpoint store (no manifest.json, no generation file): name a run directory or its store/\n`,
    );
  });
});

describe('detsim store: a lost manifest, and gc of a live run through another path (issue 11 items 12, 5)', () => {
  it('verify exits 1 with audit_store_manifest_missing when generation files remain without a manifest; ls shows them', async () => {
    await rm(join(dir, 'manifest.json'));
    const v = detsim('store', 'verify', dir);
    expect(v.status).toBe(1);
    expect(v.stderr).toMatch(
      /^detsim: \[audit_store_manifest_missing\] .*manifest.json is missing but 2 generation file\(s\) are present \(ckpt-1.flysess ckpt-2.flysess\)/m,
    );
    expect(v.stdout).not.toContain('verified');
    const ls = detsim('store', 'ls', dir);
    expect(ls.status).toBe(0);
    expect(ls.stdout).toContain(`store ${dir}: 0 generation(s), high-water none, no manifest.json`);
    expect(ls.stdout).toContain('unreferenced (never restore candidates): ckpt-1.flysess ckpt-2.flysess');
  });

  it("gc through a symlink to a live run's store is refused under the run lock and deletes nothing; once the run is gone it proceeds", async () => {
    // A run directory: run.json beside the store (the store of beforeEach moved in), a live holder of run.lock.
    const runDir = await tempDir('cli-run');
    await rename(dir, join(runDir, 'store'));
    await writeFile(join(runDir, 'run.json'), '{}');
    await writeFile(join(runDir, 'store', 'tmp-ckpt-3.flysess'), 'in flight');
    await copyFile(join(runDir, 'store', 'ckpt-1.flysess'), join(runDir, 'store', 'ckpt-9.flysess'));
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)'], { stdio: 'ignore' });
    await writeFile(
      join(runDir, 'run.lock'),
      `${JSON.stringify({ pid: holder.pid, hostname: hostname(), command: 'detsim run' })}\n`,
    );
    const link = join(await tempDir('cli-link'), 'checkpoints');
    await symlink(join(runDir, 'store'), link);
    try {
      const before = (await readdir(join(runDir, 'store'))).sort();
      const refused = detsim('store', 'gc', link);
      expect(refused.status).toBe(2);
      expect(refused.stderr.trim()).toMatch(
        new RegExp(`^detsim: \\[perm_run_dir_locked\\] .*in use by detsim run \\(pid ${holder.pid} `),
      );
      expect((await readdir(join(runDir, 'store'))).sort()).toEqual(before);
    } finally {
      holder.kill('SIGKILL');
      await new Promise((r) => holder.once('exit', r));
    }
    const ok = detsim('store', 'gc', link);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('removed 2 file(s)');
    expect((await readdir(runDir)).sort()).toEqual(['run.json', 'store']);
    dir = runDir;
  });
});

describe('detsim store <run-dir>: a run directory names its store/', () => {
  it('ls, verify and gc of a run directory act on its store/; a run without one, or copied without it, is refused by name', async () => {
    const runDir = await tempDir('cli-run-arg');
    await rename(dir, join(runDir, 'store'));
    await writeFile(join(runDir, 'run.json'), '{}');
    await writeFile(join(runDir, 'store', 'tmp-ckpt-3.flysess'), 'left over');
    dir = runDir;
    const ls = detsim('store', 'ls', runDir);
    expect(ls.status, ls.stderr).toBe(0);
    expect(ls.stdout).toContain(`store ${join(runDir, 'store')}: 2 generation(s), high-water ckpt-2\n`);
    const v = detsim('store', 'verify', runDir);
    expect([v.status, v.stderr]).toEqual([0, '']);
    expect(v.stdout).toContain(`store ${join(runDir, 'store')}: 2 generation(s) verified`);
    const gc = detsim('store', 'gc', runDir);
    expect(gc.status, gc.stderr).toBe(0);
    expect(gc.stdout).toContain('removed\ttmp-ckpt-3.flysess');
    expect((await readdir(runDir)).sort()).toEqual(['run.json', 'store']);
    // Without store/: refused (exit 2, verify too), not "0 generation(s) verified".
    await rm(join(runDir, 'store'), { recursive: true });
    for (const cmd of ['ls', 'verify', 'gc']) {
      const r = detsim('store', cmd, runDir);
      expect([r.status, r.stdout]).toEqual([2, '']);
      expect(r.stderr.trim()).toBe(
        `detsim: [struct_run_record] ${runDir}: a run directory without a checkpoint store (run with --checkpoint-every K to make one)`,
      );
    }
    // Its ledger records a commit: the run was copied without its store, and the refusal says so.
    await writeFile(
      join(runDir, LEDGER_FILE),
      `${JSON.stringify({ event: 'committed', checkpointId: 'ckpt-e1-2', seq: '1' })}\n`,
    );
    const gone = detsim('store', 'verify', runDir);
    expect(gone.status).toBe(2);
    expect(gone.stderr).toContain(
      "store: missing, though the run's ledger records committed checkpoints (the last ckpt-e1-2): was the run copied without its store/?",
    );
  });
});

describe('detsim ledger verify', () => {
  it('a run directory that is a file: resume, fork, store and ledger refuse it as input in one line, exit 2', async () => {
    const file = join(dir, 'afile');
    await writeFile(file, 'not a run\n');
    for (const args of [
      ['resume', file],
      ['fork', file, '--checkpoint', 'ckpt-e1-1'],
      ['store', 'gc', file],
      ['store', 'verify', file],
      ['store', 'ls', file],
      ['ledger', 'verify', file],
    ]) {
      const r = detsim(...args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(
        new RegExp(`^detsim: \\[struct_invalid_field\\] ${file} is not (an existing|a) directory\\n$`),
      );
    }
    expect(await readFile(file, 'utf8')).toBe('not a run\n');
  });

  it('exits 0 on an intact ledger, 1 naming a changed line, 2 without a ledger', async () => {
    const ledger = await Ledger.open(dir);
    for (const n of [1, 2, 3])
      await ledger.append({ event: 'committed', checkpointId: `ckpt-${n}`, boundary: String(n), epoch: 'e1' });
    // An append resolves once its line is durable; the head that anchors it follows (flush waits for
    // it). Without the head, the changed line 2 could only be named as line 3 (a fresh-clone CI flake).
    await ledger.flush();
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

  it('a damaged head is a failed verification: exit 1 naming the head file, like a changed line', async () => {
    const ledger = await Ledger.open(dir);
    await ledger.append({ event: 'committed', checkpointId: 'ckpt-1', boundary: '1', epoch: 'e1' });
    await ledger.flush();
    await writeFile(join(dir, LEDGER_HEAD_FILE), 'garbage\n');
    const r = detsim('ledger', 'verify', dir);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      `detsim: [struct_ledger_line] ${join(dir, LEDGER_HEAD_FILE)}: unexpected character "g" at offset 0 [struct_invalid_json]\n`,
    );
  });
});
