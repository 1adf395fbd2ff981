// The run directory `runs/<session>-<n>/`: allocation of the first free n, durable JSON files
// (temp → fsync → rename → fsync dir) and the run.log sink,
// and the check that an --out parent can hold run directories at all (before anything is created).
// Every write goes through write-failure.ts, so a full disk is a named WriteFailure and
// trace.jsonl never keeps half a line. NOT what goes into the files (run.ts decides) and nothing
// about workers or the step loop.
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  realpathSync,
  statSync,
} from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { writeAll, writeFileDurable } from '../durable-file.js';
import { asWriteFailure, guardWrite, type WriteFailure } from '../write-failure.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Id } from '../../core/formats/scalars.js';

export const RUN_FILES = {
  run: 'run.json',
  log: 'run.log',
  summary: 'summary.json',
} as const;

/** Kernel filesystems: mkdir there fails oddly or never returns (a recursive mkdir on /proc hangs). */
const KERNEL_FS_ROOTS = ['/proc', '/sys'];

/**
 * Refuse a parent directory that cannot hold run directories, before anything is created: the
 * nearest existing ancestor must be a writable directory outside /proc and /sys.
 */
export function checkRunsParent(parent: string, flag = '--out', what = 'run directories'): void {
  const refuse = (why: string): never => {
    throw new DetsimError('perm_out_dir_unwritable', `${flag}: ${parent} ${why}`, flag);
  };
  let nearest = resolve(parent);
  while (!existsSync(nearest) && dirname(nearest) !== nearest) nearest = dirname(nearest);
  let real: string;
  try {
    real = realpathSync(nearest);
    if (!statSync(real).isDirectory())
      refuse(nearest === resolve(parent) ? 'is not a directory' : `cannot be created: ${nearest} is not a directory`);
  } catch (e) {
    if (e instanceof DetsimError) throw e;
    return refuse(`cannot be checked (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  if (KERNEL_FS_ROOTS.some((root) => real === root || real.startsWith(`${root}${sep}`)))
    refuse(`is on a kernel filesystem (${real}), not a place for ${what}`);
  try {
    accessSync(real, constants.W_OK | constants.X_OK);
  } catch (e) {
    refuse(`is not writable (${nearest}: ${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/** Create `<parent>/<sessionId>-<n>` for the first free n ≥ 1 (mkdir is the atomic claim). */
export function allocateRunDir(parent: string, sessionId: Id): string {
  checkRunsParent(parent);
  const base = resolve(parent);
  guardWrite(base, () => mkdirSync(base, { recursive: true }));
  for (let n = 1; ; n++) {
    const dir = join(base, `${sessionId}-${n}`);
    try {
      mkdirSync(dir);
      return dir;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw asWriteFailure(e, dir);
    }
  }
}

/**
 * Exactly `dir` as a run directory (a sweep names each of its runs): made if absent; an existing
 * one is taken only when empty, else refused naming it (`perm_run_dir_exists`). Its parent must exist.
 */
export function createRunDir(dir: string): string {
  const path = resolve(dir);
  try {
    mkdirSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw asWriteFailure(e, path);
    if (readdirSync(path).length > 0)
      throw new DetsimError(
        'perm_run_dir_exists',
        `${path}: already holds files; a new run needs an empty directory`,
        'runDir',
      );
  }
  return path;
}

/** Write canonical JSON durably: a reader sees the old file or the whole new one, never half. */
export function writeJsonDurable(dir: string, name: string, value: unknown): void {
  writeFileDurable(join(dir, name), `${canonicalize(value)}\n`);
}

/**
 * run.log as a pino destination. Deferred (resume), it holds lines in memory until `accept()`,
 * so a refused resume leaves run.log as it was. A failed write never throws into the logging
 * call (it may be a worker's stderr handler): it is kept in `failure` and the step loop stops
 * the run on it (`throwIfFailed`).
 */
export class RunLog {
  private fd: number | undefined;
  private pending: string[] | null;
  failure: WriteFailure | undefined;

  constructor(
    readonly path: string,
    opts: { deferred?: boolean } = {},
  ) {
    this.pending = opts.deferred ? [] : null;
    if (!opts.deferred) this.open();
  }

  /** pino calls this with one JSON line per record. */
  write(chunk: string): void {
    if (this.pending) this.pending.push(chunk);
    else this.writeNow(chunk);
  }

  /** Start writing to run.log: the lines held so far first. */
  accept(): void {
    const held = this.pending ?? [];
    this.pending = null;
    this.open();
    for (const line of held) this.writeNow(line);
  }

  /** Forget the held lines (a refused resume writes nothing). */
  discard(): void {
    this.pending = [];
  }

  throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }

  /** fsync and close; a held (never accepted) log is dropped. Safe to call twice. */
  close(): void {
    this.pending = null;
    const fd = this.fd;
    if (fd === undefined) return;
    this.fd = undefined;
    try {
      guardWrite(this.path, () => fsyncSync(fd));
    } catch (e) {
      this.failure ??= e as WriteFailure;
    } finally {
      closeSync(fd);
    }
  }

  private open(): void {
    if (this.failure) return;
    try {
      this.fd = guardWrite(this.path, () => openSync(this.path, 'a'));
    } catch (e) {
      this.failure = e as WriteFailure;
    }
  }

  private writeNow(chunk: string): void {
    const fd = this.fd;
    if (fd === undefined || this.failure) return;
    try {
      guardWrite(this.path, () => writeAll(fd, Buffer.from(chunk, 'utf8')));
    } catch (e) {
      this.failure = e as WriteFailure;
    }
  }
}
