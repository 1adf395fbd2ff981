// `detsim slurm submit <config> [sbatch options…]`: check the config and flags, write the batch
// script that runs `detsim run <config> --launcher slurm` inside the allocation, submit it with
// `sbatch --parsable` and print the job id (`--dry-run` prints the script and submits nothing).
// Unknown options and extra operands go to sbatch (put them after `--` to be explicit).
// Only argument handling lives here: the script is slurm/batch-script.ts, the submission slurm/submit.ts.
import { mkdirSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import type { RunPlan } from '../config.js';
import { loadConfigWithOverrides } from '../overrides.js';
import { checkWorkerBinaries } from '../launch/launcher.js';
import { DEFAULT_RUNS_DIR } from '../session/run.js';
import { batchScript, jobOutputPattern } from '../slurm/batch-script.js';
import { checkSlurmTransport, requireSlurmCommand } from '../slurm/srun.js';
import { submitBatchScript } from '../slurm/submit.js';
import { checkWorkerTls } from '../launch/tls.js';
import { checkpointRunFromFlags } from './checkpoint-flags.js';
import { action, readStepsFlag, writeStdout } from './common.js';

interface SubmitOptions {
  steps?: string;
  out?: string;
  script?: string;
  checkpointEvery?: string;
  keep?: string;
  maxRestarts?: string;
  dryRun?: boolean;
}

/** The `detsim run` flags the job passes on, each checked here first (a bad one is refused before sbatch). */
function runArgsOf(opts: SubmitOptions, configured: RunPlan['recovery']): string[] {
  const args: string[] = [];
  const steps = readStepsFlag(opts.steps);
  if (steps !== undefined) args.push('--steps', String(steps));
  if (checkpointRunFromFlags(opts.checkpointEvery, opts.keep, opts.maxRestarts, configured)) {
    args.push('--checkpoint-every', opts.checkpointEvery!);
    if (opts.keep !== undefined) args.push('--keep', opts.keep);
    if (opts.maxRestarts !== undefined) args.push('--max-restarts', opts.maxRestarts);
  }
  return args;
}

/** This CLI's own entry file, which the job runs (dist/coordinator/cli/main.js beside this module). */
function cliEntry(): string {
  return fileURLToPath(new URL('./main.js', import.meta.url));
}

async function submit(configPath: string, sbatchArgs: string[], opts: SubmitOptions): Promise<void> {
  // Every check happens before anything is written: the config, the flags, sbatch on PATH.
  // The batch script runs `detsim run <config> --launcher slurm`: check the plan that command makes.
  const plan = loadConfigWithOverrides(configPath, [], 'slurm');
  checkWorkerBinaries(plan);
  checkSlurmTransport(plan);
  checkWorkerTls(plan);
  const runArgs = runArgsOf(opts, plan.recovery);
  const outDir = resolve(opts.out ?? DEFAULT_RUNS_DIR);
  const script = batchScript({
    configPath: resolve(configPath),
    sessionId: plan.sessionId,
    workers: plan.workers.length,
    outDir,
    workDir: process.cwd(),
    node: process.execPath,
    cli: cliEntry(),
    runArgs,
    ...(plan.rendezvous
      ? { rendezvous: { dir: plan.rendezvous.dir, ...(plan.tls ? { tlsDir: plan.tls.dir } : {}) } }
      : {}),
  });
  if (opts.dryRun) {
    process.stdout.write(script);
    return;
  }
  const sbatch = requireSlurmCommand('sbatch', 'detsim slurm submit');
  const scriptPath = resolve(opts.script ?? `${outDir}/slurm-${plan.sessionId}.sbatch`);
  // The first directory this command creates (undefined: all existed); removed again if the job is refused.
  const created = mkdirSync(outDir, { recursive: true });
  try {
    const { jobId } = submitBatchScript(sbatch, script, scriptPath, sbatchArgs);
    writeStdout(`submitted job    ${jobId}`);
    writeStdout(`batch script     ${scriptPath}`);
    writeStdout(`job output       ${jobOutputPattern(outDir).replace('%j', jobId)}`);
  } catch (e) {
    // A refused job leaves nothing: not even the run directory parent this command created.
    if (created !== undefined) rmSync(created, { recursive: true, force: true });
    throw e;
  }
}

export function registerSlurm(program: Command): void {
  const slurm = program.command('slurm').description('run on a Slurm cluster (launcher: slurm)');
  slurm
    .command('submit')
    .description(
      'write a batch script that runs `detsim run <config> --launcher slurm` in the allocation, and submit it with sbatch',
    )
    .argument('<config>', 'run configuration file (.yaml, .yml or .json)')
    .argument(
      '[sbatch-options...]',
      'passed to sbatch before the script (e.g. --time=10 --partition=x); after -- to be explicit',
    )
    .option('--steps <n>', 'number of steps (overrides the config)')
    .option('--out <dir>', 'parent directory of the run directory and of the job output (default: runs)')
    .option('--script <path>', 'where the batch script is written (default: <out>/slurm-<sessionId>.sbatch)')
    .option('--checkpoint-every <k>', 'passed to detsim run: capture a checkpoint every K committed steps')
    .option('--keep <n>', 'passed to detsim run: checkpoint generations to keep (with --checkpoint-every)')
    .option(
      '--max-restarts <n>',
      'passed to detsim run: recover from a lost worker up to N times (with --checkpoint-every)',
    )
    .option('--dry-run', 'print the batch script and submit nothing (writes nothing)')
    .allowUnknownOption()
    .action(action(submit));
}
