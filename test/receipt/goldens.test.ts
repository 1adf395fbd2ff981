// Goldens (D6): every example in examples/ has a frozen ReproHash in fixtures/golden/, and a fresh
// run of the example at the golden's step count reproduces it. The goldens were frozen only after
// two fresh runs agreed (detsim verify --update-goldens); this test is a third, independent run.
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_GOLDEN_DIR, exampleName, readGolden } from '../../coordinator/receipt/goldens.js';
import { writeReceipt } from '../../coordinator/receipt/receipt.js';
import { defaultConfigs } from '../../coordinator/receipt/verify.js';
import { runSession } from '../../coordinator/run.js';
import { loadConfig } from '../../coordinator/config.js';
import { ensureRustWorker, rustWorkerSkip } from '../cross-lang/rust-worker.js';

const examples = defaultConfigs('examples');

describe('golden ReproHashes of the examples', () => {
  it('every example has a golden file naming its config', () => {
    expect(examples.length).toBeGreaterThan(0);
    for (const config of examples) {
      const g = readGolden(DEFAULT_GOLDEN_DIR, exampleName(config));
      expect(g, `${config} has no fixtures/golden/${exampleName(config)}.json`).not.toBeNull();
      expect(g!.config).toBe(config);
      expect(existsSync(g!.config)).toBe(true);
      expect(g!.evidence_class).toBe('simulated');
    }
  });

  for (const config of examples) {
    it(`D6: a fresh run of ${config} reproduces its golden ReproHash`, { timeout: 600_000 }, async (ctx) => {
      // An example with Rust agent workers needs the Rust worker binary: build it (a no-op when up
      // to date) when cargo is here, else skip with the reason (npm test alone on a fresh clone).
      if (loadConfig(config).workers.some((w) => w.runtime === 'rust')) {
        if (rustWorkerSkip) return ctx.skip(rustWorkerSkip);
        ensureRustWorker();
      }
      const g = readGolden(DEFAULT_GOLDEN_DIR, exampleName(config))!;
      const result = await runSession(config, { outDir: mkdtempSync(join(tmpdir(), 'detsim-golden-')), steps: g.steps, onWarning: () => undefined });
      const w = writeReceipt(result.runDir);
      expect(w.unknownFields).toEqual([]);
      expect(w.reproHash).toBe(g.reproHash);
    });
  }
});
