// The run directory `runs/<session>-<n>/`: allocation of the first free n, durable JSON files
// (temp → fsync → rename → fsync dir) and the append-only trace.jsonl writer.
// NOT what goes into the files (run.ts decides) and nothing about workers or the step loop.
import { closeSync, fsyncSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { writeFileDurable } from './durable-file.js';
import { canonicalize } from './formats/canonical-json.js';
import type { Id } from './formats/scalars.js';
import type { TransitionTrace } from './trace.js';

export const RUN_FILES = {
  run: 'run.json',
  trace: 'trace.jsonl',
  log: 'run.log',
  summary: 'summary.json',
} as const;

/** Create `<parent>/<sessionId>-<n>` for the first free n ≥ 1 (mkdir is the atomic claim). */
export function allocateRunDir(parent: string, sessionId: Id): string {
  const base = resolve(parent);
  mkdirSync(base, { recursive: true });
  for (let n = 1; ; n++) {
    const dir = join(base, `${sessionId}-${n}`);
    try {
      mkdirSync(dir);
      return dir;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
}

/** Write canonical JSON durably: a reader sees the old file or the whole new one, never half. */
export function writeJsonDurable(dir: string, name: string, value: unknown): void {
  writeFileDurable(join(dir, name), `${canonicalize(value)}\n`);
}

/** Appends one canonical JSON line per step to trace.jsonl. */
export class TraceWriter {
  private fd: number | undefined;

  constructor(readonly path: string) {
    this.fd = openSync(path, 'a');
  }

  append(trace: TransitionTrace): void {
    this.appendLine(canonicalize(trace));
  }

  /** Append an already canonical line (see trace.ts traceLine). */
  appendLine(line: string): void {
    if (this.fd === undefined) throw new Error('trace writer closed');
    writeSync(this.fd, `${line}\n`);
  }

  /** fsync what was appended so far (a checkpoint at this boundary must not outlive its trace lines). */
  sync(): void {
    if (this.fd !== undefined) fsyncSync(this.fd);
  }

  /** fsync and close; safe to call twice. */
  close(): void {
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
}
