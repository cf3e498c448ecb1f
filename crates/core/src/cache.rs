//! A bounded cache of merged pieces: piece bytes -> the ids the merge loop made of them.
//!
//! Natural text repeats its words, so most pieces that are not tokens themselves have been merged
//! before. Merging a piece costs a hash lookup per pair per step in a table of hundreds of thousands of pairs;
//! a cache hit costs one hash and one compare in a table about the size of the core's L2 cache.
//!
//! The cache only ever stores what [`crate::merge::MergeTable::encode_piece`] returned for the
//! same bytes, or, for a model whose pieces that are tokens encode as themselves, a token's own id
//! (`Model::encode_long_piece`), so it cannot change a result; it is a pure function of the model.
//!
//! Layout: a fixed array of slots, each holding its key and ids inline (no allocation after the
//! first use), two-way set associative: a piece may sit in one of two neighbouring slots, and a
//! new piece replaces the one used less recently. Pieces longer than [`KEY_BYTES`], or merging to
//! more than [`MAX_IDS`] ids (more than [`NARROW_IDS`], or any of them of 65,536 or more), go to a
//! store of long pieces beside it ([`crate::long_pieces`]).
//! Beside the slots, a small array of tags (16 hash bits per slot) lets a lookup skip the slots when
//! no tag matches: only a matching tag's slot is read and its key compared, so a tag never decides a
//! hit.
//!
//! Size: a cache starts at [`SLOTS`] slots and doubles, up to [`MAX_SLOTS`], when the pieces it
//! dropped to make room come back: text read again (a corpus in several passes, the same documents
//! in a service) whose pieces do not fit. Over each [`WINDOW`] lookups it counts the misses of
//! pieces it had dropped before, and grows when they are more than one lookup in [`GROW_WHEN`]. It
//! counts on a sample (the pieces of one hash in [`TRACK_ONE_IN`]), remembered in a filter of one
//! bit per hash of a dropped piece that is cleared whenever one in [`FILTER_FILL`] of its bits is
//! set, so at most one miss in that many counts by chance (below the rule's one in
//! [`GROW_WHEN`]). A stream of new text drops pieces that do not come back and leaves the size
//! alone: memory follows how much of the text repeats, not its length. All
//! caches of a process together grow by at most [`GROWTH_BUDGET`] bytes (`HF_BPE_CACHE_GROWTH_MB`
//! in the environment sets another bound; 0 keeps them at their first size).
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
use crate::tuning::FUSED_AFTER;
use crate::tuning::{
    CACHE_GROWTH_BUDGET as GROWTH_BUDGET, CACHE_GROW_WHEN as GROW_WHEN, CACHE_MAX_SLOTS as MAX_SLOTS,
    CACHE_SHARDS as SHARDS, CACHE_SLOTS as SLOTS, CACHE_WINDOW as WINDOW,
};

#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    /// Key length; 0 marks an empty slot (the empty piece is never looked up).
    key_len: u8,
    /// The number of ids, with [`TRACKED`] set for a piece whose drop the filter counts and
    /// [`NARROW`] for ids kept in sixteen bits.
    n_ids: u8,
    key: [u8; KEY_BYTES],
    /// Up to [`MAX_IDS`] ids; or, with [`NARROW`], up to [`NARROW_IDS`] ids below 65,536, two to an
    /// element (the first in the low half).
    ids: [Rank; MAX_IDS],
}

/// The bit of [`Slot::n_ids`] marking a tracked piece (see [`tracked`]).
const TRACKED: u8 = 0x80;
/// The bit of [`Slot::n_ids`] marking ids kept in sixteen bits: a piece of more than [`MAX_IDS`]
/// ids (a word of a script with few tokens: 93% of gpt2's pieces of 16-30 bytes on the shared
/// corpora) stays in its slot instead of going to the store of long pieces.
const NARROW: u8 = 0x40;
/// The most ids a slot holds in sixteen bits.
const NARROW_IDS: usize = 2 * MAX_IDS;
const _: () = assert!(NARROW_IDS < NARROW as usize);

impl Slot {
    fn count(&self) -> usize {
        usize::from(self.n_ids & !(TRACKED | NARROW))
    }

    /// Appends its ids to `out`.
    #[inline]
    fn push_ids(&self, out: &mut Vec<Rank>) {
        let count = self.count();
        if self.n_ids & NARROW == 0 {
            out.extend_from_slice(&self.ids[..count]);
        } else {
            out.extend((0..count).map(|lane| self.ids[lane / 2] >> (16 * (lane % 2)) & 0xFFFF));
        }
    }

    /// Keeps `ids` (at most [`MAX_IDS`], or [`NARROW_IDS`] below 65,536); returns the [`NARROW`] bit.
    #[inline]
    fn set_ids(&mut self, ids: &[Rank]) -> u8 {
        if ids.len() <= MAX_IDS {
            self.ids[..ids.len()].copy_from_slice(ids);
            return 0;
        }
        self.ids = [0; MAX_IDS];
        for (lane, &id) in ids.iter().enumerate() {
            self.ids[lane / 2] |= id << (16 * (lane % 2));
        }
        NARROW
    }
}

/// Whether a slot can hold `ids`.
#[inline]
fn fits_slot(ids: &[Rank]) -> bool {
    ids.len() <= MAX_IDS || (ids.len() <= NARROW_IDS && ids.iter().all(|&id| id <= 0xFFFF))
}

const EMPTY: Slot = Slot { key_len: 0, n_ids: 0, key: [0; KEY_BYTES], ids: [0; MAX_IDS] };

/// One thread's cache.
pub struct PieceCache {
    /// On huge pages (see [`crate::huge`]): looked up at random.
    slots: allocator_api2::boxed::Box<[Slot], HugePages>,
    /// One bit per set: which of its two slots was used last.
    recent: Box<[u64]>,
    /// Per set, a 16-bit tag for each of its two slots (way 0 in the low half): bits of the
    /// key's hash above the set's, or 0 for an empty slot (see [`place`]). 128 KB at first, so it
    /// stays in the core's cache while the slots (4.2 MB) mostly do not: a lookup reads the slot only
    /// when its tag matches, and a piece that is not cached (a third of lookups on held-out text,
    /// each followed by a merge) costs no read of the slots at all.
    tags: Box<[u32]>,
    /// This thread's table of short pieces (see [`crate::fused`]), made on the first encode that
    /// uses it.
    fused: Option<Box<crate::fused::Table>>,
    /// Merged pieces longer than [`KEY_BYTES`] or of more ids than a slot holds (see
    /// [`crate::long_pieces`]).
    long: crate::long_pieces::LongPieces,
    /// Bytes this thread encoded through the table's path before it had a table (see
    /// [`PieceCache::wants_table`]).
    scanned: usize,
    /// The filter of dropped pieces: one bit per hash (see [`filter_bit`]), and how many are set.
    dropped: Box<[u64]>,
    dropped_set: usize,
    /// Lookups, and misses of pieces dropped before, in the current window.
    lookups: usize,
    returns: usize,
}

/// Only the pieces of one hash in this many are tracked (dropped and coming back), to keep the
/// counting off most misses; the returns counted are scaled by it.
const TRACK_ONE_IN: usize = 8;
/// Bits in the filter of dropped pieces (256 KB, read only on a miss of a tracked piece): with
/// [`FILTER_FILL`] it remembers the last 32,768 tracked pieces dropped, of some 262,000 dropped,
/// four times a cache's first size.
const FILTER_BITS: usize = 1 << 21;
/// The filter is cleared when one bit in this many is set: a piece never dropped finds its bit set
/// by chance less often than one time in this many, well below one in [`GROW_WHEN`], so new text
/// does not grow the cache.
const FILTER_FILL: usize = 64;
const _: () = assert!(FILTER_FILL >= 2 * GROW_WHEN);

#[inline]
fn hash(piece: &[u8]) -> usize {
    let mut hasher = FxHasher::default();
    hasher.write(piece);
    // FxHash mixes upward; the high bits are the well-mixed ones.
    (hasher.finish() >> 20) as usize
}

/// Where a piece of hash `hashed` sits in a cache of `sets` sets: its set, and its tag (16 hash bits
/// above the largest cache's set bits, with the lowest set so that it is never 0, an empty slot's).
#[inline]
fn place(hashed: usize, sets: usize) -> (usize, u32) {
    (hashed & (sets - 1), ((hashed >> TAG_SHIFT) as u32 & 0xFFFF) | 1)
}

/// Where the tag's bits start: above the set bits of the largest cache.
const TAG_SHIFT: u32 = (MAX_SLOTS / 2).trailing_zeros();
// `hash` keeps 44 bits: enough for the largest cache's set and a 16-bit tag above it.
const _: () = assert!(TAG_SHIFT + 16 <= 44);

/// A hash's bit in the filter of dropped pieces (mixed again: its low bits also choose the set).
#[inline]
fn filter_bit(hashed: usize) -> usize {
    ((hashed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - FILTER_BITS.trailing_zeros())) as usize
}

/// Whether a piece of hash `hashed` is one of those tracked: the top bits of the hash, which neither
/// the set, nor the tag, nor the filter's bit is taken from.
#[inline]
fn tracked(hashed: usize) -> bool {
    (hashed >> 41) % TRACK_ONE_IN == 0
}
const _: () = assert!(TAG_SHIFT + 16 <= 41 && TRACK_ONE_IN == 8);

/// Bytes the caches of the process have grown by, beyond their first [`SLOTS`] slots.
static GROWN: AtomicUsize = AtomicUsize::new(0);

/// Claims `bytes` of the growth budget the caches of the process share (see [`growth_budget`]) for
/// another table that grows beside them ([`crate::fused`]); false when they do not fit. Released
/// with [`release_growth`].
pub(crate) fn claim_growth(bytes: usize) -> bool {
    if GROWN.fetch_add(bytes, Ordering::Relaxed) + bytes > growth_budget() {
        GROWN.fetch_sub(bytes, Ordering::Relaxed);
        return false;
    }
    true
}

pub(crate) fn release_growth(bytes: usize) {
    GROWN.fetch_sub(bytes, Ordering::Relaxed);
}

const SLOT_BYTES: usize = std::mem::size_of::<Slot>();

/// The bytes all caches of the process may grow by: [`GROWTH_BUDGET`], or `HF_BPE_CACHE_GROWTH_MB`
/// megabytes when the environment sets it (read at each growth; 0 keeps every cache at its first size).
fn growth_budget() -> usize {
    std::env::var("HF_BPE_CACHE_GROWTH_MB")
        .ok()
        .and_then(|value| value.trim().parse::<usize>().ok())
        .map_or(GROWTH_BUDGET, |megabytes| megabytes.saturating_mul(1 << 20))
}

impl PieceCache {
    fn new() -> Self {
        Self::with_slots(SLOTS)
    }

    fn with_slots(slots: usize) -> Self {
        Self {
            // Filled after allocating (not allocated zeroed, which writes the pages before they are
            // advised to be huge ones: see `crate::huge`).
            slots: crate::huge::filled(EMPTY, slots),
            recent: vec![0; (slots / 2).div_ceil(64)].into_boxed_slice(),
            tags: vec![0; slots / 2].into_boxed_slice(),
            dropped: vec![0; FILTER_BITS / 64].into_boxed_slice(),
            dropped_set: 0,
            fused: None,
            long: Default::default(),
            scanned: 0,
            lookups: 0,
            returns: 0,
        }
    }

    #[inline]
    fn sets(&self) -> usize {
        self.tags.len()
    }

    /// Whether encoding `bytes` more should take the table of short pieces: once this thread has one,
    /// or has encoded [`FUSED_AFTER`] bytes without (making one costs some 0.1-0.2 s for o200k, which
    /// a few short texts would not earn back). Only bytes of calls that could take it are counted.
    pub fn wants_table(&mut self, bytes: usize) -> bool {
        if self.fused.is_some() {
            return true;
        }
        self.scanned = self.scanned.saturating_add(bytes);
        self.scanned >= FUSED_AFTER
    }

    /// This thread's table of short pieces, made from `seed` if it has none of it (taken out, to be
    /// used beside the cache; [`PieceCache::put_table`] gives it back).
    pub fn take_table(&mut self, seed: &std::sync::Arc<crate::fused::Seed>) -> Box<crate::fused::Table> {
        match self.fused.take() {
            Some(table) if table.is_of(seed) => table,
            _ => Box::new(crate::fused::Table::new(seed.clone())),
        }
    }

    pub fn put_table(&mut self, table: Box<crate::fused::Table>) {
        self.fused = Some(table);
    }

    /// A [`SetPrefetcher`] for this cache as it is now.
    pub fn prefetcher(&self) -> SetPrefetcher {
        SetPrefetcher { slots: self.slots.as_ptr(), tags: self.tags.as_ptr(), sets: self.sets(), long: self.long.prefetcher() }
    }

    /// How many pieces it can hold.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Appends the cached ids of `piece` to `out`, if it is cached; returns whether it was.
    #[inline]
    pub fn get_into(&mut self, piece: &[u8], out: &mut Vec<Rank>) -> bool {
        if piece.len() > KEY_BYTES {
            return self.long_into(piece, out);
        }
        if piece.is_empty() {
            return false;
        }
        self.lookups += 1;
        let (set, tag) = place(hash(piece), self.sets());
        for way in 0..2 {
            if (self.tags[set] >> (16 * way)) & 0xFFFF != tag {
                continue;
            }
            let slot = &self.slots[set * 2 + way];
            if usize::from(slot.key_len) == piece.len() && &slot.key[..piece.len()] == piece {
                slot.push_ids(out);
                self.mark(set, way);
                return true;
            }
        }
        // A piece merging to more ids than a slot holds (a word of a script the vocabulary has few
        // tokens for) is kept with the long ones; nothing is looked up there while it holds none.
        self.long_into(piece, out)
    }

    #[inline]
    fn long_into(&self, piece: &[u8], out: &mut Vec<Rank>) -> bool {
        match self.long.get(piece) {
            Some(ids) => {
                out.extend_from_slice(ids);
                true
            }
            None => false,
        }
    }

    /// Remembers that `piece` merges to `ids` (ignored when either is too long to hold), after a
    /// [`PieceCache::get_into`] of it missed.
    #[inline]
    pub fn insert(&mut self, piece: &[u8], ids: &[Rank]) {
        if piece.len() > KEY_BYTES || !fits_slot(ids) {
            return self.long.insert(piece, ids);
        }
        if piece.is_empty() {
            return;
        }
        let hashed = hash(piece);
        if tracked(hashed) {
            let bit = filter_bit(hashed);
            self.returns += (self.dropped[bit / 64] >> (bit % 64) & 1) as usize;
        }
        if let Some(dropped) = self.put(hashed, piece, ids) {
            self.remember_dropped(dropped);
        }
        if self.lookups >= WINDOW {
            if self.returns * TRACK_ONE_IN * GROW_WHEN > self.lookups {
                self.grow();
            }
            self.lookups = 0;
            self.returns = 0;
        }
    }

    /// Puts `piece` in its set, in the slot not used last; returns the hash of the piece it
    /// replaced, if that one was tracked.
    #[inline]
    fn put(&mut self, hashed: usize, piece: &[u8], ids: &[Rank]) -> Option<usize> {
        let (set, tag) = place(hashed, self.sets());
        let way = 1 - self.last_used(set);
        let shift = 16 * way;
        self.tags[set] = (self.tags[set] & !(0xFFFF << shift)) | (tag << shift);
        let slot = &mut self.slots[set * 2 + way];
        // Only a tracked piece's drop is remembered: the others' keys need no hashing again.
        let replaced = (slot.n_ids & TRACKED != 0).then(|| hash(&slot.key[..usize::from(slot.key_len)]));
        slot.key_len = piece.len() as u8;
        slot.key[..piece.len()].copy_from_slice(piece);
        let narrow = slot.set_ids(ids);
        slot.n_ids = ids.len() as u8 | narrow | if tracked(hashed) { TRACKED } else { 0 };
        self.mark(set, way);
        replaced
    }

    fn remember_dropped(&mut self, hashed: usize) {
        if self.dropped_set >= FILTER_BITS / FILTER_FILL {
            self.dropped.fill(0);
            self.dropped_set = 0;
        }
        let bit = filter_bit(hashed);
        let word = &mut self.dropped[bit / 64];
        if *word >> (bit % 64) & 1 == 0 {
            *word |= 1 << (bit % 64);
            self.dropped_set += 1;
        }
    }

    /// Doubles the slots, keeping every cached piece, when the largest size and the process's
    /// budget allow.
    fn grow(&mut self) {
        let slots = self.capacity() * 2;
        let more = self.capacity() * SLOT_BYTES;
        if slots > MAX_SLOTS || GROWN.fetch_add(more, Ordering::Relaxed) + more > growth_budget() {
            if slots <= MAX_SLOTS {
                GROWN.fetch_sub(more, Ordering::Relaxed);
            }
            return;
        }
        let mut grown = Self::with_slots(slots);
        let mut ids = Vec::with_capacity(NARROW_IDS);
        for slot in self.slots.iter().filter(|slot| slot.key_len != 0) {
            let key = &slot.key[..usize::from(slot.key_len)];
            ids.clear();
            slot.push_ids(&mut ids);
            grown.put(hash(key), key, &ids);
        }
        // Pieces dropped before still count as returns.
        std::mem::swap(&mut grown.dropped, &mut self.dropped);
        grown.dropped_set = self.dropped_set;
        grown.fused = self.fused.take();
        grown.long = std::mem::take(&mut self.long);
        grown.scanned = self.scanned;
        // The old cache gives back its share of the budget as it drops; the grown one holds it,
        // with the `more` added above.
        GROWN.fetch_add((self.capacity() - SLOTS.min(self.capacity())) * SLOT_BYTES, Ordering::Relaxed);
        let _ = std::mem::replace(self, grown);
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

impl Drop for PieceCache {
    fn drop(&mut self) {
        GROWN.fetch_sub((self.capacity() - SLOTS.min(self.capacity())) * SLOT_BYTES, Ordering::Relaxed);
    }
}

/// Brings where a piece would be into the core's second-level cache, ahead of its lookup: the set
/// of a piece of [`KEY_BYTES`] or fewer and its tags (a grown cache's tags, 2 MB at its largest, no
/// longer stay there), and its entry in the store of long pieces (which also holds short ones of
/// more ids than a slot holds). It keeps
/// addresses, not a borrow: a cache that grows or drops meanwhile only makes its prefetches useless
/// (a prefetch reads nothing and cannot fault).
#[derive(Clone, Copy)]
pub struct SetPrefetcher {
    slots: *const Slot,
    tags: *const u32,
    sets: usize,
    long: crate::long_pieces::EntryPrefetcher,
}

impl SetPrefetcher {
    #[inline(always)]
    pub fn prefetch(&self, piece: &[u8]) {
        if piece.len() <= KEY_BYTES {
            let (set, _) = place(hash(piece), self.sets);
            let first = self.slots.wrapping_add(set * 2);
            crate::fused::prefetch(first, false);
            crate::fused::prefetch(first.wrapping_add(1), false);
            crate::fused::prefetch(self.tags.wrapping_add(set), false);
        }
        self.long.prefetch(piece);
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

    /// The ids `cache` holds for `piece`, if any.
    fn cached(cache: &mut PieceCache, piece: &[u8]) -> Option<Vec<Rank>> {
        let mut ids = Vec::new();
        cache.get_into(piece, &mut ids).then_some(ids)
    }

    /// Where `piece` sits in a cache of the first size.
    fn first_place(piece: &[u8]) -> (usize, u32) {
        place(hash(piece), SLOTS / 2)
    }

    #[test]
    fn holds_what_was_inserted_long_pieces_beside_and_refuses_what_is_too_long() {
        let mut cache = PieceCache::new();
        assert_eq!(cached(&mut cache, b"hello"), None);
        cache.insert(b"hello", &[1, 2]);
        assert_eq!(cached(&mut cache, b"hello"), Some(vec![1, 2]));
        assert_eq!(cached(&mut cache, b"hell"), None);
        let long = [b'x'; KEY_BYTES + 1];
        assert_eq!(cached(&mut cache, &long), None);
        cache.insert(&long, &[7]);
        assert_eq!(cached(&mut cache, &long), Some(vec![7]), "kept in the store of long pieces");
        let too_long = vec![b'x'; crate::long_pieces::LONG_PIECE_MOST + 1];
        cache.insert(&too_long, &[7]);
        assert_eq!(cached(&mut cache, &too_long), None);
        // More ids than a slot holds in 32 bits: in sixteen bits in the slot when every id is below
        // 65,536, with the long pieces otherwise.
        for count in MAX_IDS + 1..=NARROW_IDS {
            let ids: Vec<Rank> = (0..count as Rank).map(|lane| [0xFFFF, 0, 0x8001, 1][lane as usize % 4] ^ lane).collect();
            let piece = format!("many {count}").into_bytes();
            cache.insert(&piece, &ids);
            assert_eq!(cached(&mut cache, &piece), Some(ids), "{count} ids");
            assert!(cache.long.get(&piece).is_none(), "{count} ids: kept in the slot");
        }
        for ids in [vec![0; NARROW_IDS + 1], vec![0x1_0000; MAX_IDS + 1]] {
            cache.insert(b"wide", &ids);
            assert_eq!(cached(&mut cache, b"wide"), Some(ids.clone()));
            assert_eq!(cache.long.get(b"wide"), Some(&ids[..]), "kept with the long pieces");
            cache.long = Default::default();
        }
    }

    #[test]
    fn a_grown_cache_keeps_sixteen_bit_ids() {
        let mut cache = PieceCache::new();
        let ids: Vec<Rank> = (0..NARROW_IDS as Rank).map(|lane| 0xFFFF - lane).collect();
        cache.insert(b"greek word", &ids);
        cache.grow();
        assert_eq!(cache.capacity(), 2 * SLOTS);
        assert_eq!(cached(&mut cache, b"greek word"), Some(ids));
    }

    #[test]
    fn a_full_set_keeps_the_most_recently_used() {
        let mut cache = PieceCache::new();
        // Find three keys in the same set.
        let target = first_place(b"k0").0;
        let keys: Vec<Vec<u8>> = (0..)
            .map(|i: u32| format!("k{i}").into_bytes())
            .filter(|key| first_place(key).0 == target)
            .take(3)
            .collect();
        cache.insert(&keys[0], &[0]);
        cache.insert(&keys[1], &[1]);
        assert_eq!(cached(&mut cache, &keys[0]), Some(vec![0])); // keys[0] is now the recent one
        cache.insert(&keys[2], &[2]); // evicts keys[1]
        assert_eq!(cached(&mut cache, &keys[0]), Some(vec![0]));
        assert_eq!(cached(&mut cache, &keys[1]), None);
        assert_eq!(cached(&mut cache, &keys[2]), Some(vec![2]));
    }

    #[test]
    fn a_matching_tag_alone_is_not_a_hit() {
        // Keys that share a set and a tag are too rare to search for (one in 2**31), so the test
        // gives a cached piece's slot the tag of another key of its set: the lookup of that key
        // then reads the slot, and the key compare refuses it.
        let mut cache = PieceCache::new();
        let first = b"t0".to_vec();
        let (set, first_tag) = first_place(&first);
        let other = (1..)
            .map(|i: u32| format!("t{i}").into_bytes())
            .find(|key| first_place(key).0 == set && first_place(key).1 != first_tag)
            .expect("another key of the set");
        cache.insert(&first, &[1]);
        assert_eq!(cached(&mut cache, &other), None, "its tag differs: the slot is not read");
        cache.tags[set] = first_place(&other).1 * 0x1_0001;
        assert_eq!(cached(&mut cache, &other), None, "its tag matches, its key does not");
        assert_eq!(cached(&mut cache, &first), None, "a slot whose tag differs is not read");
    }


    /// Encodes `pieces` through `cache` as the model does (a lookup, then an insert on a miss), and
    /// returns how many missed.
    fn run(cache: &mut PieceCache, pieces: impl Iterator<Item = Vec<u8>>) -> usize {
        let mut misses = 0;
        for piece in pieces {
            if cached(cache, &piece).is_none() {
                misses += 1;
                cache.insert(&piece, &[piece.len() as Rank]);
            }
        }
        misses
    }

    fn piece(number: usize) -> Vec<u8> {
        format!("piece {number}").into_bytes()
    }

    #[test]
    fn text_read_again_that_does_not_fit_grows_the_cache_until_it_fits() {
        // A quarter as many pieces as slots: two-way sets drop more than one in GROW_WHEN of them
        // at first; a larger cache drops fewer, and it stops growing below its largest size.
        let pieces = SLOTS / 4;
        let (cache, misses) = read_again(pieces);
        assert!(cache.capacity() >= 2 * SLOTS, "grew to {} slots; misses per pass {misses:?}", cache.capacity());
        assert!(cache.capacity() < MAX_SLOTS, "grew to {} slots; misses per pass {misses:?}", cache.capacity());
        // It stops growing once a larger cache would save fewer merges than its rule asks for.
        assert!(*misses.last().unwrap() * GROW_WHEN < pieces, "misses per pass {misses:?}");
        assert!(*misses.last().unwrap() * 3 < misses[1], "misses per pass {misses:?}");
    }

    #[test]
    fn text_read_again_that_never_fits_grows_the_cache_to_its_largest_size() {
        let pieces = 3 * SLOTS / 2; // more than it holds at first, fewer than half its largest size
        let (cache, misses) = read_again(pieces);
        assert_eq!(cache.capacity(), MAX_SLOTS, "misses per pass {misses:?}");
        assert!(*misses.last().unwrap() * 5 < misses[1], "misses per pass {misses:?}");
    }

    /// A cache that read `pieces` distinct pieces eight times over, and its misses in each pass;
    /// every piece it still holds gives what was inserted for it.
    fn read_again(pieces: usize) -> (PieceCache, Vec<usize>) {
        let mut cache = PieceCache::new();
        let misses: Vec<usize> = (0..8).map(|_| run(&mut cache, (0..pieces).map(piece))).collect();
        for number in 0..pieces {
            if let Some(ids) = cached(&mut cache, &piece(number)) {
                assert_eq!(ids, [piece(number).len() as Rank]);
            }
        }
        (cache, misses)
    }

    #[test]
    fn new_text_never_grows_the_cache() {
        let mut cache = PieceCache::new();
        let misses = run(&mut cache, (0..40 * SLOTS).map(piece));
        assert_eq!(misses, 40 * SLOTS);
        assert_eq!(cache.capacity(), SLOTS);
    }

    #[test]
    fn text_that_fits_never_grows_the_cache() {
        // An eighth as many pieces as slots, read again and again: the few that two-way sets drop
        // come back, but too few to be worth a larger cache.
        let mut cache = PieceCache::new();
        for _ in 0..30 {
            run(&mut cache, (0..SLOTS / 8).map(piece));
        }
        assert_eq!(cache.capacity(), SLOTS);
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
