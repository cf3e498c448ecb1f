//! The pair map of a [`crate::merge::MergeTable`]: an adjacent pair of ids -> the merge it allows.
//!
//! The merge loop looks pairs up at random in a table of hundreds of thousands, a few for every
//! merge it makes, so the table's size decides how many of those reads miss the caches. Where every
//! id fits in [`ID_BITS`] bits and each pair's priority is its merged id less one offset shared by
//! all (tiktoken's ranks: offset 0; a merges list whose merged tokens are numbered in line order,
//! as GPT-2's: 256), a pair and its merge fit one 64-bit word: half the memory of a key and a
//! [`Merge`] (o200k: 199,742 pairs in 2 MB instead of 4). Encoding `encode.py`'s held-out documents
//! measured about 2% faster with it (median of per-round ratios, o200k, 33 rounds: within this
//! machine's noise); the memory is the sure gain. Other tables keep the wide layout.

use std::hash::BuildHasher;

use hashbrown::{HashMap, HashTable};
use rustc_hash::FxBuildHasher;

use crate::huge::HugePages;
use crate::merge::Merge;
use crate::Rank;

/// Bits per id in a packed word: three ids (left, right, merged) in 63 bits.
pub const ID_BITS: u32 = 21;
const ID_MASK: u64 = (1 << ID_BITS) - 1;

/// The key of the wide layout (and of a builder's map).
#[inline]
pub fn wide_key(left: Rank, right: Rank) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

/// The pairs of a wide key.
fn unkey(key: u64) -> (Rank, Rank) {
    ((key >> 32) as Rank, key as Rank)
}

/// The pairs a builder collects, in the wide layout; [`PairMap::new`] chooses the final one.
pub type WidePairs = HashMap<u64, Merge, FxBuildHasher, HugePages>;

/// Pairs -> merges, in the smaller layout their ids allow (see the module). On huge pages (see
/// [`crate::huge`]): the merge loop reads it at random.
#[derive(Clone, Debug)]
pub struct PairMap(Layout);

#[derive(Clone, Debug)]
enum Layout {
    /// Words `left << 2 * ID_BITS | right << ID_BITS | merged`; priority = merged - `offset`.
    Packed {
        words: HashTable<u64, HugePages>,
        offset: i64,
    },
    Wide(WidePairs),
}

/// A packed word's key: the pair, when both ids fit.
#[inline]
fn packed_key(left: Rank, right: Rank) -> Option<u64> {
    let (left, right) = (u64::from(left), u64::from(right));
    ((left | right) <= ID_MASK).then_some((left << ID_BITS) | right)
}

/// The merge a packed word holds: its merged id, and that id less `offset` as the priority.
#[inline(always)]
fn merge_of(word: u64, offset: i64) -> Merge {
    let merged = (word & ID_MASK) as Rank;
    Merge {
        priority: (i64::from(merged) - offset) as u32,
        merged,
    }
}

#[inline]
fn hash(key: u64) -> u64 {
    FxBuildHasher.hash_one(key)
}

impl PairMap {
    /// The map of `pairs`, packed when every id fits and the priorities follow the merged ids by
    /// one offset.
    pub fn new(pairs: WidePairs) -> Self {
        let mut offsets = pairs
            .values()
            .map(|merge| i64::from(merge.merged) - i64::from(merge.priority));
        let offset = offsets.next().unwrap_or(0);
        let fits = pairs.iter().all(|(&key, merge)| {
            let (left, right) = unkey(key);
            packed_key(left, right).is_some() && u64::from(merge.merged) <= ID_MASK
        });
        if !fits || !offsets.all(|other| other == offset) {
            return Self(Layout::Wide(pairs));
        }
        let mut words = HashTable::with_capacity_in(pairs.len(), HugePages);
        for (&key, merge) in &pairs {
            let (left, right) = unkey(key);
            let key = packed_key(left, right).expect("checked above");
            words.insert_unique(
                hash(key),
                (key << ID_BITS) | u64::from(merge.merged),
                |&word| hash(word >> ID_BITS),
            );
        }
        Self(Layout::Packed { words, offset })
    }

    /// The merge of `left` followed by `right`, if any.
    #[inline(always)]
    pub fn get(&self, left: Rank, right: Rank) -> Option<Merge> {
        match &self.0 {
            Layout::Packed { words, offset } => {
                let key = packed_key(left, right)?;
                let word = words.find(hash(key), |&word| word >> ID_BITS == key)?;
                Some(merge_of(*word, *offset))
            }
            Layout::Wide(pairs) => pairs.get(&wide_key(left, right)).copied(),
        }
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Layout::Packed { words, .. } => words.len(),
            Layout::Wide(pairs) => pairs.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every pair and its merge, in no particular order.
    pub fn entries(&self) -> Vec<(Rank, Rank, Merge)> {
        match &self.0 {
            Layout::Packed { words, offset } => words
                .iter()
                .map(|&word| {
                    let (left, right) = (
                        (word >> (2 * ID_BITS)) as Rank,
                        ((word >> ID_BITS) & ID_MASK) as Rank,
                    );
                    (left, right, merge_of(word, *offset))
                })
                .collect(),
            Layout::Wide(pairs) => pairs
                .iter()
                .map(|(&key, &merge)| {
                    let (left, right) = unkey(key);
                    (left, right, merge)
                })
                .collect(),
        }
    }

    /// Whether the pairs are packed one to a word.
    pub fn is_packed(&self) -> bool {
        matches!(self.0, Layout::Packed { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide(pairs: &[(Rank, Rank, u32, Rank)]) -> WidePairs {
        let mut map = WidePairs::with_hasher_in(FxBuildHasher, HugePages);
        for &(left, right, priority, merged) in pairs {
            map.insert(wide_key(left, right), Merge { priority, merged });
        }
        map
    }

    /// `map` answers every pair as `pairs` says, and nothing else among the ids nearby.
    fn answers_as(map: &PairMap, pairs: &[(Rank, Rank, u32, Rank)]) {
        let mut ids: Vec<Rank> = pairs
            .iter()
            .flat_map(|&(left, right, _, merged)| [left, right, merged])
            .collect();
        // Ids that alias a packed key if the bits above ID_BITS were dropped.
        ids.extend(
            ids.clone()
                .iter()
                .flat_map(|&id| [id + (1 << ID_BITS), id | (1 << 31), Rank::MAX]),
        );
        for &left in &ids {
            for &right in &ids {
                let expected = pairs
                    .iter()
                    .find(|&&(l, r, _, _)| (l, r) == (left, right))
                    .map(|&(_, _, priority, merged)| Merge { priority, merged });
                assert_eq!(map.get(left, right), expected, "pair ({left}, {right})");
            }
        }
        let mut entries = map.entries();
        entries.sort_unstable_by_key(|&(left, right, _)| (left, right));
        let mut listed: Vec<(Rank, Rank, Merge)> = pairs
            .iter()
            .map(|&(left, right, priority, merged)| (left, right, Merge { priority, merged }))
            .collect();
        listed.sort_unstable_by_key(|&(left, right, _)| (left, right));
        assert_eq!(entries, listed);
        assert_eq!(map.len(), pairs.len());
    }

    #[test]
    fn ranks_and_line_numbered_merges_are_packed() {
        let ranks = [
            (97, 98, 256, 256),
            (256, 99, 257, 257),
            (2_000_000, 5, 2_000_001, 2_000_001),
        ];
        let map = PairMap::new(wide(&ranks));
        assert!(map.is_packed());
        answers_as(&map, &ranks);
        // GPT-2: line i makes token 256 + i.
        let lines = [(97, 98, 0, 256), (256, 99, 1, 257), (99, 99, 2, 258)];
        let map = PairMap::new(wide(&lines));
        assert!(map.is_packed());
        answers_as(&map, &lines);
    }

    #[test]
    fn ids_beyond_the_bits_or_scattered_priorities_stay_wide() {
        let large = [(97, 98, 256, 256), (1 << ID_BITS, 5, 257, 257)];
        let large_merged = [(97, 98, 1 << ID_BITS, 1 << ID_BITS)];
        let scattered = [(97, 98, 0, 256), (256, 99, 7, 257)];
        for pairs in [&large[..], &large_merged[..], &scattered[..]] {
            let map = PairMap::new(wide(pairs));
            assert!(!map.is_packed(), "{pairs:?}");
            answers_as(&map, pairs);
        }
    }

    #[test]
    fn an_empty_map_answers_nothing() {
        let map = PairMap::new(wide(&[]));
        assert!(map.is_empty());
        assert_eq!(map.get(0, 0), None);
    }
}
