// The bench `workers` suite's runtimes: with neither the Rust binary nor a Python interpreter that
// imports detsim_worker it measures nothing and says why for each; with the Python worker available
// a Python run of the walker case gives the TypeScript run's behaviour digest. Tiny runs; no figure
// value is judged (bench/ holds those). Not the quick-all structure check (quick-all.test.ts).
import { tmpdir } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { CASES, measureWorkers, workers } from '../../bench/suites/workers.js';
import { ensurePythonWorker, pythonWorkerSkip } from '../cross-lang/python-worker.js';

const saved = { rust: process.env.DETSIM_RUST_WORKER, python: process.env.DETSIM_PYTHON };
const restore = (name: string, value: string | undefined) =>
  value === undefined ? delete process.env[name] : (process.env[name] = value);
afterEach(() => {
  restore('DETSIM_RUST_WORKER', saved.rust);
  restore('DETSIM_PYTHON', saved.python);
});

const ctx = { quick: true, log: () => undefined, tmpDir: tmpdir() } as unknown as Parameters<typeof workers.run>[0];

describe('bench workers suite', () => {
  it('without the Rust worker and without a usable Python it is skipped, naming both reasons and fixes', async () => {
    process.env.DETSIM_RUST_WORKER = '/nonexistent/detsim-worker-rs';
    process.env.DETSIM_PYTHON = '/nonexistent/python3';
    const r = await workers.run(ctx);
    expect(r.figures).toEqual([]);
    expect(r.details?.skipped).toBe(
      'Rust: the Rust worker is missing (/nonexistent/detsim-worker-rs); build it once with: bash scripts/build-rust-worker.sh; ' +
        'Python: no Python interpreter (/nonexistent/python3 cannot be run); set DETSIM_PYTHON or run scripts/test-python.sh',
    );
  });

  it.skipIf(pythonWorkerSkip !== null)(
    'measures the walker case on Python workers with the TypeScript behaviour',
    async () => {
      ensurePythonWorker();
      const walker = CASES.find((c) => c.id === 'walker')!;
      const python = await measureWorkers(walker, 'python', 12, 4);
      const typescript = await measureWorkers(walker, 'typescript', 12, 4);
      expect(python.agentStepsPerSec).toBeGreaterThan(0);
      expect(python.behaviourDigest).toBe(typescript.behaviourDigest);
    },
    120_000,
  );
});
