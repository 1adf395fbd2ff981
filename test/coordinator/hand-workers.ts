// Test harness for rendezvous: start workers "by hand" (`detsim worker … --rendezvous DIR`, or the
// Python or the Rust worker), optionally inside a network namespace (a command prefix such as
// `ip netns exec NS`), wait for their ready lines, and stop whatever is still running at the end.
// Also a config for an example with `workers.placement: rendezvous`. A plaintext TCP worker is
// started as a user must start one (docs/security.md): bound to a session (`--session`, lif-pair
// unless the spec says otherwise) and holding the per-run secret HAND_SECRET (`--token-file`), which
// the config names as workers.rendezvous.tokenFile. Not a test.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseConfigText } from '../../coordinator/config.js';
import { CLI_MAIN } from '../cli-refusal.js';
import { REPO_ROOT } from '../workers/harness.js';

export interface HandWorker {
  workerId: string;
  child: ChildProcess;
  /** The ready line's listen address. */
  ready: Promise<string>;
  /** Exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  stderr(): string;
}

export interface HandWorkerSpec {
  workerId: string;
  role: 'agent' | 'environment';
  rendezvous: string;
  listen?: string;
  extra?: string[];
  /** `python` runs `$DETSIM_PYTHON -m detsim_worker` (the caller resolves the interpreter). */
  python?: string;
  /** `rust` runs the Rust worker binary at this path (agents only). */
  rust?: string;
  /** A command prefix, e.g. ['ip', 'netns', 'exec', 'ns-1']. */
  prefix?: string[];
}

const live = new Set<ChildProcess>();

/** A per-run secret file as a user makes one: 64 hex digits, mode 0600, in a directory of its own. */
export function secretFile(): string {
  const path = join(mkdtempSync(join(tmpdir(), 'detsim-secret-')), 'token');
  writeFileSync(path, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  return path;
}

/** The secret every hand-started plaintext TCP worker of these tests holds (and the configs name). */
export const HAND_SECRET = secretFile();

/** `--token-file` (and `--session`, unless given) for a plaintext TCP worker; nothing for unix or TLS. */
function secretFlags(spec: HandWorkerSpec): string[] {
  const extra = spec.extra ?? [];
  if ((spec.listen ?? '').startsWith('unix:') || extra.some((a) => a.startsWith('--tls'))) return [];
  return ['--token-file', HAND_SECRET, ...(extra.includes('--session') ? [] : ['--session', 'lif-pair'])];
}

/** The `detsim worker` command line (or the Python worker's) for one spec. */
function commandOf(spec: HandWorkerSpec): string[] {
  const flags = [
    '--listen',
    spec.listen ?? '127.0.0.1:0',
    '--role',
    spec.role,
    '--worker-id',
    spec.workerId,
    '--rendezvous',
    spec.rendezvous,
    ...(spec.extra ?? []),
    ...secretFlags(spec),
  ];
  const worker = spec.python
    ? [spec.python, '-m', 'detsim_worker', ...flags]
    : spec.rust
      ? [spec.rust, ...flags]
      : [process.execPath, join(REPO_ROOT, CLI_MAIN), 'worker', ...flags];
  return [...(spec.prefix ?? []), ...worker];
}

/** Start one process; its stdin stays a pipe, so it leaves with this test process whatever happens. */
export function startProcess(argv: string[], label: string): HandWorker {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'], cwd: REPO_ROOT });
  live.add(child);
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((res) =>
    child.once('exit', (code) => {
      live.delete(child);
      res(code);
    }),
  );
  const ready = new Promise<string>((res, rej) => {
    createInterface({ input: child.stdout! }).once('line', (line) => {
      const msg = JSON.parse(line) as { listen?: string };
      res(msg.listen ?? '');
    });
    void exited.then((code) => rej(new Error(`${label} exited (${code}) before it was ready: ${err}`)));
  });
  ready.catch(() => undefined);
  return { workerId: label, child, ready, exited, stderr: () => err };
}

export function startHandWorker(spec: HandWorkerSpec): HandWorker {
  return startProcess(commandOf(spec), spec.workerId);
}

/** SIGKILL every process this harness started that is still running (afterEach/afterAll). */
export async function stopAll(): Promise<void> {
  const waits = [...live].map((c) => new Promise((res) => c.once('exit', res)));
  for (const c of live) c.kill('SIGKILL');
  await Promise.all(waits);
}

/** An example config (parsed) with every worker placed by rendezvous in `dir`. */
export function rendezvousConfig(example: string, dir: string, timeoutSeconds: number): Record<string, any> {
  const cfg = parseConfigText(readFileSync(join(REPO_ROOT, example), 'utf8'), example) as Record<string, any>;
  const { transport: _local, ...workers } = (cfg.workers ?? {}) as Record<string, unknown>;
  return {
    ...cfg,
    workers: { ...workers, placement: 'rendezvous', rendezvous: { dir, timeoutSeconds, tokenFile: HAND_SECRET } },
  };
}
