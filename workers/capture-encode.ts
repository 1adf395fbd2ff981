// Encoding a participant's capture payload (both hosts): the payload's bytes and their SHA-256, or
// for a held capture (store-files-v1: State.WritePayload writes it into the checkpoint file before
// the group steps again, and hashes it as it writes) the same bytes as pieces whose large bins are
// the model's own arrays, so a 269 MB state is not first copied into a 269 MB buffer, and not hashed
// here. NOT the payload's fields (the hosts build them) and NOT the write (capture-file.ts).
import type { CaptureResult, PayloadRef } from '../core/protocol/bodies.js';
import { ProtocolRefusal } from '../core/protocol/envelope.js';
import { encodeState, encodeStatePieces } from './state-codec.js';
import { createHash } from 'node:crypto';

/** An encoded capture payload: sent as `attachment`, or held as `pieces` (in order) for WritePayload. */
export interface EncodedCapture {
  /** Absent for a held capture: its write gives the digest. */
  readonly digest?: string;
  readonly byteLength: number;
  readonly attachment?: Uint8Array;
  readonly pieces?: readonly Uint8Array[];
}

/**
 * Encode `payload`; with `holdFrom` (a held capture) as pieces, kept as such when they add up to
 * at least `holdFrom` bytes, else joined and sent like an unheld capture's. A state the codec
 * refuses is a BACKEND_FAILURE naming `who`.
 */
export function encodeCapture(payload: unknown, who: string, holdFrom: number | undefined): EncodedCapture {
  let pieces: Uint8Array[];
  try {
    pieces = holdFrom !== undefined ? encodeStatePieces(payload) : [encodeState(payload)];
  } catch (e) {
    // The codec names paths from the payload's root; the model's state is its `state` field, and a
    // researcher reads paths from their state's root (docs/spec/state-codec.md: `state $.a.b[3]`).
    const message = (e as Error).message.replace(/\$\.state\b/g, '$');
    throw new ProtocolRefusal('BACKEND_FAILURE', `${who}: capture state cannot be encoded: ${message}`, 'none');
  }
  const byteLength = pieces.reduce((n, p) => n + p.byteLength, 0);
  if (holdFrom !== undefined && byteLength >= holdFrom) return { byteLength, pieces };
  // Hash exactly the bytes that travel; never re-encode to verify.
  const attachment = pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
  return { digest: createHash('sha256').update(attachment).digest('hex'), byteLength, attachment };
}

/**
 * The Capture reply's `payload`: digest and size, or the size alone for a held capture, whose
 * digest the write gives (the wire shape of HeldCaptureResult, which the hosts' CaptureResult type widens).
 */
export function capturedPayload(encoded: EncodedCapture): CaptureResult['payload'] {
  const byteLength = String(encoded.byteLength);
  if (encoded.digest === undefined) return { byteLength } as unknown as PayloadRef;
  return { digest: encoded.digest, byteLength };
}

/** The rest of a Capture's host reply: the held pieces, or the attachment. */
export function capturedBytes(encoded: EncodedCapture): { pieces: readonly Uint8Array[] } | { attachment: Uint8Array } {
  return encoded.pieces ? { pieces: encoded.pieces } : { attachment: encoded.attachment! };
}
