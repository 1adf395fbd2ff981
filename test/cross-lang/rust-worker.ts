// Test harness for the Rust agent worker (crates-bridge/worker, binary detsim-worker-rs): finds or
// builds it (scripts/build-rust-worker.sh, a no-op when up to date), and spawns it or the TypeScript
// worker on a short Unix socket with a connected WorkerClient. Not a test; tests skip with its message.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { rustWorkerPath } from '../../coordinator/launcher.js';
import { type ProcessExitInfo, WorkerClient } from '../../coordinator/protocol/index.js';
import { cargo } from './rust-cli.js';
import { REPO_ROOT } from '../workers/harness.js';

export const RUST_WORKER = rustWorkerPath();

/** Why the Rust worker tests are skipped, or null when they run (the binary exists or cargo can build it). */
export const rustWorkerSkip: string | null =
  existsSync(RUST_WORKER) || cargo !== null ? null : `Rust worker tests skipped: ${RUST_WORKER} is missing and cargo is not installed (build it with: bash scripts/build-rust-worker.sh)`;
if (rustWorkerSkip) console.warn(rustWorkerSkip);

let built = false;

/** Build (or confirm up to date) the Rust worker when cargo is present; otherwise use the binary as is. */
export function ensureRustWorker(): void {
  if (built) return;
  if (cargo !== null && !process.env.DETSIM_RUST_WORKER) {
    const r = spawnSync('bash', ['scripts/build-rust-worker.sh'], { cwd: REPO_ROOT, encoding: 'utf8', maxBuffer: 64 << 20 });
    if (r.status !== 0) throw new Error(`bash scripts/build-rust-worker.sh failed:\n${r.stderr.slice(-4000)}`);
  }
  if (!existsSync(RUST_WORKER)) throw new Error(`${RUST_WORKER} is missing after the build`);
  built = true;
}

export type Runtime = 'typescript' | 'rust';

export interface Spawned {
  proc: ChildProcess;
  client: WorkerClient;
  readyLine: string;
  stderr: () => string;
  exited: Promise<ProcessExitInfo>;
  stop(): Promise<void>;
}

const dirs: string[] = [];
const live = new Set<Spawned>();

export function commandOf(runtime: Runtime): { command: string; args: string[] } {
  return runtime === 'rust' ? { command: RUST_WORKER, args: [] } : { command: process.execPath, args: ['--import', 'tsx', join(REPO_ROOT, 'workers/main.ts')] };
}

/** Spawn a worker of either runtime, wait for its ready line and connect (no Hello). */
export async function spawnAgentWorker(runtime: Runtime, workerId: string, extra: string[] = []): Promise<Spawned> {
  const dir = mkdtempSync(join(tmpdir(), 'dsr-'));
  dirs.push(dir);
  const { command, args } = commandOf(runtime);
  const proc = spawn(command, [...args, '--listen', `unix:${join(dir, 'w.sock')}`, '--role', 'agent', '--worker-id', workerId, ...extra], { cwd: REPO_ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
  const exited = new Promise<ProcessExitInfo>((res) => proc.once('exit', (code, signal) => res({ code, signal })));
  const readyLine = await new Promise<string>((res, rej) => {
    createInterface({ input: proc.stdout! }).once('line', res);
    void exited.then((i) => rej(new Error(`${runtime} worker exited before ready (${i.code}/${i.signal}): ${stderr}`)));
  });
  const listen = (JSON.parse(readyLine) as { listen: string }).listen;
  const client = await WorkerClient.connect(listen, { processExit: exited, label: workerId });
  const w: Spawned = {
    proc, client, readyLine, exited, stderr: () => stderr,
    async stop() {
      live.delete(w);
      client.close();
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
  live.add(w);
  return w;
}

export async function stopAllWorkers(): Promise<void> {
  await Promise.all([...live].map((w) => w.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}
