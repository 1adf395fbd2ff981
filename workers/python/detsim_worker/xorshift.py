# Xorshift32, the kernel RNG (shifts 13, 17, 5; the i32 seed is the initial state verbatim), bit
# exact with core/formats/xorshift.ts and the Rust port. Deterministic; not cryptographic.
M32 = 0xFFFFFFFF


def to_i32(v: int) -> int:
    v &= M32
    return v - 0x100000000 if v & 0x80000000 else v


class Xorshift32:
    __slots__ = ('state',)

    def __init__(self, seed: int) -> None:
        self.state = to_i32(seed)  # the current state as a signed 32-bit integer (what a checkpoint stores)

    def next_uint(self) -> int:
        v = self.state & M32
        v ^= (v << 13) & M32
        v ^= v >> 17
        v ^= (v << 5) & M32
        self.state = to_i32(v)
        return v

    def next_f64(self) -> float:
        return self.next_uint() / 4294967296
