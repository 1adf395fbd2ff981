// `detsim doctor [--json]`: what each runtime will use and what is missing, with the fix (coordinator/launch/doctor.ts).
// Exit 0 when the core (Node, the TypeScript worker) is fine, 1 otherwise. Formatting only.
import type { Command } from 'commander';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { doctor, formatDoctor } from '../launch/doctor.js';
import { action, writeStdout } from './common.js';

export function registerDoctor(program: Command): void {
  program
    .command('doctor')
    .description(
      'show which Node, TypeScript worker, Python, Rust worker and tools runs will use, and how to fix what is missing',
    )
    .option('--json', 'print one canonical JSON array')
    .action(
      action((opts: { json?: boolean }) => {
        const items = doctor();
        writeStdout(opts.json ? canonicalize(items) : formatDoctor(items));
        if (items.some((i) => i.core && !i.ok)) process.exitCode = 1;
      }),
    );
}
