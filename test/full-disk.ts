// Test helper: a real full file system for write-failure tests — a tiny tmpfs mounted for the
// test (the suite runs as root in CI and here), sized in bytes, that can be filled to leave an
// exact number of bytes free. Where mounting is impossible the tests skip with the reason printed,
// except under CI, where that is an error (a skipped test would hide the fault). Not a test itself.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PAGE = 4096;

function mount(dir: string, bytes: number, remount = false): string | null {
  const opts = `${remount ? 'remount,' : ''}size=${bytes}`;
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', opts, 'tmpfs', dir], { encoding: 'utf8' });
  return r.status === 0 ? null : (r.stderr || r.error?.message || `mount exited ${r.status}`).trim();
}

function probe(): string | null {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-tmpfs-probe-'));
  const problem = mount(dir, 64 * 1024);
  if (problem === null) spawnSync('umount', [dir]);
  rmSync(dir, { recursive: true, force: true });
  return problem;
}

/** Why a tmpfs cannot be mounted here, or null when it can. Under CI an impossible mount throws. */
export const fullDiskUnavailable: string | null = (() => {
  const problem = probe();
  if (problem === null) return null;
  if (process.env.CI)
    throw new Error(`full-disk tests need to mount a tmpfs (root), and CI must not skip them: ${problem}`);
  console.warn(`full-disk tests skipped: cannot mount a tmpfs here (${problem})`);
  return problem;
})();

export interface SmallDisk {
  dir: string;
  /** Bytes still free. */
  free(): number;
  /** Bytes in use. */
  used(): number;
  /** Change the size (never below what is used). */
  resize(bytes: number): void;
  /** Write a filler file so that exactly `bytes` (a multiple of PAGE) stay free. */
  fillLeaving(bytes: number): void;
  unmount(): void;
}

export function mountSmallDisk(bytes: number): SmallDisk {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-full-'));
  const problem = mount(dir, bytes);
  if (problem !== null) throw new Error(`mount tmpfs on ${dir}: ${problem}`);
  const stat = () => statfsSync(dir);
  return {
    dir,
    free: () => stat().bavail * stat().bsize,
    used: () => (stat().blocks - stat().bfree) * stat().bsize,
    resize: (size) => {
      const p = mount(dir, size, true);
      if (p !== null) throw new Error(`remount tmpfs on ${dir}: ${p}`);
    },
    fillLeaving: (leave) => {
      const free = stat().bavail * stat().bsize;
      writeFileSync(join(dir, 'filler'), Buffer.alloc(free - leave));
    },
    unmount: () => {
      spawnSync('umount', ['-l', dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
