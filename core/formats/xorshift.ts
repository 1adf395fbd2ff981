// Xorshift32, the kernel RNG of the reference simulator (shifts 13, 17, 5; the i32 seed is the
// initial state verbatim). Deterministic and bit-exact with the Rust port; not cryptographic.

/** The xorshift32 generator (shifts 13, 17, 5), bit-exact with the Rust port; not cryptographic. */
export class Xorshift32 {
  /** The current state as a signed 32-bit integer (what a checkpoint stores). */
  state: number;

  constructor(seed: number) {
    this.state = seed | 0;
  }

  /** The next value as an unsigned 32-bit integer. */
  nextUint(): number {
    let v = this.state;
    v ^= v << 13;
    v ^= v >>> 17;
    v ^= v << 5;
    this.state = v | 0;
    return v >>> 0;
  }

  /** A value in [0, 1): nextUint / 2^32. */
  nextF64(): number {
    return this.nextUint() / 4294967296;
  }
}
