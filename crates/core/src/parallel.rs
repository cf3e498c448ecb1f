//! One long text encoded on several threads, to exactly the ids of encoding it on one.
//!
//! The text is cut into parts where every split of the named patterns ends a piece, whatever came
//! before ([`crate::scan::always_ends_piece`]: after a character that is not white space and
//! before white space that is not a line break; after a line break and before a character that is
//! neither white space nor `/`). A cut is proposed at each k/N-th byte and moved forward to the
//! first such position, up to the next proposal (none there: one part fewer). Special tokens are
//! cut out first, as [`Model::encode`] does; only the ordinary text between them is cut.
//!
//! Each part is split from its start with the rest of its segment after it (the split looks
//! ahead, never behind), up to the first piece that ends at or after the part's end, and
//! its pieces are merged on a thread of the current rayon pool. Exactness does not rest on the
//! rule alone: the first part of a segment starts where the whole text's split starts a piece, and
//! a part that starts at such a place and whose last piece ends exactly at its end makes that end
//! such a place too. So every part is checked to end exactly at its cut; should one not, the text
//! is encoded again on the calling thread (counted by [`fallbacks`]; the rule makes it never
//! happen, and the tests check that it did not).

use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use crate::memory;
use crate::model::Model;
use crate::pretokenize::SplitError;
use crate::scan::next_piece_end;
use crate::special::SpecialMatcher;
use crate::tuning::{PARALLEL_FROM, PARALLEL_PART, PARTS_PER_THREAD};
use crate::Rank;

/// Parts encoded on the parallel path, since the process started.
static PARTS: AtomicUsize = AtomicUsize::new(0);
/// Parts encoded through their thread's table of short pieces (`crate::fused`).
static TABLE_PARTS: AtomicUsize = AtomicUsize::new(0);
/// Texts encoded again on one thread because a part did not end at its cut.
static FALLBACKS: AtomicUsize = AtomicUsize::new(0);
/// For tests: texts from this many bytes take the parallel path (0: [`PARALLEL_FROM`]).
static FROM_FOR_TESTS: AtomicUsize = AtomicUsize::new(0);
/// For tests: propose this many parts (0: by size and threads).
static PARTS_FOR_TESTS: AtomicUsize = AtomicUsize::new(0);

/// How many parts the parallel path has encoded in this process (tests check that it ran).
pub fn parts_encoded() -> usize {
    PARTS.load(Ordering::Relaxed)
}

/// How many parts the parallel path has encoded through their thread's table of short pieces.
pub fn table_parts() -> usize {
    TABLE_PARTS.load(Ordering::Relaxed)
}

pub(crate) fn count_table_part() {
    TABLE_PARTS.fetch_add(1, Ordering::Relaxed);
}

/// How many texts the parallel path encoded again on one thread because a part did not end at
/// its cut (never, by the cut rule).
pub fn fallbacks() -> usize {
    FALLBACKS.load(Ordering::Relaxed)
}

/// For tests: the parallel path for texts from `from` bytes (`None`: [`PARALLEL_FROM`]),
/// proposing `parts` parts (`None`: by the text's size and the pool's threads), even on one thread.
pub fn set_parallel_for_tests(from: Option<usize>, parts: Option<usize>) {
    FROM_FOR_TESTS.store(from.unwrap_or(0), Ordering::Relaxed);
    PARTS_FOR_TESTS.store(parts.unwrap_or(0), Ordering::Relaxed);
}

/// A stretch of ordinary text encoded by one thread: bytes `start..stop` of the text, split with
/// the rest of its segment (up to `segment_end`) after it; the last part of a segment holds the
/// special token that ends it.
#[derive(Clone, Copy, Debug)]
struct Part {
    start: usize,
    stop: usize,
    segment_end: usize,
    special_after: Option<Rank>,
}

impl Model {
    /// How many parts [`Model::encode_parallel_parts`] would propose for a text of `len` bytes on
    /// `threads()` threads (asked only for a long text): 1 (encode it whole) for short texts, a
    /// single thread, and models whose split has no bound on what later text changes
    /// ([`Model::unsettled_pieces`]: custom patterns, normalizers, SentencePiece).
    pub fn parallel_parts(&self, len: usize, threads: impl FnOnce() -> usize) -> usize {
        if self.unsettled_pieces().is_none() {
            return 1;
        }
        let from = match FROM_FOR_TESTS.load(Ordering::Relaxed) {
            0 => PARALLEL_FROM,
            from => from,
        };
        if len < from {
            return 1;
        }
        match PARTS_FOR_TESTS.load(Ordering::Relaxed) {
            0 => match threads() {
                0 | 1 => 1,
                threads => (threads * PARTS_PER_THREAD).min(len / PARALLEL_PART).max(2),
            },
            parts => parts,
        }
    }

    /// The ids of `text`, as [`Model::encode`] gives them, in parts that follow one another: the
    /// ordinary text cut into parts encoded on the current rayon pool's threads when
    /// [`Model::parallel_parts`] says so (callers install their own pool: rayon's global one does not
    /// survive a fork), else one part. Callers that copy the ids elsewhere copy each part on its own
    /// thread.
    pub fn encode_parallel_parts(&self, text: &str, allowed: &SpecialMatcher) -> Result<Vec<Vec<Rank>>, SplitError> {
        let proposed = self.parallel_parts(text.len(), rayon::current_num_threads);
        self.encode_in_parts(text, allowed, proposed)
    }

    /// The text's ids whole, as one part.
    fn encode_whole(&self, text: &str, allowed: &SpecialMatcher) -> Result<Vec<Vec<Rank>>, SplitError> {
        let mut ids = memory::with_capacity(text.len() / 3, "the ids", text.len(), "bytes of text");
        self.encode(text, allowed, &mut ids)?;
        Ok(vec![ids])
    }

    /// [`Model::encode_parallel_parts`] with `proposed` parts proposed (fewer than 2: encoded whole).
    fn encode_in_parts(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        proposed: usize,
    ) -> Result<Vec<Vec<Rank>>, SplitError> {
        if proposed < 2 || self.unsettled_pieces().is_none() {
            return self.encode_whole(text, allowed);
        }
        // Ordinary segments and the special token after each (as `encode_with_offsets` cuts them).
        let mut segments: Vec<(usize, usize, Option<Rank>)> = Vec::new();
        let mut done = 0;
        if !allowed.is_empty() {
            for special in allowed.find_all(text) {
                segments.push((done, special.start.max(done), Some(special.id)));
                done = special.end;
            }
        }
        segments.push((done, text.len(), None));

        // Each proposal moved to the first cut before the next proposal, in its segment.
        let proposals: Vec<usize> = (1..proposed).map(|k| text.len() / proposed * k).collect();
        let cuts: Vec<Option<usize>> = proposals
            .par_iter()
            .enumerate()
            .map(|(k, &proposal)| {
                let segment = segments.partition_point(|&(_, end, _)| end <= proposal);
                let &(start, end, _) = segments.get(segment)?;
                let until = proposals.get(k + 1).map_or(end, |&next| next.min(end));
                next_piece_end(text, proposal.max(start + 1), until)
            })
            .collect();
        let mut parts: Vec<Part> = Vec::with_capacity(proposed + segments.len());
        let mut cuts = cuts.into_iter().flatten().peekable();
        for &(start, end, special_after) in &segments {
            let mut part_start = start;
            while let Some(cut) = cuts.next_if(|&cut| cut < end) {
                parts.push(Part { start: part_start, stop: cut, segment_end: end, special_after: None });
                part_start = cut;
            }
            parts.push(Part { start: part_start, stop: end, segment_end: end, special_after });
        }

        let encoded: Vec<Option<Vec<Rank>>> = parts
            .par_iter()
            .map(|part| {
                let length = part.stop - part.start;
                let mut ids = memory::with_capacity(length / 3 + 1, "the ids", length, "bytes of text");
                let ended = self.encode_until(&text[part.start..part.segment_end], length, &mut ids)?;
                ids.extend(part.special_after);
                (ended == length).then_some(ids)
            })
            .collect();
        PARTS.fetch_add(parts.len(), Ordering::Relaxed);
        match encoded.into_iter().collect::<Option<Vec<_>>>() {
            Some(parts) => Ok(parts),
            None => {
                FALLBACKS.fetch_add(1, Ordering::Relaxed);
                self.encode_whole(text, allowed)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::scan::Scanner;

    /// Bytes, a few words and runs, and two special tokens that overlap.
    fn model(pattern: &str) -> Model {
        let mut ranks: Vec<(Vec<u8>, Rank)> = (0..=255u8).map(|byte| (vec![byte], Rank::from(byte))).collect();
        for (offset, token) in [&b"he"[..], b"ll", b"hello", b" w", b"or", b" world", b"  ", b"    ", b"\r\n", b"aa", b"aaaa"]
            .iter()
            .enumerate()
        {
            ranks.push((token.to_vec(), 256 + offset as Rank));
        }
        Model::from_ranks(ranks, pattern, vec![("<|end|>".into(), 300), ("<|e".into(), 301)]).unwrap()
    }

    /// Stretches that put cuts in awkward places: inside runs of white space, of one letter, of
    /// digits, between CR and LF, beside special tokens and slashes.
    const STRETCHES: &[&str] = &[
        "hello world", " ", "    ", "\n", "\r\n", "\r", "\n\n\n", "  \n ", "a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "1234567", "!!", "/", ".\n/", "it's", "'ll", "\u{e9}", "\u{301}", "中文", "\u{3000}", "\u{a0}", "😀", "<|end|>",
        "<|e", "\t", "A\u{2b0}B", "x",
    ];

    #[test]
    fn parts_encode_to_the_ids_of_the_whole_text() {
        let mut next = crate::test_rng::numbers(0xD1B5_4A32_D192_ED03u64);
        let (parts_before, fallbacks_before) = (parts_encoded(), fallbacks());
        let mut compared = 0;
        for scanner in Scanner::ALL {
            let model = model(scanner.pattern());
            for names in [&[][..], &["<|end|>", "<|e"][..]] {
                let allowed = model.special_matcher(names.iter().copied());
                for round in 0..60 {
                    let text: String =
                        (0..20 + round * 7).map(|_| STRETCHES[next() as usize % STRETCHES.len()]).collect();
                    let mut whole = Vec::new();
                    model.encode(&text, &allowed, &mut whole).unwrap();
                    for proposed in [2, 3, 7, 16, 61] {
                        let ids = model.encode_in_parts(&text, &allowed, proposed).unwrap().concat();
                        assert_eq!(ids, whole, "{scanner:?} {names:?} {proposed} parts: {text:?}");
                        compared += 1;
                    }
                }
            }
        }
        assert_eq!(compared, 8 * 2 * 60 * 5);
        // Other tests may encode in parts at the same time: these counts only grow.
        assert!(parts_encoded() - parts_before >= compared * 2, "{}", parts_encoded() - parts_before);
        assert_eq!(fallbacks(), fallbacks_before);
    }

    #[test]
    fn cuts_move_past_a_long_run_of_one_letter() {
        let model = model(crate::scan::O200K);
        let none = SpecialMatcher::new([]);
        let text = format!("ab {} cd", "a".repeat(10_000));
        let ids = model.encode_in_parts(&text, &none, 8).unwrap().concat();
        let mut whole = Vec::new();
        model.encode_ordinary(&text, &mut whole).unwrap();
        assert_eq!(ids, whole);
    }

    #[test]
    fn models_without_a_bound_are_encoded_whole() {
        let custom = Model::from_ranks((0..=255u8).map(|b| (vec![b], Rank::from(b))).collect(), r"a+b|a|\s+|[^a\s]+", vec![])
            .unwrap();
        assert_eq!(custom.parallel_parts(1 << 30, || 8), 1);
        let text = "aaa aab ".repeat(100);
        let ids = custom.encode_in_parts(&text, &SpecialMatcher::new([]), 8).unwrap().concat();
        let mut whole = Vec::new();
        custom.encode_ordinary(&text, &mut whole).unwrap();
        assert_eq!(ids, whole);
        assert_eq!(model(crate::scan::GPT2).parallel_parts(PARALLEL_FROM, || 2), PARALLEL_FROM / PARALLEL_PART);
        assert_eq!(model(crate::scan::GPT2).parallel_parts(PARALLEL_FROM - 1, || unreachable!()), 1);
        assert_eq!(model(crate::scan::GPT2).parallel_parts(PARALLEL_FROM * 100, || 1), 1);
    }
}
