// Encoding a participant's capture payload (both hosts): the payload's bytes and their SHA-256, or
// for a held capture (capture-file-v1: State.WritePayload writes it into the checkpoint file before
// the group steps again) the same bytes as pieces whose large bins are the model's own arrays, so a
// 269 MB state is not first copied into a 269 MB buffer. NOT the payload's fields (the hosts build
// them) and NOT the write (capture-file.ts).
import { ProtocolRefusal } from '../core/protocol/index.js';
import { encodeState, encodeStatePieces } from './state-codec.js';
import { createHash } from 'node:crypto';

/** An encoded capture payload: sent as `attachment`, or held as `pieces` (in order) for WritePayload. */
export interface EncodedCapture {
  readonly digest: string;
  readonly byteLength: number;
  readonly attachment?: Uint8Array;
  readonly pieces?: readonly Uint8Array[];
}

/** Encode `payload` (held: as pieces); a state the codec refuses is a BACKEND_FAILURE naming `who`. */
export function encodeCapture(payload: unknown, who: string, held: boolean): EncodedCapture {
  let pieces: Uint8Array[];
  try {
    pieces = held ? encodeStatePieces(payload) : [encodeState(payload)];
  } catch (e) {
    throw new ProtocolRefusal(
      'BACKEND_FAILURE',
      `${who}: capture state cannot be encoded: ${(e as Error).message}`,
      'none',
    );
  }
  // Hash exactly the bytes that travel (or are written); never re-encode to verify.
  const hash = createHash('sha256');
  for (const p of pieces) hash.update(p);
  const byteLength = pieces.reduce((n, p) => n + p.byteLength, 0);
  const digest = hash.digest('hex');
  return held ? { digest, byteLength, pieces } : { digest, byteLength, attachment: pieces[0]! };
}
