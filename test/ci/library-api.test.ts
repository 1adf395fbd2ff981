// The user guide's Library example (docs/guide.md) works through the public entry point alone: a script that imports
// only from `detsim` (coordinator/index.ts) loads a config, runs it with checkpoints, writes the
// receipt, resumes from the store's high-water mark, and reads the receipt back with the same
// ReproHash. Real worker processes, few steps. NOT a test of the run loop itself (test/coordinator/).
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CheckpointRun, loadConfig, readReceipt, reproHash, resumeRun, runSession } from '../../coordinator/index.js';
import { hydrateReceipt, RECEIPT_FILE, writeReceipt } from '../../coordinator/index.js';
import { tmpOut } from '../coordinator/helpers.js';
import { REPO_ROOT } from '../workers/harness.js';

describe('library API (detsim)', () => {
  const out = tmpOut('detsim-library-');
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('run with checkpoints, receipt, resume: everything a script needs is exported', async () => {
    const plan = loadConfig(join(REPO_ROOT, 'examples/forage-walkers.yaml'));
    plan.deadlines.startupMs = 60_000; // a loaded CI machine (as test/coordinator/helpers.ts loadPlan)
    const extension = new CheckpointRun({ every: 3 });
    const run = await runSession(plan, { steps: 6, outDir: out, extension, onWarning: () => {} });
    expect(run.steps).toBe(6);
    const written = writeReceipt(run.runDir);
    // receipt.json binds the trace by digest; with its steps read back it hashes to the same ReproHash.
    const onDisk = readReceipt(join(run.runDir, RECEIPT_FILE));
    expect(reproHash(hydrateReceipt(run.runDir, onDisk)).reproHash).toBe(written.reproHash);
    const resumed = await resumeRun(run.runDir);
    expect(resumed).toMatchObject({ boundary: 6, steps: 6, abandonedSteps: 0 });
  }, 120_000);
});
