//! The count table: how often each distinct piece occurs in a corpus.
//!
//! This is the unit of work that counting produces and the merge loop consumes. Tables from several
//! workers (or machines) merge by addition, so counting can be spread anywhere.

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// A piece as a key: up to 16 bytes inline, longer ones on the heap. Most pieces are short, so the
/// table needs no allocation per piece (an allocation costs more than the bytes it holds), which
/// keeps a table of tens of millions of pieces small.
type Key = SmallVec<[u8; 16]>;

/// Distinct pieces (byte strings produced by the split pattern) and how often each occurred.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PieceCounts {
    counts: FxHashMap<Key, u64>,
    /// Occurrences of pieces dropped by [`PieceCounts::prune`] (0: the counts are exact).
    pruned: u64,
}

/// Why bytes could not be read back as a [`PieceCounts`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountsFormatError(pub String);

impl std::fmt::Display for CountsFormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a serialized piece-count table: {}", self.0)
    }
}

impl std::error::Error for CountsFormatError {}

impl PieceCounts {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `count` occurrences of `piece`. Allocates only the first time a piece is seen.
    #[inline]
    pub fn add(&mut self, piece: &[u8], count: u64) {
        if let Some(existing) = self.counts.get_mut(piece) {
            *existing += count;
        } else {
            if self.counts.len() == self.counts.capacity() {
                self.grow();
            }
            self.counts.insert(Key::from_slice(piece), count);
        }
    }

    /// Makes room for more pieces, or stops with [`crate::memory::OutOfMemory`] naming the option
    /// that bounds the table (the table doubles: a failed allocation would abort the process).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        self.reserve(self.counts.len().max(16));
    }

    /// Room for `additional` more pieces, or [`crate::memory::OutOfMemory`] naming the option.
    fn reserve(&mut self, additional: usize) {
        if self.counts.try_reserve(additional).is_err() {
            let len = self.counts.len();
            let bytes = (len + additional).saturating_mul(std::mem::size_of::<(Key, u64)>() + 1);
            crate::memory::fail(bytes, "the count table (max_pieces= bounds it)", len, "distinct pieces");
        }
    }

    /// Adds every count of `other` into `self` (the sum of two tables).
    pub fn absorb(&mut self, mut other: PieceCounts) {
        if other.counts.len() > self.counts.len() {
            std::mem::swap(self, &mut other);
        }
        self.pruned += other.pruned;
        self.reserve(other.counts.len() / 4);
        for (piece, count) in other.counts {
            *self.counts.entry(piece).or_insert(0) += count;
        }
    }

    /// Adds every count of `other` into `self`, leaving `other` as it is (no copy of its table).
    pub fn add_all(&mut self, other: &PieceCounts) {
        self.pruned += other.pruned;
        self.reserve(other.counts.len() / 4);
        for (piece, &count) in &other.counts {
            self.add(piece, count);
        }
    }

    /// Occurrences of pieces that [`PieceCounts::prune`] dropped, here or in a table added to
    /// this one: 0 when the counts are exact.
    pub fn pruned(&self) -> u64 {
        self.pruned
    }

    /// Keeps the `keep` most frequent pieces (ties: smaller bytes first, as
    /// [`PieceCounts::most_common`]) and drops the rest, adding their occurrences to
    /// [`PieceCounts::pruned`]; returns how many occurrences were dropped. For a memory budget:
    /// the table of a corpus of ever new words grows without bound. Needs, for a moment, about as
    /// much memory again as the table.
    pub fn prune(&mut self, keep: usize) -> u64 {
        if self.counts.len() <= keep {
            return 0;
        }
        let mut entries: Vec<(Key, u64)> = std::mem::take(&mut self.counts).into_iter().collect();
        let order = |a: &(Key, u64), b: &(Key, u64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0));
        if keep > 0 {
            entries.select_nth_unstable_by(keep - 1, order);
        }
        let dropped: u64 = entries[keep..].iter().map(|&(_, count)| count).sum();
        entries.truncate(keep);
        self.counts = entries.into_iter().collect();
        self.pruned += dropped;
        dropped
    }

    /// [`PieceCounts::prune`] to half of `max_pieces` when the table holds more than that (so a
    /// table that keeps growing is pruned now and then, not at every piece).
    pub fn limit(&mut self, max_pieces: Option<usize>) {
        if let Some(max_pieces) = max_pieces.filter(|&max_pieces| self.counts.len() > max_pieces) {
            self.prune(max_pieces / 2);
        }
    }

    /// How often `piece` occurred (0 if never).
    pub fn get(&self, piece: &[u8]) -> u64 {
        self.counts.get(piece).copied().unwrap_or(0)
    }

    /// The number of distinct pieces.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The number of pieces counted (with repetition).
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Every distinct piece with its count, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.counts
            .iter()
            .map(|(piece, &count)| (&piece[..], count))
    }

    /// The `n` most frequent pieces, most frequent first (ties: smaller bytes first).
    pub fn most_common(&self, n: usize) -> Vec<(&[u8], u64)> {
        let mut all: Vec<(&[u8], u64)> = self.iter().collect();
        let order = |a: &(&[u8], u64), b: &(&[u8], u64)| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0));
        if n < all.len() {
            all.select_nth_unstable_by(n, order);
            all.truncate(n);
        }
        all.sort_unstable_by(order);
        all
    }

    /// A compact, stable byte encoding: a magic tag (for a pruned table, the second tag and the
    /// varint [`PieceCounts::pruned`]), then per piece (sorted by bytes) the varint length, the
    /// bytes and the varint count. Equal tables serialize to equal bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut entries: Vec<(&[u8], u64)> = self.iter().collect();
        entries.sort_unstable();
        let size: usize = entries.iter().map(|(piece, _)| piece.len() + 4).sum();
        let mut out = Vec::with_capacity(MAGIC.len() + 20 + size);
        if self.pruned == 0 {
            out.extend_from_slice(MAGIC);
        } else {
            out.extend_from_slice(MAGIC_PRUNED);
            write_varint(&mut out, self.pruned);
        }
        write_varint(&mut out, entries.len() as u64);
        for (piece, count) in entries {
            write_varint(&mut out, piece.len() as u64);
            out.extend_from_slice(piece);
            write_varint(&mut out, count);
        }
        out
    }

    /// Reads what [`PieceCounts::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CountsFormatError> {
        let (rest, is_pruned) = match (bytes.strip_prefix(MAGIC), bytes.strip_prefix(MAGIC_PRUNED)) {
            (Some(rest), _) => (rest, false),
            (None, Some(rest)) => (rest, true),
            (None, None) => return Err(CountsFormatError("missing the format tag".into())),
        };
        let mut reader = Reader { bytes: rest, at: 0 };
        let pruned = if is_pruned { reader.varint()? } else { 0 };
        let n = reader.varint()? as usize;
        let mut counts = FxHashMap::default();
        counts.reserve(n.min(rest.len()));
        for _ in 0..n {
            let len = reader.varint()? as usize;
            let piece = reader.take(len)?;
            let count = reader.varint()?;
            if counts.insert(Key::from_slice(piece), count).is_some() {
                return Err(CountsFormatError("a piece appears twice".into()));
            }
        }
        if reader.at != rest.len() {
            return Err(CountsFormatError(
                "trailing bytes after the last piece".into(),
            ));
        }
        Ok(Self { counts, pruned })
    }
}

impl FromIterator<(Vec<u8>, u64)> for PieceCounts {
    fn from_iter<I: IntoIterator<Item = (Vec<u8>, u64)>>(pieces: I) -> Self {
        let mut counts = PieceCounts::new();
        for (piece, count) in pieces {
            counts.add(&piece, count);
        }
        counts
    }
}

const MAGIC: &[u8] = b"hf_bpe.PieceCounts.v1\0";
/// The tag of a pruned table, followed by how many occurrences were dropped.
const MAGIC_PRUNED: &[u8] = b"hf_bpe.PieceCounts.v1.pruned\0";

fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    fn varint(&mut self) -> Result<u64, CountsFormatError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .bytes
                .get(self.at)
                .ok_or_else(|| CountsFormatError("truncated".into()))?;
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(CountsFormatError("a number is too long".into()))
    }

    fn take(&mut self, len: usize) -> Result<&'b [u8], CountsFormatError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| CountsFormatError("truncated".into()))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_key_holds_sixteen_bytes_inline_in_24() {
        assert_eq!(std::mem::size_of::<Key>(), 24);
        assert!(!Key::from_slice(&[7; 16]).spilled());
        assert!(Key::from_slice(&[7; 17]).spilled());
    }

    /// A count table from `(piece, count)` pairs (also used by the merge loop's tests).
    pub(crate) fn table(entries: &[(&str, u64)]) -> PieceCounts {
        entries
            .iter()
            .map(|(piece, count)| (piece.as_bytes().to_vec(), *count))
            .collect()
    }

    #[test]
    fn absorbing_adds_counts() {
        let mut left = table(&[("a", 1), ("b", 2)]);
        left.absorb(table(&[("b", 3), ("c", 4), ("d", 1)]));
        assert_eq!(left, table(&[("a", 1), ("b", 5), ("c", 4), ("d", 1)]));
        assert_eq!(left.total(), 11);
    }

    #[test]
    fn adding_a_borrowed_table_is_absorbing_a_copy() {
        let (a, b) = (table(&[("ab", 2), ("c", 1)]), table(&[("ab", 3), ("de", 4)]));
        let mut absorbed = a.clone();
        absorbed.absorb(b.clone());
        let mut added = a.clone();
        added.add_all(&b);
        assert_eq!(added, absorbed);
        assert_eq!(added.get(b"ab"), 5);
        assert_eq!(b, table(&[("ab", 3), ("de", 4)]));
    }

    #[test]
    fn bytes_round_trip_and_are_canonical() {
        let counts = table(&[("hello", 300), (" world", 1), ("", 7), ("\u{e9}", u64::MAX)]);
        let bytes = counts.to_bytes();
        assert_eq!(PieceCounts::from_bytes(&bytes).unwrap(), counts);
        let mut same = PieceCounts::new();
        same.absorb(counts.clone());
        assert_eq!(same.to_bytes(), bytes);
        assert!(PieceCounts::from_bytes(&bytes[..bytes.len() - 1]).is_err());
        assert!(PieceCounts::from_bytes(b"nonsense").is_err());
    }

    #[test]
    fn pruning_keeps_the_most_frequent_pieces_and_says_what_it_dropped() {
        let mut counts = table(&[("a", 5), ("b", 1), ("c", 2), ("d", 2), ("e", 9)]);
        assert_eq!(counts.prune(3), 3);
        assert_eq!(counts.iter().count(), 3);
        assert_eq!((counts.get(b"e"), counts.get(b"a"), counts.get(b"c"), counts.get(b"d")), (9, 5, 2, 0));
        assert_eq!(counts.pruned(), 3);
        assert_eq!(counts.prune(3), 0);
        let bytes = counts.to_bytes();
        assert_eq!(PieceCounts::from_bytes(&bytes).unwrap(), counts);
        let mut sum = table(&[("x", 1)]);
        sum.absorb(counts);
        assert_eq!(sum.pruned(), 3);
        // A table kept within a budget: pruned to half whenever it grows past it.
        let mut limited = PieceCounts::new();
        for word in 0..1000u32 {
            limited.add(&word.to_le_bytes(), 1);
            limited.limit(Some(100));
            assert!(limited.len() <= 100);
        }
        assert_eq!(limited.pruned() + limited.total(), 1000);
    }

    #[test]
    fn most_common_orders_by_count_then_bytes() {
        let counts = table(&[("a", 1), ("b", 5), ("c", 5), ("d", 2)]);
        let top: Vec<_> = counts
            .most_common(3)
            .into_iter()
            .map(|(p, c)| (p.to_vec(), c))
            .collect();
        assert_eq!(
            top,
            vec![(b"b".to_vec(), 5), (b"c".to_vec(), 5), (b"d".to_vec(), 2)]
        );
    }
}
