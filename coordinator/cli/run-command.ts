// `detsim run <config>`: load and check the config (with its `--set` / `--master-seed` overrides),
// run the session with a progress display on stderr, and print the run directory, behaviour digest,
// ReproHash, wall time, rate and reward totals on stdout. Only argument handling and display live
// here; the run itself is run.ts (runSession), the overrides overrides.ts.
import type { Command } from 'commander';
import { resolve } from 'node:path';
import { LAUNCHERS, forLauncher, withEnvironmentTransport, type LauncherKind, type RunPlan } from '../config.js';
import { loadConfigWithOverrides, parseOverrides } from '../overrides.js';
import { metricsLines } from '../session/metrics.js';
import { DetsimError } from '../../core/formats/errors.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { checkWorkerBinaries } from '../launch/launcher.js';
import { checkWorkerTls } from '../launch/tls.js';
import { DISPATCH_MODES } from '../session/lockstep.js';
import { runSession, type RunResult } from '../session/run.js';
import type { CheckpointRun } from '../checkpoint/run-checkpoints.js';
import { checkSlurmLauncher } from '../slurm/srun.js';
import { DEFAULT_SEGMENT_STEPS } from '../trace/trace-store.js';
import {
  ENVIRONMENT_TRANSPORT_HELP,
  TRANSPORT_HELP,
  action,
  readChoiceFlag,
  readStepsFlag,
  readWhole,
  readEnvironmentTransportFlag,
  readTransportFlag,
  readDispatchFlag,
  writeStdout,
} from './common.js';
import { MAX_RESTARTS_HELP, checkpointRunFromFlags, checkpointSummaryLines } from './checkpoint-flags.js';
import { progressDisplay } from './progress.js';
import { printReceiptWarnings, runFailureExit } from './run-outcome.js';

interface RunCommandOptions {
  checkpointEvery?: string;
  keep?: string;
  checkpointWait?: boolean;
  maxRestarts?: string;
  steps?: string;
  out?: string;
  dispatch?: string;
  transport?: string;
  environmentTransport?: string;
  launcher?: string;
  json?: boolean;
  verbose?: boolean;
  tlsDir?: string;
  segmentSteps?: string;
  traceObservations?: boolean;
  set?: string[];
  masterSeed?: string;
}

/** Exit codes: 0 done, 1 the run failed (a worker died, stalled or misbehaved, a file could not be written), 2 bad input, 130 interrupted. */
export { INTERRUPTED_EXIT, RUN_FAILED_EXIT } from './run-outcome.js';

/**
 * `--tls-dir DIR` overrides the config's workers.tls (relative to the working directory); TLS is for
 * TCP workers, so a transport the config left to its default becomes tcp (a named one is kept, and
 * refused by name if it is not tcp).
 */
function withTlsFlag(plan: RunPlan, dir: string | undefined): RunPlan {
  if (dir === undefined) return plan;
  const { perRunTls: _given, ...rest } = plan;
  return { ...rest, tls: { dir: resolve(dir) }, ...(plan.transportDefault ? { transport: 'tcp' as const } : {}) };
}

/** `--launcher local|slurm` over the config's launcher (srunArgs kept when the config names slurm). */
function withLauncherFlag(plan: RunPlan, text: string | undefined): RunPlan {
  const kind = readChoiceFlag<LauncherKind>(text, LAUNCHERS, '--launcher');
  if (kind === undefined || kind === (plan.launcher?.kind ?? 'local')) return plan;
  return forLauncher(plan, kind === 'slurm' ? { kind, srunArgs: [] } : { kind });
}

/** `--environment-transport`: the environment inline (or not) whatever the config says; checked like the config. */
function withEnvironmentTransportFlag(plan: RunPlan, text: string | undefined): RunPlan {
  const chosen = readEnvironmentTransportFlag(text);
  return chosen === undefined ? plan : withEnvironmentTransport(plan, chosen, '--environment-transport');
}

/** `--set` is repeatable: each occurrence adds one override text. */
export function collectSet(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** The help texts of `--set` and `--master-seed`, the same on run and slurm submit. */
export const SET_HELP =
  'override one config field before it is checked, e.g. environment.params.food=24 or agents.count=8 (value read as YAML; repeatable; recorded in run.json)';
export const MASTER_SEED_HELP = 'the master seed (U64), the same as --set masterSeed=\'"N"\'';

/** The config with its overrides, and the flags on top; `--steps` and `--set steps=` together are refused. */
function planFromFlags(configPath: string, opts: RunCommandOptions): RunPlan {
  const overrides = parseOverrides(opts.set, opts.masterSeed);
  if (opts.steps !== undefined && overrides.some((o) => o.path === 'steps'))
    throw new DetsimError(
      'struct_invalid_field',
      '--steps: give either --steps N or --set steps=N, not both',
      '--steps',
    );
  const transport = readTransportFlag(opts.transport);
  const loaded = loadConfigWithOverrides(configPath, overrides, opts.launcher === 'slurm' ? 'slurm' : undefined);
  // --transport names the transport: no launcher replaces it after that.
  const { transportDefault: _default, ...named } = loaded;
  return withEnvironmentTransportFlag(
    withLauncherFlag(withTlsFlag(transport ? { ...named, transport } : loaded, opts.tlsDir), opts.launcher),
    opts.environmentTransport,
  );
}

/** The lines (or the one JSON object) a finished run prints on stdout. */
function printRunResult(result: RunResult, checkpoints: CheckpointRun | undefined, json: boolean): void {
  const { runDir, behaviourDigest, steps, reproHash, metrics } = result;
  if (json) {
    const shown = { runDir, behaviourDigest, steps, reproHash, ...metrics };
    writeStdout(canonicalize(checkpoints ? { ...shown, checkpoints: checkpoints.result } : shown));
    return;
  }
  writeStdout(`run directory    ${runDir}`);
  writeStdout(`behaviour digest ${behaviourDigest}`);
  writeStdout(`repro hash       ${reproHash}`);
  if (checkpoints) for (const line of checkpointSummaryLines(checkpoints.result)) writeStdout(line);
  for (const line of metricsLines(metrics)) writeStdout(line);
}

export function registerRun(program: Command): void {
  program
    .command('run')
    .description('run a session from a config (YAML or JSON) in lockstep and write runs/<session>-<n>/')
    .argument('<config>', 'run configuration file (.yaml, .yml or .json)')
    .option('--steps <n>', 'number of steps (overrides the config)')
    .option('--set <path=value>', SET_HELP, collectSet)
    .option('--master-seed <n>', MASTER_SEED_HELP)
    .option('--out <dir>', 'parent directory of the run directory (default: runs)')
    .option(
      '--dispatch <mode>',
      `order of worker messages within a phase: ${DISPATCH_MODES.join(' | ')} (default concurrent)`,
    )
    .option('--transport <t>', TRANSPORT_HELP)
    .option('--environment-transport <t>', ENVIRONMENT_TRANSPORT_HELP)
    .option(
      '--launcher <kind>',
      `how workers start: ${LAUNCHERS.join(' | ')} (slurm: one srun job step each, inside an allocation; overrides launcher)`,
    )
    .option(
      '--json',
      'print one canonical JSON object {behaviourDigest, reproHash, runDir, steps, wallTimeMs, stepsPerSecond, rewards, checkpoints?} instead of lines',
    )
    .option(
      '--checkpoint-every <k>',
      'capture a checkpoint every K committed steps into <run dir>/store/ (ledger: <run dir>/ledger.jsonl)',
    )
    .option('--keep <n>', 'checkpoint generations to keep (default 3; with --checkpoint-every)')
    .option(
      '--checkpoint-wait',
      'take every checkpoint: wait for each to be durable before stepping on, instead of skipping one while the writer is still busy with two (slower; with --checkpoint-every)',
    )
    .option('--max-restarts <n>', `${MAX_RESTARTS_HELP}; needs --checkpoint-every`)
    .option('--verbose', "a Python model's failure carries its Python traceback")
    .option('--tls-dir <dir>', 'mutual TLS + bearer token for tcp workers from a `detsim certs` directory')
    .option('--segment-steps <n>', `steps per trace segment, trace/NNNNNN.jsonl.gz (default ${DEFAULT_SEGMENT_STEPS})`)
    .option(
      '--trace-observations',
      "also record each step's observations beside the trace (trace/NNNNNN.observations.jsonl.gz) for `detsim trace export`'s obs.<field> columns; physical data, in no hash (resume and fork keep it on)",
    )
    .action(
      action(async (configPath: string, opts: RunCommandOptions) => {
        const steps = readStepsFlag(opts.steps);
        const dispatch = readDispatchFlag(opts.dispatch);
        const segmentSteps = readWhole(opts.segmentSteps, '--segment-steps', 1);
        // Every check on the config happens here, before any process starts.
        const plan = planFromFlags(configPath, opts);
        checkWorkerBinaries(plan);
        checkWorkerTls(plan);
        checkSlurmLauncher(plan);
        const checkpoints = checkpointRunFromFlags(
          opts.checkpointEvery,
          opts.keep,
          opts.maxRestarts,
          plan.recovery,
          opts.checkpointWait === true,
        );
        refuseRecoveryByHand(plan, checkpoints, opts.maxRestarts !== undefined);
        const progress = progressDisplay();
        try {
          const result = await runSession(plan, {
            outDir: opts.out,
            steps,
            dispatch,
            onProgress: progress.update,
            handleSignals: true,
            verbose: opts.verbose === true,
            ...(segmentSteps !== undefined ? { segmentSteps } : {}),
            ...(opts.traceObservations === true ? { traceObservations: true } : {}),
            ...(checkpoints ? { extension: checkpoints } : {}),
          });
          progress.stop();
          // DIFF=0 receipt (coordinator/receipt): the run wrote receipt.json as its last act; its ReproHash printed.
          printReceiptWarnings(result);
          printRunResult(result, checkpoints, opts.json === true);
        } catch (e) {
          progress.stop();
          throw runFailureExit(e, 'run');
        }
      }),
    );
}

/**
 * A recovery starts replacement workers; workers placed by rendezvous and started by hand (not
 * Slurm's steps) cannot be replaced by the coordinator, so asking for one is refused up front.
 */
function refuseRecoveryByHand(plan: RunPlan, checkpoints: CheckpointRun | undefined, fromFlag: boolean): void {
  if (checkpoints?.recovery === undefined || !plan.rendezvous || plan.launcher?.kind === 'slurm') return;
  const field = fromFlag ? '--max-restarts' : 'recovery.maxRestarts';
  throw new DetsimError(
    'struct_invalid_field',
    `${field}: a recovery starts replacement workers, and this run's workers are started by hand (workers.placement: rendezvous); run without it, and after a lost worker start fresh workers and \`detsim resume\` the run`,
    field,
  );
}
