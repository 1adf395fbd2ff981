// A plaintext worker's `localhost` is judged by what it resolves to, not by its name (#28 item 5):
// in a mount namespace whose /etc/hosts maps localhost to a LAN address, the TypeScript, Rust and
// Python workers each refuse `--listen localhost:0` with the same one line (exit 2) before
// listening; where localhost is loopback, each one starts. Real processes in a real namespace
// (`unshare -m`, root); outside CI without it the test skips, in CI that is an error.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../workers/harness.js';
import { ensurePythonWorker } from './python-worker.js';
import { ensureRustWorker, RUST_WORKER } from './rust-worker.js';

const RULE =
  'without TLS a worker listens only on unix:/abs/path or a loopback host (127.0.0.0/8, ::1, localhost); any other host needs TLS and a bearer token (--tls-dir)';

function namespaceUnavailable(): string | null {
  const r = spawnSync('unshare', ['-m', 'sh', '-c', 'mount --bind /etc/hosts /etc/hosts'], { encoding: 'utf8' });
  const problem = r.status === 0 ? null : (r.stderr || r.error?.message || `unshare exited ${r.status}`).trim();
  if (problem !== null && process.env.CI)
    throw new Error(`this test needs unshare -m (root), and CI must not skip it: ${problem}`);
  return problem;
}
const noNamespace = namespaceUnavailable();

/** What a plaintext TCP worker must hold to start (docs/security.md): a session and the run secret. */
const SECRET = (() => {
  const file = join(mkdtempSync(join(tmpdir(), 'detsim-secret-')), 'token');
  writeFileSync(file, `${'d'.repeat(64)}\n`, { mode: 0o600 });
  return ['--session', 's1', '--token-file', file];
})();

/** A hosts file with these lines. */
function hostsFile(lines: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'detsim-hosts-')), 'hosts');
  writeFileSync(path, lines);
  return path;
}

/** The three workers' commands, each given `--listen localhost:0`. */
function workers(): { name: string; argv: string[] }[] {
  ensureRustWorker();
  const tail = ['--listen', 'localhost:0', '--role', 'agent', '--worker-id', 'w1', '--no-parent-watch', ...SECRET];
  return [
    { name: 'TypeScript', argv: [process.execPath, join(REPO_ROOT, 'dist/workers/main.js'), ...tail] },
    { name: 'Rust', argv: [RUST_WORKER, ...tail] },
    { name: 'Python', argv: [ensurePythonWorker(), '-m', 'detsim_worker', ...tail] },
  ];
}

/** argv run with `hosts` bind-mounted over /etc/hosts in a mount namespace of its own. */
const inNamespace = (hosts: string, argv: string[]): string[] => [
  '-m',
  'sh',
  '-c',
  'mount --bind "$0" /etc/hosts && exec "$@"',
  hosts,
  ...argv,
];

describe.skipIf(noNamespace !== null)('a plaintext worker checks what localhost resolves to', () => {
  it('localhost mapped to a LAN address: all three refuse with the same line, exit 2, before listening', () => {
    const hosts = hostsFile('10.200.0.1 localhost\n');
    for (const w of workers()) {
      const r = spawnSync('unshare', inNamespace(hosts, w.argv), { encoding: 'utf8', timeout: 30_000 });
      expect(r.status, `${w.name}: ${r.stderr}`).toBe(2);
      expect(r.stdout, w.name).toBe('');
      expect(r.stderr, w.name).toBe(
        `detsim: [perm_listen_not_local] --listen: "localhost" resolves to 10.200.0.1, which is not a loopback address; ${RULE}\n`,
      );
    }
  }, 60_000);

  it('localhost mapped to loopback: all three start listening', async () => {
    const hosts = hostsFile('127.0.0.1 localhost\n');
    for (const w of workers()) {
      const child = spawn('unshare', inNamespace(hosts, w.argv), { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const first = await new Promise<string>((resolve) => {
        child.stdout.once('data', (d: Buffer) => resolve(d.toString()));
        child.once('exit', () => resolve(''));
      });
      child.kill('SIGTERM');
      expect(first, `${w.name}: ${stderr}`).toMatch(/"ready":true/);
    }
  }, 60_000);
});
