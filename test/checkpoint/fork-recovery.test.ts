// Recovery inside a fork that changed params (forkRun with `recover`, real worker processes): a worker
// SIGKILLed after the boundary, before the fork's first own checkpoint, is recovered from the fork's
// base checkpoint, which is restored with the fork's params again (run-checkpoints.ts rebindFor), so
// the fork ends with the ReproHash of the same fork uninterrupted.
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { forkRun } from '../../coordinator/checkpoint/fork.js';
import { recoveryWith } from '../../coordinator/checkpoint/recovery.js';
import type { Fleet } from '../../coordinator/launch/launcher.js';
import { runSession } from '../../coordinator/session/run.js';
import { CheckpointRun } from '../../coordinator/checkpoint/run-checkpoints.js';
import { loadConfig } from '../../coordinator/config.js';
import { readRun, tmpOut } from '../coordinator/helpers.js';

const OVERRIDES = [{ path: 'environment.params.food', value: 48 }];

let work: string;
let parent: string;

beforeAll(async () => {
  work = tmpOut('detsim-fork-recover-');
  // Worker processes (the fork inherits them): the test SIGKILLs one.
  const r = await runSession(
    { ...loadConfig('examples/forage-walkers.yaml'), transport: 'unix' },
    {
      steps: 240,
      outDir: join(work, 'runs'),
      extension: new CheckpointRun({ every: 100 }),
    },
  );
  parent = r.runDir;
}, 120_000);

describe('recovery in a fork that changed params', () => {
  it('a worker killed at step 230 is recovered from the base checkpoint with the fork params: the uninterrupted fork', async () => {
    const whole = await forkRun(parent, {
      checkpointId: 'ckpt-e1-200',
      overrides: OVERRIDES,
      out: join(work, 'whole'),
    });
    let fleet: Fleet | undefined;
    let killed = false;
    const recovered = await forkRun(parent, {
      checkpointId: 'ckpt-e1-200',
      overrides: OVERRIDES,
      out: join(work, 'recovered'),
      recover: (checkpoints) => recoveryWith({ maxRestarts: 1 })(checkpoints),
      hooks: {
        onLaunched: (f) => (fleet = f),
        beforePhase: (step, phase) => {
          if (killed || step !== 230n || phase !== 'advance') return;
          killed = true;
          const w = fleet!.all()[1]!;
          if (w.instance.kind === 'process') process.kill(w.instance.pid, 'SIGKILL');
        },
      },
    });
    expect(killed).toBe(true);
    const summary = readRun(recovered.runDir).summary as { recoveries: number; recovery: { recovered: unknown[] } };
    expect(summary.recoveries).toBe(1);
    expect(summary.recovery.recovered).toMatchObject([{ checkpointId: 'ckpt-e1-200', boundary: '200' }]);
    expect([recovered.reproHash, recovered.behaviourDigest]).toEqual([whole.reproHash, whole.behaviourDigest]);
  }, 240_000);
});
