//! A bounded cache of merged pieces: piece bytes -> the ids the merge loop made of them.
//!
//! Natural text repeats its words, so most pieces that are not tokens themselves have been merged
//! before. Merging a piece costs a hash lookup per pair per step in a table of hundreds of thousands of pairs;
//! a cache hit costs one hash and one compare in a table about the size of the core's L2 cache.
//!
//! The cache only ever stores what [`crate::merge::MergeTable::encode_piece`] returned for the
//! same bytes, so it cannot change a result; it is a pure function of the model.
//!
//! Layout: a fixed array of slots, each holding its key and ids inline (no allocation after the
//! first use), two-way set associative: a piece may sit in one of two neighbouring slots, and a
//! new piece replaces the one used less recently. Pieces longer than [`KEY_BYTES`] or merging to
//! more than [`MAX_IDS`] ids are not cached. Beside the slots, a small array of tags (16 hash bits
//! per slot) lets a lookup skip the slots when no tag matches: only a matching tag's slot is read
//! and its key compared, so a tag never decides a hit.
//!
//! Threads: a model keeps several caches ([`ShardedCache`]); a call locks one for its whole
//! duration, chosen by the calling thread, and encodes uncached if every one it tries is busy.
//! So one cached lookup costs no atomic operation, and threads never wait on each other.

use std::cell::Cell;
use std::fmt;
use std::hash::Hasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use rustc_hash::FxHasher;

use crate::huge::HugePages;
use crate::Rank;

/// The longest piece (in bytes) the cache holds, and the most ids it may merge to (see `tuning`).
pub use crate::tuning::{CACHED_IDS as MAX_IDS, CACHED_PIECE_BYTES as KEY_BYTES};
use crate::tuning::{CACHE_SHARDS as SHARDS, CACHE_SLOTS as SLOTS};

#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    /// Key length; 0 marks an empty slot (the empty piece is never looked up).
    key_len: u8,
    n_ids: u8,
    key: [u8; KEY_BYTES],
    ids: [Rank; MAX_IDS],
}

const EMPTY: Slot = Slot { key_len: 0, n_ids: 0, key: [0; KEY_BYTES], ids: [0; MAX_IDS] };

/// One thread's cache.
pub struct PieceCache {
    /// On huge pages (see [`crate::huge`]): looked up at random.
    slots: allocator_api2::boxed::Box<[Slot], HugePages>,
    /// One bit per set: which of its two slots was used last.
    recent: Box<[u64]>,
    /// Per set, a 16-bit tag for each of its two slots (way 0 in the low half): bits of the
    /// key's hash above the set's, or 0 for an empty slot (see [`tag_of`]). 128 KB, so it stays
    /// in the core's cache while the slots (4.2 MB) mostly do not: a lookup reads the slot only
    /// when its tag matches, and a piece that is not cached (a third of lookups on held-out text,
    /// each followed by a merge) costs no read of the slots at all.
    tags: Box<[u32]>,
}

#[inline]
fn hash(piece: &[u8]) -> usize {
    let mut hasher = FxHasher::default();
    hasher.write(piece);
    // FxHash mixes upward; the high bits are the well-mixed ones.
    (hasher.finish() >> 20) as usize
}

/// The set `piece` may sit in, and its tag: the 16 hash bits above the set's, with the lowest set
/// so that it is never 0 (an empty slot's tag).
#[inline]
fn place(piece: &[u8]) -> (usize, u32) {
    let hashed = hash(piece);
    (hashed & (SLOTS / 2 - 1), ((hashed >> SET_BITS) as u32 & 0xFFFF) | 1)
}

/// How many of a hash's low bits choose the set.
const SET_BITS: u32 = (SLOTS / 2).trailing_zeros();
// `hash` keeps 44 bits: enough for the set and a 16-bit tag above it.
const _: () = assert!(SET_BITS + 16 <= 44);

impl PieceCache {
    fn new() -> Self {
        Self {
            slots: crate::huge::filled(EMPTY, SLOTS),
            recent: vec![0; SLOTS / 2 / 64].into_boxed_slice(),
            tags: vec![0; SLOTS / 2].into_boxed_slice(),
        }
    }

    /// The cached ids of `piece`, if it is cached.
    #[inline]
    pub fn get(&mut self, piece: &[u8]) -> Option<&[Rank]> {
        if piece.len() > KEY_BYTES || piece.is_empty() {
            return None;
        }
        let (set, tag) = place(piece);
        for way in 0..2 {
            if (self.tags[set] >> (16 * way)) & 0xFFFF != tag {
                continue;
            }
            let slot = &self.slots[set * 2 + way];
            if usize::from(slot.key_len) == piece.len() && &slot.key[..piece.len()] == piece {
                self.mark(set, way);
                let slot = &self.slots[set * 2 + way];
                return Some(&slot.ids[..usize::from(slot.n_ids)]);
            }
        }
        None
    }

    /// Remembers that `piece` merges to `ids` (ignored when either is too long to hold).
    #[inline]
    pub fn insert(&mut self, piece: &[u8], ids: &[Rank]) {
        if piece.len() > KEY_BYTES || piece.is_empty() || ids.len() > MAX_IDS {
            return;
        }
        let (set, tag) = place(piece);
        // Replace the slot not used last.
        let way = 1 - self.last_used(set);
        let shift = 16 * way;
        self.tags[set] = (self.tags[set] & !(0xFFFF << shift)) | (tag << shift);
        let slot = &mut self.slots[set * 2 + way];
        slot.key_len = piece.len() as u8;
        slot.key[..piece.len()].copy_from_slice(piece);
        slot.n_ids = ids.len() as u8;
        slot.ids[..ids.len()].copy_from_slice(ids);
        self.mark(set, way);
    }

    #[inline]
    fn last_used(&self, set: usize) -> usize {
        ((self.recent[set / 64] >> (set % 64)) & 1) as usize
    }

    #[inline]
    fn mark(&mut self, set: usize, way: usize) {
        let bit = 1u64 << (set % 64);
        if way == 1 {
            self.recent[set / 64] |= bit;
        } else {
            self.recent[set / 64] &= !bit;
        }
    }
}

/// A model's caches, one per concurrently encoding thread (up to [`SHARDS`]); each is allocated on
/// first use. Cloning a model gives the clone empty caches.
pub struct ShardedCache {
    shards: Box<[Shard]>,
}

/// One cache and its lock, alone on its cache lines: threads locking neighbouring shards must not
/// write to the same line (false sharing).
#[repr(align(128))]
struct Shard(Mutex<Option<PieceCache>>);

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's preferred shard, assigned round-robin on first use.
    static THREAD_SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn thread_shard() -> usize {
    THREAD_SHARD.with(|shard| {
        if shard.get() == usize::MAX {
            shard.set(NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
        }
        shard.get()
    })
}

/// A locked cache, for the duration of one encode call.
pub struct CacheGuard<'a>(MutexGuard<'a, Option<PieceCache>>);

impl CacheGuard<'_> {
    #[inline]
    pub fn cache(&mut self) -> &mut PieceCache {
        self.0.get_or_insert_with(PieceCache::new)
    }
}

impl ShardedCache {
    pub fn new() -> Self {
        Self { shards: (0..SHARDS).map(|_| Shard(Mutex::new(None))).collect() }
    }

    /// This thread's cache, or a free one near it; `None` when all tried are busy.
    pub fn lock(&self) -> Option<CacheGuard<'_>> {
        let first = thread_shard();
        for attempt in 0..4 {
            match self.shards[(first + attempt) % SHARDS].0.try_lock() {
                Ok(guard) => return Some(CacheGuard(guard)),
                // A panic while a cache was locked cannot leave it inconsistent with the model
                // (a slot is written only after its ids are known), but drop it to be safe.
                Err(TryLockError::Poisoned(poisoned)) => {
                    let mut guard = poisoned.into_inner();
                    *guard = None;
                    return Some(CacheGuard(guard));
                }
                Err(TryLockError::WouldBlock) => {}
            }
        }
        None
    }

    /// Empties every cache that is not in use (frees their memory).
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            if let Ok(mut guard) = shard.0.try_lock() {
                *guard = None;
            }
        }
    }
}

impl Default for ShardedCache {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for ShardedCache {
    fn clone(&self) -> Self {
        Self::new()
    }
}

impl fmt::Debug for ShardedCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ShardedCache")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_what_was_inserted_and_refuses_what_is_too_long() {
        let mut cache = PieceCache::new();
        assert_eq!(cache.get(b"hello"), None);
        cache.insert(b"hello", &[1, 2]);
        assert_eq!(cache.get(b"hello"), Some(&[1, 2][..]));
        assert_eq!(cache.get(b"hell"), None);
        let long = [b'x'; KEY_BYTES + 1];
        cache.insert(&long, &[7]);
        assert_eq!(cache.get(&long), None);
        cache.insert(b"many", &[0; MAX_IDS + 1]);
        assert_eq!(cache.get(b"many"), None);
    }

    #[test]
    fn a_full_set_keeps_the_most_recently_used() {
        let mut cache = PieceCache::new();
        // Find three keys in the same set.
        let target = place(b"k0").0;
        let keys: Vec<Vec<u8>> = (0..)
            .map(|i: u32| format!("k{i}").into_bytes())
            .filter(|key| place(key).0 == target)
            .take(3)
            .collect();
        cache.insert(&keys[0], &[0]);
        cache.insert(&keys[1], &[1]);
        assert_eq!(cache.get(&keys[0]), Some(&[0][..])); // keys[0] is now the recent one
        cache.insert(&keys[2], &[2]); // evicts keys[1]
        assert_eq!(cache.get(&keys[0]), Some(&[0][..]));
        assert_eq!(cache.get(&keys[1]), None);
        assert_eq!(cache.get(&keys[2]), Some(&[2][..]));
    }

    #[test]
    fn a_matching_tag_alone_is_not_a_hit() {
        // Keys that share a set and a tag are too rare to search for (one in 2**31), so the test
        // gives a cached piece's slot the tag of another key of its set: the lookup of that key
        // then reads the slot, and the key compare refuses it.
        let mut cache = PieceCache::new();
        let first = b"t0".to_vec();
        let (set, first_tag) = place(&first);
        let other = (1..)
            .map(|i: u32| format!("t{i}").into_bytes())
            .find(|key| place(key).0 == set && place(key).1 != first_tag)
            .expect("another key of the set");
        cache.insert(&first, &[1]);
        assert_eq!(cache.get(&other), None, "its tag differs: the slot is not read");
        cache.tags[set] = place(&other).1 * 0x1_0001;
        assert_eq!(cache.get(&other), None, "its tag matches, its key does not");
        assert_eq!(cache.get(&first), None, "a slot whose tag differs is not read");
    }

    #[test]
    fn busy_shards_are_skipped() {
        let cache = ShardedCache::new();
        let held: Vec<_> = (0..4).map(|_| cache.lock().expect("a free shard")).collect();
        assert!(cache.lock().is_none(), "a thread tries four shards, all held");
        drop(held);
        assert!(cache.lock().is_some());
    }
}
