//! Byte-pair merging of one piece.
//!
//! A `MergeTable` maps an adjacent pair of token ids to the merge it allows: the id of the merged
//! token and its priority (lower merges first). Each format fills the table its own way (tiktoken
//! ranks: every split of every token; merges lists: the listed pairs only; SentencePiece: every split
//! of every piece, prioritized by score), and the loop is the same: repeatedly merge the adjacent
//! pair with the lowest priority, ties to the leftmost pair. Byte-level formats start from the ids of
//! the piece's bytes ([`MergeTable::encode_piece`]), except that a character whose bytes provably
//! merge among themselves before anything joins them to a neighbour starts as far merged as that
//! goes ([`MergeTable::premerge_chars`]), skipping those merges. SentencePiece starts from
//! character symbols ([`MergeTable::encode_symbols`]).
//!
//! Short pieces use a flat scan (cache-friendly, like tiktoken); long pieces use a linked list and a
//! queue of pairs ([`LongMerge`]: buckets by priority, falling back to a heap with lazy deletion),
//! so a megabyte without whitespace stays O(n log n). Every piece's first lookups (pairs of bytes)
//! read a 256 x 256 table instead of the pair map.

use std::cmp::Reverse;
use std::marker::PhantomData;

use dary_heap::QuaternaryHeap;
use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::huge::HugePages;
use crate::memory;
use crate::pairs::{wide_key, PairMap, WidePairs};
use crate::tuning::{HEAP_THRESHOLD, LEVELS_FROM, LEVEL_RESTARTS, SMALL_LEVEL, SMALL_LEVELS};
use crate::Rank;

/// What merging an adjacent pair yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Merge {
    /// Lower merges first.
    pub priority: u32,
    /// The token the pair becomes.
    pub merged: Rank,
}

const NO_MERGE: Merge = Merge {
    priority: u32::MAX,
    merged: Rank::MAX,
};

/// A UTF-8 continuation byte (`10xxxxxx`): what ends a character of two bytes or more.
#[inline(always)]
fn is_continuation(byte: u8) -> bool {
    (0x80..0xC0).contains(&byte)
}

/// A byte that can only start a character of two bytes or more (or none, in invalid UTF-8).
#[inline(always)]
fn is_lead(byte: u8) -> bool {
    byte >= 0xC0
}

/// The pair table and the initial symbol of each byte.
#[derive(Clone, Debug)]
pub struct MergeTable {
    byte_ids: [Rank; 256],
    pairs: PairMap,
    /// Bit `x * 256 + y` is set when some merge joins a token ending in byte `x` to a token starting
    /// with byte `y`. Where it is clear, no token can ever span that boundary, so a long piece can be
    /// cut there and its parts merged independently: the result is the same, and each part is short.
    joinable: Box<[u64; 1024]>,
    /// The merge of each pair of single bytes, indexed by `first * 256 + second`: every piece starts
    /// as bytes, so its first lookups read this small table (in cache) instead of the pair map.
    byte_pairs: Box<[Merge]>,
    /// The bytes whose initial symbol is each id (several for a table whose bytes share an id).
    bytes_of_id: FxHashMap<Rank, Vec<u8>>,
    /// For each code point of two or three UTF-8 bytes, the symbols (one or two; `NONE` pads) its
    /// bytes merge to on their own, as far as starting from them instead of the bytes provably
    /// merges the same (see [`MergeTable::premerge_chars`]); `[NONE, NONE]` where that is nowhere.
    /// Empty until computed.
    chars: Box<[[Rank; 2]]>,
}

/// How a [`MergeTableBuilder`] treats the byte boundaries of long pieces; fixed when the builder is
/// made, so a table cannot mix merges that record the bytes they join with merges that do not.
pub trait Boundaries {}

/// Every boundary may be joined by some merge: long pieces are never cut. For merges of symbols
/// that are not bytes (SentencePiece's characters), or whose bytes are not known.
#[derive(Debug)]
pub enum AnyBoundary {}
impl Boundaries for AnyBoundary {}

/// Each merge names the bytes it joins (the last byte of its left token, the first of its right):
/// long pieces are cut at boundaries no merge joins, and the parts merged on their own.
#[derive(Debug)]
pub enum RecordedBoundaries {}
impl Boundaries for RecordedBoundaries {}

/// Fills a [`MergeTable`]: made by [`MergeTable::builder`] or [`MergeTable::builder_recording_joins`],
/// whose `insert` methods differ (the second takes the bytes each merge joins).
#[derive(Debug)]
pub struct MergeTableBuilder<B: Boundaries> {
    table: MergeTable,
    /// The pairs so far; the table gets them in their final layout when built.
    pairs: WidePairs,
    boundaries: PhantomData<B>,
}

impl MergeTable {
    /// A builder whose table never cuts pieces (see [`AnyBoundary`]).
    pub fn builder(byte_ids: [Rank; 256]) -> MergeTableBuilder<AnyBoundary> {
        MergeTableBuilder::new(Self::new(byte_ids, u64::MAX))
    }

    /// A builder whose table cuts long pieces at boundaries no merge joins (see
    /// [`RecordedBoundaries`]).
    pub fn builder_recording_joins(byte_ids: [Rank; 256]) -> MergeTableBuilder<RecordedBoundaries> {
        MergeTableBuilder::new(Self::new(byte_ids, 0))
    }

    /// An empty table whose join bits are all `joinable`.
    fn new(byte_ids: [Rank; 256], joinable: u64) -> Self {
        let mut bytes_of_id: FxHashMap<Rank, Vec<u8>> = FxHashMap::default();
        for (byte, &id) in byte_ids.iter().enumerate() {
            bytes_of_id.entry(id).or_default().push(byte as u8);
        }
        Self {
            byte_ids,
            pairs: PairMap::new(WidePairs::with_hasher_in(FxBuildHasher, HugePages)),
            joinable: Box::new([joinable; 1024]),
            byte_pairs: vec![NO_MERGE; 256 * 256].into_boxed_slice(),
            bytes_of_id,
            chars: Box::new([]),
        }
    }

    /// Finds, for each character of two or three bytes, how far a piece may start its bytes already
    /// merged (see `chars`), given the bytes of each token id. Call it once all merges are in.
    ///
    /// Alone, a character `c`'s bytes go through states `S_0` (the bytes), `S_1`, ... (one merge
    /// each; `q_j` the priority of the merge that ends `S_j`). A piece may start `c` from `S_k`
    /// (`k >= 1`), where `r = max(q_0 .. q_k-1)`, when:
    /// - every merge that could join a state's edge to a neighbour comes after `r`: pairs `(L, P)`
    ///   with `P` the first symbol of some `S_j` (`j <= k`) and `L` ending in a continuation byte
    ///   (what ends the character before), and pairs `(Q, R)` with `Q` the last symbol of some `S_j`
    ///   and `R` starting with a lead byte (what starts the next character);
    /// - every pair inside `S_k` merges after `r`, or not at all.
    ///
    /// Where `c` stands between such neighbours (or the ends of the piece), the merge loop on the
    /// bytes takes `c` through `S_1` .. `S_k` exactly as alone, before any merge reaches across its
    /// edges: while `c` is at `S_j`, its pair with priority `q_j <= r` is waiting, and every pair
    /// across its edges comes after `r`. Starting from `S_k` skips exactly those merges: a pair
    /// present only in the shortcut (at `S_k`'s edges or inside it) comes after `r`, so it cannot
    /// come before any merge the loop on bytes makes while `c` is short of `S_k`, each of which comes
    /// no later than `c`'s waiting pair. [`MergeTable::char_symbols`] checks the neighbours piece
    /// by piece; the tests compare with the merge loop on bytes on random tables, including tables
    /// where parts of characters merge early.
    pub fn premerge_chars<'a>(&mut self, bytes_of: impl Fn(Rank) -> Option<&'a [u8]>) {
        self.chars = Box::new([]);
        // Each byte must have its own id, so that a symbol's bytes are known from its id.
        if self.bytes_of_id.len() != 256 {
            return;
        }
        // The earliest merge of each possible first symbol of a character with what can end the
        // character before, and of each possible last symbol with what can start the next one.
        let mut earliest_after_continuation: FxHashMap<Rank, u32> = FxHashMap::default();
        let mut earliest_before_lead: FxHashMap<Rank, u32> = FxHashMap::default();
        for (left, right, merge) in self.pairs.entries() {
            let (Some(left_bytes), Some(right_bytes)) = (bytes_of(left), bytes_of(right)) else {
                // Unknown bytes: no character is proven safe.
                return;
            };
            let (Some(&last), Some(&first)) = (left_bytes.last(), right_bytes.first()) else {
                return;
            };
            if right_bytes.len() <= 3 && is_lead(first) && is_continuation(last) {
                let earliest = earliest_after_continuation.entry(right).or_insert(u32::MAX);
                *earliest = (*earliest).min(merge.priority);
            }
            if left_bytes.len() <= 3 && is_lead(first) && !left_bytes[0].is_ascii() {
                let earliest = earliest_before_lead.entry(left).or_insert(u32::MAX);
                *earliest = (*earliest).min(merge.priority);
            }
        }
        let mut chars = vec![[NONE; 2]; 0x1_0000].into_boxed_slice();
        let mut utf8 = [0u8; 4];
        for code_point in 0x80..0x1_0000u32 {
            let Some(character) = char::from_u32(code_point) else { continue };
            let stages = self.merge_stages(character.encode_utf8(&mut utf8).as_bytes());
            // The furthest state that qualifies (S_0, the bytes, always does).
            let furthest = (1..stages.len()).rev().find(|&k| {
                let r = stages[..k].iter().map(|(_, priority)| *priority).max().unwrap_or(0);
                let after = |earliest: &FxHashMap<Rank, u32>, id: Rank| earliest.get(&id).is_none_or(|&p| p > r);
                stages[..=k].iter().all(|(state, _)| {
                    after(&earliest_after_continuation, state[0])
                        && after(&earliest_before_lead, state[state.len() - 1])
                }) && stages[k].0.windows(2).all(|pair| self.lookup(pair[0], pair[1]).priority > r)
            });
            if let Some(k) = furthest {
                let state = &stages[k].0;
                chars[code_point as usize] = [state[0], state.get(1).copied().unwrap_or(NONE)];
            }
        }
        self.chars = chars;
    }

    /// The plain merge loop on `bytes` (a character), state by state: the symbols before each
    /// merge with that merge's priority, then the final symbols (with `NO_MERGE`'s).
    fn merge_stages(&self, bytes: &[u8]) -> Vec<(Vec<Rank>, u32)> {
        let mut symbols: Vec<Rank> = bytes.iter().map(|&byte| self.byte_id(byte)).collect();
        let mut stages = Vec::new();
        loop {
            let best = (0..symbols.len().saturating_sub(1))
                .map(|at| (self.lookup(symbols[at], symbols[at + 1]), at))
                .filter(|(merge, _)| merge.priority != NO_MERGE.priority)
                .min_by_key(|(merge, at)| (merge.priority, *at));
            let Some((merge, at)) = best else {
                stages.push((symbols, NO_MERGE.priority));
                return stages;
            };
            stages.push((symbols.clone(), merge.priority));
            symbols[at] = merge.merged;
            symbols.remove(at + 1);
        }
    }

    #[inline]
    fn can_join(&self, left: u8, right: u8) -> bool {
        let bit = usize::from(left) * 256 + usize::from(right);
        self.joinable[bit / 64] & (1 << (bit % 64)) != 0
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    #[inline]
    pub fn byte_id(&self, byte: u8) -> Rank {
        self.byte_ids[byte as usize]
    }

    /// The merge the pair `left`, `right` allows, if any.
    #[inline]
    pub fn get(&self, left: Rank, right: Rank) -> Option<Merge> {
        self.pairs.get(left, right)
    }

    #[inline]
    fn lookup(&self, left: Rank, right: Rank) -> Merge {
        self.pairs.get(left, right).unwrap_or(NO_MERGE)
    }

    /// The last merge of the merge loop on `token`'s bytes alone, when the loop gets them down to
    /// two parts: the left part, the right part, and the left part's length in bytes. `None` for a
    /// single byte, or when the bytes stop at three parts or more.
    pub fn last_merge(&self, token: &[u8]) -> Option<(Rank, Rank, usize)> {
        if token.len() < 2 {
            return None;
        }
        // Each part's id and length; `merges[i]` is what parts `i` and `i + 1` would become.
        let mut parts: Vec<(Rank, usize)> = token.iter().map(|&byte| (self.byte_id(byte), 1)).collect();
        let mut merges: Vec<Merge> = token.windows(2).map(|pair| self.byte_pair(pair[0], pair[1])).collect();
        while parts.len() > 2 {
            let (at, merge) = merges.iter().copied().enumerate().min_by_key(|&(at, merge)| (merge.priority, at))?;
            if merge.priority == NO_MERGE.priority {
                return None;
            }
            parts[at] = (merge.merged, parts[at].1 + parts[at + 1].1);
            parts.remove(at + 1);
            merges.remove(at);
            if at > 0 {
                merges[at - 1] = self.lookup(parts[at - 1].0, parts[at].0);
            }
            if at + 1 < parts.len() {
                merges[at] = self.lookup(parts[at].0, parts[at + 1].0);
            }
        }
        Some((parts[0].0, parts[1].0, parts[0].1))
    }

    /// Appends the ids of `piece` to `out`.
    pub fn encode_piece(&self, piece: &[u8], out: &mut Vec<Rank>) {
        if piece.len() <= HEAP_THRESHOLD {
            return self.encode_segment(piece, out);
        }
        let mut start = 0;
        for end in 1..piece.len() {
            if !self.can_join(piece[end - 1], piece[end]) {
                self.encode_segment(&piece[start..end], out);
                start = end;
            }
        }
        self.encode_segment(&piece[start..], out);
    }

    /// Merges a piece, or a part of one that no merge crosses into or out of.
    fn encode_segment(&self, piece: &[u8], out: &mut Vec<Rank>) {
        match piece.len() {
            0 => {}
            1 => out.push(self.byte_id(piece[0])),
            _ if !self.chars.is_empty() && !piece.is_ascii() => self.merge_from_chars(piece, out),
            len if len <= HEAP_THRESHOLD => self.merge_flat(piece, out),
            _ => self.merge_long(piece, out),
        }
    }

    /// The merge loop on `piece`, starting from the tokens of the characters that qualify (see
    /// `chars`) and the bytes of the rest.
    fn merge_from_chars(&self, piece: &[u8], out: &mut Vec<Rank>) {
        reached(MergePath::FromChars);
        let start = out.len();
        // Of the first `HEAP_THRESHOLD` symbols: the byte of each that is a byte, and a bit for
        // each that comes from a character's merged state (whose pairs are looked up in the pair
        // map). A `u64` holds them: `tuning` asserts `HEAP_THRESHOLD <= 64`.
        let mut bytes = [0u8; HEAP_THRESHOLD];
        let mut from_chars = 0u64;
        let mut at = 0;
        while at < piece.len() {
            if let Some((symbols, len)) = self.char_symbols(piece, at) {
                for symbol in symbols.into_iter().filter(|&symbol| symbol != NONE) {
                    let index = out.len() - start;
                    out.push(symbol);
                    if index < HEAP_THRESHOLD {
                        from_chars |= 1 << index;
                    }
                }
                at += len;
            } else {
                let index = out.len() - start;
                out.push(self.byte_id(piece[at]));
                if index < HEAP_THRESHOLD {
                    bytes[index] = piece[at];
                }
                at += 1;
            }
        }
        let count = out.len() - start;
        if count > HEAP_THRESHOLD {
            let mut ids = memory::with_capacity(count, "merging a piece", piece.len(), "bytes");
            ids.extend_from_slice(&out[start..]);
            out.truncate(start);
            return self.merge_long_ids(ids, out);
        }
        let mut merges = [NO_MERGE; HEAP_THRESHOLD];
        for index in 0..count - 1 {
            merges[index] = if from_chars & (0b11 << index) == 0 {
                self.byte_pair(bytes[index], bytes[index + 1])
            } else {
                self.lookup(out[start + index], out[start + index + 1])
            };
        }
        self.merge_loop(start, out, merges);
    }

    /// The merged symbols of the character starting at `piece[at]` and its length in bytes, when the
    /// piece may start from them there: a well-formed character of two or three bytes that
    /// qualifies (see `chars`), after a continuation byte or the piece's start and before a lead
    /// byte or the end.
    #[inline(always)]
    fn char_symbols(&self, piece: &[u8], at: usize) -> Option<([Rank; 2], usize)> {
        let len = match piece[at] {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => return None,
        };
        let bytes = piece.get(at..at + len)?;
        if !bytes[1..].iter().all(|&byte| is_continuation(byte))
            || (at > 0 && !is_continuation(piece[at - 1]))
            || piece.get(at + len).is_some_and(|&next| !is_lead(next))
        {
            return None;
        }
        let (code_point, _) = crate::scan::decode(piece, at);
        if code_point < 0x800 && len == 3 {
            return None; // overlong: not the character's own bytes
        }
        let symbols = self.chars[code_point as usize];
        (symbols[0] != NONE).then_some((symbols, len))
    }

    /// Merges the initial symbols `symbols` (ids; may be empty) and appends the result to `out`.
    pub fn encode_symbols(&self, symbols: &[Rank], out: &mut Vec<Rank>) {
        match symbols.len() {
            0 | 1 => out.extend_from_slice(symbols),
            len if len <= HEAP_THRESHOLD => {
                let start = out.len();
                out.extend_from_slice(symbols);
                self.merge_in_place(start, out);
            }
            len => {
                let mut ids = memory::with_capacity(len, "merging a piece", len, "symbols");
                ids.extend_from_slice(symbols);
                self.merge_long_ids(ids, out);
            }
        }
    }

    #[inline]
    fn byte_pair(&self, first: u8, second: u8) -> Merge {
        self.byte_pairs[usize::from(first) * 256 + usize::from(second)]
    }

    fn merge_flat(&self, piece: &[u8], out: &mut Vec<Rank>) {
        reached(MergePath::Flat);
        let start = out.len();
        out.extend(piece.iter().map(|&byte| self.byte_id(byte)));
        let mut merges = [NO_MERGE; HEAP_THRESHOLD];
        for (merge, pair) in merges.iter_mut().zip(piece.windows(2)) {
            *merge = self.byte_pair(pair[0], pair[1]);
        }
        self.merge_loop(start, out, merges);
    }

    /// Merges the symbols `out[start..]` (at most `HEAP_THRESHOLD` of them) in place.
    fn merge_in_place(&self, start: usize, out: &mut Vec<Rank>) {
        reached(MergePath::InPlace);
        // merges[i] is what the pair (symbols[i], symbols[i + 1]) would become; on the stack, since
        // this runs once per piece.
        let mut merges = [NO_MERGE; HEAP_THRESHOLD];
        for (merge, pair) in merges.iter_mut().zip(out[start..].windows(2)) {
            *merge = self.lookup(pair[0], pair[1]);
        }
        self.merge_loop(start, out, merges);
    }

    /// The flat merge loop on `out[start..]`, given the merge of each adjacent pair.
    ///
    /// Symbols keep their positions: a merge writes the new symbol over the pair's left one and
    /// unlinks the right one (its merge set to none, so the scan for the lowest never picks it),
    /// so no step moves the arrays; the survivors are gathered at the end. Positions stay in text
    /// order, so the scan's first lowest is still the leftmost pair.
    #[inline]
    fn merge_loop(&self, start: usize, out: &mut Vec<Rank>, mut merges: [Merge; HEAP_THRESHOLD]) {
        const END: u8 = u8::MAX;
        let symbols = &mut out[start..];
        let len = symbols.len();
        debug_assert!(len <= HEAP_THRESHOLD && HEAP_THRESHOLD < usize::from(END));
        // The live neighbours of each position (END: none).
        let mut next = [END; HEAP_THRESHOLD];
        let mut prev = [END; HEAP_THRESHOLD];
        for at in 1..len {
            next[at - 1] = at as u8;
            prev[at] = (at - 1) as u8;
        }
        let pairs = len.saturating_sub(1);
        loop {
            let mut best = NO_MERGE.priority;
            let mut at = usize::MAX;
            for (index, merge) in merges[..pairs].iter().enumerate() {
                if merge.priority < best {
                    best = merge.priority;
                    at = index;
                }
            }
            if at == usize::MAX {
                break;
            }
            let right = usize::from(next[at]);
            symbols[at] = merges[at].merged;
            merges[right] = NO_MERGE;
            let after = next[right];
            next[at] = after;
            merges[at] = if after == END {
                NO_MERGE
            } else {
                prev[usize::from(after)] = at as u8;
                self.lookup(symbols[at], symbols[usize::from(after)])
            };
            let before = prev[at];
            if before != END {
                merges[usize::from(before)] = self.lookup(symbols[usize::from(before)], symbols[at]);
            }
        }
        let mut kept = 0;
        let mut at = 0;
        while at != usize::from(END) && at < len {
            symbols[kept] = symbols[at];
            kept += 1;
            at = usize::from(next[at]);
        }
        out.truncate(start + kept);
    }

    fn merge_long(&self, piece: &[u8], out: &mut Vec<Rank>) {
        let mut ids = memory::with_capacity(piece.len(), "merging a piece", piece.len(), "bytes");
        ids.extend(piece.iter().map(|&byte| self.byte_id(byte)));
        self.merge_long_ids(ids, out);
    }

    /// The loop for long pieces, on initial symbols `ids` (at least one, fewer than 2**32 - 1:
    /// positions are 32-bit, and a segment that long would need some 80 GB to merge): see
    /// [`LongMerge`].
    fn merge_long_ids(&self, ids: Vec<Rank>, out: &mut Vec<Rank>) {
        assert!(ids.len() < NONE as usize, "a piece of {} symbols is beyond the merge loop's 32-bit positions", ids.len());
        let mut long = LongMerge::new(self, &ids);
        // The queues grow as they go: a bucket or heap entry per pair, with room to double.
        memory::ensure_headroom(ids.len() * 16, "merging a piece", ids.len(), "symbols");
        let by_levels = ids.len() >= LEVELS_FROM;
        drop(ids);
        if !(by_levels && long.by_levels(self)) {
            long.by_heap(self);
        }
        long.emit(out);
    }
}

impl MergeTableBuilder<AnyBoundary> {
    /// Allows `left` + `right` to merge into `merge.merged` with `merge.priority`. A pair given twice
    /// keeps the merge with the lower priority.
    pub fn insert(&mut self, left: Rank, right: Rank, merge: Merge) {
        self.add(left, right, merge);
    }
}

impl MergeTableBuilder<RecordedBoundaries> {
    /// Allows `left` + `right` to merge, as [`MergeTableBuilder::<AnyBoundary>::insert`], and records
    /// that a merge joins `last_of_left` (the last byte of `left`) to `first_of_right`.
    pub fn insert(&mut self, left: Rank, right: Rank, merge: Merge, last_of_left: u8, first_of_right: u8) {
        let bit = usize::from(last_of_left) * 256 + usize::from(first_of_right);
        self.table.joinable[bit / 64] |= 1 << (bit % 64);
        self.add(left, right, merge);
    }
}

impl<B: Boundaries> MergeTableBuilder<B> {
    fn new(table: MergeTable) -> Self {
        Self { table, pairs: WidePairs::with_hasher_in(FxBuildHasher, HugePages), boundaries: PhantomData }
    }

    /// Allows `left` + `right` to merge into `merge.merged` with `merge.priority`. A pair given twice
    /// keeps the merge with the lower priority.
    fn add(&mut self, left: Rank, right: Rank, merge: Merge) {
        if let (Some(lefts), Some(rights)) = (self.table.bytes_of_id.get(&left), self.table.bytes_of_id.get(&right)) {
            for &first in lefts {
                for &second in rights {
                    let slot = &mut self.table.byte_pairs[usize::from(first) * 256 + usize::from(second)];
                    if merge.priority < slot.priority {
                        *slot = merge;
                    }
                }
            }
        }
        self.pairs
            .entry(wide_key(left, right))
            .and_modify(|existing| {
                if merge.priority < existing.priority {
                    *existing = merge;
                }
            })
            .or_insert(merge);
    }

    /// Makes room for `additional` more pairs at once (the map lives on huge pages, where growing
    /// it pair by pair zeroes a fresh page at each doubling).
    pub fn reserve(&mut self, additional: usize) {
        self.pairs.reserve(additional);
    }

    /// The table, with every merge in.
    pub fn build(mut self) -> MergeTable {
        self.table.pairs = PairMap::new(self.pairs);
        self.table
    }
}

/// The five ways a piece is merged: the flat loop from bytes ([`MergeTable::merge_flat`]) or from
/// characters' merged states ([`MergeTable::merge_from_chars`]), the flat loop on given symbols
/// ([`MergeTable::merge_in_place`]), and the two loops of long pieces ([`LongMerge::by_levels`],
/// [`LongMerge::by_heap`]). The tests count which ran ([`reached`]).
#[derive(Clone, Copy, Debug)]
enum MergePath {
    Flat,
    FromChars,
    InPlace,
    Levels,
    Heap,
}

#[cfg(test)]
thread_local! {
    /// How many times each [`MergePath`] ran on this thread (tests only).
    static REACHED: std::cell::Cell<[usize; 5]> = const { std::cell::Cell::new([0; 5]) };
}

/// Counts `path` in tests; nothing otherwise.
#[inline(always)]
fn reached(path: MergePath) {
    #[cfg(test)]
    REACHED.with(|reached| {
        let mut counts = reached.get();
        counts[path as usize] += 1;
        reached.set(counts);
    });
    #[cfg(not(test))]
    let _ = path;
}

/// No symbol / no position.
const NONE: u32 = u32::MAX;

/// A symbol of a long piece, indexed by its initial position; merged-away ones get id `NONE`. It
/// holds the merge of the pair it starts (with the next symbol), so checking a queued pair needs no
/// lookup. One array of small nodes keeps each merge to a few cache lines.
#[derive(Clone, Copy)]
struct Node {
    id: Rank,
    prev: u32,
    next: u32,
    merge: Merge,
}

/// The merge loop for long pieces: a linked list of symbols and a queue of pairs by (priority,
/// position), so each merge costs O(log n) rather than a scan.
///
/// A queued pair is current when the pair now at that position merges with that priority (its
/// node says so); otherwise it is stale and skipped. Every current pair is queued, so the current
/// pair first in (priority, position) order is exactly the pair the rule merges next.
///
/// Two queues, the second a fallback for the first:
/// - [`LongMerge::by_levels`]: pairs are kept in buckets by priority, and a whole bucket is merged
///   in one left-to-right pass. That is the rule's order as long as every merge only creates pairs
///   of later priority, which holds for vocabularies that grew by merging (the rank of a token
///   comes after the ranks of its parts). A run of one repeated letter then takes a few linear
///   passes instead of a heap operation per pair.
/// - [`LongMerge::by_heap`]: one heap entry per pair; always exact, O(n log n). The level loop hands
///   over to it when merges keep creating pairs of the same or an earlier priority, or when the
///   buckets become small (varied text: many priorities with a few pairs each), where a bucket
///   costs more than a heap entry.
struct LongMerge {
    nodes: Vec<Node>,
}

/// Queues `positions` with `priority` for the level loop: into its bucket, and the level into
/// `levels` when its bucket was empty (a level is listed once per time its bucket fills).
fn queue(
    buckets: &mut FxHashMap<u32, Vec<u32>>,
    levels: &mut QuaternaryHeap<Reverse<u32>>,
    priority: u32,
    positions: &[u32],
) {
    if positions.is_empty() {
        return;
    }
    let bucket = buckets.entry(priority).or_default();
    if bucket.is_empty() {
        levels.push(Reverse(priority));
    }
    bucket.extend_from_slice(positions);
}

impl LongMerge {
    fn new(table: &MergeTable, ids: &[Rank]) -> Self {
        let len = ids.len();
        let mut nodes: Vec<Node> = memory::with_capacity(len, "merging a piece", len, "symbols");
        nodes.extend(ids
            .iter()
            .enumerate()
            .map(|(position, &id)| Node {
                id,
                prev: (position as u32).wrapping_sub(1),
                next: if position + 1 == len { NONE } else { position as u32 + 1 },
                merge: match ids.get(position + 1) {
                    Some(&next) => table.lookup(id, next),
                    None => NO_MERGE,
                },
            }));
        Self { nodes }
    }

    /// The pairs that can merge now: (position, priority) of every symbol whose pair merges.
    fn current_pairs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.id != NONE && node.merge.priority != NO_MERGE.priority)
            .map(|(position, node)| (position as u32, node.merge.priority))
    }

    /// Merges the current pair at `left` (its right symbol goes away) and returns the new pairs:
    /// (position, merge) of the pair it now starts and of the pair now ending at it.
    #[inline]
    fn merge_at(&mut self, table: &MergeTable, left: usize) -> [(u32, Merge); 2] {
        let node = self.nodes[left];
        let right = node.next as usize;
        let merged = node.merge.merged;
        let after = self.nodes[right].next;
        self.nodes[right].id = NONE;
        let mut created = [(NONE, NO_MERGE); 2];
        let mut next_merge = NO_MERGE;
        if after != NONE {
            self.nodes[after as usize].prev = left as u32;
            next_merge = table.lookup(merged, self.nodes[after as usize].id);
            created[0] = (left as u32, next_merge);
        }
        self.nodes[left] = Node { id: merged, prev: node.prev, next: after, merge: next_merge };
        if node.prev != NONE {
            let before = node.prev as usize;
            let previous_merge = table.lookup(self.nodes[before].id, merged);
            self.nodes[before].merge = previous_merge;
            created[1] = (node.prev, previous_merge);
        }
        created
    }

    #[inline]
    fn is_current(&self, position: u32, priority: u32) -> bool {
        let node = &self.nodes[position as usize];
        node.id != NONE && node.merge.priority == priority
    }

    /// Merges bucket by bucket, lowest priority first, each in position order. Returns false when
    /// it gives up for [`LongMerge::by_heap`], which goes on from the symbols as they are.
    fn by_levels(&mut self, table: &MergeTable) -> bool {
        reached(MergePath::Levels);
        // Priority -> positions of pairs queued with it (unsorted).
        let mut buckets: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for (position, priority) in self.current_pairs() {
            buckets.entry(priority).or_default().push(position);
        }
        let mut levels: QuaternaryHeap<Reverse<u32>> = buckets.keys().map(|&p| Reverse(p)).collect();
        let (mut restarts, mut small_levels) = (0, 0);
        while let Some(Reverse(priority)) = levels.pop() {
            let Some(mut positions) = buckets.remove(&priority) else { continue };
            if positions.len() < SMALL_LEVEL {
                small_levels += 1;
                if small_levels > SMALL_LEVELS {
                    return false;
                }
            }
            positions.sort_unstable();
            let mut index = 0;
            let mut earlier = false;
            while index < positions.len() {
                let position = positions[index];
                index += 1;
                if !self.is_current(position, priority) {
                    continue;
                }
                for (at, merge) in self.merge_at(table, position as usize) {
                    if merge.priority == NO_MERGE.priority {
                        continue;
                    }
                    // A pair at or before this priority must wait for the pairs queued before it
                    // in the rule's order: this pass stops after this merge.
                    earlier |= merge.priority <= priority;
                    queue(&mut buckets, &mut levels, merge.priority, &[at]);
                }
                if earlier {
                    break;
                }
            }
            if earlier {
                queue(&mut buckets, &mut levels, priority, &positions[index..]);
                restarts += 1;
                if restarts > LEVEL_RESTARTS {
                    return false;
                }
            }
        }
        true
    }

    /// The heap loop, from the symbols as they are.
    fn by_heap(&mut self, table: &MergeTable) {
        reached(MergePath::Heap);
        #[inline]
        fn entry(priority: u32, position: u32) -> Reverse<u64> {
            Reverse((u64::from(priority) << 32) | u64::from(position))
        }
        let mut heap: QuaternaryHeap<Reverse<u64>> =
            self.current_pairs().map(|(position, priority)| entry(priority, position)).collect();
        while let Some(Reverse(key)) = heap.pop() {
            let priority = (key >> 32) as u32;
            let position = (key & 0xFFFF_FFFF) as u32;
            if !self.is_current(position, priority) {
                continue;
            }
            for (at, merge) in self.merge_at(table, position as usize) {
                if merge.priority != NO_MERGE.priority {
                    heap.push(entry(merge.priority, at));
                }
            }
        }
    }

    fn emit(&self, out: &mut Vec<Rank>) {
        let mut position = 0u32;
        while position != NONE {
            out.push(self.nodes[position as usize].id);
            position = self.nodes[position as usize].next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes are ids 0-255.
    fn byte_ids() -> [Rank; 256] {
        std::array::from_fn(|byte| byte as Rank)
    }

    /// Bytes are ids 0-255; merges given as (left, right, merged, priority).
    fn table_with(merges: impl IntoIterator<Item = (Rank, Rank, Rank, u32)>) -> MergeTable {
        let mut table = MergeTable::builder(byte_ids());
        for (left, right, merged, priority) in merges {
            table.insert(left, right, Merge { priority, merged });
        }
        table.build()
    }

    /// Bytes are ids 0-255; merges given as (left, right, merged) in priority order.
    fn table(merges: &[(Rank, Rank, Rank)]) -> MergeTable {
        table_with(merges.iter().enumerate().map(|(priority, &(left, right, merged))| (left, right, merged, priority as u32)))
    }

    /// The readable quadratic loop: find the lowest-priority adjacent pair (leftmost on ties), merge.
    fn naive(table: &MergeTable, piece: &[u8]) -> Vec<Rank> {
        naive_symbols(table, piece.iter().map(|&byte| table.byte_id(byte)).collect())
    }

    fn naive_symbols(table: &MergeTable, mut symbols: Vec<Rank>) -> Vec<Rank> {
        loop {
            let best = (0..symbols.len().saturating_sub(1))
                .map(|i| (table.lookup(symbols[i], symbols[i + 1]), i))
                .filter(|(merge, _)| merge.priority != NO_MERGE.priority)
                .min_by_key(|(merge, i)| (merge.priority, *i));
            let Some((merge, i)) = best else {
                return symbols;
            };
            symbols[i] = merge.merged;
            symbols.remove(i + 1);
        }
    }

    fn both_ways(table: &MergeTable, piece: &[u8]) -> Vec<Rank> {
        let expected = naive(table, piece);
        let mut long = Vec::new();
        table.merge_long(piece, &mut long);
        assert_eq!(
            long, expected,
            "long merge differs from the naive loop on {piece:?}"
        );
        if piece.len() <= HEAP_THRESHOLD {
            let mut flat = Vec::new();
            table.merge_flat(piece, &mut flat);
            assert_eq!(
                flat, expected,
                "flat merge differs from the naive loop on {piece:?}"
            );
        }
        expected
    }

    #[test]
    fn cutting_at_unjoinable_boundaries_changes_nothing() {
        // Random merges over a small alphabet; the same table filled with and without join bits.
        let mut uncut = MergeTable::builder(byte_ids());
        let mut cut = MergeTable::builder_recording_joins(byte_ids());
        let alphabet = b"abcdxyz";
        let mut tokens: Vec<Vec<u8>> = alphabet.iter().map(|&b| vec![b]).collect();
        let mut ids: Vec<Rank> = alphabet.iter().map(|&b| b as Rank).collect();
        let mut random = crate::test_rng::numbers(12345u64);
        let mut next = move || random() as usize;
        for merged in 256..400 {
            let (l, r) = (next() % tokens.len(), next() % tokens.len());
            let merge = Merge { priority: merged, merged };
            uncut.insert(ids[l], ids[r], merge);
            let (last, first) = (*tokens[l].last().unwrap(), tokens[r][0]);
            cut.insert(ids[l], ids[r], merge, last, first);
            tokens.push([tokens[l].clone(), tokens[r].clone()].concat());
            ids.push(merged);
        }
        let (uncut, cut) = (uncut.build(), cut.build());
        for len in [HEAP_THRESHOLD + 1, 130, 500, 5000] {
            let piece: Vec<u8> = (0..len).map(|_| alphabet[next() % alphabet.len()]).collect();
            let (mut expected, mut actual) = (Vec::new(), Vec::new());
            uncut.encode_piece(&piece, &mut expected);
            cut.encode_piece(&piece, &mut actual);
            assert_eq!(actual, expected);
            assert_eq!(expected, naive(&uncut, &piece));
        }
    }

    /// A table filled as `Model::from_ranks` fills it: every split of every token into two tokens
    /// merges, with the token's priority (its rank, or a random one).
    fn rank_table(tokens: &[Vec<u8>], priorities: &[u32]) -> MergeTable {
        let encoder: FxHashMap<&[u8], Rank> =
            tokens.iter().enumerate().map(|(id, token)| (&token[..], id as Rank)).collect();
        let mut table = MergeTable::builder_recording_joins(byte_ids());
        for (id, token) in tokens.iter().enumerate() {
            for split in 1..token.len() {
                if let (Some(&left), Some(&right)) = (encoder.get(&token[..split]), encoder.get(&token[split..])) {
                    let merge = Merge { priority: priorities[id], merged: id as Rank };
                    table.insert(left, right, merge, token[split - 1], token[split]);
                }
            }
        }
        let mut table = table.build();
        table.premerge_chars(|id| tokens.get(id as usize).map(|token| &token[..]));
        table
    }

    /// Random texts (20 of 30 characters from `alphabet`) and a vocabulary grown from stretches of
    /// them, up to `size` tokens: the 256 bytes, then stretches of 2-7 bytes made of two known
    /// tokens (whole characters, parts of characters, and tokens across character edges).
    fn grown_vocabulary(alphabet: &[char], size: usize, next: &mut impl FnMut() -> usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let texts: Vec<Vec<u8>> = (0..20)
            .map(|_| (0..30).map(|_| alphabet[next() % alphabet.len()]).collect::<String>().into_bytes())
            .collect();
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|byte| vec![byte]).collect();
        let mut known: std::collections::HashSet<Vec<u8>> = tokens.iter().cloned().collect();
        let mut attempts = 0;
        while tokens.len() < size && attempts < 100_000 {
            attempts += 1;
            let text = &texts[next() % texts.len()];
            let len = 2 + next() % 6;
            let start = next() % (text.len() - len);
            let candidate = &text[start..start + len];
            let split = 1 + next() % (len - 1);
            if known.contains(&candidate[..split]) && known.contains(&candidate[split..]) && known.insert(candidate.to_vec()) {
                tokens.push(candidate.to_vec());
            }
        }
        (texts, tokens)
    }

    #[test]
    fn starting_from_characters_merges_like_the_bytes() {
        // Vocabularies grown from random stretches of multilingual text: whole characters, parts
        // of characters, and tokens across character edges, some made before the characters they
        // cut into. Pieces (valid text, and arbitrary byte slices of it) must merge exactly as the
        // naive loop on bytes, whichever characters qualify.
        let alphabet: Vec<char> = "ab éñжΩ日本のは語".chars().collect();
        let mut random = crate::test_rng::numbers(0x2545_F491_4F6C_DD1Du64);
        let mut next = move || random() as usize;
        let (mut qualified, mut partly, mut refused, mut pieces_with_chars) = (0, 0, 0, 0);
        for round in 0..60 {
            let (texts, tokens) = grown_vocabulary(&alphabet, 256 + 40 + round * 3, &mut next);
            let priorities: Vec<u32> = (0..tokens.len() as u32)
                .map(|id| if round % 3 == 2 && id >= 256 { 256 + (next() % 1000) as u32 } else { id })
                .collect();
            let table = rank_table(&tokens, &priorities);
            for &character in &alphabet {
                if character.len_utf8() > 1 {
                    match table.chars[character as usize] {
                        [NONE, _] => refused += 1,
                        [_, NONE] => qualified += 1,
                        _ => partly += 1,
                    }
                }
            }
            for _ in 0..200 {
                let text = &texts[next() % texts.len()];
                let (from, to) = (next() % text.len(), next() % (text.len() + 1));
                let piece = if round % 2 == 0 { &text[..] } else { &text[from.min(to)..from.max(to)] };
                if piece.iter().enumerate().any(|(at, _)| table.char_symbols(piece, at).is_some()) {
                    pieces_with_chars += 1;
                }
                let mut actual = Vec::new();
                table.encode_piece(piece, &mut actual);
                assert_eq!(actual, naive(&table, piece), "round {round}, piece {piece:?}");
            }
            // Long pieces, past the flat loop in characters.
            let long: Vec<u8> = texts.concat();
            let mut actual = Vec::new();
            table.encode_piece(&long, &mut actual);
            assert_eq!(actual, naive(&table, &long), "round {round}, long piece");
        }
        assert!(
            qualified > 50 && partly > 20 && refused > 50,
            "{qualified} characters start as one symbol, {partly} as two, {refused} as bytes"
        );
        assert!(pieces_with_chars > 1000, "only {pieces_with_chars} pieces started from a character");
    }

    #[test]
    fn every_merge_path_merges_like_the_naive_loop() {
        // Vocabularies grown from random multilingual text (as `Model::from_ranks` fills them: join
        // bits, characters premerged), with priorities in build order or shuffled (so that merges
        // create earlier pairs and the level loop hands over to the heap); pieces of every length
        // class, as bytes and as symbols. Each of the five paths must run, and agree with the
        // naive loop.
        let alphabet: Vec<char> = "ab éñжΩ日本のは語".chars().collect();
        let mut random = crate::test_rng::numbers(0xD1B5_4A32_D192_ED03u64);
        let mut next = move || random() as usize;
        REACHED.with(|reached| reached.set([0; 5]));
        for round in 0..12 {
            let (texts, tokens) = grown_vocabulary(&alphabet, 256 + 150, &mut next);
            let shuffled = round % 2 == 1;
            let priorities: Vec<u32> = (0..tokens.len() as u32)
                .map(|id| if shuffled && id >= 256 { 256 + (next() % 1000) as u32 } else { id })
                .collect();
            let table = rank_table(&tokens, &priorities);
            let ascii: Vec<u8> = texts.concat().into_iter().filter(u8::is_ascii).collect();
            let text = texts.concat();
            let mut pieces: Vec<Vec<u8>> = Vec::new();
            for _ in 0..100 {
                // Short: ASCII (bytes), and multilingual (characters).
                let (from, len) = (next() % (ascii.len() - HEAP_THRESHOLD), 2 + next() % (HEAP_THRESHOLD - 1));
                pieces.push(ascii[from..from + len].to_vec());
                let (from, len) = (next() % (text.len() - HEAP_THRESHOLD), 2 + next() % (HEAP_THRESHOLD - 1));
                pieces.push(text[from..from + len].to_vec());
            }
            // Long: past the flat loop, and past `LEVELS_FROM` (a run of one letter, and text).
            pieces.push(text.clone());
            pieces.push(ascii.repeat(1 + LEVELS_FROM / ascii.len().max(1)));
            pieces.push(vec![b'a'; LEVELS_FROM + next() % 1000]);
            pieces.push(text.repeat(1 + LEVELS_FROM / text.len()));
            for piece in &pieces {
                let mut actual = Vec::new();
                table.encode_piece(piece, &mut actual);
                assert_eq!(actual, naive(&table, piece), "round {round}, bytes {piece:?}");
                // The same as symbols (ids of the bytes, merged without cuts or characters).
                let symbols: Vec<Rank> = piece.iter().map(|&byte| table.byte_id(byte)).collect();
                let mut actual = Vec::new();
                table.encode_symbols(&symbols, &mut actual);
                assert_eq!(actual, naive_symbols(&table, symbols), "round {round}, symbols {piece:?}");
            }
        }
        let counts = REACHED.with(|reached| reached.get());
        for path in [MergePath::Flat, MergePath::FromChars, MergePath::InPlace, MergePath::Levels, MergePath::Heap] {
            assert!(counts[path as usize] > 0, "the {path:?} path never ran: {counts:?}");
        }
    }

    #[test]
    fn a_state_whose_own_pair_merges_early_is_no_start() {
        // の = E3 81 AE: alone, 81 AE merges (priority 50), then E3 + that (30, earlier). After は
        // (E3 81 AF), whose 81 AF merges at 40, the loop on bytes makes 81 AF, then 81 AE, then の.
        // Starting の from [E3, 81 AE] would make の at 30, before 81 AF, and let AF + の (35) in.
        let (f_af, f_ae, no, af_no) = (300, 301, 302, 303);
        let mut table = table_with([(0x81, 0xAF, f_af, 40), (0x81, 0xAE, f_ae, 50), (0xE3, f_ae, no, 30), (0xAF, no, af_no, 35)]);
        let bytes: FxHashMap<Rank, Vec<u8>> = [(f_af, vec![0x81, 0xAF]), (f_ae, vec![0x81, 0xAE]), (no, "の".into()), (af_no, [&[0xAF][..], "の".as_bytes()].concat())]
            .into_iter()
            .chain((0..=255u8).map(|byte| (Rank::from(byte), vec![byte])))
            .collect();
        table.premerge_chars(|id| bytes.get(&id).map(|token| &token[..]));
        assert_eq!(table.chars['の' as usize], [NONE, NONE]);
        let piece = "はの".as_bytes();
        let mut actual = Vec::new();
        table.encode_piece(piece, &mut actual);
        assert_eq!(actual, naive(&table, piece));
        assert_eq!(actual, vec![0xE3, f_af, no]);
    }

    #[test]
    fn ties_go_to_the_leftmost_pair() {
        let aa = 256;
        let table = table(&[(b'a' as Rank, b'a' as Rank, aa)]);
        assert_eq!(both_ways(&table, b"aaa"), vec![aa, b'a' as Rank]);
        assert_eq!(both_ways(&table, b"aaaa"), vec![aa, aa]);
    }

    #[test]
    fn lowest_priority_merges_first() {
        let (ab, bc) = (256, 257);
        // bc has the lower priority, so "abc" becomes a + bc.
        let table = table(&[
            (b'b' as Rank, b'c' as Rank, bc),
            (b'a' as Rank, b'b' as Rank, ab),
        ]);
        assert_eq!(both_ways(&table, b"abc"), vec![b'a' as Rank, bc]);
    }

    #[test]
    fn heap_and_flat_agree_on_long_repetitive_pieces() {
        let (aa, aaaa, ab) = (256, 257, 258);
        let table = table(&[
            (b'a' as Rank, b'a' as Rank, aa),
            (aa, aa, aaaa),
            (b'a' as Rank, b'b' as Rank, ab),
        ]);
        for len in [2usize, 3, 5, 7, HEAP_THRESHOLD, HEAP_THRESHOLD + 1, 1000] {
            let piece: Vec<u8> = (0..len)
                .map(|i| if i % 7 == 3 { b'b' } else { b'a' })
                .collect();
            both_ways(&table, &piece);
        }
    }

    #[test]
    fn symbol_sequences_merge_like_the_naive_loop() {
        // Symbols that are not bytes (as SentencePiece's characters), with equal priorities.
        let (x, y, z, xy, yz, xyz) = (1000, 1001, 1002, 1003, 1004, 1005);
        let table = table_with([(x, y, xy, 0), (y, z, yz, 0), (xy, z, xyz, 1), (x, yz, xyz, 1)]);
        let mut state = 7u64;
        for len in [0usize, 1, 2, 3, 17, HEAP_THRESHOLD, HEAP_THRESHOLD + 1, 300, 700] {
            let symbols: Vec<Rank> = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    [x, y, z, 7][(state >> 33) as usize % 4]
                })
                .collect();
            let mut merged = Vec::new();
            table.encode_symbols(&symbols, &mut merged);
            assert_eq!(merged, naive_symbols(&table, symbols.clone()), "on {symbols:?}");
        }
    }

    /// Both long-piece loops, the level loop (with its hand-over) and the heap alone, against the
    /// naive loop.
    fn long_loops_agree(table: &MergeTable, symbols: &[Rank]) {
        let expected = naive_symbols(table, symbols.to_vec());
        let mut chosen = Vec::new();
        table.merge_long_ids(symbols.to_vec(), &mut chosen);
        assert_eq!(chosen, expected, "long merge differs on {} symbols", symbols.len());
        let mut levels_first = LongMerge::new(table, symbols);
        if !levels_first.by_levels(table) {
            levels_first.by_heap(table);
        }
        let mut levels = Vec::new();
        levels_first.emit(&mut levels);
        assert_eq!(levels, expected, "level loop differs on {} symbols", symbols.len());
        let mut heap_only = LongMerge::new(table, symbols);
        heap_only.by_heap(table);
        let mut heap = Vec::new();
        heap_only.emit(&mut heap);
        assert_eq!(heap, expected, "heap loop differs on {} symbols", symbols.len());
    }

    #[test]
    fn long_loops_follow_the_rule_when_merges_create_earlier_priorities() {
        // Random tables whose priorities ignore the order tokens were built in, so merging often
        // creates a pair that the rule merges before pairs already queued: the level loop must go
        // back, and on long pieces hand over to the heap.
        let mut random = crate::test_rng::numbers(0x9E37_79B9_7F4A_7C15u64);
        let mut next = move || random() as usize;
        for round in 0..40 {
            let alphabet: Vec<Rank> = (0..2 + round % 5).map(|byte| byte as Rank).collect();
            let mut table = MergeTable::builder(byte_ids());
            let mut ids = alphabet.clone();
            for merged in 256..256 + 30 + round as Rank * 5 {
                let (left, right) = (ids[next() % ids.len()], ids[next() % ids.len()]);
                let priority = if round % 2 == 0 { next() as u32 % 1000 } else { merged };
                table.insert(left, right, Merge { priority, merged });
                ids.push(merged);
            }
            let table = table.build();
            for len in [HEAP_THRESHOLD + 1, 300, 2000] {
                let symbols: Vec<Rank> = (0..len).map(|_| alphabet[next() % alphabet.len()]).collect();
                long_loops_agree(&table, &symbols);
            }
        }
    }

    #[test]
    fn long_loops_on_one_repeated_symbol() {
        // Doubling tokens a, aa, aaaa, ... (each made from the one before): whole passes per level.
        let mut merges = vec![(b'a' as Rank, b'a' as Rank, 256)];
        for merged in 257..266 {
            merges.push((merged - 1, merged - 1, merged));
        }
        merges.push((b'a' as Rank, 256, 300)); // "aaa", after the doublings
        let table = table(&merges);
        for len in [HEAP_THRESHOLD + 1, 1000, LEVELS_FROM + 1, 10_000] {
            long_loops_agree(&table, &vec![b'a' as Rank; len]);
        }
    }
}
