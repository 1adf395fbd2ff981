// How `detsim run` and `detsim resume` end on the command line: a RunFailure becomes its exit code
// (1 failed, 130 interrupted) and its lines; a failure to write a file of the run directory
// (RunFailure kind io, a WriteFailure, or receipt.json not written on a full disk: ReceiptNotWritten)
// becomes ONE line `detsim: [reason] …` and exit 1 (for replay and verify too); the receipt's warnings go to stderr.
// NOT the run itself (the session loop writes receipt.json) and not input refusals (common.ts, exit 2).
import { isRunFailure } from '../session/run-failure.js';
import { receiptWarnings } from '../receipt/receipt.js';
import { ReceiptNotWritten, type SessionResult } from '../session/session.js';
import { isWriteFailure } from '../write-failure.js';
import { ExitError, formatError } from './common.js';

export const RUN_FAILED_EXIT = 1;
export const INTERRUPTED_EXIT = 130;

/** The commands that run sessions and so can fail to write a run directory's files. */
export type RunningCommand = 'run' | 'resume' | 'replay' | 'verify';

/**
 * The ExitError (exit 1, one line naming the file and the errno reason) a failed write ends
 * `command` with, or undefined when `e` is no write failure. A write failure is never exit 2:
 * the input was fine, the system refused the bytes (and for replay/verify, 2 means yellow).
 */
export function writeFailureExit(e: unknown, command: RunningCommand): ExitError | undefined {
  if (isWriteFailure(e) || e instanceof ReceiptNotWritten) return new ExitError(RUN_FAILED_EXIT, formatError(e));
  if (isRunFailure(e) && e.kind === 'io')
    return new ExitError(
      RUN_FAILED_EXIT,
      `detsim: [${e.reason ?? 'perm_write_failed'}] ${command} failed: ${e.message}`,
    );
  return undefined;
}

/** The ExitError a failed run or resume ends with, or `e` itself when it is neither failure. */
export function runFailureExit(e: unknown, command: 'run' | 'resume'): unknown {
  const write = writeFailureExit(e, command);
  if (write) return write;
  if (!isRunFailure(e)) return e;
  const where = e.runDir ? `\ndetsim: run directory ${e.runDir}` : '';
  return new ExitError(
    e.kind === 'aborted' ? INTERRUPTED_EXIT : RUN_FAILED_EXIT,
    `detsim: ${command} failed: ${e.message}${where}`,
  );
}

/** Print the warnings of the receipt.json a finished run or resume wrote (unclassified fields, honesty) on stderr. */
export function printReceiptWarnings(result: Pick<SessionResult, 'receipt'>): void {
  for (const w of receiptWarnings(result.receipt)) process.stderr.write(`${w}\n`);
}
