// Preload for the resume race (test/checkpoint/run-lock.test.ts): an adversarial scheduler for
// run.lock. It interposes on node:fs (openSync, linkSync, unlinkSync) and changes nothing else;
// without DETSIM_TEST_LOCK_BARRIER it does nothing. Not a test; never loaded by detsim itself.
// - Start together: a racer stops at its first file operation on run.lock until the test creates
//   `<barrier>/go`, so the racers reach the lock together instead of a process start-up apart.
// - The unlucky schedule for a check-then-unlink takeover: the first racer to unlink run.lock waits
//   until every racer has read it (all judged the same stale file); every later unlink of run.lock
//   waits until run.lock is another file than the one that racer read (the first re-created it).
//   A correct lock never unlinks a file it did not verify, so it passes either way. Waits end after 1 s.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { basename, join } from 'node:path';

const barrier = process.env.DETSIM_TEST_LOCK_BARRIER;
const racers = Number(process.env.DETSIM_TEST_LOCK_RACERS ?? 2);

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function waitUntil(done: () => boolean): void {
  for (let waited = 0; waited < 1000 && !done(); waited++) sleep(1);
}

function inodeOf(path: string): number | null {
  try {
    return fs.statSync(path).ino;
  } catch {
    return null;
  }
}

/** Replace `name` on node:fs with a version that calls `before(args)` first. */
function interpose(name: string, before: (args: unknown[]) => void): void {
  const table = fs as unknown as Record<string, (...args: unknown[]) => unknown>;
  const original = table[name]!;
  table[name] = (...args: unknown[]) => {
    before(args);
    return original(...args);
  };
}

if (barrier) {
  let started = false;
  let readIno: number | null = null;
  const startTogether = (path: string): void => {
    if (started || !path.includes('run.lock')) return;
    started = true;
    fs.writeFileSync(join(barrier, `arrived-${process.pid}`), '');
    // Spin, not sleep: the racers must leave the barrier as close together as possible.
    while (!fs.existsSync(join(barrier, 'go'))) {
      // waiting for the test to open the barrier
    }
  };
  const noteRead = (path: string, flags: unknown): void => {
    if (basename(path) !== 'run.lock' || (flags !== undefined && flags !== 'r') || readIno !== null) return;
    readIno = inodeOf(path);
    fs.writeFileSync(join(barrier, `read-${process.pid}`), '');
  };
  const unluckyUnlink = (path: string): void => {
    if (basename(path) !== 'run.lock') return;
    try {
      fs.writeFileSync(join(barrier, 'unlinked'), '', { flag: 'wx' });
    } catch {
      waitUntil(() => inodeOf(path) !== null && inodeOf(path) !== readIno);
      return;
    }
    waitUntil(() => fs.readdirSync(barrier).filter((n) => n.startsWith('read-')).length >= racers);
  };
  interpose('openSync', ([path, flags]) => {
    startTogether(String(path));
    noteRead(String(path), flags);
  });
  interpose('linkSync', ([from]) => startTogether(String(from)));
  interpose('unlinkSync', ([path]) => unluckyUnlink(String(path)));
  syncBuiltinESMExports();
}
