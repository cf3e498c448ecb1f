//! BPE whose symbols carry word affixes: `tokenizers`' `continuing_subword_prefix` and
//! `end_of_word_suffix` (CLIP's `</w>`, the `##` of WordPiece-style vocabularies).
//!
//! Each byte of a piece (one character of `tokenizers`' byte-level alphabet) starts as a symbol:
//! its character with the prefix unless it is the first, with the suffix if it is the last, looked
//! up in the vocabulary. A symbol the vocabulary lacks becomes, with `byte_fallback`, the `<0xXX>`
//! tokens of its UTF-8 bytes (affixes included) when the vocabulary has them all; else the unknown
//! token (a run of them one, with `fuse_unk`, which a byte fallback between them does not end), or
//! it is left out when there is none. Then the listed merge of lowest line joins
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
    /// With `byte_fallback`: at `place * 256 + byte`, the ids of the `<0xXX>` tokens spelling the
    /// byte's symbol there, empty when the vocabulary lacks one.
    fallback: Option<Box<[Box<[Rank]>]>>,
    /// The most ids one byte of a piece gives (more than one only by byte fallback).
    most_ids_per_byte: usize,
}

/// Where a token of a piece stands, as `tokenizers` reports it: the symbols merged into it take
/// positions in the piece's byte-level spelling (each one its character's length, one for a byte
/// fallback token, the lengths of the characters it stands for for an unknown one), one after the
/// other, skipping the symbols left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceSpan {
    /// The bytes `start..end` of the piece, whose spelling holds the token's positions.
    Bytes(usize, usize),
    /// Positions `start..end` past the spelling's end (byte fallback spells the affixes too):
    /// `tokenizers` then reports them as they are, as offsets into the whole text.
    Raw(usize, usize),
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
        Self { symbols: Box::new(symbols), merges: table, merge_list, unknown, fuse_unknown, whole, fallback: None, most_ids_per_byte: 1 }
    }

    /// The rule with `byte_fallback`: `fallback[place][byte]` lists the ids of the `<0xXX>` tokens
    /// of the UTF-8 bytes of the byte's symbol at that place (its character with its affixes), or
    /// is empty when the vocabulary lacks one of them. Panics unless there are 4 places of 256.
    pub fn with_byte_fallback(mut self, fallback: Vec<Vec<Vec<Rank>>>) -> Self {
        assert!(fallback.len() == 4 && fallback.iter().all(|place| place.len() == 256), "4 places of 256 bytes");
        let fallback: Box<[Box<[Rank]>]> = fallback.into_iter().flatten().map(Vec::into_boxed_slice).collect();
        self.most_ids_per_byte = fallback.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        self.fallback = Some(fallback);
        self
    }

    /// The most ids one byte of a piece gives (more than one only by byte fallback).
    pub fn most_ids_per_byte(&self) -> usize {
        self.most_ids_per_byte
    }

    /// The byte fallback ids of each place and byte (see [`Affixed::with_byte_fallback`]), or None
    /// without `byte_fallback`.
    pub fn byte_fallback(&self) -> Option<Vec<Vec<Vec<Rank>>>> {
        let fallback = self.fallback.as_ref()?;
        Some(fallback.chunks(256).map(|place| place.iter().map(|ids| ids.to_vec()).collect()).collect())
    }

    /// Every id the rule may give for a symbol: the symbols', the byte fallback tokens' and the
    /// unknown token's.
    pub fn symbol_ids(&self) -> impl Iterator<Item = Rank> + '_ {
        let fallback = self.fallback.iter().flat_map(|fallback| fallback.iter().flat_map(|ids| ids.iter().copied()));
        self.symbols.iter().flatten().copied().filter(|&id| id != NO_SYMBOL).chain(fallback).chain(self.unknown)
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

    /// Appends the ids of `piece` to `out`, and with `spans` where each stands in the piece (see
    /// [`PieceSpan`]).
    pub fn encode_piece(&self, piece: &[u8], out: &mut Vec<Rank>, spans: Option<&mut Vec<PieceSpan>>) {
        if piece.is_empty() {
            return;
        }
        if let Some(&id) = self.whole.as_ref().and_then(|whole| whole.get(piece)) {
            out.push(id);
            if let Some(spans) = spans {
                spans.push(PieceSpan::Bytes(0, piece.len()));
            }
            return;
        }
        let room = piece.len().saturating_mul(self.most_ids_per_byte);
        let mut symbols: Vec<Symbol> = memory::with_capacity(room, "merging a piece", piece.len(), "bytes");
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
            let fallback = self.fallback.as_ref().map_or(&[][..], |fallback| &fallback[place * 256 + usize::from(byte)]);
            if id != NO_SYMBOL {
                symbols.extend(pending.take());
                symbols.push(Symbol { id, spelled, prev: END, next: END });
            } else if !fallback.is_empty() {
                // as `tokenizers`: an unknown symbol before stays pending, to come after these
                symbols.extend(fallback.iter().map(|&id| Symbol { id, spelled: 1, prev: END, next: END }));
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
        let mut at = if symbols.is_empty() { END } else { 0 };
        let mut placed = spans.map(|spans| (spans, spelled_starts(piece), 0usize));
        while at != END {
            let symbol = symbols[at as usize];
            out.push(symbol.id);
            if let Some((spans, spelled_starts, position)) = placed.as_mut() {
                let end = *position + symbol.spelled as usize;
                spans.push(match spelled_starts.last() {
                    Some(&spelling_end) if end <= spelling_end => {
                        let byte_at = |position: usize| spelled_starts.partition_point(|&start| start <= position) - 1;
                        PieceSpan::Bytes(byte_at(*position), byte_at(end - 1) + 1)
                    }
                    _ => PieceSpan::Raw(*position, end),
                });
                *position = end;
            }
            at = symbol.next;
        }
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

/// Where each byte of `piece` starts in its byte-level spelling, and where the spelling ends.
fn spelled_starts(piece: &[u8]) -> Vec<usize> {
    let mut position = 0;
    let mut starts: Vec<usize> = piece
        .iter()
        .map(|&byte| {
            let start = position;
            position += spelled_len(byte) as usize;
            start
        })
        .collect();
    starts.push(position);
    starts
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

    fn encoded(rule: &Affixed, piece: &[u8]) -> (Vec<Rank>, Vec<PieceSpan>) {
        let (mut ids, mut spans) = (Vec::new(), Vec::new());
        rule.encode_piece(piece, &mut ids, Some(&mut spans));
        (ids, spans)
    }

    fn bytes(spans: &[(usize, usize)]) -> Vec<PieceSpan> {
        spans.iter().map(|&(start, end)| PieceSpan::Bytes(start, end)).collect()
    }

    #[test]
    fn symbols_take_their_place_and_unknown_ones_drop_or_fuse() {
        let plain = rule(&[], None, false);
        assert_eq!(encoded(&plain, b"ab"), (vec![97, 768 + 98], bytes(&[(0, 1), (1, 2)])));
        assert_eq!(encoded(&plain, b"c"), (vec![], vec![]));
        assert_eq!(encoded(&plain, b"cc"), (vec![99], bytes(&[(0, 1)])));
        let mut symbols = *plain.symbols();
        symbols[INSIDE][usize::from(b'c')] = NO_SYMBOL;
        let unknown = Affixed::new(symbols, &[], Some(5000), false, None);
        assert_eq!(encoded(&unknown, b"xcc"), (vec![120, 5000, 5000], bytes(&[(0, 1), (1, 2), (2, 3)])));
        let fused = Affixed::new(symbols, &[], Some(5000), true, None);
        assert_eq!(encoded(&fused, b"xcc"), (vec![120, 5000], bytes(&[(0, 1), (1, 3)])));
    }

    #[test]
    fn the_lowest_line_merges_first_leftmost_on_ties_and_a_pair_takes_its_last_line() {
        // a + ##a -> 1000, 1000 + ##a</w> -> 1001; "aaa": the first pair merges, then with the third.
        let merges = [(97, 256 + 97, 1000), (1000, 768 + 97, 1001)];
        assert_eq!(encoded(&rule(&merges, None, false), b"aaa"), (vec![1001], bytes(&[(0, 3)])));
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
        assert_eq!(encoded(&dropping, b" cab"), (vec![32, 256 + 97, 768 + 98], bytes(&[(0, 1), (1, 2), (2, 3)])));
        let merged = Affixed::new(symbols, &[(32, 256 + 97, 1000)], None, false, None);
        assert_eq!(encoded(&merged, b" cab"), (vec![1000, 768 + 98], bytes(&[(0, 2), (2, 3)])));
    }

    #[test]
    fn byte_fallback_spells_a_missing_symbol_and_its_affixes_past_the_piece() {
        // "c" inside lacks a symbol and falls back to three tokens (a prefix byte and its own two),
        // which run past the piece's spelling (4 bytes): the last ones are placed as they are.
        let plain = rule(&[], Some(5000), false);
        let mut symbols = *plain.symbols();
        symbols[INSIDE][usize::from(b'c')] = NO_SYMBOL;
        symbols[INSIDE][usize::from(b'd')] = NO_SYMBOL;
        let mut fallback = vec![vec![Vec::new(); 256]; 4];
        fallback[INSIDE][usize::from(b'c')] = vec![2000, 2001, 2002];
        let falling_back = Affixed::new(symbols, &[], Some(5000), true, None).with_byte_fallback(fallback);
        let (ids, spans) = encoded(&falling_back, b"xcb");
        assert_eq!(ids, vec![120, 2000, 2001, 2002, 768 + 98]);
        let within = bytes(&[(0, 1), (1, 2), (2, 3)]);
        assert_eq!(spans, [&within[..], &[PieceSpan::Raw(3, 4), PieceSpan::Raw(4, 5)]].concat());
        // an unknown symbol before a fallback comes after it, fused with one after it
        let (ids, spans) = encoded(&falling_back, b"xdcdb");
        assert_eq!(ids, vec![120, 2000, 2001, 2002, 5000, 768 + 98]);
        assert_eq!(spans[3..], [PieceSpan::Bytes(3, 4), PieceSpan::Raw(4, 6), PieceSpan::Raw(6, 7)]);
    }
}
