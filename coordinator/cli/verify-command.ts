// `detsim verify [--config FILE…] [--out DIR]`: the single CI entry for DIFF=0 — replay,
// goldens, sensitivity, field table, honesty — writing attestation.md/.jsonl (with the digest of
// the conformance file it ran with). Argument handling and display only; the checks are
// coordinator/diff0/verify.ts. Exit 0 green, 1 red (or a file could not be written), 2 yellow.
import type { Command } from 'commander';
import { isRunFailure } from '../session/run-failure.js';
import { readFieldTableFile, verify } from '../diff0/verify.js';
import { describeConformance } from '../diff0/conformance.js';
import { action, ExitError, readStepsFlag, readWhole, writeStdout } from './common.js';
import { writeFailureExit } from './run-outcome.js';

interface VerifyCommandOptions {
  config?: string[];
  out?: string;
  runsDir?: string;
  goldenDir?: string;
  runs?: string;
  steps?: string;
  updateGoldens?: boolean;
  fieldTable?: string;
  goldenMarker?: boolean;
  predict?: boolean;
  conformance?: string;
}

/** What a researcher does about a warning verify gives every config of their own. */
function hintOf(reason: string): string {
  return reason === 'meta_golden_missing'
    ? ' (no golden for this config: the runs agreed with each other, which is DIFF=0 — a config of your own is checked so by detsim replay; --update-goldens records a golden, and verify then holds later runs to it)'
    : '';
}

export function registerVerify(program: Command): void {
  program
    .command('verify')
    .description(
      'the single DIFF=0 entry: replay, goldens, sensitivity, field table and honesty checks; writes attestation.md/.jsonl (exit 0 green, 1 red, 2 yellow)',
    )
    .option('--config <file...>', 'configurations to verify (default: every examples/*.yaml)')
    .option('--out <dir>', 'directory for attestation.md and attestation.jsonl', 'reports')
    .option('--runs-dir <dir>', 'parent directory of the replay run directories', 'runs/verify')
    .option('--golden-dir <dir>', 'directory of golden ReproHashes', 'fixtures/golden')
    .option('--runs <n>', 'fresh runs per configuration (≥ 2)', '2')
    .option('--steps <n>', 'steps for configurations without a golden value (default: the config)')
    .option('--update-goldens', 'write golden values for configurations whose runs agree (commit them with [golden])')
    .option('--field-table <file>', 'check against another classification table (JSON, as `detsim fields --json`)')
    .option('--no-golden-marker', 'skip the [golden] commit-marker guard')
    .option(
      '--predict',
      "before any run, append each configuration's golden ReproHash and behaviour digest to <out>/ledger.jsonl; the attestation judges prediction, outcome and order",
    )
    .option(
      '--conformance <file>',
      'the conformance file whose SHA-256 and counts the attestation records (default: reports/conformance.json when it exists)',
    )
    .action(
      action(async (opts: VerifyCommandOptions) => {
        const table = opts.fieldTable ? readFieldTableFile(opts.fieldTable) : undefined;
        let result;
        try {
          result = await verify({
            configs: opts.config,
            outDir: opts.out,
            runsDir: opts.runsDir,
            goldenDir: opts.goldenDir,
            runs: readWhole(opts.runs, '--runs', 2),
            steps: readStepsFlag(opts.steps),
            updateGoldens: opts.updateGoldens,
            table,
            goldenMarker: opts.goldenMarker,
            predict: opts.predict,
            conformance: opts.conformance,
            onProgress: (l) => process.stderr.write(`${l}\n`),
          });
        } catch (e) {
          throw (
            writeFailureExit(e, 'verify') ??
            (isRunFailure(e) ? new ExitError(1, `detsim: [audit_run_failed] a verify run failed: ${e.message}`) : e)
          );
        }
        const a = result.attestation;
        for (const c of a.checks)
          if (c.status !== 'pass')
            writeStdout(
              `${c.status.toUpperCase()} ${c.subject} ${c.check} [${c.reason}] ${JSON.stringify(c.detail)}${hintOf(c.reason)}`,
            );
        writeStdout(
          `grade ${a.grade}, verdict ${a.verdict}, ${a.checks.length} checks (${a.checks.filter((c) => c.status === 'pass').length} pass)`,
        );
        writeStdout(`verdict_hash ${a.verdict_hash}`);
        if (a.conformance) writeStdout(`conformance ${describeConformance(a.conformance)}`);
        writeStdout(`report ${result.files.md} ${result.files.jsonl}`);
        if (a.exitCode !== 0) throw new ExitError(a.exitCode, '');
      }),
    );
}
