// `detsim diff <run-a> <run-b> [--json]`: are two existing run directories the same run? Compares
// their ReproHashes (physical fields stripped, later epochs of a resumed run rebased) and, when
// they differ, names the first diverging step, field, agent and both values. Runs nothing.
import type { Command } from 'commander';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { describeDivergence, diagnose } from '../diff0/diagnosis.js';
import { rebasedReceipt } from '../receipt/rebase.js';
import { buildReceipt, readRunFiles, receiptWarnings, sealReceipt } from '../receipt/receipt.js';
import { action, ExitError, writeStdout } from './common.js';

function receiptOf(runDir: string) {
  const receipt = buildReceipt(readRunFiles(runDir));
  const sealed = sealReceipt(receipt);
  return { receipt, reproHash: sealed.reproHash, unknownFields: sealed.unknownFields, steps: receipt.steps.length };
}

function diff(a: string, b: string, opts: { json?: boolean }): void {
  const left = receiptOf(a);
  const right = receiptOf(b);
  for (const w of [
    ...receiptWarnings({ unknownFields: left.unknownFields, honesty: [] }),
    ...receiptWarnings({ unknownFields: right.unknownFields, honesty: [] }),
  ])
    process.stderr.write(`${w}\n`);
  const same = left.reproHash === right.reproHash;
  const divergence = same ? null : diagnose(rebasedReceipt(left.receipt), rebasedReceipt(right.receipt));
  if (opts.json) {
    writeStdout(
      canonicalize({
        same,
        left: { runDir: a, reproHash: left.reproHash, steps: left.steps },
        right: { runDir: b, reproHash: right.reproHash, steps: right.steps },
        divergence,
      }),
    );
  } else if (same) {
    writeStdout(`DIFF=0: the same run (ReproHash ${left.reproHash}, ${left.steps} steps)`);
  } else {
    writeStdout(`DIFF≠0: ReproHash ${left.reproHash} (${a}) vs ${right.reproHash} (${b})`);
    writeStdout(
      divergence
        ? describeDivergence(divergence, [a, b])
        : 'no field-level divergence found in the hashed view (unclassified fields differ?)',
    );
  }
  if (!same) throw new ExitError(1, '');
}

export function registerDiff(program: Command): void {
  program
    .command('diff')
    .description(
      'compare two run directories: exit 0 when they are the same run (DIFF=0), else 1 naming the first divergence',
    )
    .argument('<run-a>', 'run directory')
    .argument('<run-b>', 'run directory')
    .option('--json', 'print one canonical JSON object')
    .action(action((a: string, b: string, opts: { json?: boolean }) => diff(a, b, opts)));
}
