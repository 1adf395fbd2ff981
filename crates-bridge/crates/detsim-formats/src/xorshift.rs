// Xorshift32, the kernel RNG of the reference simulator (shifts 13, 17, 5; the i32 seed is the
// initial state verbatim), bit-exact with core/formats/xorshift.ts. Not cryptographic.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xorshift32 {
    /// The current state as a signed 32-bit integer (what a checkpoint stores).
    pub state: i32,
}

impl Xorshift32 {
    pub fn new(seed: i32) -> Self {
        Xorshift32 { state: seed }
    }

    /// The next value as an unsigned 32-bit integer.
    pub fn next_uint(&mut self) -> u32 {
        let mut v = self.state as u32;
        v ^= v << 13;
        v ^= v >> 17; // logical shift, as `>>>` in TypeScript
        v ^= v << 5;
        self.state = v as i32;
        v
    }

    /// A value in [0, 1): next_uint / 2^32.
    pub fn next_f64(&mut self) -> f64 {
        self.next_uint() as f64 / 4294967296.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_22222_gives_the_published_sequence() {
        let mut rng = Xorshift32::new(22222);
        let got: Vec<u32> = (0..4).map(|_| rng.next_uint()).collect();
        assert_eq!(got, [1374414818, 2413927497, 829730269, 1025812730]);
        assert_eq!(rng.state, 1025812730);
    }

    #[test]
    fn negative_seeds_and_f64_draws() {
        let mut rng = Xorshift32::new(-1);
        let u = rng.next_uint();
        assert_eq!(rng.state, u as i32);
        let mut again = Xorshift32::new(-1);
        assert_eq!(again.next_f64(), u as f64 / 4294967296.0);
        assert!((0.0..1.0).contains(&again.next_f64()));
    }
}
