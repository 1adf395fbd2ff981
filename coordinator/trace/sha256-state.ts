// SHA-256 (FIPS 180-4) in TypeScript whose running state can be saved and restored: node:crypto
// cannot export a hash's midstate, and the run's behaviour digest (SHA-256 over every step's
// canonical behaviour) must continue from a checkpoint without re-reading the trace before it.
// The trace records this state at each segment's end (trace-store.ts), a checkpoint at its boundary. Slower than
// node:crypto; used only where a state must outlive the process. NOT a general crypto library.
import { DetsimError } from '../../core/formats/errors.js';

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);
const INIT = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/** The saved state: the eight chaining words (hex), the bytes hashed so far, and the unprocessed tail (hex). */
export interface Sha256State {
  h: string;
  length: string;
  tail: string;
}

/**
 * A saved state read from a file (a checkpoint's task ledger), checked: 64 hex characters of
 * chaining words, a U64 length, and a tail of `length mod 64` bytes. Throws a DetsimError naming `field`.
 */
export function readSha256State(v: unknown, field: string): Sha256State {
  const o = (v ?? {}) as Partial<Record<keyof Sha256State, unknown>>;
  const ok =
    typeof v === 'object' &&
    v !== null &&
    Object.keys(v).length === 3 &&
    typeof o.h === 'string' &&
    /^[0-9a-f]{64}$/.test(o.h) &&
    typeof o.length === 'string' &&
    /^(0|[1-9][0-9]{0,19})$/.test(o.length) &&
    BigInt(o.length) < 1n << 64n &&
    typeof o.tail === 'string' &&
    /^(?:[0-9a-f]{2})*$/.test(o.tail) &&
    BigInt(o.tail.length / 2) === BigInt(o.length) % 64n;
  if (!ok)
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: not a SHA-256 state {h: 64 hex, length: U64, tail: hex of length mod 64 bytes}`,
      field,
    );
  return { h: o.h as string, length: o.length as string, tail: o.tail as string };
}

/** Eight chaining words as 64 hex digits (the words are kept as signed 32-bit integers). */
const hexWords = (h: Int32Array) => [...h].map((x) => (x >>> 0).toString(16).padStart(8, '0')).join('');

export class Sha256Stream {
  private readonly h = new Int32Array(INIT);
  private readonly w = new Int32Array(16);
  private readonly block = new Uint8Array(64);
  private fill = 0;
  private length = 0n;

  static from(state: Sha256State): Sha256Stream {
    const s = new Sha256Stream();
    for (let i = 0; i < 8; i++) s.h[i] = parseInt(state.h.slice(i * 8, i * 8 + 8), 16);
    s.length = BigInt(state.length);
    const tail = Buffer.from(state.tail, 'hex');
    s.block.set(tail);
    s.fill = tail.byteLength;
    return s;
  }

  update(data: string | Uint8Array): this {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    this.length += BigInt(bytes.byteLength);
    let off = 0;
    if (this.fill > 0) {
      const take = Math.min(64 - this.fill, bytes.byteLength);
      this.block.set(bytes.subarray(0, take), this.fill);
      this.fill += take;
      off = take;
      if (this.fill < 64) return this;
      compressBlocks(this.h, this.w, this.block, 0, 64);
      this.fill = 0;
    }
    off = compressBlocks(this.h, this.w, bytes, off, bytes.byteLength);
    this.block.set(bytes.subarray(off), 0);
    this.fill = bytes.byteLength - off;
    return this;
  }

  state(): Sha256State {
    return {
      h: hexWords(this.h),
      length: this.length.toString(),
      tail: Buffer.from(this.block.subarray(0, this.fill)).toString('hex'),
    };
  }

  /** The digest of what was hashed so far (the stream itself is unchanged). */
  digest(): string {
    const copy = Sha256Stream.from(this.state());
    const bits = copy.length * 8n;
    const pad = new Uint8Array((copy.fill < 56 ? 56 : 120) - copy.fill + 8);
    pad[0] = 0x80;
    for (let i = 0; i < 8; i++) pad[pad.length - 1 - i] = Number((bits >> BigInt(i * 8)) & 0xffn);
    copy.update(pad);
    return hexWords(copy.h);
  }
}

/**
 * FIPS 180-4's compression over every whole 64-byte block of `b[off, end)`, into `h`; returns the
 * offset after the last block. Signed 32-bit arithmetic throughout (an Int32Array, `| 0` after
 * each sum, rotations written out): V8 keeps it all in small integers, where a Uint32Array's words
 * above 2^31 would be doubles. The message schedule is made as the rounds need it, in a ring of
 * 16 words (`w`), from big-endian words read through a DataView.
 */
function compressBlocks(h: Int32Array, w: Int32Array, b: Uint8Array, off: number, end: number): number {
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  for (; off + 64 <= end; off += 64) {
    let a = h[0]!,
      c1 = h[1]!,
      c2 = h[2]!,
      d = h[3]!,
      e = h[4]!,
      f = h[5]!,
      g = h[6]!,
      hh = h[7]!;
    for (let i = 0; i < 64; i++) {
      let wi: number;
      if (i < 16) wi = w[i] = view.getInt32(off + 4 * i);
      else {
        const x = w[(i - 15) & 15]!;
        const y = w[(i - 2) & 15]!;
        const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        wi = w[i & 15] = (((s0 + w[i & 15]!) | 0) + ((s1 + w[(i - 7) & 15]!) | 0)) | 0;
      }
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (((((S1 + ((e & f) ^ (~e & g))) | 0) + hh) | 0) + ((K[i]! + wi) | 0)) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & c1) ^ (a & c2) ^ (c1 & c2))) | 0;
      hh = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c2;
      c2 = c1;
      c1 = a;
      a = (t1 + t2) | 0;
    }
    h[0] = (h[0]! + a) | 0;
    h[1] = (h[1]! + c1) | 0;
    h[2] = (h[2]! + c2) | 0;
    h[3] = (h[3]! + d) | 0;
    h[4] = (h[4]! + e) | 0;
    h[5] = (h[5]! + f) | 0;
    h[6] = (h[6]! + g) | 0;
    h[7] = (h[7]! + hh) | 0;
  }
  return off;
}
