//! One table per encoding thread that answers a short piece's ids in one probe, whether the piece
//! is a token or was merged before; and the loop that asks it a chunk of pieces at a time.
//!
//! A piece of at most [`SHORT`] bytes is packed with its length into a 128-bit key. The table is
//! open-addressed (linear probing) with 32-byte entries: the key, the number of ids and up to
//! [`INLINE`] ids in the entry itself, or [`NARROW_INLINE`] of sixteen bits when every id of the
//! model is below 65,535 (a narrow table); more in a side array of at most two ids per slot. It starts
//! as a copy of the model's seed, which holds every short token as its own id, and learns each piece
//! it merges, until it is half full (or its side array is); then it goes back to the seed, or doubles when the pieces it dropped the last time
//! keep coming back (text read again that does not fit), up to [`MAX_SLOTS`] and within the growth
//! budget the piece caches share ([`crate::cache`]). It starts at about four slots per short
//! token; a stream of new text never grows it, so memory follows how much of the text repeats.
//!
//! The loop: the scanner's pieces are packed and hashed into a chunk of [`CHUNK`] as they come,
//! and the line of each one's home slot is prefetched; then the chunk is encoded in order, each
//! piece's line prefetched again [`AHEAD`] pieces before its turn. A piece found in its home slot
//! with its ids in the entry (most pieces of natural text once it has been read a while) costs a
//! compare and a copy (a narrow entry's eight lanes widened to eight ids by two SSE2 unpacks); one
//! in its home slot with more ids, a copy of a block of the side array;
//! anything else (a piece further along its probe, a longer one, one never seen) takes the slow
//! path, which asks the table again, or merges and learns.
//!
//! The table only holds what the model's merge gives for the same bytes (each short token of a
//! model whose pieces that are tokens encode as themselves, and the merge loop's output), so it
//! cannot change an id; the tests compare every path with a plain loop.

use std::fmt;
use std::sync::Arc;

use crate::short_tokens::SHORT;
use crate::Rank;

/// Ids held in an entry itself.
pub const INLINE: usize = 3;
/// Ids held in an entry of a narrow table ([`Seed::narrow`]: every id below [`NARROW_SEED`]),
/// sixteen bits each.
pub const NARROW_INLINE: usize = 7;
/// Pieces packed before a chunk is encoded.
pub const CHUNK: usize = 256;
/// How many pieces ahead of its turn a piece's line is prefetched into the core's first cache.
const AHEAD: usize = 16;
/// The table's slots per seed token (rounded up to a power of two), and its least size.
const SLOTS_PER_SEED: usize = 4;
const MIN_SLOTS: usize = 1 << 14;
/// Ids of pieces of more than [`INLINE`] a table keeps per slot, at most (8 bytes beside its 32).
const SPILL_PER_SLOT: usize = 2;
/// The most slots a table grows to (64 MB).
pub const MAX_SLOTS: usize = 1 << 21;
/// A full table grows (doubles) rather than starting over when more than one merge in this many,
/// since it last started over, was of a piece it had dropped before: text read again that does not
/// fit. (The filter of dropped pieces answers "dropped" wrongly for at most one piece in eight.)
const GROW_WHEN: usize = 4;
/// Bits of the filter of the pieces dropped when the table started over (512 KB: a table of up to
/// half [`MAX_SLOTS`] drops at most an eighth of them at once); it is cleared when an eighth are set.
const FILTER_BITS: usize = 1 << 22;
/// The second id of a seed's entry: no id (a token's entry has one), and never a learned piece's;
/// in a narrow table, [`NARROW_SEED`].
const SEED: Rank = Rank::MAX;
const NARROW_SEED: Rank = 0xFFFF;
/// A narrow entry's length lane has this bit when its ids are in the side array.
const NARROW_SPILLED: u32 = 0x8000;

/// A table entry: `key` 0 is an empty slot (a real key holds its length, 1 to 15, in its top byte).
/// `data`, in a wide table: the number of ids, then up to [`INLINE`] ids, or (more ids) where they
/// start in the side array. In a narrow table, eight lanes of sixteen bits: up to
/// [`NARROW_INLINE`] ids, or (more ids, or an id of [`NARROW_SEED`] or above) where they start in
/// the side array in the first two lanes; the number of ids in the last, with [`NARROW_SPILLED`]
/// for ids in the side array.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Entry {
    key: u128,
    data: [u32; 4],
}

const EMPTY: Entry = Entry { key: 0, data: [0; 4] };

impl Entry {
    /// The length lane of a narrow entry.
    #[inline(always)]
    fn narrow_len(&self) -> u32 {
        self.data[3] >> 16
    }

    #[inline(always)]
    fn len(&self, narrow: bool) -> usize {
        if narrow { (self.narrow_len() & !NARROW_SPILLED) as usize } else { self.data[0] as usize }
    }

    /// Whether the ids are in the side array.
    #[inline(always)]
    fn spilled(&self, narrow: bool) -> bool {
        if narrow { self.narrow_len() & NARROW_SPILLED != 0 } else { self.data[0] as usize > INLINE }
    }

    /// Where a spilled entry's ids start in the side array.
    #[inline(always)]
    fn spill_at(&self, narrow: bool) -> usize {
        if narrow { self.data[0] as usize } else { self.data[1] as usize }
    }

    /// The `index`th inline id.
    #[inline(always)]
    fn id(&self, index: usize, narrow: bool) -> Rank {
        if narrow { self.data[index / 2] >> (16 * (index % 2)) & 0xFFFF } else { self.data[1 + index] }
    }

    /// A seed's entry: the token `id` (below [`NARROW_SEED`] in a narrow table).
    fn token(key: u128, id: Rank, narrow: bool) -> Entry {
        let data = if narrow { [id | NARROW_SEED << 16, 0, 0, 1 << 16] } else { [1, id, SEED, 0] };
        Entry { key, data }
    }

    fn is_seed(&self, narrow: bool) -> bool {
        self.len(narrow) == 1 && !self.spilled(narrow) && self.id(1, narrow) == if narrow { NARROW_SEED } else { SEED }
    }

    /// Appends the ids to `out`.
    fn push_ids(&self, spill: &[Rank], out: &mut Vec<Rank>, narrow: bool) {
        let len = self.len(narrow);
        if self.spilled(narrow) {
            push_spilled(out, spill, self.spill_at(narrow), len);
        } else {
            out.extend((0..len).map(|index| self.id(index, narrow)));
        }
    }
}
const _: () = assert!(std::mem::size_of::<Entry>() == 32);
const _: () = assert!(SHORT <= 15, "a key keeps its length in its top byte");

/// `KEEP[n]`: the low `n` bytes of a word, for `n` up to 16 (the low and high words of a key).
const KEEP: [(u64, u64); 17] = {
    let mut keep = [(0u64, 0u64); 17];
    let mut n = 0;
    while n <= 16 {
        let low = if n >= 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
        let high = if n <= 8 { 0 } else if n == 16 { u64::MAX } else { (1u64 << (8 * (n - 8))) - 1 };
        keep[n] = (low, high);
        n += 1;
    }
    keep
};

/// The key of `bytes[start..start + len]` (`1 <= len <= SHORT`): its bytes, little-endian, and its
/// length in the top byte. Reads 16 bytes at once where the text has them.
#[inline(always)]
fn key_at(bytes: &[u8], start: usize, len: usize) -> u128 {
    debug_assert!((1..=SHORT).contains(&len) && start + len <= bytes.len());
    let (low, high) = if start + 16 <= bytes.len() {
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
        (word(start) & KEEP[len].0, word(start + 8) & KEEP[len].1)
    } else {
        let mut buffer = [0u8; 16];
        buffer[..len].copy_from_slice(&bytes[start..start + len]);
        (u64::from_le_bytes(buffer[..8].try_into().expect("eight bytes")), u64::from_le_bytes(buffer[8..].try_into().expect("eight bytes")))
    };
    u128::from(low) | (u128::from(high | ((len as u64) << 56)) << 64)
}

/// The key of a whole short piece.
#[inline]
pub fn key(piece: &[u8]) -> u128 {
    key_at(piece, 0, piece.len())
}

/// A key's hash: its home slot is the top bits.
#[inline(always)]
fn hash(key: u128) -> u64 {
    let (low, high) = (key as u64, (key >> 64) as u64);
    (low ^ high.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[inline(always)]
pub(crate) fn prefetch<T>(pointer: *const T, first_level: bool) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and has no effect on memory; any address is allowed.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T1};
        if first_level {
            _mm_prefetch::<_MM_HINT_T0>(pointer.cast());
        } else {
            _mm_prefetch::<_MM_HINT_T1>(pointer.cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (pointer, first_level);
}

type Slots = allocator_api2::boxed::Box<[Entry], crate::huge::HugePages>;

/// A model's seed: its short tokens, each as its own id, in a table of the size every thread's
/// table has. Built once per model, copied into each thread's table. (On ordinary pages: it is only
/// read in order, and asking the system for huge pages can cost it a compaction of memory.)
pub struct Seed {
    slots: Box<[Entry]>,
    len: usize,
    /// Every id of the model is below [`NARROW_SEED`]: the table keeps ids in sixteen bits.
    narrow: bool,
}

impl fmt::Debug for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Seed({} tokens in {} slots, narrow: {})", self.len, self.slots.len(), self.narrow)
    }
}

impl Seed {
    /// The seed of tokens `(bytes, id)`; those empty or longer than [`SHORT`] are left out. Tokens
    /// go in by id, so the most frequent ones of a BPE vocabulary (the lowest ids) take their home
    /// slots first.
    pub fn new<'a>(tokens: impl Iterator<Item = (&'a [u8], Rank)>) -> Self {
        let mut narrow = true;
        let mut short: Vec<(&[u8], Rank)> = tokens
            .inspect(|&(_, id)| narrow &= id < NARROW_SEED)
            .filter(|(bytes, _)| (1..=SHORT).contains(&bytes.len()))
            .collect();
        short.sort_unstable_by_key(|&(_, id)| id);
        let size = (short.len() * SLOTS_PER_SEED).next_power_of_two().max(MIN_SLOTS);
        let mut table = Seed { slots: vec![EMPTY; size].into_boxed_slice(), len: 0, narrow };
        for (bytes, id) in short {
            let key = key(bytes);
            let hashed = hash(key);
            if let Err(vacancy) = find(&table.slots, key, hashed) {
                table.slots[vacancy] = Entry::token(key, id, narrow);
                table.len += 1;
            }
        }
        table
    }
}

/// Where `key` sits in `slots` (`Ok`), or the empty slot its probe ends on (`Err`).
#[inline(always)]
fn find(slots: &[Entry], key: u128, hashed: u64) -> Result<usize, usize> {
    let mask = slots.len() - 1;
    let mut at = home(hashed, slots.len());
    loop {
        let entry = &slots[at];
        if entry.key == key {
            return Ok(at);
        }
        if entry.key == 0 {
            return Err(at);
        }
        at = (at + 1) & mask;
    }
}

/// A hash's bit in the filter of dropped pieces: the hash mixed again, so that the bit does not
/// follow the home slot.
#[inline]
fn filter_bit(hashed: u64) -> usize {
    ((hashed ^ (hashed >> 32)).wrapping_mul(0xD6E8_FEB8_6659_FD93) >> (64 - FILTER_BITS.trailing_zeros())) as usize
}

#[inline(always)]
fn home(hashed: u64, size: usize) -> usize {
    (hashed >> (64 - size.trailing_zeros())) as usize
}

/// The key of a piece too long for one: no entry holds it (a real key's top byte is at most 15).
const LONG: u128 = u128::MAX;

/// A piece packed for the chunk: its key ([`LONG`] for a piece too long for one) and hash, and
/// where it is.
#[derive(Clone, Copy, Default)]
struct Pending {
    key: u128,
    hashed: u64,
    start: u32,
    end: u32,
}

/// One thread's table (see the module), with the chunk it packs pieces into.
pub struct Table {
    seed: Arc<Seed>,
    /// As many as the seed's, or more when it grew (the growth is counted in the budget).
    slots: Slots,
    len: usize,
    /// Ids of entries with more than [`INLINE`]: at most [`SPILL_PER_SLOT`] per slot, or the table
    /// makes room.
    spill: Vec<Rank>,
    chunk: Box<[Pending]>,
    filled: usize,
    /// One bit per hash of a piece dropped when the table started over, and how many are set.
    dropped: Box<[u64]>,
    dropped_set: usize,
    /// Merges since the table last started over, and how many of them were of dropped pieces.
    merges: usize,
    returns: usize,
}

impl Table {
    /// A table that starts as `seed`.
    pub fn new(seed: Arc<Seed>) -> Self {
        let slots = crate::huge::filled(EMPTY, seed.slots.len());
        let mut table = Table {
            slots,
            len: 0,
            spill: Vec::new(),
            chunk: vec![Pending::default(); CHUNK + AHEAD].into_boxed_slice(),
            filled: 0,
            dropped: vec![0; FILTER_BITS / 64].into_boxed_slice(),
            dropped_set: 0,
            merges: 0,
            returns: 0,
            seed,
        };
        table.slots.copy_from_slice(&table.seed.slots);
        table.len = table.seed.len;
        table
    }

    /// The table is full: it doubles when the pieces it dropped last time came back often enough
    /// and the budget allows, else it starts over from the seed, remembering what it dropped.
    fn make_room(&mut self) {
        let size = self.slots.len();
        let bytes = size * std::mem::size_of::<Entry>();
        let grow = self.returns * GROW_WHEN > self.merges && size * 2 <= MAX_SLOTS && crate::cache::claim_growth(bytes);
        (self.merges, self.returns) = (0, 0);
        let narrow = self.seed.narrow;
        let learned = |entry: &&Entry| entry.key != 0 && !entry.is_seed(narrow);
        if grow {
            // The seed first, so its tokens keep their home slots; then the learned pieces.
            let old = std::mem::replace(&mut self.slots, crate::huge::filled(EMPTY, size * 2));
            let spill = std::mem::take(&mut self.spill);
            self.seed_again();
            let mut ids = Vec::with_capacity(SPILL_BLOCK);
            for entry in old.iter().filter(learned) {
                ids.clear();
                entry.push_ids(&spill, &mut ids, narrow);
                let mut moved = Entry { key: entry.key, data: [0; 4] };
                self.fill(&mut moved, &ids);
                self.place(moved);
            }
            return;
        }
        // Starting over in place (a fresh allocation would have the system zero its pages again):
        // the learned pieces are remembered as dropped, then the seed is written over them.
        for entry in self.slots.iter().filter(learned) {
            if self.dropped_set * 8 >= FILTER_BITS {
                self.dropped.fill(0);
                self.dropped_set = 0;
            }
            let bit = filter_bit(hash(entry.key));
            self.dropped_set += (self.dropped[bit / 64] >> (bit % 64) & 1 ^ 1) as usize;
            self.dropped[bit / 64] |= 1 << (bit % 64);
        }
        self.spill.clear();
        self.seed_again();
    }

    /// Empties the table and puts the seed's tokens back.
    fn seed_again(&mut self) {
        if self.seed.slots.len() == self.slots.len() {
            self.slots.copy_from_slice(&self.seed.slots);
            self.len = self.seed.len;
            return;
        }
        self.slots.fill(EMPTY);
        self.len = 0;
        let seed = self.seed.clone();
        for entry in seed.slots.iter().filter(|entry| entry.key != 0) {
            self.place(*entry);
        }
    }

    /// Puts `entry`, whose key the table lacks, in its first free slot.
    fn place(&mut self, entry: Entry) {
        let vacancy = find(&self.slots, entry.key, hash(entry.key)).expect_err("a key the table lacks");
        self.slots[vacancy] = entry;
        self.len += 1;
    }

    /// Sets `entry`'s ids: inline, or appended to the side array.
    fn fill(&mut self, entry: &mut Entry, ids: &[Rank]) {
        let len = ids.len() as u32;
        let at = self.spill.len() as u32;
        if self.seed.narrow {
            if ids.len() <= NARROW_INLINE && ids.iter().all(|&id| id < NARROW_SEED) {
                let mut lanes = [0u16; 8];
                for (lane, &id) in lanes.iter_mut().zip(ids) {
                    *lane = id as u16;
                }
                lanes[7] = len as u16;
                for (word, pair) in entry.data.iter_mut().zip(lanes.chunks_exact(2)) {
                    *word = u32::from(pair[0]) | u32::from(pair[1]) << 16;
                }
            } else {
                entry.data = [at, 0, 0, (len | NARROW_SPILLED) << 16];
                self.spill.extend_from_slice(ids);
            }
        } else if ids.len() <= INLINE {
            entry.data = [len, 0, 0, 0];
            entry.data[1..=ids.len()].copy_from_slice(ids);
        } else {
            entry.data = [len, at, 0, 0];
            self.spill.extend_from_slice(ids);
        }
    }

    /// Whether this table was made from `seed`.
    pub fn is_of(&self, seed: &Arc<Seed>) -> bool {
        Arc::ptr_eq(&self.seed, seed)
    }

    /// Packs the piece `bytes[start..end]` (not empty) into the chunk, prefetching its home slot's
    /// line. The caller encodes the chunk with [`Table::encode_chunk`] when [`Table::full`].
    #[inline(always)]
    pub fn pack(&mut self, bytes: &[u8], start: usize, end: usize) {
        let len = end - start;
        let (key, hashed) = if len <= SHORT {
            let key = key_at(bytes, start, len);
            let hashed = hash(key);
            prefetch(self.slots.as_ptr().wrapping_add(home(hashed, self.slots.len())), false);
            (key, hashed)
        } else {
            (LONG, 0)
        };
        self.chunk[self.filled] = Pending { key, hashed, start: start as u32, end: end as u32 };
        self.filled += 1;
    }

    #[inline(always)]
    pub fn full(&self) -> bool {
        self.filled == CHUNK
    }

    /// Encodes the pieces of the chunk in order, appending their ids to `out`, and empties it.
    /// `long(piece, out)` encodes a piece the table cannot answer (longer than [`SHORT`]), and
    /// `merge(piece, out)` a short one it does not hold, which it then learns.
    #[inline(always)]
    pub fn encode_chunk(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<Rank>,
        long: impl FnMut(&[u8], &mut Vec<Rank>),
        merge: impl FnMut(&[u8], &mut Vec<Rank>),
    ) {
        if self.seed.narrow {
            self.encode_chunk_as::<true>(bytes, out, long, merge);
        } else {
            self.encode_chunk_as::<false>(bytes, out, long, merge);
        }
    }

    /// [`Table::encode_chunk`] for a narrow table (`NARROW`) or a wide one.
    fn encode_chunk_as<const NARROW: bool>(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<Rank>,
        mut long: impl FnMut(&[u8], &mut Vec<Rank>),
        mut merge: impl FnMut(&[u8], &mut Vec<Rank>),
    ) {
        // Ids written for each piece before its entry is known to match: an entry's lanes (a narrow
        // one's eight, its last the length), or a wide one's three ids.
        let written_per_piece = if NARROW { 8 } else { INLINE };
        let inline = if NARROW { NARROW_INLINE } else { INLINE };
        let filled = std::mem::take(&mut self.filled);
        // Room for every piece's lanes, written before the entry is known to match (checked, so that
        // a text too large for memory stops with `OutOfMemory`).
        let room = |out: &mut Vec<Rank>, pieces: usize, more: usize| {
            crate::memory::reserve(out, written_per_piece * pieces + more, "the ids", bytes.len(), "bytes of text");
        };
        room(out, filled, written_per_piece);
        for pending in &self.chunk[..AHEAD.min(filled)] {
            prefetch(self.slots.as_ptr().wrapping_add(home(pending.hashed, self.slots.len())), true);
        }
        let mut at = 0;
        while at < filled {
            let size = self.slots.len();
            let slots = self.slots.as_ptr();
            let mut written = out.len();
            let target = out.as_mut_ptr();
            // The fast loop: pieces in their home slot with their ids inline.
            while at < filled {
                let ahead = self.chunk[at + AHEAD];
                prefetch(slots.wrapping_add(home(ahead.hashed, size)), true);
                let pending = self.chunk[at];
                // SAFETY: `home` is below `size`, the slots' length.
                let entry = unsafe { &*slots.add(home(pending.hashed, size)) };
                // SAFETY: `written_per_piece` ids fit past `written`: room for that many per piece
                // left was reserved, and `written` grows by at most `inline` (fewer) per piece, and
                // the last piece's `written_per_piece` fit.
                let len = unsafe {
                    if NARROW {
                        write_lanes(entry, target.add(written));
                        entry.narrow_len() as usize
                    } else {
                        std::ptr::copy_nonoverlapping(entry.data.as_ptr().add(1), target.add(written), INLINE);
                        entry.data[0] as usize
                    }
                };
                // A narrow entry's length lane is above `inline` when its ids are spilled.
                if entry.key == pending.key && len <= inline {
                    written += len;
                    at += 1;
                    continue;
                }
                break;
            }
            // SAFETY: the ids below `written` were written above (or before this call).
            unsafe { out.set_len(written) };
            if at == filled {
                break;
            }
            let pending = self.chunk[at];
            let piece = &bytes[pending.start as usize..pending.end as usize];
            // A piece gives at most one id per byte ([`SPILL_BLOCK`] for a spilled one's copy).
            room(out, 0, (piece.len() + 1).max(SPILL_BLOCK));
            if pending.key == LONG {
                long(piece, out);
            } else {
                // SAFETY: `home` is below the slots' length.
                let entry = unsafe { &*self.slots.as_ptr().add(home(pending.hashed, self.slots.len())) };
                if entry.key == pending.key {
                    // In its home slot with its ids in the side array.
                    push_spilled(out, &self.spill, entry.spill_at(NARROW), entry.len(NARROW));
                } else {
                    self.slow(pending.key, pending.hashed, piece, out, &mut merge);
                }
            }
            at += 1;
            room(out, filled - at, written_per_piece);
        }
    }

    /// A short piece not in its home slot with its ids inline: found further along, or merged and
    /// learned.
    #[cold]
    #[inline(never)]
    fn slow(&mut self, key: u128, hashed: u64, piece: &[u8], out: &mut Vec<Rank>, merge: &mut impl FnMut(&[u8], &mut Vec<Rank>)) {
        match find(&self.slots, key, hashed) {
            Ok(at) => {
                self.slots[at].push_ids(&self.spill, out, self.seed.narrow);
                // Moved to its home slot, so that it is found there next time; the entry that was
                // there stays on its probe (linear probing: it moves further along a run of full
                // slots that already reached past its home).
                let home = home(hashed, self.slots.len());
                self.slots.swap(at, home);
            }
            Err(mut vacancy) => {
                let before = out.len();
                merge(piece, out);
                self.merges += 1;
                let bit = filter_bit(hashed);
                self.returns += (self.dropped[bit / 64] >> (bit % 64) & 1) as usize;
                let ids = out.len() - before;
                let spilled = if ids > INLINE { ids } else { 0 };
                // (A narrow table spills fewer: this bound holds for it too.)
                if (self.len + 1) * 2 > self.slots.len() || self.spill.len() + spilled > SPILL_PER_SLOT * self.slots.len() {
                    self.make_room();
                    vacancy = find(&self.slots, key, hashed).expect_err("not in the seed: it was not in the table");
                }
                let mut entry = Entry { key, data: [0; 4] };
                self.fill(&mut entry, &out[before..]);
                self.slots[vacancy] = entry;
                self.len += 1;
            }
        }
    }
}

/// Writes a narrow entry's eight lanes as eight ids at `target`.
///
/// # Safety
/// Eight ids must fit at `target`.
#[inline(always)]
unsafe fn write_lanes(entry: &Entry, target: *mut Rank) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; `data` is 16 bytes at offset 16 of a 32-byte aligned entry;
    // the caller gives room for the two stores of 16 bytes.
    unsafe {
        use std::arch::x86_64::*;
        let lanes = _mm_load_si128(entry.data.as_ptr().cast());
        let zero = _mm_setzero_si128();
        _mm_storeu_si128(target.cast(), _mm_unpacklo_epi16(lanes, zero));
        _mm_storeu_si128(target.add(4).cast(), _mm_unpackhi_epi16(lanes, zero));
    }
    #[cfg(not(target_arch = "x86_64"))]
    for index in 0..8 {
        // SAFETY: the caller gives room for eight ids.
        unsafe { *target.add(index) = entry.data[index / 2] >> (16 * (index % 2)) & 0xFFFF };
    }
}

/// Ids copied at once from the side array: a spilled entry's ids (a short piece's, at most one a
/// byte) fit in this many.
const SPILL_BLOCK: usize = 16;
const _: () = assert!(SHORT <= SPILL_BLOCK);

/// Appends `spill[first..first + len]` (a spilled entry's ids) to `out`: one copy of a whole
/// [`SPILL_BLOCK`] where the side array has that many ids from `first` (a few ids are not worth
/// a call into `memcpy`, which a copy of a length known only at run time becomes), else a copy of
/// the `len` ids.
#[inline(always)]
fn push_spilled(out: &mut Vec<Rank>, spill: &[Rank], first: usize, len: usize) {
    debug_assert!(len <= SPILL_BLOCK);
    match spill.get(first..first + SPILL_BLOCK) {
        Some(block) if out.capacity() - out.len() >= SPILL_BLOCK => {
            // SAFETY: `SPILL_BLOCK` ids fit past the length (checked above), the block is
            // `SPILL_BLOCK` ids long, and the first `len <= SPILL_BLOCK` copied are the entry's.
            unsafe {
                std::ptr::copy_nonoverlapping(block.as_ptr(), out.as_mut_ptr().add(out.len()), SPILL_BLOCK);
                out.set_len(out.len() + len);
            }
        }
        _ => out.extend_from_slice(&spill[first..first + len]),
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        crate::cache::release_growth((self.slots.len() - self.seed.slots.len()) * std::mem::size_of::<Entry>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hold_every_byte_and_the_length_wherever_the_piece_sits() {
        let text: Vec<u8> = (0..64u8).map(|byte| byte.wrapping_mul(37).wrapping_add(1)).collect();
        for start in 0..text.len() {
            for len in 1..=SHORT.min(text.len() - start) {
                let mut buffer = [0u8; 16];
                buffer[..len].copy_from_slice(&text[start..start + len]);
                buffer[15] = len as u8;
                assert_eq!(key_at(&text, start, len), u128::from_le_bytes(buffer), "{start} {len}");
            }
        }
        assert_ne!(key(b"a"), key(b"a\0"));
    }

    /// A seed of `tokens`; a wide one when `wide` (a token too long for the table has a large id).
    fn seed_of<'a>(tokens: impl Iterator<Item = (&'a [u8], Rank)>, wide: bool) -> Arc<Seed> {
        let large = wide.then_some((&b"a token too long for the table"[..], 70_000));
        let seed = Seed::new(tokens.chain(large));
        assert_eq!(seed.narrow, !wide);
        Arc::new(seed)
    }

    /// What the tests' merge gives for a piece: an id for its first byte and one for its last.
    fn merged(piece: &[u8]) -> [Rank; 2] {
        [1000 + Rank::from(piece[0]), 1000 + Rank::from(piece[piece.len() - 1])]
    }

    /// Encodes `text` cut at `cuts` through a table, with `merge` giving what the table lacks.
    fn encode(table: &mut Table, text: &[u8], cuts: &[usize], merges: &mut usize) -> Vec<Rank> {
        let mut out = Vec::new();
        let mut start = 0;
        let merge = |piece: &[u8], out: &mut Vec<Rank>| out.extend(merged(piece));
        for &end in cuts {
            table.pack(text, start, end);
            start = end;
            if table.full() {
                table.encode_chunk(text, &mut out, merge, |piece, out| {
                    *merges += 1;
                    merge(piece, out)
                });
            }
        }
        table.encode_chunk(text, &mut out, merge, |piece, out| {
            *merges += 1;
            merge(piece, out)
        });
        out
    }

    #[test]
    fn seeds_answer_learned_pieces_come_back_and_a_full_table_starts_over() {
        for wide in [false, true] {
            seeds_answer_learned_pieces_come_back_and_a_full_table_starts_over_in(wide);
        }
    }

    fn seeds_answer_learned_pieces_come_back_and_a_full_table_starts_over_in(wide: bool) {
        let tokens: Vec<(Vec<u8>, Rank)> = (0..100u32).map(|id| (format!("t{id}").into_bytes(), id)).collect();
        let seed = seed_of(tokens.iter().map(|(bytes, id)| (&bytes[..], *id)), wide);
        let mut table = Table::new(seed);
        // 3,000 pieces: tokens, new short pieces of 1-6 ids, and long ones, in several chunks.
        let mut text = Vec::new();
        let mut cuts = Vec::new();
        let mut expected = Vec::new();
        for number in 0..3000u32 {
            let piece = match number % 3 {
                0 => format!("t{}", number % 100).into_bytes(),
                1 => "x".repeat((number / 3 % 6) as usize + 1).into_bytes(),
                _ => format!("long piece number {number}").into_bytes(),
            };
            if number % 3 == 0 {
                expected.push(number % 100);
            } else {
                expected.extend(merged(&piece));
            }
            text.extend_from_slice(&piece);
            cuts.push(text.len());
        }
        let mut merges = 0;
        assert_eq!(encode(&mut table, &text, &cuts, &mut merges), expected);
        assert_eq!(merges, 6, "each short new piece merged once");
        let mut again = 0;
        assert_eq!(encode(&mut table, &text, &cuts, &mut again), expected);
        assert_eq!(again, 0);
        // Fill it: distinct pieces until it starts over, then the seed still answers.
        let room = table.slots.len() / 2 - table.seed.len;
        let many: Vec<u8> = (0..room as u32 + 10).flat_map(|number| format!("{number:07}").into_bytes()).collect();
        let many_cuts: Vec<usize> = (1..=room + 10).map(|number| number * 7).collect();
        let mut filled = 0;
        encode(&mut table, &many, &many_cuts, &mut filled);
        assert_eq!(filled, room + 10);
        assert!(table.len < table.seed.len + 20, "started over");
        let mut after = 0;
        assert_eq!(encode(&mut table, &text, &cuts, &mut after), expected);
        assert_eq!(after, 6);
    }

    #[test]
    fn text_read_again_that_does_not_fit_grows_the_table_and_new_text_does_not() {
        for wide in [false, true] {
            grows_in(wide);
        }
    }

    fn grows_in(wide: bool) {
        let seed = seed_of(std::iter::once((&b"t"[..], 0)), wide);
        let pieces = |from: u32, count: u32| -> (Vec<u8>, Vec<usize>) {
            let text: Vec<u8> = (from..from + count).flat_map(|number| format!("{number:07}").into_bytes()).collect();
            (text, (1..=count as usize).map(|number| number * 7).collect())
        };
        let mut table = Table::new(seed.clone());
        let (text, cuts) = pieces(0, 20_000);
        let mut passes = 0;
        loop {
            let mut merges = 0;
            encode(&mut table, &text, &cuts, &mut merges);
            passes += 1;
            if merges == 0 {
                break;
            }
            assert!(passes < 8, "still merging after {passes} passes: {merges}");
        }
        assert!(table.slots.len() > MIN_SLOTS && table.slots.len() <= 4 * 20_000usize.next_power_of_two());
        let mut stream = Table::new(seed);
        for from in (0..200_000).step_by(20_000) {
            let (text, cuts) = pieces(1_000_000 + from, 20_000);
            encode(&mut stream, &text, &cuts, &mut 0);
        }
        assert_eq!(stream.slots.len(), MIN_SLOTS, "new text never grows it");
    }

    #[test]
    fn pieces_of_many_ids_met_again_give_their_ids_from_the_side_array() {
        // A wide table; a narrow one; a narrow one given ids too large for it, which it spills.
        for (wide, first_id) in [(true, 0), (false, 0), (false, 0xFFF0)] {
            many_ids_in(wide, first_id);
        }
    }

    fn many_ids_in(wide: bool, first_id: Rank) {
        // Pieces of 4-15 bytes, one id a byte: every one spilled (a narrow table's of 8 bytes and
        // more), met again in its home slot or further along, the last ones spilled with fewer than
        // a block of ids after them.
        let seed = seed_of(std::iter::once((&b"t"[..], 0)), wide);
        let mut table = Table::new(seed);
        let mut text = Vec::new();
        let mut cuts = Vec::new();
        for number in 0..3000u32 {
            let len = 4 + (number as usize * 7) % 12;
            text.extend(format!("{number:0len$}").into_bytes());
            cuts.push(text.len());
        }
        let expected: Vec<Rank> = text.iter().map(|&byte| first_id + Rank::from(byte)).collect();
        let many = |piece: &[u8], out: &mut Vec<Rank>| out.extend(piece.iter().map(|&byte| first_id + Rank::from(byte)));
        for pass in 0..3 {
            let mut merges = 0;
            let mut out = Vec::new();
            let mut start = 0;
            for &end in &cuts {
                table.pack(&text, start, end);
                start = end;
                if table.full() {
                    table.encode_chunk(&text, &mut out, many, |piece, out| {
                        merges += 1;
                        many(piece, out)
                    });
                }
            }
            table.encode_chunk(&text, &mut out, many, |piece, out| {
                merges += 1;
                many(piece, out)
            });
            assert_eq!(out, expected, "pass {pass}, wide {wide}, first id {first_id}");
            assert_eq!(merges, if pass == 0 { 3000 } else { 0 }, "pass {pass}");
        }
    }

    #[test]
    fn pieces_of_many_ids_stay_within_the_side_array_bound() {
        for wide in [false, true] {
            let seed = seed_of(std::iter::once((&b"t"[..], 0)), wide);
            within_bound_in(Table::new(seed));
        }
    }

    fn within_bound_in(mut table: Table) {
        let text: Vec<u8> = (0..50_000u32).flat_map(|number| format!("{number:07}").into_bytes()).collect();
        let many = |piece: &[u8], out: &mut Vec<Rank>| out.extend(piece.iter().map(|&byte| Rank::from(byte)));
        let mut out = Vec::new();
        for number in 0..50_000 {
            table.pack(&text, number * 7, number * 7 + 7);
            if table.full() {
                table.encode_chunk(&text, &mut out, many, many);
            }
            assert!(table.spill.len() <= SPILL_PER_SLOT * table.slots.len());
        }
        table.encode_chunk(&text, &mut out, many, many);
        assert_eq!(out, text.iter().map(|&byte| Rank::from(byte)).collect::<Vec<_>>());
    }
}
