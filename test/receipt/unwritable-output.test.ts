// `detsim verify` and `detsim replay` when a file they must write cannot be written: one line
// `detsim: [perm_write_failed|size_no_space] …` naming the file, exit 1 — never 2, which for these
// commands means yellow (and before, a usage error) — and no stack trace. The verify cases write
// the attestation under a regular file or onto a directory (refused before any replay runs); the
// replay case fills a real tiny tmpfs (test/full-disk.ts) so that a run's receipt.json does not fit.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildAttestation, writeAttestation } from '../../coordinator/diff0/attestation.js';
import { WriteFailure } from '../../coordinator/write-failure.js';
import { detsimCli } from '../cli-refusal.js';
import { fullDiskUnavailable, mountSmallDisk, PAGE, type SmallDisk } from '../full-disk.js';

const T = 300_000;

/** The command ended with exactly one stderr line (after its progress lines) and no stack trace. */
function lastLine(stderr: string): string {
  expect(stderr).not.toMatch(/\n\s+at /);
  return stderr.trim().split('\n').at(-1)!;
}

/** `detsim verify` of one example into `runs` under `dir`, writing the attestation into `out`. */
function verifyInto(dir: string, out: string) {
  return detsimCli(
    [
      'verify',
      '--config',
      'examples/lif-pair.yaml',
      '--steps',
      '3',
      '--golden-dir',
      mkdtempSync(join(tmpdir(), 'detsim-no-goldens-')),
      '--runs-dir',
      join(dir, 'runs'),
      '--out',
      out,
      '--no-golden-marker',
    ],
    T,
  );
}

/** No replay ran: no progress line about runs, and the runs directory was never made. */
function expectNoReplay(dir: string, stderr: string): void {
  expect(stderr).not.toMatch(/fresh runs|run 1 /);
  expect(existsSync(join(dir, 'runs'))).toBe(false);
}

describe('verify: the attestation cannot be written', () => {
  it('--out under a regular file: perm_write_failed naming the path, exit 1, before any replay runs', () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-unwritable-'));
    writeFileSync(join(dir, 'plain'), '');
    const r = verifyInto(dir, join(dir, 'plain', 'reports'));
    expect(r.error).toBeUndefined();
    expect(lastLine(r.stderr)).toBe(
      `detsim: [perm_write_failed] cannot write ${join(dir, 'plain', 'reports')}: a component of the path is not a directory (ENOTDIR)`,
    );
    expect(r.status).toBe(1);
    expectNoReplay(dir, r.stderr);
  });

  it('--out whose attestation.md is a directory: perm_write_failed naming that file, before any replay runs', () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-unwritable-'));
    mkdirSync(join(dir, 'reports', 'attestation.md'), { recursive: true });
    const r = verifyInto(dir, join(dir, 'reports'));
    const target = join(dir, 'reports', 'attestation.md');
    expect(lastLine(r.stderr)).toBe(
      `detsim: [perm_write_failed] cannot write ${target}: a directory stands where the file goes (EISDIR)`,
    );
    expect(r.status).toBe(1);
    expectNoReplay(dir, r.stderr);
  });

  it('a directory where attestation.jsonl goes: a WriteFailure naming that file (the CLI makes it exit 1)', () => {
    const out = mkdtempSync(join(tmpdir(), 'detsim-unwritable-'));
    mkdirSync(join(out, 'attestation.jsonl'));
    const a = buildAttestation([], '2026-12-01T00:00:00.000Z');
    let thrown: unknown;
    try {
      writeAttestation(out, a);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(WriteFailure);
    expect((thrown as WriteFailure).reason).toBe('perm_write_failed');
    expect((thrown as WriteFailure).message).toMatch(/^cannot write .*\/attestation\.jsonl: .*\(EISDIR\)$/);
  });
});

let disk: SmallDisk | undefined;
afterEach(() => {
  disk?.unmount();
  disk = undefined;
});

describe.skipIf(fullDiskUnavailable !== null)('replay: a run receipt does not fit', () => {
  it(
    'receipt.json of the first run does not fit: size_no_space naming it, exit 1 (was exit 2, the yellow code)',
    () => {
      // Calibrate on this machine: what a 10-step run leaves, and how big its receipt is.
      disk = mountSmallDisk(2 * 1024 * 1024);
      const d = disk;
      const cal = detsimCli(['run', 'examples/forage-walkers.yaml', '--steps', '10', '--out', d.dir], T);
      expect(cal.status, cal.stderr).toBe(0);
      const receiptPages = Math.ceil(readFileSync(join(d.dir, 'forage-walkers-1', 'receipt.json')).length / PAGE);
      expect(receiptPages).toBeGreaterThanOrEqual(3);
      rmSync(join(d.dir, 'forage-walkers-1', 'receipt.json'));
      const runUsed = d.used();
      rmSync(join(d.dir, 'forage-walkers-1'), { recursive: true });
      // Room for the first replay run and its transients, not for its receipt.
      d.resize(runUsed + 2 * PAGE);
      const r = detsimCli(['replay', 'examples/forage-walkers.yaml', '--steps', '10', '--out', d.dir], T);
      expect(r.error).toBeUndefined();
      expect(lastLine(r.stderr)).toMatch(
        /^detsim: \[size_no_space\] run completed but its receipt was not written: cannot write .*\/forage-walkers-1\/receipt\.json: no space left on the device \(ENOSPC\); run\.json, the trace and summary\.json are complete$/,
      );
      expect(r.status).toBe(1);
    },
    T,
  );
});
