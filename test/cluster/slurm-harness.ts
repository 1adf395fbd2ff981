// Helpers for the tests that run detsim under the local Slurm (scripts/slurm-up.sh): whether a node
// is idle, the built CLI without the caller's SLURM_ variables, `detsim slurm submit`, polling a job.
// Test code only; NOT a Slurm client.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { expect } from 'vitest';
import { CLI_MAIN } from '../cli-refusal.js';

/** Why the Slurm cases cannot run here, or null when a node is idle (`sinfo`). */
export function slurmDownReason(): string | null {
  const r = spawnSync('sinfo', ['-h', '-o', '%T'], { encoding: 'utf8', timeout: 10_000 });
  if (r.error) return `sinfo cannot be run (${(r.error as NodeJS.ErrnoException).code}); run scripts/slurm-up.sh`;
  if (r.status !== 0) return `sinfo failed (${r.stderr.trim()}); run scripts/slurm-up.sh`;
  if (!r.stdout.split('\n').some((s) => s.trim() === 'idle' || s.trim() === 'mixed'))
    return `no idle Slurm node (sinfo: ${r.stdout.trim() || 'none'}); run scripts/slurm-up.sh`;
  return null;
}

/** The built CLI with `env` (the coordinator's own environment without any SLURM_ variables). */
export function detsim(args: string[], env: NodeJS.ProcessEnv = process.env): SpawnSyncReturns<string> {
  const clean = Object.fromEntries(Object.entries(env).filter(([k]) => !k.startsWith('SLURM_')));
  return spawnSync(process.execPath, [CLI_MAIN, ...args], { encoding: 'utf8', timeout: 60_000, env: clean });
}

/** Submit `config` into `out` (`env`: as for detsim); the job id it printed. */
export function submit(config: string, out: string, extra: string[], env: NodeJS.ProcessEnv = process.env): string {
  const r = detsim(['slurm', 'submit', config, '--out', out, ...extra], env);
  expect(r.status, r.stderr).toBe(0);
  const id = /^submitted job +([0-9]+)$/m.exec(r.stdout)?.[1];
  expect(id, r.stdout).toBeDefined();
  return id!;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Poll until `done()` holds, or fail naming `what` after `ms`. */
export async function until(what: string, done: () => boolean, ms = 90_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(200);
  }
}

/** Whether Slurm still lists the job (pending, running or completing). */
export function jobListed(jobId: string): boolean {
  const r = spawnSync('squeue', ['-h', '-j', jobId, '-o', '%i'], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.trim() !== '';
}

export const readJson = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
