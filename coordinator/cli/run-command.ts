// `detsim run <config>`: load and check the config, run the session with a progress display on
// stderr, and print the run directory and behaviour digest on stdout. Only argument handling and
// display live here; the run itself is run.ts (runSession).
import cliProgress from 'cli-progress';
import type { Command } from 'commander';
import { resolve } from 'node:path';
import { LAUNCHERS, checkEnvironmentTransport, loadConfig, type LauncherKind, type RunPlan } from '../config.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { checkWorkerBinaries } from '../launch/launcher.js';
import { checkWorkerTls } from '../launch/tls.js';
import { DISPATCH_MODES } from '../session/lockstep.js';
import { runSession, type RunProgress } from '../session/run.js';
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
import { printReceiptWarnings, runFailureExit } from './run-outcome.js';

interface RunCommandOptions {
  checkpointEvery?: string;
  keep?: string;
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
}

/** Exit codes: 0 done, 1 the run failed (a worker died, stalled or misbehaved, a file could not be written), 2 bad input, 130 interrupted. */
export { INTERRUPTED_EXIT, RUN_FAILED_EXIT } from './run-outcome.js';

function formatEta(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  if (seconds < 60) return `${Math.round(seconds)}s`;
  return `${Math.floor(seconds / 60)}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`;
}

/** A cli-progress bar on a TTY; plain lines (at most one a second, plus the last) otherwise. */
function progressDisplay(): { update: (p: RunProgress) => void; stop: () => void } {
  if (process.stderr.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format: 'step {value}/{total} [{bar}] {rate} steps/s ETA {eta_formatted}',
        stream: process.stderr,
        hideCursor: true,
        etaBuffer: 50,
      },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    return {
      update: (p) => {
        const rate = p.elapsedMs > 0 ? ((p.step * 1000) / p.elapsedMs).toFixed(1) : '-';
        if (!started) {
          bar.start(p.steps, p.step, { rate });
          started = true;
        } else bar.update(p.step, { rate });
      },
      stop: () => {
        if (started) bar.stop();
      },
    };
  }
  let last = 0;
  return {
    update: (p) => {
      const now = Date.now();
      if (p.step !== p.steps && p.step !== 0 && now - last < 1000) return;
      last = now;
      const rate = p.elapsedMs > 0 ? (p.step * 1000) / p.elapsedMs : 0;
      const eta = rate > 0 ? (p.steps - p.step) / rate : Infinity;
      process.stderr.write(`step ${p.step}/${p.steps}  ${rate.toFixed(1)} steps/s  ETA ${formatEta(eta)}\n`);
    },
    stop: () => undefined,
  };
}

/** `--tls-dir DIR` overrides the config's workers.tls (relative to the working directory). */
function withTlsFlag(plan: RunPlan, dir: string | undefined): RunPlan {
  if (dir === undefined) return plan;
  const { perRunTls: _given, ...rest } = plan;
  return { ...rest, tls: { dir: resolve(dir) } };
}

/** `--launcher local|slurm` over the config's launcher (srunArgs kept when the config names slurm). */
function withLauncherFlag(plan: RunPlan, text: string | undefined): RunPlan {
  const kind = readChoiceFlag<LauncherKind>(text, LAUNCHERS, '--launcher');
  if (kind === undefined || kind === (plan.launcher?.kind ?? 'local')) return plan;
  return { ...plan, launcher: kind === 'slurm' ? { kind, srunArgs: [] } : { kind } };
}

/** `--environment-transport`: the environment inline (or not) whatever the config says; checked like the config. */
function withEnvironmentTransportFlag(plan: RunPlan, text: string | undefined): RunPlan {
  const chosen = readEnvironmentTransportFlag(text);
  if (chosen === undefined) return plan;
  const { environmentTransport: _configured, ...rest } = plan;
  const out: RunPlan = chosen === 'inline' ? { ...rest, environmentTransport: 'inline' } : rest;
  checkEnvironmentTransport(
    out.environmentTransport,
    out.workers.find((w) => w.role === 'environment')?.runtime,
    '--environment-transport',
  );
  return out;
}

export function registerRun(program: Command): void {
  program
    .command('run')
    .description('run a session from a config (YAML or JSON) in lockstep and write runs/<session>-<n>/')
    .argument('<config>', 'run configuration file (.yaml, .yml or .json)')
    .option('--steps <n>', 'number of steps (overrides the config)')
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
    .option('--json', 'print one canonical JSON object {behaviourDigest, runDir, steps} instead of two lines')
    .option(
      '--checkpoint-every <k>',
      'capture a checkpoint every K committed steps into <run dir>/store/ (ledger: <run dir>/ledger.jsonl)',
    )
    .option('--keep <n>', 'checkpoint generations to keep (default 3; with --checkpoint-every)')
    .option('--max-restarts <n>', `${MAX_RESTARTS_HELP}; needs --checkpoint-every`)
    .option('--verbose', "a Python model's failure carries its Python traceback")
    .option('--tls-dir <dir>', 'mutual TLS + bearer token for tcp workers from a `detsim certs` directory')
    .option('--segment-steps <n>', `steps per trace segment, trace/NNNNNN.jsonl.gz (default ${DEFAULT_SEGMENT_STEPS})`)
    .action(
      action(async (configPath: string, opts: RunCommandOptions) => {
        const steps = readStepsFlag(opts.steps);
        const dispatch = readDispatchFlag(opts.dispatch);
        const segmentSteps = readWhole(opts.segmentSteps, '--segment-steps', 1);
        // Every check on the config happens here, before any process starts.
        const transport = readTransportFlag(opts.transport);
        const loaded = loadConfig(configPath);
        const plan = withEnvironmentTransportFlag(
          withLauncherFlag(withTlsFlag(transport ? { ...loaded, transport } : loaded, opts.tlsDir), opts.launcher),
          opts.environmentTransport,
        );
        checkWorkerBinaries(plan);
        checkWorkerTls(plan);
        checkSlurmLauncher(plan);
        const checkpoints = checkpointRunFromFlags(opts.checkpointEvery, opts.keep, opts.maxRestarts, plan.recovery);
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
            ...(checkpoints ? { extension: checkpoints } : {}),
          });
          progress.stop();
          // DIFF=0 receipt (coordinator/receipt): the run wrote receipt.json as its last act; its ReproHash printed.
          printReceiptWarnings(result);
          const { runDir, behaviourDigest, steps: done, reproHash } = result;
          if (opts.json)
            writeStdout(
              canonicalize({
                runDir,
                behaviourDigest,
                steps: done,
                reproHash,
                ...(checkpoints ? { checkpoints: checkpoints.result } : {}),
              }),
            );
          else {
            writeStdout(`run directory    ${result.runDir}`);
            writeStdout(`behaviour digest ${result.behaviourDigest}`);
            writeStdout(`repro hash       ${reproHash}`);
            if (checkpoints) for (const line of checkpointSummaryLines(checkpoints.result)) writeStdout(line);
          }
        } catch (e) {
          progress.stop();
          throw runFailureExit(e, 'run');
        }
      }),
    );
}
