// Shared CLI plumbing: one readable line and a non-zero exit for refused input, never a stack
// trace for a user mistake. Exit 1 = a file failed verification; exit 2 = usage or input error.
import { TRANSPORTS, checkSteps, type Transport } from '../config.js';
import { DISPATCH_MODES, type Dispatch } from '../session/lockstep.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';

/** Ends a command with an exit code and one line on stderr. */
export class ExitError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

export function formatError(e: DetsimError): string {
  return `detsim: [${e.reason}] ${e.message}`;
}

/**
 * Wrap a command action: DetsimError → exit 2 (or `refusalExit`; an `audit_…` one exit 1, or
 * `auditExit` for a command whose checks judge its own input), ExitError → its code.
 */
export function action<A extends unknown[]>(
  fn: (...args: A) => Promise<void> | void,
  refusalExit = 2,
  auditExit = 1,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (e) {
      if (e instanceof ExitError) {
        if (e.message) process.stderr.write(`${e.message}\n`);
        process.exitCode = e.exitCode;
        return;
      }
      if (e instanceof DetsimError) {
        const refusal = (await unendedRunRefusal(e, args)) ?? e;
        process.stderr.write(`${formatError(refusal)}\n`);
        // A file (or participant) that failed verification is exit 1 whichever command met it.
        process.exitCode = refusal.reason.startsWith('audit_') ? auditExit : refusalExit;
        return;
      }
      const err = e as NodeJS.ErrnoException;
      if (err && typeof err.code === 'string' && typeof err.path === 'string') {
        process.stderr.write(`detsim: [perm_file_unreachable] cannot access ${err.path}: ${err.code}\n`);
        process.exitCode = 2;
        return;
      }
      throw e;
    }
  };
}

/**
 * A trace that no longer matches its run's receipt.json because a resume of the run is writing it
 * (or was killed) is not a damaged file: the refusal says which, for the run directory among the
 * command's arguments; undefined for any other refusal.
 */
export async function unendedRunRefusal(e: DetsimError, args: readonly unknown[]): Promise<DetsimError | undefined> {
  if (!e.reason.startsWith('audit_trace_')) return undefined;
  // Loaded only here: every command imports this file, few ever refuse a trace.
  const { unendedResume } = await import('../checkpoint/resume.js');
  for (const dir of args) {
    if (typeof dir !== 'string' || !existsSync(join(dir, 'run.json'))) continue;
    const why = unendedResume(dir);
    if (why !== null)
      return new DetsimError(
        'struct_invalid_receipt',
        `${join(dir, 'receipt.json')}: is the receipt of the run before its last resume, which no longer binds its trace: ${why}`,
        'receipt.json',
      );
  }
  return undefined;
}

/** A `--steps N` flag: digits only, then the same bound as a config's `steps` (config.ts checkSteps). */
export function readStepsFlag(text: string | undefined, flag = '--steps'): number | undefined {
  if (text === undefined) return undefined;
  if (!/^(0|[1-9][0-9]{0,29})$/.test(text))
    throw new DetsimError(
      'struct_invalid_field',
      `${flag}: ${JSON.stringify(text)} is not a whole number of steps`,
      flag,
    );
  return checkSteps(Number(text), flag);
}

/** A flag that takes a whole number ≥ `min` (e.g. `--runs`, `--resume-at`); the refusal names the flag. */
export function readWhole(text: string | undefined, field: string, min: number): number | undefined {
  if (text === undefined) return undefined;
  if (!/^(0|[1-9][0-9]{0,8})$/.test(text) || Number(text) < min)
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: ${JSON.stringify(text)} is not a whole number ≥ ${min}`,
      field,
    );
  return Number(text);
}

/** A flag that takes one of a fixed set of words; the refusal names the flag and lists them. */
export function readChoiceFlag<T extends string>(
  text: string | undefined,
  choices: readonly T[],
  flag: string,
): T | undefined {
  if (text === undefined) return undefined;
  if (!(choices as readonly string[]).includes(text))
    throw new DetsimError(
      'struct_invalid_field',
      `${flag}: ${JSON.stringify(text)} is not one of ${choices.join(', ')}`,
      flag,
    );
  return text as T;
}

/** `--transport unix|tcp|thread`: how this run reaches its workers (physical: never changes a ReproHash). */
export function readTransportFlag(text: string | undefined): Transport | undefined {
  return readChoiceFlag(text, TRANSPORTS, '--transport');
}

/** `--environment-transport inline|workers`: the environment in the coordinator's thread, or on the workers' transport. */
export const ENVIRONMENT_TRANSPORT_CHOICES = ['inline', 'workers'] as const;
export const ENVIRONMENT_TRANSPORT_HELP =
  "inline: host the (TypeScript) environment in the coordinator's thread, trusted models only; workers: on the workers' transport (overrides environment.transport; default: inline for a built-in environment on threads or local processes; never changes a ReproHash)";
export function readEnvironmentTransportFlag(text: string | undefined): 'inline' | 'workers' | undefined {
  return readChoiceFlag(text, ENVIRONMENT_TRANSPORT_CHOICES, '--environment-transport');
}

/** `--dispatch concurrent|sequential|reversed`: the order of one phase's worker messages. */
export function readDispatchFlag(text: string | undefined): Dispatch | undefined {
  return readChoiceFlag(text, DISPATCH_MODES, '--dispatch');
}

/** The --transport option's help text, the same on every command that starts workers. */
export const TRANSPORT_HELP = `how to reach TypeScript workers: ${TRANSPORTS.join(' | ')} (overrides workers.transport; never changes a ReproHash)`;

let stdoutGuarded = false;

/**
 * One line on stdout. A reader that closed the pipe early (`detsim … | head`) ends the output
 * quietly (EPIPE is not an error of the command) instead of an unhandled stream error.
 */
export function writeStdout(text: string): void {
  if (!stdoutGuarded) {
    stdoutGuarded = true;
    process.stdout.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE') throw e;
    });
  }
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}
