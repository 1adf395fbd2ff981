// The bench harness: `npm run bench -- formats --quick` runs and writes a receipt with the
// required fields. Checks the receipt's shape only, never the figures (performance lives in bench/).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'detsim-bench-test-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

const bench = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
  });

describe('bench harness', () => {
  it('formats --quick writes a receipt with the required fields and prints a table', () => {
    const r = bench('formats', '--quick', '--out', out);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(r.status).toBe(0);
    const files = readdirSync(out).filter((f) => f.endsWith('.json'));
    expect(files).toHaveLength(1);
    const receipt = JSON.parse(readFileSync(join(out, files[0]!), 'utf8'));
    expect(receipt.evidence_class).toBe('measured');
    expect(receipt.measure_source).toBe(`node --import tsx bench/run.ts formats --quick --out ${out}`);
    expect(Number.isNaN(Date.parse(receipt.measure_ts))).toBe(false);
    expect(files[0]).toBe(`${receipt.measure_ts.replace(/[:.]/g, '-')}.json`);
    for (const key of ['cpuModel', 'cores', 'memoryBytes', 'node', 'os']) expect(receipt.machine).toHaveProperty(key);
    expect(receipt.machine.node).toBe(process.version);
    expect(receipt.quick).toBe(true);
    expect(receipt.suites.map((s: { name: string }) => s.name)).toEqual(['formats']);
    const figures = receipt.suites[0].figures as Record<string, unknown>[];
    expect(figures.map((f) => f.id)).toEqual([
      'canonicalize.manifest',
      'canonicalize.trace',
      'deriveSeed',
      'envelope.encodeParts',
      'envelope.encode',
      'envelope.decode',
    ]);
    for (const f of figures) {
      expect(typeof f.value).toBe('number');
      expect(typeof f.unit).toBe('string');
      const limit = f.limit as { name: string; value: number; unit: string };
      expect(limit.unit).toBe(f.unit);
      expect(typeof limit.name).toBe('string');
      expect(f.ratio).toBeCloseTo((f.value as number) / limit.value, 9);
    }
    expect(r.stdout).toContain('| suite | figure | value |');
    expect(r.stdout).toContain(`receipt: ${join(out, files[0]!)}`);
  });

  it('refuses an unknown suite with exit 2 and writes nothing', () => {
    const empty = mkdtempSync(join(tmpdir(), 'detsim-bench-test-'));
    const r = bench('no-such-suite', '--out', empty);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/unknown suite "no-such-suite"/);
    expect(readdirSync(empty)).toEqual([]);
    rmSync(empty, { recursive: true, force: true });
  });
});
