// Goldens (D6): every example in examples/ has a frozen ReproHash and behaviour digest in
// fixtures/golden/, and a fresh run of the example at the golden's step count reproduces both. The
// goldens were frozen only after two fresh runs agreed (detsim verify --update-goldens); this test
// is a third, independent run, and recomputes the behaviour digest from the trace's lines (read
// through the library's reader, in the default segmented format) with the independent
// `canonicalize` package (not detsim's canonical JSON). One example runs again with the old
// trace.jsonl format pinned: the storage format moves no golden. The behaviour digest does not
// cover the protocol file, so a golden re-frozen after a proto edit cannot hide a behaviour change.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import oracle from 'canonicalize';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_GOLDEN_DIR,
  type Golden,
  exampleName,
  goldenCheck,
  readGolden,
} from '../../coordinator/diff0/goldens.js';
import { refusal } from '../refusal.js';
import { writeReceipt } from '../../coordinator/receipt/receipt.js';
import { defaultConfigs } from '../../coordinator/diff0/verify.js';
import { runSession } from '../../coordinator/session/run.js';
import { traceFormatOf } from '../../coordinator/trace/trace-store.js';
import { asOlderRun, traceLinesOf } from '../trace-read.js';
import { prepareRuntimesFor } from '../cross-lang/example-runtimes.js';
import { loadConfig } from '../../coordinator/config.js';
import { builtWorkersFor } from '../coordinator/helpers.js';

/** Start the config's TypeScript worker processes built (helpers.ts builtWorkersFor: not tsx on each start). */
const built = (config: string) => ({ commandFor: builtWorkersFor(loadConfig(config)) });

const examples = defaultConfigs('examples');

/** sha256 over oracle-canonical(behaviour) + "\n" of every trace line: the digest, recomputed independently. */
function independentBehaviourDigest(runDir: string): string {
  const h = createHash('sha256');
  for (const line of traceLinesOf(runDir)) {
    h.update(`${oracle((JSON.parse(line) as { behaviour: unknown }).behaviour)}\n`);
  }
  return h.digest('hex');
}

describe('golden ReproHashes of the examples', () => {
  it('every example has a golden file naming its config', () => {
    expect(examples.length).toBeGreaterThan(0);
    for (const config of examples) {
      const g = readGolden(DEFAULT_GOLDEN_DIR, exampleName(config));
      expect(g, `${config} has no fixtures/golden/${exampleName(config)}.json`).not.toBeNull();
      expect(g!.config).toBe(config);
      expect(existsSync(g!.config)).toBe(true);
      expect(g!.evidence_class).toBe('simulated');
      expect(g!.behaviourDigest).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  it('[D6] a changed behaviour fails the golden check even when the ReproHash was re-frozen', () => {
    const g: Golden = {
      example: 'x',
      config: 'x.yaml',
      steps: 3,
      reproHash: '0123456789abcdef',
      behaviourDigest: 'a'.repeat(64),
      evidence_class: 'simulated',
      how: 'test',
    };
    expect(goldenCheck('x', g, g.reproHash, g.behaviourDigest)).toMatchObject({
      status: 'pass',
      reason: 'audit_golden_hit',
    });
    const moved = goldenCheck('x', g, g.reproHash, 'b'.repeat(64));
    expect(moved).toMatchObject({
      status: 'fail',
      reason: 'audit_golden_mismatch',
      detail: { field: 'behaviourDigest', golden: 'a'.repeat(64), behaviourDigest: 'b'.repeat(64) },
    });
    expect(goldenCheck('x', g, 'fedcba9876543210', g.behaviourDigest)).toMatchObject({
      status: 'fail',
      reason: 'audit_golden_mismatch',
      detail: { golden: g.reproHash },
    });
  });

  it('a golden without behaviourDigest is refused naming the field (only --update-goldens may add it)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-golden-old-'));
    const { behaviourDigest: _dropped, ...old } = readGolden(DEFAULT_GOLDEN_DIR, 'lif-pair')!;
    writeFileSync(join(dir, 'lif-pair.json'), `${JSON.stringify(old)}\n`);
    expect(refusal(() => readGolden(dir, 'lif-pair'))).toMatchObject({
      reason: 'struct_missing_field',
      field: 'behaviourDigest',
    });
    expect(readGolden(dir, 'lif-pair', { forUpdate: true })!.behaviourDigest).toBe('');
  });

  it("an older detsim's trace.jsonl of the same run reproduces the forage-walkers golden too", async () => {
    const g = readGolden(DEFAULT_GOLDEN_DIR, 'forage-walkers')!;
    const result = await runSession(g.config, {
      outDir: mkdtempSync(join(tmpdir(), 'detsim-golden-jsonl-')),
      steps: g.steps,
      hooks: built(g.config),
    });
    expect(asOlderRun(result.runDir)).toBe(g.reproHash);
    expect(traceFormatOf(result.runDir)).toBe('jsonl');
    expect(independentBehaviourDigest(result.runDir)).toBe(g.behaviourDigest);
  }, 240_000);

  for (const config of examples) {
    it(
      `[D6] a fresh run of ${config} reproduces its golden ReproHash and behaviour digest`,
      { timeout: 600_000 },
      async (ctx) => {
        // Rust or Python workers need their binary or interpreter: made ready when possible, else
        // skipped with the reason (npm test alone on a fresh clone; in CI both are there).
        const skip = prepareRuntimesFor(config);
        if (skip) return ctx.skip(skip);
        const g = readGolden(DEFAULT_GOLDEN_DIR, exampleName(config))!;
        const result = await runSession(config, {
          outDir: mkdtempSync(join(tmpdir(), 'detsim-golden-')),
          steps: g.steps,
          onWarning: () => undefined,
          hooks: built(config),
        });
        const w = writeReceipt(result.runDir);
        expect(w.unknownFields).toEqual([]);
        expect(w.reproHash).toBe(g.reproHash);
        expect(result.behaviourDigest).toBe(g.behaviourDigest);
        expect(traceFormatOf(result.runDir)).toBe('segments');
        expect(independentBehaviourDigest(result.runDir)).toBe(g.behaviourDigest);
      },
    );
  }
});
