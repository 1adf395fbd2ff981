// The batch script `detsim slurm submit` writes: #SBATCH lines asking for one task per worker
// (environment + agent workers; one node unless the workers are found by rendezvous, which lets them
// run on any node: comment lines then show the worker step and where its TLS set is), the output
// file, then `exec node --v8-pool-size=0 detsim run <config> --launcher slurm …` so the coordinator is the batch step's own process: `scancel` reaches it as
// SIGTERM (the Ctrl-C path) and the job's exit status is the run's. Text only: NOT its submission
// (submit.ts) and not the srun steps (srun.ts), which `detsim run` starts inside the allocation.
import { join } from 'node:path';
import { NODE_POOL_FLAG } from '../launch/node-flag.js';

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
  /**
   * `workers.placement: rendezvous`: workers may run on any node; they announce themselves in `dir`
   * and serve TLS from `tlsDir` (undefined: the per-run set the run makes in its run directory).
   */
  rendezvous?: { dir: string; tlsDir?: string };
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

/** The comment lines that say what each srun step runs when workers are found by rendezvous. */
function rendezvousLines(i: BatchScriptInput, r: NonNullable<BatchScriptInput['rendezvous']>): string[] {
  const tls = r.tlsDir ?? join(i.outDir, `${i.sessionId}-<n>`, 'tls');
  return [
    `# The coordinator runs here (the batch step); each of its ${i.workers} workers is one srun job step on`,
    '# any node of the allocation, which serves mutual TLS + the run token and registers by rendezvous:',
    '#   srun --nodes=1 --ntasks=1 --exact --overlap … detsim worker --role … --worker-id … \\',
    `#     --listen 0.0.0.0:0 --tls-dir ${tls} \\`,
    `#     --rendezvous ${join(r.dir, 'launch-XXXXXX')} --advertise "$(hostname):0"`,
    `# TLS set: ${r.tlsDir === undefined ? `made by the run into ${tls} (0700, keys 0600)` : 'given by the config'}.`,
    `# ${i.outDir} and ${r.dir} must be on a filesystem every node shares.`,
  ];
}

/** The batch script's text. Command-line sbatch options given to `detsim slurm submit` override its #SBATCH lines. */
export function batchScript(i: BatchScriptInput): string {
  const run = [
    i.node,
    NODE_POOL_FLAG,
    i.cli,
    'run',
    i.configPath,
    '--launcher',
    'slurm',
    '--out',
    i.outDir,
    ...i.runArgs,
  ];
  return [
    '#!/bin/bash',
    `# Written by \`detsim slurm submit\`: runs ${i.sessionId} in this allocation with launcher: slurm.`,
    ...(i.rendezvous
      ? rendezvousLines(i, i.rendezvous)
      : [`# The coordinator runs here (the batch step); each of its ${i.workers} workers is one srun job step.`]),
    '# scancel stops it like Ctrl-C: workers stop, summary.json says aborted, the store stays consistent.',
    `#SBATCH --job-name=${shellWord(`detsim-${i.sessionId}`)}`,
    // Workers found by rendezvous may be placed on any node; otherwise they listen on this one.
    ...(i.rendezvous ? [] : ['#SBATCH --nodes=1']),
    `#SBATCH --ntasks=${i.workers}`,
    `#SBATCH --output=${shellWord(jobOutputPattern(i.outDir))}`,
    'set -eu',
    `cd ${shellWord(i.workDir)}`,
    `exec ${run.map(shellWord).join(' ')}`,
    '',
  ].join('\n');
}
