// How `detsim run`, `detsim resume` and `detsim fork` end on the command line: a RunFailure becomes
// its exit code (1 failed, 130 interrupted) and its lines — an interrupted one (Ctrl-C, SIGTERM) ONE
// line saying at which step and how to go on (`detsim resume <dir>` from the last committed
// checkpoint, or start again when there is none); a failure to write a file of the run directory
// (RunFailure kind io, a WriteFailure, or receipt.json not written on a full disk: ReceiptNotWritten)
// becomes ONE line `detsim: [reason] …` and exit 1 (for replay and verify too); the receipt's warnings go to stderr.
// NOT the run itself (the session loop writes receipt.json) and not input refusals (common.ts, exit 2).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { storeDirOf } from '../checkpoint/checkpointing.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { RUN_FILES } from '../session/run-dir.js';
import { isRunFailure, type RunFailure } from '../session/run-failure.js';
import { parseStoreManifest, STORE_MANIFEST_FILE } from '../store/store.js';
import { receiptWarnings } from '../receipt/receipt.js';
import { ReceiptNotWritten, type SessionResult } from '../session/session.js';
import { isWriteFailure } from '../write-failure.js';
import { ExitError, formatError, writeStdout } from './common.js';
import { isCheckpointRefusal } from '../checkpoint/refusal.js';
import { isDetsimError } from '../../core/formats/errors.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import { metricsLines, type SessionMetrics } from '../session/metrics.js';
import { checkpointSummaryLines } from './checkpoint-flags.js';

export const RUN_FAILED_EXIT = 1;
export const INTERRUPTED_EXIT = 130;

/** The commands that run sessions and so can fail to write a run directory's files. */
export type RunningCommand = 'run' | 'resume' | 'fork' | 'replay' | 'verify';

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

/**
 * The ExitError a failed run, resume or fork ends with, or `e` itself when it is neither failure.
 * `runDir`: the run directory when the failure may not carry it (a resume stopped before its restore).
 */
export function runFailureExit(e: unknown, command: 'run' | 'resume' | 'fork', runDir?: string): unknown {
  const write = writeFailureExit(e, command);
  if (write) return write;
  if (!isRunFailure(e)) return e;
  if (e.kind === 'aborted') return new ExitError(INTERRUPTED_EXIT, interruptedLine(e, command, e.runDir ?? runDir));
  const where = e.runDir ? `\ndetsim: run directory ${e.runDir}` : '';
  return new ExitError(RUN_FAILED_EXIT, `detsim: [${reasonOf(e)}] ${command} failed: ${e.message}${where}`);
}

/** A run failure's stable reason code: its own (identity, io, a refused capture), else its kind's. */
function reasonOf(e: RunFailure): ReasonCode {
  if (e.reason) return e.reason;
  const byKind: Record<Exclude<RunFailure['kind'], 'aborted'>, ReasonCode> = {
    'never-ready': 'audit_worker_never_ready',
    'worker-exited': 'audit_worker_exited',
    deadline: 'audit_worker_deadline',
    'stream-ended': 'audit_worker_stream_ended',
    'error-reply': 'audit_model_error',
    protocol: 'audit_worker_protocol',
    identity: 'ident_worker_mismatch',
    io: 'perm_write_failed',
    internal: 'audit_run_internal',
  };
  return byKind[e.kind as Exclude<RunFailure['kind'], 'aborted'>];
}

/**
 * The one line an interrupted session ends with: the step its trace reached, and `detsim resume`
 * with the last committed checkpoint (the store's high-water mark, what resume restores by
 * default), or that there is none and the run must start again.
 */
export function interruptedLine(e: RunFailure, command: 'run' | 'resume' | 'fork', runDir: string | undefined): string {
  const what = command === 'resume' ? 'the resumed run' : command === 'fork' ? 'the fork' : 'the run';
  if (runDir === undefined && e.step === null)
    return `detsim: ${what} was interrupted before it started (${e.detail}); nothing was written`;
  const step = runDir === undefined ? null : stepsDone(runDir);
  const at = `detsim: ${what} was interrupted at step ${step ?? e.step ?? '?'}`;
  const last = runDir === undefined ? null : lastCheckpoint(runDir);
  if (runDir === undefined || last === null) return `${at}; no checkpoint yet: start again`;
  return `${at}; resume with \`detsim resume ${shellWord(runDir)}\` (last checkpoint ${last})`;
}

/** summary.json's stepsDone (the steps its trace holds), or null when there is none to read. */
function stepsDone(runDir: string): string | null {
  try {
    const s = parseStrict(readFileSync(join(runDir, RUN_FILES.summary))) as { stepsDone?: unknown };
    return typeof s.stepsDone === 'number' ? String(s.stepsDone) : null;
  } catch {
    return null;
  }
}

/** The high-water checkpoint of a run directory that can be resumed (it has run.json), else null. */
function lastCheckpoint(runDir: string): string | null {
  if (!existsSync(join(runDir, RUN_FILES.run))) return null;
  try {
    return parseStoreManifest(readFileSync(join(storeDirOf(runDir), STORE_MANIFEST_FILE))).highWater;
  } catch {
    return null;
  }
}

/** A path as one shell word: as it is when it needs no quoting, else in single quotes. */
function shellWord(path: string): string {
  return /^[A-Za-z0-9_./@%+=:,-]+$/.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`;
}

/** Print the warnings of the receipt.json a finished run or resume wrote (unclassified fields, honesty) on stderr. */
export function printReceiptWarnings(result: Pick<SessionResult, 'receipt'>): void {
  for (const w of receiptWarnings(result.receipt)) process.stderr.write(`${w}\n`);
}

/** What resume and fork print after a restored run finished: its directory, how it started, digests, checkpoints, metrics. */
export function printRestoredOutcome(
  r: {
    runDir: string;
    behaviourDigest: string;
    reproHash: string;
    checkpoints?: Parameters<typeof checkpointSummaryLines>[0] | null;
    metrics: SessionMetrics;
  },
  how: string,
): void {
  writeStdout(`run directory    ${r.runDir}`);
  writeStdout(how);
  writeStdout(`behaviour digest ${r.behaviourDigest}`);
  writeStdout(`repro hash       ${r.reproHash}`);
  if (r.checkpoints) for (const line of checkpointSummaryLines(r.checkpoints)) writeStdout(line);
  for (const line of metricsLines(r.metrics)) writeStdout(line);
}

/**
 * The exit of a resume or fork that failed: a refused checkpoint, or a trace that failed its check,
 * failed verification (exit 1, the check named, nothing changed); anything else as a run failure.
 */
export function restoreFailureExit(e: unknown, command: 'resume' | 'fork', runDir?: string): unknown {
  if (isCheckpointRefusal(e) || (isDetsimError(e) && e.reason.startsWith('audit_')))
    return new ExitError(1, formatError(e));
  return runFailureExit(e, command, runDir);
}
