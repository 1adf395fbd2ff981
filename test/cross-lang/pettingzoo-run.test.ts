// examples/pettingzoo/rps.yaml end to end through the real CLI: PettingZoo's classic/rps-v2 (from
// PyPI, the [pettingzoo] extra) as a Python environment worker and two policy agents on a Python
// agent worker, through detsim_worker.adapters.pettingzoo. `detsim run --checkpoint-every 8`, then
// `detsim resume` of a copy from a middle checkpoint (restored by action replay, not pickle), must
// give the uninterrupted run's behaviour digest and ReproHash. Not the adapters' unit tests
// (workers/python/tests/test_pettingzoo_adapters.py).
import { spawnSync } from 'node:child_process';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { writeReceipt } from '../../coordinator/receipt/receipt.js';
import { committedIds, detsim, summary, traces } from '../checkpoint/cli.js';
import { tmpOut } from '../coordinator/helpers.js';
import { ensurePythonWorker, MAKE_PYTHON_VENV, pythonWorkerSkip } from './python-worker.js';

const EXAMPLE = 'examples/pettingzoo/rps.yaml';

/** The interpreter, checked to import PettingZoo too: the example needs the [pettingzoo] extra. */
function ensurePettingZoo(): void {
  const python = ensurePythonWorker();
  const probe = spawnSync(python, ['-c', 'import pettingzoo'], { encoding: 'utf8' });
  if (probe.status !== 0)
    throw new Error(`${python} cannot import pettingzoo; make the venv with: ${MAKE_PYTHON_VENV}`);
}

describe.skipIf(pythonWorkerSkip !== null)(`${EXAMPLE} through detsim run and detsim resume`, () => {
  beforeAll(() => ensurePettingZoo(), 60_000);

  it('resumed from the middle checkpoint ckpt-e1-24: the uninterrupted run’s behaviour digest and ReproHash', () => {
    const out = tmpOut('detsim-pz-');
    // --checkpoint-wait: a boundary that finds the writer's two slots busy waits instead of being
    // refused BUSY (by design otherwise: seen once in CI, ckpt-e1-24 refused); this case is about resume.
    const run = detsim(['run', EXAMPLE, '--checkpoint-every', '8', '--checkpoint-wait', '--out', out]);
    expect(run.status, run.stderr).toBe(0);
    const whole = join(out, 'pettingzoo-rps-1');
    const checkpoints = JSON.stringify(summary(whole).checkpoints);
    expect(committedIds(whole), checkpoints).toEqual(expect.arrayContaining(['ckpt-e1-24', 'ckpt-e1-40']));
    const rewards = traces(whole).flatMap((t) => t.behaviour.rewards as unknown[]);
    expect(rewards.length).toBeGreaterThan(0); // the games were played: someone won a round

    const copy = join(out, 'resumed');
    cpSync(whole, copy, { recursive: true });
    const resumed = detsim(['resume', copy, '--checkpoint', 'ckpt-e1-24']);
    expect(resumed.status, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain('restored         ckpt-e1-24 at boundary 24 into epoch e2');
    const after = traces(copy).filter((t) => t.behaviour.scope.epoch === 'e2');
    expect(after).toHaveLength(16); // steps 24..39 ran again, in the new epoch, across an episode end (30)
    expect(summary(copy).behaviourDigest).toBe(summary(whole).behaviourDigest);
    expect(writeReceipt(copy).reproHash).toBe(writeReceipt(whole).reproHash);
  }, 240_000);
});
