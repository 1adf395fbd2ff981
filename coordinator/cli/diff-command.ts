// `detsim diff <run-a> <run-b> [--json]`: are two existing run directories the same run? Compares
// their ReproHashes (physical fields stripped, later epochs of a resumed run rebased) and, when
// they differ, names the first diverging step, field, agent and both values. When the two runs are
// of one config (the same composition in run.json), it also shows where each was made: the platform
// fingerprints of their receipts, side by side where they differ; when one is a fork of the other
// (`detsim fork`, its run.json `fork`), it says at which checkpoint, and for a fork that changed
// params the first divergence named is the first step that differs (at or after the boundary),
// the composition only after the steps. Runs nothing.
import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { describeDivergence, diagnoseViews } from '../diff0/diagnosis.js';
import { compareFingerprints, describeFingerprints, type FingerprintComparison } from '../receipt/platform.js';
import { RECEIPT_FILE, readReceipt, receiptDisagreement, receiptWarnings } from '../receipt/receipt.js';
import { hashView, runReceiptView } from '../receipt/receipt-view.js';
import { reproHash } from '../receipt/reprohash.js';
import { readRunJson, type ForkLineageJson } from '../session/run-json.js';
import { isParamOverride } from '../checkpoint/fork-rebind.js';
import { formatOverride, type Override } from '../overrides.js';
import { action, ExitError, writeStdout } from './common.js';
import { readingProgress } from './progress.js';

/** A run directory's side of the comparison: its ReproHash recomputed from the trace in one pass (flat memory). */
function receiptOf(runDir: string) {
  const view = runReceiptView(runDir, readingProgress('diff'));
  // A run.json that is no run record (a field removed, edited) is refused naming it, as resume and replay do.
  try {
    readRunJson(view.head.run);
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `${join(runDir, 'run.json')}: ${e.message}`, e.field);
    throw e;
  }
  const sealed = hashView(view);
  const disagrees = receiptDisagreement(runDir, sealed.reproHash);
  if (disagrees) throw new DetsimError('audit_report_receipt_differs', disagrees.message, RECEIPT_FILE);
  const file = join(runDir, RECEIPT_FILE);
  const platformFingerprint = existsSync(file) ? (readReceipt(file).platformFingerprint ?? null) : null;
  // The composition run.json records, physical fields stripped: the same text means one config.
  const config = reproHash({ run: view.head.run }).canonical;
  return {
    view,
    run: view.head.run,
    reproHash: sealed.reproHash,
    unknownFields: sealed.unknownFields,
    steps: sealed.steps,
    platformFingerprint,
    config,
  };
}

type Side = ReturnType<typeof receiptOf>;

/** When one run is a fork of the other (its run.json `fork` names the other's directory): where it forked, and its lineage. */
function forkOf(left: Side, right: Side, dirs: [string, string]): { text: string; lineage: ForkLineageJson } | null {
  const lineage = (s: Side) => (s.run as { fork?: ForkLineageJson } | null)?.fork;
  for (const [child, childDir, parentDir] of [
    [left, dirs[0], dirs[1]],
    [right, dirs[1], dirs[0]],
  ] as const) {
    const f = lineage(child);
    if (f && f.parent === basename(resolve(parentDir))) {
      const params = f.overrides.filter((o) => isParamOverride(o.path));
      const set = params.length
        ? `; its params differ by ${params.map((o) => formatOverride(o as Override)).join(' ')}`
        : '';
      return {
        text: `fork: ${childDir} is a fork of ${parentDir} at checkpoint ${f.checkpoint.id} (boundary ${f.checkpoint.boundary}; steps from ${f.checkpoint.boundary} on are its own${set})`,
        lineage: f,
      };
    }
  }
  return null;
}

/** A fork that changed params differs from its parent in composition by them: name the first step that differs instead. */
const stepsFirst = (fork: { lineage: ForkLineageJson } | null): boolean =>
  fork !== null && fork.lineage.overrides.some((o) => isParamOverride(o.path));

/** The two fingerprints compared, when the runs are of one config (else null: nothing to show). */
function platformOf(left: Side, right: Side, dirs: [string, string]): FingerprintComparison | null {
  if (left.config !== right.config) return null;
  return compareFingerprints(left.platformFingerprint, right.platformFingerprint, dirs);
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
  const platform = platformOf(left, right, [a, b]);
  const forked = forkOf(left, right, [a, b]);
  const fork = forked?.text ?? null;
  const divergence = same ? null : diagnoseViews(left.view, right.view, { stepsFirst: stepsFirst(forked) });
  if (opts.json) {
    writeStdout(
      canonicalize({
        same,
        left: {
          runDir: a,
          reproHash: left.reproHash,
          steps: left.steps,
          platformFingerprint: left.platformFingerprint,
        },
        right: {
          runDir: b,
          reproHash: right.reproHash,
          steps: right.steps,
          platformFingerprint: right.platformFingerprint,
        },
        divergence,
        platform,
        ...(fork ? { fork } : {}),
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
  if (!opts.json && fork) writeStdout(fork);
  if (!opts.json && platform) writeStdout(describeFingerprints(platform, left.platformFingerprint, [a, b]).join('\n'));
  if (!same) throw new ExitError(1, '');
}

export function registerDiff(program: Command): void {
  program
    .command('diff')
    .description(
      'compare two run directories: exit 0 when they are the same run (DIFF=0), else 1 naming the first divergence; runs of one config also show their platform fingerprints',
    )
    .argument('<run-a>', 'run directory')
    .argument('<run-b>', 'run directory')
    .option('--json', 'print one canonical JSON object')
    .action(action((a: string, b: string, opts: { json?: boolean }) => diff(a, b, opts)));
}
