// CI keeps the bench harness from rotting: `npm run bench -- --quick` runs EVERY registered suite
// into a fresh directory and its receipt holds each suite with figures or an explicit skip reason,
// plus one SVG chart per suite. Checks structure only, NEVER the figure values (bench/ holds those).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { SUITES } from '../../bench/suites/index.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'detsim-bench-quick-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Fig {
  id: string;
  value: number;
  unit: string;
  limit: { value: number; unit: string } | null;
  ratio: number | null;
  note?: string;
}

it('npm run bench -- --quick runs every suite and writes a receipt with figures or a skip reason for each, and its charts', () => {
  // No peers venv here (as on CI): the peers suite must say "peer unavailable", not fail.
  const r = spawnSync('npm', ['run', '--silent', 'bench', '--', '--quick', '--out', scratch], {
    cwd: root,
    encoding: 'utf8',
    // About 75 s on 2 shared cores before the thread and inline rows; those add a few runs each.
    timeout: 170_000,
    env: { ...process.env, DETSIM_PEERS_VENV: join(scratch, 'no-venv') },
  });
  expect(r.status, r.stderr.slice(-2000)).toBe(0);
  const files = readdirSync(scratch);
  const json = files.filter((f) => f.endsWith('.json'));
  expect(json).toHaveLength(1);
  const receipt = JSON.parse(readFileSync(join(scratch, json[0]!), 'utf8'));
  expect(receipt.evidence_class).toBe('measured');
  expect(receipt.measure_source).toMatch(/bench\/run\.ts --quick --out /);
  expect(receipt.quick).toBe(true);
  for (const key of ['cpuModel', 'cores', 'memoryBytes', 'node', 'os', 'loadAverage'])
    expect(receipt.machine).toHaveProperty(key);
  expect(receipt.suites.map((s: { name: string }) => s.name)).toEqual(SUITES.map((s) => s.name));
  for (const suite of receipt.suites as { name: string; figures: Fig[]; details?: Record<string, unknown> }[]) {
    const skipped = suite.details?.skipped;
    if (suite.figures.length === 0) {
      // Only an explicit, worded skip may stand for figures.
      expect(typeof skipped, `${suite.name} has no figures and no skip reason`).toBe('string');
      expect((skipped as string).length).toBeGreaterThan(10);
      continue;
    }
    for (const f of suite.figures) {
      expect(Number.isFinite(f.value), `${suite.name}/${f.id}`).toBe(true);
      expect(f.unit.length).toBeGreaterThan(0);
      // A ratio exists exactly when a limit was measured beside the figure, and is value ÷ limit.
      if (f.limit) {
        expect(f.limit.unit).toBe(f.unit);
        expect(f.ratio).toBeCloseTo(f.value / f.limit.value, 9);
      } else expect(f.ratio).toBeNull();
    }
  }
  // The peers suite, without its venv: detsim measured, each peer figure says why it has no limit.
  const peers = receipt.suites.find((s: { name: string }) => s.name === 'peers');
  expect(peers.details.detsimFailures).toEqual([]);
  for (const f of peers.figures as Fig[]) {
    expect(f.limit).toBeNull();
    expect(f.note).toMatch(/^peer unavailable: /);
  }
  // One chart per suite next to the receipt, each a complete SVG document.
  const stem = json[0]!.replace(/\.json$/, '');
  for (const s of SUITES) {
    const svg = readFileSync(join(scratch, `${stem}.${s.name}.svg`), 'utf8');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
  }
}, 180_000);
