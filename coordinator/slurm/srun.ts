// The Slurm launcher (`launcher: slurm`): inside an allocation, each worker process is one `srun`
// job step (`srun --nodes=1 --ntasks=1 --exact --overlap … <worker command> --listen … --role …`),
// started through the launcher's starter parameter (LaunchOptions.startWorker) as a WorkerProcess
// whose child is srun: srun relays the worker's ready line (stdout), stderr and exit status, and its
// stdin pipe is the worker's "coordinator gone" signal, so everything the local launcher checks
// (ready, deaths, stderr tails, shutdown) works unchanged. Without a rendezvous placement the workers
// listen on the addresses the coordinator assigns (Unix sockets under /tmp, or loopback TCP): one
// node only; with `workers.placement: rendezvous` they may run on any node, serve TLS and announce
// themselves (rendezvous-steps.ts). Also the checks a slurm launch needs before anything starts.
// NOT the batch script (batch-script.ts), NOT sbatch.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { IN_COORDINATOR, type LauncherPlan, type PlannedWorker, type RunPlan } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import { srunRendezvousStarter } from './rendezvous-steps.js';
import {
  defaultWorkerCommand,
  startProcess,
  workerCommandFor,
  type LaunchOptions,
  type WorkerCommand,
} from '../launch/launcher.js';

/** The first executable `name` on `path` ($PATH by default), or null. */
export function findOnPath(name: string, path = process.env.PATH ?? ''): string | null {
  for (const dir of path.split(delimiter).filter((d) => d !== '')) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

/** Refuse (one named line) when a Slurm command detsim needs is not on PATH; its path otherwise. */
export function requireSlurmCommand(name: 'sbatch' | 'srun', why: string): string {
  const found = findOnPath(name);
  if (found === null)
    throw new DetsimError(
      'perm_slurm_command_missing',
      `${name}: not found on PATH; ${why} needs Slurm's ${name} (install slurm-client, or load the cluster's slurm module)`,
      name,
    );
  return found;
}

/**
 * Refuse a plan whose launcher is slurm when it cannot work here, before anything starts: outside
 * an allocation (SLURM_JOB_ID unset), without srun on PATH, or with the thread transport.
 */
export function checkSlurmLauncher(plan: RunPlan, env: NodeJS.ProcessEnv = process.env): void {
  if (plan.launcher?.kind !== 'slurm') return;
  if (!env.SLURM_JOB_ID)
    throw new DetsimError(
      'perm_slurm_no_allocation',
      `launcher: slurm starts workers as job steps of a Slurm allocation, and SLURM_JOB_ID is not set; run the command inside one (\`salloc --ntasks=${plan.workers.length} detsim …\`: a resume of a Slurm run too), or submit a new run with \`detsim slurm submit <config>\``,
      'launcher',
    );
  checkSlurmTransport(plan);
  requireSlurmCommand('srun', 'launcher: slurm');
}

/**
 * Worker threads live in the coordinator's process: they cannot be srun steps. Steps found by
 * rendezvous (possibly on other nodes) are reached over TCP with TLS (slurm/rendezvous-steps.ts).
 */
export function checkSlurmTransport(plan: RunPlan): void {
  if (plan.rendezvous && plan.transport !== 'tcp')
    throw new DetsimError(
      'struct_invalid_field',
      `workers.transport: srun steps found by rendezvous are reached over tcp, not ${plan.transport}`,
      'workers.transport',
    );
  if (plan.rendezvous && !plan.tls && !plan.perRunTls)
    throw new DetsimError(
      'struct_invalid_field',
      'workers.tls: srun steps found by rendezvous listen beyond loopback and need TLS (workers.tls: {} makes a per-run set)',
      'workers.tls',
    );
  if (IN_COORDINATOR.includes(plan.transport))
    throw new DetsimError(
      'struct_invalid_field',
      `launcher: slurm starts worker processes with srun; --transport ${plan.transport} runs them in the coordinator`,
      'launcher',
    );
}

/**
 * The srun command that runs `cmd` as one job step for `worker`: one task on one node, exactly the
 * CPUs it asks for; `--overlap` lets a step start even when the allocation has fewer CPUs than
 * workers (lockstep workers mostly wait on each other), so a small salloc never deadlocks start-up.
 * `--kill-on-bad-exit` ends the step when the worker fails; the config's srunArgs come last.
 */
export function srunCommand(cmd: WorkerCommand, worker: PlannedWorker, srunArgs: readonly string[]): WorkerCommand {
  return {
    command: 'srun',
    args: [
      '--nodes=1',
      '--ntasks=1',
      '--exact',
      '--overlap',
      '--kill-on-bad-exit=1',
      `--job-name=${worker.workerId}`,
      ...srunArgs,
      cmd.command,
      ...cmd.args,
    ],
  };
}

/** The starter (LaunchOptions.startWorker) for `launcher: slurm`: every worker process as an srun step. */
export function srunStarter(
  launcher: Extract<LauncherPlan, { kind: 'slurm' }>,
  verbose = false,
): NonNullable<LaunchOptions['startWorker']> {
  const typescript = defaultWorkerCommand();
  return (worker, ctx) => {
    if (ctx.listen === undefined) return undefined;
    const cmd = srunCommand(
      workerCommandFor(worker, typescript, verbose, ctx.plan.modelDirs),
      worker,
      launcher.srunArgs,
    );
    ctx.logger.info({ workerId: worker.workerId, srun: cmd.args.slice(0, -1) }, 'worker starts as an srun job step');
    return startProcess(worker, ctx, cmd, ctx.listen);
  };
}

/** The starter a plan's launcher asks for (undefined: the local launcher's own), after its checks. */
export function starterForPlan(plan: RunPlan, verbose = false): LaunchOptions['startWorker'] {
  if (plan.launcher?.kind !== 'slurm') return undefined;
  checkSlurmLauncher(plan);
  if (!plan.rendezvous) return srunStarter(plan.launcher, verbose);
  const { srunArgs } = plan.launcher;
  const typescript = defaultWorkerCommand();
  return srunRendezvousStarter(
    plan.rendezvous,
    (cmd, worker) => srunCommand(cmd, worker, srunArgs),
    (worker) => workerCommandFor(worker, typescript, verbose, plan.modelDirs),
  );
}
