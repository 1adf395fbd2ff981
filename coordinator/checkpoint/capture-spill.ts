// Streamed capture payloads beyond an in-memory budget (issue 16: states above 4 GiB with the
// coordinator's memory bounded). A participant that streams its payload (remote workers, the Rust
// and Python workers) hands the coordinator the whole attachment; the envelope layout needs every
// payload's size before any offset is known, so the coordinator would otherwise hold every streamed
// payload until the seal. Here a payload that would take the payloads kept in memory past the
// budget is appended to a spill file in the store directory at once and dropped from memory; once
// the layout is known it is copied, a chunk at a time, into the envelope's temp file at its offset
// (and checked against its reported digest by the seal pass, like every producer's payload).
// Memory: at most the budget plus the one attachment being received. The spill file is named like
// a checkpoint temporary with a character no checkpoint id has (`tmp-<id>+spill.flysess`), so a
// crash leaves a temporary that gc removes, and no worker may write it (State.WritePayload accepts
// `tmp-<id>.flysess` names only). NOT the capture order or reply checks (capture.ts), NOT the
// envelope file of held payloads (capture-file.ts), NOT the seal (store/file-seal.ts).
import { constants } from 'node:fs';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { asWriteFailure } from '../write-failure.js';
import type { EnvelopeEntry } from '../../core/formats/envelope.js';
import type { Digest, Id } from '../../core/formats/scalars.js';
import type { CapturedPayload } from './manifest.js';

/** Streamed payload bytes the coordinator keeps in memory per capture before it spills (64 MiB). */
export const SPILL_ABOVE_BYTES = 64 * 1024 * 1024;
/** Bytes per read/write when copying a spilled payload into the envelope file. */
export const SPILL_COPY_CHUNK_BYTES = 1024 * 1024;

/** Test hooks: a lower budget (so a CI-size capture spills) and a probe of the bytes kept in memory. */
export interface SpillOptions {
  readonly spillAboveBytes?: number;
  /** Told the streamed payload bytes kept in memory after each payload arrives. */
  readonly onKept?: (bytes: number) => void;
}

/** Where a spilled payload lies in the spill file. */
interface SpilledRange {
  readonly at: number;
  readonly byteLength: number;
}

export const spillFileOf = (checkpointId: Id): string => `tmp-${checkpointId}+spill.flysess`;

/** The streamed payloads of one capture: kept in memory up to the budget, the rest in the spill file. */
export class StreamedPayloads {
  private kept = 0;
  private end = 0;
  private fh: FileHandle | null = null;
  private created = false;
  private readonly spilled = new Map<string, SpilledRange>();
  private readonly path: string;
  private readonly budget: number;

  constructor(
    storeDir: string,
    checkpointId: Id,
    private readonly options: SpillOptions = {},
  ) {
    this.path = join(storeDir, spillFileOf(checkpointId));
    this.budget = options.spillAboveBytes ?? SPILL_ABOVE_BYTES;
  }

  /** Whether any payload went to the spill file (the envelope is then assembled in its temp file). */
  get spills(): boolean {
    return this.spilled.size > 0;
  }

  /** Keep `bytes` in memory if it fits the budget, else append it to the spill file and keep its size and digest. */
  async add(name: string, bytes: Uint8Array, digest: Digest): Promise<CapturedPayload> {
    if (this.kept + bytes.byteLength <= this.budget) {
      this.kept += bytes.byteLength;
      this.options.onKept?.(this.kept);
      return { bytes, digest };
    }
    try {
      if (!this.fh) {
        this.created = true;
        this.fh = await open(this.path, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC, 0o600);
      }
      await writeRange(this.fh, bytes, this.end);
    } catch (e) {
      throw asWriteFailure(e, this.path); // a full disk names the spill file
    }
    this.spilled.set(name, { at: this.end, byteLength: bytes.byteLength });
    this.end += bytes.byteLength;
    this.options.onKept?.(this.kept);
    return { byteLength: bytes.byteLength, digest };
  }

  /** Copy every spilled payload into the envelope file at the offset its entry was laid out at. */
  async copyInto(envelope: FileHandle, entries: readonly EnvelopeEntry[]): Promise<void> {
    // Read back through the descriptor it was written by: a spill file removed meanwhile by another
    // process still holds every byte, and nothing else can be read in its place.
    if (!this.spilled.size || !this.fh) return;
    const chunk = Buffer.allocUnsafe(SPILL_COPY_CHUNK_BYTES);
    for (const entry of entries) {
      const range = this.spilled.get(entry.name);
      if (range) await copyRange(this.fh, envelope, chunk, range, entry.offset);
    }
  }

  /** Close and remove the spill file (after the copy, or when the capture fails). Idempotent. */
  async discard(): Promise<void> {
    const fh = this.fh;
    this.fh = null;
    await fh?.close().catch(() => undefined);
    if (this.created) await unlink(this.path).catch(() => undefined);
    this.created = false;
    this.spilled.clear();
  }
}

async function copyRange(
  from: FileHandle,
  to: FileHandle,
  chunk: Buffer,
  range: SpilledRange,
  offset: number,
): Promise<void> {
  for (let done = 0; done < range.byteLength;) {
    const want = Math.min(chunk.byteLength, range.byteLength - done);
    const { bytesRead } = await from.read(chunk, 0, want, range.at + done);
    if (bytesRead === 0) throw new Error(`the capture spill file ends early at ${range.at + done} bytes`);
    await writeRange(to, chunk.subarray(0, bytesRead), offset + done);
    done += bytesRead;
  }
}

/** Write all of `bytes` at `position`, at most 1 GiB per call (one fs call stops below 2 GiB). */
export async function writeRange(fh: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  for (let at = 0; at < bytes.byteLength;) {
    const n = Math.min(bytes.byteLength - at, 1024 * 1024 * 1024);
    const { bytesWritten } = await fh.write(bytes, at, n, position + at);
    if (bytesWritten === 0) throw new Error(`write made no progress at offset ${position + at}`);
    at += bytesWritten;
  }
}
