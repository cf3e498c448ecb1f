//! The counted words laid out for the merge loop, one slot a character, and the characters the
//! coverage requires.

use rustc_hash::FxHashMap;

use super::BOUNDARY_CHAR;

/// The counted words laid out for the merge loop: their characters one word after the other,
/// where each word starts, each word's count, and how often each character occurs (weighted).
pub struct WordTable {
    /// A [`SEPARATOR`] slot, then each word's characters followed by a [`SEPARATOR`]: word `w`
    /// is `slots[word_starts[w]..word_starts[w + 1] - 1]`.
    pub(super) slots: Vec<Slot>,
    pub(super) word_starts: Vec<usize>,
    pub(super) counts: Vec<u64>,
    /// Occurrences of the characters of the Basic Multilingual Plane by code point, and beyond.
    basic_counts: Vec<u64>,
    other_counts: FxHashMap<char, u64>,
    all_chars: u64,
}

impl WordTable {
    /// Lays out `words` (in any order: the order decides nothing), counting the characters as
    /// they are laid out.
    pub fn new<W: AsRef<str> + Sync>(words: impl IntoIterator<Item = (W, u64)>) -> Self {
        Self::lay_out(&[words.into_iter().collect()])
    }

    /// Lays out the words of `parts` one part after the other, each part on a thread of the
    /// current rayon pool, into one table made at its final size.
    pub(super) fn lay_out<W: AsRef<str> + Sync>(parts: &[Vec<(W, u64)>]) -> Self {
        use rayon::prelude::*;
        // Each part's slots: a character each, and the separator after each word. One part gets
        // a slot per byte, the rest cut off after (counting the characters first would read
        // every word twice).
        let slots_of = |word: &W| match parts.len() {
            1 => word.as_ref().len() + 1,
            _ => word.as_ref().chars().count() + 1,
        };
        let sizes: Vec<usize> = parts
            .par_iter()
            .map(|words| words.iter().map(|(word, _)| slots_of(word)).sum())
            .collect();
        let words = parts.iter().map(Vec::len).sum::<usize>();
        let mut slots = vec![SEPARATOR_SLOT; 1 + sizes.iter().sum::<usize>()];
        let mut word_starts = vec![0; words + 1];
        let mut counts = vec![0; words];
        // Each part's share of the three lists, and where its slots start.
        let mut shares = Vec::with_capacity(parts.len());
        let (mut slots_left, mut starts_left, mut counts_left) = (
            &mut slots[1..],
            &mut word_starts[..words],
            counts.as_mut_slice(),
        );
        let mut offset = 1;
        for (part, &size) in parts.iter().zip(&sizes) {
            let (part_slots, rest) = std::mem::take(&mut slots_left).split_at_mut(size);
            slots_left = rest;
            let (part_starts, rest) = std::mem::take(&mut starts_left).split_at_mut(part.len());
            starts_left = rest;
            let (part_counts, rest) = std::mem::take(&mut counts_left).split_at_mut(part.len());
            counts_left = rest;
            shares.push((part, part_slots, part_starts, part_counts, offset));
            offset += size;
        }
        // Each part fills its share and counts its characters.
        let tallies: Vec<(usize, Vec<u64>, FxHashMap<char, u64>)> = shares
            .into_par_iter()
            .map(|(part, slots, starts, counts, offset)| {
                let mut basic_counts = vec![0u64; 0x10000];
                let mut other_counts: FxHashMap<char, u64> = FxHashMap::default();
                let mut at = 0;
                for (index, (word, count)) in part.iter().enumerate() {
                    starts[index] = offset + at;
                    counts[index] = *count;
                    for c in word.as_ref().chars() {
                        let code = u32::from(c);
                        slots[at].symbol = code;
                        at += 1;
                        match basic_counts.get_mut(code as usize) {
                            Some(total) => *total += count,
                            None => *other_counts.entry(c).or_insert(0) += count,
                        }
                    }
                    // The separator is in place.
                    at += 1;
                }
                (at, basic_counts, other_counts)
            })
            .collect();
        if let [(filled, _, _)] = tallies[..] {
            slots.truncate(1 + filled);
        }
        word_starts[words] = slots.len();
        let mut tallies = tallies.into_iter();
        let (_, mut basic_counts, mut other_counts) = tallies
            .next()
            .unwrap_or_else(|| (0, vec![0; 0x10000], FxHashMap::default()));
        for (_, basic, other) in tallies {
            for (total, count) in basic_counts.iter_mut().zip(&basic) {
                *total += count;
            }
            for (c, count) in other {
                *other_counts.entry(c).or_insert(0) += count;
            }
        }
        let all_chars = basic_counts[1..].iter().sum::<u64>() + other_counts.values().sum::<u64>();
        Self {
            slots,
            word_starts,
            counts,
            basic_counts,
            other_counts,
            all_chars,
        }
    }

    /// Distinct words.
    pub fn words(&self) -> usize {
        self.counts.len()
    }

    /// The characters that must be in the vocabulary: the most frequent ones, until their share
    /// of all characters reaches `character_coverage` (compared in `f32`, as SentencePiece does),
    /// the boundary character left out. Each with its count, most frequent first (ties: lower code
    /// point first).
    pub fn required_chars(&self, character_coverage: f32) -> Vec<(char, u64)> {
        let mut sorted: Vec<(char, u64)> = self
            .other_counts
            .iter()
            .map(|(&c, &count)| (c, count))
            .collect();
        for (code, &count) in self.basic_counts.iter().enumerate().skip(1) {
            if count > 0 {
                let c = char::from_u32(code as u32).expect("a counted character");
                sorted.push((c, count));
            }
        }
        sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut required = Vec::new();
        let mut accumulated = 0u64;
        for (c, count) in sorted {
            let coverage = (accumulated as f64 / self.all_chars as f64) as f32;
            if coverage >= character_coverage {
                break;
            }
            accumulated += count;
            if c == BOUNDARY_CHAR {
                continue;
            }
            required.push((c, count));
        }
        required
    }
}

pub(super) const NONE: u32 = u32::MAX;

/// The symbol of the slot between two words: where a word starts and ends is read next to the
/// slot the merge loop reads anyway.
pub(super) const SEPARATOR: u32 = u32::MAX - 1;

const SEPARATOR_SLOT: Slot = Slot {
    symbol: SEPARATOR,
    pair: NONE,
};

/// One character position of a word, or the [`SEPARATOR`] between two words.
#[derive(Clone, Copy)]
pub(super) struct Slot {
    /// The symbol that starts here (`NONE` once merged into the one before it).
    pub(super) symbol: u32,
    /// The pair it forms with the next symbol of the word (`NONE`: none, or no valid piece).
    /// In the last slot of a symbol of several characters (`symbol` is `NONE` there): how many
    /// slots back that symbol starts.
    /// SentencePiece looks pairs up by their two parts in `symbols_cache_`; a pair formed in a
    /// word stays the one found there until a merge changes one of its parts, so the lookup is
    /// read from here.
    pub(super) pair: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::sentencepiece::test_support::counts;

    #[test]
    fn coverage_stops_at_the_share_asked() {
        let words = counts(&[("aab", 10), ("c", 1)]);
        let required = WordTable::new(words.clone()).required_chars(0.9);
        assert_eq!(required, [('a', 20), ('b', 10)]);
        assert_eq!(WordTable::new(words).required_chars(1.0).len(), 3);
    }
}
