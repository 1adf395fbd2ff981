// Where a state payload's large `bin` fields lie: a walk over the msgpack structure that reads only
// headers and map keys (never a bin's data), so a reader can put those fields into memory of their
// own (payload-scatter.ts). It decodes no value: the payload is still decoded by the state codec.
// A layout it cannot name exactly (a large bin under a key that is not a plain ASCII string, a
// repeated key, an ext value, a truncated or malformed header, too much non-bin data to walk)
// gives null, and the reader then reads the payload whole, as before.
// NOT the codec (state-codec.ts) and NOT file access.

/** Where a large bin's data lies in the payload, and the path of keys and indexes that leads to it. */
export interface BinField {
  /** Offset of the bin's first data byte in the payload (its 5-byte bin32 header precedes it). */
  readonly at: number;
  readonly length: number;
  readonly path: readonly (string | number)[];
}

/** The payload bytes [start, end) (a reader may refuse a range: then it returns null). */
export type LayoutSource = (start: number, end: number) => Uint8Array | null;

/** A bin of at least this many bytes is a field of its own (bin32: a bin16 holds at most 65,535). */
export const MIN_FIELD_BYTES = 64 * 1024;
/** Non-bin bytes (headers, keys, small values) a walk reads at most before it gives up. */
export const MAX_WALKED_BYTES = 1024 * 1024;
const MAX_DEPTH = 512;

/** A container being walked: entries left (a map counts keys and values), its path (null: not nameable). */
interface Open {
  left: number;
  readonly isMap: boolean;
  path: readonly (string | number)[] | null;
  index: number;
  /** The key whose value comes next (null: a key no path can name). */
  key: string | null;
  readonly keys: Set<string>;
}

/** What the value about to be read is: a map key, or a value at a path (null: no path names it). */
interface Role {
  readonly key: boolean;
  readonly path: readonly (string | number)[] | null;
}

class Unnameable extends Error {}
const giveUp = (): never => {
  throw new Unnameable();
};

/** The large bin fields of the `length`-byte payload `src` gives, in payload order; null when not nameable. */
export function scanLayout(src: LayoutSource, length: number): BinField[] | null {
  try {
    return new Walk(src, length).run();
  } catch (e) {
    if (e instanceof Unnameable) return null;
    throw e;
  }
}

class Walk {
  private at = 0;
  private walked = 0;
  private readonly stack: Open[] = [];
  private readonly fields: BinField[] = [];

  constructor(
    private readonly src: LayoutSource,
    private readonly length: number,
  ) {}

  run(): BinField[] {
    this.value();
    while (this.stack.length > 0) {
      if (this.stack[this.stack.length - 1]!.left === 0) this.stack.pop();
      else this.value();
    }
    if (this.at !== this.length) giveUp();
    return this.fields;
  }

  /** The bytes [at, at + n), counted against the walk's budget. */
  private take(n: number): Uint8Array {
    if (this.at + n > this.length) giveUp();
    this.walked += n;
    if (this.walked > MAX_WALKED_BYTES) giveUp();
    const bytes = this.src(this.at, this.at + n) ?? giveUp();
    if (bytes.length !== n) giveUp();
    this.at += n;
    return bytes;
  }

  private skip(n: number): void {
    if (n > 0) this.take(n);
  }

  private uint(bytes: number): number {
    let v = 0;
    for (const x of this.take(bytes)) v = v * 256 + x;
    return v;
  }

  /** One value at `at`: a scalar skipped, a container opened, a large bin recorded and stepped over. */
  private value(): void {
    const role = this.role();
    const t = this.take(1)[0]!;
    if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) return this.named(role, null);
    if (t <= 0x8f) return this.open(role, true, t & 0x0f);
    if (t <= 0x9f) return this.open(role, false, t & 0x0f);
    if (t <= 0xbf) return this.string(role, t & 0x1f);
    switch (t) {
      case 0xc4: // bin8, bin16: always small
      case 0xc5:
        this.skip(this.uint(t === 0xc4 ? 1 : 2));
        return this.named(role, null);
      case 0xc6:
        return this.bin(role, this.uint(4));
      case 0xca: // float32, float64
      case 0xcb:
        this.skip(t === 0xca ? 4 : 8);
        return this.named(role, null);
      case 0xcc: // uint8..64, int8..64
      case 0xcd:
      case 0xce:
      case 0xcf:
      case 0xd0:
      case 0xd1:
      case 0xd2:
      case 0xd3:
        this.skip(1 << (t & 0x03));
        return this.named(role, null);
      case 0xd9: // str8/16/32
      case 0xda:
      case 0xdb:
        return this.string(role, this.uint(1 << (t - 0xd9)));
      case 0xdc: // array16/32
      case 0xdd:
        return this.open(role, false, this.uint(t === 0xdc ? 2 : 4));
      case 0xde: // map16/32
      case 0xdf:
        return this.open(role, true, this.uint(t === 0xde ? 2 : 4));
      default:
        // 0xc1 (never used) and the ext types (0xc7-0xc9, 0xd4-0xd8), which the state codec never
        // writes: an extension may decode by its position in the payload, which cutting moves.
        return giveUp();
    }
  }

  private role(): Role {
    const top = this.stack[this.stack.length - 1];
    if (!top) return { key: false, path: [] };
    top.left--;
    if (!top.isMap) return { key: false, path: top.path && [...top.path, top.index++] };
    if (top.left % 2 === 1) return { key: true, path: null };
    const key = top.key;
    top.key = null;
    return { key: false, path: top.path && key !== null ? [...top.path, key] : null };
  }

  /** A value read: as a map key, `key` names the next value (null: nothing can name it). */
  private named(role: Role, key: string | null): void {
    if (!role.key) return;
    const top = this.stack[this.stack.length - 1]!;
    if (key === null) return this.unnameable(top);
    // The codec keeps one of two values under a repeated key: which one, a path cannot say.
    if (top.keys.has(key)) giveUp();
    top.keys.add(key);
    top.key = key;
  }

  /**
   * A key no path can name (not an ASCII string, or `__proto__`, which the codec renames): the
   * codec may store its value under a name another key also has, so no field of this map is named.
   */
  private unnameable(top: Open): void {
    const prefix = top.path;
    if (prefix !== null && this.fields.some((f) => prefix.every((p, i) => f.path[i] === p))) giveUp();
    top.path = null;
  }

  private string(role: Role, n: number): void {
    if (!role.key) return this.skip(n);
    let key: string | null = '';
    for (const b of this.take(n)) {
      if (b >= 0x80) key = null;
      else if (key !== null) key += String.fromCharCode(b);
    }
    this.named(role, key === '__proto__' ? null : key);
  }

  private open(role: Role, isMap: boolean, n: number): void {
    if (role.key) return giveUp(); // a container as a map key
    if (this.stack.length >= MAX_DEPTH) giveUp();
    const left = isMap ? n * 2 : n;
    if (left > this.length - this.at) giveUp(); // every entry takes at least one byte
    this.stack.push({ left, isMap, path: role.path, index: 0, key: null, keys: new Set() });
  }

  private bin(role: Role, n: number): void {
    if (n < MIN_FIELD_BYTES) {
      this.skip(n);
      return this.named(role, null);
    }
    if (role.key || role.path === null || role.path.length === 0) giveUp();
    if (this.at + n > this.length) giveUp();
    this.fields.push({ at: this.at, length: n, path: role.path! });
    this.at += n;
  }
}
