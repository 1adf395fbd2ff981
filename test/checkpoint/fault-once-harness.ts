// The fault-once fixture (fixtures/fault-once.*) as the recovery tests use it: a fault asked for
// through $DETSIM_FAULT_ONCE with its marker in a fresh temp dir, and the ReproHash of the same
// config run uninterrupted (once per test file). Test code only; NOT a fault injector for real runs.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runSession } from '../../coordinator/session/run.js';

export const FAULT_CONFIG = 'test/checkpoint/fixtures/fault-once.yaml';

/** A fault for the fault-once model (its marker in a fresh temp dir) and where the runs go. */
export function fault(f: { faultStep: number; mode?: 'exit' | 'spin' | 'kill'; always?: boolean }) {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-recover-'));
  const marker = join(dir, 'faulted');
  return { marker, out: join(dir, 'runs'), env: { DETSIM_FAULT_ONCE: JSON.stringify({ ...f, marker }) } };
}

/** The uninterrupted run of the fault config (no fault asked for), once. */
let reference: Promise<string> | undefined;
export function referenceHash(): Promise<string> {
  reference ??= runSession(FAULT_CONFIG, { outDir: mkdtempSync(join(tmpdir(), 'detsim-recover-ref-')) }).then(
    (r) => r.reproHash,
  );
  return reference;
}
