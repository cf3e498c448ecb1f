//! SuperBPE's second stage (Liu et al., "SuperBPE: Space Travel for Language Models", arXiv
//! 2503.13423): after ordinary BPE has learned the tokens up to the transition vocabulary, the same
//! loop goes on over pieces cut without the whitespace split, so tokens may cross spaces.
//!
//! Each stage-two piece (counted by the caller with the stage-two cut) starts as the first stage's
//! encoding of it: its bytes merged by the first stage's merges list, the pair listed earliest
//! first, the leftmost on ties (the merges-list rule, [`MergeTable::encode_piece`]). The loop is then
//! [`continue_merges`]: DESIGN.md's tie rule, under the paper's limit ([`Limit::Superwords`]: at most
//! [`MAX_WORDS`] words and never the bytes `": "` in a token).

use super::counts::PieceCounts;
use super::parity::{continue_merges, Learned, Limit};
use crate::merge::{Merge, MergeTable};
use crate::Rank;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

/// The most words (runs of bytes other than the space) a stage-two token may hold.
pub const MAX_WORDS: u32 = 4;

/// Why the first stage's model cannot start the second stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageOneError {
    /// A merge names an id that is not a token.
    UnknownId { line: usize, id: Rank },
    /// A merge's two tokens joined are not a token.
    NotAToken { line: usize },
}

impl std::fmt::Display for StageOneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StageOneError::UnknownId { line, id } => write!(f, "merge {line} names id {id}, which is not a token"),
            StageOneError::NotAToken { line } => write!(f, "merge {line} joins two tokens into bytes that are not a token"),
        }
    }
}

impl std::error::Error for StageOneError {}

/// Learns up to `num_new_tokens` stage-two tokens on `counts` (the stage-two pieces), starting from
/// the first stage's model: its learned `tokens` (ids 256 on, after the bytes) and its `merges`
/// (pairs of ids, in priority order). Returns the stage-two merges (ids: the bytes, the first stage's
/// tokens, then the new ones) and new tokens. `on_token(done)` as for [`continue_merges`].
pub fn learn_superwords(
    counts: PieceCounts,
    tokens: &[Vec<u8>],
    merges: &[(Rank, Rank)],
    num_new_tokens: usize,
    on_token: impl FnMut(usize) -> bool,
) -> Result<Learned, StageOneError> {
    let mut all: Vec<Vec<u8>> = (0..=255u8).map(|byte| vec![byte]).collect();
    all.extend(tokens.iter().cloned());
    let ids: FxHashMap<&[u8], Rank> = all.iter().enumerate().map(|(id, token)| (&token[..], id as Rank)).collect();
    let mut byte_ids = [0 as Rank; 256];
    for (byte, id) in byte_ids.iter_mut().enumerate() {
        *id = byte as Rank;
    }
    let mut table = MergeTable::builder_recording_joins(byte_ids);
    for (line, &(left, right)) in merges.iter().enumerate() {
        let token = |id: Rank| all.get(id as usize).ok_or(StageOneError::UnknownId { line, id });
        let (left_bytes, right_bytes) = (token(left)?, token(right)?);
        let merged = *ids
            .get(&[&left_bytes[..], &right_bytes[..]].concat()[..])
            .ok_or(StageOneError::NotAToken { line })?;
        let priority = u32::try_from(line).expect("more than 4 billion merges");
        table.insert(left, right, Merge { priority, merged }, left_bytes[left_bytes.len() - 1], right_bytes[0]);
    }
    let table = table.build();
    let pieces: Vec<(&[u8], u64)> = counts.iter().filter(|&(piece, count)| !piece.is_empty() && count > 0).collect();
    let words: Vec<(Vec<Rank>, u64)> = pieces
        .into_par_iter()
        .map(|(piece, count)| {
            let mut symbols = Vec::with_capacity(piece.len());
            table.encode_piece(piece, &mut symbols);
            (symbols, count)
        })
        .collect();
    drop(counts);
    Ok(continue_merges(words, all, num_new_tokens, Limit::Superwords { max_words: MAX_WORDS }, on_token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::counts::tests::table;

    #[test]
    fn starts_from_the_first_stage_s_encoding_and_crosses_spaces() {
        // Stage one learned "th" and "the"; "the cat" holds " c", "ca" and "at" twice each.
        let counts = table(&[("the cat. ", 3), ("the hat", 1)]);
        let tokens = vec![b"th".to_vec(), b"the".to_vec()];
        let merges = vec![(116, 104), (256, 101)];
        let learned = learn_superwords(counts.clone(), &tokens, &merges, 3, |_| true).unwrap();
        assert_eq!(learned.tokens, [b"the ".to_vec(), b"at".to_vec(), b"the c".to_vec()]);
        assert_eq!(learned.merges[0], (257, 32));
    }

    #[test]
    fn refuses_merges_that_make_no_token() {
        let counts = table(&[("ab", 1)]);
        assert_eq!(
            learn_superwords(counts.clone(), &[b"ab".to_vec()], &[(97, 99)], 1, |_| true),
            Err(StageOneError::NotAToken { line: 0 })
        );
        assert_eq!(
            learn_superwords(counts.clone(), &[], &[(97, 300)], 1, |_| true),
            Err(StageOneError::UnknownId { line: 0, id: 300 })
        );
    }

    #[test]
    fn never_learns_past_the_limits() {
        let counts = table(&[("a b c d e f: g h", 5)]);
        let learned = learn_superwords(counts.clone(), &[], &[], 100, |_| true).unwrap();
        assert!(!learned.tokens.is_empty());
        for token in &learned.tokens {
            let words = token.split(|&byte| byte == b' ').filter(|word| !word.is_empty()).count();
            assert!(words <= 4 && !token.windows(2).any(|pair| pair == b": "), "{token:?}");
        }
    }
}
