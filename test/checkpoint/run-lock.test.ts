// run.lock (coordinator/run-lock.ts): one writer per run directory. A live holder is refused with
// perm_run_dir_locked naming it; a holder that is gone (SIGKILL) or a torn lock file is taken over;
// release never removes another process's lock; `detsim resume` and `detsim store gc` refuse a
// run directory in use without changing it, and a finished `detsim run` leaves no lock behind.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { acquireRunLock, RUN_LOCK_FILE } from '../../coordinator/run-lock.js';
import { refusal as refused } from '../refusal.js';
import { detsim } from './cli.js';
import { tmpDir } from './harness.js';

const children: ReturnType<typeof spawn>[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

/** A live process that is not us (holds a lock in these tests). */
function liveProcess(): number {
  const c = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 600000)'], { stdio: 'ignore' });
  children.push(c);
  return c.pid!;
}

/** The pid of a process that has exited. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout as unknown as number;
}

function writeLock(dir: string, pid: number, host = hostname()): void {
  writeFileSync(join(dir, RUN_LOCK_FILE), `${JSON.stringify({ pid: Number(pid), hostname: host, command: 'detsim run' })}\n`);
}

describe('run.lock', () => {
  it('is exclusive while held, names its holder, and is free again after release', () => {
    const dir = tmpDir('detsim-lock-');
    const lock = acquireRunLock(dir, 'detsim resume');
    expect(JSON.parse(readFileSync(lock.path, 'utf8'))).toEqual({ pid: process.pid, hostname: hostname(), command: 'detsim resume' });
    const e = refused(() => acquireRunLock(dir, 'detsim store gc'));
    expect(e.reason).toBe('perm_run_dir_locked');
    expect(e.message).toContain(`in use by detsim resume (pid ${process.pid} on ${hostname()})`);
    lock.release();
    lock.release();
    expect(existsSync(lock.path)).toBe(false);
    acquireRunLock(dir, 'detsim run').release();
  });

  it('refuses a live holder and one on another host; takes over a dead holder and a torn file', () => {
    const dir = tmpDir('detsim-lock-');
    const pid = liveProcess();
    writeLock(dir, pid);
    expect(refused(() => acquireRunLock(dir, 'detsim resume')).message).toContain(`pid ${pid}`);
    writeLock(dir, 1, 'another-host.example');
    expect(refused(() => acquireRunLock(dir, 'detsim resume')).message).toContain('on another-host.example');

    const gone = Number(deadPid());
    writeLock(dir, gone);
    const lock = acquireRunLock(dir, 'detsim resume');
    expect(lock.tookOver).toEqual({ pid: gone, hostname: hostname(), command: 'detsim run' });
    lock.release();
    writeFileSync(join(dir, RUN_LOCK_FILE), '{"pid":12');
    const torn = acquireRunLock(dir, 'detsim resume');
    expect(torn.tookOver).toMatchObject({ command: 'unreadable lock' });
    torn.release();
  });

  it('release leaves a lock that another process took in the meantime', () => {
    const dir = tmpDir('detsim-lock-');
    const lock = acquireRunLock(dir, 'detsim run');
    const other = liveProcess();
    writeLock(dir, other);
    lock.release();
    expect(JSON.parse(readFileSync(join(dir, RUN_LOCK_FILE), 'utf8')).pid).toBe(other);
  });

  it('CLI: a finished run leaves no lock; resume and store gc refuse a run directory in use (exit 2) and change nothing', () => {
    const out = tmpDir('detsim-lockcli-');
    const r = detsim(['run', 'examples/lif-pair.yaml', '--steps', '2', '--checkpoint-every', '1', '--out', out]);
    expect(r.status, r.stderr).toBe(0);
    const runDir = join(out, 'lif-pair-1');
    expect(existsSync(join(runDir, RUN_LOCK_FILE))).toBe(false);
    const pid = liveProcess();
    writeLock(runDir, pid);
    const trace = readFileSync(join(runDir, 'trace.jsonl'), 'utf8');
    const store = readFileSync(join(runDir, 'store', 'manifest.json'), 'utf8');
    for (const args of [['resume', runDir, '--steps', '3'], ['store', 'gc', join(runDir, 'store')]]) {
      const x = detsim(args);
      expect(x.status, x.stderr).toBe(2);
      expect(x.stderr.trim()).toMatch(new RegExp(`^detsim: \\[perm_run_dir_locked\\] .*in use by detsim run \\(pid ${pid} `));
    }
    expect(readFileSync(join(runDir, 'trace.jsonl'), 'utf8')).toBe(trace);
    expect(readFileSync(join(runDir, 'store', 'manifest.json'), 'utf8')).toBe(store);
    // Once the holder is gone the same resume goes ahead (the stale lock is taken over) and releases it.
    // (Not awaited: the killed holder stays an unreaped zombie, which must count as gone too.)
    children.splice(0).forEach((c) => c.kill('SIGKILL'));
    spawnSync('sleep', ['0.2']);
    const ok = detsim(['resume', runDir, '--steps', '3']);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stderr).toContain(`run.lock left by detsim run (pid ${pid}), which is gone: taken over`);
    expect(existsSync(join(runDir, RUN_LOCK_FILE))).toBe(false);
  }, 240_000);
});
