// `detsim resume <run-dir> [--checkpoint ID] [--steps N]`: restore a checkpointed run with fresh
// workers in a new epoch and continue it in the same run directory, with progress on stderr.
// Only argument handling and display; the work is coordinator/checkpoint/resume.ts.
import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { LAUNCHERS, type LauncherKind } from '../config.js';
import { resumeRun, type ResumeResult } from '../checkpoint/resume.js';
import { readReceipt } from '../receipt/receipt.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { readId } from '../../core/formats/scalars.js';
import { requireExistingDirectory } from '../../core/formats/existing-dir.js';
import { MAX_RESTARTS_HELP, recoverFromFlag } from './checkpoint-flags.js';
import {
  ENVIRONMENT_TRANSPORT_HELP,
  TRANSPORT_HELP,
  action,
  ExitError,
  formatError,
  readChoiceFlag,
  readEnvironmentTransportFlag,
  readStepsFlag,
  readTransportFlag,
  writeStdout,
} from './common.js';
import { printReceiptWarnings, printRestoredOutcome, restoreFailureExit } from './run-outcome.js';
import { progressDisplay } from './progress.js';

export interface ResumeCommandOptions {
  checkpoint?: string;
  steps?: string;
  checkpointEvery?: string;
  maxRestarts?: string;
  transport?: string;
  environmentTransport?: string;
  launcher?: string;
  json?: boolean;
  verbose?: boolean;
}

/** A whole-number flag where 0 means none (`--checkpoint-every 0`); steps go through readStepsFlag. */
function whole(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined;
  if (!/^(0|[1-9][0-9]{0,8})$/.test(text))
    throw new DetsimError('struct_invalid_field', `${flag}: ${JSON.stringify(text)} is not a whole number`, flag);
  return Number(text);
}

export function registerResume(program: Command): void {
  program
    .command('resume')
    .description(
      'restore a checkpointed run (store/ in its run directory) with fresh workers in a new epoch and continue it to its total steps (a run made with --trace-observations keeps recording its observations)',
    )
    .argument('<run-dir>', 'run directory written by `detsim run --checkpoint-every K`')
    .option('--checkpoint <id>', 'checkpoint id to restore (default: the store high-water mark)')
    .option('--steps <n>', 'continue up to this boundary (default: the run total recorded in run.json)')
    .option(
      '--checkpoint-every <k>',
      'checkpoint interval while resuming (default: the one the run recorded; 0 = none)',
    )
    .option('--max-restarts <n>', MAX_RESTARTS_HELP)
    .option('--transport <t>', TRANSPORT_HELP)
    .option('--environment-transport <t>', `${ENVIRONMENT_TRANSPORT_HELP} (default: as launch.json records)`)
    .option(
      '--launcher <kind>',
      `how workers start: ${LAUNCHERS.join(' | ')} (default: as the run recorded in launch.json; slurm needs an allocation)`,
    )
    .option('--json', 'print one canonical JSON object instead of lines')
    .option('--verbose', "a Python model's failure carries its Python traceback")
    .action(
      action(async (runDir: string, opts: ResumeCommandOptions) => {
        const transport = readTransportFlag(opts.transport);
        const environmentTransport = readEnvironmentTransportFlag(opts.environmentTransport);
        const launcher = readChoiceFlag<LauncherKind>(opts.launcher, LAUNCHERS, '--launcher');
        const checkpointId = opts.checkpoint === undefined ? undefined : readId(opts.checkpoint, '--checkpoint');
        const steps = readStepsFlag(opts.steps);
        const every = whole(opts.checkpointEvery, '--checkpoint-every');
        const recover = recoverFromFlag(opts.maxRestarts);
        // The flags first (as replay and verify check them), then the directory.
        requireExistingDirectory(runDir, runDir, '<run-dir>');
        const before = recordedOutcome(runDir);
        const progress = progressDisplay();
        try {
          const r = await resumeRun(runDir, {
            // Ctrl-C / SIGTERM stop the resumed run like `detsim run` (the session loop's one abort wiring).
            handleSignals: true,
            verbose: opts.verbose === true,
            ...(checkpointId ? { checkpointId } : {}),
            ...(steps !== undefined ? { steps } : {}),
            ...(every !== undefined ? { checkpointEvery: every } : {}),
            ...(transport ? { transport } : {}),
            ...(environmentTransport ? { environmentTransport } : {}),
            ...(launcher ? { launcher } : {}),
            ...recover,
            onProgress: progress.update,
            onEvent: (line) => process.stderr.write(`${line}\n`),
          });
          progress.stop();
          // DIFF=0 receipt (coordinator/receipt), written by the resume as its last act: hashed with later
          // epochs rebased, so it equals the uninterrupted run's.
          printReceiptWarnings(r);
          const { receipt: _receipt, ...shown } = r;
          if (opts.json) writeStdout(canonicalize(shown));
          else {
            printRestoredOutcome(
              r,
              `restored         ${r.checkpointId} at boundary ${r.boundary} into epoch ${r.epoch} (${r.abandonedSteps} later steps abandoned)`,
            );
          }
          refuseChangedOutcome(before, r, runDir);
        } catch (e) {
          progress.stop();
          throw restoreFailureExit(e, 'resume', resolve(runDir));
        }
      }),
    );
}

/** The ReproHash and steps of the receipt.json a run directory holds before a resume, if any. */
function recordedOutcome(runDir: string): { reproHash: string; steps: number } | null {
  const file = join(runDir, 'receipt.json');
  if (!existsSync(file)) return null;
  try {
    const r = readReceipt(file) as unknown as { reproHash?: unknown; summary?: { stepsDone?: unknown } };
    return typeof r.reproHash === 'string' && typeof r.summary?.stepsDone === 'number'
      ? { reproHash: r.reproHash, steps: r.summary.stepsDone }
      : null;
  } catch {
    return null;
  }
}

/**
 * A resume that ends at the steps the run had already completed must give the ReproHash its receipt
 * recorded: the steps it ran again came out otherwise (a model that is not deterministic across a
 * restore). The new receipt stays (it is what the directory now holds); the command says so, exit 1.
 */
function refuseChangedOutcome(
  before: { reproHash: string; steps: number } | null,
  r: ResumeResult,
  runDir: string,
): void {
  if (before === null || before.steps !== r.steps || before.reproHash === r.reproHash) return;
  throw new ExitError(
    1,
    formatError(
      new DetsimError(
        'audit_repro_hash_mismatch',
        `the run's ReproHash changed: its receipt.json recorded ${before.reproHash} for these ${r.steps} steps before this resume, and the steps run again from ${r.checkpointId} give ${r.reproHash}: the model is not deterministic across a restore (\`detsim replay ${runDir} --resume-at ${r.boundary}\` names the first divergence)`,
        'receipt.json',
      ),
    ),
  );
}
