// The checkpoint temporary `tmp-<id>.flysess` one co-located capture assembles (capture-file.ts):
// created and held open by this capture until the writer has sealed it or the capture is dropped,
// so its inode cannot be reused, and "is the path still my file" is a device-and-inode comparison.
// Another process that removes or replaces it (a hand rm, store gc through a path that bypassed the
// lock) turns the capture into a named refusal (audit_checkpoint_temp_vanished), never a raw ENOENT,
// and a file put in its place is never deleted. NOT the layout, the holders' writes or the seal.
import { constants } from 'node:fs';
import { open, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Id } from '../../core/formats/scalars.js';
import { CheckpointRefusal } from './refusal.js';

export class CaptureTemp {
  private constructor(
    readonly path: string,
    private readonly id: Id,
    private fh: FileHandle | null,
    private readonly dev: number,
    private readonly ino: number,
  ) {}

  /** Create (or truncate) the temp at `path` and keep it open. */
  static async create(path: string, id: Id): Promise<CaptureTemp> {
    const fh = await open(path, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC, 0o644);
    try {
      const { dev, ino } = await fh.stat();
      return new CaptureTemp(path, id, fh, dev, ino);
    } catch (e) {
      await fh.close().catch(() => undefined);
      await unlink(path).catch(() => undefined);
      throw e;
    }
  }

  /** The open file this capture writes through (never re-opened by path). */
  get handle(): FileHandle {
    if (this.fh === null) throw new Error(`${basename(this.path)} is already closed`);
    return this.fh;
  }

  /**
   * Null while the path still names the file this capture created; otherwise the refusal that says
   * it was removed or replaced by someone else (the capture is not durable, the last commit stands).
   */
  async vanished(): Promise<CheckpointRefusal | null> {
    const now = await stat(this.path).catch(() => null);
    if (now !== null && now.dev === this.dev && now.ino === this.ino) return null;
    return new CheckpointRefusal(
      'FAILED',
      'audit_checkpoint_temp_vanished',
      `checkpoint ${this.id}: its temporary file ${basename(this.path)} was ${now === null ? 'removed' : 'replaced'} by another process while the capture was in flight (a hand rm, or store gc through a path that bypassed the run lock); this capture is not durable, the last commit stands`,
      { field: 'store' },
    );
  }

  /** Throw the vanished refusal if there is one. */
  async stillThere(): Promise<void> {
    const gone = await this.vanished();
    if (gone !== null) throw gone;
  }

  /** `e`, unless the temp vanished: then that is what went wrong, whichever step noticed it first. */
  async explain(e: unknown): Promise<unknown> {
    return (await this.vanished()) ?? e;
  }

  /** Stop holding the file open (after the seal; the path stays). Idempotent. */
  async close(): Promise<void> {
    const fh = this.fh;
    this.fh = null;
    await fh?.close().catch(() => undefined);
  }

  /** Close, and remove the path if it is still this capture's file (never a file put in its place). Idempotent. */
  async discard(): Promise<void> {
    const ours = (await this.vanished()) === null;
    await this.close();
    if (ours) await unlink(this.path).catch(() => undefined);
  }
}
