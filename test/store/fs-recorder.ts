// Test helper: records the REAL file-system calls of this process (node:fs and node:fs/promises,
// including FileHandle.sync/write/close) with each fd resolved to the path it was opened on, so a
// test can prove which file or directory handle was fsynced, and when. It wraps the real calls
// (they still run) and re-exports them to ESM importers with module.syncBuiltinESMExports().
// Not a fake file system and not the product's fault-injection hooks (DurableFs's FsHooks report
// intent; this sees what was actually called). Other processes (workers) are not recorded.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import { resolve } from 'node:path';

export type RealOpKind = 'open' | 'write' | 'fsync' | 'rename' | 'unlink' | 'close';

export interface RealOp {
  readonly kind: RealOpKind;
  /** Absolute path the call acts on (for fsync/write/close: the path its fd was opened on). */
  readonly path: string;
  /** rename target. */
  readonly to?: string;
}

type AnyFn = (...args: any[]) => any;

interface Patch {
  readonly target: Record<string, unknown>;
  readonly name: string;
  readonly original: unknown;
}

/** A file handle as node:fs/promises returns it: its prototype carries sync/write/close. */
type HandleProto = Record<string, AnyFn>;

export class FsRecorder {
  readonly ops: RealOp[] = [];
  private readonly fdPath = new Map<number, string>();
  private readonly patches: Patch[] = [];

  private constructor() {}

  /** Start recording; call stop() (e.g. in afterEach) to put the real functions back. */
  static async start(): Promise<FsRecorder> {
    const r = new FsRecorder();
    const probe = await fsp.open(resolve('package.json'), 'r');
    const proto = Object.getPrototypeOf(probe) as HandleProto;
    await probe.close();
    r.install(proto);
    return r;
  }

  private record(kind: RealOpKind, path: string | undefined, to?: string): void {
    this.ops.push({ kind, path: path ?? '<unknown fd>', ...(to === undefined ? {} : { to }) });
  }

  private wrap(target: Record<string, unknown>, name: string, make: (original: AnyFn) => AnyFn): void {
    const original = target[name] as AnyFn;
    this.patches.push({ target, name, original });
    target[name] = make(original);
  }

  private install(proto: HandleProto): void {
    // The patched functions get the FileHandle as `this`; the recorder is reached through `rec`.
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const rec = this;
    const pathOf = (fd: number) => rec.fdPath.get(fd);
    // node:fs/promises and FileHandle (the checkpoint store's DurableFs).
    this.wrap(fsp as unknown as Record<string, unknown>, 'open', (open) => async (...args: unknown[]) => {
      const path = resolve(String(args[0]));
      rec.record('open', path);
      const fh = await open(...args);
      rec.fdPath.set(fh.fd, path);
      return fh;
    });
    this.wrap(fsp as unknown as Record<string, unknown>, 'rename', (rename) => async (from: string, to: string) => {
      rec.record('rename', resolve(from), resolve(to));
      return rename(from, to);
    });
    this.wrap(fsp as unknown as Record<string, unknown>, 'unlink', (unlink) => async (path: string) => {
      rec.record('unlink', resolve(path));
      return unlink(path);
    });
    this.wrap(
      proto,
      'sync',
      (sync) =>
        function (this: { fd: number }) {
          rec.record('fsync', pathOf(this.fd));
          return sync.call(this);
        },
    );
    this.wrap(
      proto,
      'write',
      (write) =>
        function (this: { fd: number }, ...args: unknown[]) {
          rec.record('write', pathOf(this.fd));
          return write.apply(this, args);
        },
    );
    this.wrap(
      proto,
      'close',
      (close) =>
        function (this: { fd: number }) {
          const fd = this.fd;
          rec.record('close', pathOf(fd));
          return close.call(this).finally(() => rec.fdPath.delete(fd));
        },
    );
    // node:fs synchronous calls (durable-file.ts, run-dir.ts).
    const sync = fs as unknown as Record<string, unknown>;
    this.wrap(sync, 'openSync', (openSync) => (...args: unknown[]) => {
      const path = resolve(String(args[0]));
      rec.record('open', path);
      const fd = openSync(...args) as number;
      rec.fdPath.set(fd, path);
      return fd;
    });
    this.wrap(sync, 'writeSync', (writeSync) => (fd: number, ...rest: unknown[]) => {
      rec.record('write', pathOf(fd));
      return writeSync(fd, ...rest);
    });
    this.wrap(sync, 'fsyncSync', (fsyncSync) => (fd: number) => {
      rec.record('fsync', pathOf(fd));
      return fsyncSync(fd);
    });
    this.wrap(sync, 'closeSync', (closeSync) => (fd: number) => {
      rec.record('close', pathOf(fd));
      rec.fdPath.delete(fd);
      return closeSync(fd);
    });
    this.wrap(sync, 'renameSync', (renameSync) => (from: string, to: string) => {
      rec.record('rename', resolve(from), resolve(to));
      return renameSync(from, to);
    });
    syncBuiltinESMExports();
  }

  stop(): void {
    for (const p of this.patches.reverse()) p.target[p.name] = p.original;
    this.patches.length = 0;
    syncBuiltinESMExports();
  }

  /** The recorded operations on paths under `dir` (renames by source or target), in order. */
  under(dir: string): RealOp[] {
    const root = resolve(dir);
    const inside = (p: string | undefined) => p !== undefined && (p === root || p.startsWith(`${root}/`));
    return this.ops.filter((o) => inside(o.path) || inside(o.to));
  }
}

/**
 * The durability rules a crash-safe commit must follow, checked on a recorded operation log.
 * Returns one line per violation (empty: the log is durable).
 *  - rename: the source was fsynced after its last write and before the rename;
 *  - rename: the target's directory is fsynced after the rename, before the next rename into it;
 *  - unlink: the directory is fsynced after it;
 *  - every file in `appendOnly` is fsynced after its last write.
 */
export function durabilityViolations(ops: readonly RealOp[], appendOnly: readonly string[] = []): string[] {
  const problems: string[] = [];
  const dirOf = (p: string) => p.slice(0, p.lastIndexOf('/'));
  const fsyncOf = (path: string, from: number, to: number) =>
    ops.slice(from, to).some((o) => o.kind === 'fsync' && o.path === path);
  const lastWrite = (path: string, before: number) => {
    for (let i = before - 1; i >= 0; i--) if (ops[i]!.kind === 'write' && ops[i]!.path === path) return i;
    return -1;
  };
  ops.forEach((op, i) => {
    if (op.kind === 'rename') {
      const w = lastWrite(op.path, i);
      if (w < 0 || !fsyncOf(op.path, w + 1, i))
        problems.push(`${op.path} renamed without an fsync of that file after its last write`);
      // Before the next rename into the same directory (a manifest must not be published before
      // the generation it names is durably in the directory); renames elsewhere may interleave.
      const dir = dirOf(op.to!);
      const next = ops.findIndex((o, j) => j > i && o.kind === 'rename' && dirOf(o.to!) === dir);
      if (!fsyncOf(dir, i + 1, next < 0 ? ops.length : next))
        problems.push(`directory ${dir} not fsynced after renaming to ${op.to}`);
    }
    if (op.kind === 'unlink' && !fsyncOf(dirOf(op.path), i + 1, ops.length))
      problems.push(`directory ${dirOf(op.path)} not fsynced after unlinking ${op.path}`);
  });
  for (const path of appendOnly) {
    const w = lastWrite(path, ops.length);
    if (w >= 0 && !fsyncOf(path, w + 1, ops.length)) problems.push(`${path} not fsynced after its last write`);
  }
  return problems;
}
