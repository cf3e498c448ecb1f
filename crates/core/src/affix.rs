//! BPE whose symbols carry word affixes: `tokenizers`' `continuing_subword_prefix` and
//! `end_of_word_suffix` (CLIP's `</w>`, the `##` of WordPiece-style vocabularies).
//!
//! Each byte of a piece (one character of `tokenizers`' byte-level alphabet) starts as a symbol:
//! its character with the prefix unless it is the first, with the suffix if it is the last, looked
//! up in the vocabulary. A symbol the vocabulary lacks becomes the unknown token (a run of them one,
//! with `fuse_unk`), or is left out when there is none. Then the listed merge of lowest line joins
//! its adjacent pair, leftmost on ties, into the token the file names for it (left + right without
//! the prefix), until none applies: `tokenizers`' `merge_word` and `Word::merge_all`. The plain
//! byte-level path ([`crate::merge`]) merges bytes into the tokens they spell, which these are not;
//! so these models take this path alone, without its cache or whole-token tables.

use std::cmp::Reverse;

use dary_heap::QuaternaryHeap;
use rustc_hash::FxHashMap;

use crate::memory;
use crate::Rank;

/// No symbol: the vocabulary lacks it.
pub const NO_SYMBOL: Rank = Rank::MAX;

/// The places of a byte in its piece, which decide its affixes: alone (both), first (none but the
/// suffix of a lone byte), inside (prefix), last (prefix and suffix).
pub const ALONE: usize = 0;
pub const FIRST: usize = 1;
pub const INSIDE: usize = 2;
pub const LAST: usize = 3;

/// The merge rule of a model with word affixes.
#[derive(Clone, Debug)]
pub struct Affixed {
    /// `symbols[place][byte]`: the id of the byte's symbol at that place, or [`NO_SYMBOL`].
    symbols: Box<[[Rank; 256]; 4]>,
    /// The listed pairs (each at its last line, as `tokenizers` keeps them) -> (priority, merged id).
    merges: FxHashMap<(Rank, Rank), (u32, Rank)>,
    /// The pairs in priority order.
    merge_list: Vec<(Rank, Rank)>,
    unknown: Option<Rank>,
    fuse_unknown: bool,
    /// With `ignore_merges`, the pieces that are tokens (their bytes) and their ids.
    whole: Option<FxHashMap<Box<[u8]>, Rank>>,
}

/// A symbol of the merge loop: its id, its length in the piece's byte-level spelling (one or two
/// UTF-8 bytes per byte) and its live neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    id: Rank,
    spelled: u32,
    prev: u32,
    next: u32,
}

const END: u32 = u32::MAX;

/// The length of a byte's character in the byte-level alphabet (printable ASCII is itself).
fn spelled_len(byte: u8) -> u32 {
    if (0x21..=0x7E).contains(&byte) {
        1
    } else {
        2
    }
}

impl Affixed {
    /// The rule: `symbols` as above; `merges` lists `(left, right, merged)` in line order (a pair
    /// listed again takes its last line, as `tokenizers` does).
    pub fn new(
        symbols: [[Rank; 256]; 4],
        merges: &[(Rank, Rank, Rank)],
        unknown: Option<Rank>,
        fuse_unknown: bool,
        whole: Option<FxHashMap<Box<[u8]>, Rank>>,
    ) -> Self {
        let mut last_line: FxHashMap<(Rank, Rank), usize> = FxHashMap::default();
        for (line, &(left, right, _)) in merges.iter().enumerate() {
            last_line.insert((left, right), line);
        }
        let mut table = FxHashMap::with_capacity_and_hasher(last_line.len(), Default::default());
        let mut merge_list = Vec::with_capacity(last_line.len());
        for (line, &(left, right, merged)) in merges.iter().enumerate() {
            if last_line[&(left, right)] == line {
                table.insert((left, right), (merge_list.len() as u32, merged));
                merge_list.push((left, right));
            }
        }
        Self { symbols: Box::new(symbols), merges: table, merge_list, unknown, fuse_unknown, whole }
    }

    /// The listed pairs in priority order.
    pub fn merge_list(&self) -> &[(Rank, Rank)] {
        &self.merge_list
    }

    pub fn unknown(&self) -> Option<Rank> {
        self.unknown
    }

    pub fn fuse_unknown(&self) -> bool {
        self.fuse_unknown
    }

    pub fn ignore_merges(&self) -> bool {
        self.whole.is_some()
    }

    /// The symbol id of each byte at each place (see [`Affixed::new`]).
    pub fn symbols(&self) -> &[[Rank; 256]; 4] {
        &self.symbols
    }

    /// Appends the ids of `piece` to `out`, and with `starts` the byte offset (`start` + where in
    /// the piece) of each, as `tokenizers` places them: each token after the symbols kept before
    /// it, in the byte-level spelling, mapped back to the byte spelled there.
    pub fn encode_piece(&self, piece: &[u8], start: usize, out: &mut Vec<Rank>, starts: Option<&mut Vec<usize>>) {
        if piece.is_empty() {
            return;
        }
        if let Some(&id) = self.whole.as_ref().and_then(|whole| whole.get(piece)) {
            out.push(id);
            if let Some(starts) = starts {
                starts.push(start);
            }
            return;
        }
        let mut symbols: Vec<Symbol> = memory::with_capacity(piece.len(), "merging a piece", piece.len(), "bytes");
        let mut pending: Option<Symbol> = None; // an unknown symbol not yet added (fused with the next)
        let last = piece.len() - 1;
        for (at, &byte) in piece.iter().enumerate() {
            let place = match (at == 0, at == last) {
                (true, true) => ALONE,
                (true, false) => FIRST,
                (false, false) => INSIDE,
                (false, true) => LAST,
            };
            let spelled = spelled_len(byte);
            let id = self.symbols[place][usize::from(byte)];
            if id != NO_SYMBOL {
                symbols.extend(pending.take());
                symbols.push(Symbol { id, spelled, prev: END, next: END });
            } else if let Some(unknown) = self.unknown {
                pending = Some(match pending {
                    Some(mut fused) if self.fuse_unknown => {
                        fused.spelled += spelled;
                        fused
                    }
                    earlier => {
                        symbols.extend(earlier);
                        Symbol { id: unknown, spelled, prev: END, next: END }
                    }
                });
            }
        }
        symbols.extend(pending);
        self.merge(&mut symbols);
        let before = out.len();
        let mut at = if symbols.is_empty() { END } else { 0 };
        let mut offsets = starts.map(|starts| (starts, spelled_starts(piece), 0u32));
        while at != END {
            let symbol = symbols[at as usize];
            out.push(symbol.id);
            if let Some((starts, spelled_starts, position)) = offsets.as_mut() {
                let byte = spelled_starts.partition_point(|&spelled_start| spelled_start <= *position) - 1;
                starts.push(start + byte);
                *position += symbol.spelled;
            }
            at = symbol.next;
        }
        debug_assert!(out.len() >= before);
    }

    /// `tokenizers`' `Word::merge_all`: a heap of (priority, position), stale entries skipped.
    fn merge(&self, symbols: &mut [Symbol]) {
        let len = symbols.len();
        for (at, symbol) in symbols.iter_mut().enumerate() {
            symbol.prev = if at == 0 { END } else { at as u32 - 1 };
            symbol.next = if at + 1 == len { END } else { at as u32 + 1 };
        }
        let mut queue: QuaternaryHeap<Reverse<(u32, u32, Rank)>> = QuaternaryHeap::new();
        for at in 1..len {
            if let Some(&(priority, merged)) = self.merges.get(&(symbols[at - 1].id, symbols[at].id)) {
                queue.push(Reverse((priority, at as u32 - 1, merged)));
            }
        }
        while let Some(Reverse((_, at, merged))) = queue.pop() {
            let left = symbols[at as usize];
            if left.id == NO_SYMBOL || left.next == END {
                continue;
            }
            let right = symbols[left.next as usize];
            if self.merges.get(&(left.id, right.id)).is_none_or(|&(_, current)| current != merged) {
                continue;
            }
            symbols[at as usize].id = merged;
            symbols[at as usize].spelled += right.spelled;
            symbols[at as usize].next = right.next;
            symbols[left.next as usize].id = NO_SYMBOL;
            if right.next != END {
                symbols[right.next as usize].prev = at;
                let after = symbols[right.next as usize].id;
                if let Some(&(priority, merged)) = self.merges.get(&(merged, after)) {
                    queue.push(Reverse((priority, at, merged)));
                }
            }
            if left.prev != END {
                let before = symbols[left.prev as usize].id;
                if let Some(&(priority, merged)) = self.merges.get(&(before, merged)) {
                    queue.push(Reverse((priority, left.prev, merged)));
                }
            }
        }
    }
}

/// Where each byte of `piece` starts in its byte-level spelling.
fn spelled_starts(piece: &[u8]) -> Vec<u32> {
    let mut position = 0;
    piece
        .iter()
        .map(|&byte| {
            let start = position;
            position += spelled_len(byte);
            start
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Symbols: byte `b` is id `b` first or alone, `256 + b` inside or last (a prefix), and
    /// `512 + b` last or alone (a suffix) when `b` is `a` or `b`.
    fn rule(merges: &[(Rank, Rank, Rank)], unknown: Option<Rank>, fuse: bool) -> Affixed {
        let mut symbols = [[NO_SYMBOL; 256]; 4];
        for byte in 0..256u32 {
            symbols[FIRST][byte as usize] = byte;
            symbols[INSIDE][byte as usize] = 256 + byte;
        }
        for byte in [b'a', b'b'] {
            symbols[ALONE][usize::from(byte)] = 512 + Rank::from(byte);
            symbols[LAST][usize::from(byte)] = 768 + Rank::from(byte);
        }
        Affixed::new(symbols, merges, unknown, fuse, None)
    }

    fn encoded(rule: &Affixed, piece: &[u8]) -> (Vec<Rank>, Vec<usize>) {
        let (mut ids, mut starts) = (Vec::new(), Vec::new());
        rule.encode_piece(piece, 10, &mut ids, Some(&mut starts));
        (ids, starts)
    }

    #[test]
    fn symbols_take_their_place_and_unknown_ones_drop_or_fuse() {
        let plain = rule(&[], None, false);
        assert_eq!(encoded(&plain, b"ab"), (vec![97, 768 + 98], vec![10, 11]));
        assert_eq!(encoded(&plain, b"c"), (vec![], vec![]));
        assert_eq!(encoded(&plain, b"cc"), (vec![99], vec![10]));
        let mut symbols = *plain.symbols();
        symbols[INSIDE][usize::from(b'c')] = NO_SYMBOL;
        let unknown = Affixed::new(symbols, &[], Some(5000), false, None);
        assert_eq!(encoded(&unknown, b"xcc"), (vec![120, 5000, 5000], vec![10, 11, 12]));
        let fused = Affixed::new(symbols, &[], Some(5000), true, None);
        assert_eq!(encoded(&fused, b"xcc"), (vec![120, 5000], vec![10, 11]));
    }

    #[test]
    fn the_lowest_line_merges_first_leftmost_on_ties_and_a_pair_takes_its_last_line() {
        // a + ##a -> 1000, 1000 + ##a</w> -> 1001; "aaa": the first pair merges, then with the third.
        let merges = [(97, 256 + 97, 1000), (1000, 768 + 97, 1001)];
        assert_eq!(encoded(&rule(&merges, None, false), b"aaa"), (vec![1001], vec![10]));
        let repeated = [(97, 256 + 97, 1000), (256 + 97, 768 + 97, 1002), (97, 256 + 97, 1000)];
        // the pair (a, ##a) now comes after (##a, ##a</w>): "aaa" -> a + [##a ##a</w>]
        assert_eq!(encoded(&rule(&repeated, None, false), b"aaa").0, vec![97, 1002]);
    }

    #[test]
    fn offsets_follow_the_byte_level_spelling_of_the_kept_symbols() {
        // " " spells as two bytes; a dropped symbol moves the later ones back, as in `tokenizers`.
        let plain = rule(&[], None, false);
        let mut symbols = *plain.symbols();
        symbols[INSIDE][usize::from(b'c')] = NO_SYMBOL;
        let dropping = Affixed::new(symbols, &[], None, false, None);
        assert_eq!(encoded(&dropping, b" cab"), (vec![32, 256 + 97, 768 + 98], vec![10, 11, 12]));
    }
}
