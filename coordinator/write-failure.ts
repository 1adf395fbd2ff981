// The one place a failed write to a run directory becomes a named failure: an errno error from
// writing, syncing, renaming or creating a file (ENOSPC, EDQUOT, EIO, EROFS, …) is turned into a
// WriteFailure that names the file and carries a stable reason code, so the CLI prints one line and
// exits non-zero instead of a stack trace. Every run-directory write primitive (durable-file.ts,
// run-dir.ts) goes through `guardWrite`. NOT the checkpoint store's commit failures (store.ts
// reports those per save) and NOT read errors.
import { DetsimError } from '../core/formats/errors.js';
import type { ReasonCode } from '../core/formats/reasons.js';

/** errno codes that mean "the device has no room for these bytes". */
const NO_SPACE = new Set(['ENOSPC', 'EDQUOT', 'EFBIG']);

const DESCRIPTIONS: Record<string, string> = {
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  EFBIG: 'file too large',
  EIO: 'input/output error',
  EROFS: 'read-only file system',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOTDIR: 'a component of the path is not a directory',
  EISDIR: 'a directory stands where the file goes',
};

export class WriteFailure extends DetsimError {
  /** The errno code (ENOSPC, EIO, …). */
  readonly code: string;

  constructor(
    readonly path: string,
    code: string,
    note?: string,
  ) {
    super(
      reasonOfErrno(code),
      `cannot write ${path}: ${DESCRIPTIONS[code] ?? 'write failed'} (${code})${note ? `; ${note}` : ''}`,
      path,
    );
    this.name = 'WriteFailure';
    this.code = code;
  }

  /** The same failure with what it means for the caller's files appended to the message. */
  withNote(note: string): WriteFailure {
    return new WriteFailure(this.path, this.code, note);
  }
}

export function reasonOfErrno(code: string): ReasonCode {
  return NO_SPACE.has(code) ? 'size_no_space' : 'perm_write_failed';
}

export function isWriteFailure(e: unknown): e is WriteFailure {
  return e instanceof WriteFailure;
}

function isErrno(e: unknown): e is NodeJS.ErrnoException {
  return e instanceof Error && typeof (e as NodeJS.ErrnoException).code === 'string';
}

/** The write failure `e` amounts to for `path`, or `e` itself when it is not an errno error. */
export function asWriteFailure(e: unknown, path: string): unknown {
  if (isWriteFailure(e)) return e;
  return isErrno(e) ? new WriteFailure(path, e.code!) : e;
}

/** errno codes a failed write, sync or rename raises (a read's ENOENT is not among them). */
const WRITE_CODES = new Set([...NO_SPACE, 'EIO', 'EROFS', 'EACCES', 'EPERM']);

/**
 * A write failure raised by a layer that does not name files itself (the store's ledger): the
 * errno error as a WriteFailure for the path it carries, or undefined when it is no write failure.
 */
export function writeFailureOfErrno(e: unknown): WriteFailure | undefined {
  if (isWriteFailure(e)) return e;
  if (!isErrno(e) || !WRITE_CODES.has(e.code!)) return undefined;
  return new WriteFailure(e.path ?? 'a file of the run directory', e.code!);
}

/** Run one write step for `path`; an errno failure leaves as a WriteFailure naming the file. */
export function guardWrite<T>(path: string, write: () => T): T {
  try {
    return write();
  } catch (e) {
    throw asWriteFailure(e, path);
  }
}
