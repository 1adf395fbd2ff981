// The file layer of the checkpoint store and the ledger: every write, fsync, rename, unlink and
// directory fsync goes through here, so tests can inject ENOSPC/EIO and crash points in one place.
// It is NOT the commit sequence (store.ts decides what to write when) and knows nothing of envelopes.
import { createHash, type Hash } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

/** The operations a fault injector sees, in the order they are issued. */
export type FsOpKind = 'open' | 'write' | 'fsync' | 'rename' | 'unlink' | 'dir-fsync' | 'append' | 'truncate';

export interface FsOp {
  readonly kind: FsOpKind;
  /** The file the operation acts on (for rename: the source; `to` is the target). */
  readonly path: string;
  readonly to?: string;
  /** For writes: the bytes of this file written before this call. */
  readonly offset?: number;
}

/**
 * The steps of the commit sequence a crash hook can stop after (checkpoint-envelope-v1 "Durable
 * commit"). `generation-temp-partial` fires once, after the first slice of the temp file is written.
 */
export const COMMIT_STEPS = [
  'generation-temp-opened',
  'generation-temp-partial',
  'generation-temp-written',
  'generation-temp-synced',
  'generation-renamed',
  'generation-dir-synced',
  'manifest-temp-written',
  'manifest-temp-synced',
  'manifest-renamed',
  'manifest-dir-synced',
  'rotation-unlinked',
  'rotation-dir-synced',
] as const;
export type CommitStep = (typeof COMMIT_STEPS)[number];

export interface FsHooks {
  /** Called before every operation; throw (see `errnoError`) to make the operation fail. */
  before?(op: FsOp): void;
  /** Called after each commit step; a crash test kills the process here. */
  reached?(step: CommitStep, checkpointId: string): void | Promise<void>;
}

/** An errno-shaped error as node:fs raises it, for fault injection. */
export function errnoError(code: 'ENOSPC' | 'EIO' | 'EACCES' | 'EROFS', op: FsOp): NodeJS.ErrnoException {
  const e = new Error(`${code}: injected fault, ${op.kind} '${op.path}'`) as NodeJS.ErrnoException;
  e.code = code;
  e.syscall = op.kind;
  e.path = op.path;
  return e;
}

/** Writes are issued in slices of this size so the event loop turns between them. */
export const WRITE_SLICE = 4 * 1024 * 1024;

/** Where the bytes of a durable replace come from: a list of parts, written in order, never joined. */
export interface ByteParts {
  readonly parts: readonly Uint8Array[];
}

export interface WrittenFile {
  readonly byteLength: number;
  /** Lowercase hex SHA-256 of exactly the bytes handed to write(); null when hashing was not asked for. */
  readonly sha256: string | null;
}

/** Labels the steps of one durable replace; 'other' files (the ledger head) report no commit steps. */
export type ReplaceKind = 'generation' | 'manifest' | 'other';

export class DurableFs {
  constructor(readonly hooks: FsHooks = {}) {}

  private check(op: FsOp): void {
    this.hooks.before?.(op);
  }

  async step(step: CommitStep, checkpointId: string): Promise<void> {
    await this.hooks.reached?.(step, checkpointId);
  }

  private async kindStep(
    kind: ReplaceKind,
    generation: CommitStep,
    manifest: CommitStep,
    checkpointId: string,
  ): Promise<void> {
    if (kind === 'generation') await this.step(generation, checkpointId);
    else if (kind === 'manifest') await this.step(manifest, checkpointId);
  }

  /**
   * Step 1-2 of a durable replace: write every part to a fresh temp file, then FileHandle.sync().
   * On any failure the temp file is abandoned (closed, best-effort unlinked) and never written
   * again; the caller must not publish anything that refers to it. Hashes the bytes beside the
   * writes unless `hash: false` (the caller already holds a digest of these very buffers).
   */
  async writeTemp(
    path: string,
    data: ByteParts,
    kind: ReplaceKind,
    checkpointId: string,
    options: { hash?: boolean } = {},
  ): Promise<WrittenFile> {
    return this.writeSynced(path, data, kind, checkpointId, options.hash ?? true);
  }

  /**
   * Step 2 of a durable replace for a temp file already written in full (store-files-v1: the
   * workers and the sealer wrote it): fsync it and report its length. On failure it is abandoned.
   */
  async syncWritten(path: string, checkpointId: string): Promise<WrittenFile> {
    let ok = false;
    this.check({ kind: 'open', path });
    const fh = await open(path, fsConstants.O_RDONLY);
    try {
      // The bytes were written before this call (by the workers and the sealer); a fault injected
      // at 'write' fails here, as it would have failed the write itself.
      this.check({ kind: 'write', path, offset: 0 });
      await this.step('generation-temp-written', checkpointId);
      this.check({ kind: 'fsync', path });
      await fh.sync();
      const byteLength = (await fh.stat()).size;
      await this.step('generation-temp-synced', checkpointId);
      ok = true;
      return { byteLength, sha256: null };
    } finally {
      await fh.close().catch(() => undefined);
      if (!ok) await this.unlink(path).catch(() => undefined);
    }
  }

  /** Step 3-4 of a durable replace: rename the synced temp file to its final name, fsync the dir. */
  async publish(
    dir: string,
    tmpName: string,
    finalName: string,
    kind: ReplaceKind,
    checkpointId: string,
  ): Promise<void> {
    await this.rename(join(dir, tmpName), join(dir, finalName));
    await this.kindStep(kind, 'generation-renamed', 'manifest-renamed', checkpointId);
    await this.fsyncDir(dir);
    await this.kindStep(kind, 'generation-dir-synced', 'manifest-dir-synced', checkpointId);
  }

  /** Abandon a temp file after a failed or refused write: best effort, it is an orphan otherwise. */
  async abandon(path: string): Promise<void> {
    await this.unlink(path).catch(() => undefined);
  }

  /**
   * Write a fresh file (truncating a stale one of the same name) and fsync it. The SHA-256 of the
   * bytes runs beside the I/O, a slice per event-loop turn: writes go to the thread pool while the
   * main thread hashes, and the hash finishes during the fsync instead of before it.
   */
  private async writeSynced(
    path: string,
    data: ByteParts,
    kind: ReplaceKind,
    checkpointId: string,
    hash: boolean,
  ): Promise<WrittenFile> {
    this.check({ kind: 'open', path });
    const fh = await open(path, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC, 0o644);
    let ok = false;
    const slices = sliceParts(data.parts);
    const hashing = hash ? new SliceHasher(slices) : null;
    try {
      if (kind === 'generation') await this.step('generation-temp-opened', checkpointId);
      const byteLength = await this.writeSlices(fh, path, slices, kind === 'generation' ? checkpointId : null);
      await this.kindStep(kind, 'generation-temp-written', 'manifest-temp-written', checkpointId);
      this.check({ kind: 'fsync', path });
      await fh.sync();
      const sha256 = hashing ? await hashing.done : null;
      await this.kindStep(kind, 'generation-temp-synced', 'manifest-temp-synced', checkpointId);
      ok = true;
      return { byteLength, sha256 };
    } finally {
      hashing?.cancel();
      await fh.close().catch(() => undefined);
      // A failed write or fsync leaves the file in an unknown state: abandon it, never retry on it.
      if (!ok) await this.unlink(path).catch(() => undefined);
    }
  }

  /** Write the slices in order, one thread-pool write each, so the event loop turns between them. */
  private async writeSlices(
    fh: FileHandle,
    path: string,
    slices: readonly Uint8Array[],
    partialStepFor: string | null,
  ): Promise<number> {
    let offset = 0;
    for (const slice of slices) {
      this.check({ kind: 'write', path, offset });
      await writeAll(fh, slice, offset);
      offset += slice.byteLength;
      if (partialStepFor !== null) {
        await this.step('generation-temp-partial', partialStepFor);
        partialStepFor = null;
      }
    }
    return offset;
  }

  async rename(from: string, to: string): Promise<void> {
    this.check({ kind: 'rename', path: from, to });
    await rename(from, to);
  }

  async unlink(path: string): Promise<void> {
    this.check({ kind: 'unlink', path });
    await unlink(path);
  }

  /** fsync a directory opened read-only, so a rename or unlink in it survives a power cut. */
  async fsyncDir(dir: string): Promise<void> {
    this.check({ kind: 'dir-fsync', path: dir });
    const fh = await open(dir, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY);
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  }

  /** Cut a file back to `length` bytes (a torn ledger tail after a crash) and fsync it. */
  async truncateSynced(path: string, length: number): Promise<void> {
    this.check({ kind: 'truncate', path, offset: length });
    const fh = await open(path, fsConstants.O_WRONLY);
    try {
      await fh.truncate(length);
      this.check({ kind: 'fsync', path });
      await fh.sync();
    } finally {
      await fh.close();
    }
  }

  /** Append bytes to a file (created if missing) and fsync it before returning. */
  async appendSynced(path: string, bytes: Uint8Array): Promise<void> {
    this.check({ kind: 'append', path });
    const fh = await open(path, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_APPEND, 0o644);
    try {
      let at = 0;
      while (at < bytes.byteLength) {
        const { bytesWritten } = await fh.write(bytes, at, bytes.byteLength - at);
        at += bytesWritten;
      }
      this.check({ kind: 'fsync', path });
      await fh.sync();
    } finally {
      await fh.close();
    }
  }
}

/** The parts cut into views of at most WRITE_SLICE bytes (no copies). */
function sliceParts(parts: readonly Uint8Array[]): Uint8Array[] {
  const slices: Uint8Array[] = [];
  for (const part of parts) {
    for (let at = 0; at < part.byteLength; at += WRITE_SLICE)
      slices.push(part.subarray(at, Math.min(part.byteLength, at + WRITE_SLICE)));
  }
  return slices;
}

/** SHA-256 over the slices, one slice per event-loop turn, so a step loop never waits long. */
class SliceHasher {
  private cancelled = false;
  readonly done: Promise<string>;

  constructor(slices: readonly Uint8Array[]) {
    this.done = this.run(slices);
    this.done.catch(() => undefined);
  }

  private async run(slices: readonly Uint8Array[]): Promise<string> {
    const hash: Hash = createHash('sha256');
    for (const slice of slices) {
      await new Promise<void>((r) => setImmediate(r));
      if (this.cancelled) return '';
      hash.update(slice);
    }
    return hash.digest('hex');
  }

  cancel(): void {
    this.cancelled = true;
  }
}

async function writeAll(fh: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  let at = 0;
  while (at < bytes.byteLength) {
    const { bytesWritten } = await fh.write(bytes, at, bytes.byteLength - at, position + at);
    if (bytesWritten === 0) throw new Error(`write made no progress at offset ${position + at}`);
    at += bytesWritten;
  }
}
