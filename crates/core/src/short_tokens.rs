//! Whole-token lookups of short pieces, for the hot path.
//!
//! Most pieces are a token themselves, so the first thing encoding does with a piece is look it up
//! whole. In a map keyed by byte strings that lookup hashes the piece, then follows the slot's
//! pointer to compare the key's bytes: two cache misses in a table of 200,000 tokens. Here a token
//! of at most [`SHORT`] bytes is packed, with its length, into two words that sit in the slot
//! itself beside its id, so a lookup reads one slot and compares two integers.
//!
//! The table is open-addressed (linear probing, at most three eighths full) so that a piece's first
//! slot is known from its bytes alone: [`ShortTokens::prefetch`] asks the memory for it some pieces
//! before the lookup, and the lookup finds it in the core's cache.

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

/// One slot: a packed token and its id ([`EMPTY_ID`] for an empty slot).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Slot {
    low: u64,
    high: u64,
    id: Rank,
}

/// The id of an empty slot: above every token id (see `crate::model::MAX_ID`).
const EMPTY_ID: Rank = Rank::MAX;
const EMPTY: Slot = Slot { low: 0, high: 0, id: EMPTY_ID };

/// Mergeable tokens of at most [`SHORT`] bytes -> id.
#[derive(Clone, Debug)]
pub struct ShortTokens {
    /// On huge pages (see [`crate::huge`]): looked up at random. A power of two of them.
    slots: allocator_api2::boxed::Box<[Slot], HugePages>,
    /// How many bits of the hash choose the first slot.
    bits: u32,
}

#[inline]
fn hash(key: Packed, bits: u32) -> usize {
    let mixed = (key.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key.1).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    (mixed >> (64 - bits)) as usize
}

impl ShortTokens {
    /// The short ones of `tokens` (ids at most `crate::model::MAX_ID`).
    pub fn new<'a>(tokens: impl Iterator<Item = (&'a [u8], Rank)>) -> Self {
        let short: Vec<(Packed, Rank)> =
            tokens.filter(|(bytes, _)| bytes.len() <= SHORT).map(|(bytes, id)| (pack(bytes), id)).collect();
        // At most three eighths full: a lookup of a token reads 1.3 slots on average, of a piece
        // that is none 1.8, nearly always on one cache line.
        let bits = ((short.len() * 8 / 3).max(16)).next_power_of_two().trailing_zeros();
        let mut slots = crate::huge::filled(EMPTY, 1 << bits);
        let mask = slots.len() - 1;
        for (key, id) in short {
            debug_assert!(id != EMPTY_ID);
            let mut at = hash(key, bits);
            while slots[at].id != EMPTY_ID {
                at = (at + 1) & mask;
            }
            slots[at] = Slot { low: key.0, high: key.1, id };
        }
        Self { slots, bits }
    }

    /// The id of `bytes`, which must be at most [`SHORT`] long.
    #[inline]
    pub fn get(&self, bytes: &[u8]) -> Option<Rank> {
        let key = pack(bytes);
        let mask = self.slots.len() - 1;
        let mut at = hash(key, self.bits);
        loop {
            let slot = &self.slots[at];
            if slot.low == key.0 && slot.high == key.1 && slot.id != EMPTY_ID {
                return Some(slot.id);
            }
            if slot.id == EMPTY_ID {
                return None;
            }
            at = (at + 1) & mask;
        }
    }

    /// Asks the memory for the slot where the lookup of `bytes` (at most [`SHORT`] long) starts,
    /// without waiting for it.
    #[inline]
    pub fn prefetch(&self, bytes: &[u8]) {
        let at = hash(pack(bytes), self.bits);
        crate::huge::prefetch(&self.slots[at]);
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
        assert_eq!(short.slots.iter().filter(|slot| slot.id != EMPTY_ID).count(), 3, "the long token is not kept");
    }
}
