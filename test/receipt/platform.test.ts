// The platform fingerprint (coordinator/receipt/platform.ts) against what the machine itself says:
// the OS and Node fields are what node:os and process report, the CPU flags are a sorted subset of
// /proc/cpuinfo's, the git commit is what `git rev-parse` gives for real repositories (a plain
// checkout, a worktree, packed refs, a detached HEAD) and null outside one; two processes collect
// the same fingerprint, and one started with another Node flag set differs in exactly those fields.
// The field table classifies it physical (also as `detsim fields --json` prints it), and
// differences are named per field, workers by id.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { arch, cpus, machine, platform, release, tmpdir, type, version } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIELD_TABLE, fieldLookup } from '../../coordinator/receipt/fields.js';
import {
  cpuFlagsOf,
  fingerprintDifferences,
  gitCommitOf,
  hostFingerprint,
  platformFingerprint,
  RELEVANT_CPU_FLAGS,
} from '../../coordinator/receipt/platform.js';
import { detsim } from '../checkpoint/cli.js';
import { REPO_ROOT } from '../workers/harness.js';

const git = (cwd: string, ...args: string[]): string => {
  const r = spawnSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.org', ...args], {
    cwd,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
};

/** A fresh repository with `n` commits (a file changed each time). */
function repoWithCommits(n: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-fp-git-'));
  git(dir, 'init', '-q', '-b', 'main');
  for (let i = 0; i < n; i++) {
    writeFileSync(join(dir, 'f.txt'), String(i));
    git(dir, 'add', 'f.txt');
    git(dir, 'commit', '-q', '-m', `c${i}`);
  }
  return dir;
}

describe('the host part of the fingerprint', () => {
  it('is what node:os and process report, with the relevant /proc/cpuinfo flags sorted', () => {
    const h = hostFingerprint(REPO_ROOT);
    expect(h.os).toEqual({
      platform: platform(),
      type: type(),
      release: release(),
      version: version(),
      arch: arch(),
      machine: machine(),
    });
    expect(h.cpu.model).toBe(cpus()[0]!.model.trim());
    expect(h.cpu.cores).toBe(cpus().length);
    expect(h.node).toEqual({
      version: process.version,
      v8: process.versions.v8,
      execArgv: process.execArgv,
      nodeOptions: process.env.NODE_OPTIONS ?? null,
    });
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(h.detsim.version).toBe(pkg.version);
    let cpuinfo: string | null = null;
    try {
      cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
    } catch {
      expect(h.cpu.flags).toBeNull();
    }
    if (cpuinfo !== null) {
      const listed = new Set(/^(?:flags|Features)\s*:(.*)$/m.exec(cpuinfo)![1]!.trim().split(/\s+/));
      expect(h.cpu.flags).toEqual([...h.cpu.flags!].sort());
      for (const f of h.cpu.flags!) expect(listed.has(f) && RELEVANT_CPU_FLAGS.includes(f), f).toBe(true);
      for (const f of RELEVANT_CPU_FLAGS) if (listed.has(f)) expect(h.cpu.flags).toContain(f);
    }
  });

  it('keeps only the relevant flags of an x86 and an Arm cpuinfo, sorted', () => {
    const x86 = 'processor\t: 0\nflags\t\t: fpu vme sse2 avx2 hypervisor aes avx512f sha_ni fma\nbugs\t\t: spectre\n';
    expect(cpuFlagsOf(x86)).toEqual(['aes', 'avx2', 'avx512f', 'fma', 'sha_ni', 'sse2']);
    const arm = 'processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve\n';
    expect(cpuFlagsOf(arm)).toEqual(['aes', 'asimd', 'fp', 'pmull', 'sha1', 'sha2', 'sve']);
    expect(cpuFlagsOf('processor\t: 0\nmodel name\t: a CPU\n')).toBeNull();
  });

  it('reads the git commit as git does: this checkout, a plain repository, packed refs, a worktree, a detached HEAD', () => {
    const top = spawnSync('git', ['rev-parse', '--show-toplevel'], { cwd: REPO_ROOT, encoding: 'utf8' });
    const ownCheckout = top.status === 0 && top.stdout.trim() === REPO_ROOT;
    expect(gitCommitOf(REPO_ROOT)).toBe(ownCheckout ? git(REPO_ROOT, 'rev-parse', 'HEAD') : null);

    const repo = repoWithCommits(2);
    const head = git(repo, 'rev-parse', 'HEAD');
    expect(gitCommitOf(repo)).toBe(head);
    git(repo, 'pack-refs', '--all');
    expect(gitCommitOf(repo)).toBe(head);

    const wt = join(mkdtempSync(join(tmpdir(), 'detsim-fp-wt-')), 'wt');
    git(repo, 'worktree', 'add', '-q', '-b', 'side', wt, 'HEAD~1');
    expect(readFileSync(join(wt, '.git'), 'utf8')).toMatch(/^gitdir: /);
    expect(gitCommitOf(wt)).toBe(git(wt, 'rev-parse', 'HEAD'));
    expect(gitCommitOf(wt)).not.toBe(head);

    git(repo, 'checkout', '-q', '--detach', 'HEAD~1');
    expect(gitCommitOf(repo)).toBe(git(repo, 'rev-parse', 'HEAD'));

    // Not a checkout of its own (a subdirectory of one is not): null.
    expect(gitCommitOf(mkdtempSync(join(tmpdir(), 'detsim-fp-nogit-')))).toBeNull();
    expect(gitCommitOf(join(repo, '.git', 'refs'))).toBeNull();
  });
});

describe('the fingerprint of a run', () => {
  it('lists the workers by id and reads the Rust and Python versions from their Hello runtimes', () => {
    const f = platformFingerprint(REPO_ROOT, [
      { workerId: 'worker-1', role: 'agent', runtime: 'detsim-rs/0.1.0 rustc/1.95.0', buildDigest: 'b' },
      { workerId: 'worker-env', role: 'environment', runtime: 'detsim-py/3.11.7', buildDigest: 'c' },
      { workerId: 'worker-0', role: 'agent', runtime: 'detsim-ts/v20.20.2', buildDigest: 'a' },
      { workerId: 'worker-2', role: 'agent', runtime: 'detsim-rs/0.1.0', buildDigest: 'b' },
    ]);
    expect(f.workers.map((w) => w.workerId)).toEqual(['worker-0', 'worker-1', 'worker-2', 'worker-env']);
    expect(f.rust).toEqual(['1.95.0', 'unknown']);
    expect(f.python).toEqual(['3.11.7']);
    const tsOnly = platformFingerprint(REPO_ROOT, [
      { workerId: 'w', role: 'agent', runtime: 'detsim-ts/v20', buildDigest: 'a' },
    ]);
    expect([tsOnly.rust, tsOnly.python]).toEqual([null, null]);
  });

  it('is the same from two processes, and differs in exactly the Node flags under another flag set', () => {
    const collect = (nodeArgs: string[], nodeOptions: string | undefined): unknown => {
      const env = { ...process.env };
      delete env.NODE_OPTIONS;
      if (nodeOptions !== undefined) env.NODE_OPTIONS = nodeOptions;
      const script = `import(${JSON.stringify(join(REPO_ROOT, 'dist/coordinator/receipt/platform.js'))}).then((m) => process.stdout.write(JSON.stringify(m.platformFingerprint(${JSON.stringify(REPO_ROOT)}, []))))`;
      const r = spawnSync(process.execPath, [...nodeArgs, '--input-type=module', '-e', script], {
        env,
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout);
    };
    const a = collect([], undefined);
    expect(collect([], undefined)).toEqual(a);
    const b = collect(['--stack-size=2000'], '--max-semi-space-size=32');
    expect(fingerprintDifferences(a, b).map((d) => d.path)).toEqual(['node.execArgv', 'node.nodeOptions']);
    expect((b as { node: { nodeOptions: string } }).node.nodeOptions).toBe('--max-semi-space-size=32');
    expect((b as { node: { execArgv: string[] } }).node.execArgv).toContain('--stack-size=2000');
  });

  it('differences are named per field, workers by id, with both values and "absent"', () => {
    const a = { os: { release: '6.1' }, workers: [{ workerId: 'w0', runtime: 'detsim-ts/v20', buildDigest: 'x' }] };
    const b = {
      os: { release: '6.8' },
      workers: [
        { workerId: 'w0', runtime: 'detsim-ts/v22', buildDigest: 'x' },
        { workerId: 'w1', runtime: 'detsim-rs/0.1.0 rustc/1.95.0', buildDigest: 'y' },
      ],
    };
    expect(fingerprintDifferences(a, b)).toEqual([
      { path: 'os.release', left: '"6.1"', right: '"6.8"' },
      { path: 'workers[w0].runtime', left: '"detsim-ts/v20"', right: '"detsim-ts/v22"' },
      { path: 'workers[w1].buildDigest', left: 'absent', right: '"y"' },
      { path: 'workers[w1].runtime', left: 'absent', right: '"detsim-rs/0.1.0 rustc/1.95.0"' },
    ]);
    expect(fingerprintDifferences(a, structuredClone(a))).toEqual([]);
  });
});

describe('the field table', () => {
  it('classifies platformFingerprint physical, a subtree, and `detsim fields --json` says so', () => {
    expect(fieldLookup()('platformFingerprint')).toMatchObject({ cls: 'physical', subtree: true });
    expect(FIELD_TABLE.filter((r) => r.path.startsWith('platformFingerprint'))).toHaveLength(1);
    const r = detsim(['fields', '--json']);
    expect(r.status, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout) as { fields: { path: string; cls: string }[] };
    expect(printed.fields.find((f) => f.path === 'platformFingerprint')).toMatchObject({ cls: 'physical' });
  });
});
