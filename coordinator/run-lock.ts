// The run directory's lock file `run.lock`: one writer at a time — `detsim run`, `detsim resume`
// or `detsim store gc` — so two coordinators never interleave trace lines or store commits.
// Advisory, by pid on this host: a lock whose process is gone (a SIGKILL, a power cut) is stale
// and taken over. NOT a distributed lock: a lock taken on another host is reported, never judged.
import { closeSync, fsyncSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { DetsimError } from './formats/errors.js';

export const RUN_LOCK_FILE = 'run.lock';

/** Who holds a lock (physical data: never hashed, never part of behaviour). */
export interface LockOwner {
  pid: number;
  hostname: string;
  command: string;
}

export interface RunLock {
  readonly path: string;
  /** The stale owner this lock replaced, if any (the caller may log it). */
  readonly tookOver: LockOwner | null;
  /** Remove the lock file if it is still ours. Idempotent. */
  release(): void;
}

/** Take `<runDir>/run.lock` for `command`; refused (perm_run_dir_locked) while a live process holds it. */
export function acquireRunLock(runDir: string, command: string): RunLock {
  const path = join(runDir, RUN_LOCK_FILE);
  const me: LockOwner = { pid: process.pid, hostname: hostname(), command };
  let tookOver: LockOwner | null = null;
  for (let attempt = 0; attempt < 2; attempt++) {
    if (tryCreate(path, me)) return lockOf(path, me, tookOver);
    const owner = readOwner(path);
    if (owner && holds(owner)) {
      throw new DetsimError('perm_run_dir_locked', `${runDir} is in use by ${owner.command} (pid ${owner.pid} on ${owner.hostname}); wait for it to finish, or remove ${path} if that process is gone`, RUN_LOCK_FILE);
    }
    // Stale (its process is gone) or torn (a crash while writing it): take it over.
    tookOver = owner ?? { pid: 0, hostname: 'unknown', command: 'unreadable lock' };
    try {
      unlinkSync(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  throw new DetsimError('perm_run_dir_locked', `${path}: another process took the lock at the same moment; try again`, RUN_LOCK_FILE);
}

/** Run `work` holding `<runDir>/run.lock`; released however it ends. `onTakeOver` hears of a stale lock replaced. */
export async function withRunLock<T>(runDir: string, command: string, work: () => Promise<T>, onTakeOver?: (stale: LockOwner) => void): Promise<T> {
  const lock = acquireRunLock(runDir, command);
  if (lock.tookOver) onTakeOver?.(lock.tookOver);
  try {
    return await work();
  } finally {
    lock.release();
  }
}

function tryCreate(path: string, me: LockOwner): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
  try {
    writeSync(fd, `${JSON.stringify(me)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return true;
}

function readOwner(path: string): LockOwner | null {
  try {
    const v = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockOwner>;
    if (typeof v.pid === 'number' && typeof v.hostname === 'string' && typeof v.command === 'string') return { pid: v.pid, hostname: v.hostname, command: v.command };
  } catch {
    // vanished or torn: no owner to respect
  }
  return null;
}

/** A lock from another host cannot be judged here: it counts as held. */
function holds(owner: LockOwner): boolean {
  if (owner.hostname !== hostname()) return true;
  try {
    process.kill(owner.pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(owner.pid);
}

/** A killed process its parent has not reaped yet still answers kill(pid, 0); on Linux /proc says it is gone. */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

function lockOf(path: string, me: LockOwner, tookOver: LockOwner | null): RunLock {
  let held = true;
  return {
    path,
    tookOver,
    release() {
      if (!held) return;
      held = false;
      const owner = readOwner(path);
      if (owner && owner.pid === me.pid && owner.hostname === me.hostname) {
        try {
          unlinkSync(path);
        } catch {
          // already gone
        }
      }
    },
  };
}
