// The private directory that holds one run's worker Unix sockets: `/tmp/ds-<owner pid>-XXXXXX`.
// A coordinator that is SIGKILLed cannot remove its directory, so every launch first sweeps the
// directories whose owner process is gone. NOT the sockets themselves (the workers bind them) and
// not the normal clean-up (the fleet removes its own directory at shutdown).
import { lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/** Short on purpose: a Unix socket path is limited to ~104 bytes (macOS's tmpdir is too long). */
export const SOCKET_DIR_PARENT = '/tmp';
const NAME = /^ds-([1-9][0-9]*)-[A-Za-z0-9]{6}$/;

/** Is `pid` a process that exists (signal 0: ESRCH means gone, EPERM means alive but not ours)? */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Remove this user's socket directories whose owner pid no longer exists; returns their paths.
 * A directory of a live coordinator is never touched (its pid exists). A reused pid only delays
 * the sweep to a later launch. Best effort: a directory that cannot be read or removed stays.
 */
export function sweepStaleSocketDirs(parent = SOCKET_DIR_PARENT): string[] {
  const uid = process.getuid?.();
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names.sort()) {
    const owner = NAME.exec(name)?.[1];
    if (!owner || Number(owner) === process.pid || processExists(Number(owner))) continue;
    const path = join(parent, name);
    try {
      const st = lstatSync(path);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) continue;
      rmSync(path, { recursive: true, force: true });
      removed.push(path);
    } catch {
      // raced with another sweep, or not ours to remove
    }
  }
  return removed;
}

/** Sweep stale directories, then create this run's socket directory, named after this process. */
export function createSocketDir(parent = SOCKET_DIR_PARENT): { dir: string; swept: string[] } {
  const swept = sweepStaleSocketDirs(parent);
  return { dir: mkdtempSync(join(parent, `ds-${process.pid}-`)), swept };
}
