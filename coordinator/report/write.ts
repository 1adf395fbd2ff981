// Where a report goes and how it is written: by default `<run-dir|sweep-dir>/report.html`, else
// --out. A file that exists is never overwritten, with one exception: the default path holding
// detsim's own previous report (its first lines carry REPORT_MARK), which a new report replaces.
// The page is written whole or not at all: a temp file beside it, fsynced, then linked into place
// (link fails on a file that appeared meanwhile: still never overwritten) or renamed over the old
// report. NOT the page itself (html.ts).
import { closeSync, existsSync, linkSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';
import { discardStaged, fsyncDir, publishStaged, stageFileDurable } from '../durable-file.js';
import { asWriteFailure, guardWrite } from '../write-failure.js';
import { REPORT_MARK } from './html.js';

/** The report's file name inside the run or sweep directory when no --out is given. */
export const DEFAULT_REPORT = 'report.html';

/** Where to write and whether the file there is detsim's previous report to replace. */
export interface ReportTarget {
  path: string;
  replace: boolean;
}

/** Whether `path` begins like a page detsim report wrote (the doctype, then REPORT_MARK). */
export function isOwnReport(path: string): boolean {
  if (!statSync(path).isFile()) return false;
  const head = Buffer.alloc(256);
  const fd = openSync(path, 'r');
  try {
    const n = readSync(fd, head, 0, head.length, 0);
    return head.toString('utf8', 0, n).startsWith(`<!DOCTYPE html>\n${REPORT_MARK}\n`);
  } finally {
    closeSync(fd);
  }
}

function exists(path: string, why: string): DetsimError {
  return new DetsimError('perm_report_exists', `${path} exists ${why}; detsim report never overwrites it`, '--out');
}

/** Decide the target before anything is read (a refusal costs nothing). */
export function reportTarget(source: string, out: string | undefined): ReportTarget {
  const byDefault = resolve(source, DEFAULT_REPORT);
  const path = out === undefined ? byDefault : resolve(out);
  const parent = dirname(path);
  if (!existsSync(parent) || !statSync(parent).isDirectory())
    throw new DetsimError('perm_out_dir_unwritable', `--out: ${parent} is not a directory`, '--out');
  if (!existsSync(path)) return { path, replace: false };
  if (path !== byDefault) throw exists(path, '(choose another --out or remove it)');
  if (!isOwnReport(path)) throw exists(path, 'and is not a previous detsim report');
  return { path, replace: true };
}

/** Write the page to the target: whole or not at all; a new file is linked (never replacing one that appeared). */
export function writeReport(target: ReportTarget, html: string): void {
  const staged = stageFileDurable(target.path, html);
  try {
    if (target.replace) {
      publishStaged([staged]);
      return;
    }
    try {
      linkSync(staged.tmp, target.path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST')
        throw exists(target.path, '(it appeared while the report was made)');
      throw asWriteFailure(e, target.path);
    }
    guardWrite(target.path, () => rmSync(staged.tmp, { force: true }));
    fsyncDir(dirname(target.path));
  } catch (e) {
    discardStaged([staged]);
    throw e;
  }
}
