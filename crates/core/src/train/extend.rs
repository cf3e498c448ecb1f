//! Extending a byte-level model: the merge loop continued from the model's own encoding of a corpus.
//!
//! Each distinct piece of the count table (cut with the model's pattern and special tokens) is
//! encoded once by the model, as encoding a text that splits into it does ([`Model::encode_lone_piece`]:
//! the whole-piece rule where the model has it, else its merge rule). Those tokens are the start of
//! the merge loop of [`continue_merges`], with every token of the model known: a merge whose bytes
//! are already a token adds none (its id is reused), and the loop stops after `num_tokens` new
//! tokens or when no piece has two tokens left. Nothing of the model changes; the caller gives the
//! new tokens their ids.

use super::counts::PieceCounts;
use super::merges::continue_merges;
use crate::{Model, Rank};
use rayon::prelude::*;
use rustc_hash::FxHashMap;

/// What extending a model learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extension {
    /// The new tokens, in the order learned.
    pub tokens: Vec<Vec<u8>>,
    /// Every merge of the loop, in order, as the bytes of its two tokens (merges whose bytes were
    /// already a token included).
    pub merges: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Why a model cannot be extended on a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExtendError {
    /// A SentencePiece model merges characters, not bytes: it continues its own loop.
    SentencePiece,
    /// A piece holds a byte the vocabulary has no token for, so the model cannot encode it.
    MissingByte { byte: u8, piece: Vec<u8> },
}

impl std::fmt::Display for ExtendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExtendError::SentencePiece => {
                write!(f, "a SentencePiece model merges characters, not bytes: extend it with its own loop")
            }
            ExtendError::MissingByte { byte, piece } => write!(
                f,
                "the corpus holds the byte 0x{byte:02X} (in the piece {:?}), which the vocabulary lacks (it has \
                 no token b'\\x{byte:02x}'): the model cannot encode the corpus; remove those characters",
                String::from_utf8_lossy(piece)
            ),
        }
    }
}

impl std::error::Error for ExtendError {}

/// The merge loop continued on `counts` from `model`'s encoding of each piece, for up to
/// `num_tokens` new tokens (see the module). The pieces are encoded on the current rayon pool;
/// `on_token(done)` is called after each merge with the number of new tokens so far, and `false`
/// stops the loop.
pub fn extend_merges(
    model: &Model,
    counts: &PieceCounts,
    num_tokens: usize,
    on_token: impl FnMut(usize) -> bool,
) -> Result<Extension, ExtendError> {
    if model.sentencepiece().is_some() {
        return Err(ExtendError::SentencePiece);
    }
    // The model's tokens in id order; the loop numbers them 0.. (ids may have holes).
    let ranks = model.ranks();
    let index_of: FxHashMap<Rank, Rank> =
        ranks.iter().enumerate().map(|(index, &(_, id))| (id, index as Rank)).collect();
    let known: Vec<Vec<u8>> = ranks.iter().map(|(token, _)| token.to_vec()).collect();
    drop(ranks);
    let pieces: Vec<(&[u8], u64)> = counts.iter().filter(|&(piece, count)| piece.len() >= 2 && count > 0).collect();
    if let Some((byte, piece)) = counts.iter().find_map(|(piece, _)| Some((model.missing_byte_in(piece)?, piece))) {
        return Err(ExtendError::MissingByte { byte, piece: piece.to_vec() });
    }
    let encoded: Vec<Vec<Rank>> = pieces
        .par_iter()
        .with_min_len(256)
        .map(|&(piece, _)| {
            let mut ids = Vec::with_capacity(piece.len());
            model.encode_lone_piece(piece, &mut ids).expect("every byte is a token");
            ids.iter().map(|id| index_of[id]).collect()
        })
        .collect();
    let sequences = encoded.iter().zip(&pieces).map(|(ids, &(_, count))| (&ids[..], count));
    let learned = continue_merges(known.clone(), sequences, num_tokens, on_token);
    drop(encoded);
    let bytes_of = |index: Rank| -> Vec<u8> {
        let index = index as usize;
        match index.checked_sub(known.len()) {
            None => known[index].clone(),
            Some(new) => learned.tokens[new].clone(),
        }
    };
    let merges = learned.merges.iter().map(|&(left, right)| (bytes_of(left), bytes_of(right))).collect();
    Ok(Extension { merges, tokens: learned.tokens })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::counts::tests::table;
    use crate::SplitRule;

    const WORDS: &str = r"\w+| ";

    fn ranks(extra: &[&str]) -> Vec<(Vec<u8>, Rank)> {
        let mut ranks: Vec<(Vec<u8>, Rank)> = (0..=255u8).map(|byte| (vec![byte], Rank::from(byte))).collect();
        for token in extra {
            ranks.push((token.as_bytes().to_vec(), ranks.len() as Rank));
        }
        ranks
    }

    fn rank_model(extra: &[&str]) -> Model {
        Model::from_ranks(ranks(extra), SplitRule::Pattern(WORDS.into()), vec![]).unwrap()
    }

    /// Recount every pair of every word before each merge, from the words as byte strings.
    fn naive(words: &[(Vec<Vec<u8>>, u64)], known: &[Vec<u8>], num_tokens: usize) -> Extension {
        let mut words = words.to_vec();
        let mut seen: Vec<Vec<u8>> = known.to_vec();
        let (mut tokens, mut merges) = (Vec::new(), Vec::new());
        while tokens.len() < num_tokens {
            let mut pairs: FxHashMap<(Vec<u8>, Vec<u8>), u64> = FxHashMap::default();
            for (symbols, count) in &words {
                for window in symbols.windows(2) {
                    *pairs.entry((window[0].clone(), window[1].clone())).or_insert(0) += count;
                }
            }
            let Some(((left, right), _)) =
                pairs.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)))
            else {
                break;
            };
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
            merges.push((left, right));
            if !seen.contains(&merged) {
                seen.push(merged.clone());
                tokens.push(merged);
            }
        }
        Extension { tokens, merges }
    }

    fn naive_extension(model: &Model, counts: &PieceCounts, num_tokens: usize) -> Extension {
        let words: Vec<(Vec<Vec<u8>>, u64)> = counts
            .iter()
            .map(|(piece, count)| {
                let mut ids = Vec::new();
                model.encode_lone_piece(piece, &mut ids).unwrap();
                (ids.iter().map(|&id| model.token_bytes(id).unwrap().to_vec()).collect(), count)
            })
            .collect();
        let known: Vec<Vec<u8>> = model.ranks().iter().map(|(token, _)| token.to_vec()).collect();
        naive(&words, &known, num_tokens)
    }

    #[test]
    fn starts_from_the_model_s_encoding_and_skips_tokens_it_has() {
        // "lo" and "low" are tokens: "lower" starts as low·e·r, so the first merge is (low, e).
        let model = rank_model(&["lo", "low"]);
        let counts = table(&[("lower", 3), ("lowest", 2), ("lo", 5)]);
        let extension = extend_merges(&model, &counts, 2, |_| true).unwrap();
        assert_eq!(extension.tokens, vec![b"lowe".to_vec(), b"lower".to_vec()]);
        assert_eq!(extension, naive_extension(&model, &counts, 2));
    }

    #[test]
    fn a_merge_into_a_token_the_model_has_adds_none() {
        // The rank rule encodes "abc" whole; "abd" starts as ab·d and "xabc" as x·abc. A merges
        // list reaching "abc" as ab·c only merges (ab, c) into the known "abc" and goes on.
        let model = Model::from_merges(
            ranks(&["ab", "bc", "abc"]),
            vec![(97, 98), (98, 99), (97, 257)],
            SplitRule::Pattern(WORDS.into()),
            vec![],
            false,
        )
        .unwrap();
        let counts = table(&[("abc", 3), ("abd", 1)]);
        let extension = extend_merges(&model, &counts, 1, |_| true).unwrap();
        assert_eq!(extension.merges, vec![(b"ab".to_vec(), b"c".to_vec()), (b"ab".to_vec(), b"d".to_vec())]);
        assert_eq!(extension.tokens, vec![b"abd".to_vec()]);
        assert_eq!(extension, naive_extension(&model, &counts, 1));
    }

    #[test]
    fn agrees_with_the_naive_loop_on_random_vocabularies_and_tables() {
        let mut next = crate::test_rng::numbers(0x1234_5678_9abc_def1u64);
        for _ in 0..150 {
            let mut extra: Vec<String> = Vec::new();
            for _ in 0..next() % 12 {
                let len = 2 + next() % 4;
                let token: String = (0..len).map(|_| ['a', 'b', 'c', 'd'][(next() % 4) as usize]).collect();
                if !extra.contains(&token) {
                    extra.push(token);
                }
            }
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let model = rank_model(&extra);
            let mut counts = PieceCounts::new();
            for _ in 0..next() % 40 {
                let len = 1 + next() % 9;
                let piece: Vec<u8> = (0..len).map(|_| b"abcd"[(next() % 4) as usize]).collect();
                counts.add(&piece, 1 + next() % 3);
            }
            let wanted = (next() % 30) as usize;
            assert_eq!(
                extend_merges(&model, &counts, wanted, |_| true).unwrap(),
                naive_extension(&model, &counts, wanted),
                "{extra:?}"
            );
        }
    }
}
