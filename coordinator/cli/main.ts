#!/usr/bin/env node
// The `detsim` command line: wires each command module into one program. Commands live in
// their own files under cli/; this file only assembles them and reports usage errors.
import { Command, CommanderError } from 'commander';
import { registerSeed } from './seed-command.js';
import { registerEnvelope } from './envelope-command.js';
import { registerFields } from './fields-command.js';
import { registerReasons } from './reasons-command.js';
import { registerReplay } from './replay-command.js';
import { registerVerify } from './verify-command.js';
import { registerRun } from './run-command.js';
import { registerResume } from './resume-command.js';
import { registerFork } from './fork-command.js';
import { registerStore } from './store-command.js';
import { registerLedger } from './ledger-command.js';
import { registerDiff } from './diff-command.js';
import { registerBisect } from './bisect-command.js';
import { registerEvidence } from './evidence-command.js';
import { registerWorker } from './worker-command.js';
import { registerCerts } from './certs-command.js';
import { registerSlurm } from './slurm-command.js';
import { registerDoctor } from './doctor-command.js';
import { registerTrace } from './trace-command.js';
import { registerReport } from './report-command.js';
import { registerSweep } from './sweep-command.js';

const program = new Command();
program
  .name('detsim')
  .description(
    'Deterministic multi-agent simulation coordinator: seeded lockstep runs, FLYSESS1 checkpoints, DIFF=0 replay.',
  )
  .version('0.1.0')
  .showHelpAfterError(false)
  .exitOverride();

registerSeed(program);
registerEnvelope(program);
registerFields(program);
registerReasons(program);
registerReplay(program);
registerVerify(program);
registerRun(program);
registerResume(program);
registerFork(program);
registerStore(program);
registerLedger(program);
registerDiff(program);
registerBisect(program);
registerEvidence(program);
registerWorker(program);
registerCerts(program);
registerSlurm(program);
registerDoctor(program);
registerTrace(program);
registerReport(program);
registerSweep(program);

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
