//! SentencePiece's BPE trainer (`spm_train --model_type=bpe`, sentencepiece 0.2.3), reproduced
//! piece for piece.
//!
//! Two stages, as in `trainer_interface.cc` and `bpe_model_trainer.cc`:
//!
//! 1. [`WordCounter`] reads sentences (lines), drops those SentencePiece drops (empty, longer than
//!    `max_sentence_length` bytes, holding U+2585), normalizes them, replaces meta pieces (`<unk>`,
//!    control, user-defined and byte pieces) by a boundary, splits them into words at `▁` and counts
//!    the distinct words. SentencePiece keeps every sentence in memory; counting words as they
//!    stream gives the same counts, so memory grows with the number of distinct words only.
//! 2. [`learn_pieces`] picks the required characters from the character coverage and runs
//!    SentencePiece's merge loop: the pair of symbols with the highest frequency wins (ties: fewer
//!    characters, then the smaller text), its occurrences are replaced, and the frequencies of the
//!    pairs next to them are updated. Pairs are symbols made of two symbols, so one piece can be
//!    formed by several pairs (`aa·a`, `a·aa`); the first to win adds the piece, the others are
//!    dropped when they win. Frequencies are kept exact as SentencePiece keeps them (it adds on new
//!    pairs and subtracts on broken ones), and the candidates sit in a priority queue as in
//!    SentencePiece; where SentencePiece's queue leaves an order open (two pairs with the same
//!    text and frequency), the pair with the shorter left part wins.
//!
//! The result does not depend on the order of the words nor on the number of threads.
//!
//! One module a job. From `trainer_interface.cc`: `sentences` (reading, normalizing and
//! splitting sentences, counting their words), `rules` (what makes a piece valid), `words` (the
//! counted words laid out for the merge loop, and the required characters). From
//! `bpe_model_trainer.cc`: `queue` (the pairs waiting, in rank order) and `trainer` (the symbols,
//! their frequencies and the merge loop).

mod extend;
mod queue;
mod rules;
mod sentences;
mod trainer;
mod words;

pub use extend::extend_pieces;
pub use rules::{script_of, PieceRules, Shape};
pub use sentences::{
    for_each_word, split_into_words, FileError, SentenceOptions, WordCounter, WordCounts,
};
pub use trainer::{learn_pieces, ScoredPiece};
pub use words::WordTable;

/// U+2581, the visible space.
pub const SPACE_CHAR: char = '\u{2581}';
/// U+2585, what SentencePiece puts in place of characters outside the required set.
pub const UNKNOWN_CHAR: char = '\u{2585}';
/// U+001F: what meta pieces found in the text are replaced by (a boundary no piece crosses).
/// SentencePiece 0.2.0 and older used the tab; 0.2.3 uses U+001F (`kPretokenizationBoundaryChar`
/// in its `trainer_interface.cc`), so tabs are ordinary characters.
pub const BOUNDARY_CHAR: char = '\u{1F}';

/// What the unit tests of several modules share.
#[cfg(test)]
mod test_support {
    use super::{PieceRules, WordCounts};

    pub(super) fn rules() -> PieceRules {
        PieceRules {
            max_sentencepiece_length: 16,
            split_by_whitespace: true,
            allow_whitespace_only_pieces: false,
            split_by_unicode_script: true,
            split_by_number: true,
            split_digits: false,
        }
    }

    pub(super) fn counts(words: &[(&str, u64)]) -> WordCounts {
        words
            .iter()
            .map(|&(word, count)| (word.into(), count))
            .collect()
    }

    /// A small xorshift generator: each call gives a number below its argument.
    pub(super) fn below(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut numbers = crate::test_rng::numbers(seed);
        move |bound| numbers() % bound
    }
}
