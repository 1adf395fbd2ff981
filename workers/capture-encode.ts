// Encoding a participant's capture payload (both hosts): the payload's bytes and their SHA-256, or
// for a held capture (capture-file-v1: State.WritePayload writes it into the checkpoint file before
// the group steps again) the same bytes as pieces whose large bins are the model's own arrays, so a
// 269 MB state is not first copied into a 269 MB buffer; held with `hashAtWrite` (capture-file-v2)
// the pieces are not hashed here: the write hashes them. NOT the payload's fields (the hosts build
// them) and NOT the write (capture-file.ts).
import { ProtocolRefusal, type CaptureResult, type PayloadRef } from '../core/protocol/index.js';
import { encodeState, encodeStatePieces } from './state-codec.js';
import { createHash } from 'node:crypto';

/**
 * How a Capture keeps its payload: sent as the reply's attachment, held with its digest
 * (capture-file-v1), or held with its digest left to State.WritePayload (capture-file-v2).
 */
export type CaptureHold = 'none' | 'hashed' | 'at-write';

/** An encoded capture payload: sent as `attachment`, or held as `pieces` (in order) for WritePayload. */
export interface EncodedCapture {
  /** Absent for a capture held with its digest left to the write. */
  readonly digest?: string;
  readonly byteLength: number;
  readonly attachment?: Uint8Array;
  readonly pieces?: readonly Uint8Array[];
}

/** Encode `payload` (held: as pieces); a state the codec refuses is a BACKEND_FAILURE naming `who`. */
export function encodeCapture(payload: unknown, who: string, hold: CaptureHold): EncodedCapture {
  let pieces: Uint8Array[];
  try {
    pieces = hold !== 'none' ? encodeStatePieces(payload) : [encodeState(payload)];
  } catch (e) {
    throw new ProtocolRefusal(
      'BACKEND_FAILURE',
      `${who}: capture state cannot be encoded: ${(e as Error).message}`,
      'none',
    );
  }
  const byteLength = pieces.reduce((n, p) => n + p.byteLength, 0);
  if (hold === 'at-write') return { byteLength, pieces };
  // Hash exactly the bytes that travel (or are written); never re-encode to verify.
  const hash = createHash('sha256');
  for (const p of pieces) hash.update(p);
  const digest = hash.digest('hex');
  return hold === 'hashed' ? { digest, byteLength, pieces } : { digest, byteLength, attachment: pieces[0]! };
}

/**
 * The Capture reply's `payload`: digest and size, or the size alone for a capture whose digest the
 * write gives (the wire shape of SizedCaptureResult, which the hosts' CaptureResult type widens).
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
