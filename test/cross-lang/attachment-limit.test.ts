// The longest attachment one message may carry is the same in the three workers (#29 item 6): the
// TypeScript constant (core/protocol/frames.ts), the Python worker's (read from the installed
// package by its interpreter) and the Rust worker's (its source's constant expression, evaluated).
// A worker whose limit drifted would refuse, or accept, a payload the others do not.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_ATTACHMENT_BYTES } from '../../core/protocol/index.js';
import { REPO_ROOT } from '../workers/harness.js';
import { ensurePythonWorker, pythonWorkerSkip } from './python-worker.js';

/** The value of `pub const MAX_ATTACHMENT_BYTES: usize = <products and sums of integers>;` in Rust source. */
function rustConstant(source: string): number {
  const m = /pub const MAX_ATTACHMENT_BYTES: usize = ([0-9 *+-]+);/.exec(source);
  if (!m) throw new Error('MAX_ATTACHMENT_BYTES not found in server.rs');
  return m[1]!
    .split(/(?=[+-])/)
    .map((term) => {
      const sign = term.trim().startsWith('-') ? -1 : 1;
      return (
        sign *
        term
          .replace(/^[\s+-]+/, '')
          .split('*')
          .reduce((p, f) => p * Number(f.trim()), 1)
      );
    })
    .reduce((a, b) => a + b, 0);
}

describe('the attachment limit', () => {
  it('is 2 GiB − 1 in TypeScript, and the Rust worker says the same', () => {
    expect(DEFAULT_MAX_ATTACHMENT_BYTES).toBe(2 ** 31 - 1);
    const rust = readFileSync(join(REPO_ROOT, 'crates-bridge/worker/src/server.rs'), 'utf8');
    expect(rustConstant(rust)).toBe(DEFAULT_MAX_ATTACHMENT_BYTES);
    // The evaluator is itself checked on another expression (a control).
    expect(rustConstant('pub const MAX_ATTACHMENT_BYTES: usize = 4 * 1024 - 2 + 1;')).toBe(4095);
  });

  it.skipIf(pythonWorkerSkip !== null)('the Python worker says the same', () => {
    const py = spawnSync(
      ensurePythonWorker(),
      ['-c', 'from detsim_worker.server import MAX_ATTACHMENT_BYTES as m; print(m)'],
      { encoding: 'utf8' },
    );
    expect(py.status, py.stderr).toBe(0);
    expect(Number(py.stdout.trim())).toBe(DEFAULT_MAX_ATTACHMENT_BYTES);
  });
});
