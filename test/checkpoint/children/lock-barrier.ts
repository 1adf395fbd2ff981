// Preload for the two-resume race (test/checkpoint/run-lock.test.ts): stops a detsim process at its
// first file operation on run.lock until the test creates `<barrier>/go`, so two processes reach the
// lock within microseconds of each other instead of a process start-up apart. It interposes on
// node:fs (openSync, linkSync) and changes nothing else; without DETSIM_TEST_LOCK_BARRIER it does nothing.
// Not a test by itself; not loaded by detsim outside tests.
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';

const barrier = process.env.DETSIM_TEST_LOCK_BARRIER;
if (barrier) {
  let passed = false;
  const gate = (path: unknown): void => {
    if (passed || !String(path).includes('run.lock')) return;
    passed = true;
    fs.writeFileSync(join(barrier, `arrived-${process.pid}`), '');
    // Spin, not sleep: both processes must leave the barrier as close together as possible.
    while (!fs.existsSync(join(barrier, 'go'))) {
      // waiting for the test to open the barrier
    }
  };
  const wrapped = fs as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of ['openSync', 'linkSync']) {
    const original = wrapped[name]!;
    wrapped[name] = (...args: unknown[]) => {
      gate(args[0]);
      return original(...args);
    };
  }
  syncBuiltinESMExports();
}
