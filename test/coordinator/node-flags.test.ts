// The Node flag detsim's processes start with (NODE_POOL_FLAG, launch/node-flag.ts): the `detsim`
// command (the link npx runs, whose first line starts Node) and the TypeScript worker processes a run
// starts get it; `node …/main.js` does not, and `detsim doctor` says which it was.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { NODE_POOL_FLAG } from '../../coordinator/launch/node-flag.js';
import { CLI_MAIN } from '../cli-refusal.js';
import { REPO_ROOT } from '../workers/harness.js';

const root = mkdtempSync(join(tmpdir(), 'detsim-node-flags-'));
const bin = join(REPO_ROOT, 'node_modules', '.bin', 'detsim');

/** doctor's `node` item, run through `command args…`. */
function nodeItem(command: string, args: string[]): string {
  const r = spawnSync(command, [...args, 'doctor', '--json'], { encoding: 'utf8', cwd: REPO_ROOT });
  expect(r.status, r.stderr).toBe(0);
  const items = JSON.parse(r.stdout) as { item: string; detail: string }[];
  return items.find((i) => i.item === 'node')!.detail;
}

describe('the Node flag detsim starts with', () => {
  it('the detsim command starts Node with --v8-pool-size=0; node …/main.js does not, and doctor says so', () => {
    expect(NODE_POOL_FLAG).toBe('--v8-pool-size=0');
    // sh runs the compiled entry's first two lines, Node skips them (BusyBox's env has no -S).
    expect(readFileSync(join(REPO_ROOT, CLI_MAIN), 'utf8').split('\n').slice(0, 2)).toEqual([
      '#!/bin/sh',
      `':' //; exec node ${NODE_POOL_FLAG} "$0" "$@"`,
    ]);
    expect(nodeItem(bin, [])).toMatch(/, started with --v8-pool-size=0$/);
    expect(nodeItem(process.execPath, [CLI_MAIN])).toContain('; not started with --v8-pool-size=0');
  });

  it("a run's TypeScript worker processes start with it", () => {
    const spies = join(root, 'spies');
    mkdirSync(spies, { recursive: true });
    const spy = join(root, 'exec-argv-spy.cjs');
    writeFileSync(
      spy,
      "require('node:fs').writeFileSync(require('node:path').join(process.env.SPY_DIR, process.pid + '.json'), JSON.stringify(process.execArgv));\n",
    );
    const r = spawnSync(
      bin,
      [
        'run',
        'examples/forage-walkers.yaml',
        '--steps',
        '3',
        '--set',
        'workers.transport=unix',
        '--out',
        join(root, 'runs'),
      ],
      {
        encoding: 'utf8',
        cwd: REPO_ROOT,
        timeout: 120_000,
        env: { ...process.env, SPY_DIR: spies, DETSIM_WORKER_NODE_ARGS: `--require ${spy}` },
      },
    );
    expect(r.status, r.stderr).toBe(0);
    const argvs = readdirSync(spies).map((f) => JSON.parse(readFileSync(join(spies, f), 'utf8')) as string[]);
    expect(argvs.length).toBeGreaterThan(0);
    for (const argv of argvs) expect(argv[0]).toBe(NODE_POOL_FLAG);
  }, 180_000);
});
