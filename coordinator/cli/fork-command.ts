// `detsim fork <run-dir> --checkpoint ID [--set path=value …] [--out DIR]`: a new run directory that
// starts from one committed checkpoint of a run and continues it, the parent untouched. Only
// argument handling and display; the work is coordinator/checkpoint/fork.ts (which says what a fork
// may change and why), the restore and stepping the resume's.
import type { Command } from 'commander';
import { LAUNCHERS, type LauncherKind } from '../config.js';
import { forkRun } from '../checkpoint/fork.js';
import { formatOverride, parseOverrides } from '../overrides.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { readId } from '../../core/formats/scalars.js';
import { MAX_RESTARTS_HELP, recoverFromFlag } from './checkpoint-flags.js';
import {
  ENVIRONMENT_TRANSPORT_HELP,
  TRANSPORT_HELP,
  action,
  readChoiceFlag,
  readEnvironmentTransportFlag,
  readTransportFlag,
  readWhole,
  writeStdout,
} from './common.js';
import { progressDisplay } from './progress.js';
import { printReceiptWarnings, printRestoredOutcome, restoreFailureExit } from './run-outcome.js';
import { collectSet } from './run-command.js';
import type { ResumeCommandOptions } from './resume-command.js';
import { requireExistingDirectory } from '../../core/formats/existing-dir.js';

/** resume's flags but `--steps` (a fork sets steps with `--set steps=N`), plus the overrides and where to write. */
type ForkCommandOptions = Omit<ResumeCommandOptions, 'steps' | 'checkpoint'> & {
  checkpoint: string;
  set?: string[];
  out?: string;
};

/** Every flag read and checked before anything is read from the parent. */
function forkInputs(opts: ForkCommandOptions) {
  const every = readWhole(opts.checkpointEvery, '--checkpoint-every', 0);
  const transport = readTransportFlag(opts.transport);
  const environmentTransport = readEnvironmentTransportFlag(opts.environmentTransport);
  const launcher = readChoiceFlag<LauncherKind>(opts.launcher, LAUNCHERS, '--launcher');
  return {
    checkpointId: readId(opts.checkpoint, '--checkpoint'),
    overrides: parseOverrides(opts.set),
    ...(opts.out !== undefined ? { out: opts.out } : {}),
    ...(every !== undefined ? { checkpointEvery: every } : {}),
    ...(transport ? { transport } : {}),
    ...(environmentTransport ? { environmentTransport } : {}),
    ...(launcher ? { launcher } : {}),
    ...recoverFromFlag(opts.maxRestarts),
  };
}

async function fork(parentDir: string, opts: ForkCommandOptions): Promise<void> {
  const inputs = forkInputs(opts);
  requireExistingDirectory(parentDir, parentDir, '<run-dir>');
  const progress = progressDisplay();
  try {
    const r = await forkRun(parentDir, {
      ...inputs,
      handleSignals: true,
      verbose: opts.verbose === true,
      onProgress: progress.update,
      onEvent: (line) => process.stderr.write(`${line}\n`),
    });
    progress.stop();
    printReceiptWarnings(r);
    const { receipt: _receipt, ...shown } = r;
    if (opts.json) return writeStdout(canonicalize(shown));
    const set = inputs.overrides.length > 0 ? `, with ${inputs.overrides.map(formatOverride).join(' ')}` : '';
    printRestoredOutcome(
      r,
      `forked from      ${r.parent} at ${r.checkpointId} (boundary ${r.boundary}) into epoch ${r.epoch}${set}`,
    );
  } catch (e) {
    progress.stop();
    throw restoreFailureExit(e, 'fork');
  }
}

export function registerFork(program: Command): void {
  program
    .command('fork')
    .description(
      'start a new run directory from a committed checkpoint of a run and continue it to its total steps (the parent is not changed)',
    )
    .argument('<run-dir>', 'the parent: a run directory written with --checkpoint-every K')
    .requiredOption('--checkpoint <id>', 'the committed checkpoint to start from (detsim store ls <run-dir>/store)')
    .option(
      '--set <path=value>',
      'steps=N (the total to continue to), deadlines.startupMs|stepMs|captureMs=MS, or environment.params.NAME / agents[i].params.NAME that the model accepts on restore (walker: explore; forage: food); seeds and the composition are refused (repeatable)',
      collectSet,
    )
    .option('--out <dir>', "the fork's run directory, which must not exist (default: <run-dir>-fork-<n>)")
    .option('--checkpoint-every <k>', "checkpoint interval of the fork (default: the parent's; 0 = none)")
    .option('--max-restarts <n>', MAX_RESTARTS_HELP)
    .option('--transport <t>', TRANSPORT_HELP)
    .option(
      '--environment-transport <t>',
      `${ENVIRONMENT_TRANSPORT_HELP} (default: as the parent's launch.json records)`,
    )
    .option(
      '--launcher <kind>',
      `how workers start: ${LAUNCHERS.join(' | ')} (default: as the parent's launch.json records)`,
    )
    .option('--json', 'print one canonical JSON object instead of lines')
    .option('--verbose', "a Python model's failure carries its Python traceback")
    .action(action(fork));
}
