#!/usr/bin/env node
// The `detsim` command line: wires each command module into one program. Commands live in
// their own files under cli/; this file only assembles them and reports usage errors.
// The build replaces the first line (scripts/postbuild.mjs) so the compiled command starts Node
// with V8's background pool sized to the machine (NODE_POOL_FLAG, launch/node-flag.ts): `npx
// detsim` and an installed `detsim` get it; `node …/main.js` does not.
import { Command, CommanderError } from 'commander';

const program = new Command();
program
  .name('detsim')
  .description(
    'Deterministic multi-agent simulation coordinator: seeded lockstep runs, FLYSESS1 checkpoints, DIFF=0 replay.',
  )
  .version('0.1.0')
  .showHelpAfterError(false)
  // A usage error is one line like every refusal: `detsim: [struct_usage] unknown option '--bogus'`.
  .configureOutput({ outputError: (text, write) => write(usageLine(text)) })
  .exitOverride();

/** commander's "error: …" text (and its "(Did you mean …?)" line) as one refusal line. */
function usageLine(text: string): string {
  return `detsim: [struct_usage] ${text
    .replace(/^error: /, '')
    .replace(/\s*\n\s*/g, ' ')
    .trim()}\n`;
}

/**
 * Every command, by name, with the module that registers it. A command line that names one loads
 * that command's module alone (start-up is part of every run: the others' imports cost a run ~0.1 s);
 * `--version` alone loads none; help and anything else load them all, in this order (the README's:
 * what a researcher types first).
 */
const COMMANDS: readonly (readonly [string, () => Promise<(program: Command) => void>])[] = [
  ['run', async () => (await import('./run-command.js')).registerRun],
  ['resume', async () => (await import('./resume-command.js')).registerResume],
  ['fork', async () => (await import('./fork-command.js')).registerFork],
  ['sweep', async () => (await import('./sweep-command.js')).registerSweep],
  ['diff', async () => (await import('./diff-command.js')).registerDiff],
  ['trace', async () => (await import('./trace-command.js')).registerTrace],
  ['bisect', async () => (await import('./bisect-command.js')).registerBisect],
  ['report', async () => (await import('./report-command.js')).registerReport],
  ['replay', async () => (await import('./replay-command.js')).registerReplay],
  ['verify', async () => (await import('./verify-command.js')).registerVerify],
  ['doctor', async () => (await import('./doctor-command.js')).registerDoctor],
  ['store', async () => (await import('./store-command.js')).registerStore],
  ['ledger', async () => (await import('./ledger-command.js')).registerLedger],
  ['evidence', async () => (await import('./evidence-command.js')).registerEvidence],
  ['envelope', async () => (await import('./envelope-command.js')).registerEnvelope],
  ['seed', async () => (await import('./seed-command.js')).registerSeed],
  ['worker', async () => (await import('./worker-command.js')).registerWorker],
  ['certs', async () => (await import('./certs-command.js')).registerCerts],
  ['slurm', async () => (await import('./slurm-command.js')).registerSlurm],
  ['fields', async () => (await import('./fields-command.js')).registerFields],
  ['reasons', async () => (await import('./reasons-command.js')).registerReasons],
];
const named = COMMANDS.find(([name]) => name === process.argv[2]);
const versionOnly = process.argv.length === 3 && ['-V', '--version'].includes(process.argv[2]!);
const loaded = named ? [named] : versionOnly ? [] : COMMANDS;
for (const register of await Promise.all(loaded.map(([, load]) => load()))) register(program);

try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (e instanceof CommanderError) {
    // commander already printed its message; usage errors exit 2, help/version exit 0.
    process.exitCode = e.exitCode === 0 ? 0 : 2;
  } else {
    throw e;
  }
}
