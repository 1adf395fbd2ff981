// run.json's one schema (coordinator/session/run-json.ts): what a real run writes (runRecord) reads back
// through the same schema unchanged, and a record that does not fit is refused naming the field
// (struct_invalid_field), before any rebuild. Not the plan rebuild itself (run-record-plan.test.ts).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { planFromRunJson } from '../../coordinator/checkpoint/run-record.js';
import { readRunJson } from '../../coordinator/session/run-json.js';
import { runSession } from '../../coordinator/session/run.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { sampleReceipt } from '../receipt/sample.js';
import { refusal } from '../refusal.js';

const sampleRun = () =>
  structuredClone(sampleReceipt().run) as Record<string, unknown> & { agents: Record<string, unknown>[] };

describe('run.json has one schema for its writer and its readers', () => {
  it('the run.json a run writes is read back through the schema exactly as written', { timeout: 120_000 }, async () => {
    const out = mkdtempSync(join(tmpdir(), 'detsim-runjson-'));
    const r = await runSession('examples/lif-pair.yaml', {
      outDir: out,
      steps: 2,
      onWarning: () => undefined,
      logLevel: 'warn',
    });
    const written = parseStrict(readFileSync(join(r.runDir, 'run.json')));
    expect(readRunJson(written)).toStrictEqual(written);
  });

  it('a missing or mistyped field is refused by name before the plan is rebuilt', () => {
    const noDigest = sampleRun();
    delete noDigest.agents[1]!.profileDigest;
    expect(refusal(() => readRunJson(noDigest))).toMatchObject({
      reason: 'struct_invalid_field',
      field: 'agents[1].profileDigest',
    });
    const badTransport = { ...sampleRun(), transport: 'pigeon' };
    expect(refusal(() => planFromRunJson(badTransport))).toMatchObject({
      reason: 'struct_invalid_field',
      field: 'transport',
    });
    const stringSteps = { ...sampleRun(), steps: '2' };
    expect(refusal(() => planFromRunJson(stringSteps))).toMatchObject({
      reason: 'struct_invalid_field',
      field: 'steps',
    });
  });

  it('a record without dispatch (older runs) reads as concurrent', () => {
    const { dispatch: _d, ...old } = sampleRun();
    expect(readRunJson(old).dispatch).toBe('concurrent');
  });
});
