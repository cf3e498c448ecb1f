//! Finding where a token splits into two tokens, in time linear in its length.
//!
//! A rank model allows every split of a token whose two halves are tokens, and SentencePiece every
//! split of a piece into two pieces. Looking each half up in a hash map hashes it whole: quadratic in
//! the token's length, so a file with one megabyte-long token took minutes to load. [`Halves`]
//! instead keeps a rolling hash (polynomial modulo 2^61 - 1, with a base drawn per process, so inputs
//! cannot be made to collide) of every token, computes the hashes of all prefixes and suffixes of a
//! token in one pass each, and reports only the splits whose halves both hash like a token; callers
//! confirm those with their exact maps.

use std::hash::BuildHasher;

use rustc_hash::FxHashSet;

const MODULUS: u64 = (1 << 61) - 1;

#[cfg(test)]
thread_local! {
    /// How many times [`multiply`] ran on this thread: the tests' measure of work, which (unlike a
    /// clock) does not depend on how busy the machine is.
    static MULTIPLICATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn multiply(a: u64, b: u64) -> u64 {
    #[cfg(test)]
    MULTIPLICATIONS.with(|count| count.set(count.get() + 1));
    let product = u128::from(a) * u128::from(b);
    let folded = (product & u128::from(MODULUS)) + (product >> 61);
    let folded = folded as u64;
    if folded >= MODULUS {
        folded - MODULUS
    } else {
        folded
    }
}

fn add(a: u64, b: u64) -> u64 {
    let sum = a + b;
    if sum >= MODULUS {
        sum - MODULUS
    } else {
        sum
    }
}

/// The rolling hashes of a set of tokens.
#[derive(Clone, Debug)]
pub struct Halves {
    base: u64,
    known: FxHashSet<u64>,
}

impl Halves {
    pub fn new<'a>(tokens: impl IntoIterator<Item = &'a [u8]>) -> Self {
        // A base in [256, MODULUS - 1], different in every process.
        let random = std::collections::hash_map::RandomState::new().hash_one(0x68665f627065u64);
        let base = 256 + random % (MODULUS - 257);
        let mut halves = Self { base, known: FxHashSet::default() };
        let known = tokens.into_iter().map(|token| halves.hash(token)).collect();
        halves.known = known;
        halves
    }

    fn hash(&self, bytes: &[u8]) -> u64 {
        // Bytes count from 1, so that runs of zero bytes of different lengths differ.
        bytes.iter().fold(0, |hash, &byte| add(multiply(hash, self.base), u64::from(byte) + 1))
    }

    /// The split points `at` (`0 < at < token.len()`) where both `token[..at]` and `token[at..]`
    /// hash like a token: every split into two tokens, and (with negligible probability) a few more.
    pub fn candidates(&self, token: &[u8]) -> Vec<usize> {
        let length = token.len();
        if length < 2 {
            return Vec::new();
        }
        let mut prefix_known = vec![false; length];
        let mut hash = 0;
        for (at, &byte) in token[..length - 1].iter().enumerate() {
            hash = add(multiply(hash, self.base), u64::from(byte) + 1);
            prefix_known[at + 1] = self.known.contains(&hash);
        }
        let (mut hash, mut power) = (0, 1);
        let mut splits = Vec::new();
        for at in (1..length).rev() {
            hash = add(hash, multiply(u64::from(token[at]) + 1, power));
            power = multiply(power, self.base);
            if prefix_known[at] && self.known.contains(&hash) {
                splits.push(at);
            }
        }
        splits.reverse();
        splits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute_force(tokens: &[&[u8]], token: &[u8]) -> Vec<usize> {
        (1..token.len()).filter(|&at| tokens.contains(&&token[..at]) && tokens.contains(&&token[at..])).collect()
    }

    #[test]
    fn finds_the_splits_into_two_tokens() {
        let tokens: Vec<&[u8]> = vec![b"a", b"b", b"ab", b"abab", b"ba", b"aba", b"\0", b"\0\0", b"\0\0\0"];
        let halves = Halves::new(tokens.iter().copied());
        for token in [&b"abab"[..], b"ab", b"aba", b"bab", b"a", b"", b"\0\0\0", b"\0\0\0\0", b"abba"] {
            assert_eq!(halves.candidates(token), brute_force(&tokens, token), "{token:?}");
        }
    }

    #[test]
    fn long_tokens_take_linear_time() {
        // Work counted in multiplications, not timed: hashing each half whole would be quadratic
        // (about length^2 / 2 multiplications: 5 * 10^11 here), the rolling hashes take three per byte.
        let long = vec![b'a'; 1_000_000];
        let halves = Halves::new([&b"a"[..], &long[..1000], &long[..]]);
        for token in [&long[..1001], &long[..]] {
            let before = MULTIPLICATIONS.with(std::cell::Cell::get);
            let splits = halves.candidates(token);
            let work = MULTIPLICATIONS.with(std::cell::Cell::get) - before;
            assert!(work <= 3 * token.len() as u64, "{work} multiplications for {} bytes", token.len());
            let expected: Vec<usize> = if token.len() == 1001 { vec![1, 1000] } else { Vec::new() };
            assert_eq!(splits, expected);
        }
    }
}
