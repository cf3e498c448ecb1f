//! Merged pieces the piece cache's slots cannot hold (more than [`crate::tuning::CACHED_PIECE_BYTES`]
//! bytes, or more than [`crate::tuning::CACHED_IDS`] ids): each thread's cache keeps them here, by
//! their whole bytes, so that a long word, a run of CJK characters or a word of a script with few
//! tokens seen before costs a hash and a compare instead of its merges.
//!
//! Each piece's ids and key sit together in one array (the ids first, then the key's bytes packed
//! into whole ids' room), indexed by an open-addressed table of 12-byte entries: a lookup reads an
//! entry and one stretch of memory. The store holds at most [`LONG_PIECES_FIRST`] bytes of them at
//! first (pieces longer than [`LONG_PIECE_MOST`] bytes are not kept); when the next one does not
//! fit its bound doubles, claimed from the growth budget the piece caches share (`crate::cache`),
//! up to [`LONG_PIECES_BYTES`]; past that, or without budget, it starts over empty. So its memory is
//! bounded whatever the text, and grows only as long pieces arrive. Like the piece cache it only
//! stores what the model gives for the same bytes (what the merge loop returned, or a token's own
//! id): it cannot change an id.

use std::hash::Hasher;

use rustc_hash::FxHasher;

pub use crate::tuning::{LONG_PIECES_BYTES, LONG_PIECES_FIRST, LONG_PIECE_MOST};
use crate::Rank;

/// Where one piece's ids and key are; `key_len` 0 marks an empty entry.
#[derive(Clone, Copy, Default)]
struct Entry {
    /// Where its ids start in the array; its key follows them.
    at: u32,
    key_len: u16,
    ids_len: u16,
    /// High bits of the key's hash: most entries that are not the piece are passed without
    /// reading its key.
    tag: u32,
}

/// Entries of a store's first table (a power of two); it doubles while half full.
const FIRST_ENTRIES: usize = 1 << 10;

const _: () = assert!(
    LONG_PIECE_MOST <= u16::MAX as usize
        && LONG_PIECES_BYTES <= u32::MAX as usize
        && LONG_PIECES_BYTES.is_multiple_of(LONG_PIECES_FIRST)
        && (LONG_PIECES_BYTES / LONG_PIECES_FIRST).is_power_of_two()
);

pub struct LongPieces {
    entries: Vec<Entry>,
    /// Each kept piece's ids, then its key's bytes in `key_len.div_ceil(4)` ids' room.
    data: Vec<Rank>,
    held: usize,
    /// Bytes of keys and ids it may hold now: [`LONG_PIECES_FIRST`], doubled within the growth
    /// budget up to [`LONG_PIECES_BYTES`] (what it grew by is released when it drops).
    bound: usize,
}

impl Default for LongPieces {
    fn default() -> Self {
        Self { entries: Vec::new(), data: Vec::new(), held: 0, bound: LONG_PIECES_FIRST }
    }
}

impl Drop for LongPieces {
    fn drop(&mut self) {
        crate::cache::release_growth(self.bound - LONG_PIECES_FIRST);
    }
}

fn hash(piece: &[u8]) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(piece);
    hasher.finish()
}

/// An entry's place in a table of `mask + 1` entries: FxHash mixes upward, so the bits above the
/// lowest 20 (the tag is the top 32).
#[inline]
fn home(hashed: u64, mask: usize) -> usize {
    (hashed >> 20) as usize & mask
}

/// Where a store's entry for a piece is, kept by the code that asks for it later: its address
/// only, not a borrow, so a store that grows meanwhile only makes a prefetch from it useless (a
/// prefetch reads nothing and cannot fault).
#[derive(Clone, Copy)]
pub struct EntryPrefetcher {
    entries: *const Entry,
    mask: usize,
}

impl EntryPrefetcher {
    /// Brings the line of the entry `piece` starts its probe at into the core's second-level cache.
    #[inline(always)]
    pub fn prefetch(&self, piece: &[u8]) {
        if self.mask != 0 {
            crate::fused::prefetch(self.entries.wrapping_add(home(hash(piece), self.mask)), false);
        }
    }
}

impl LongPieces {
    /// The key of `entry` (one the store holds).
    #[inline]
    fn key(&self, entry: &Entry) -> &[u8] {
        let words = &self.data[entry.at as usize + usize::from(entry.ids_len)..][..usize::from(entry.key_len).div_ceil(4)];
        // SAFETY: the words hold the key's bytes, then zeros: `key_len` bytes are within them,
        // and any bytes are valid `u8`s.
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), usize::from(entry.key_len)) }
    }

    /// Where `piece` is, or the empty entry where it would go.
    fn find(&self, piece: &[u8], hashed: u64) -> Result<usize, usize> {
        let mask = self.entries.len() - 1;
        let tag = (hashed >> 32) as u32;
        let mut at = home(hashed, mask);
        loop {
            let entry = &self.entries[at];
            if entry.key_len == 0 {
                return Err(at);
            }
            if entry.tag == tag && usize::from(entry.key_len) == piece.len() && self.key(entry) == piece {
                return Ok(at);
            }
            at = (at + 1) & mask;
        }
    }

    /// Something that prefetches where a piece's entry would be (nothing while the store is empty).
    pub fn prefetcher(&self) -> EntryPrefetcher {
        let mask = if self.held == 0 { 0 } else { self.entries.len() - 1 };
        EntryPrefetcher { entries: self.entries.as_ptr(), mask }
    }

    /// The ids `piece` merged to, if kept.
    #[inline]
    pub fn get(&self, piece: &[u8]) -> Option<&[Rank]> {
        if self.held == 0 || piece.len() > LONG_PIECE_MOST {
            return None;
        }
        let entry = self.entries[self.find(piece, hash(piece)).ok()?];
        Some(&self.data[entry.at as usize..][..usize::from(entry.ids_len)])
    }

    /// Bytes of the array a piece of `key_len` bytes and `ids` ids takes.
    fn size(key_len: usize, ids: usize) -> usize {
        (ids + key_len.div_ceil(4)) * std::mem::size_of::<Rank>()
    }

    /// Keeps `piece` -> `ids` (after a [`LongPieces::get`] of it missed); starts over when it would
    /// pass its bound. Pieces or id lists too long to keep are ignored.
    pub fn insert(&mut self, piece: &[u8], ids: &[Rank]) {
        if piece.is_empty() || piece.len() > LONG_PIECE_MOST || ids.len() > LONG_PIECE_MOST {
            return;
        }
        let size = Self::size(piece.len(), ids.len());
        if self.data.len() * std::mem::size_of::<Rank>() + size > self.bound && !self.grow_bound() {
            self.held = 0;
            self.data.clear();
            self.entries.fill(Entry::default());
        }
        if (self.held + 1) * 2 > self.entries.len() {
            self.grow();
        }
        let hashed = hash(piece);
        let Err(at) = self.find(piece, hashed) else {
            return;
        };
        self.entries[at] = Entry { at: self.data.len() as u32, key_len: piece.len() as u16, ids_len: ids.len() as u16, tag: (hashed >> 32) as u32 };
        self.data.extend_from_slice(ids);
        self.data.extend(piece.chunks(4).map(|word| {
            let mut bytes = [0u8; 4];
            bytes[..word.len()].copy_from_slice(word);
            Rank::from_ne_bytes(bytes)
        }));
        self.held += 1;
    }

    /// Doubles the bound, keeping every piece, when below [`LONG_PIECES_BYTES`] and the growth
    /// budget has room.
    fn grow_bound(&mut self) -> bool {
        let grows = self.bound < LONG_PIECES_BYTES && crate::cache::claim_growth(self.bound);
        if grows {
            self.bound *= 2;
        }
        grows
    }

    /// Doubles the table (the first: [`FIRST_ENTRIES`]), placing every kept piece again.
    fn grow(&mut self) {
        let size = (self.entries.len() * 2).max(FIRST_ENTRIES);
        let old = std::mem::replace(&mut self.entries, vec![Entry::default(); size]);
        for entry in old.into_iter().filter(|entry| entry.key_len != 0) {
            let key = self.key(&entry);
            let Err(at) = self.find(key, hash(key)) else {
                unreachable!("a kept piece is kept once")
            };
            self.entries[at] = entry;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(n: usize, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| b"abcdefghijklmnopqrstuvwxyz"[(n * 7 + i * (n % 5 + 1)) % 26] ^ (n >> 8) as u8)
            .collect()
    }

    #[test]
    fn kept_pieces_come_back_with_their_ids_and_others_do_not() {
        let mut store = LongPieces::default();
        assert_eq!(store.get(b"never kept, and long enough"), None);
        let pieces: Vec<Vec<u8>> = (0..5000).map(|n| piece(n, 31 + n % 200)).collect();
        for (n, key) in pieces.iter().enumerate() {
            if store.get(key).is_none() {
                store.insert(key, &[n as Rank, 7, n as Rank * 3]);
            }
        }
        for (n, key) in pieces.iter().enumerate() {
            // A piece made twice (equal bytes) keeps the ids of its first insertion.
            let first = pieces.iter().position(|other| other == key).unwrap();
            assert_eq!(
                store.get(key),
                Some(&[first as Rank, 7, first as Rank * 3][..]),
                "piece {n}"
            );
        }
        let mut longer = pieces[0].clone();
        longer.push(b'x');
        assert_eq!(store.get(&longer), None);
        assert_eq!(store.get(&pieces[0][1..]), None);
    }

    #[test]
    fn the_store_starts_over_within_its_bound_and_skips_what_it_cannot_hold() {
        let mut store = LongPieces::default();
        let mut n = 0;
        let mut most = 0;
        while n < 4 * LONG_PIECES_BYTES / 300 {
            let key = piece(n, 300);
            store.insert(&key, &[1; 20]);
            assert_eq!(store.get(&key), Some(&[1; 20][..]));
            most = most.max(store.data.len() * 4);
            n += 1;
        }
        assert!(most <= LONG_PIECES_BYTES, "{most}");
        assert!(most > LONG_PIECES_FIRST, "{most}: its bound doubled within the growth budget");
        assert!(store.held < n, "it started over");
        let too_long = vec![b'a'; LONG_PIECE_MOST + 1];
        store.insert(&too_long, &[1]);
        assert_eq!(store.get(&too_long), None);
    }
}
