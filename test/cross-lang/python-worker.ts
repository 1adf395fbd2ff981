// Test harness for the Python worker (workers/python, `python -m detsim_worker`): which interpreter
// the tests use ($DETSIM_PYTHON, else the venv scripts/test-python.sh makes at workers/python/.venv), and why they
// skip outside CI when there is neither. In CI a missing interpreter FAILS the tests (ensurePythonWorker
// throws naming the command that makes the venv). Not a test.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../workers/harness.js';

export const VENV_PYTHON = join(REPO_ROOT, 'workers/python/.venv/bin/python');
/** What scripts/test-python.sh does to give the tests a Python worker. */
export const MAKE_PYTHON_VENV =
  "python3 -m venv workers/python/.venv && workers/python/.venv/bin/pip install './workers/python[test,pettingzoo]'";

const inCi = (process.env.CI ?? '') !== '';
const found = process.env.DETSIM_PYTHON || (existsSync(VENV_PYTHON) ? VENV_PYTHON : undefined);

/** Why the Python worker tests are skipped (outside CI only), or null when they run. */
export const pythonWorkerSkip: string | null =
  found !== undefined || inCi
    ? null
    : `Python worker tests skipped: DETSIM_PYTHON is unset and ${VENV_PYTHON} is missing (make it with: ${MAKE_PYTHON_VENV})`;
if (pythonWorkerSkip) console.warn(pythonWorkerSkip);

let checked: string | undefined;

/**
 * The interpreter for Python workers, checked once to import detsim_worker; also exported as
 * DETSIM_PYTHON so the launcher (workers.runtime: python) uses the same one.
 */
export function ensurePythonWorker(): string {
  if (checked) return checked;
  if (found === undefined)
    throw new Error(
      `no Python for the Python worker tests: set DETSIM_PYTHON or make the venv with: ${MAKE_PYTHON_VENV}`,
    );
  const probe = spawnSync(found, ['-c', 'import detsim_worker'], { encoding: 'utf8' });
  if (probe.status !== 0)
    throw new Error(
      `${found} cannot import detsim_worker (${(probe.stderr ?? '').trim().split('\n').pop()}); make the venv with: ${MAKE_PYTHON_VENV}`,
    );
  process.env.DETSIM_PYTHON = found;
  checked = found;
  return found;
}

export function pythonCommand(): { command: string; args: string[] } {
  return { command: ensurePythonWorker(), args: ['-m', 'detsim_worker'] };
}
