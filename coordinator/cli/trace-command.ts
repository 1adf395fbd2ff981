// `detsim trace export <run-dir|dir-of-runs> [--format csv|parquet] --out FILE`: a run's trace (or
// every run of a directory of runs, e.g. a sweep) as one table of a row per step and agent, for
// pandas/polars (docs/guide.md "Exporting a trace as a table"). Progress on stderr every few
// seconds, one summary line on stdout. Exit 0 written; 1 the file could not be written; 2 bad input
// (a damaged trace or observations sidecar, an --out that exists); 130 interrupted; nothing is left behind but on exit 0.
// The work is coordinator/export/; this file only reads the flags and prints.
import { extname } from 'node:path';
import type { Command } from 'commander';
import { DetsimError } from '../../core/formats/errors.js';
import { EXPORT_FORMATS, type ExportFormat } from '../export/table-writers.js';
import { exportTrace, ExportInterrupted, type ExportProgress, unfinishedRuns } from '../export/trace-export.js';
import { isWriteFailure } from '../write-failure.js';
import { action, ExitError, formatError, readChoiceFlag, writeStdout } from './common.js';
import { INTERRUPTED_EXIT, RUN_FAILED_EXIT } from './run-outcome.js';

interface ExportFlags {
  format?: string;
  out?: string;
}

/** --format, else the --out file's extension (.csv, .parquet). */
function formatOf(flags: ExportFlags, out: string): ExportFormat {
  const given = readChoiceFlag(flags.format, EXPORT_FORMATS, '--format');
  if (given !== undefined) return given;
  const ext = extname(out).slice(1).toLowerCase();
  if ((EXPORT_FORMATS as readonly string[]).includes(ext)) return ext as ExportFormat;
  throw new DetsimError(
    'struct_missing_field',
    `--format: not given and ${JSON.stringify(out)} ends in neither .csv nor .parquet`,
    '--format',
  );
}

function progressLine(p: ExportProgress): string {
  const of = p.runs > 1 ? ` (run ${p.runIndex} of ${p.runs})` : '';
  const rows = p.phase === 'writing' ? `, ${p.rows} rows` : '';
  return `trace export: ${p.phase} ${p.run}${of}: step ${p.step}/${p.steps}${rows}`;
}

/** SIGINT/SIGTERM stop the export between steps for the duration of `body`. */
async function withInterrupt<T>(body: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ctl = new AbortController();
  const onSignal = () => ctl.abort();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await body(ctl.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

async function exportCommand(source: string, flags: ExportFlags): Promise<void> {
  if (flags.out === undefined)
    throw new DetsimError('struct_missing_field', '--out: required (the CSV or Parquet file to write)', '--out');
  const out = flags.out;
  const format = formatOf(flags, out);
  try {
    const r = await withInterrupt((signal) =>
      exportTrace(source, {
        format,
        out,
        signal,
        progress: (p) => process.stderr.write(`${progressLine(p)}\n`),
      }),
    );
    const runs = r.runs.length === 1 ? `run ${r.runs[0]!.id}` : `${r.runs.length} runs`;
    writeStdout(
      `${out}: ${r.rows} rows (${r.steps} steps of ${runs}), ${format}, ${r.columns.length} columns: ${r.columns.map((c) => `${c.name} ${c.type}`).join(', ')}`,
    );
    const partial = unfinishedRuns(r.runs);
    if (partial.length > 0)
      process.stderr.write(
        `note: ${partial.length} of ${r.runs.length} run(s) did not complete, their rows stop where they did: ${partial.map((p) => `${p.id} (${p.why})`).join('; ')}\n`,
      );
  } catch (e) {
    if (e instanceof ExportInterrupted)
      throw new ExitError(INTERRUPTED_EXIT, `detsim: trace export interrupted; ${out} not written`);
    if (isWriteFailure(e)) throw new ExitError(RUN_FAILED_EXIT, formatError(e));
    throw e;
  }
}

export function registerTrace(program: Command): void {
  const trace = program.command('trace').description("a run's trace as data");
  trace
    .command('export')
    .description(
      "write the trace of a run directory (or of every run directory in a directory) as one table, a row per step and agent: run, step, epoch, agent, reward, action.<field>, and obs.<path> (the observation's scalars) for a run made with --trace-observations, each step's observations checked against the trace's digest; abandoned segments of a resumed run never count; a damaged trace or sidecar or an existing --out is refused, nothing written",
    )
    .argument('<source>', 'a run directory, or a directory whose children are run directories (a sweep)')
    .option('--format <f>', `${EXPORT_FORMATS.join(' | ')} (default: from the --out extension)`)
    .option('--out <file>', 'the file to write (must not exist)')
    .action(action((source: string, flags: ExportFlags) => exportCommand(source, flags)));
}
