// `detsim resume <run-dir> [--checkpoint ID] [--steps N]`: restore a checkpointed run with fresh
// workers in a new epoch and continue it in the same run directory, with progress on stderr.
// Only argument handling and display; the work is coordinator/checkpoint/resume.ts.
import type { Command } from 'commander';
import { resolve } from 'node:path';
import { LAUNCHERS, type LauncherKind } from '../config.js';
import { resumeRun } from '../checkpoint/resume.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { readId } from '../../core/formats/scalars.js';
import { MAX_RESTARTS_HELP, recoverFromFlag } from './checkpoint-flags.js';
import {
  ENVIRONMENT_TRANSPORT_HELP,
  TRANSPORT_HELP,
  action,
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
        } catch (e) {
          progress.stop();
          throw restoreFailureExit(e, 'resume', resolve(runDir));
        }
      }),
    );
}
