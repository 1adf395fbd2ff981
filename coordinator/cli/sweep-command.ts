// `detsim sweep <sweep-file>` and its subcommands: run a sweep locally (several runs at once, one
// progress for the whole sweep, one line per finished run; the same command again continues),
// `sweep task` (one run; what the local runner's children and each Slurm array task run),
// `sweep status|summary` (tables), `sweep submit` (one Slurm job array). Only argument handling
// and display: the sweep is coordinator/sweep/.
import type { Command } from 'commander';
import { DetsimError } from '../../core/formats/errors.js';
import { mkdirSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { checkWorkerBinaries } from '../launch/launcher.js';
import { checkWorkerTls } from '../launch/tls.js';
import { arrayOutputPattern, arrayScript } from '../sweep/array-script.js';
import {
  chooseSweepDir,
  DEFAULT_SWEEPS_DIR,
  requireSweepIndex,
  openSweepDir,
  readSweepIndex,
  runDirOf,
  sweepIndexOf,
  whyNotContinued,
} from '../sweep/sweep-dir.js';
import { planSweep, readSweepFile, type SweepPlanned } from '../sweep/sweep-file.js';
import { prepareSweep, taskReporter, type FinishedRun, type SweepProgress } from '../sweep/runner.js';
import { runStateOf } from '../sweep/run-state.js';
import { csvOf, statusRows, statusTable, summaryRows, summaryTable, tableOf } from '../sweep/status.js';
import { runSweepTask } from '../sweep/task.js';
import { submitBatchScript } from '../slurm/submit.js';
import { requireSlurmCommand } from '../slurm/srun.js';
import { action, ExitError, readWhole, writeStdout } from './common.js';
import { formatEta, stderrBar } from './progress.js';
import { INTERRUPTED_EXIT, RUN_FAILED_EXIT, runFailureExit } from './run-outcome.js';

/** This CLI's own entry file (dist/coordinator/cli/main.js beside this module), which children and jobs run. */
const cliEntry = (): string => fileURLToPath(new URL('./main.js', import.meta.url));

/** The sweep file read, planned and checked in full (every run's config, the workers' binaries and TLS). */
function plannedSweep(file: string): SweepPlanned {
  const planned = planSweep(readSweepFile(file));
  for (const run of planned.runs) {
    checkWorkerBinaries(run.plan);
    checkWorkerTls(run.plan);
  }
  return planned;
}

const seconds = (ms: number | null) => (ms === null ? '-' : `${(ms / 1000).toFixed(1)} s`);

/** The one line a finished (or skipped, failed, interrupted) run gets on stdout. */
function finishedLine(f: FinishedRun): string {
  const what = f.outcome === 'started' || f.outcome === 'restarted' ? 'done' : f.outcome;
  const head = `${what.padEnd(11)} ${f.run.id}  seed ${f.run.masterSeed}`;
  // An interrupted run continues with the sweep, not with its own `detsim resume`: that advice is left out.
  const why = (f.why ?? '').replace(/; resume with `detsim resume [^`]*` \(/, ' (');
  if (f.outcome === 'failed' || f.outcome === 'interrupted') return `${head}  ${why}`.trimEnd();
  const reward = f.rewardTotal === null ? '-' : String(Math.round(f.rewardTotal * 1e6) / 1e6);
  return `${head}  ${f.run.plan.steps} steps  reward ${reward}  repro ${f.reproHash ?? '-'}  ${seconds(f.wallTimeMs)}`;
}

/** The sweep's progress on stderr: a bar on a TTY, else a line at most every 5 s. */
function sweepProgressDisplay(): { update: (p: SweepProgress) => void; clear: () => void; stop: () => void } {
  const text = (p: SweepProgress) => ({
    runs: `${p.runsDone}/${p.runs}`,
    running: p.running,
    rate: Math.round(p.rate),
    eta_text: formatEta(p.rate > 0 ? (p.agentSteps - p.agentStepsDone) / p.rate : Infinity),
  });
  if (process.stderr.isTTY) {
    const bar = stderrBar('runs {runs} ({running} running) [{bar}] {rate} agent-steps/s ETA {eta_text}');
    return {
      update: (p) => {
        if (p.running > 0) bar.update(p.agentStepsDone, p.agentSteps, text(p));
      },
      clear: () => process.stderr.write('\r\x1b[K'),
      stop: bar.stop,
    };
  }
  let last = 0;
  return {
    update: (p) => {
      const now = Date.now();
      if (p.running === 0 || now - last < 5000) return;
      last = now;
      const t = text(p);
      process.stderr.write(`runs ${t.runs} (${t.running} running)  ${t.rate} agent-steps/s  ETA ${t.eta_text}\n`);
    },
    clear: () => undefined,
    stop: () => undefined,
  };
}

interface SweepRunOptions {
  out?: string;
  parallel?: string;
  json?: boolean;
}

async function sweepRun(file: string, opts: SweepRunOptions): Promise<void> {
  const parallel = readWhole(opts.parallel, '--parallel', 1) ?? availableParallelism();
  const planned = plannedSweep(file);
  const { dir, continued, previous } = openSweepDir(opts.out ?? DEFAULT_SWEEPS_DIR, planned);
  const index = readSweepIndex(dir)!;
  const shown = relative(process.cwd(), dir) || '.';
  const fresh = previous
    ? ` (a new sweep: ${whyNotContinued(previous, relative(process.cwd(), previous), planned)})`
    : '';
  const display = sweepProgressDisplay();
  const sweep = prepareSweep(dir, index, planned, {
    parallel,
    cli: cliEntry(),
    onProgress: display.update,
    onFinished: (f) => {
      display.clear();
      if (!opts.json) writeStdout(finishedLine(f));
    },
  });
  process.stderr.write(
    `sweep ${shown}: ${planned.runs.length} runs${continued ? ' (continued)' : fresh}, at most ${parallel} at once\n`,
  );
  const started = Date.now();
  const outcome = await sweep.run();
  display.stop();
  endSweep(shown, file, planned, outcome.finished, outcome.interrupted, Date.now() - started, opts.json === true);
}

/** The sweep's last line (or JSON object) and its exit: 0 all done, 1 a run failed, 130 interrupted. */
function endSweep(
  shown: string,
  file: string,
  planned: SweepPlanned,
  finished: FinishedRun[],
  interrupted: boolean,
  wallMs: number,
  json: boolean,
): void {
  const done = finished.filter((f) => f.outcome !== 'failed' && f.outcome !== 'interrupted').length;
  const failed = finished.filter((f) => f.outcome === 'failed').length;
  const total = planned.runs.length;
  if (json)
    writeStdout(
      canonicalize({
        sweepDir: shown,
        runs: total,
        done,
        failed,
        interrupted,
        wallTimeMs: wallMs,
        finished: finished.map((f) => ({
          run: f.run.id,
          outcome: f.outcome,
          masterSeed: f.run.masterSeed,
          reproHash: f.reproHash,
          rewardTotal: f.rewardTotal,
        })),
      }),
    );
  else
    writeStdout(
      `sweep ${shown}: ${done} of ${total} runs done in ${seconds(wallMs)}${failed ? `, ${failed} failed` : ''}`,
    );
  if (interrupted)
    throw new ExitError(
      INTERRUPTED_EXIT,
      `detsim: the sweep was interrupted with ${done} of ${total} runs done; run \`detsim sweep ${file}\` again to continue`,
    );
  if (failed)
    throw new ExitError(
      RUN_FAILED_EXIT,
      `detsim: ${failed} run(s) failed; see \`detsim sweep status ${shown}\` and each run's run.log`,
    );
}

/** `sweep task`: one run, with `detsim run`'s progress, or over IPC to a runner. */
async function sweepTask(dir: string, indexText: string, opts: { ipc?: boolean }): Promise<void> {
  const index = readWhole(indexText, 'index', 0)!;
  const ipc = opts.ipc === true && process.send !== undefined;
  const reporter = ipc ? taskReporter() : null;
  try {
    const o = await runSweepTask(dir, index, {
      handleSignals: true,
      ...(reporter ? { onProgress: reporter.onProgress, signal: reporter.signal } : {}),
      onEvent: (line) => process.stderr.write(`${line}\n`),
    });
    const r = o.result;
    if (reporter) {
      const summary = o.before.kind === 'done' ? o.before.summary : null;
      await reporter.send({
        t: 'done',
        action: o.action,
        reproHash: r?.reproHash ?? (o.before.kind === 'done' ? o.before.reproHash : null),
        steps: r?.steps ?? o.run.plan.steps,
        wallTimeMs: r?.metrics.wallTimeMs ?? null,
        rewards: r?.metrics.rewards ?? (summary?.rewards as never) ?? null,
      });
    } else
      writeStdout(
        `${o.action.padEnd(11)} ${o.runDir}  repro ${r?.reproHash ?? (o.before.kind === 'done' ? o.before.reproHash : '-')}`,
      );
  } catch (e) {
    throw runFailureExit(e, 'run');
  } finally {
    // The IPC channel would keep this process alive: the runner has what it needs.
    if (ipc && process.connected) process.disconnect();
  }
}

interface TableOptions {
  json?: boolean;
  csv?: boolean;
}

function sweepTable(kind: 'status' | 'summary', dir: string, opts: TableOptions): void {
  const index = requireSweepIndex(dir);
  const rows = statusRows(dir, index);
  const out = kind === 'status' ? rows : summaryRows(rows);
  if (opts.json) return writeStdout(canonicalize(out));
  const { header, cells } = kind === 'status' ? statusTable(rows) : summaryTable(summaryRows(rows));
  process.stdout.write(opts.csv ? csvOf(header, cells) : tableOf(header, cells));
}

interface SubmitOptions {
  out?: string;
  parallel?: string;
  dryRun?: boolean;
}

async function sweepSubmit(file: string, sbatchArgs: string[], opts: SubmitOptions): Promise<void> {
  const parallel = readWhole(opts.parallel, '--parallel', 1);
  const planned = plannedSweep(file);
  const out = opts.out ?? DEFAULT_SWEEPS_DIR;
  const chosen = chooseSweepDir(out, planned);
  const index = chosen.continued ? readSweepIndex(chosen.dir)! : sweepIndexOf(planned);
  const indexes = planned.runs
    .filter((r) => runStateOf(runDirOf(chosen.dir, r), index.runs[r.index]!).kind !== 'done')
    .map((r) => r.index);
  if (indexes.length === 0)
    return writeStdout(`sweep ${chosen.dir}: all ${planned.runs.length} runs are done; nothing to submit`);
  const script = (dir: string) =>
    arrayScript({
      name: planned.spec.name,
      sweepDir: dir,
      indexes,
      parallel,
      workers: planned.runs[0]!.plan.workers.length,
      workDir: process.cwd(),
      node: process.execPath,
      cli: cliEntry(),
    });
  if (opts.dryRun) return void process.stdout.write(script(chosen.dir));
  const sbatch = requireSlurmCommand('sbatch', 'detsim sweep submit');
  const { dir, continued } = openSweepDir(out, planned);
  mkdirSync(`${dir}/slurm`, { recursive: true });
  try {
    const { jobId, scriptPath } = submitBatchScript(sbatch, script(dir), `${dir}/slurm/sweep.sbatch`, sbatchArgs);
    writeStdout(`submitted job    ${jobId} (${indexes.length} array tasks)`);
    writeStdout(`sweep directory  ${dir}`);
    writeStdout(`batch script     ${scriptPath}`);
    writeStdout(`job output       ${arrayOutputPattern(dir).replace('%A', jobId)}`);
  } catch (e) {
    // A refused job leaves nothing this command made: a new sweep directory goes again.
    if (!continued) rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}

export function registerSweep(program: Command): void {
  const sweep = program
    .command('sweep')
    .description('run a parameter sweep with replicates (sweep file: base, grid, replicates), locally or on Slurm');
  sweep
    .command('run', { isDefault: true })
    .description(
      'run every run of a sweep file not yet done; the default, `detsim sweep <file>` (the same command again continues an interrupted sweep)',
    )
    .argument('<sweep-file>', 'sweep file (.yaml or .json): base, grid, replicates, name?, checkpointEvery?, keep?')
    .option('--out <dir>', `parent of the sweep directory <name>-<n> (default: ${DEFAULT_SWEEPS_DIR})`)
    .option(
      '--parallel <n>',
      `runs at once, each its own coordinator process (default: the cores, ${availableParallelism()} here)`,
    )
    .option('--json', 'print one canonical JSON object at the end instead of one line per run')
    .allowExcessArguments(true)
    .action(
      action((file: string, opts: SweepRunOptions, cmd: Command) => {
        // `detsim sweep stauts <dir>`: a mistyped command, not a sweep file with one argument too many.
        if (cmd.args.length > 1)
          throw new DetsimError(
            'struct_usage',
            `unknown sweep command ${JSON.stringify(file)}: the commands are run, status, summary, submit and task (detsim sweep <sweep-file> runs one)`,
            '<sweep-file>',
          );
        return sweepRun(file, opts);
      }),
    );
  sweep
    .command('task')
    .description('run, resume or skip one run of a sweep directory (what each Slurm array task runs)')
    .argument('<sweep-dir>', 'a directory detsim sweep made (holding sweep.json)')
    .argument('<index>', 'the run index in sweep.json (0-based)')
    .option('--ipc', 'report progress to the parent process over IPC (the local runner)')
    .action(action(sweepTask));
  for (const kind of ['status', 'summary'] as const)
    sweep
      .command(kind)
      .description(
        kind === 'status'
          ? 'one row per run: overrides, replicate, master seed, status, steps, reward total, ReproHash'
          : 'one row per grid point: runs done, reward total min/mean/max over replicates, distinct ReproHashes',
      )
      .argument('<sweep-dir>', 'a directory detsim sweep made (holding sweep.json)')
      .option('--json', 'one canonical JSON array')
      .option('--csv', 'CSV with a header row')
      .action(action((dir: string, opts: TableOptions) => sweepTable(kind, dir, opts)));
  sweep
    .command('submit')
    .description('submit the runs of a sweep not yet done as one Slurm job array (submitting again continues)')
    .argument('<sweep-file>', 'sweep file (.yaml or .json)')
    .argument('[sbatch-options...]', 'passed to sbatch before the script (e.g. --time=10); after -- to be explicit')
    .option(
      '--out <dir>',
      `parent of the sweep directory (default: ${DEFAULT_SWEEPS_DIR}); on a filesystem every node shares`,
    )
    .option('--parallel <n>', 'at most N array tasks at once (%N)')
    .option('--dry-run', 'print the batch script and submit nothing (writes nothing)')
    .allowUnknownOption()
    .action(action(sweepSubmit));
}
