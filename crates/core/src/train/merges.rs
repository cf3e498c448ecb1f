//! The merge loop: learn merges from a count table, incrementally.
//!
//! Each distinct piece becomes a *word*: its current symbols (token ids, starting from its bytes,
//! or for [`continue_merges`] from the tokens an existing model encodes it to) and its count. We keep
//! - `pair_counts`: for every adjacent pair of symbols, its occurrences weighted by word count;
//! - `pair_words`: for every pair, the words it was seen in (entries may go stale: a word listed
//!   there may no longer hold the pair, which costs a scan but changes nothing);
//! - a max-heap of `(count, pair)` entries with lazy deletion: an entry whose count is out of date
//!   is re-pushed with the current count when popped instead of being updated in place.
//!
//! The heap is exact because a pair's count only ever grows during a merge that forms one of its
//! two tokens (every new adjacency involves the merged token), and we push the pair with its new
//! count then. Otherwise it can only shrink, so a stale entry overstates its pair and is popped (and
//! corrected) before any entry it could wrongly outrank. (A merge whose bytes are already a token
//! forms that token, which may already sit next to others: the pair grows and is pushed all the same.)
//!
//! Order: the most frequent pair wins; ties go to the lexicographically greatest pair compared as
//! `(bytes of left token, bytes of right token)`.
//!
//! Threads: a merge whose pair is in many words (the first merges, of pairs inside multi-byte
//! characters, touch most words) splits the words into one part per thread of the current rayon
//! pool; each thread merges the listed words of its part and collects its own changes, which are
//! then summed. The result does not depend on the number of threads: pair counts are sums, the heap
//! pops the greatest entry whatever the order entries were pushed in (two entries that compare equal
//! are the same pair and count), and the order of the words in a pair's list only decides the order
//! a later merge visits them in (each word's rewrite depends on that word alone).
//!
//! The loop's parts (packed pairs, [`merge_symbols`], the heap, the token order) also serve
//! [`super::parity`]'s loop over several corpora.

use super::counts::PieceCounts;
use crate::tuning::PARALLEL_MERGE_WORDS;
use crate::Rank;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::cmp::Ordering;

/// Two adjacent token ids, packed as `left << 32 | right` for cheap hashing.
pub(super) type PackedPair = u64;

#[inline]
pub(super) fn pack(left: Rank, right: Rank) -> PackedPair {
    (u64::from(left) << 32) | u64::from(right)
}

#[inline]
pub(super) fn unpack(pair: PackedPair) -> (Rank, Rank) {
    ((pair >> 32) as Rank, pair as Rank)
}

/// The words a pair was seen in (see `pair_words` in [`learn`]): most pairs are in a few words,
/// which are kept inline.
pub(super) type WordList = SmallVec<[u32; 4]>;

/// The words (distinct pieces of two or more bytes) in one flat array of symbols.
struct Words {
    symbols: Vec<Rank>,
    start: Vec<usize>,
    len: Vec<u32>,
    count: Vec<u64>,
}

impl Words {
    fn from_counts(counts: &PieceCounts) -> Self {
        // Pieces of one byte hold no pair and never change: leave them out.
        let kept = || {
            counts
                .iter()
                .filter(|(piece, count)| piece.len() >= 2 && *count > 0)
        };
        let (n_words, n_symbols) = kept().fold((0, 0), |(words, symbols), (piece, _)| {
            (words + 1, symbols + piece.len())
        });
        let mut words = Words {
            symbols: Vec::with_capacity(n_symbols),
            start: Vec::with_capacity(n_words),
            len: Vec::with_capacity(n_words),
            count: Vec::with_capacity(n_words),
        };
        for (piece, count) in kept() {
            words.start.push(words.symbols.len());
            words
                .len
                .push(u32::try_from(piece.len()).expect("a piece longer than 4 GiB"));
            words.count.push(count);
            words
                .symbols
                .extend(piece.iter().map(|&byte| Rank::from(byte)));
        }
        assert!(
            words.count.len() <= u32::MAX as usize,
            "more than 4 billion distinct pieces"
        );
        words
    }

    /// Words from sequences of token ids and their counts; sequences of fewer than two tokens hold no
    /// pair and are left out.
    fn from_sequences<'s>(sequences: impl Iterator<Item = (&'s [Rank], u64)> + Clone) -> Self {
        let kept = || sequences.clone().filter(|(symbols, count)| symbols.len() >= 2 && *count > 0);
        let (n_words, n_symbols) = kept().fold((0, 0), |(words, total), (symbols, _)| (words + 1, total + symbols.len()));
        let mut words = Words {
            symbols: Vec::with_capacity(n_symbols),
            start: Vec::with_capacity(n_words),
            len: Vec::with_capacity(n_words),
            count: Vec::with_capacity(n_words),
        };
        for (symbols, count) in kept() {
            words.start.push(words.symbols.len());
            words.len.push(u32::try_from(symbols.len()).expect("a piece of more than 4 billion tokens"));
            words.count.push(count);
            words.symbols.extend_from_slice(symbols);
        }
        assert!(words.count.len() <= u32::MAX as usize, "more than 4 billion distinct pieces");
        words
    }

    fn symbols(&self, word: usize) -> &[Rank] {
        &self.symbols[self.start[word]..self.start[word] + self.len[word] as usize]
    }

    /// All the words as one part.
    fn whole(&mut self) -> WordsPart<'_> {
        WordsPart {
            first: 0,
            offset: 0,
            symbols: &mut self.symbols,
            len: &mut self.len,
            start: &self.start,
            count: &self.count,
        }
    }

    /// The words cut into `n` parts of consecutive ids, each with its own symbols, so that threads
    /// can merge them at once (every word belongs to exactly one part).
    fn parts(&mut self, n: usize) -> Vec<WordsPart<'_>> {
        let Words { symbols, start, len, count } = self;
        let n_words = count.len();
        let (mut symbols, mut len) = (&mut symbols[..], &mut len[..]);
        let (mut first, mut offset) = (0, 0);
        let mut parts = Vec::with_capacity(n);
        for part in 1..=n {
            let end = n_words * part / n;
            let end_symbol = if end == n_words { offset + symbols.len() } else { start[end] };
            let (part_symbols, rest_symbols) = std::mem::take(&mut symbols).split_at_mut(end_symbol - offset);
            let (part_len, rest_len) = std::mem::take(&mut len).split_at_mut(end - first);
            parts.push(WordsPart {
                first,
                offset,
                symbols: part_symbols,
                len: part_len,
                start,
                count,
            });
            (symbols, len) = (rest_symbols, rest_len);
            (first, offset) = (end, end_symbol);
        }
        parts
    }
}

/// Replaces every occurrence of `(left, right)` in `symbols` (left to right, non-overlapping) by
/// `merged`, reporting each adjacent pair that disappears (`-1`) or appears (`+1`); returns the new
/// number of symbols.
pub(super) fn merge_symbols(
    symbols: &mut [Rank],
    left: Rank,
    right: Rank,
    merged: Rank,
    mut change: impl FnMut(PackedPair, i64),
) -> usize {
    let len = symbols.len();
    // The symbols before the first occurrence stay where they are.
    let Some(first) = symbols.windows(2).position(|pair| pair[0] == left && pair[1] == right) else {
        return len;
    };
    let (mut read, mut write) = (first, first);
    while read < len {
        if read + 1 < len && symbols[read] == left && symbols[read + 1] == right {
            // The symbol before is already written (it may be a `merged` from just before); the
            // one after is not yet read.
            if write > 0 {
                let before = symbols[write - 1];
                change(pack(before, left), -1);
                change(pack(before, merged), 1);
            }
            change(pack(left, right), -1);
            if read + 2 < len {
                let after = symbols[read + 2];
                change(pack(right, after), -1);
                change(pack(merged, after), 1);
            }
            symbols[write] = merged;
            read += 2;
        } else {
            symbols[write] = symbols[read];
            read += 1;
        }
        write += 1;
    }
    write
}

/// The words `first..first + len.len()` of [`Words`], with their symbols: one thread's share of a
/// merge.
struct WordsPart<'a> {
    first: usize,
    /// Where the part's first word starts in `Words::symbols`.
    offset: usize,
    symbols: &'a mut [Rank],
    len: &'a mut [u32],
    start: &'a [usize],
    count: &'a [u64],
}

impl WordsPart<'_> {
    /// Merges `(left, right)` into `merged` in those of the `listed` words that belong to this
    /// part, in list order, adding to `changed` the change in each pair's count and, for each pair
    /// that appears, the words it appears in.
    fn merge(&mut self, listed: &[u32], left: Rank, right: Rank, merged: Rank, changed: &mut PairChanges) {
        for &word in listed {
            let Some(local) = (word as usize).checked_sub(self.first).filter(|&local| local < self.len.len()) else {
                continue;
            };
            let start = self.start[word as usize] - self.offset;
            let symbols = &mut self.symbols[start..start + self.len[local] as usize];
            let word_count = self.count[word as usize] as i64;
            let len = merge_symbols(symbols, left, right, merged, |pair, delta| {
                let (count, words) = changed.entry(pair).or_default();
                *count += delta * word_count;
                if delta > 0 && words.last() != Some(&word) {
                    words.push(word);
                }
            });
            self.len[local] = len as u32;
        }
    }
}

/// What (part of) a merge changed: for each pair, the change in its count (weighted by the words'
/// counts) and the words it appeared in, in the order they were merged.
type PairChanges = FxHashMap<PackedPair, (i64, WordList)>;

/// A max-heap of `(count, pair)` whose order needs the vocabulary (ties compare token bytes), so it
/// takes the comparison as an argument instead of implementing `Ord`.
pub(super) struct PairHeap {
    pub(super) entries: Vec<(u64, PackedPair)>,
}

impl PairHeap {
    pub(super) fn push(
        &mut self,
        entry: (u64, PackedPair),
        greater: &impl Fn(&(u64, PackedPair), &(u64, PackedPair)) -> bool,
    ) {
        self.entries.push(entry);
        let mut child = self.entries.len() - 1;
        while child > 0 {
            let parent = (child - 1) / 2;
            if !greater(&self.entries[child], &self.entries[parent]) {
                break;
            }
            self.entries.swap(child, parent);
            child = parent;
        }
    }

    pub(super) fn pop(
        &mut self,
        greater: &impl Fn(&(u64, PackedPair), &(u64, PackedPair)) -> bool,
    ) -> Option<(u64, PackedPair)> {
        let last = self.entries.pop()?;
        if self.entries.is_empty() {
            return Some(last);
        }
        let top = std::mem::replace(&mut self.entries[0], last);
        self.sift_down(0, greater);
        Some(top)
    }

    fn sift_down(
        &mut self,
        mut parent: usize,
        greater: &impl Fn(&(u64, PackedPair), &(u64, PackedPair)) -> bool,
    ) {
        let n = self.entries.len();
        loop {
            let left = 2 * parent + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && greater(&self.entries[right], &self.entries[left]) {
                right
            } else {
                left
            };
            if !greater(&self.entries[child], &self.entries[parent]) {
                break;
            }
            self.entries.swap(child, parent);
            parent = child;
        }
    }

    pub(super) fn heapify(&mut self, greater: &impl Fn(&(u64, PackedPair), &(u64, PackedPair)) -> bool) {
        for parent in (0..self.entries.len() / 2).rev() {
            self.sift_down(parent, greater);
        }
    }
}

/// The bytes of every token, and each token's first eight bytes as a big-endian number (zeros after
/// a shorter token's end): tie-breaking compares pairs of tokens by their bytes, and most such
/// comparisons are settled by the prefixes, read from one array instead of from each token's own
/// allocation.
pub(super) struct TokenBytes {
    pub(super) bytes: Vec<Vec<u8>>,
    pub(super) prefixes: Vec<u64>,
}

impl TokenBytes {
    pub(super) fn push(&mut self, token: Vec<u8>) {
        let mut prefix = [0u8; 8];
        let len = token.len().min(8);
        prefix[..len].copy_from_slice(&token[..len]);
        self.prefixes.push(u64::from_be_bytes(prefix));
        self.bytes.push(token);
    }

    pub(super) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Compares two tokens' bytes. Prefixes that differ order the tokens as their bytes do: at the
    /// first byte where they differ, either both tokens have a byte there, or the shorter token
    /// has ended (a zero after its end, against a byte of the longer token that is not zero), and
    /// a token that is a prefix of another comes first. Equal prefixes compare the bytes.
    #[inline]
    pub(super) fn compare(&self, a: Rank, b: Rank) -> Ordering {
        let (a, b) = (a as usize, b as usize);
        self.prefixes[a]
            .cmp(&self.prefixes[b])
            .then_with(|| self.bytes[a].cmp(&self.bytes[b]))
    }
}

/// Compares two pairs by `(bytes of left, bytes of right)`.
pub(super) fn compare_pairs(tokens: &TokenBytes, a: PackedPair, b: PackedPair) -> Ordering {
    let (a_left, a_right) = unpack(a);
    let (b_left, b_right) = unpack(b);
    tokens
        .compare(a_left, b_left)
        .then_with(|| tokens.compare(a_right, b_right))
}

/// Appends `new_words` to the word list `words`, leaving out a first word that is already its last.
pub(super) fn append(words: &mut WordList, new_words: WordList) {
    if words.is_empty() {
        *words = new_words;
    } else {
        let repeated = usize::from(words.last() == new_words.first());
        words.extend_from_slice(&new_words[repeated..]);
    }
}

/// Learns up to `num_tokens` new tokens from `counts` by merging; returns their bytes in id order
/// (ids `256..`). Fewer come back when no adjacent pair is left (every piece has become a single
/// token). `on_token(done)` is called after each new token; when it returns `false` (the caller
/// was interrupted) the tokens learned so far come back.
///
/// A merge whose bytes equal an existing token (possible in principle: the same bytes reached by
/// two different splits) reuses that token's id and adds nothing to the vocabulary, so equal bytes
/// are always one symbol, as in a trainer that works on byte strings.
///
/// Merges of pairs found in many pieces run on the threads of the current rayon pool (the global
/// pool, or the one whose `install` calls this); the tokens are the same for every number of
/// threads.
pub fn learn_merges(
    counts: &PieceCounts,
    num_tokens: usize,
    on_token: impl FnMut(usize) -> bool,
) -> Vec<Vec<u8>> {
    learn(Words::from_counts(counts), byte_tokens(), num_tokens, PARALLEL_MERGE_WORDS, on_token).tokens
}

/// [`learn_merges`], dropping the count table as soon as the merge loop has its own copy of the
/// pieces (lower peak memory when the caller has no further use for the table).
pub fn learn_merges_consuming(
    counts: PieceCounts,
    num_tokens: usize,
    on_token: impl FnMut(usize) -> bool,
) -> Vec<Vec<u8>> {
    let words = Words::from_counts(&counts);
    drop(counts);
    learn(words, byte_tokens(), num_tokens, PARALLEL_MERGE_WORDS, on_token).tokens
}

/// What a merge loop learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Learned {
    /// The new tokens' bytes, in the order learned (ids after the known tokens').
    pub tokens: Vec<Vec<u8>>,
    /// Every merge, in order, as the ids of its two tokens (known tokens by their index among the
    /// known ones, new ones after them), including merges whose bytes were already a token.
    pub merges: Vec<(Rank, Rank)>,
}

/// The merge loop started from a given state: `known` are the tokens so far (token `i` has id
/// `i`), `sequences` each distinct piece as the ids of its tokens, with its count. Learns until
/// `num_tokens` tokens not in `known` are learned, or no adjacent pair is left; same order, tie
/// rule and threads as [`learn_merges`] (which is this loop from the 256 single bytes).
/// `on_token(done)` is called after each merge with the number of new tokens so far; `false` stops.
pub fn continue_merges<'s>(
    known: Vec<Vec<u8>>,
    sequences: impl Iterator<Item = (&'s [Rank], u64)> + Clone,
    num_tokens: usize,
    on_token: impl FnMut(usize) -> bool,
) -> Learned {
    learn(Words::from_sequences(sequences), known, num_tokens, PARALLEL_MERGE_WORDS, on_token)
}

fn byte_tokens() -> Vec<Vec<u8>> {
    (0..=255u8).map(|byte| vec![byte]).collect()
}

/// The merge loop from the tokens `known` (ids `0..known.len()`); a merge whose pair is listed in
/// at least `parallel_from` words runs on the current rayon pool's threads.
fn learn(
    mut words: Words,
    known: Vec<Vec<u8>>,
    num_tokens: usize,
    parallel_from: usize,
    mut on_token: impl FnMut(usize) -> bool,
) -> Learned {
    let initial = known.len();
    assert!(initial <= Rank::MAX as usize, "more than 4 billion tokens");
    let mut tokens = TokenBytes { bytes: Vec::with_capacity(initial + num_tokens.min(1 << 20)), prefixes: Vec::new() };
    // Merged bytes are two bytes long at least: shorter tokens are never looked up.
    let mut token_ids: FxHashMap<Vec<u8>, Rank> = known
        .iter()
        .enumerate()
        .filter(|(_, token)| token.len() >= 2)
        .map(|(id, token)| (token.clone(), id as Rank))
        .collect();
    for token in known {
        tokens.push(token);
    }
    let mut merges: Vec<(Rank, Rank)> = Vec::new();

    // Two passes, so that each pair's word list is allocated once at its exact size.
    let mut pair_counts: FxHashMap<PackedPair, u64> = FxHashMap::default();
    let mut incidences: FxHashMap<PackedPair, (u32, u32)> = FxHashMap::default(); // (words, last word)
    for word in 0..words.count.len() {
        let count = words.count[word];
        for window in words.symbols(word).windows(2) {
            let pair = pack(window[0], window[1]);
            *pair_counts.entry(pair).or_insert(0) += count;
            let (listed, last) = incidences.entry(pair).or_insert((0, u32::MAX));
            if *last != word as u32 {
                *listed += 1;
                *last = word as u32;
            }
        }
    }
    let mut pair_words: FxHashMap<PackedPair, WordList> = incidences
        .into_iter()
        .map(|(pair, (listed, _))| (pair, WordList::with_capacity(listed as usize)))
        .collect();
    for word in 0..words.count.len() {
        for window in words.symbols(word).windows(2) {
            let listed = pair_words
                .get_mut(&pack(window[0], window[1]))
                .expect("counted in the first pass");
            if listed.last() != Some(&(word as u32)) {
                listed.push(word as u32);
            }
        }
    }

    let mut heap = PairHeap {
        entries: pair_counts
            .iter()
            .map(|(&pair, &count)| (count, pair))
            .collect(),
    };
    heap.heapify(&|a: &(u64, PackedPair), b: &(u64, PackedPair)| {
        a.0.cmp(&b.0).then_with(|| compare_pairs(&tokens, a.1, b.1)) == Ordering::Greater
    });
    let threads = rayon::current_num_threads();
    let mut part_changes: Vec<PairChanges> = (0..threads).map(|_| PairChanges::default()).collect();

    while tokens.len() - initial < num_tokens {
        let greater = |a: &(u64, PackedPair), b: &(u64, PackedPair)| {
            a.0.cmp(&b.0).then_with(|| compare_pairs(&tokens, a.1, b.1)) == Ordering::Greater
        };
        let Some((count, pair)) = heap.pop(&greater) else {
            break;
        };
        let current = pair_counts.get(&pair).copied().unwrap_or(0);
        if current != count {
            if current > 0 {
                heap.push((current, pair), &greater);
            }
            continue;
        }

        let (left, right) = unpack(pair);
        let bytes = [&tokens.bytes[left as usize][..], &tokens.bytes[right as usize][..]].concat();
        let merged = match token_ids.get(&bytes) {
            Some(&existing) => existing,
            None => {
                let id = Rank::try_from(tokens.len()).expect("more than 4 billion tokens");
                token_ids.insert(bytes.clone(), id);
                tokens.push(bytes);
                id
            }
        };
        pair_counts.remove(&pair);
        merges.push((left, right));

        // The listed words are merged into `part_changes` (on several threads when they are many,
        // each thread merging the words of its own part), then the changes are summed into the
        // first part's, and the new pairs' word lists appended to `pair_words` part by part: the
        // words of a list come in another order than one thread would give, which changes
        // nothing but the order later merges visit them in.
        let listed = pair_words.remove(&pair).unwrap_or_default();
        if threads > 1 && listed.len() >= parallel_from {
            words
                .parts(threads)
                .into_par_iter()
                .zip(part_changes.par_iter_mut())
                .for_each(|(mut part, changed)| part.merge(&listed, left, right, merged, changed));
        } else {
            words.whole().merge(&listed, left, right, merged, &mut part_changes[0]);
        }
        let (changed, others) = part_changes.split_first_mut().expect("one part at least");
        for other in others {
            for (pair, (delta, new_words)) in other.drain() {
                let (sum, words) = changed.entry(pair).or_default();
                *sum += delta;
                append(words, new_words);
            }
        }
        let greater = |a: &(u64, PackedPair), b: &(u64, PackedPair)| {
            a.0.cmp(&b.0).then_with(|| compare_pairs(&tokens, a.1, b.1)) == Ordering::Greater
        };
        for (changed, (delta, new_words)) in changed.drain() {
            if !new_words.is_empty() {
                append(pair_words.entry(changed).or_default(), new_words);
            }
            if changed == pair || delta == 0 {
                continue;
            }
            let entry = pair_counts.entry(changed).or_insert(0);
            let updated = (*entry as i64 + delta) as u64;
            *entry = updated;
            if updated == 0 {
                pair_counts.remove(&changed);
                pair_words.remove(&changed);
            } else if delta > 0 {
                heap.push((updated, changed), &greater);
            }
        }
        if !on_token(tokens.len() - initial) {
            break;
        }
    }
    Learned { tokens: tokens.bytes.split_off(initial), merges }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::counts::tests::table;

    /// The seeds' algorithm: recount every pair of every word before each merge.
    fn naive_merges(counts: &PieceCounts, num_merges: usize) -> Vec<Vec<u8>> {
        let mut words: Vec<(Vec<Vec<u8>>, u64)> = counts
            .iter()
            .map(|(piece, count)| (piece.iter().map(|&b| vec![b]).collect(), count))
            .collect();
        let mut learned: Vec<Vec<u8>> = Vec::new();
        while learned.len() < num_merges {
            let mut pairs: FxHashMap<(Vec<u8>, Vec<u8>), u64> = FxHashMap::default();
            for (symbols, count) in &words {
                for window in symbols.windows(2) {
                    *pairs
                        .entry((window[0].clone(), window[1].clone()))
                        .or_insert(0) += count;
                }
            }
            let Some(best) = pairs
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)))
            else {
                break;
            };
            let ((left, right), _) = best;
            let merged = [left.clone(), right.clone()].concat();
            for (symbols, _) in &mut words {
                let mut out = Vec::new();
                let mut i = 0;
                while i < symbols.len() {
                    if i + 1 < symbols.len() && symbols[i] == left && symbols[i + 1] == right {
                        out.push(merged.clone());
                        i += 2;
                    } else {
                        out.push(symbols[i].clone());
                        i += 1;
                    }
                }
                *symbols = out;
            }
            if !learned.contains(&merged) && merged.len() > 1 {
                learned.push(merged);
            }
        }
        learned
    }

    /// Tables of UTF-8 text full of ties (see the test below).
    fn tie_heavy_table(next: &mut impl FnMut() -> u64) -> PieceCounts {
        let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}";
        let alphabet: Vec<String> = (0..2 + next() % 3)
            .map(|_| {
                let syllable = match next() % 3 {
                    0 => 0xAC38 + 0x40 * (next() % 0x20) as u32,
                    1 => 0xC000 + (next() % 0x1000) as u32,
                    _ => 0xAC00 + (next() % 11172) as u32,
                };
                char::from_u32(syllable).unwrap().to_string()
            })
            .chain(["\u{966}", "\u{96D}", family, "\u{1F3FD}", "a", "b"].map(String::from))
            .collect();
        let mut counts = PieceCounts::new();
        for _ in 0..(5 + next() % 200) {
            let word: String = (0..1 + next() % 8)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize].as_str())
                .collect();
            counts.add(word.as_bytes(), [2, 4][(next() % 2) as usize]);
        }
        counts
    }

    /// Every merge on several threads (`parallel_from` 1: even a pair in one word) learns the
    /// tokens one thread learns, in order, on tables full of ties and on random ones, with more
    /// threads than some tables have words.
    #[test]
    fn several_threads_learn_what_one_thread_learns() {
        let mut next = crate::test_rng::numbers(0x5851_f42d_4c95_7f2du64);
        let pools: Vec<rayon::ThreadPool> = [2, 3]
            .map(|threads| rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap())
            .into();
        for round in 0..80 {
            let counts = if round % 2 == 0 {
                tie_heavy_table(&mut next)
            } else {
                let mut counts = PieceCounts::new();
                for _ in 0..(next() % 60) {
                    let len = 1 + next() % 12;
                    let piece: Vec<u8> = (0..len).map(|_| b"abcd"[(next() % 4) as usize]).collect();
                    counts.add(&piece, 1 + next() % 4);
                }
                counts
            };
            let one = rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap()
                .install(|| learn(Words::from_counts(&counts), byte_tokens(), 2000, 1, |_| true).tokens);
            assert_eq!(one, naive_merges(&counts, 2000));
            for pool in &pools {
                let many = pool.install(|| learn(Words::from_counts(&counts), byte_tokens(), 2000, 1, |_| true).tokens);
                assert_eq!(many, one, "{} threads", pool.current_num_threads());
            }
        }
    }

    #[test]
    fn words_cut_into_parts_cover_every_word_once() {
        let counts = table(&[("ab", 1), ("cde", 2), ("fg", 3), ("hijk", 4), ("lm", 5)]);
        let mut words = Words::from_counts(&counts);
        let expected: Vec<Vec<Rank>> = (0..5).map(|word| words.symbols(word).to_vec()).collect();
        for n in 1..8 {
            let parts = words.parts(n);
            assert_eq!(parts.len(), n);
            let mut seen = Vec::new();
            for part in &parts {
                for local in 0..part.len.len() {
                    let word = part.first + local;
                    let start = part.start[word] - part.offset;
                    seen.push(part.symbols[start..start + part.len[local] as usize].to_vec());
                }
            }
            assert_eq!(seen, expected, "{n} parts");
        }
    }

    #[test]
    fn token_prefixes_order_tokens_as_their_bytes() {
        let words: Vec<&[u8]> = vec![
            b"", b"\0", b"\0\0", b"a", b"a\0", b"a\0\0", b"a\0b", b"ab", b"abcdefgh", b"abcdefgh\0",
            b"abcdefghi", b"abcdefgi", b"\xff", b"\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"b",
        ];
        let mut tokens = TokenBytes { bytes: Vec::new(), prefixes: Vec::new() };
        for word in &words {
            tokens.push(word.to_vec());
        }
        for (a, first) in words.iter().enumerate() {
            for (b, second) in words.iter().enumerate() {
                assert_eq!(tokens.compare(a as Rank, b as Rank), first.cmp(second), "{first:?} {second:?}");
            }
        }
    }

    #[test]
    fn most_frequent_pair_first_and_ties_to_greatest_bytes() {
        // "ab" and "cd" both occur 3 times: "cd" wins the tie, then "ab"; "cdab" needs both.
        let counts = table(&[("ab", 3), ("cd", 3), ("xy", 1)]);
        let tokens = learn_merges(&counts, 3, |_| true);
        assert_eq!(tokens, vec![b"cd".to_vec(), b"ab".to_vec(), b"xy".to_vec()]);
    }

    #[test]
    fn overlapping_runs_merge_left_to_right() {
        let counts = table(&[("aaaa", 1), ("aaa", 2)]);
        let fast = learn_merges(&counts, 10, |_| true);
        assert_eq!(fast, naive_merges(&counts, 10));
        assert_eq!(
            fast,
            vec![b"aa".to_vec(), b"aaa".to_vec(), b"aaaa".to_vec()]
        );
    }

    #[test]
    fn stops_when_no_pair_is_left() {
        let counts = table(&[("ab", 1), ("c", 5)]);
        assert_eq!(learn_merges(&counts, 100, |_| true).len(), 1);
    }

    #[test]
    fn agrees_with_the_naive_loop_on_pseudo_random_tables() {
        let mut next = crate::test_rng::numbers(0x2545_f491_4f6c_dd1du64);
        for _ in 0..200 {
            let mut counts = PieceCounts::new();
            for _ in 0..(next() % 30) {
                let len = 1 + next() % 8;
                let piece: Vec<u8> = (0..len).map(|_| b"abcde"[(next() % 5) as usize]).collect();
                counts.add(&piece, 1 + next() % 4);
            }
            let fast = learn_merges(&counts, 40, |_| true);
            assert_eq!(fast, naive_merges(&counts, 40));
        }
    }

    /// Text where ties decide most merges: a few Hangul syllables, Devanagari digits and emoji ZWJ
    /// families, words repeated equally often, so that most merges are ties between pairs of high
    /// bytes (the end of one character and the start of the next, `(b'\xb8', b'\xec')`); merged
    /// until no pair is left.
    #[test]
    fn agrees_with_the_naive_loop_on_utf8_text_full_of_ties() {
        let mut next = crate::test_rng::numbers(0x9e37_79b9_7f4a_7c15u64);
        let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}";
        for _ in 0..60 {
            // Syllables whose last byte is 0xB8 next to syllables that start with 0xEC.
            let alphabet: Vec<String> = (0..2 + next() % 3)
                .map(|_| {
                    let syllable = match next() % 3 {
                        0 => 0xAC38 + 0x40 * (next() % 0x20) as u32, // ends in 0xB8
                        1 => 0xC000 + (next() % 0x1000) as u32,      // starts with 0xEC
                        _ => 0xAC00 + (next() % 11172) as u32,
                    };
                    char::from_u32(syllable).unwrap().to_string()
                })
                .chain(["\u{966}", "\u{96D}", family, "\u{1F3FD}"].map(String::from))
                .collect();
            let mut counts = PieceCounts::new();
            for _ in 0..(5 + next() % 30) {
                let word: String = (0..1 + next() % 5)
                    .map(|_| alphabet[(next() % alphabet.len() as u64) as usize].as_str())
                    .collect();
                counts.add(word.as_bytes(), [2, 4][(next() % 2) as usize]);
            }
            let fast = learn_merges(&counts, 1000, |_| true);
            assert_eq!(fast, naive_merges(&counts, 1000));
        }
    }
}
