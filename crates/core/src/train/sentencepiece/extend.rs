//! Extending a SentencePiece BPE model: SentencePiece's merge loop continued from the model's own
//! encoding of counted words.
//!
//! 1. Each word starts as the model encodes it: its characters, then repeatedly the adjacent pair
//!    whose text is a piece of the highest score, leftmost on ties. A character that is no piece
//!    stays alone and pairs with nothing.
//! 2. The loop: among adjacent pairs of pieces whose text is valid ([`PieceRules::is_valid`]) and
//!    not a piece yet, the greatest frequency wins (occurrences weighted by word counts,
//!    overlapping ones each counted), ties to fewer characters, then the smaller text, then the
//!    shorter left part; its occurrences are merged left to right; the frequencies are updated.
//!    It stops after the pieces wanted, or when no pair is left (an extension learns nothing that
//!    does not occur).
//! 3. Scores: the `i`-th new piece scores one less than the lowest score among the model's
//!    pieces of two characters or more (`0` without one), minus `i`, as a longer training would
//!    score it.
//!
//! Frequencies are kept exact; a max-heap holds `(frequency, pair)` entries, stale ones corrected
//! when popped (a pair's frequency only grows when a merge forms one of its parts, and it is
//! pushed then).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::{FxHashMap, FxHashSet};

use super::rules::PieceRules;
use super::trainer::ScoredPiece;

/// A symbol: a piece of the model, a piece learned, or a character that is no piece.
struct Symbol {
    text: String,
    chars: u32,
    is_piece: bool,
}

struct Symbols {
    all: Vec<Symbol>,
    ids: FxHashMap<String, u32>,
}

impl Symbols {
    fn id(&mut self, text: &str, is_piece: bool) -> u32 {
        if let Some(&id) = self.ids.get(text) {
            if is_piece {
                self.all[id as usize].is_piece = true;
            }
            return id;
        }
        let id = self.all.len() as u32;
        self.all.push(Symbol { text: text.to_owned(), chars: text.chars().count() as u32, is_piece });
        self.ids.insert(text.to_owned(), id);
        id
    }
}

type Pair = (u32, u32);

/// A heap entry in SentencePiece's order, the greatest first: higher frequency, then fewer
/// characters, then the smaller text (UTF-8 orders as code points), then the shorter left part.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    freq: u64,
    chars: Reverse<u32>,
    text: Reverse<Box<str>>,
    left_chars: Reverse<u32>,
    pair: Pair,
}

impl Entry {
    fn new(freq: u64, pair: Pair, symbols: &Symbols) -> Self {
        let (left, right) = (&symbols.all[pair.0 as usize], &symbols.all[pair.1 as usize]);
        Entry {
            freq,
            chars: Reverse(left.chars + right.chars),
            text: Reverse(format!("{}{}", left.text, right.text).into_boxed_str()),
            left_chars: Reverse(left.chars),
            pair,
        }
    }
}

/// The model's encoding of one word (see the module).
fn encode_word(word: &str, scores: &FxHashMap<&str, f32>) -> Vec<String> {
    let mut parts: Vec<String> = word.chars().map(String::from).collect();
    let mut joined = String::new();
    loop {
        let mut best: Option<(f32, usize)> = None;
        for i in 0..parts.len().saturating_sub(1) {
            joined.clear();
            joined.push_str(&parts[i]);
            joined.push_str(&parts[i + 1]);
            if let Some(&score) = scores.get(joined.as_str()) {
                if best.is_none_or(|(top, _)| score > top) {
                    best = Some((score, i));
                }
            }
        }
        let Some((_, i)) = best else { return parts };
        let right = parts.remove(i + 1);
        parts[i].push_str(&right);
    }
}

/// Learns up to `num_new` pieces from `words` (normalized words as SentencePiece's trainer counts
/// them, with their counts), continuing the loop of a model whose normal pieces and scores are
/// `pieces` (see the module). `on_piece(done)` is called after each new piece; `false` stops.
pub fn extend_pieces<'w>(
    words: impl IntoIterator<Item = (&'w str, u64)>,
    pieces: &[(String, f32)],
    num_new: usize,
    rules: &PieceRules,
    mut on_piece: impl FnMut(usize) -> bool,
) -> Vec<ScoredPiece> {
    let scores: FxHashMap<&str, f32> = pieces.iter().map(|(text, score)| (text.as_str(), *score)).collect();
    let mut symbols = Symbols { all: Vec::new(), ids: FxHashMap::default() };
    for (text, _) in pieces {
        symbols.id(text, true);
    }
    let mut word_symbols: Vec<Vec<u32>> = Vec::new();
    let mut counts: Vec<u64> = Vec::new();
    for (word, count) in words {
        if count == 0 {
            continue;
        }
        let parts = encode_word(word, &scores);
        if parts.len() < 2 {
            continue;
        }
        word_symbols.push(parts.iter().map(|part| symbols.id(part, scores.contains_key(part.as_str()))).collect());
        counts.push(count);
    }
    let lowest = pieces
        .iter()
        .filter(|(text, _)| text.chars().count() > 1)
        .map(|&(_, score)| score)
        .fold(None, |low: Option<f32>, score| Some(low.map_or(score, |low| low.min(score))));
    let first_score = lowest.unwrap_or(1.0) - 1.0;

    // Which pairs may merge: both parts pieces, the text valid and not a piece yet (checked again
    // when the pair wins, since a piece may be learned from another pair of the same text).
    let mut valid: FxHashMap<Pair, bool> = FxHashMap::default();
    let mut is_candidate = |pair: Pair, symbols: &Symbols| -> bool {
        *valid.entry(pair).or_insert_with(|| {
            let (left, right) = (&symbols.all[pair.0 as usize], &symbols.all[pair.1 as usize]);
            if !left.is_piece || !right.is_piece {
                return false;
            }
            let text: Vec<char> = left.text.chars().chain(right.text.chars()).collect();
            rules.is_valid(&text)
        })
    };
    let mut freq: FxHashMap<Pair, u64> = FxHashMap::default();
    let mut where_: FxHashMap<Pair, Vec<u32>> = FxHashMap::default();
    for (word, parts) in word_symbols.iter().enumerate() {
        for window in parts.windows(2) {
            let pair = (window[0], window[1]);
            if is_candidate(pair, &symbols) {
                *freq.entry(pair).or_insert(0) += counts[word];
                let listed = where_.entry(pair).or_default();
                if listed.last() != Some(&(word as u32)) {
                    listed.push(word as u32);
                }
            }
        }
    }

    let mut learned: Vec<ScoredPiece> = Vec::new();
    let mut heap: BinaryHeap<Entry> = freq.iter().map(|(&pair, &count)| Entry::new(count, pair, &symbols)).collect();
    while learned.len() < num_new {
        let mut best = None;
        while let Some(mut entry) = heap.pop() {
            let current = freq.get(&entry.pair).copied().unwrap_or(0);
            if current == 0 {
                continue;
            }
            if symbols.ids.get(&*entry.text.0).is_some_and(|&id| symbols.all[id as usize].is_piece) {
                continue; // the same piece, reached another way: dropped
            }
            if current != entry.freq {
                entry.freq = current;
                heap.push(entry);
                continue;
            }
            best = Some((entry.pair, String::from(entry.text.0)));
            break;
        }
        let Some((pair, text)) = best else { break };
        let merged = symbols.id(&text, true);
        learned.push((text, first_score - learned.len() as f32));
        // Merge every occurrence, left to right, in the words listed; recount their pairs.
        let listed = where_.remove(&pair).unwrap_or_default();
        freq.remove(&pair);
        let mut grown: FxHashSet<Pair> = FxHashSet::default();
        for &word in &listed {
            let parts = &word_symbols[word as usize];
            if !parts.windows(2).any(|window| (window[0], window[1]) == pair) {
                continue;
            }
            let count = counts[word as usize];
            for window in parts.windows(2) {
                let old = (window[0], window[1]);
                if old != pair {
                    if let Some(total) = freq.get_mut(&old) {
                        *total -= count;
                    }
                }
            }
            let mut out = Vec::with_capacity(parts.len());
            let mut i = 0;
            while i < parts.len() {
                if i + 1 < parts.len() && (parts[i], parts[i + 1]) == pair {
                    out.push(merged);
                    i += 2;
                } else {
                    out.push(parts[i]);
                    i += 1;
                }
            }
            for window in out.windows(2) {
                let new = (window[0], window[1]);
                if is_candidate(new, &symbols) {
                    *freq.entry(new).or_insert(0) += count;
                    if new.0 == merged || new.1 == merged {
                        grown.insert(new);
                    }
                    let listed = where_.entry(new).or_default();
                    if listed.last() != Some(&word) {
                        listed.push(word);
                    }
                }
            }
            word_symbols[word as usize] = out;
        }
        for new in grown {
            heap.push(Entry::new(freq[&new], new, &symbols));
        }
        if !on_piece(learned.len()) {
            break;
        }
    }
    learned
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{below, rules};
    use super::*;

    /// Recount every pair before each merge (as `tests/support/naive_extend_sentencepiece.py`).
    fn naive(words: &[(&str, u64)], pieces: &[(String, f32)], num_new: usize) -> Vec<ScoredPiece> {
        let scores: FxHashMap<&str, f32> = pieces.iter().map(|(text, score)| (text.as_str(), *score)).collect();
        let mut state: Vec<(Vec<String>, u64)> =
            words.iter().map(|&(word, count)| (encode_word(word, &scores), count)).collect();
        let mut known: FxHashSet<String> = pieces.iter().map(|(text, _)| text.clone()).collect();
        let low = pieces.iter().filter(|(text, _)| text.chars().count() > 1).map(|p| p.1).fold(f32::INFINITY, f32::min);
        let next = if low.is_finite() { low - 1.0 } else { 0.0 };
        let rules = rules();
        let mut learned = Vec::new();
        while learned.len() < num_new {
            let mut pairs: FxHashMap<(String, String), u64> = FxHashMap::default();
            for (parts, count) in &state {
                for window in parts.windows(2) {
                    let text = format!("{}{}", window[0], window[1]);
                    let chars: Vec<char> = text.chars().collect();
                    if known.contains(&window[0]) && known.contains(&window[1]) && !known.contains(&text)
                        && rules.is_valid(&chars)
                    {
                        *pairs.entry((window[0].clone(), window[1].clone())).or_insert(0) += count;
                    }
                }
            }
            let key = |(pair, count): &(&(String, String), &u64)| {
                let text = format!("{}{}", pair.0, pair.1);
                (Reverse(**count), text.chars().count(), text, pair.0.chars().count())
            };
            let Some(((left, right), _)) = pairs.iter().min_by_key(|entry| key(entry)) else { break };
            let (left, right) = (left.clone(), right.clone());
            let merged = format!("{left}{right}");
            for (parts, _) in &mut state {
                let mut out = Vec::new();
                let mut i = 0;
                while i < parts.len() {
                    if i + 1 < parts.len() && parts[i] == left && parts[i + 1] == right {
                        out.push(merged.clone());
                        i += 2;
                    } else {
                        out.push(parts[i].clone());
                        i += 1;
                    }
                }
                *parts = out;
            }
            known.insert(merged.clone());
            learned.push((merged, next - learned.len() as f32));
        }
        learned
    }

    #[test]
    fn agrees_with_recounting_every_pair_on_random_models_and_words() {
        let mut below = below(0x5eed_0f5e_17ce_u64);
        let alphabet = ["\u{2581}", "a", "b", "c", "é", "1", "あ"];
        for _ in 0..200 {
            let mut pieces: Vec<(String, f32)> = Vec::new();
            for (i, c) in alphabet.iter().enumerate() {
                if below(6) > 0 {
                    pieces.push((c.to_string(), -100.0 - i as f32));
                }
            }
            for i in 0..below(8) {
                let len = 2 + below(3) as usize;
                let text: String = (0..len).map(|_| alphabet[below(alphabet.len() as u64) as usize]).collect();
                if !pieces.iter().any(|(known, _)| *known == text) {
                    pieces.push((text, -(i as f32)));
                }
            }
            let mut words: Vec<(String, u64)> = Vec::new();
            for _ in 0..1 + below(30) {
                let len = 1 + below(8) as usize;
                let mut word = String::from("\u{2581}");
                word.extend((0..len).map(|_| alphabet[1 + below(alphabet.len() as u64 - 1) as usize]));
                words.push((word, 1 + below(4)));
            }
            let words: Vec<(&str, u64)> = words.iter().map(|(word, count)| (word.as_str(), *count)).collect();
            let wanted = below(25) as usize;
            let ours = extend_pieces(words.iter().copied(), &pieces, wanted, &rules(), |_| true);
            assert_eq!(ours, naive(&words, &pieces, wanted), "{pieces:?} {words:?}");
        }
    }
}
