// vitest globalSetup: builds the Rust binaries the tests drive (the detsim-formats/detsim-models CLIs
// and the detsim-worker-rs agent worker) once, before any test file starts, so that a fresh clone's
// `npm test` never builds inside a test's time limit (a cold tonic build takes ~3 CPU-minutes).
// Each build is the same command the README gives and a no-op when up to date. Without cargo nothing
// is built and the tests that need a binary skip or fail as their harness says. Not a test.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { buildRustCli, cargo } from './cross-lang/rust-cli.js';
import { RUST_WORKER } from './cross-lang/rust-worker.js';

export default function setup(): void {
  if (cargo === null) return;
  const worker = !process.env.DETSIM_RUST_WORKER;
  if (worker && !existsSync(RUST_WORKER))
    console.log('global setup: building the Rust worker once before the tests (bash scripts/build-rust-worker.sh)');
  const started = Date.now();
  buildRustCli();
  if (worker) {
    const r = spawnSync('bash', ['scripts/build-rust-worker.sh'], { encoding: 'utf8', maxBuffer: 64 << 20 });
    if (r.status !== 0) throw new Error(`bash scripts/build-rust-worker.sh failed:\n${r.stderr.slice(-4000)}`);
  }
  const seconds = Math.round((Date.now() - started) / 1000);
  if (seconds >= 5) console.log(`global setup: Rust binaries ready in ${seconds} s`);
}
