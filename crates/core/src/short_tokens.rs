//! Whole-token lookups of short pieces, for the hot path.
//!
//! Most pieces are a token themselves, so the first thing encoding does with a piece is look it up
//! whole. In a map keyed by byte strings that lookup hashes the piece, then follows the slot's
//! pointer to compare the key's bytes: two cache misses in a table of 200,000 tokens. Here a token
//! of at most [`SHORT`] bytes is packed, with its length, into two words that sit in the slot
//! itself, so a lookup reads one slot and compares two integers.

use hashbrown::HashMap;
use rustc_hash::FxBuildHasher;

use crate::huge::HugePages;
use crate::Rank;

/// The longest token (in bytes) kept here.
pub const SHORT: usize = 15;

/// Up to [`SHORT`] bytes and their length: byte `i` in byte `i` (little-endian) of the pair of
/// words, the length in the last byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Packed(u64, u64);

#[inline]
fn word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("eight bytes"))
}

#[inline]
fn half(bytes: &[u8]) -> u64 {
    u64::from(u32::from_le_bytes(bytes.try_into().expect("four bytes")))
}

/// `bytes` (at most 8) as a little-endian word, with loads that may overlap instead of a copy.
#[inline]
fn low_word(bytes: &[u8]) -> u64 {
    let len = bytes.len();
    match len {
        8 => word(bytes),
        // Two overlapping 4-byte loads: the bytes they share land on the same positions.
        4..=7 => half(&bytes[..4]) | (half(&bytes[len - 4..]) << (8 * (len - 4))),
        _ => bytes.iter().rev().fold(0, |word, &byte| (word << 8) | u64::from(byte)),
    }
}

#[inline]
fn pack(bytes: &[u8]) -> Packed {
    debug_assert!(bytes.len() <= SHORT);
    let len = bytes.len();
    let (low, high) = if len > 8 { (word(&bytes[..8]), low_word(&bytes[8..])) } else { (low_word(bytes), 0) };
    Packed(low, high | ((len as u64) << 56))
}

/// Mergeable tokens of at most [`SHORT`] bytes -> id.
#[derive(Clone, Debug)]
pub struct ShortTokens {
    /// On huge pages (see [`crate::huge`]): looked up at random.
    ids: HashMap<Packed, Rank, FxBuildHasher, HugePages>,
}

impl ShortTokens {
    /// The short ones of `tokens`.
    pub fn new<'a>(tokens: impl Iterator<Item = (&'a [u8], Rank)>) -> Self {
        // Sized once: growing a map on huge pages zeroes a fresh 2 MB page at each doubling.
        let short: Vec<(Packed, Rank)> =
            tokens.filter(|(bytes, _)| bytes.len() <= SHORT).map(|(bytes, id)| (pack(bytes), id)).collect();
        let mut ids = HashMap::with_capacity_and_hasher_in(short.len(), FxBuildHasher, HugePages);
        ids.extend(short);
        Self { ids }
    }

    /// The id of `bytes`, which must be at most [`SHORT`] long.
    #[inline]
    pub fn get(&self, bytes: &[u8]) -> Option<Rank> {
        self.ids.get(&pack(bytes)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simple_pack(bytes: &[u8]) -> Packed {
        let mut buffer = [0u8; 16];
        buffer[..bytes.len()].copy_from_slice(bytes);
        buffer[15] = bytes.len() as u8;
        Packed(word(&buffer[..8]), word(&buffer[8..]))
    }

    #[test]
    fn packing_keeps_every_byte_and_the_length() {
        let bytes: Vec<u8> = (1..=SHORT as u8).map(|byte| byte.wrapping_mul(37)).collect();
        for len in 0..=SHORT {
            assert_eq!(pack(&bytes[..len]), simple_pack(&bytes[..len]), "length {len}");
        }
        // Trailing zero bytes are told apart by the length.
        assert_ne!(pack(b"a"), pack(b"a\0"));
        assert_ne!(pack(b""), pack(b"\0"));
    }

    #[test]
    fn finds_exactly_the_short_tokens() {
        let long = [b'x'; SHORT + 1];
        let tokens: Vec<(&[u8], Rank)> = vec![(b"a", 0), (b"a\0", 1), (b"hello world!", 2), (&long, 3)];
        let short = ShortTokens::new(tokens.iter().copied());
        assert_eq!(short.get(b"a"), Some(0));
        assert_eq!(short.get(b"a\0"), Some(1));
        assert_eq!(short.get(b"hello world!"), Some(2));
        assert_eq!(short.get(b"hello world"), None);
        assert_eq!(short.get(b""), None);
        assert_eq!(short.ids.len(), 3, "the long token is not kept");
    }
}
