// The Rust agent worker dies with a SIGKILLed coordinator (the real CLI) even while stopped with
// SIGSTOP — a stopped process runs none of its own parent-watch threads; the launcher's
// parent-death signal (setpriv --pdeathsig KILL) ends it.
import { readFileSync } from 'node:fs';
import { afterEach, beforeAll, describe, it } from 'vitest';
import {
  killLeftovers,
  readyWorkers,
  sigkill,
  startCoordinator,
  stepsCommitted,
  waitFor,
} from '../coordinator/coordinator-process.js';
import { isRunning } from '../coordinator/helpers.js';
import { RUST_WORKER, ensureRustWorker, rustWorkerSkip } from './rust-worker.js';

afterEach(killLeftovers);

describe.skipIf(rustWorkerSkip !== null)('a Rust worker dies with its coordinator', () => {
  beforeAll(() => ensureRustWorker(), 1_500_000);

  it('a stopped (SIGSTOP) Rust worker dies when its coordinator is SIGKILLed', async () => {
    const c = startCoordinator('test/coordinator/fixtures/long-mixed.yaml', 'long-mixed', { stepByStep: true });
    const { pids } = await readyWorkers(c, 3);
    const rust = pids.find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith(RUST_WORKER));
    if (rust === undefined) throw new Error(`no worker runs ${RUST_WORKER}`);
    await stepsCommitted(c, 2);
    process.kill(rust, 'SIGSTOP');
    await sigkill(c);
    await waitFor(`workers ${pids.join(', ')} to die`, () => pids.every((pid) => !isRunning(pid)), 10_000);
  }, 180_000);
});
