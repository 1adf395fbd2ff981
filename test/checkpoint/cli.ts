// Driving the real CLI (the built one, node dist/coordinator/cli/main.js, as an installed detsim runs;
// `npm test` builds first) from checkpoint tests: a run, a run killed with SIGKILL once its ledger
// shows a committed checkpoint, and resume. Built, not `--import tsx` from source: tsx compiles the
// CLI and every worker it spawns on each start, about twice the CPU of a whole short run.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseStrict } from '../../core/formats/canonical-json.js';
import type { TransitionTrace } from '../../coordinator/trace/trace.js';
import { traceOf } from '../trace-read.js';
import { CLI_MAIN } from '../cli-refusal.js';

const CLI = [CLI_MAIN];
/** The CLI from source: for a config whose model is a .ts module (the built worker cannot load one). */
export const SOURCE_CLI = ['--import', 'tsx', 'coordinator/cli/main.ts'];

export function detsim(args: string[], timeout = 240_000) {
  return spawnSync(process.execPath, [...CLI, ...args], { encoding: 'utf8', timeout });
}

export function committedIds(runDir: string): string[] {
  const path = join(runDir, 'ledger.jsonl');
  if (!existsSync(path)) return [];
  const out: string[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const m = /"checkpointId":"([^"]+)".*"event":"committed"/.exec(line);
    if (m) out.push(m[1]!);
  }
  return out;
}

/**
 * Start `detsim run` as a child and SIGKILL it once `ready(runDir)` holds (polled), optionally
 * after a further delay. Resolves with the run directory once the child is gone.
 */
export async function runAndKill(
  args: string[],
  runDir: string,
  ready: (runDir: string) => boolean,
  extraDelayMs = 0,
  budgetMs = 180_000,
): Promise<{ killed: boolean }> {
  const child = spawn(process.execPath, [...CLI, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const started = Date.now();
  let done = false;
  void exited.then(() => (done = true));
  while (!done && !ready(runDir)) {
    if (Date.now() - started > budgetMs) break;
    await new Promise((r) => setTimeout(r, 40));
  }
  if (!done && extraDelayMs > 0) await new Promise((r) => setTimeout(r, extraDelayMs));
  const killed = !done;
  if (killed) child.kill('SIGKILL');
  const code = await exited;
  if (!killed && code !== 0) throw new Error(`detsim run exited ${code}: ${stderr}`);
  return { killed };
}

/** The run's trace steps, read through the library's reader (either format). */
export function traces(runDir: string): TransitionTrace[] {
  return traceOf(runDir);
}

export function summary(runDir: string): Record<string, any> {
  return parseStrict(readFileSync(join(runDir, 'summary.json'))) as Record<string, any>;
}

/** `detsim` as a child that runs alongside others; resolves with its exit status and output. */
export function detsimAsync(
  args: string[],
  opts: { preload?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  // A TypeScript preload needs tsx to load it; the CLI itself stays the built one.
  const preload = opts.preload ? ['--import', 'tsx', '--import', opts.preload] : [];
  const child = spawn(process.execPath, [...preload, ...CLI, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...opts.env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('close', (status) => resolve({ status, stdout, stderr })));
}

/**
 * `detsim` as a child, timed: how long after its result line (output on stdout or stderr matching
 * `resultLine`) the process exited, in ms (null when no such line came), and how long it ran. A
 * coordinator whose worker processes or threads outlive the run would print its result and hang.
 * `cli`: the built CLI unless a config needs SOURCE_CLI.
 */
export function detsimTimed(
  args: string[],
  resultLine: RegExp,
  cli = CLI,
): Promise<{ status: number | null; stdout: string; stderr: string; exitAfterResultMs: number | null; ranMs: number }> {
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, [...cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let resultAt: bigint | undefined;
  const seen = () => {
    if (resultAt === undefined && resultLine.test(stdout + stderr)) resultAt = process.hrtime.bigint();
  };
  child.stdout!.on('data', (d: Buffer) => ((stdout += d.toString()), seen()));
  child.stderr!.on('data', (d: Buffer) => ((stderr += d.toString()), seen()));
  const ms = (from: bigint) => Number(process.hrtime.bigint() - from) / 1e6;
  return new Promise((resolve) =>
    child.once('exit', (status) => {
      const exitAfterResultMs = resultAt === undefined ? null : ms(resultAt);
      const ranMs = ms(started);
      child.once('close', () => resolve({ status, stdout, stderr, exitAfterResultMs, ranMs }));
    }),
  );
}
