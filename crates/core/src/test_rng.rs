//! Pseudo-random numbers for the tests: the same sequence for the same seed on every run, so a
//! failure repeats.

/// A xorshift64 generator started at `seed` (which must not be 0).
pub(crate) fn numbers(mut seed: u64) -> impl FnMut() -> u64 {
    assert_ne!(seed, 0, "xorshift never leaves 0");
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
