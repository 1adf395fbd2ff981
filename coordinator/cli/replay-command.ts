// `detsim replay <config|run-dir>`: run a configuration N ≥ 2 times with fresh workers and check
// DIFF=0 (equal ReproHashes, sensitivity, physical diff). Argument handling and display only;
// the checks are coordinator/diff0/replay.ts. Exit 0 green, 1 red
// (or a file could not be written), 2 yellow.
import type { Command } from 'commander';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DISPATCH_MODES } from '../session/lockstep.js';
import { isRunFailure } from '../session/run-failure.js';
import { describeDivergence } from '../diff0/diagnosis.js';
import { type Check, type ReplayReport, replay } from '../diff0/replay.js';
import {
  TRANSPORT_HELP,
  action,
  ExitError,
  readStepsFlag,
  readTransportFlag,
  readDispatchFlag,
  readWhole,
  writeStdout,
} from './common.js';
import { writeFailureExit } from './run-outcome.js';

interface ReplayCommandOptions {
  runs?: string;
  dispatch?: string;
  out?: string;
  steps?: string;
  resumeAt?: string;
  transport?: string;
  json?: boolean;
  verbose?: boolean;
}

/** 1 when any check failed, 2 when any warned, else 0. */
export function exitCodeOf(checks: readonly Check[]): 0 | 1 | 2 {
  if (checks.some((c) => c.status === 'fail')) return 1;
  if (checks.some((c) => c.status === 'warn')) return 2;
  return 0;
}

export function formatReplay(r: ReplayReport): string[] {
  const lines = [`replay ${r.subject}: ${r.runs.length} fresh runs`];
  if (r.reference) lines.push(`  recorded  ${r.reference.reproHash}  ${r.reference.runDir}`);
  r.runs.forEach((run, i) =>
    lines.push(`  run ${i + 1}     ${run.reproHash}  ${run.dispatch.padEnd(10)}  ${run.runDir}`),
  );
  for (const c of r.checks)
    lines.push(
      `${c.status.toUpperCase().padEnd(4)} ${c.check.padEnd(13)} [${c.reason}] ${c.status === 'pass' ? '' : canonicalize(c.detail)}`.trimEnd(),
    );
  if (r.resume)
    lines.push(
      `  resumed   ${r.resume.checkpointId}  ${r.resume.resumedDir} (uninterrupted ${r.resume.uninterruptedDir})`,
    );
  if (r.divergence) lines.push(describeDivergence(r.divergence, ['first run', 'diverging run']));
  return lines;
}

export function registerReplay(program: Command): void {
  program
    .command('replay')
    .description('run a config (or a recorded run directory) N ≥ 2 times with fresh workers and check DIFF=0')
    .argument('<config|run-dir>', 'run configuration file, or a run directory to replay and compare against')
    .option('--runs <n>', 'number of fresh runs (≥ 2)', '2')
    .option(
      '--dispatch <mode>',
      `one dispatch mode for every run: ${DISPATCH_MODES.join(' | ')} (default: the runs cycle concurrent, reversed, sequential)`,
    )
    .option('--steps <n>', 'number of steps (overrides the config)')
    .option(
      '--resume-at <k>',
      'also: checkpoint at step K, interrupt, resume with fresh workers in a new epoch, and compare with an uninterrupted run',
    )
    .option('--out <dir>', 'parent directory of the run directories (default: runs)')
    .option('--transport <t>', TRANSPORT_HELP)
    .option('--json', 'print one canonical JSON object')
    .option('--verbose', "a Python model's failure carries its Python traceback")
    .action(
      action(async (source: string, opts: ReplayCommandOptions) => {
        const transport = readTransportFlag(opts.transport);
        const runs = readWhole(opts.runs, '--runs', 2);
        const steps = readStepsFlag(opts.steps);
        const dispatch = readDispatchFlag(opts.dispatch);
        const resumeAt = readWhole(opts.resumeAt, '--resume-at', 1);
        let report: ReplayReport;
        try {
          report = await replay(source, {
            runs,
            steps,
            dispatch,
            resumeAt,
            transport,
            outDir: opts.out,
            runOptions: { verbose: opts.verbose === true },
            onRun: opts.json
              ? undefined
              : (i, run) => process.stderr.write(`run ${i + 1} done: ${run.reproHash} ${run.runDir}\n`),
          });
        } catch (e) {
          throw (
            writeFailureExit(e, 'replay') ??
            (isRunFailure(e) ? new ExitError(1, `detsim: [audit_run_failed] a replay run failed: ${e.message}`) : e)
          );
        }
        if (opts.json) {
          const { runs: rs, ...rest } = report;
          writeStdout(
            canonicalize({
              ...rest,
              runs: rs.map((r) => ({ runDir: r.runDir, dispatch: r.dispatch, reproHash: r.reproHash })),
            }),
          );
        } else for (const l of formatReplay(report)) writeStdout(l);
        const code = exitCodeOf(report.checks);
        if (code !== 0) throw new ExitError(code, '');
      }),
    );
}
