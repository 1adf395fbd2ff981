// Drives the Rust formats CLI (crates-bridge, `detsim-formats batch`) for the cross-language tests:
// finds cargo, builds the binary once per test process (a no-op when it is up to date), refuses a
// binary that is still older than its sources after the build (rust-binary.ts), and sends a batch
// of requests in one process. Not a test; the tests skip with a message when cargo is absent.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DetsimError } from '../../core/formats/errors.js';
import { refuseStaleBinary } from './rust-binary.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const manifestPath = join(root, 'crates-bridge/Cargo.toml');
const targetDir = join(root, 'crates-bridge/target');
export const rustCliPath = join(targetDir, 'release/detsim-formats');
export const rustModelsPath = join(targetDir, 'release/detsim-models');

function findCargo(): string | null {
  for (const candidate of ['cargo', join(homedir(), '.cargo/bin/cargo')]) {
    const r = spawnSync(candidate, ['--version'], { encoding: 'utf8' });
    if (r.status === 0) return candidate;
  }
  return null;
}

export const cargo = findCargo();
/** Why the cross-language tests are skipped, or null when they run. */
export const skipReason =
  cargo === null ? 'cargo not found: cross-language tests skipped (install Rust with rustup to run them)' : null;
if (skipReason) console.warn(skipReason);

let built = false;

/** `cargo build --release -p detsim-formats -p detsim-models` (the same command scripts/test-rust.sh runs). */
export function buildRustCli(): void {
  if (built) return;
  if (cargo === null) throw new Error(skipReason ?? 'cargo not found');
  const args = [
    'build',
    '--locked',
    '--release',
    '--manifest-path',
    manifestPath,
    '--target-dir',
    targetDir,
    '-p',
    'detsim-formats',
    '-p',
    'detsim-models',
  ];
  const r = spawnSync(cargo, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0 || !existsSync(rustCliPath) || !existsSync(rustModelsPath))
    throw new Error(`cargo ${args.join(' ')} failed:\n${r.stderr}`);
  for (const binary of [rustCliPath, rustModelsPath]) refuseStaleBinary(binary, 'bash scripts/test-rust.sh');
  built = true;
}

/** A refusal as both languages report it: reason code, envelope check number (if any), message, field. */
export interface Refusal {
  reason: string;
  check: number | null;
  message: string;
  field: string | null;
}

export type Outcome<T> = { ok: T } | { error: Refusal };

const UNSAFE_MARK = '\u0000unsafe-number:';

/**
 * JSON text for the Rust side. An integer beyond 2^53−1 is written in exponent form (the same
 * double), since detsim's strict parser refuses integer literals that large by design; the
 * writer under test still sees the same value, which is what these tests compare.
 */
export function transportJson(value: unknown): string {
  const text = JSON.stringify(value, (_key, v: unknown) =>
    typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v) ? `${UNSAFE_MARK}${v.toExponential()}` : v,
  );
  return text.replace(/"\\u0000unsafe-number:([^"]+)"/g, '$1');
}

/** Run `detsim-formats batch` on requests; results come back in request order. */
export function rustBatch<T = unknown>(requests: object[], binary = rustCliPath): Outcome<T>[] {
  const r = spawnSync(binary, ['batch'], { input: transportJson(requests), maxBuffer: 512 << 20 });
  if (r.status !== 0) throw new Error(`${binary} batch exited ${r.status}: ${r.stderr.toString('utf8')}`);
  const out = JSON.parse(r.stdout.toString('utf8')) as Outcome<T>[];
  if (out.length !== requests.length)
    throw new Error(`detsim-formats batch returned ${out.length} results for ${requests.length} requests`);
  return out;
}

/** Run one single-shot subcommand with raw stdin (for the exit-code and stderr contract). */
export function rustCommand(
  command: string,
  stdin: Uint8Array | string,
): { status: number | null; stdout: Buffer; stderr: string } {
  const r = spawnSync(rustCliPath, [command], { input: stdin, maxBuffer: 512 << 20 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr.toString('utf8') };
}

/** The TypeScript outcome of fn in the same shape as the Rust batch results. */
export function tsOutcome<T>(fn: () => T): Outcome<T> {
  try {
    return { ok: fn() };
  } catch (e) {
    if (!(e instanceof DetsimError)) throw e;
    const m = /^check (\d) \(/.exec(e.message);
    return { error: { reason: e.reason, check: m ? Number(m[1]) : null, message: e.message, field: e.field ?? null } };
  }
}
