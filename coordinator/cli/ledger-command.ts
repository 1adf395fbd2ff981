// `detsim ledger verify <dir>`: check a ledger's hash chain and head; then, when it holds the
// predictions of `verify --predict` or `replay --predict`, that each evidence entry follows the
// prediction it names and agrees with it; then, when an attestation.jsonl lies beside it, that the
// entries and head it records are the ledger's and its verdict_hash recomputes. Exit 1 naming the
// first changed, removed or reordered line (and its entry) and the check. Printing only; the checks
// are store/ledger.ts and diff0/prediction-ledger.ts.
import type { Command } from 'commander';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LEDGER_FILE, LEDGER_HEAD_FILE, ledgerEntries, verifyLedger, type LedgerProblem } from '../store/ledger.js';
import { isDetsimError } from '../../core/formats/errors.js';
import {
  checkAttestationBinding,
  checkPredictionEntries,
  describeEntry,
  type PredictionSummary,
} from '../diff0/prediction-ledger.js';
import { action, ExitError, writeStdout } from './common.js';
import { requireExistingDirectory } from '../../core/formats/existing-dir.js';

const ATTESTATION_FILE = 'attestation.jsonl';

/** The bytes of line `n` (1-based) of a ledger, or '' past its end. */
function lineBytes(ledger: Buffer, n: number): Buffer {
  let start = 0;
  for (let i = 1; i < n; i++) {
    const nl = ledger.indexOf(10, start);
    if (nl === -1) return Buffer.alloc(0);
    start = nl + 1;
  }
  const end = ledger.indexOf(10, start);
  return ledger.subarray(start, end === -1 ? ledger.length : end);
}

/** One line naming the file, the line and (for a prediction entry) what it is, then the check's message. */
function refusal(dir: string, ledger: Buffer, p: LedgerProblem): ExitError {
  if (p.line === 0) return new ExitError(1, `detsim: [${p.reason}] ${join(dir, ATTESTATION_FILE)}: ${p.message}`);
  const what = describeEntry(lineBytes(ledger, p.line));
  return new ExitError(
    1,
    `detsim: [${p.reason}] ${join(dir, LEDGER_FILE)} line ${p.line}${what ? ` (${what})` : ''}: ${p.message}`,
  );
}

function predictionNote(s: PredictionSummary): string | null {
  if (s.predictions === 0) return null;
  const parts = [`${s.confirmed} confirmed`, `${s.refuted} refuted`, `${s.unpredicted} without a prediction`];
  const open = s.open > 0 ? `; ${s.open} still open (no evaluation: its verify or replay stopped)` : '';
  return `${s.predictions} prediction(s), each before its evidence (${parts.join(', ')})${open}`;
}

/**
 * The ledger's verification, a damaged head (not JSON, not a head) a failed verification too:
 * exit 1 naming the file, like a changed line, not 2 (the input exists and was read).
 */
async function verifyOrRefuse(dir: string): Promise<Awaited<ReturnType<typeof verifyLedger>>> {
  try {
    return await verifyLedger(dir);
  } catch (e) {
    if (isDetsimError(e) && e.reason === 'struct_ledger_line' && e.field === LEDGER_HEAD_FILE)
      throw new ExitError(
        1,
        `detsim: [${e.reason}] ${join(dir, LEDGER_HEAD_FILE)}${e.message.slice(LEDGER_HEAD_FILE.length)}`,
      );
    throw e;
  }
}

async function verify(dir: string): Promise<void> {
  requireExistingDirectory(dir, dir, '<dir>');
  const result = await verifyOrRefuse(dir);
  const path = join(dir, LEDGER_FILE);
  const bytes = readFileSync(path);
  if (!result.ok) throw refusal(dir, bytes, result.problem!);
  const entries = ledgerEntries(bytes);
  const predictions = checkPredictionEntries(entries);
  if (predictions.problem) throw refusal(dir, bytes, predictions.problem);
  const attestation = join(dir, ATTESTATION_FILE);
  const bound = existsSync(attestation) ? checkAttestationBinding(entries, readFileSync(attestation, 'utf8')) : null;
  if (bound?.problem) throw refusal(dir, bytes, bound.problem);
  const notes: string[] = [];
  if (!result.hasHead) notes.push('no head file: removal of final lines cannot be detected');
  if (result.hasHead && result.beyondHead > 0)
    notes.push(`${result.beyondHead} line(s) after the head (appended just before a crash)`);
  if (result.tornBytes > 0) notes.push(`${result.tornBytes} byte(s) of a line torn by a crash at the end`);
  const more = [predictionNote(predictions.summary)];
  if (bound?.binding)
    more.push(
      `${ATTESTATION_FILE} records ${bound.binding.entries} of its entries (head: line ${bound.binding.head.seq}) and its verdict_hash recomputes`,
    );
  const tail = more.filter((m) => m !== null).join('; ');
  writeStdout(
    `${path}: ${result.lines} line(s), hash chain intact${notes.length ? ` (${notes.join('; ')})` : ''}${tail ? `; ${tail}` : ''}`,
  );
}

export function registerLedger(program: Command): void {
  const ledger = program
    .command('ledger')
    .description("a hash-chained ledger.jsonl: a run directory's, or the predictions of verify/replay --predict");
  ledger
    .command('verify')
    .description(
      'check every line links to the one before, predictions precede their evidence, and an attestation.jsonl beside it records the same entries; exit 1 naming the line and the check',
    )
    .argument('<dir>', 'directory holding ledger.jsonl (a run directory, or the --out of verify/replay --predict)')
    .action(action((dir: string) => verify(dir)));
}
