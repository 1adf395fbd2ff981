// The batch script `detsim slurm submit` writes: #SBATCH lines asking for one node and one task per
// worker (environment + agent workers), the output file, then `exec node detsim run <config>
// --launcher slurm …` so the coordinator is the batch step's own process: `scancel` reaches it as
// SIGTERM (the Ctrl-C path) and the job's exit status is the run's. Text only: NOT its submission
// (submit.ts) and not the srun steps (srun.ts), which `detsim run` starts inside the allocation.
import { join } from 'node:path';

/** Everything one batch script says; every path absolute (the job may start in another directory). */
export interface BatchScriptInput {
  /** The run config, absolute. */
  configPath: string;
  sessionId: string;
  /** Worker processes the run starts (one srun step each): environment + agent workers. */
  workers: number;
  /** Parent of the run directory (`detsim run --out`), absolute; the job's output file goes there too. */
  outDir: string;
  /** Where the job runs `detsim run` (relative model paths were already resolved by the config). */
  workDir: string;
  /** The Node interpreter and the detsim CLI entry (dist/coordinator/cli/main.js), absolute. */
  node: string;
  cli: string;
  /** `detsim run` flags passed on (--steps, --checkpoint-every, --keep), already checked. */
  runArgs: readonly string[];
}

/** `text` as one shell word: as is when it holds only safe characters, else single-quoted. */
export function shellWord(text: string): string {
  if (/^[A-Za-z0-9_./:=@%+,-]+$/.test(text)) return text;
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** The job's output file: `<out>/slurm-<jobid>.out` (sbatch fills in %j). */
export function jobOutputPattern(outDir: string): string {
  return join(outDir, 'slurm-%j.out');
}

/** The batch script's text. Command-line sbatch options given to `detsim slurm submit` override its #SBATCH lines. */
export function batchScript(i: BatchScriptInput): string {
  const run = [i.node, i.cli, 'run', i.configPath, '--launcher', 'slurm', '--out', i.outDir, ...i.runArgs];
  return [
    '#!/bin/bash',
    `# Written by \`detsim slurm submit\`: runs ${i.sessionId} in this allocation with launcher: slurm.`,
    `# The coordinator runs here (the batch step); each of its ${i.workers} workers is one srun job step.`,
    '# scancel stops it like Ctrl-C: workers stop, summary.json says aborted, the store stays consistent.',
    `#SBATCH --job-name=${shellWord(`detsim-${i.sessionId}`)}`,
    '#SBATCH --nodes=1',
    `#SBATCH --ntasks=${i.workers}`,
    `#SBATCH --output=${shellWord(jobOutputPattern(i.outDir))}`,
    'set -eu',
    `cd ${shellWord(i.workDir)}`,
    `exec ${run.map(shellWord).join(' ')}`,
    '',
  ].join('\n');
}
