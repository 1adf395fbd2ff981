// `detsim ledger verify <run-dir>`: check the run ledger's hash chain and head; exit 1 naming the
// first changed, removed or reordered line. Printing only; the checks are store/ledger.ts.
import type { Command } from 'commander';
import { join } from 'node:path';
import { LEDGER_FILE, verifyLedger } from '../store/ledger.js';
import { action, ExitError, writeStdout } from './common.js';

async function verify(runDir: string): Promise<void> {
  const result = await verifyLedger(runDir);
  const path = join(runDir, LEDGER_FILE);
  if (!result.ok) {
    const p = result.problem!;
    throw new ExitError(1, `detsim: [${p.reason}] ${path} line ${p.line}: ${p.message}`);
  }
  const notes: string[] = [];
  if (!result.hasHead) notes.push('no head file: removal of final lines cannot be detected');
  if (result.hasHead && result.beyondHead > 0)
    notes.push(`${result.beyondHead} line(s) after the head (appended just before a crash)`);
  if (result.tornBytes > 0) notes.push(`${result.tornBytes} byte(s) of a line torn by a crash at the end`);
  writeStdout(`${path}: ${result.lines} line(s), hash chain intact${notes.length ? ` (${notes.join('; ')})` : ''}`);
}

export function registerLedger(program: Command): void {
  const ledger = program.command('ledger').description("the run directory's hash-chained ledger.jsonl");
  ledger
    .command('verify')
    .description('check every line links to the one before; exit 1 naming a changed, removed or reordered line')
    .argument('<run-dir>', 'run directory holding ledger.jsonl')
    .action(action((runDir: string) => verify(runDir)));
}
