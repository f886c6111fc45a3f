//! The crate's own small, seeded pseudo-random number generator.
//!
//! # Why not `rand`
//!
//! A workload must be *reproducible*: the same spec and seed must give the same requests in the
//! simulator and in the load generator, today and after a dependency upgrade (for what differs
//! across machines, see "Portability" below).
//! `rand`'s `StdRng` is documented as not portable across versions, and `rand_distr` may change
//! its sampling algorithms between releases. Everything this crate needs is a uniform `u64`
//! stream plus inverse-CDF transforms (see `math.rs` and `dist.rs`), so owning ~40 lines of a
//! well-known generator is cheaper than pinning and auditing two crates:
//!
//! - [`Rng`] is xoshiro256** (Blackman & Vigna, "Scrambled linear pseudorandom number
//!   generators", 2021): 256-bit state, period 2²⁵⁶ − 1, passes BigCrush; it is checked against
//!   the reference implementation's output in the tests.
//! - Its state is filled from a 64-bit seed by SplitMix64 (the seeding the xoshiro authors
//!   recommend), so every `u64` seed — 0 included — gives a good, distinct stream.
//!
//! Every sample consumes a fixed number of `u64`s (one per uniform), so a stream never depends on
//! floating-point branches of an earlier sample.
//!
//! # Portability
//!
//! The uniform stream is integer arithmetic, bit for bit the same everywhere. The transforms
//! that turn uniforms into executions and gaps (`exp`, `ln`, `ln_1p` here and in `math.rs` and
//! `dist.rs`, and the log-normal's mean that a `load` divides by) are the standard library's,
//! which calls the platform's libm: they are not correctly rounded, and C libraries (glibc,
//! musl, macOS), or versions of one, may differ in the last bit. The same binary with the same
//! libm therefore gives the same requests on every run and machine. Across libms the requests
//! are the same but for rare values whose rounding to whole nanoseconds tips the other way: an
//! execution or arrival instant 1 ns apart (and, as rarely, a log-normal or exponential sample
//! at its median in the other class).

/// SplitMix64 (Steele, Lea & Flood, 2014): used only to expand a 64-bit seed into xoshiro state
/// and to derive independent sub-streams.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A seeded xoshiro256** generator (see the module documentation for why it is not `rand`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose 256-bit state is expanded from `seed` by SplitMix64.
    pub fn seed_from_u64(seed: u64) -> Self {
        let mut sm = SplitMix64::new(seed);
        Self { s: [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()] }
    }

    /// A generator with exactly this state (must not be all zero; used by the known-answer test).
    #[cfg(test)]
    fn from_state(s: [u64; 4]) -> Self {
        Self { s }
    }

    /// The next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A uniform `f64` in `[0, 1)` with 53 bits of precision (one `u64` consumed).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform `f64` in the *open* interval `(0, 1)` (one `u64` consumed): the midpoints of the
    /// 2⁵³ equal cells, so inverse CDFs and logarithms never see 0 or 1.
    pub fn next_open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// An exponentially distributed value with the given mean (inverse CDF; one `u64` consumed).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (-self.next_open01()).ln_1p()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference output of Vigna's `xoshiro256starstar.c` from the state {1, 2, 3, 4} (the same
    /// vector the `rand_xoshiro` crate tests against).
    #[test]
    fn xoshiro256starstar_matches_reference() {
        let mut rng = Rng::from_state([1, 2, 3, 4]);
        let expected: [u64; 10] = [
            11520,
            0,
            1509978240,
            1215971899390074240,
            1216172134540287360,
            607988272756665600,
            16172922978634559625,
            8476171486693032832,
            10595114339597558777,
            2904607092377533576,
        ];
        for e in expected {
            assert_eq!(rng.next_u64(), e);
        }
    }

    /// Reference output of Vigna's `splitmix64.c` for seed 1234567.
    #[test]
    fn splitmix64_matches_reference() {
        let mut sm = SplitMix64::new(1234567);
        let expected: [u64; 5] = [
            6457827717110365317,
            3203168211198807973,
            9817491932198370423,
            4593380528125082431,
            16408922859458223821,
        ];
        for e in expected {
            assert_eq!(sm.next_u64(), e);
        }
    }

    #[test]
    fn uniforms_stay_in_range() {
        let mut rng = Rng::seed_from_u64(0);
        for _ in 0..10_000 {
            let a = rng.next_f64();
            assert!((0.0..1.0).contains(&a));
            let b = rng.next_open01();
            assert!(b > 0.0 && b < 1.0);
        }
    }
}
