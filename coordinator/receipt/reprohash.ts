// ReproHash (docs/spec/diff0.md): the first 16 hex characters of SHA-256 over the RFC 8785 text of
// a receipt's ReproCore view. Only the hash; the view is canonical.ts, the receipt is receipt.ts.
import { canonicalize, sha256Hex } from '../../core/formats/canonical-json.js';
import { type CanonicalOptions, type UnknownField, canonicalSplit } from './canonical.js';

export const REPRO_HASH_HEX = 16;

/** A ReproHash with the canonical text and full digest it came from. */
export interface ReproHashResult {
  readonly reproHash: string;
  /** The full SHA-256 of the canonical view (the ReproHash is its prefix). */
  readonly digest: string;
  /** The RFC 8785 text that was hashed. */
  readonly canonical: string;
  readonly unknownFields: readonly UnknownField[];
}

/** ReproHash of an already-canonical view text. */
export function reproHashOfText(canonical: string): string {
  return sha256Hex(canonical).slice(0, REPRO_HASH_HEX);
}

/** Strip, normalise, canonicalise and hash a receipt (R1–R3). */
export function reproHash(receipt: unknown, opts: CanonicalOptions = {}): ReproHashResult {
  const split = canonicalSplit(receipt, opts);
  const canonical = canonicalize(split.repro);
  const digest = sha256Hex(canonical);
  return { reproHash: digest.slice(0, REPRO_HASH_HEX), digest, canonical, unknownFields: split.unknownFields };
}
