// Sealing an envelope that is already in its temp file (capture-file-v1): one streaming pass over
// the file computes the prefix SHA-256 and checks every producer-reported payload digest, then the
// footer is written at its offset. Memory stays one chunk whatever the file size (no whole-payload
// or whole-envelope buffer; Node Buffers stop at 4 GiB, single reads at 2 GiB).
// NOT the layout (core/formats/envelope.ts), NOT the fsync/rename/commit (store.ts does those).
import { createHash, type Hash } from 'node:crypto';
import { open, type FileHandle } from 'node:fs/promises';
import { envelopeFooter, type EnvelopeLayout } from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Digest, Id } from '../../core/formats/scalars.js';
import { eachWindow, WINDOW_BYTES } from './file-window.js';
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
    const prefix = createHash('sha256');
    const checks: RangeCheck[] = [...declared]
      .sort((x, y) => x.offset - y.offset)
      .map((range) => ({ range, hash: createHash('sha256') }));
    const reached = await eachWindow(
      fh,
      0,
      layout.footerOffset,
      (view, at) => {
        prefix.update(view);
        const end = at + view.length;
        for (const c of checks) {
          const from = Math.max(at, c.range.offset);
          const stop = Math.min(end, c.range.offset + c.range.byteLength);
          if (from < stop) c.hash.update(view.subarray(from - at, stop - at));
        }
      },
      chunkBytes,
    );
    if (reached < layout.footerOffset)
      throw new DetsimError(
        'audit_envelope_length',
        `the envelope temp file ends at ${reached} bytes, its layout puts the footer at ${layout.footerOffset}`,
        'footer',
      );
    // In file order: the first payload whose bytes differ is the one refused.
    for (const c of checks) checkRange(c);
    const footer = envelopeFooter(layout.totalBytes, prefix.copy().digest());
    await writeFully(fh, footer, layout.footerOffset);
    return { written: true, byteLength: layout.totalBytes, envelopeDigest: prefix.update(footer).digest('hex') };
  } finally {
    await fh.close().catch(() => undefined);
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
