// A SIGKILLed coordinator (the real CLI, `detsim run`) leaves nothing behind: every worker dies with
// it — one spinning forever in model code, one stopped with SIGSTOP — and the socket directory it
// could not remove is swept by the next launch, while a live coordinator's directory is untouched.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { runSession } from '../../coordinator/session/run.js';
import {
  killLeftovers,
  readyWorkers,
  sigkill,
  socketDir,
  startCoordinator,
  stepsCommitted,
  waitFor,
} from './coordinator-process.js';
import { isRunning, loadPlan, tmpOut } from './helpers.js';

afterEach(killLeftovers);

describe('workers die with a SIGKILLed coordinator', () => {
  it('a worker spinning forever in model code dies with it', async () => {
    const c = startCoordinator('test/coordinator/fixtures/spin-forever.yaml', 'spin-forever');
    const { pids } = await readyWorkers(c, 3);
    await waitFor('the model to spin', () => c.log().includes('spin-forever: spinning in prepare'), 60_000);
    await sigkill(c);
    await waitFor(`workers ${pids.join(', ')} to die`, () => pids.every((pid) => !isRunning(pid)), 10_000);
  }, 180_000);

  it('a stopped (SIGSTOP) worker dies with it', async () => {
    const c = startCoordinator('test/coordinator/fixtures/long-walkers.yaml', 'long-walkers', { stepByStep: true });
    const { pids } = await readyWorkers(c, 3);
    await stepsCommitted(c, 2);
    process.kill(pids[0]!, 'SIGSTOP');
    process.kill(pids[1]!, 'SIGSTOP');
    await sigkill(c);
    await waitFor(`workers ${pids.join(', ')} to die`, () => pids.every((pid) => !isRunning(pid)), 10_000);
  }, 180_000);
});

describe('socket directories', () => {
  it('the next launch sweeps the directory of a SIGKILLed coordinator, not that of a live one', async () => {
    const dead = startCoordinator('test/coordinator/fixtures/long-walkers.yaml', 'long-walkers');
    const live = startCoordinator('test/coordinator/fixtures/long-walkers.yaml', 'long-walkers');
    const deadDir = socketDir((await readyWorkers(dead, 3)).listens);
    const liveWorkers = await readyWorkers(live, 3);
    const liveDir = socketDir(liveWorkers.listens);
    // The live coordinator waits (idle) for a stopped worker while the rest of the test runs.
    process.kill(liveWorkers.pids[1]!, 'SIGSTOP');
    const liveSockets = readdirSync(liveDir).sort();
    await sigkill(dead);
    expect(existsSync(deadDir)).toBe(true);
    // Another run starts (and ends) in this process: its launch sweeps.
    // On worker processes: a launch that makes a socket directory is the one that sweeps.
    const plan = { ...loadPlan('examples/lif-pair.yaml'), steps: 1, transport: 'unix' as const };
    await runSession(plan, { outDir: tmpOut() });
    expect(existsSync(deadDir)).toBe(false);
    expect(readdirSync(liveDir).sort()).toEqual(liveSockets);
    await sigkill(live);
    rmSync(liveDir, { recursive: true, force: true });
  }, 240_000);
});
