// The run directory's lock file `run.lock`: one writer at a time — `detsim run`, `detsim resume`
// or `detsim store gc` — so two coordinators never interleave trace lines or store commits.
// Advisory, by pid on this host: a lock whose process is gone (a SIGKILL, a power cut) is stale
// and taken over. NOT a distributed lock: a lock taken on another host is reported, never judged.
//
// Why it is safe against processes racing (no flock in Node core, no native dependency):
// - A lock appears whole or not at all: the owner record is written and fsynced to a private
//   draft `run.lock.<token>.tmp`, then link()ed to `run.lock` (link fails with EEXIST, never
//   replaces). No reader can see a half-written lock, so a live creator is never judged torn.
// - A stale lock is removed only by the one process holding a takeover claim on it: a file
//   `run.lock.takeover-<inode>-<level>`, also created by link(). While run.lock is that stale file
//   nobody else can remove it (its owner is dead, creators cannot replace it, other takers need the
//   claim), so the claim holder re-reads run.lock, and only if it is still the very file it judged
//   stale (same inode, same bytes) rename()s its own draft over it: run.lock goes from the stale
//   record straight to the taker's, never absent, so no creator can slip in between and the
//   taker always knows the stale owner it replaced. A claim whose holder died moves takers to the
//   next level; a live one makes them wait.
// - Owner records carry a random token, so "still the same file" and "still mine" (release) never
//   mistake a new lock for an old one. The token is physical: never hashed, never behaviour.
import { randomUUID } from 'node:crypto';
import {
  closeSync,
  fstatSync,
  fsyncSync,
  linkSync,
  renameSync,
  openSync,
  readdirSync,
  readFileSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';
import { asWriteFailure, guardWrite } from '../write-failure.js';

export const RUN_LOCK_FILE = 'run.lock';

/** An unparseable lock (only a crash of an older detsim can leave one) younger than this counts as held. */
export const UNREADABLE_LOCK_GRACE_MS = 10_000;
/** Takeover claims tried on one stale lock before giving up (each further level means a taker died mid-takeover). */
const CLAIM_LEVELS = 8;
/** Waits for another process's takeover in progress (PAUSE_MS each) before the lock is refused as busy. */
const BUSY_WAITS = 200;
const PAUSE_MS = 10;
/** Bound on the acquire loop (each turn is a link, a read and at most one takeover). */
const ACQUIRE_TURNS = 1_000;

/** Who holds a lock (physical data: never hashed, never part of behaviour). */
export interface LockOwner {
  pid: number;
  hostname: string;
  command: string;
}

/** The owner record on disk: the owner plus the token that tells this acquisition from any other. */
interface OwnerRecord extends LockOwner {
  token: string;
}

export interface RunLock {
  readonly path: string;
  /** The stale owner this lock replaced, if any (the caller may log it). */
  readonly tookOver: LockOwner | null;
  /** Remove the lock file if it is still ours. Idempotent. */
  release(): void;
}

/** A lock-like file as read through one descriptor: its inode, bytes, age and owner (null: unparseable). */
interface SeenFile {
  ino: number;
  mtimeMs: number;
  bytes: Buffer;
  owner: OwnerRecord | LockOwner | null;
}

/** Our owner record, fsynced under a private name, waiting to be linked. */
interface Draft {
  path: string;
  /** Its mtime: "now" by the file system's clock, to age unparseable locks without Date.now(). */
  mtimeMs: number;
}

const UNREADABLE: LockOwner = { pid: 0, hostname: 'unknown', command: 'unreadable lock' };

/** Take `<runDir>/run.lock` for `command`; refused (perm_run_dir_locked) while a live process holds it. */
export function acquireRunLock(runDir: string, command: string): RunLock {
  const path = join(runDir, RUN_LOCK_FILE);
  const me: OwnerRecord = { pid: process.pid, hostname: hostname(), command, token: randomUUID() };
  const draft = writeDraft(runDir, me);
  let tookOver: LockOwner | null;
  try {
    tookOver = takeLock(runDir, path, draft);
  } finally {
    unlinkQuietly(draft.path);
  }
  const lock = lockOf(path, me, tookOver);
  try {
    sweepLitter(runDir);
  } catch (e) {
    lock.release(); // readdir failed: do not keep a lock the caller never receives
    throw e;
  }
  return lock;
}

/** The run directories whose lock this process holds (withRunLock), with the locks taken alongside. */
const heldRuns = new Map<string, { command: string; alongside: Map<string, RunLock> }>();

/** Run `work` holding `<runDir>/run.lock`; released however it ends. `onTakeOver` hears of a stale lock replaced. */
export async function withRunLock<T>(
  runDir: string,
  command: string,
  work: () => Promise<T>,
  onTakeOver?: (stale: LockOwner) => void,
): Promise<T> {
  const lock = acquireRunLock(runDir, command);
  if (lock.tookOver) onTakeOver?.(lock.tookOver);
  const key = resolve(runDir);
  const alongside = new Map<string, RunLock>();
  heldRuns.set(key, { command, alongside });
  try {
    return await work();
  } finally {
    heldRuns.delete(key);
    for (const l of alongside.values()) l.release();
    lock.release();
  }
}

/**
 * While this process holds `runDir`'s lock, hold `<dir>/run.lock` too until that lock is released:
 * the run's store is locked in the store itself, so `detsim store gc` through any path to it (a
 * symlink, a bind mount of the store alone) meets the same lock file (the same device and inode).
 * Does nothing when `runDir` is not locked by this process (a store opened outside a run).
 */
export function lockAlongsideRun(runDir: string, dir: string): void {
  const run = heldRuns.get(resolve(runDir));
  const key = resolve(dir);
  if (run === undefined || run.alongside.has(key)) return;
  run.alongside.set(key, acquireRunLock(dir, run.command));
}

/** Link the draft to run.lock, or rename it over a stale lock (taking it over). Returns the stale owner replaced. */
function takeLock(runDir: string, path: string, draft: Draft): LockOwner | null {
  let busyWaits = 0;
  for (let turn = 0; turn < ACQUIRE_TURNS; turn++) {
    if (linkExclusive(draft.path, path)) return null;
    const seen = readSeen(path);
    if (seen === null) continue; // released between our link and our read: link again
    if (isHeld(seen, draft)) throw lockedError(runDir, path, seen.owner);
    const outcome = replaceStale(runDir, path, seen, draft);
    if (outcome === 'replaced') return ownerOnly(seen.owner ?? UNREADABLE);
    if (outcome === 'busy') {
      if (++busyWaits > BUSY_WAITS) break;
      pause(PAUSE_MS);
    }
  }
  throw new DetsimError(
    'perm_run_dir_locked',
    `${path}: another process is taking over the stale lock at the same moment, or an earlier takeover was interrupted; try again (if no detsim process uses ${runDir}, remove ${RUN_LOCK_FILE}.takeover-* files there)`,
    RUN_LOCK_FILE,
  );
}

type StaleOutcome = 'replaced' | 'changed' | 'busy';

/**
 * Replace run.lock by our draft if it is still the stale file `seen`, holding a takeover claim on
 * it while checking and renaming (see the file comment for why nobody else can change it meanwhile).
 * 'replaced': we hold the lock; 'changed': run.lock is another file by now; 'busy': a live process
 * holds the claim.
 */
function replaceStale(runDir: string, path: string, seen: SeenFile, draft: Draft): StaleOutcome {
  const claim = claimTakeover(runDir, seen.ino, draft);
  if (claim === null) return 'busy';
  try {
    const now = readSeen(path);
    if (now === null || now.ino !== seen.ino || !now.bytes.equals(seen.bytes)) return 'changed';
    renameSync(draft.path, path);
    return 'replaced';
  } finally {
    // Safe to drop at once: the stale file is gone (or was not current) and never comes back.
    unlinkQuietly(claim);
  }
}

/** Create the lowest free claim on the stale lock `ino` whose lower levels all belong to dead takers; null if a live taker holds one. */
function claimTakeover(runDir: string, ino: number, draft: Draft): string | null {
  for (let level = 0; level < CLAIM_LEVELS; level++) {
    const claim = join(runDir, `${RUN_LOCK_FILE}.takeover-${ino}-${level}`);
    if (linkExclusive(draft.path, claim)) return claim;
    const holder = readSeen(claim);
    // Vanished (its taker finished): the stale lock is gone too, run.lock will tell.
    if (holder === null) return null;
    if (isHeld(holder, draft)) return null;
  }
  return null;
}

/** Is this lock (or claim) held: a live owner, one on another host, or an unparseable file still young? */
function isHeld(seen: SeenFile, draft: Draft): boolean {
  if (seen.owner === null) return draft.mtimeMs - seen.mtimeMs < UNREADABLE_LOCK_GRACE_MS;
  return holds(seen.owner);
}

function lockedError(runDir: string, path: string, owner: LockOwner | null): DetsimError {
  if (owner === null) {
    return new DetsimError(
      'perm_run_dir_locked',
      `${path} is unreadable and less than ${UNREADABLE_LOCK_GRACE_MS / 1000} s old; try again, or remove it if no process uses ${runDir}`,
      RUN_LOCK_FILE,
    );
  }
  return new DetsimError(
    'perm_run_dir_locked',
    `${runDir} is in use by ${owner.command} (pid ${owner.pid} on ${owner.hostname}); wait for it to finish, or remove ${path} if that process is gone`,
    RUN_LOCK_FILE,
  );
}

/** Write and fsync our owner record under a name no other process uses. */
function writeDraft(runDir: string, me: OwnerRecord): Draft {
  const path = join(runDir, `${RUN_LOCK_FILE}.${me.token}.tmp`);
  // A full disk (or a read-only one) is named by the file it could not write.
  const fd = guardWrite(path, () => openSync(path, 'wx'));
  try {
    writeSync(fd, `${JSON.stringify(me)}\n`);
    fsyncSync(fd);
    return { path, mtimeMs: fstatSync(fd).mtimeMs };
  } catch (e) {
    unlinkQuietly(path);
    throw asWriteFailure(e, path);
  } finally {
    closeSync(fd);
  }
}

/** link(2): creates `to` with `from`'s complete content, or fails if `to` exists. */
function linkExclusive(from: string, to: string): boolean {
  try {
    linkSync(from, to);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
}

/** Read a file through one descriptor (inode and bytes of the same file); null if it does not exist. */
function readSeen(path: string): SeenFile | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  try {
    const info = fstatSync(fd);
    const bytes = readFileSync(fd);
    return { ino: info.ino, mtimeMs: info.mtimeMs, bytes, owner: parseOwner(bytes) };
  } finally {
    closeSync(fd);
  }
}

function parseOwner(bytes: Buffer): OwnerRecord | LockOwner | null {
  try {
    const v = JSON.parse(bytes.toString('utf8')) as Partial<OwnerRecord>;
    if (typeof v.pid !== 'number' || typeof v.hostname !== 'string' || typeof v.command !== 'string') return null;
    const owner = ownerOnly(v as LockOwner);
    return typeof v.token === 'string' ? { ...owner, token: v.token } : owner;
  } catch {
    return null; // torn by a crash of an older version, or not a lock at all
  }
}

function ownerOnly(o: LockOwner): LockOwner {
  return { pid: o.pid, hostname: o.hostname, command: o.command };
}

/**
 * Whether someone holds `<runDir>/run.lock` now (`detsim sweep status` shows such a run as running):
 * a live process on this host, or any owner on another host (which cannot be judged from here).
 */
export function runLockHeld(runDir: string): boolean {
  const owner = readSeen(join(runDir, RUN_LOCK_FILE))?.owner;
  return owner !== undefined && owner !== null && holds(owner);
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

/**
 * Remove drafts and takeover claims left by processes killed mid-acquire. Only while we hold the
 * lock: then every stale file a claim names is gone for good, so no taker can act on a claim.
 * Best effort: the lock is already ours, and an odd entry (a directory, no permission) stays.
 */
function sweepLitter(runDir: string): void {
  for (const name of readdirSync(runDir)) {
    if (!name.startsWith(`${RUN_LOCK_FILE}.`)) continue;
    const path = join(runDir, name);
    try {
      const seen = readSeen(path);
      if (seen?.owner && !holds(seen.owner)) unlinkSync(path);
    } catch {
      // left for the operator: never fail an acquisition that succeeded
    }
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/** Sleep without an event loop (acquisition is synchronous and waits only on another process's takeover). */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function lockOf(path: string, me: OwnerRecord, tookOver: LockOwner | null): RunLock {
  let held = true;
  return {
    path,
    tookOver,
    release() {
      if (!held) return;
      held = false;
      // Nobody replaces a live owner's lock, so "still mine" cannot change before the unlink.
      const now = readSeen(path)?.owner;
      if (now && 'token' in now && now.token === me.token) unlinkQuietly(path);
    },
  };
}
