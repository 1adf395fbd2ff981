// sweepStaleSocketDirs on a real directory: it removes exactly the `ds-<pid>-XXXXXX` directories
// whose owner process is gone — never a live owner's, this process's, an unrecognised name, or a
// file — and createSocketDir names the new directory after this process.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSocketDir, sweepStaleSocketDirs } from '../../coordinator/launch/socket-dir.js';
import { tmpOut } from './helpers.js';

const parents: string[] = [];
afterAll(() => {
  for (const p of parents) rmSync(p, { recursive: true, force: true });
});

/** The pid of a process that has exited (and been reaped). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(r.stdout);
}

describe('socket directories', () => {
  it('sweeps only directories whose owner pid is gone', () => {
    const parent = tmpOut('detsim-sockdirs-');
    parents.push(parent);
    const dead = deadPid();
    const names = {
      stale: `ds-${dead}-aB3xYz`,
      liveOwner: `ds-${process.ppid}-aB3xYz`,
      mine: `ds-${process.pid}-aB3xYz`,
      oldFormat: 'ds-aB3xYz',
      notOurs: `dx-${dead}-aB3xYz`,
    };
    for (const name of Object.values(names)) mkdirSync(join(parent, name));
    writeFileSync(join(parent, names.stale, 'w0.sock'), '');
    writeFileSync(join(parent, `ds-${dead}-fIlE00`), 'a file, not a socket directory');
    expect(sweepStaleSocketDirs(parent)).toEqual([join(parent, names.stale)]);
    expect(readdirSync(parent).sort()).toEqual(
      [`ds-${dead}-fIlE00`, names.liveOwner, names.mine, names.oldFormat, names.notOurs].sort(),
    );
  });

  it('creates the run directory under the owner pid, sweeping first', () => {
    const parent = tmpOut('detsim-sockdirs-');
    parents.push(parent);
    const stale = join(parent, `ds-${deadPid()}-zzzzzz`);
    mkdirSync(stale);
    const { dir, swept } = createSocketDir(parent);
    expect(swept).toEqual([stale]);
    expect(existsSync(stale)).toBe(false);
    expect(basename(dir)).toMatch(new RegExp(`^ds-${process.pid}-[A-Za-z0-9]{6}$`));
  });
});
