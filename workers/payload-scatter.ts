// Reading a state payload from a checkpoint file with each large `bin` field (a model's typed-array
// state) in memory of its own, so the model's restore can take that memory over as its
// Float64Array / Float32Array instead of copying it (sdk.ts f64FromBytes, owned-bytes.ts): the
// payload's bytes cross memory once, not twice. The layout is scanned from the file's headers
// first (state-layout.ts), then every byte is read and hashed once in payload order, then the
// layout is scanned again over the bytes that were hashed, and the payload is decoded by the state
// codec with those fields cut out and put back by path. Any step that does not line up gives null
// and the caller reads the payload whole, exactly as before. A field reads into memory a model gave
// back (recycled-bytes.ts) when a buffer of its length waits there.
// NOT the digest check or the stage (checks.ts), NOT the file confinement (payload-file.ts).
import { readSync } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { allocate, readHashed, withStoreRange, type HashedPiece, type PayloadFile } from './payload-file.js';
import { handOver } from './owned-bytes.js';
import { reuse } from './recycled-bytes.js';
import { decodeState, plainBytes } from './state-codec.js';
import { scanLayout, type BinField, type LayoutSource } from './state-layout.js';

/** Payloads below this size are read whole: a field of their own would save little. */
export const MIN_SCATTER_BYTES = 256 * 1024;
/** Bytes per read while the layout is scanned (headers and keys only). */
const SCAN_WINDOW_BYTES = 64 * 1024;
/** A bin field's header: 0xc6 and a 4-byte big-endian length. */
const BIN32_HEADER_BYTES = 5;

/** A payload read with its large fields apart: its SHA-256 and its decoded value. */
export interface ScatteredPayload {
  readonly digest: string;
  readonly decoded: unknown;
}

/** A payload read whole: its bytes and their SHA-256. */
export interface WholePayload {
  readonly digest: string;
  readonly bytes: Buffer;
}

/**
 * The `byteLength` bytes at `file.offset` of a file under `storeDir` (refused as readStoreRange
 * refuses), read and hashed once through one open file: decoded with each large bin field in
 * memory of its own when the layout allows, else whole.
 */
export async function readStorePayloadOnce(
  storeDir: string | undefined,
  file: PayloadFile,
  byteLength: bigint,
): Promise<ScatteredPayload | WholePayload> {
  return withStoreRange(storeDir, file, byteLength, async (fh) => {
    const base = Number(file.offset);
    const length = Number(byteLength);
    return (await readScattered(fh, base, length)) ?? readWhole(fh, base, length);
  });
}

/** readStorePayloadOnce's scattered outcome only: null when the payload is read whole instead. */
export async function readStoreScattered(
  storeDir: string | undefined,
  file: PayloadFile,
  byteLength: bigint,
): Promise<ScatteredPayload | null> {
  const read = await readStorePayloadOnce(storeDir, file, byteLength);
  return 'decoded' in read ? read : null;
}

async function readWhole(fh: FileHandle, base: number, length: number): Promise<WholePayload> {
  const bytes = allocate(length);
  return { bytes, digest: await readHashed(fh, [{ into: bytes, offset: base }]) };
}

/**
 * The payload with its large fields apart; null (nothing read yet) when it is small or its layout
 * cannot be named. Once read, a layout that does not line up gives the bytes read, whole.
 */
async function readScattered(
  fh: FileHandle,
  base: number,
  length: number,
): Promise<ScatteredPayload | WholePayload | null> {
  if (length < MIN_SCATTER_BYTES) return null;
  const fields = scanLayout(windowedFile(fh, base, length), length);
  if (fields === null || fields.length === 0) return null;
  const parts = partsOf(fields, length);
  const digest = await readHashed(
    fh,
    parts.map((p): HashedPiece => ({ into: p.into, offset: base + p.at })),
  );
  // The scan read the file before it was hashed: the layout must be the same in the hashed bytes.
  const skeleton = Buffer.concat(parts.filter((p) => p.field === null).map((p) => p.into));
  const decoded = sameLayout(scanLayout(skeletonSource(skeleton, fields), length), fields)
    ? decodeWithout(skeleton, fields, parts)
    : undefined;
  // Not this layout after all: the very bytes that were hashed, in payload order (no second read).
  return decoded === undefined ? { digest, bytes: Buffer.concat(parts.map((p) => p.into)) } : { digest, decoded };
}

/** The file's payload bytes as a layout source: small reads (a window at a time) at absolute offsets. */
function windowedFile(fh: FileHandle, base: number, length: number): LayoutSource {
  let window = Buffer.alloc(0);
  let windowAt = 0;
  return (start, end) => {
    if (start < windowAt || end > windowAt + window.length) {
      const n = Math.min(length - start, Math.max(SCAN_WINDOW_BYTES, end - start));
      window = Buffer.alloc(n);
      windowAt = start;
      for (let got = 0; got < n;) {
        const r = readOrZero(fh, window, got, n - got, base + start + got);
        if (r === 0) return null; // the file shrank, or a read error: the whole read then refuses
        got += r;
      }
    }
    return window.subarray(start - windowAt, end - windowAt);
  };
}

function readOrZero(fh: FileHandle, into: Buffer, at: number, n: number, position: number): number {
  try {
    return readSync(fh.fd, into, at, n, position);
  } catch {
    return 0;
  }
}

/** A run of the payload: a field's data (into memory of its own) or the bytes between fields. */
interface Part {
  readonly at: number;
  readonly into: Buffer;
  readonly field: BinField | null;
}

function partsOf(fields: readonly BinField[], length: number): Part[] {
  const parts: Part[] = [];
  let at = 0;
  for (const field of fields) {
    if (field.at > at) parts.push({ at, into: allocate(field.at - at), field: null });
    // Memory a model gave back after an earlier restore when one of this length waits, else fresh.
    parts.push({ at: field.at, into: reuse(field.length) ?? allocate(field.length), field });
    at = field.at + field.length;
  }
  if (length > at) parts.push({ at, into: allocate(length - at), field: null });
  return parts;
}

/** The payload with its fields' data cut out (`skeleton`), as a layout source at payload offsets. */
function skeletonSource(skeleton: Buffer, fields: readonly BinField[]): LayoutSource {
  return (start, end) => {
    let cut = 0;
    for (const f of fields) {
      if (end <= f.at) break;
      if (start < f.at + f.length) return null; // the walk asked for a field's data: not this layout
      cut += f.length;
    }
    return skeleton.subarray(start - cut, end - cut);
  };
}

function sameLayout(again: readonly BinField[] | null, fields: readonly BinField[]): boolean {
  return (
    again !== null &&
    again.length === fields.length &&
    again.every(
      (f, i) =>
        f.at === fields[i]!.at &&
        f.length === fields[i]!.length &&
        f.path.length === fields[i]!.path.length &&
        f.path.every((p, j) => p === fields[i]!.path[j]),
    )
  );
}

/**
 * Decode the skeleton with each field's bin32 length set to 0, then put each field's own memory at
 * its path in place of the empty bin decoded there. Undefined when the codec refuses the bytes or a
 * path does not lead to an empty bin (the caller then reads the payload whole and decodes it).
 */
function decodeWithout(skeleton: Buffer, fields: readonly BinField[], parts: readonly Part[]): unknown {
  let cut = 0;
  for (const f of fields) {
    skeleton.fill(0, f.at - cut - (BIN32_HEADER_BYTES - 1), f.at - cut);
    cut += f.length;
  }
  let decoded: unknown;
  try {
    decoded = decodeState(skeleton);
  } catch {
    return undefined;
  }
  for (const part of parts) {
    if (part.field === null) continue;
    const path = part.field.path;
    const holder = path.slice(0, -1).reduce<unknown>((v, p) => (isContainer(v) ? v[p as never] : undefined), decoded);
    const last = path[path.length - 1]!;
    const empty: unknown = isContainer(holder) ? holder[last as never] : undefined;
    if (!(empty instanceof Uint8Array) || empty.byteLength !== 0 || !Object.hasOwn(holder as object, last))
      return undefined;
    (holder as Record<string | number, unknown>)[last] = plainBytes(part.into);
    handOver(part.into);
  }
  return decoded;
}

const isContainer = (v: unknown): v is Record<string | number, unknown> => typeof v === 'object' && v !== null;
