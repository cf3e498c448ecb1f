//! The BPE model: vocabulary, split pattern and special tokens, with encode and decode.

use std::fmt;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::merge::{Merge, MergeTable};
use crate::pretokenize::{SplitError, Splitter};
use crate::special::SpecialMatcher;
use crate::Rank;

/// The largest id a token may have.
pub const MAX_ID: Rank = (1 << 31) - 1;

/// Ids up to this bound are stored densely; a sparser vocabulary uses a hash map.
const DENSE_ID_LIMIT: usize = 1 << 24;

/// Why ranks and special tokens cannot form a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    EmptyToken,
    DuplicateRank {
        rank: Rank,
        first: Vec<u8>,
        second: Vec<u8>,
    },
    MissingByte(u8),
    IdTooLarge {
        id: u64,
    },
    SpecialCollidesWithToken {
        special: String,
        id: Rank,
        token: Vec<u8>,
    },
    DuplicateSpecialId {
        id: Rank,
        first: String,
        second: String,
    },
    EmptySpecialToken,
    Pattern(SplitError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::EmptyToken => write!(f, "ranks contain the empty token b'', which BPE cannot produce"),
            BuildError::DuplicateRank { rank, first, second } => write!(
                f,
                "rank {rank} is given to two tokens, {} and {}; every token needs its own rank",
                show_bytes(first),
                show_bytes(second)
            ),
            BuildError::MissingByte(byte) => write!(
                f,
                "ranks lack the single byte {}; a byte-level BPE needs all 256 single bytes as tokens",
                show_bytes(&[*byte])
            ),
            BuildError::IdTooLarge { id } => write!(f, "id {id} is out of range (0 to 2**31 - 1)"),
            BuildError::SpecialCollidesWithToken { special, id, token } => write!(
                f,
                "special token {special:?} has id {id}, which is already the id of the token {}",
                show_bytes(token)
            ),
            BuildError::DuplicateSpecialId { id, first, second } => {
                write!(f, "special tokens {first:?} and {second:?} both have id {id}")
            }
            BuildError::EmptySpecialToken => write!(f, "a special token may not be the empty string"),
            BuildError::Pattern(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for BuildError {}

/// Renders bytes like Python's `repr(bytes)` for messages.
pub fn show_bytes(bytes: &[u8]) -> String {
    let mut shown = String::from("b'");
    for &byte in bytes {
        match byte {
            b'\\' => shown.push_str("\\\\"),
            b'\'' => shown.push_str("\\'"),
            b'\n' => shown.push_str("\\n"),
            b'\r' => shown.push_str("\\r"),
            b'\t' => shown.push_str("\\t"),
            0x20..=0x7e => shown.push(byte as char),
            _ => shown.push_str(&format!("\\x{byte:02x}")),
        }
    }
    shown.push('\'');
    shown
}

/// id -> bytes for every token, mergeable and special.
#[derive(Clone, Debug)]
enum TokenTable {
    Dense(Vec<Option<Box<[u8]>>>),
    Sparse(FxHashMap<Rank, Box<[u8]>>),
}

impl TokenTable {
    fn new(tokens: impl Iterator<Item = (Rank, Box<[u8]>)>, max_id: Option<Rank>) -> Self {
        let needed = max_id.map_or(0, |id| id as usize + 1);
        if needed <= DENSE_ID_LIMIT {
            let mut dense = vec![None; needed];
            for (id, bytes) in tokens {
                dense[id as usize] = Some(bytes);
            }
            TokenTable::Dense(dense)
        } else {
            TokenTable::Sparse(tokens.collect())
        }
    }

    #[inline]
    fn get(&self, id: Rank) -> Option<&[u8]> {
        match self {
            TokenTable::Dense(dense) => dense.get(id as usize)?.as_deref(),
            TokenTable::Sparse(sparse) => sparse.get(&id).map(|bytes| &bytes[..]),
        }
    }
}

/// A byte-level BPE model with tiktoken's semantics.
#[derive(Clone, Debug)]
pub struct Model {
    /// Mergeable token bytes -> id (the whole-piece rule looks pieces up here).
    encoder: FxHashMap<Box<[u8]>, Rank>,
    merges: MergeTable,
    tokens: TokenTable,
    splitter: Splitter,
    specials: Vec<(String, Rank)>,
    max_id: Option<Rank>,
}

impl Model {
    /// Builds a model from tiktoken-style ranks: the id of each mergeable token is also its merge
    /// priority, and any adjacent pair whose concatenation is a token may merge.
    pub fn from_ranks(
        ranks: Vec<(Vec<u8>, Rank)>,
        pattern: &str,
        specials: Vec<(String, Rank)>,
    ) -> Result<Self, BuildError> {
        let splitter = Splitter::new(pattern).map_err(BuildError::Pattern)?;
        let mut encoder: FxHashMap<Box<[u8]>, Rank> =
            FxHashMap::with_capacity_and_hasher(ranks.len(), Default::default());
        let mut owner_of_rank: FxHashMap<Rank, usize> =
            FxHashMap::with_capacity_and_hasher(ranks.len(), Default::default());
        for (index, (token, rank)) in ranks.iter().enumerate() {
            if token.is_empty() {
                return Err(BuildError::EmptyToken);
            }
            if *rank > MAX_ID {
                return Err(BuildError::IdTooLarge {
                    id: u64::from(*rank),
                });
            }
            if let Some(&first) = owner_of_rank.get(rank) {
                return Err(BuildError::DuplicateRank {
                    rank: *rank,
                    first: ranks[first].0.clone(),
                    second: token.clone(),
                });
            }
            owner_of_rank.insert(*rank, index);
            encoder.insert(token.clone().into_boxed_slice(), *rank);
        }

        let mut byte_ids = [0; 256];
        for (byte, id) in byte_ids.iter_mut().enumerate() {
            *id = *encoder
                .get(&[byte as u8][..])
                .ok_or(BuildError::MissingByte(byte as u8))?;
        }
        let mut merges = MergeTable::new(byte_ids);
        for (token, &rank) in &encoder {
            for split in 1..token.len() {
                if let (Some(&left), Some(&right)) =
                    (encoder.get(&token[..split]), encoder.get(&token[split..]))
                {
                    let merge = Merge {
                        priority: rank,
                        merged: rank,
                    };
                    merges.insert_joining(left, right, merge, token[split - 1], token[split]);
                }
            }
        }

        let mut special_ids: FxHashMap<Rank, &str> = FxHashMap::default();
        for (special, id) in &specials {
            if special.is_empty() {
                return Err(BuildError::EmptySpecialToken);
            }
            if *id > MAX_ID {
                return Err(BuildError::IdTooLarge { id: u64::from(*id) });
            }
            if let Some(&owner) = owner_of_rank.get(id) {
                return Err(BuildError::SpecialCollidesWithToken {
                    special: special.clone(),
                    id: *id,
                    token: ranks[owner].0.clone(),
                });
            }
            if let Some(first) = special_ids.insert(*id, special) {
                return Err(BuildError::DuplicateSpecialId {
                    id: *id,
                    first: first.to_owned(),
                    second: special.clone(),
                });
            }
        }

        let max_id = ranks
            .iter()
            .map(|(_, rank)| *rank)
            .chain(specials.iter().map(|(_, id)| *id))
            .max();
        let tokens = TokenTable::new(
            encoder
                .iter()
                .map(|(token, &rank)| (rank, token.clone()))
                .chain(
                    specials
                        .iter()
                        .map(|(special, id)| (*id, special.as_bytes().into())),
                ),
            max_id,
        );
        Ok(Self {
            encoder,
            merges,
            tokens,
            splitter,
            specials,
            max_id,
        })
    }

    pub fn pattern(&self) -> &str {
        self.splitter.pattern()
    }

    /// One more than the largest id (ids may have holes below it).
    pub fn n_vocab(&self) -> usize {
        self.max_id.map_or(0, |id| id as usize + 1)
    }

    /// Number of mergeable (non-special) tokens.
    pub fn n_mergeable(&self) -> usize {
        self.encoder.len()
    }

    pub fn specials(&self) -> &[(String, Rank)] {
        &self.specials
    }

    /// A matcher for the named special tokens (names that are not special tokens are ignored).
    pub fn special_matcher<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> SpecialMatcher {
        let wanted: FxHashSet<&str> = names.into_iter().collect();
        SpecialMatcher::new(
            self.specials
                .iter()
                .filter(|(special, _)| wanted.contains(special.as_str()))
                .map(|(special, id)| (special.as_str(), *id)),
        )
    }

    /// Encodes text with no special-token handling: every character is ordinary text.
    pub fn encode_ordinary(&self, text: &str, out: &mut Vec<Rank>) -> Result<(), SplitError> {
        self.encode_ordinary_with_offsets(text, 0, out, None)
    }

    /// Like [`Model::encode_ordinary`]; also records the byte offset (into `text`, plus `base`)
    /// where each token starts when `starts` is given.
    pub fn encode_ordinary_with_offsets(
        &self,
        text: &str,
        base: usize,
        out: &mut Vec<Rank>,
        mut starts: Option<&mut Vec<usize>>,
    ) -> Result<(), SplitError> {
        let bytes = text.as_bytes();
        self.splitter.for_each_piece(text, |start, end| {
            let piece = &bytes[start..end];
            let before = out.len();
            match self.encoder.get(piece) {
                Some(&id) => out.push(id),
                None => self.merges.encode_piece(piece, out),
            }
            if let Some(starts) = starts.as_deref_mut() {
                let mut offset = base + start;
                for &id in &out[before..] {
                    starts.push(offset);
                    offset += self.tokens.get(id).map_or(0, <[u8]>::len);
                }
            }
        })
    }

    /// Encodes text, emitting the special tokens `allowed` finds as their ids and everything else
    /// as ordinary text.
    pub fn encode(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        out: &mut Vec<Rank>,
    ) -> Result<(), SplitError> {
        self.encode_with_offsets(text, allowed, out, None)
    }

    /// Like [`Model::encode`]; also records the byte offset where each token starts.
    pub fn encode_with_offsets(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        out: &mut Vec<Rank>,
        mut starts: Option<&mut Vec<usize>>,
    ) -> Result<(), SplitError> {
        let mut done = 0;
        for special in allowed.find_all(text) {
            self.encode_ordinary_with_offsets(
                &text[done..special.start],
                done,
                out,
                starts.as_deref_mut(),
            )?;
            out.push(special.id);
            if let Some(starts) = starts.as_deref_mut() {
                starts.push(special.start);
            }
            done = special.end;
        }
        self.encode_ordinary_with_offsets(&text[done..], done, out, starts)
    }

    /// The bytes of one token (mergeable or special).
    #[inline]
    pub fn token_bytes(&self, id: Rank) -> Option<&[u8]> {
        self.tokens.get(id)
    }

    /// The id of a mergeable token given its bytes.
    pub fn token_id(&self, bytes: &[u8]) -> Option<Rank> {
        self.encoder.get(bytes).copied()
    }

    /// Appends the bytes of `ids` to `out`; on an unknown id, returns it.
    pub fn decode_bytes(&self, ids: &[Rank], out: &mut Vec<u8>) -> Result<(), Rank> {
        for &id in ids {
            out.extend_from_slice(self.tokens.get(id).ok_or(id)?);
        }
        Ok(())
    }

    /// Every mergeable token's bytes, sorted (tiktoken's `token_byte_values`).
    pub fn sorted_token_bytes(&self) -> Vec<&[u8]> {
        let mut all: Vec<&[u8]> = self.encoder.keys().map(|token| &token[..]).collect();
        all.sort_unstable();
        all
    }

    /// Every mergeable token with its id, ordered by id.
    pub fn ranks(&self) -> Vec<(&[u8], Rank)> {
        let mut all: Vec<(&[u8], Rank)> = self
            .encoder
            .iter()
            .map(|(token, &rank)| (&token[..], rank))
            .collect();
        all.sort_unstable_by_key(|&(_, rank)| rank);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPT2: &str =
        r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";

    fn byte_ranks() -> Vec<(Vec<u8>, Rank)> {
        (0..=255u8)
            .map(|byte| (vec![byte], Rank::from(byte)))
            .collect()
    }

    fn small_model() -> Model {
        let mut ranks = byte_ranks();
        for (token, rank) in [
            (&b"he"[..], 256),
            (b"ll", 257),
            (b"hell", 258),
            (b"hello", 259),
        ] {
            ranks.push((token.to_vec(), rank));
        }
        Model::from_ranks(ranks, GPT2, vec![("<|end|>".into(), 300)]).unwrap()
    }

    #[test]
    fn whole_piece_and_merges() {
        let model = small_model();
        let mut ids = Vec::new();
        model.encode_ordinary("hello hell", &mut ids).unwrap();
        // "hello" is a token; " hell" is a piece that is not, so it merges: ' ' + 'hell'.
        assert_eq!(ids, vec![259, b' ' as Rank, 258]);
    }

    #[test]
    fn special_tokens_only_when_allowed() {
        let model = small_model();
        let (mut plain, mut special) = (Vec::new(), Vec::new());
        model
            .encode("he<|end|>", &SpecialMatcher::new([]), &mut plain)
            .unwrap();
        model
            .encode(
                "he<|end|>",
                &model.special_matcher(["<|end|>"]),
                &mut special,
            )
            .unwrap();
        assert_eq!(special, vec![256, 300]);
        assert!(plain.len() > 2);
        let mut decoded = Vec::new();
        model.decode_bytes(&plain, &mut decoded).unwrap();
        assert_eq!(decoded, b"he<|end|>");
    }

    #[test]
    fn offsets_follow_tokens() {
        let model = small_model();
        let (mut ids, mut starts) = (Vec::new(), Vec::new());
        model
            .encode_with_offsets(
                "hello<|end|> x",
                &model.special_matcher(["<|end|>"]),
                &mut ids,
                Some(&mut starts),
            )
            .unwrap();
        assert_eq!(starts, vec![0, 5, 12, 13]);
    }

    #[test]
    fn bad_vocabularies_are_rejected() {
        let mut ranks = byte_ranks();
        ranks.push((b"ab".to_vec(), 7));
        assert!(matches!(
            Model::from_ranks(ranks, GPT2, vec![]),
            Err(BuildError::DuplicateRank { rank: 7, .. })
        ));
        let missing: Vec<_> = byte_ranks()
            .into_iter()
            .filter(|(token, _)| token[0] != b'q')
            .collect();
        assert_eq!(
            Model::from_ranks(missing, GPT2, vec![]).unwrap_err(),
            BuildError::MissingByte(b'q')
        );
        let collision = Model::from_ranks(byte_ranks(), GPT2, vec![("<s>".into(), 65)]);
        assert!(matches!(
            collision,
            Err(BuildError::SpecialCollidesWithToken { id: 65, .. })
        ));
    }

    #[test]
    fn unknown_ids_are_reported() {
        let model = small_model();
        let mut out = Vec::new();
        assert_eq!(model.decode_bytes(&[104, 299], &mut out), Err(299));
    }
}
