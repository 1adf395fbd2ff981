// Evidence classes and honesty checks (D8): receipts carry evidence_class; measured evidence
// needs a source and a time (H1); a receipt without a class is flagged (H2) and turns verify yellow.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { buildAttestation } from '../../coordinator/diff0/attestation.js';
import { honestyWarnings, measured } from '../../coordinator/receipt/honesty.js';
import { readReceipt, writeReceipt } from '../../coordinator/receipt/receipt.js';
import { replayChecks } from '../../coordinator/diff0/replay.js';
import { sampleReceipt } from './sample.js';

function runDirFromSample(): string {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-receipt-'));
  const r = sampleReceipt();
  writeFileSync(join(dir, 'run.json'), `${canonicalize(r.run)}\n`);
  writeFileSync(join(dir, 'trace.jsonl'), r.steps.map((s) => `${canonicalize(s)}\n`).join(''));
  writeFileSync(join(dir, 'summary.json'), `${canonicalize(r.summary)}\n`);
  return dir;
}

describe('evidence classes (D8)', () => {
  it('[D8] every written receipt carries evidence_class; simulated has null source and time', () => {
    const dir = runDirFromSample();
    const w = writeReceipt(dir);
    const r = readReceipt(w.receiptPath);
    expect(r).toMatchObject({ evidence_class: 'simulated', measure_source: null, measure_ts: null });
    expect(w.honesty).toEqual([]);
    expect(r.reproHash).toBe(w.reproHash);
    // A measured receipt carries its source and time, and they stay out of the hash.
    const m = writeReceipt(dir, { evidence: measured('npm run bench -- lockstep', '2026-11-29T17:00:00.000Z') });
    expect(readReceipt(m.receiptPath)).toMatchObject({
      evidence_class: 'measured',
      measure_source: 'npm run bench -- lockstep',
      measure_ts: '2026-11-29T17:00:00.000Z',
    });
    expect(m.honesty).toEqual([]);
  });

  it('[D8] H1 for measured without source or time, H2 for a missing or invalid class', () => {
    expect(
      honestyWarnings({ evidence_class: 'measured', measure_source: null, measure_ts: '2026-01-01T00:00:00Z' }),
    ).toEqual([{ check: 'H1', reason: 'hon_measured_no_source', message: 'receipt: measured without measure_source' }]);
    expect(
      honestyWarnings({ evidence_class: 'measured', measure_source: 'bench', measure_ts: null }).map((w) => w.reason),
    ).toEqual(['hon_measured_no_ts']);
    expect(honestyWarnings({ evidence_class: 'third_party', measure_source: '' }).map((w) => w.check)).toEqual(['H1']);
    expect(
      honestyWarnings({ evidence_class: 'simulated', measure_source: 'x', measure_ts: null }).map((w) => w.reason),
    ).toEqual(['hon_simulated_with_measure']);
    expect(honestyWarnings({}).map((w) => [w.check, w.reason])).toEqual([['H2', 'hon_missing_evidence_class']]);
    expect(honestyWarnings({ evidence_class: 'guessed' }).map((w) => w.check)).toEqual(['H2']);
    expect(honestyWarnings({ evidence_class: 'third_party', measure_source: 'https://example.org/paper' })).toEqual([]);
  });

  it('[D8] a receipt without evidence_class makes the verdict yellow (exit 2)', () => {
    const strip = (r: unknown) => {
      delete (r as Record<string, unknown>).evidence_class;
      return r as never;
    };
    const r = replayChecks('s1', [strip(sampleReceipt()), strip(sampleReceipt({ wall: '9' }))], null);
    const h = r.checks.find((c) => c.check === 'honesty')!;
    expect(h).toMatchObject({ status: 'warn', reason: 'hon_missing_evidence_class', action: 'advise', layer: 'L6' });
    expect(r.checks.filter((c) => c.check !== 'honesty').every((c) => c.status === 'pass')).toBe(true);
    const a = buildAttestation(r.checks, 't');
    expect(a.verdict).toBe('yellow');
    expect(a.exitCode).toBe(2);
  });
});
