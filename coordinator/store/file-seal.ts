// Sealing an envelope that is already in its temp file (store-files-v1): the prefix SHA-256 over
// the file, a check of every producer-reported payload digest, then the footer at its offset. One
// streaming pass with both hashes (on the event loop, or the sealing thread), or for very large
// files the two halves as separate passes that two threads run side by side. Memory
// stays one window per pass whatever the file size (no whole-payload or whole-envelope buffer;
// Node Buffers stop at 4 GiB, single reads at 2 GiB).
// NOT the layout (core/formats/envelope.ts), NOT the fsync/rename/commit (store.ts does those).
import { createHash, type Hash } from 'node:crypto';
import { closeSync, openSync, writeSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { envelopeFooter, type EnvelopeLayout } from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Digest, Id } from '../../core/formats/scalars.js';
import { eachWindow, eachWindowSync, WINDOW_BYTES } from './file-window.js';
import type { WrittenEnvelope } from './store.js';

/** Bytes read and hashed per read of a file seal (one cache-sized window; the event loop turns every 1 MiB). */
export const FILE_SEAL_CHUNK_BYTES = WINDOW_BYTES;

/** A payload range whose bytes must hash to the digest its producer reported. */
export interface DeclaredRange {
  readonly name: Id;
  readonly offset: number;
  readonly byteLength: number;
  readonly digest: Digest;
}

export interface FileSealOptions {
  /** Chunk size of the streaming pass (tests force small chunks to exercise many of them). */
  readonly chunkBytes?: number;
  /** Test probe: told the size of every buffer the seal allocates. */
  readonly onAllocate?: (bytes: number) => void;
  /** From this file size the payload checks run on a thread of their own (tests lower it). */
  readonly parallelCheckMinBytes?: number;
}

/** A declared range being checked and its running hash. */
interface RangeCheck {
  readonly range: DeclaredRange;
  readonly hash: Hash;
}

/**
 * Hash [0, footerOffset) of the temp file in one pass (each byte read once; a byte inside a declared
 * payload feeds two hashes: the prefix and its payload's check), refuse a payload whose bytes differ
 * from its reported digest, then write the footer. Each byte is read once and hashed at most twice.
 * On the event loop, a turn every 1 MiB (small files, tests); sealFileOffLoop (seal-thread.ts) runs
 * it on the sealing thread for large files (sealWrittenFileSync), and for very large ones as two
 * passes on two threads (sealWrittenFileSync without the checks, checkRangesSync).
 */
export async function sealWrittenFile(
  path: string,
  layout: EnvelopeLayout,
  declared: readonly DeclaredRange[],
  options: FileSealOptions = {},
): Promise<WrittenEnvelope> {
  const chunkBytes = options.chunkBytes ?? FILE_SEAL_CHUNK_BYTES;
  const fh = await open(path, 'r+');
  try {
    options.onAllocate?.(Math.min(chunkBytes, layout.footerOffset));
    const pass = new SealPass(layout, declared);
    pass.reached(await eachWindow(fh, 0, layout.footerOffset, pass.use, chunkBytes));
    const { footer, written } = pass.finish();
    await writeFully(fh, footer, layout.footerOffset);
    return written;
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/**
 * sealWrittenFile in one synchronous call, for the sealing thread: hash [0, footerOffset) (and
 * check `declared` in the same pass), refuse a short file, write the footer. With `declared`
 * empty it is the prefix half alone, while checkRangesSync checks the payloads on another thread.
 */
export function sealWrittenFileSync(
  path: string,
  layout: EnvelopeLayout,
  declared: readonly DeclaredRange[],
): WrittenEnvelope {
  const fd = openSync(path, 'r+');
  try {
    const pass = new SealPass(layout, declared);
    pass.reached(eachWindowSync(fd, 0, layout.footerOffset, pass.use));
    const { footer, written } = pass.finish();
    for (let at = 0; at < footer.byteLength;) {
      const n = writeSync(fd, footer, at, footer.byteLength - at, layout.footerOffset + at);
      if (n === 0) throw new Error(`write made no progress at offset ${layout.footerOffset + at}`);
      at += n;
    }
    return written;
  } finally {
    closeSync(fd);
  }
}

/**
 * The check half in one synchronous call, for the checking thread: hash each declared range of the
 * file on its own and refuse the first (in file order) whose bytes differ from its reported digest.
 * A range the file does not reach hashes short and is refused the same way.
 */
export function checkRangesSync(path: string, declared: readonly DeclaredRange[]): void {
  const fd = openSync(path, 'r');
  try {
    for (const range of [...declared].sort((x, y) => x.offset - y.offset)) {
      const hash = createHash('sha256');
      eachWindowSync(fd, range.offset, range.offset + range.byteLength, (view) => hash.update(view));
      checkRange({ range, hash });
    }
  } finally {
    closeSync(fd);
  }
}

/** The hashes of one seal pass: the prefix, and each declared range's check. */
class SealPass {
  private readonly prefix = createHash('sha256');
  private readonly checks: RangeCheck[];

  constructor(
    private readonly layout: EnvelopeLayout,
    declared: readonly DeclaredRange[],
  ) {
    this.checks = [...declared]
      .sort((x, y) => x.offset - y.offset)
      .map((range) => ({ range, hash: createHash('sha256') }));
  }

  /** Feed the bytes at `at` of the file to the prefix and to the checks of the ranges they fall in. */
  readonly use = (view: Buffer, at: number): void => {
    this.prefix.update(view);
    const end = at + view.length;
    for (const c of this.checks) {
      const from = Math.max(at, c.range.offset);
      const stop = Math.min(end, c.range.offset + c.range.byteLength);
      if (from < stop) c.hash.update(view.subarray(from - at, stop - at));
    }
  };

  /** The pass read up to `reached`: short of the footer's offset, the file is refused. */
  reached(reached: number): void {
    if (reached < this.layout.footerOffset)
      throw new DetsimError(
        'audit_envelope_length',
        `the envelope temp file ends at ${reached} bytes, its layout puts the footer at ${this.layout.footerOffset}`,
        'footer',
      );
  }

  /** Check every range (in file order: the first that differs is refused), then the footer and digest. */
  finish(): { footer: Uint8Array; written: WrittenEnvelope } {
    for (const c of this.checks) checkRange(c);
    const footer = envelopeFooter(this.layout.totalBytes, this.prefix.copy().digest());
    const envelopeDigest = this.prefix.update(footer).digest('hex');
    return { footer, written: { written: true, byteLength: this.layout.totalBytes, envelopeDigest } };
  }
}

/** The same refusal sealing an in-memory draft gives (core/formats/envelope.ts sealSteps). */
function checkRange({ range, hash }: RangeCheck): void {
  const actual = hash.digest('hex');
  if (actual !== range.digest)
    throw new DetsimError(
      'audit_payload_digest_mismatch',
      `payload ${JSON.stringify(range.name)}: its bytes hash to ${actual}, its producer reported ${range.digest}`,
      `payloads.${range.name}.digest`,
    );
}

async function writeFully(fh: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  for (let at = 0; at < bytes.byteLength;) {
    const { bytesWritten } = await fh.write(bytes, at, bytes.byteLength - at, position + at);
    if (bytesWritten === 0) throw new Error(`write made no progress at offset ${position + at}`);
    at += bytesWritten;
  }
}
