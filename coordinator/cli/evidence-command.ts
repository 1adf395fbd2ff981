// `detsim evidence export|verify`: Portable Evidence Bundles (docs/evidence.md). Flags, printing and
// exit codes only; the bundle is coordinator/evidence/. verify exits 0 verified, 1 naming the first
// failing check, 2 usage (no such bundle directory, bad flag).
import type { Command } from 'commander';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { exportBundle, type ExportOptions } from '../evidence/export.js';
import { verifyBundle } from '../evidence/verify.js';
import { action, ExitError, formatError, unendedRunRefusal, writeStdout } from './common.js';

const INCLUDE_CHOICES = ['trace', 'checkpoints', 'none'];

function readInclude(text: string | undefined): ExportOptions['include'] {
  if (text === undefined) return undefined;
  const parts = text.split(',').filter((p) => p !== '');
  for (const p of parts)
    if (!INCLUDE_CHOICES.includes(p))
      throw new ExitError(
        2,
        `detsim: [struct_invalid_field] --include: ${JSON.stringify(p)} is not one of ${INCLUDE_CHOICES.join(', ')}`,
      );
  return { trace: parts.includes('trace'), checkpoints: parts.includes('checkpoints') };
}

async function runExport(
  source: string,
  dest: string,
  opts: { include?: string; sameAs?: string; roCrate?: boolean; json?: boolean },
): Promise<void> {
  if (!existsSync(source) || !statSync(source).isDirectory())
    throw new ExitError(2, `detsim: [struct_invalid_field] ${source} is not an existing directory`);
  const include = readInclude(opts.include);
  let r;
  try {
    r = exportBundle(source, dest, { include, sameAs: opts.sameAs, roCrate: opts.roCrate });
  } catch (e) {
    const unended = e instanceof DetsimError ? await unendedRunRefusal(e, [source]) : undefined;
    if (unended) throw new ExitError(2, formatError(unended));
    // The README's rule: 1 for a file that failed verification (or a bundle that could not be
    // written), 2 for input (a destination that exists, a malformed run file, a bad flag).
    if (e instanceof DetsimError)
      throw new ExitError(e.reason.startsWith('audit_') || e.reason === 'perm_write_failed' ? 1 : 2, formatError(e));
    throw e;
  }
  if (opts.json) {
    writeStdout(
      canonicalize({
        bundleDir: r.bundleDir,
        bundleId: r.bundleId,
        files: r.files,
        referenced: r.referenced.map((f) => f.rel),
        claims: r.claims,
      }),
    );
    return;
  }
  writeStdout(`bundle ${r.bundleDir} (${r.bundleId}): ${r.files} files, ${r.claims.length} claims`);
  for (const c of r.claims) writeStdout(`  ${c.id}: ${c.statement}`);
  if (r.referenced.length > 0)
    writeStdout(
      `  ${r.referenced.length} file(s) referenced by SHA-256, not copied (--include trace,checkpoints copies them)`,
    );
  writeStdout(`check it with: detsim evidence verify ${r.bundleDir}`);
}

function runVerify(bundle: string, opts: { run: string[]; json?: boolean }): void {
  if (!existsSync(bundle) || !statSync(bundle).isDirectory())
    throw new ExitError(2, `detsim: [struct_invalid_field] ${bundle} is not an existing bundle directory`);
  // A run directory (or a verify output) named by mistake: input, with the command that makes a bundle of it.
  if (!existsSync(join(bundle, 'manifest.json')) && existsSync(join(bundle, 'receipt.json')))
    throw new ExitError(
      2,
      `detsim: [struct_invalid_field] ${bundle} is a run directory, not a bundle: make one with detsim evidence export ${bundle} <bundle>`,
    );
  for (const r of opts.run)
    if (!existsSync(r) || !statSync(r).isDirectory())
      throw new ExitError(2, `detsim: [struct_invalid_field] --run ${r} is not an existing directory`);
  let out;
  try {
    out = verifyBundle(bundle, opts.run);
  } catch (e) {
    if (e instanceof DetsimError) throw new ExitError(1, `${formatError(e)}\ndetsim evidence verify: NOT verified`);
    throw e;
  }
  if (opts.json) {
    writeStdout(canonicalize({ verified: true, ...out }));
    return;
  }
  writeStdout(`bundle ${bundle} (${out.bundleId}): schemas, ${out.files} file hashes and the content hash check`);
  for (const c of out.claims)
    writeStdout(`  ${c.id} ${c.how === 'rechecked' ? 'recomputed' : 'status and evidence checked'}: ${c.statement}`);
  if (out.notPresent.length > 0)
    writeStdout(
      opts.run.length === 0
        ? `  ${out.notPresent.length} file(s) referenced, not present: bound by digest; no claim above needed their bytes`
        : `  ${out.notPresent.length} file(s) referenced, not present here nor in --run: bound by digest, not checked (${out.notPresent.join(', ')})`,
    );
  writeStdout('detsim evidence verify: verified');
}

export function registerEvidence(program: Command): void {
  const evidence = program
    .command('evidence')
    .description('Portable Evidence Bundles (PEBv1): export a run, verify a bundle elsewhere');
  evidence
    .command('export')
    .description(
      'write a Portable Evidence Bundle v1 of a run directory (or of a verify --out directory) into a new directory',
    )
    .argument(
      '<run-dir|verify-out-dir>',
      'a run directory (receipt.json) or the --out directory of detsim verify (attestation.jsonl)',
    )
    .argument('<bundle-dir>', 'where to write the bundle: must not exist or be empty (written whole or not at all)')
    .option(
      '--include <what>',
      'copy besides the small files: trace, checkpoints, both (comma-separated) or none (default: the trace when ≤ 64 MiB)',
    )
    .option(
      '--ro-crate',
      'also write ro-crate-metadata.json: the run as a Workflow Run RO-Crate (Process Run Crate 0.5) for Zenodo or WorkflowHub',
    )
    .option(
      '--same-as <run-dir>',
      'another run directory of the same run (e.g. the uninterrupted one): bundle it and claim DIFF=0',
    )
    .option('--json', 'print one canonical JSON object')
    .action(action(runExport));
  evidence
    .command('verify')
    .description(
      'check a bundle: schemas, file hashes, content hash, references, and every claim recomputed (exit 0 verified, 1 not, 2 usage)',
    )
    .argument('<bundle-dir>', 'the bundle directory')
    .option(
      '--run <run-dir>',
      'a run directory supplying files the bundle references by digest only (repeatable)',
      (v: string, acc: string[]) => [...acc, v],
      [] as string[],
    )
    .option('--json', 'print one canonical JSON object')
    .action(action(runVerify));
}
