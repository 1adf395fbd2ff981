// `detsim replay <config|run-dir>`: run a configuration N ≥ 2 times with fresh workers and check
// DIFF=0 (equal ReproHashes, sensitivity, physical diff); with --predict, first ledger the expected
// outcome (diff0/predicted-replay.ts). Argument handling and display only; the checks are
// coordinator/diff0/replay.ts. Exit 0 green, 1 red (or a file could not be written), 2 yellow.
import type { Command } from 'commander';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DISPATCH_MODES } from '../session/lockstep.js';
import { isRunFailure } from '../session/run-failure.js';
import { describeDivergence } from '../diff0/diagnosis.js';
import { type Check, type ReplayReport, type ReplayOptions, replay } from '../diff0/replay.js';
import { type PredictedReplay, predictedReplay } from '../diff0/predicted-replay.js';
import { DetsimError } from '../../core/formats/errors.js';
import {
  ENVIRONMENT_TRANSPORT_HELP,
  TRANSPORT_HELP,
  action,
  ExitError,
  readStepsFlag,
  readTransportFlag,
  readDispatchFlag,
  readEnvironmentTransportFlag,
  readWhole,
  writeStdout,
} from './common.js';
import { writeFailureExit } from './run-outcome.js';
import { readingProgress } from './progress.js';

interface ReplayCommandOptions {
  runs?: string;
  dispatch?: string;
  out?: string;
  steps?: string;
  resumeAt?: string;
  transport?: string;
  json?: boolean;
  verbose?: boolean;
  predict?: boolean;
  goldenDir?: string;
  parent?: string;
  environmentTransport?: string;
}

/** 1 when any check failed, 2 when any warned, else 0. */
export function exitCodeOf(checks: readonly Check[]): 0 | 1 | 2 {
  if (checks.some((c) => c.status === 'fail')) return 1;
  if (checks.some((c) => c.status === 'warn')) return 2;
  return 0;
}

/** The report as lines; `afterRuns` (the prediction and its outcome) goes between the runs and the checks. */
export function formatReplay(r: ReplayReport, afterRuns: readonly string[] = []): string[] {
  const lines = [`replay ${r.subject}: ${r.runs.length} fresh runs`];
  if (r.reference) lines.push(`  recorded  ${r.reference.reproHash}  ${r.reference.runDir}`);
  if (r.fork)
    lines.push(
      r.fork.own
        ? `  forked    again from its own copy of ${r.fork.checkpointId} (no parent beside it) for each run`
        : `  forked    again from ${r.fork.checkpointId} of ${r.fork.parentDir} for each run`,
    );
  r.runs.forEach((run, i) =>
    lines.push(`  run ${i + 1}     ${run.reproHash}  ${run.dispatch.padEnd(10)}  ${run.runDir}`),
  );
  lines.push(...afterRuns);
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

/** The prediction (expected values, source, ledger line) and its outcome, as printed before the checks. */
export function formatPrediction(p: PredictedReplay): string[] {
  const e = p.evaluated;
  const x = e.prediction.expected!;
  const evidence = e.evidence.map((r) => r.seq).join(', ');
  return [
    `  predicted ${x.reproHash}  behaviour ${x.behaviourDigest.slice(0, 16)}…  from ${e.prediction.source!.kind} ${e.prediction.source!.file}  (${p.ledger} line ${e.ref.seq})`,
    `  outcome   ${e.result}${e.mismatches.length ? ` (${e.mismatches.length} mismatch(es))` : ''}  (evidence lines ${evidence})`,
  ];
}

/** The --json object: the report, and with --predict its prediction and outcome. */
function jsonOf(report: ReplayReport, predicted: PredictedReplay | null): string {
  const { runs: rs, ...rest } = report;
  const e = predicted?.evaluated;
  const prediction = e && { ledger: predicted!.ledger, seq: e.ref.seq, digest: e.ref.digest, ...e.prediction };
  const outcome = e && { result: e.result, observed: e.observed, mismatches: e.mismatches, evidence: e.evidence };
  return canonicalize({
    ...rest,
    runs: rs.map((r) => ({ runDir: r.runDir, dispatch: r.dispatch, reproHash: r.reproHash })),
    ...(e ? { prediction, outcome } : {}),
  } as unknown as Parameters<typeof canonicalize>[0]);
}

async function runReplay(
  source: string,
  opts: ReplayCommandOptions,
  ro: ReplayOptions,
): Promise<PredictedReplay | ReplayReport> {
  try {
    return opts.predict
      ? await predictedReplay(source, { ...ro, goldenDir: opts.goldenDir })
      : await replay(source, ro);
  } catch (e) {
    throw (
      writeFailureExit(e, 'replay') ??
      (isRunFailure(e) ? new ExitError(1, `detsim: [audit_run_failed] a replay run failed: ${e.message}`) : e)
    );
  }
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
    .option(
      '--parent <run-dir>',
      "a fork's run directory replays by forking its parent again: the parent (default: beside the fork, under the name its run.json records)",
    )
    .option('--transport <t>', TRANSPORT_HELP)
    .option('--environment-transport <t>', ENVIRONMENT_TRANSPORT_HELP)
    .option(
      '--predict',
      'before the first run, append the expected ReproHash and behaviour digest (a run directory: its receipt; a config: its golden) to <out>/ledger.jsonl; then judge the outcome',
    )
    .option('--golden-dir <dir>', 'with --predict: directory of golden values for a config (default: fixtures/golden)')
    .option('--json', 'print one canonical JSON object')
    .option('--verbose', "a Python model's failure carries its Python traceback")
    .action(
      action(async (source: string, opts: ReplayCommandOptions) => {
        const transport = readTransportFlag(opts.transport);
        const runs = readWhole(opts.runs, '--runs', 2);
        const steps = readStepsFlag(opts.steps);
        const dispatch = readDispatchFlag(opts.dispatch);
        const resumeAt = readWhole(opts.resumeAt, '--resume-at', 1);
        if (opts.goldenDir !== undefined && !opts.predict)
          throw new DetsimError('struct_invalid_field', '--golden-dir: only with --predict', '--golden-dir');
        const result = await runReplay(source, opts, {
          runs,
          steps,
          dispatch,
          resumeAt,
          transport,
          outDir: opts.out,
          parent: opts.parent,
          environmentTransport: readEnvironmentTransportFlag(opts.environmentTransport),
          runOptions: { verbose: opts.verbose === true },
          onRun: opts.json
            ? undefined
            : (i, run) => process.stderr.write(`run ${i + 1} done: ${run.reproHash} ${run.runDir}\n`),
          onPass: readingProgress('replay'),
        });
        const predicted = 'evaluated' in result ? result : null;
        const report = predicted ? predicted.report : (result as ReplayReport);
        if (opts.json) writeStdout(jsonOf(report, predicted));
        else for (const l of formatReplay(report, predicted ? formatPrediction(predicted) : [])) writeStdout(l);
        const code = exitCodeOf(report.checks);
        if (code !== 0) throw new ExitError(code, '');
      }),
    );
}
