// `detsim report <run-dir|sweep-dir> [--out FILE] [--attestation FILE|DIR]`: one self-contained HTML
// page of a run (charts of its trace, identities, checkpoints, recoveries, the DIFF=0 verdict against
// its receipt and a verify attestation's) or of a sweep (the outcome per parameter value across
// replicates). The target is decided first (write.ts: an existing file is refused unless it is the
// default report.html holding detsim's previous report), then the run is read once, then the page is
// written whole. A trace that fails its checks is refused naming the file, exit 1; bad input exit 2.
// Runs nothing. The work is in coordinator/report/; this file wires it to the command line.
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { DetsimError } from '../../core/formats/errors.js';
import { loadAttestation, matchAttestation } from '../report/attestation.js';
import { readRun } from '../report/read-run.js';
import { runPage } from '../report/run-page.js';
import { readSweep } from '../report/sweep.js';
import { sweepPage } from '../report/sweep-page.js';
import { reportTarget, writeReport } from '../report/write.js';
import { action, ExitError, formatError, unendedRunRefusal, writeStdout } from './common.js';

interface ReportOptions {
  out?: string;
  attestation?: string;
}

/** Build the page of a run or a sweep directory; lines for stdout and whether a verdict failed. */
function build(dir: string, opts: ReportOptions): { html: string; lines: string[]; failed: DetsimError | null } {
  const attestation = loadAttestation(opts.attestation);
  if (existsSync(join(dir, 'run.json'))) {
    const d = readRun(dir);
    const v = d.verdict;
    const { html } = runPage(d, matchAttestation(attestation, v.receiptReproHash));
    const line =
      v.status === 'none'
        ? `no receipt.json: no DIFF=0 verdict (${d.series.steps} steps read${existsSync(join(dir, 'summary.json')) ? '' : '; the run has not ended: still running, or killed'})`
        : `${v.status === 'diff0' ? 'DIFF=0' : 'DIFF≠0'} against receipt.json: ReproHash ${v.recomputedReproHash} (${d.series.steps} steps)`;
    const failed =
      v.status === 'differs'
        ? `${dir}/receipt.json records ReproHash ${v.receiptReproHash}, the run gives ${v.recomputedReproHash}`
        : null;
    // A broken ledger chain is said on the terminal too (the page shows it), and fails the command.
    const ledger = d.ledger.chain;
    const broken = ledger.ok
      ? null
      : new DetsimError(
          'audit_ledger_chain',
          `${join(dir, 'ledger.jsonl')} ${(ledger.problem ?? '').replace(/: \[[a-z_]+\] /, ': ')}`.trim(),
          'ledger.jsonl',
        );
    return {
      html,
      lines: [line],
      failed: failed === null ? broken : new DetsimError('audit_report_receipt_differs', failed, 'receipt.json'),
    };
  }
  const s = readSweep(dir, attestation);
  const differs = s.runs.filter((r) => r.verdict === 'differs').map((r) => r.runId);
  const diff0 = s.runs.filter((r) => r.verdict === 'diff0').length;
  return {
    html: sweepPage(s).html,
    lines: [
      `sweep: ${s.runs.length} runs${s.planned !== null && s.planned > s.runs.length ? ` of the ${s.planned} planned (${s.planned - s.runs.length} without a run directory)` : ''}, ${diff0} DIFF=0 against their receipts`,
    ],
    failed:
      differs.length > 0
        ? new DetsimError(
            'audit_report_receipt_differs',
            `runs whose receipt.json records another ReproHash: ${differs.join(', ')}`,
            'receipt.json',
          )
        : null,
  };
}

async function report(dir: string, opts: ReportOptions): Promise<void> {
  if (!existsSync(dir) || !statSync(dir).isDirectory())
    throw new DetsimError('struct_report_source', `${dir} is not a directory`, 'source');
  const target = reportTarget(dir, opts.out);
  let built: ReturnType<typeof build>;
  try {
    built = build(dir, opts);
  } catch (e) {
    // A file that failed verification (a tampered trace segment, a changed attestation): exit 1;
    // a trace a resume is writing (or was killed writing) is said to be that, exit 2.
    const unended = e instanceof DetsimError ? await unendedRunRefusal(e, [dir]) : undefined;
    if (unended) throw unended;
    if (e instanceof DetsimError && e.reason.startsWith('audit_')) throw new ExitError(1, formatError(e));
    throw e;
  }
  writeReport(target, built.html);
  for (const l of built.lines) writeStdout(l);
  writeStdout(`report ${target.path}${target.replace ? ' (replaced the previous report)' : ''}`);
  if (built.failed !== null) throw new ExitError(1, formatError(built.failed));
}

export function registerReport(program: Command): void {
  program
    .command('report')
    .description(
      'write one self-contained HTML page of a run directory (reward, cumulative reward, steps/s, checkpoint timeline, recoveries, identities, DIFF=0 against its receipt) or of a sweep directory (outcome per parameter value across replicates)',
    )
    .argument('<dir>', 'a run directory, or a sweep directory (run directories, with or without sweep.json)')
    .option(
      '--out <file>',
      "where to write (default <dir>/report.html); an existing file is refused, except detsim's own previous report at the default path, which is replaced",
    )
    .option(
      '--attestation <file|dir>',
      "a detsim verify attestation.jsonl (or its directory) to show beside the verdict (default: reports/attestation.jsonl when it replayed this run's ReproHash)",
    )
    .action(action((dir: string, opts: ReportOptions) => report(dir, opts)));
}
