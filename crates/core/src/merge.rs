//! Byte-pair merging of one piece.
//!
//! A `MergeTable` maps an adjacent pair of token ids to the merge it allows: the id of the merged
//! token and its priority (lower merges first). Each format fills the table its own way (tiktoken
//! ranks: every split of every token; merges lists: the listed pairs only; SentencePiece: every split
//! of every piece, prioritized by score), and the loop is the same: repeatedly merge the adjacent
//! pair with the lowest priority, ties to the leftmost pair. Byte-level formats start from the ids of
//! the piece's bytes ([`MergeTable::encode_piece`]); SentencePiece starts from character symbols
//! ([`MergeTable::encode_symbols`]).
//!
//! Short pieces use a flat scan (cache-friendly, like tiktoken); long pieces use a linked list and a
//! min-heap with lazy deletion, so a megabyte without whitespace stays O(n log n).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use crate::Rank;

/// Pieces longer than this (in bytes) use the heap-based merge.
const HEAP_THRESHOLD: usize = 128;

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

#[inline]
fn pair_key(left: Rank, right: Rank) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

/// The pair table and the initial symbol of each byte.
#[derive(Clone, Debug)]
pub struct MergeTable {
    byte_ids: [Rank; 256],
    pairs: FxHashMap<u64, Merge>,
    /// Bit `x * 256 + y` is set when some merge joins a token ending in byte `x` to a token starting
    /// with byte `y`. Where it is clear, no token can ever span that boundary, so a long piece can be
    /// cut there and its parts merged independently: the result is the same, and each part is short.
    joinable: Box<[u64; 1024]>,
}

impl MergeTable {
    /// A table whose pieces are never cut (every byte boundary is assumed joinable) until
    /// [`MergeTable::insert_joining`] records which boundaries merges can cross.
    pub fn new(byte_ids: [Rank; 256]) -> Self {
        Self {
            byte_ids,
            pairs: FxHashMap::default(),
            joinable: Box::new([u64::MAX; 1024]),
        }
    }

    /// Like [`MergeTable::insert`], also recording the bytes the merge joins (the last byte of
    /// `left`, the first byte of `right`). A table filled only through this method cuts long pieces
    /// at boundaries no merge can cross.
    pub fn insert_joining(
        &mut self,
        left: Rank,
        right: Rank,
        merge: Merge,
        last_of_left: u8,
        first_of_right: u8,
    ) {
        if self.pairs.is_empty() {
            self.joinable.fill(0);
        }
        let bit = usize::from(last_of_left) * 256 + usize::from(first_of_right);
        self.joinable[bit / 64] |= 1 << (bit % 64);
        self.insert(left, right, merge);
    }

    #[inline]
    fn can_join(&self, left: u8, right: u8) -> bool {
        let bit = usize::from(left) * 256 + usize::from(right);
        self.joinable[bit / 64] & (1 << (bit % 64)) != 0
    }

    /// Allows `left` + `right` to merge into `merged` with `priority`. A pair given twice keeps the
    /// merge with the lower priority.
    pub fn insert(&mut self, left: Rank, right: Rank, merge: Merge) {
        self.pairs
            .entry(pair_key(left, right))
            .and_modify(|existing| {
                if merge.priority < existing.priority {
                    *existing = merge;
                }
            })
            .or_insert(merge);
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
        self.pairs.get(&pair_key(left, right)).copied()
    }

    #[inline]
    fn lookup(&self, left: Rank, right: Rank) -> Merge {
        self.pairs
            .get(&pair_key(left, right))
            .copied()
            .unwrap_or(NO_MERGE)
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
            len if len <= HEAP_THRESHOLD => self.merge_flat(piece, out),
            _ => self.merge_heap(piece, out),
        }
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
            _ => self.merge_heap_ids(symbols.to_vec(), out),
        }
    }

    fn merge_flat(&self, piece: &[u8], out: &mut Vec<Rank>) {
        let start = out.len();
        out.extend(piece.iter().map(|&byte| self.byte_id(byte)));
        self.merge_in_place(start, out);
    }

    /// Merges the symbols `out[start..]` (at most `HEAP_THRESHOLD` of them) in place.
    fn merge_in_place(&self, start: usize, out: &mut Vec<Rank>) {
        let symbols = &mut out[start..];
        let mut len = symbols.len();
        // merges[i] is what the pair (symbols[i], symbols[i + 1]) would become; on the stack, since
        // this runs once per piece.
        let mut merges = [NO_MERGE; HEAP_THRESHOLD];
        for (merge, pair) in merges.iter_mut().zip(symbols.windows(2)) {
            *merge = self.lookup(pair[0], pair[1]);
        }
        loop {
            let mut best = NO_MERGE.priority;
            let mut at = usize::MAX;
            for (index, merge) in merges[..len - 1].iter().enumerate() {
                if merge.priority < best {
                    best = merge.priority;
                    at = index;
                }
            }
            if at == usize::MAX {
                break;
            }
            symbols[at] = merges[at].merged;
            symbols.copy_within(at + 2..len, at + 1);
            merges.copy_within(at + 1..len - 1, at);
            len -= 1;
            if at > 0 {
                merges[at - 1] = self.lookup(symbols[at - 1], symbols[at]);
            }
            if at + 1 < len {
                merges[at] = self.lookup(symbols[at], symbols[at + 1]);
            }
        }
        out.truncate(start + len);
    }

    fn merge_heap(&self, piece: &[u8], out: &mut Vec<Rank>) {
        self.merge_heap_ids(piece.iter().map(|&byte| self.byte_id(byte)).collect(), out);
    }

    /// The heap-based loop on initial symbols `ids` (at least one, fewer than 2**32 - 1: positions
    /// are 32-bit, and a segment that long would need some 80 GB to merge).
    fn merge_heap_ids(&self, ids: Vec<Rank>, out: &mut Vec<Rank>) {
        const NONE: u32 = u32::MAX;
        assert!(ids.len() < NONE as usize, "a piece of {} symbols is beyond the merge loop's 32-bit positions", ids.len());
        /// A symbol, indexed by its initial position; merged-away ones get id `NONE`. One array of
        /// small nodes keeps each merge to a few cache lines.
        #[derive(Clone, Copy)]
        struct Node {
            id: Rank,
            prev: u32,
            next: u32,
        }
        #[inline]
        fn entry(priority: u32, position: usize) -> Reverse<u64> {
            Reverse((u64::from(priority) << 32) | position as u64)
        }
        let len = ids.len();
        let mut nodes: Vec<Node> = ids
            .iter()
            .enumerate()
            .map(|(position, &id)| Node {
                id,
                prev: (position as u32).wrapping_sub(1),
                next: if position + 1 == len { NONE } else { position as u32 + 1 },
            })
            .collect();
        drop(ids);

        // Entries are (priority << 32 | left position). An entry is current when the pair now at
        // that position still merges with that priority; otherwise it is stale and skipped. Any
        // current pair with that key is the right one to merge: the heap orders by (priority,
        // position), exactly the rule.
        let initial: Vec<Reverse<u64>> = (0..len - 1)
            .filter_map(|position| {
                let merge = self.lookup(nodes[position].id, nodes[position + 1].id);
                (merge.priority != NO_MERGE.priority).then(|| entry(merge.priority, position))
            })
            .collect();
        let mut heap = BinaryHeap::from(initial);
        while let Some(Reverse(key)) = heap.pop() {
            let priority = (key >> 32) as u32;
            let left = (key & 0xFFFF_FFFF) as usize;
            let node = nodes[left];
            if node.id == NONE || node.next == NONE {
                continue;
            }
            let right = node.next as usize;
            let merge = self.lookup(node.id, nodes[right].id);
            if merge.priority != priority {
                continue;
            }
            let after = nodes[right].next;
            nodes[right].id = NONE;
            nodes[left].id = merge.merged;
            nodes[left].next = after;
            if after != NONE {
                nodes[after as usize].prev = left as u32;
                let next_merge = self.lookup(merge.merged, nodes[after as usize].id);
                if next_merge.priority != NO_MERGE.priority {
                    heap.push(entry(next_merge.priority, left));
                }
            }
            if node.prev != NONE {
                let before = node.prev as usize;
                let previous_merge = self.lookup(nodes[before].id, merge.merged);
                if previous_merge.priority != NO_MERGE.priority {
                    heap.push(entry(previous_merge.priority, before));
                }
            }
        }
        let mut position = 0u32;
        while position != NONE {
            out.push(nodes[position as usize].id);
            position = nodes[position as usize].next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes are ids 0-255; merges given as (left, right, merged) in priority order.
    fn table(merges: &[(Rank, Rank, Rank)]) -> MergeTable {
        let mut byte_ids = [0; 256];
        for (byte, id) in byte_ids.iter_mut().enumerate() {
            *id = byte as Rank;
        }
        let mut table = MergeTable::new(byte_ids);
        for (priority, &(left, right, merged)) in merges.iter().enumerate() {
            table.insert(
                left,
                right,
                Merge {
                    priority: priority as u32,
                    merged,
                },
            );
        }
        table
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
        let mut heap = Vec::new();
        table.merge_heap(piece, &mut heap);
        assert_eq!(
            heap, expected,
            "heap merge differs from the naive loop on {piece:?}"
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
        let mut uncut = table(&[]);
        let mut cut = table(&[]);
        let alphabet = b"abcdxyz";
        let mut tokens: Vec<Vec<u8>> = alphabet.iter().map(|&b| vec![b]).collect();
        let mut ids: Vec<Rank> = alphabet.iter().map(|&b| b as Rank).collect();
        let mut seed = 12345u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as usize
        };
        for merged in 256..400 {
            let (l, r) = (next() % tokens.len(), next() % tokens.len());
            let merge = Merge { priority: merged, merged };
            uncut.insert(ids[l], ids[r], merge);
            let (last, first) = (*tokens[l].last().unwrap(), tokens[r][0]);
            cut.insert_joining(ids[l], ids[r], merge, last, first);
            tokens.push([tokens[l].clone(), tokens[r].clone()].concat());
            ids.push(merged);
        }
        for len in [130usize, 500, 5000] {
            let piece: Vec<u8> = (0..len).map(|_| alphabet[next() % alphabet.len()]).collect();
            let (mut expected, mut actual) = (Vec::new(), Vec::new());
            uncut.encode_piece(&piece, &mut expected);
            cut.encode_piece(&piece, &mut actual);
            assert_eq!(actual, expected);
            assert_eq!(expected, naive(&uncut, &piece));
        }
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
        for len in [2usize, 3, 5, 7, 64, 129, 1000] {
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
        let mut table = table(&[]);
        for (left, right, merged, priority) in [
            (x, y, xy, 0),
            (y, z, yz, 0),
            (xy, z, xyz, 1),
            (x, yz, xyz, 1),
        ] {
            table.insert(left, right, Merge { priority, merged });
        }
        let mut state = 7u64;
        for len in [0usize, 1, 2, 3, 17, 128, 129, 700] {
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
}
