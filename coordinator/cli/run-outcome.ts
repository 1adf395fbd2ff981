// How `detsim run` and `detsim resume` end on the command line: a RunFailure becomes its exit code
// (1 failed, 130 interrupted) and its lines; a failure to write a file of the run directory
// (RunFailure kind io, or a WriteFailure such as receipt.json on a full disk) becomes ONE line
// `detsim: [reason] …` and exit 1. NOT the run itself and not input refusals (common.ts, exit 2).
import { isRunFailure } from '../run-failure.js';
import { receiptWarnings, writeReceipt, type ReceiptResult } from '../receipt/receipt.js';
import { isWriteFailure } from '../write-failure.js';
import { ExitError, formatError } from './common.js';

export const RUN_FAILED_EXIT = 1;
export const INTERRUPTED_EXIT = 130;

/** The ExitError a failed run or resume ends with, or `e` itself when it is neither failure. */
export function runFailureExit(e: unknown, command: 'run' | 'resume'): unknown {
  if (isWriteFailure(e)) return new ExitError(RUN_FAILED_EXIT, formatError(e));
  if (!isRunFailure(e)) return e;
  if (e.kind === 'io') return new ExitError(RUN_FAILED_EXIT, `detsim: [${e.reason ?? 'perm_write_failed'}] ${command} failed: ${e.message}`);
  const where = e.runDir ? `\ndetsim: run directory ${e.runDir}` : '';
  return new ExitError(e.kind === 'aborted' ? INTERRUPTED_EXIT : RUN_FAILED_EXIT, `detsim: ${command} failed: ${e.message}${where}`);
}

/** Write receipt.json for a finished run (its warnings on stderr); a failed write is one line, exit 1. */
export function receiptOf(runDir: string, command: 'run' | 'resume'): ReceiptResult {
  let receipt: ReceiptResult;
  try {
    receipt = writeReceipt(runDir);
  } catch (e) {
    if (!isWriteFailure(e)) throw e;
    throw new ExitError(RUN_FAILED_EXIT, `detsim: [${e.reason}] ${command} completed but its receipt was not written: ${e.message}; run.json, trace.jsonl and summary.json are complete`);
  }
  for (const w of receiptWarnings(receipt)) process.stderr.write(`${w}\n`);
  return receipt;
}
