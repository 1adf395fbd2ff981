// Test harness for the Rust agent worker (crates-bridge/worker, binary detsim-worker-rs): finds or
// builds it (scripts/build-rust-worker.sh, a no-op when up to date), refuses to test a binary older
// than this checkout's sources (rust-binary.ts: the tests fail loudly, never test an old binary),
// and spawns it or the TypeScript worker on a short Unix socket with a connected WorkerClient.
// Not a test; tests skip with its message when there is neither a binary nor cargo.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { rustWorkerPath } from '../../coordinator/launch/launcher.js';
import { refuseStaleBinary } from './rust-binary.js';
import { pythonCommand } from './python-worker.js';
import { cargo } from './rust-cli.js';
import { REPO_ROOT, type SpawnedWorker, launchWorker, stopAll } from '../workers/harness.js';

export const RUST_WORKER = rustWorkerPath();

/** Why the Rust worker tests are skipped, or null when they run (the binary exists or cargo can build it). */
export const rustWorkerSkip: string | null =
  existsSync(RUST_WORKER) || cargo !== null
    ? null
    : `Rust worker tests skipped: ${RUST_WORKER} is missing and cargo is not installed (build it with: bash scripts/build-rust-worker.sh)`;
if (rustWorkerSkip) console.warn(rustWorkerSkip);

let built = false;

/**
 * Build (or confirm up to date) the Rust worker when cargo is present and DETSIM_RUST_WORKER is not
 * set; then, whoever built it, refuse it unless it is a build of this checkout's current sources.
 */
export function ensureRustWorker(): void {
  if (built) return;
  if (cargo !== null && !process.env.DETSIM_RUST_WORKER) {
    const r = spawnSync('bash', ['scripts/build-rust-worker.sh'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    if (r.status !== 0) throw new Error(`bash scripts/build-rust-worker.sh failed:\n${r.stderr.slice(-4000)}`);
  }
  if (!existsSync(RUST_WORKER)) throw new Error(`${RUST_WORKER} is missing after the build`);
  refuseStaleBinary(RUST_WORKER, 'bash scripts/build-rust-worker.sh');
  built = true;
}

export type Runtime = 'typescript' | 'rust' | 'python';

export type Spawned = SpawnedWorker;

export function commandOf(runtime: Runtime): { command: string; args: string[] } {
  if (runtime === 'python') return pythonCommand();
  return runtime === 'rust'
    ? { command: RUST_WORKER, args: [] }
    : { command: process.execPath, args: ['--import', 'tsx', join(REPO_ROOT, 'workers/main.ts')] };
}

/** Spawn a worker of either runtime, wait for its ready line and connect (no Hello). */
export function spawnAgentWorker(runtime: Runtime, workerId: string, extra: string[] = []): Promise<Spawned> {
  const { command, args } = commandOf(runtime);
  return launchWorker(command, args, { role: 'agent', workerId, extra });
}

export const stopAllWorkers = stopAll;
