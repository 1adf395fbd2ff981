// `launcher: slurm` with `workers.placement: rendezvous`: workers as srun job steps that may run on
// any node of the allocation. Each step runs `detsim worker --listen 0.0.0.0:0 --tls-dir <set>
// --rendezvous <dir> --advertise $(hostname):0` (port 0: the OS picks it; the host name is the
// node's own, evaluated there), so it serves mutual TLS + the run's token beyond loopback and
// announces where it is. The coordinator waits for the step's ready line (srun relays it, after the
// record is written), reads and checks its record (rendezvous.ts), checks the certificate the worker
// presents against the record's fingerprint (rendezvous-tls.ts), and connects with mutual TLS pinned
// to that fingerprint: node names need not be in the certificate. Each launch (and each recovery's
// relaunch) uses a fresh directory inside the configured one, so no record of an earlier fleet is
// ever read; it is removed again once the launch's steps have exited and left it empty.
// NOT the single-node srun starter (srun.ts) nor the batch script (batch-script.ts).
import { mkdirSync, mkdtempSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import type { PlannedWorker, RendezvousPlacement, RunPlan } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import { WorkerClient } from '../../core/protocol/index.js';
import { coordinatorChannelCredentials, derFingerprint } from '../../core/protocol/tls.js';
import {
  diagnoseCallFailure,
  type LaunchOptions,
  type StartContext,
  type StartingWorker,
  type WorkerCommand,
  WorkerProcess,
  withStore,
  withTlsDir,
} from '../launch/launcher.js';
import { awaitRendezvous } from '../launch/rendezvous.js';
import { checkRendezvousCertificates } from '../launch/rendezvous-tls.js';
import { RunFailure } from '../session/run-failure.js';

/** Where an srun step listens: every interface, a port the OS picks (its record says where it is). */
export const STEP_LISTEN = '0.0.0.0:0';

/**
 * `cmd` run through `sh -c` on the node, so that `--advertise` carries the node's own host name
 * (`$(hostname):0`) and `--rendezvous` the launch's directory; the worker flags follow as "$@".
 */
export function advertisingCommand(cmd: WorkerCommand, rendezvousDir: string): WorkerCommand {
  return {
    command: 'sh',
    args: [
      '-c',
      'exec "$@" --advertise "$(hostname):0"',
      'detsim-worker',
      cmd.command,
      ...cmd.args,
      '--rendezvous',
      rendezvousDir,
    ],
  };
}

/** A fresh directory for one launch's records, inside the configured rendezvous directory (created if absent). */
export function freshLaunchDir(placement: RendezvousPlacement): string {
  try {
    mkdirSync(placement.dir, { recursive: true, mode: 0o700 });
    return mkdtempSync(join(placement.dir, 'launch-'));
  } catch (e) {
    throw new DetsimError(
      'perm_write_failed',
      `workers.rendezvous.dir: cannot make this launch's directory in ${placement.dir} (${(e as NodeJS.ErrnoException).code ?? 'error'})`,
      'workers.rendezvous.dir',
    );
  }
}

/** Credentials that accept exactly the certificate whose fingerprint the worker's record names. */
function pinnedCredentials(ctx: StartContext, fingerprint: string) {
  return coordinatorChannelCredentials(ctx.tls!.material, {
    checkServerIdentity: (_host, cert) =>
      derFingerprint(cert.raw) === fingerprint
        ? undefined
        : new Error("the worker's certificate is not the one its rendezvous record names"),
  });
}

/** A refusal while finding or checking a step's record, as the RunFailure a launch reports (named, with its code). */
function asStartupFailure(e: unknown, worker: PlannedWorker): unknown {
  if (!(e instanceof DetsimError)) return e;
  return new RunFailure('identity', `[${e.reason}] ${e.message}`, {
    workerId: worker.workerId,
    agentIds: worker.agentIds,
    step: null,
    phase: 'startup',
  });
}

/** Start one srun step (`cmd` is the srun command) and connect to it through its rendezvous record. */
export function startRendezvousStep(
  worker: PlannedWorker,
  ctx: StartContext,
  cmd: WorkerCommand,
  launchDir: RendezvousPlacement,
): StartingWorker {
  const full = withTlsDir(withStore(cmd, ctx), ctx.plan);
  ctx.logger.info(
    { workerId: worker.workerId, srun: full.args, listen: STEP_LISTEN, rendezvous: launchDir.dir },
    'worker starts as an srun job step',
  );
  const proc = new WorkerProcess(worker, full, STEP_LISTEN, ctx.plan.sessionId, ctx.logger, ctx.models);
  const connected = (async () => {
    // The ready line comes once the record is written; the record says where the step is.
    await proc.ready(ctx.plan.deadlines.startupMs, ctx.signal);
    const left = (): number => Math.max(1, ctx.deadlineAt - performance.now());
    const one: RunPlan = { ...ctx.plan, workers: [worker] };
    let address: string;
    let fingerprint: string;
    try {
      const found = await awaitRendezvous(one, { dir: launchDir.dir, timeoutMs: left() }, ctx.signal);
      await checkRendezvousCertificates(one, launchDir, found, true);
      ({ address, certificateFingerprint: fingerprint } = found.get(worker.workerId)! as {
        address: string;
        certificateFingerprint: string;
      });
    } catch (e) {
      throw asStartupFailure(e, worker);
    }
    try {
      const client = await WorkerClient.connect(address, {
        processExit: proc.exited,
        label: worker.workerId,
        connectTimeoutMs: left(),
        credentials: pinnedCredentials(ctx, fingerprint),
      });
      return { client, address };
    } catch (e) {
      throw await diagnoseCallFailure(e, { plan: worker, instance: proc }, null, 'startup');
    }
  })();
  return { instance: proc, connected };
}

/**
 * The starter for launcher: slurm + placement: rendezvous (TLS required: checked by the config and
 * launch-facts.ts): one fresh launch directory per starter, i.e. per launch; `srun` wraps each step.
 */
export function srunRendezvousStarter(
  placement: RendezvousPlacement,
  toSrun: (cmd: WorkerCommand, worker: PlannedWorker) => WorkerCommand,
  workerCommand: (worker: PlannedWorker) => WorkerCommand,
): NonNullable<LaunchOptions['startWorker']> {
  let launchDir: RendezvousPlacement | undefined;
  let running = 0;
  return (worker, ctx) => {
    if (!ctx.tls)
      throw new DetsimError(
        'struct_invalid_field',
        'workers.tls: srun steps found by rendezvous listen beyond loopback and need TLS',
        'workers.tls',
      );
    const dir = (launchDir ??= { dir: freshLaunchDir(placement), timeoutMs: placement.timeoutMs });
    const cmd = toSrun(advertisingCommand(workerCommand(worker), dir.dir), worker);
    const started = startRendezvousStep(worker, ctx, cmd, dir);
    // The fleet's steps all start in one pass (launchFleet), so the count reaches 0 only when the
    // launch is over: its last step has exited, whether the run ended, failed or was cancelled.
    running += 1;
    void started.instance.exited.then(() => {
      if (--running > 0) return;
      if (launchDir === dir) launchDir = undefined;
      removeIfEmpty(dir.dir);
    });
    return started;
  };
}

/**
 * Remove a launch directory this coordinator made once its steps are gone. Each worker removes its
 * own record on exit, so the directory is then empty; one a killed worker left a record in is
 * kept (rmdir refuses it), as evidence and for the stale-record refusal to name.
 */
function removeIfEmpty(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // ENOTEMPTY (a record left behind) or already gone: nothing of ours to remove.
  }
}
