// `detsim doctor` through the built CLI: one line per item, exit 0 when the core is fine; a Python
// that cannot be run is reported with its fix, and does not fail the core.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../workers/harness.js';

const cli = join(REPO_ROOT, 'dist/coordinator/cli/main.js');
const doctor = (env: Record<string, string | undefined> = {}, args: string[] = []) =>
  spawnSync(process.execPath, [cli, 'doctor', ...args], { encoding: 'utf8', env: { ...process.env, ...env } });

describe('detsim doctor', () => {
  it('prints one line per item, the core first, and exits 0 when Node and the TypeScript worker are there', () => {
    const r = doctor();
    expect(r.status, r.stderr).toBe(0);
    const items = r.stdout
      .trim()
      .split('\n')
      .map((l) => l.split(/\s+/)[1]);
    expect(items).toEqual([
      'node',
      'typescript-worker',
      'typescript-models',
      'python',
      'rust-worker',
      'cargo',
      'openssl',
      'setpriv',
      'slurm',
    ]);
    expect(r.stdout).toMatch(/^ok {6}node {15}\S+ v20\./);
  });

  it('reports a Python that cannot be run, with its fix, and still exits 0', () => {
    const r = doctor({ DETSIM_PYTHON: '/nonexistent/python3' });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain(
      'missing python             /nonexistent/python3 ($DETSIM_PYTHON) cannot be run; fix: point DETSIM_PYTHON at python3 >= 3.10, or unset it',
    );
  });

  it('--json gives the same items as data', () => {
    const items = JSON.parse(doctor({}, ['--json']).stdout) as { item: string; ok: boolean; core: boolean }[];
    expect(items.filter((i) => i.core).map((i) => [i.item, i.ok])).toEqual([
      ['node', true],
      ['typescript-worker', true],
    ]);
  });
});
