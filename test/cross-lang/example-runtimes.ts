// The non-TypeScript workers an example config needs, made ready for a test: the Rust worker built
// (or confirmed up to date) when the config puts agents on Rust, the Python worker checked when it
// puts a worker on Python. Returns why the test must skip (no binary and no cargo; no Python outside
// CI), or null when it can run. Not a test.
import { loadConfig } from '../../coordinator/config.js';
import { ensurePythonWorker, pythonWorkerSkip } from './python-worker.js';
import { ensureRustWorker, rustWorkerSkip } from './rust-worker.js';

export function prepareRuntimesFor(config: string): string | null {
  const runtimes = new Set(loadConfig(config).workers.map((w) => w.runtime ?? 'typescript'));
  if (runtimes.has('rust')) {
    if (rustWorkerSkip) return rustWorkerSkip;
    ensureRustWorker();
  }
  if (runtimes.has('python')) {
    if (pythonWorkerSkip) return pythonWorkerSkip;
    ensurePythonWorker();
  }
  return null;
}
