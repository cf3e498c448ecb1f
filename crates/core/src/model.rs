//! The BPE model: vocabulary, split pattern and special tokens, with encode and decode.
//!
//! One model type serves every format; the formats differ in which adjacent pairs may merge (see
//! [`crate::merge`]) and in a few switches:
//! - [`Model::from_ranks`] (tiktoken): any split of a token merges, priority = rank = id; a piece
//!   that is itself a token is emitted whole.
//! - [`Model::from_merges`] (GPT-2 files, HF `tokenizer.json`): only the listed merges, priority =
//!   line order; the whole-piece rule only with `ignore_merges`.
//! - [`Model::from_sentencepiece`]: character symbols, score priorities, no split pattern
//!   ([`crate::char_merge`]).
//! - [`Model::from_affixed`]: a merges list whose symbols carry word affixes ([`crate::affix`]),
//!   which the plain byte-level path never sees.
//!
//! [`Model::rank_rule_difference`] and [`Model::merge_rule_difference`] decide whether one rule can
//! stand in for the other, which is what converting between these formats needs.

use std::fmt;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::affix::{Affixed, PieceSpan};
use crate::cache::{CacheGuard, PieceCache, ShardedCache};
use crate::fused::Seed;
use crate::halves::Halves;
use crate::memory;
use crate::hf_normalize::{NormalizeStep, Normalizer};
use crate::merge::{Merge, MergeTable};
use crate::pretokenize::{SplitError, SplitRule, Splitter};
use crate::char_merge::{DecodeState, SentencePiece, SentencePieceSpec};
use crate::short_tokens::{ShortTokens, SHORT};
use crate::special::SpecialMatcher;
use crate::tuning::{DENSE_ID_LIMIT, LONG_TOKEN};
use crate::Rank;

/// The largest id a token may have.
pub const MAX_ID: Rank = (1 << 31) - 1;


/// Why ranks and special tokens cannot form a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
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
    /// A merge names an id that is not a mergeable token.
    UnknownMergeId {
        line: usize,
        id: Rank,
    },
    /// A symbol of a model with word affixes (or its unknown token) names an id that is not a
    /// mergeable token.
    UnknownSymbolId {
        id: Rank,
    },
    /// A merge makes bytes that are not a token.
    MergeMakesUnknownToken {
        line: usize,
        left: Vec<u8>,
        right: Vec<u8>,
    },
    SentencePiece(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
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
            BuildError::UnknownMergeId { line, id } => {
                write!(f, "merge {line} names id {id}, which is not a token of the vocabulary")
            }
            BuildError::UnknownSymbolId { id } => {
                write!(f, "a symbol names id {id}, which is not a token of the vocabulary")
            }
            BuildError::MergeMakesUnknownToken { line, left, right } => write!(
                f,
                "merge {line} ({} + {}) makes {}, which is not a token of the vocabulary",
                show_bytes(left),
                show_bytes(right),
                show_bytes(&[&left[..], &right[..]].concat())
            ),
            BuildError::SentencePiece(message) => f.write_str(message),
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

/// `a` and `b`, on two threads of the current rayon pool when called on one (as [`Model::from_ranks`]
/// and the Python layer's builds are), else one after the other on the calling thread: rayon's global
/// pool, which a thread outside any pool would use, does not survive a fork.
fn join_in_pool<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    if rayon::current_thread_index().is_some() {
        rayon::join(a, b)
    } else {
        (a(), b())
    }
}

/// The most ids a table indexed by id may cover for `count` tokens: four slots per token, and at
/// least 65,536 (vocabularies with holes, such as reserved ranges, stay dense).
pub fn dense_bound(count: usize) -> usize {
    count.saturating_mul(4).max(1 << 16)
}

/// id -> bytes for every token, mergeable and special.
#[derive(Clone, Debug)]
enum TokenTable {
    Dense(Vec<Option<Box<[u8]>>>),
    Sparse(FxHashMap<Rank, Box<[u8]>>),
}

impl TokenTable {
    /// `count` tokens (mergeable and special) whose largest id is `max_id`. A table indexed by id
    /// only when it is not much sparser than the tokens: its size must follow from the input, so a
    /// small file declaring one id of 16 million does not take 268 MB.
    fn new(tokens: impl Iterator<Item = (Rank, Box<[u8]>)>, count: usize, max_id: Option<Rank>) -> Self {
        let needed = max_id.map_or(0, |id| id as usize + 1);
        if needed <= DENSE_ID_LIMIT && needed <= dense_bound(count) {
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

/// Which rule decides the merges (the format a model came from).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// tiktoken: any split of a token merges, priority = id, whole-piece rule.
    Ranks,
    /// A merges list (GPT-2, HF): listed pairs only, priority = line; whole pieces only with
    /// `ignore_merges`.
    Merges { ignore_merges: bool },
    /// SentencePiece BPE: characters, score priorities, no split pattern.
    SentencePiece,
}

/// How text becomes symbols and symbols merge.
#[derive(Clone, Debug)]
// A model holds one rule; the byte-level one is kept inline for the hot path.
#[allow(clippy::large_enum_variant)]
enum Rule {
    ByteLevel(ByteLevel),
    SentencePiece(Box<SentencePiece>),
}

/// Byte-level BPE: split by a pattern, merge each piece from its bytes.
#[derive(Clone, Debug)]
struct ByteLevel {
    splitter: Splitter,
    merges: MergeTable,
    /// Emit a piece that is itself a token at once. For a merges list without `ignore_merges`
    /// this is only switched on when it changes nothing (every token merges back to itself), to
    /// save the merge loop.
    whole_piece: bool,
    /// The listed merges (ids) in priority order, for merges-list models.
    merge_list: Option<Vec<(Rank, Rank)>>,
    ignore_merges: bool,
    /// Encode the empty matches of the split pattern too, as tiktoken does: it looks every match up
    /// whole, so with an empty token in the vocabulary each empty match becomes that token (only
    /// custom patterns match the empty string). Set for rank models with an empty token and a
    /// pattern that may match the empty string; `tokenizers` never encodes an empty piece, so
    /// merges lists never are.
    empty_matches: bool,
    /// `tokenizers`' normalizer, run on each stretch of ordinary text before it is split.
    normalizer: Option<Normalizer>,
    /// The normalizer cut where `tokenizers` looks for `normalized` added tokens, when it changes
    /// text beyond `ByteLevel`'s prefix space (otherwise such tokens are looked for in the text as
    /// given, between the others).
    added_normalizer: Option<Box<AddedNormalizer>>,
    /// The single bytes the vocabulary lacks (merges-list models only: `tokenizers` drops such a
    /// byte from a piece before merging it), when one of them can occur in UTF-8 text.
    dropped_bytes: Option<Box<[bool; 256]>>,
    /// Drop the bytes of `dropped_bytes` after merging rather than before (llama.cpp): each stays a
    /// symbol that no merge joins, a barrier the merges of its piece do not cross, and gives no id.
    dropped_after_merging: bool,
    /// Whether the vocabulary lacks any single byte.
    any_missing: bool,
    /// The rule of a model whose symbols carry word affixes, which then encodes every piece (the
    /// fields above but the splitter, the normalizer and the merge list are unused).
    affixed: Option<Box<Affixed>>,
}

/// Where [`Model::encode_normalizing_first`] puts the offsets of the tokens it emits.
enum Offsets<'a> {
    None,
    /// Where each token starts (bytes).
    Starts(&'a mut Vec<usize>),
    /// Each token's span (bytes), as `tokenizers` gives it.
    Spans(&'a mut Vec<(usize, usize)>),
}

impl Offsets<'_> {
    fn wanted(&self) -> bool {
        !matches!(self, Offsets::None)
    }

    /// Appends the token `id` spanning `start..end` (of a text of `length` bytes, for the memory check).
    fn push(&mut self, out: &mut Vec<Rank>, id: Rank, start: usize, end: usize, length: usize) {
        memory::reserve(out, 1, "the ids", length, "bytes of text");
        out.push(id);
        match self {
            Offsets::None => {}
            Offsets::Starts(starts) => {
                memory::reserve(starts, 1, "the offsets", length, "bytes of text");
                starts.push(start);
            }
            Offsets::Spans(spans) => {
                memory::reserve(spans, 1, "the offsets", length, "bytes of text");
                spans.push((start, end));
            }
        }
    }
}

/// Each byte of `text` with the range of the character it belongs to.
fn identity_alignments(text: &str) -> Vec<(usize, usize)> {
    text.char_indices().flat_map(|(start, char)| std::iter::repeat_n((start, start + char.len_utf8()), char.len_utf8())).collect()
}

/// A normalizer cut where `tokenizers` looks for the added tokens with `normalized = true`: in the
/// text of each stretch between the other added tokens as `before` (every step but a last
/// [`NormalizeStep::PrefixSpace`]) leaves it; each stretch left between them then gets `after`
/// (that prefix space: `ByteLevel`'s, a pre-tokenizer in `tokenizers`).
#[derive(Clone, Debug)]
struct AddedNormalizer {
    before: Normalizer,
    after: Option<Normalizer>,
}

impl AddedNormalizer {
    /// The cut of `steps`; None when they change nothing but by `ByteLevel`'s prefix space.
    fn of(steps: &[NormalizeStep]) -> Result<Option<Box<Self>>, SplitError> {
        let (before, after) = match steps {
            [before @ .., NormalizeStep::PrefixSpace] => (before, Some(Normalizer::new(vec![NormalizeStep::PrefixSpace])?)),
            _ => (steps, None),
        };
        if before.is_empty() {
            return Ok(None);
        }
        Ok(Some(Box::new(Self { before: Normalizer::new(before.to_vec())?, after })))
    }
}

/// The symbol a byte the vocabulary lacks starts as: no merge joins it, and encoding text drops it
/// before merging, or after (see [`ByteLevel::dropped_bytes`]).
const MISSING_BYTE: Rank = Rank::MAX - 1;

/// Where in the text the byte `at` of a piece starting at `start` is: with `space` the piece's
/// first byte is the space `ByteLevel` added, which stands where the piece starts.
fn text_offset(start: usize, space: bool, at: usize) -> usize {
    start + at.saturating_sub(usize::from(space))
}

/// The bytes of the piece `bytes[start..end]`, after the space `ByteLevel` added when `space` (built
/// in `spaced`).
fn piece_bytes<'a>(bytes: &'a [u8], start: usize, end: usize, space: bool, spaced: &'a mut Vec<u8>) -> &'a [u8] {
    if !space {
        return &bytes[start..end];
    }
    spaced.clear();
    spaced.push(b' ');
    spaced.extend_from_slice(&bytes[start..end]);
    spaced
}

/// Where in the text a token ending before the byte `at` of such a piece ends: the added space
/// stands for the piece's first character (`tokenizers` aligns a prepended character with the
/// character after it), so a token of the space alone ends inside it (rounded up to it whole when
/// offsets become characters).
fn text_end(start: usize, space: bool, at: usize) -> usize {
    if space { start + at.saturating_sub(1).max(1) } else { start + at }
}

/// The span of `text` that the (normalized) bytes `start..end` stand for, as `tokenizers` maps
/// offsets back: through the normalizer's alignments `align` (from the origin of the first byte
/// to the end of the last one's), or without a normalizer the bytes widened to whole characters;
/// an empty span stays at its start.
fn original_span(text: &str, align: Option<&[(usize, usize)]>, start: usize, end: usize) -> (usize, usize) {
    match align {
        None => {
            let start = text.floor_char_boundary(start);
            (start, if end > start { text.ceil_char_boundary(end) } else { start })
        }
        Some(align) => match align.get(start) {
            Some(&(from, _)) if end > start => (from, align[end - 1].1),
            Some(&(from, _)) => (from, from),
            None => (text.len(), text.len()),
        },
    }
}

/// Bytes that never occur in UTF-8 text.
fn never_in_utf8(byte: u8) -> bool {
    matches!(byte, 0xC0 | 0xC1 | 0xF5..=0xFF)
}

/// Why one merge rule would encode differently from another (see [`Model::rank_rule_difference`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleDifference {
    /// Two merge lines make the same token.
    TokenMergedTwice { token: Vec<u8>, first_line: usize, second_line: usize },
    /// A later merge line makes a token with a smaller id than an earlier line's.
    OrderDiffers { earlier_line: usize, earlier: Vec<u8>, later_line: usize, later: Vec<u8> },
    /// A token's bytes merge to two tokens that the merges list never joins, though their
    /// concatenation is that token: the rank rule joins them wherever they meet.
    UnlistedPair { token: Vec<u8>, left: Vec<u8>, right: Vec<u8> },
    /// A token's bytes do not merge back into it, so a piece spelling it encodes differently with
    /// and without the whole-piece rule.
    NotSelfMerging { token: Vec<u8>, parts: Vec<Vec<u8>> },
    /// The vocabulary has the empty token and the split pattern may match the empty string: the
    /// rank rule (tiktoken) emits the empty token at each empty match, a merges list never.
    EmptyMatches { pattern: String },
    /// The symbols carry word affixes, which only this model's own rule merges.
    WordAffixes,
}

impl fmt::Display for RuleDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleDifference::TokenMergedTwice { token, first_line, second_line } => write!(
                f,
                "merges {first_line} and {second_line} both make {}; the rank rule gives a token one rank",
                show_bytes(token)
            ),
            RuleDifference::OrderDiffers { earlier_line, earlier, later_line, later } => write!(
                f,
                "merge {earlier_line} makes {} and the later merge {later_line} makes {}, which has the \
                 smaller id; ranked by id they would apply in the other order",
                show_bytes(earlier),
                show_bytes(later)
            ),
            RuleDifference::UnlistedPair { token, left, right } => write!(
                f,
                "the bytes of {} merge to {} + {}, a pair no merge joins; the rank rule would join them \
                 into {} wherever they meet",
                show_bytes(token),
                show_bytes(left),
                show_bytes(right),
                show_bytes(token)
            ),
            RuleDifference::NotSelfMerging { token, parts } => write!(
                f,
                "the merges turn the bytes of {} into [{}], not into the token itself; a piece spelling \
                 it encodes as the token only with the whole-piece rule (ignore_merges)",
                show_bytes(token),
                parts.iter().map(|part| show_bytes(part)).collect::<Vec<_>>().join(", ")
            ),
            RuleDifference::WordAffixes => f.write_str(
                "its symbols carry word affixes (continuing_subword_prefix, end_of_word_suffix), which only \
                 its own merges list with them reproduces",
            ),
            RuleDifference::EmptyMatches { pattern } => write!(
                f,
                "the vocabulary has the empty token b'' and the split pattern {pattern:?} may match the empty \
                 string: the rank rule (tiktoken) emits the empty token at each empty match, a merges list \
                 never"
            ),
        }
    }
}

/// A BPE model: vocabulary, special tokens and the rule that encodes text.
#[derive(Clone, Debug)]
pub struct Model {
    /// Mergeable token bytes -> id.
    encoder: FxHashMap<Box<[u8]>, Rank>,
    /// The short ones again, packed for the whole-piece lookups of the hot path.
    short: ShortTokens,
    /// The others (longer than [`SHORT`] bytes) again, for the whole-piece lookups of long pieces:
    /// a few thousand tokens (o200k: 5,400 of 200,000), so this map stays in the core's caches
    /// where `encoder` spans megabytes on ordinary pages, and most long pieces are not tokens.
    /// Looking long pieces up in `encoder` instead, the core encoded `encode.py`'s held-out
    /// documents with o200k at 0.893 of this speed (`encode_bench`, `BENCH_DOCS` and `BENCH_AB`:
    /// median of 38 per-round ratios, quartiles 0.843 to 0.949).
    long: FxHashMap<Box<[u8]>, Rank>,
    tokens: TokenTable,
    specials: Vec<(String, Rank)>,
    max_id: Option<Rank>,
    rule: Rule,
    /// Merged pieces, by thread (see [`crate::cache`]).
    cache: ShardedCache,
    /// The short tokens as each thread's table of short pieces starts (see [`crate::fused`]),
    /// made on the first encode that uses one.
    seed: OnceLock<Arc<Seed>>,
}

/// `text` as `byte_level`'s normalizer writes it, with where each of its bytes comes from in `text`;
/// `None` for a model without a normalizer.
fn normalized_with_alignments(byte_level: &ByteLevel, text: &str) -> Result<Option<(String, Vec<(usize, usize)>)>, SplitError> {
    let Some(normalizer) = &byte_level.normalizer else {
        return Ok(None);
    };
    ensure_working_room(text);
    Ok(Some(normalizer.normalize_with_alignments(text)?))
}

/// Checks mergeable tokens: ids in range and unique, bytes unique. The empty token is allowed (as
/// tiktoken allows it: Whisper's `multilingual.tiktoken` has one): it decodes to nothing and no
/// merge makes or joins it; see [`ByteLevel::empty_matches`] for the one way encoding emits it.
fn check_tokens(tokens: Vec<(Vec<u8>, Rank)>) -> Result<FxHashMap<Box<[u8]>, Rank>, BuildError> {
    let mut owner_of_rank: FxHashMap<Rank, usize> =
        FxHashMap::with_capacity_and_hasher(tokens.len(), Default::default());
    for (index, (token, rank)) in tokens.iter().enumerate() {
        if *rank > MAX_ID {
            return Err(BuildError::IdTooLarge { id: u64::from(*rank) });
        }
        if let Some(&first) = owner_of_rank.get(rank) {
            return Err(BuildError::DuplicateRank {
                rank: *rank,
                first: tokens[first].0.clone(),
                second: token.clone(),
            });
        }
        owner_of_rank.insert(*rank, index);
    }
    drop(owner_of_rank);
    let mut encoder: FxHashMap<Box<[u8]>, Rank> =
        FxHashMap::with_capacity_and_hasher(tokens.len(), Default::default());
    encoder.extend(tokens.into_iter().map(|(token, rank)| (token.into_boxed_slice(), rank)));
    Ok(encoder)
}

/// The tokens longer than [`SHORT`] bytes (`Model`'s `long`).
fn long_tokens(encoder: &FxHashMap<Box<[u8]>, Rank>) -> FxHashMap<Box<[u8]>, Rank> {
    encoder.iter().filter(|(token, _)| token.len() > SHORT).map(|(token, &id)| (token.clone(), id)).collect()
}

/// The id of each single byte.
fn byte_ids(encoder: &FxHashMap<Box<[u8]>, Rank>) -> Result<[Rank; 256], BuildError> {
    let mut ids = [0; 256];
    for (byte, id) in ids.iter_mut().enumerate() {
        *id = *encoder.get(&[byte as u8][..]).ok_or(BuildError::MissingByte(byte as u8))?;
    }
    Ok(ids)
}

/// Bytes of working memory per byte of text that normalizing text (the normalized copy, the origin
/// of each of its bytes, the expansions of compatibility forms) and SentencePiece's symbol list take
/// at their peak, as measured on long texts with a margin.
const WORKING_BYTES_PER_TEXT_BYTE: usize = 48;

/// Fails with [`crate::memory::OutOfMemory`] (a `MemoryError` in Python) before a long text is
/// normalized or merged by SentencePiece's rule when the memory that takes cannot be had: those
/// paths allocate as they go, where a failed allocation would abort the process.
fn ensure_working_room(text: &str) {
    if text.len() >= 1 << 20 {
        crate::memory::ensure_headroom(
            text.len().saturating_mul(WORKING_BYTES_PER_TEXT_BYTE),
            "normalizing and merging",
            text.len(),
            "bytes of text",
        );
    }
}

/// Checks special tokens against each other and against the ids of `tokens` (id -> bytes). A
/// special token may share its id with a token of the same bytes (as `tokenizers` keeps an added
/// token that merges also form in its model's vocabulary): both decode alike.
fn check_specials(
    specials: &[(String, Rank)],
    token_of_id: impl Fn(Rank) -> Option<Vec<u8>>,
) -> Result<(), BuildError> {
    let mut special_ids: FxHashMap<Rank, &str> = FxHashMap::default();
    for (special, id) in specials {
        if special.is_empty() {
            return Err(BuildError::EmptySpecialToken);
        }
        if *id > MAX_ID {
            return Err(BuildError::IdTooLarge { id: u64::from(*id) });
        }
        if let Some(token) = token_of_id(*id).filter(|token| token[..] != *special.as_bytes()) {
            return Err(BuildError::SpecialCollidesWithToken { special: special.clone(), id: *id, token });
        }
        if let Some(first) = special_ids.insert(*id, special) {
            return Err(BuildError::DuplicateSpecialId { id: *id, first: first.to_owned(), second: special.clone() });
        }
    }
    Ok(())
}

impl Model {
    /// Builds a model from tiktoken-style ranks: the id of each mergeable token is also its merge
    /// priority, and any adjacent pair whose concatenation is a token may merge.
    ///
    /// The merge table keeps only each token's last merge (see [`MergeTable::last_merge`]): when
    /// tiktoken's loop forms a token inside a piece, the merges that built it were all inside its
    /// bytes, in the order the loop takes on its bytes alone, so the pair it joins is that last
    /// merge; any other split of a token into two tokens is never merged. This halves the table
    /// (o200k: 446,189 splits, 199,742 last merges), which the merge loop reads at random: on
    /// `encode.py`'s held-out documents o200k encoded about 10% faster than with every split
    /// (median of 33 per-round ratios in one process, quartiles 0.80 to 1.00 for every split).
    pub fn from_ranks(
        ranks: Vec<(Vec<u8>, Rank)>,
        split: impl Into<SplitRule>,
        specials: Vec<(String, Rank)>,
    ) -> Result<Self, BuildError> {
        let splitter = Splitter::new(split).map_err(BuildError::Pattern)?;
        let encoder = check_tokens(ranks)?;
        let byte_ids = byte_ids(&encoder)?;
        let mut every_split = MergeTable::builder_recording_joins(byte_ids);
        // Long tokens find their splits by rolling hash: looking every prefix up is quadratic.
        let halves = encoder
            .keys()
            .any(|token| token.len() > LONG_TOKEN)
            .then(|| Halves::new(encoder.keys().map(|token| &token[..])));
        // Every split of every token into two tokens, found on the current rayon pool (two hash
        // lookups per split; the right half is looked up only when the left is a token), then
        // inserted in the encoder's order.
        let tokens: Vec<(&[u8], Rank)> = encoder.iter().map(|(token, &rank)| (&token[..], rank)).collect();
        let joins: Vec<(Rank, Rank, Rank, u8, u8)> = tokens
            .par_iter()
            .with_min_len(1024)
            .flat_map_iter(|&(token, rank)| {
                let splits: Vec<usize> = match &halves {
                    Some(halves) if token.len() > LONG_TOKEN => halves.candidates(token),
                    _ => (1..token.len()).collect(),
                };
                let encoder = &encoder;
                splits.into_iter().filter_map(move |split| {
                    let left = *encoder.get(&token[..split])?;
                    let right = *encoder.get(&token[split..])?;
                    Some((left, right, rank, token[split - 1], token[split]))
                })
            })
            .collect();
        every_split.reserve(joins.len());
        for &(left, right, rank, last_of_left, first_of_right) in &joins {
            every_split.insert(left, right, Merge { priority: rank, merged: rank }, last_of_left, first_of_right);
        }
        let every_split = every_split.build();
        // Each short token's last merge; a long one keeps every split (finding its last merge is
        // quadratic in its length, and any table between the last merges and every split merges
        // alike: the pair the loop picks is always a last merge).
        let last_merges: Vec<(Rank, Rank, Rank, u8, u8)> = tokens
            .par_iter()
            .with_min_len(1024)
            .filter(|(token, _)| token.len() <= LONG_TOKEN)
            .filter_map(|&(token, rank)| {
                let (left, right, split) = every_split.last_merge(token)?;
                Some((left, right, rank, token[split - 1], token[split]))
            })
            .collect();
        drop(every_split);
        let long_ranks: FxHashSet<Rank> =
            tokens.iter().filter(|(token, _)| token.len() > LONG_TOKEN).map(|&(_, rank)| rank).collect();
        let long_splits = joins.into_iter().filter(|(_, _, rank, _, _)| long_ranks.contains(rank));
        let mut merges = MergeTable::builder_recording_joins(byte_ids);
        merges.reserve(last_merges.len());
        for (left, right, rank, last_of_left, first_of_right) in last_merges.into_iter().chain(long_splits) {
            merges.insert(left, right, Merge { priority: rank, merged: rank }, last_of_left, first_of_right);
        }
        let empty_matches = encoder.contains_key(&[][..]) && splitter.may_match_empty();
        let rule = Rule::ByteLevel(ByteLevel {
            splitter,
            merges: merges.build(),
            whole_piece: true,
            merge_list: None,
            ignore_merges: true,
            empty_matches,
            normalizer: None,
            added_normalizer: None,
            dropped_bytes: None,
            dropped_after_merging: false,
            any_missing: false,
            affixed: None,
        });
        Self::assemble(encoder, specials, rule)
    }

    /// Builds a model from a merges list: `vocab` gives each mergeable token's id; `merges` lists
    /// pairs of ids in priority order, and only those pairs merge (into the token they spell).
    /// A pair listed twice takes its last line, as `tokenizers` does. A pair with the empty token
    /// never applies (no symbol is empty) and is dropped. With `ignore_merges`, a piece that is
    /// itself a token is emitted whole.
    pub fn from_merges(
        vocab: Vec<(Vec<u8>, Rank)>,
        merges: Vec<(Rank, Rank)>,
        split: impl Into<SplitRule>,
        specials: Vec<(String, Rank)>,
        ignore_merges: bool,
    ) -> Result<Self, BuildError> {
        let mut model = Self::from_merges_unsettled(vocab, merges, split, specials, ignore_merges)?;
        model.settle_whole_piece();
        Ok(model)
    }

    /// [`Model::from_merges`] before [`Model::settle_whole_piece`].
    fn from_merges_unsettled(
        vocab: Vec<(Vec<u8>, Rank)>,
        merges: Vec<(Rank, Rank)>,
        split: impl Into<SplitRule>,
        specials: Vec<(String, Rank)>,
        ignore_merges: bool,
    ) -> Result<Self, BuildError> {
        let splitter = Splitter::new(split).map_err(BuildError::Pattern)?;
        let encoder = check_tokens(vocab)?;
        let bytes_of: FxHashMap<Rank, &[u8]> = encoder.iter().map(|(token, &id)| (id, &token[..])).collect();
        let mut last_line: FxHashMap<(Rank, Rank), usize> = FxHashMap::default();
        for (line, &(left, right)) in merges.iter().enumerate() {
            for id in [left, right] {
                if !bytes_of.contains_key(&id) {
                    return Err(BuildError::UnknownMergeId { line, id });
                }
            }
            last_line.insert((left, right), line);
        }
        // `tokenizers` drops a byte its vocabulary lacks (see `dropped_bytes`).
        let mut ids = [MISSING_BYTE; 256];
        let mut missing = [false; 256];
        for (byte, id) in ids.iter_mut().enumerate() {
            match encoder.get(&[byte as u8][..]) {
                Some(&known) => *id = known,
                None => missing[byte] = true,
            }
        }
        let dropped_bytes = (0..=255u8).any(|byte| missing[byte as usize] && !never_in_utf8(byte)).then(|| Box::new(missing));
        // The token each line spells (hash lookups of joined bytes: on the current pool's threads
        // when called on one), then the table in line order.
        let spelled = |joined: &mut Vec<u8>, &(left, right): &(Rank, Rank)| {
            joined.clear();
            joined.extend_from_slice(bytes_of[&left]);
            joined.extend_from_slice(bytes_of[&right]);
            encoder.get(&joined[..]).copied()
        };
        let merged_ids: Vec<Option<Rank>> = if rayon::current_thread_index().is_some() {
            merges.par_iter().with_min_len(4096).map_init(Vec::new, spelled).collect()
        } else {
            let mut joined = Vec::new();
            merges.iter().map(|merge| spelled(&mut joined, merge)).collect()
        };
        let mut table = MergeTable::builder_recording_joins(ids);
        table.reserve(last_line.len());
        let mut merge_list = Vec::with_capacity(last_line.len());
        for (line, &(left, right)) in merges.iter().enumerate() {
            if last_line[&(left, right)] != line || bytes_of[&left].is_empty() || bytes_of[&right].is_empty() {
                continue;
            }
            let Some(merged) = merged_ids[line] else {
                return Err(BuildError::MergeMakesUnknownToken {
                    line,
                    left: bytes_of[&left].to_vec(),
                    right: bytes_of[&right].to_vec(),
                });
            };
            let merge = Merge { priority: merge_list.len() as u32, merged };
            let (last_of_left, first_of_right) = (bytes_of[&left][bytes_of[&left].len() - 1], bytes_of[&right][0]);
            table.insert(left, right, merge, last_of_left, first_of_right);
            merge_list.push((left, right));
        }
        let rule = Rule::ByteLevel(ByteLevel {
            splitter,
            merges: table.build(),
            whole_piece: ignore_merges,
            merge_list: Some(merge_list),
            ignore_merges,
            empty_matches: false,
            normalizer: None,
            added_normalizer: None,
            dropped_bytes,
            dropped_after_merging: false,
            any_missing: missing.contains(&true),
            affixed: None,
        });
        Self::assemble(encoder, specials, rule)
    }

    /// [`Model::from_merges`], made the rank model it equals when it does (see
    /// [`Model::make_rank_rule`]), merging every token's bytes once for both questions.
    pub fn from_merges_as_ranks(
        vocab: Vec<(Vec<u8>, Rank)>,
        merges: Vec<(Rank, Rank)>,
        split: impl Into<SplitRule>,
        specials: Vec<(String, Rank)>,
        ignore_merges: bool,
    ) -> Result<Self, BuildError> {
        let mut model = Self::from_merges_unsettled(vocab, merges, split, specials, ignore_merges)?;
        if !model.make_rank_rule() {
            model.settle_whole_piece();
        }
        Ok(model)
    }

    /// Emits a piece that is a token whole when that changes nothing: a merges list without
    /// `ignore_merges` whose every token merges back to itself (saves the merge loop).
    fn settle_whole_piece(&mut self) {
        let Some(&ByteLevel { ignore_merges, any_missing, .. }) = self.byte_level() else { return };
        if !ignore_merges && !any_missing && self.first_not_self_merging().is_none() {
            if let Rule::ByteLevel(byte_level) = &mut self.rule {
                byte_level.whole_piece = true;
            }
        }
    }

    /// Builds a merges-list model whose symbols carry word affixes (see [`crate::affix`]): `vocab`
    /// gives each mergeable token's id, `affixed` the symbols and merges, which must name them.
    pub fn from_affixed(
        vocab: Vec<(Vec<u8>, Rank)>,
        affixed: Affixed,
        split: impl Into<SplitRule>,
        specials: Vec<(String, Rank)>,
    ) -> Result<Self, BuildError> {
        let splitter = Splitter::new(split).map_err(BuildError::Pattern)?;
        let encoder = check_tokens(vocab)?;
        let ids: FxHashSet<Rank> = encoder.values().copied().collect();
        for (line, &(left, right)) in affixed.merge_list().iter().enumerate() {
            if let Some(&id) = [left, right].iter().find(|id| !ids.contains(id)) {
                return Err(BuildError::UnknownMergeId { line, id });
            }
        }
        if let Some(id) = affixed.symbol_ids().find(|id| !ids.contains(id)) {
            return Err(BuildError::UnknownSymbolId { id });
        }
        let ignore_merges = affixed.ignore_merges();
        let rule = Rule::ByteLevel(ByteLevel {
            splitter,
            // No byte is missing from this unused table (the affixed rule drops its own symbols).
            merges: MergeTable::builder([0; 256]).build(),
            whole_piece: false,
            merge_list: Some(affixed.merge_list().to_vec()),
            ignore_merges,
            empty_matches: false,
            normalizer: None,
            added_normalizer: None,
            dropped_bytes: None,
            dropped_after_merging: false,
            any_missing: false,
            affixed: Some(Box::new(affixed)),
        });
        Self::assemble(encoder, specials, rule)
    }

    /// The rule of a model whose symbols carry word affixes.
    pub fn affixed(&self) -> Option<&Affixed> {
        self.byte_level().and_then(|byte_level| byte_level.affixed.as_deref())
    }

    /// Builds a SentencePiece BPE model. Control and unknown pieces become the special tokens.
    pub fn from_sentencepiece(spec: SentencePieceSpec) -> Result<Self, BuildError> {
        let model = SentencePiece::new(spec).map_err(|error| BuildError::SentencePiece(error.0))?;
        let mut encoder: FxHashMap<Box<[u8]>, Rank> = FxHashMap::default();
        let mut specials = Vec::new();
        let mut tokens = Vec::with_capacity(model.spec().pieces.len());
        for (id, piece) in model.spec().pieces.iter().enumerate() {
            let id = id as Rank;
            let bytes = model.piece_bytes(id).expect("every piece has bytes");
            use crate::char_merge::PieceKind;
            match piece.kind {
                PieceKind::Control | PieceKind::Unknown => specials.push((piece.text.clone(), id)),
                PieceKind::Byte => {
                    encoder.entry(bytes.clone().into_boxed_slice()).or_insert(id);
                }
                _ => {
                    encoder.insert(bytes.clone().into_boxed_slice(), id);
                }
            }
            tokens.push((id, bytes.into_boxed_slice()));
        }
        let max_id = tokens.len().checked_sub(1).map(|id| id as Rank);
        Ok(Self {
            short: ShortTokens::new(encoder.iter().map(|(token, &id)| (&token[..], id))),
            long: long_tokens(&encoder),
            encoder,
            tokens: TokenTable::new(tokens.into_iter(), max_id.map_or(0, |id| id as usize + 1), max_id),
            specials,
            max_id,
            rule: Rule::SentencePiece(Box::new(model)),
            cache: ShardedCache::new(),
            seed: OnceLock::new(),
        })
    }

    fn assemble(
        encoder: FxHashMap<Box<[u8]>, Rank>,
        specials: Vec<(String, Rank)>,
        rule: Rule,
    ) -> Result<Self, BuildError> {
        let token_of_id: FxHashMap<Rank, &[u8]> = encoder.iter().map(|(token, &id)| (id, &token[..])).collect();
        check_specials(&specials, |id| token_of_id.get(&id).map(|token| token.to_vec()))?;
        let max_id = encoder.values().copied().chain(specials.iter().map(|(_, id)| *id)).max();
        // Four tables read from the encoder alone, built side by side on the current pool.
        let mut rule = rule;
        let ((tokens, long), (short, ())) = join_in_pool(
            || {
                join_in_pool(
                    || {
                        TokenTable::new(
                            encoder
                                .iter()
                                .map(|(token, &rank)| (rank, token.clone()))
                                .chain(specials.iter().map(|(special, id)| (*id, special.as_bytes().into()))),
                            encoder.len() + specials.len(),
                            max_id,
                        )
                    },
                    || long_tokens(&encoder),
                )
            },
            || {
                join_in_pool(
                    || ShortTokens::new(encoder.iter().map(|(token, &id)| (&token[..], id))),
                    || {
                        if let Rule::ByteLevel(ByteLevel { merges, .. }) = &mut rule {
                            merges.premerge_chars(|id| token_of_id.get(&id).copied());
                        }
                    },
                )
            },
        );
        drop(token_of_id);
        Ok(Self { encoder, short, long, tokens, specials, max_id, rule, cache: ShardedCache::new(), seed: OnceLock::new() })
    }

    pub fn kind(&self) -> Kind {
        match &self.rule {
            Rule::ByteLevel(ByteLevel { merge_list: None, .. }) => Kind::Ranks,
            Rule::ByteLevel(ByteLevel { ignore_merges, .. }) => Kind::Merges { ignore_merges: *ignore_merges },
            Rule::SentencePiece(_) => Kind::SentencePiece,
        }
    }

    /// How text is cut into pieces, or `None` for SentencePiece models, which split nothing.
    pub fn split_rule(&self) -> Option<&SplitRule> {
        match &self.rule {
            Rule::ByteLevel(byte_level) => Some(byte_level.splitter.rule()),
            Rule::SentencePiece(_) => None,
        }
    }

    /// What splits text (`"scanner llama3 (Oniguruma)"`, `"Oniguruma"`...), or `None` for
    /// SentencePiece models.
    pub fn split_engine(&self) -> Option<String> {
        match &self.rule {
            Rule::ByteLevel(byte_level) => Some(byte_level.splitter.engine()),
            Rule::SentencePiece(_) => None,
        }
    }

    /// The pieces the split rule cuts `text` into (special tokens are not looked for), as bytes
    /// (see [`Splitter::piece_bytes`]), or `None` for SentencePiece models.
    pub fn pieces(&self, text: &str) -> Option<Result<Vec<Vec<u8>>, SplitError>> {
        match &self.rule {
            Rule::ByteLevel(byte_level) => Some(byte_level.splitter.piece_bytes(text)),
            Rule::SentencePiece(_) => None,
        }
    }

    /// The SentencePiece model, for SentencePiece models.
    pub fn sentencepiece(&self) -> Option<&SentencePiece> {
        match &self.rule {
            Rule::SentencePiece(model) => Some(model),
            Rule::ByteLevel(_) => None,
        }
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
            self.specials.iter().filter(|(special, _)| wanted.contains(special.as_str())).map(|(special, id)| (special.as_str(), *id)),
        )
    }

    /// Like [`Model::special_matcher`], each token with its added-token rules (see
    /// [`crate::special::LSTRIP`] and the others, and [`Model::added_token_matcher`]).
    pub fn special_matcher_with_rules<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
        rules: impl Fn(&str) -> u8,
    ) -> Result<SpecialMatcher, SplitError> {
        let wanted: FxHashSet<&str> = names.into_iter().collect();
        self.added_token_matcher(
            self.specials
                .iter()
                .filter(|(special, _)| wanted.contains(special.as_str()))
                .map(|(special, id)| (special.as_str(), *id, rules(special))),
        )
    }

    /// A matcher for `(token, id, rules)` triples (any texts, not only the special tokens) as
    /// `tokenizers` matches added tokens with these rules in this model's text: where the normalizer
    /// changes text beyond `ByteLevel`'s prefix space, the tokens with [`crate::special::LATER`]
    /// (`normalized = true`) are spelled as it normalizes them and looked for in the normalized text
    /// ([`SpecialMatcher::with_rules_normalized`]); `Err` when normalizing one fails.
    pub fn added_token_matcher<'a>(
        &self,
        tokens: impl IntoIterator<Item = (&'a str, Rank, u8)>,
    ) -> Result<SpecialMatcher, SplitError> {
        match self.byte_level().and_then(|byte_level| byte_level.added_normalizer.as_deref()) {
            Some(added) => SpecialMatcher::with_rules_normalized(tokens, |token| added.before.normalize(token)),
            None => Ok(SpecialMatcher::with_rules(tokens)),
        }
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
        let byte_level = match &self.rule {
            Rule::ByteLevel(byte_level) => byte_level,
            Rule::SentencePiece(model) => {
                ensure_working_room(text);
                return model.encode(text, base, out, starts);
            }
        };
        if let (Some(affixed), Some(starts)) = (&byte_level.affixed, starts.as_deref_mut()) {
            let mut spans = Vec::new();
            Self::encode_affixed_with_spans(byte_level, affixed, text, base, out, &mut spans)?;
            starts.extend(spans.iter().map(|&(start, _)| start));
            return Ok(());
        }
        let Some(normalizer) = &byte_level.normalizer else {
            return self.encode_split(byte_level, text, base, out, starts, None);
        };
        ensure_working_room(text);
        match starts {
            None => self.encode_split(byte_level, &normalizer.normalize(text)?, base, out, None, None),
            Some(starts) => {
                let (normalized, origin) = normalizer.normalize_aligned(text)?;
                let before = starts.len();
                self.encode_split(byte_level, &normalized, 0, out, Some(&mut *starts), None)?;
                for start in &mut starts[before..] {
                    *start = base + origin[*start];
                }
                Ok(())
            }
        }
    }

    /// Like [`Model::encode_ordinary_with_offsets`]; records each token's span `(start, end)` in
    /// bytes of `text` (plus `base`) as `tokenizers` reports an encoding's offsets: the bytes of
    /// the (normalized) text the token stands for, mapped to the original through the normalizer's
    /// alignments, from the start of its first byte's origin to the end of its last byte's. Without
    /// a normalizer that is the token's bytes widened to whole characters. (SentencePiece models,
    /// which `tokenizers` runs otherwise, give each token the bytes up to the next one's start.)
    pub fn encode_ordinary_with_spans(
        &self,
        text: &str,
        base: usize,
        out: &mut Vec<Rank>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<(), SplitError> {
        let before = out.len();
        let mut starts = Vec::new();
        let mut ends = Vec::new();
        let byte_level = match &self.rule {
            Rule::ByteLevel(byte_level) => byte_level,
            Rule::SentencePiece(model) => {
                ensure_working_room(text);
                model.encode(text, 0, out, Some(&mut starts))?;
                let nexts = starts.iter().skip(1).copied().chain(std::iter::once(text.len()));
                spans.extend(starts.iter().zip(nexts).map(|(&start, end)| (base + start, base + end.max(start))));
                return Ok(());
            }
        };
        if let Some(affixed) = &byte_level.affixed {
            return Self::encode_affixed_with_spans(byte_level, affixed, text, base, out, spans);
        }
        let normalized = normalized_with_alignments(byte_level, text)?;
        let (split, align) = normalized.as_ref().map_or((text, None), |(normalized, align)| (normalized.as_str(), Some(&align[..])));
        self.encode_split(byte_level, split, 0, out, Some(&mut starts), Some(&mut ends))?;
        memory::reserve(spans, starts.len(), "the offsets", text.len(), "bytes of text");
        spans.extend(starts.iter().zip(&ends).map(|(&start, &end)| {
            let (from, to) = original_span(text, align, start, end);
            (base + from, base + to)
        }));
        debug_assert_eq!(out.len() - before, starts.len());
        Ok(())
    }

    /// Like [`Model::encode_with_offsets`], recording each token's span `(start, end)` in bytes of
    /// `text` as `tokenizers` reports an encoding's offsets (see
    /// [`Model::encode_ordinary_with_spans`]); a special token spans its match, with the whitespace
    /// its rules strip.
    pub fn encode_with_spans(
        &self,
        text: &str,
        allowed: &SpecialMatcher,
        out: &mut Vec<Rank>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<(), SplitError> {
        self.encode_with_spans_within(text, 0..text.len(), allowed, out, spans)
    }

    /// [`Model::encode_with_spans`] of `text[within]` with spans in bytes of all of `text`, as
    /// `tokenizers` gives them when it encodes the text between tokens it cut out first (positions
    /// past a piece stay as they are, see [`PieceSpan::Raw`]). Panics unless `within` is a range of
    /// `text` on character boundaries.
    pub fn encode_with_spans_within(
        &self,
        text: &str,
        within: std::ops::Range<usize>,
        allowed: &SpecialMatcher,
        out: &mut Vec<Rank>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<(), SplitError> {
        let (base, text) = (within.start, &text[within]);
        if let Some(later) = allowed.later_in_normalized() {
            return self.encode_normalizing_first(text, base, allowed, later, out, Offsets::Spans(spans));
        }
        let mut done = 0;
        for special in allowed.find_all(text) {
            self.encode_ordinary_with_spans(&text[done..special.start.max(done)], base + done, out, spans)?;
            memory::reserve(out, 1, "the ids", text.len(), "bytes of text");
            memory::reserve(spans, 1, "the offsets", text.len(), "bytes of text");
            out.push(special.id);
            spans.push((base + special.start, base + special.end));
            done = special.end;
        }
        self.encode_ordinary_with_spans(&text[done..], base + done, out, spans)
    }

    /// Encodes `text` as `tokenizers` does with `normalized` added tokens under a normalizer that
    /// changes text (`allowed` made by [`Model::added_token_matcher`]): the other tokens of
    /// `allowed` are cut out of the text as given; each stretch between them is normalized (all
    /// steps but `ByteLevel`'s prefix space), the `later` tokens (spelled as normalized) are cut out
    /// of that; each stretch left gets the prefix space, is split and merged. Offsets point into
    /// `text` through the normalizer's alignments, a token matched in normalized text spanning what
    /// its normalized bytes stand for.
    fn encode_normalizing_first(
        &self,
        text: &str,
        base: usize,
        allowed: &SpecialMatcher,
        later: &SpecialMatcher,
        out: &mut Vec<Rank>,
        mut offsets: Offsets<'_>,
    ) -> Result<(), SplitError> {
        let Some(byte_level) = self.byte_level() else {
            // (SentencePiece models get no such matcher; were one given, its later tokens are left out.)
            return self.encode_with_offsets(text, &SpecialMatcher::new([]), out, None);
        };
        let mut done = 0;
        for special in allowed.find_all(text) {
            let stretch = &text[done..special.start.max(done)];
            self.encode_stretch_normalizing_first(byte_level, stretch, base + done, later, out, &mut offsets)?;
            offsets.push(out, special.id, base + special.start, base + special.end, base + text.len());
            done = special.end;
        }
        self.encode_stretch_normalizing_first(byte_level, &text[done..], base + done, later, out, &mut offsets)
    }

    /// One stretch of [`Model::encode_normalizing_first`] between the tokens matched in the text as
    /// given (`base`: where it starts in the whole text).
    fn encode_stretch_normalizing_first(
        &self,
        byte_level: &ByteLevel,
        stretch: &str,
        base: usize,
        later: &SpecialMatcher,
        out: &mut Vec<Rank>,
        offsets: &mut Offsets<'_>,
    ) -> Result<(), SplitError> {
        if stretch.is_empty() {
            return Ok(());
        }
        ensure_working_room(stretch);
        let (before, after) = match &byte_level.added_normalizer {
            Some(added) => (Some(&added.before), added.after.as_ref()),
            None => (None, byte_level.normalizer.as_ref()),
        };
        let (normalized, align) = match (before, offsets.wanted()) {
            (Some(before), true) => {
                let (normalized, align) = before.normalize_with_alignments(stretch)?;
                (std::borrow::Cow::Owned(normalized), align)
            }
            (Some(before), false) => (std::borrow::Cow::Owned(before.normalize(stretch)?), Vec::new()),
            (None, wanted) => (std::borrow::Cow::Borrowed(stretch), if wanted { identity_alignments(stretch) } else { Vec::new() }),
        };
        let mut done = 0;
        for found in later.find_with_rules(&normalized, 0) {
            let start = found.start.max(done);
            self.encode_normalized_part(byte_level, &normalized[done..start], &align, done, base, after, out, offsets)?;
            let (from, to) = if align.is_empty() { (0, 0) } else { (align[found.start].0, align[found.end - 1].1) };
            offsets.push(out, found.id, base + from, base + to, base + stretch.len());
            done = found.end;
        }
        self.encode_normalized_part(byte_level, &normalized[done..], &align, done, base, after, out, offsets)
    }

    /// Splits and merges `part`, normalized text starting at byte `at` of a normalized stretch whose
    /// bytes stand for the ranges `align` holds (empty when no offsets are wanted) of the text that
    /// starts at `base`, after `after` (`ByteLevel`'s prefix space).
    #[allow(clippy::too_many_arguments)]
    fn encode_normalized_part(
        &self,
        byte_level: &ByteLevel,
        part: &str,
        align: &[(usize, usize)],
        at: usize,
        base: usize,
        after: Option<&Normalizer>,
        out: &mut Vec<Rank>,
        offsets: &mut Offsets<'_>,
    ) -> Result<(), SplitError> {
        if part.is_empty() {
            return Ok(());
        }
        if !offsets.wanted() {
            return match after {
                Some(after) => self.encode_split(byte_level, &after.normalize(part)?, 0, out, None, None),
                None => self.encode_split(byte_level, part, 0, out, None, None),
            };
        }
        let own = align[at..at + part.len()].to_vec();
        let (part, align) = match after {
            Some(after) => {
                let (spaced, align) = after.normalize_realigned(part, own)?;
                (std::borrow::Cow::Owned(spaced), align)
            }
            None => (std::borrow::Cow::Borrowed(part), own),
        };
        if let Some(affixed) = &byte_level.affixed {
            // Each token's symbols in `part`, or positions past its piece, which stay as they are
            // (see `PieceSpan::Raw`).
            let (mut placed, before) = (Vec::new(), out.len());
            Self::encode_split_affixed(byte_level, affixed, &part, out, Some(&mut placed))?;
            let ids: Vec<Rank> = out.drain(before..).collect();
            let past = align.last().map_or(0, |&(_, end)| end);
            for (id, span) in ids.into_iter().zip(placed) {
                let (from, to) = match span {
                    PieceSpan::Bytes(start, end) => match align.get(start) {
                        Some(&(from, _)) if end > start => (base + from, base + align[end - 1].1),
                        Some(&(from, _)) => (base + from, base + from),
                        None => (base + past, base + past),
                    },
                    PieceSpan::Raw(start, end) => (start, end),
                };
                offsets.push(out, id, from, to, base + past);
            }
            return Ok(());
        }
        let (mut starts, mut ends) = (Vec::new(), Vec::new());
        let before = out.len();
        self.encode_split(byte_level, &part, 0, out, Some(&mut starts), Some(&mut ends))?;
        let ids: Vec<Rank> = out.drain(before..).collect();
        let past = align.last().map_or(0, |&(_, end)| end);
        for ((id, start), end) in ids.into_iter().zip(starts).zip(ends) {
            let (from, to) = match align.get(start) {
                Some(&(from, _)) if end > start => (from, align[end - 1].1),
                Some(&(from, _)) => (from, from),
                None => (past, past),
            };
            offsets.push(out, id, base + from, base + to, base + past);
        }
        Ok(())
    }

    /// Splits (normalized) text and merges its pieces; offsets as for
    /// [`Model::encode_ordinary_with_offsets`], in `text`; `ends` gets where each token's bytes end
    /// (past its last byte).
    fn encode_split(
        &self,
        byte_level: &ByteLevel,
        text: &str,
        base: usize,
        out: &mut Vec<Rank>,
        mut starts: Option<&mut Vec<usize>>,
        mut ends: Option<&mut Vec<usize>>,
    ) -> Result<(), SplitError> {
        if let Some(affixed) = &byte_level.affixed {
            debug_assert!(starts.is_none() && ends.is_none(), "offsets come from encode_affixed_with_spans");
            return Self::encode_split_affixed(byte_level, affixed, text, out, None);
        }
        let ByteLevel { splitter, merges, whole_piece, empty_matches, dropped_bytes, .. } = byte_level;
        let bytes = text.as_bytes();
        let mut guard = self.cache.lock();
        let mut cache = guard.as_mut().map(CacheGuard::cache);
        if let (Some(scanner), None, None, None) = (splitter.scanner(), &starts, &ends, dropped_bytes) {
            // The common case on its own: ids only, from a scanner, every byte a token. (The general
            // loop below, with its offsets and added spaces, ran it 2-4% slower.)
            if let Some(cache) = cache.as_deref_mut() {
                if *whole_piece && cache.wants_table(bytes.len()) {
                    self.encode_scanned_with_table(scanner, merges, text, text.len(), cache, out);
                    return Ok(());
                }
            }
            scanner.for_each_piece(text, |start, end| {
                let piece = &bytes[start..end];
                memory::reserve(out, piece.len() + 1, "the ids", text.len(), "bytes of text");
                self.encode_piece(merges, *whole_piece, piece, cache.as_deref_mut(), out);
            });
            return Ok(());
        }
        let mut spaced = Vec::new();
        splitter.for_each_match(text, *empty_matches, |start, end, space| {
            let piece = piece_bytes(bytes, start, end, space, &mut spaced);
            // A piece gives at most one id per byte (an empty piece may be a token): room for them
            // is checked, so that a text too large for memory stops with `OutOfMemory`.
            memory::reserve(out, piece.len() + 1, "the ids", text.len(), "bytes of text");
            if let Some(starts) = starts.as_deref_mut() {
                memory::reserve(starts, piece.len() + 1, "the offsets", text.len(), "bytes of text");
            }
            let before = out.len();
            if let Some(ends) = ends.as_deref_mut() {
                memory::reserve(ends, piece.len() + 1, "the offsets", text.len(), "bytes of text");
            }
            if let Some(dropped) = dropped_bytes.as_deref().filter(|dropped| piece.iter().any(|&byte| dropped[byte as usize])) {
                let at = (base + start, space);
                if byte_level.dropped_after_merging {
                    self.encode_barriers(byte_level, piece, out, at, starts.as_deref_mut(), ends.as_deref_mut());
                } else {
                    self.encode_dropping(byte_level, piece, dropped, out, at, starts.as_deref_mut(), ends.as_deref_mut());
                }
                return;
            }
            self.encode_piece(merges, *whole_piece, piece, cache.as_deref_mut(), out);
            if let Some(starts) = starts.as_deref_mut() {
                let mut offset = 0;
                for &id in &out[before..] {
                    starts.push(text_offset(base + start, space, offset));
                    offset += self.tokens.get(id).map_or(0, <[u8]>::len);
                    if let Some(ends) = ends.as_deref_mut() {
                        ends.push(text_end(base + start, space, offset));
                    }
                }
            }
        })
    }

    /// [`Model::encode_ordinary_with_spans`] for a model whose symbols carry word affixes: a token
    /// within its piece's spelling spans the (original) characters of its bytes, as other tokens
    /// do; one past it (byte fallback spells affixes too) the positions `tokenizers` gives it, as
    /// they are.
    fn encode_affixed_with_spans(
        byte_level: &ByteLevel,
        affixed: &Affixed,
        text: &str,
        base: usize,
        out: &mut Vec<Rank>,
        spans: &mut Vec<(usize, usize)>,
    ) -> Result<(), SplitError> {
        let normalized = normalized_with_alignments(byte_level, text)?;
        let (split, align) = normalized.as_ref().map_or((text, None), |(normalized, align)| (normalized.as_str(), Some(&align[..])));
        let mut placed = Vec::new();
        Self::encode_split_affixed(byte_level, affixed, split, out, Some(&mut placed))?;
        memory::reserve(spans, placed.len(), "the offsets", text.len(), "bytes of text");
        spans.extend(placed.into_iter().map(|span| match span {
            PieceSpan::Bytes(start, end) => {
                let (from, to) = original_span(text, align, start, end);
                (base + from, base + to)
            }
            PieceSpan::Raw(start, end) => (start, end),
        }));
        Ok(())
    }

    /// [`Model::encode_split`]'s ids of the pieces `scanner` cuts from `text` that start before byte
    /// `stop` (as [`crate::scan::Scanner::for_each_piece_until`]; returns where the last of them
    /// ends), for a model whose pieces that are tokens encode as themselves: short pieces are asked
    /// a chunk at a time of the thread's table, which holds the tokens and the pieces merged before
    /// (see `crate::fused`); longer ones are asked of `cache` first ([`Model::encode_long_piece`]).
    fn encode_scanned_with_table(
        &self,
        scanner: crate::scan::Scanner,
        merges: &MergeTable,
        text: &str,
        stop: usize,
        cache: &mut PieceCache,
        out: &mut Vec<Rank>,
    ) -> usize {
        let bytes = text.as_bytes();
        let seed = self.seed.get_or_init(|| Arc::new(Seed::new(self.encoder.iter().map(|(token, &id)| (&token[..], id)))));
        let mut table = cache.take_table(seed);
        // Pieces longer than the table's are asked of the cache (and its store of long pieces) when
        // their chunk is encoded: their set and entry are fetched as they are packed.
        let sets = cache.prefetcher();
        let mut long = |piece: &[u8], out: &mut Vec<Rank>| self.encode_long_piece(merges, piece, cache, out);
        let merge = |piece: &[u8], out: &mut Vec<Rank>| merges.encode_piece(piece, out);
        let ended = scanner.for_each_piece_until(text, stop, |start, end| {
            if end - start > crate::short_tokens::SHORT {
                sets.prefetch(&bytes[start..end]);
            }
            table.pack(bytes, start, end);
            if table.full() {
                table.encode_chunk(bytes, out, &mut long, merge);
            }
        });
        table.encode_chunk(bytes, out, &mut long, merge);
        cache.put_table(table);
        ended
    }

    /// [`Model::encode_split`] for a model whose symbols carry word affixes; `spans` gets where each
    /// token stands ([`PieceSpan::Bytes`]: bytes of `text`).
    fn encode_split_affixed(
        byte_level: &ByteLevel,
        affixed: &Affixed,
        text: &str,
        out: &mut Vec<Rank>,
        mut spans: Option<&mut Vec<PieceSpan>>,
    ) -> Result<(), SplitError> {
        let bytes = text.as_bytes();
        let (mut spaced, mut piece_spans) = (Vec::new(), Vec::new());
        byte_level.splitter.for_each_match(text, false, |start, end, space| {
            let piece = piece_bytes(bytes, start, end, space, &mut spaced);
            let most = piece.len().saturating_mul(affixed.most_ids_per_byte());
            memory::reserve(out, most, "the ids", text.len(), "bytes of text");
            let Some(spans) = spans.as_deref_mut() else {
                return affixed.encode_piece(piece, out, None);
            };
            piece_spans.clear();
            affixed.encode_piece(piece, out, Some(&mut piece_spans));
            memory::reserve(spans, piece_spans.len(), "the offsets", text.len(), "bytes of text");
            spans.extend(piece_spans.iter().map(|&span| match span {
                PieceSpan::Bytes(first, end) => PieceSpan::Bytes(text_offset(start, space, first), text_end(start, space, end)),
                raw => raw,
            }));
        })
    }

    /// A piece holding bytes the vocabulary lacks, as `tokenizers` encodes it: the piece itself when
    /// it is a token (with `ignore_merges`), else the merge loop on its other bytes. `(start, space)`:
    /// where the piece starts in the text and whether it starts with an added space; `starts` and
    /// `ends` get where each token starts and ends in the text (see [`text_offset`], [`text_end`]).
    fn encode_dropping(
        &self,
        byte_level: &ByteLevel,
        piece: &[u8],
        dropped: &[bool; 256],
        out: &mut Vec<Rank>,
        (start, space): (usize, bool),
        starts: Option<&mut Vec<usize>>,
        mut ends: Option<&mut Vec<usize>>,
    ) {
        if let Some(id) = byte_level.ignore_merges.then(|| self.token_id(piece)).flatten() {
            out.push(id);
            if let Some(starts) = starts {
                starts.push(start);
            }
            if let Some(ends) = ends {
                ends.push(text_end(start, space, piece.len()));
            }
            return;
        }
        let bytes: Vec<u8> = piece.iter().copied().filter(|&byte| !dropped[byte as usize]).collect();
        let before = out.len();
        byte_level.merges.encode_piece(&bytes, out);
        if let Some(starts) = starts {
            // `tokenizers` places each symbol right after the symbols kept before it, in the piece's
            // byte-level spelling (one character per byte, of one or two UTF-8 bytes), as if the
            // dropped ones were not there; that position maps back to the byte spelled there (and
            // the token's last spelled byte to the byte its end is after).
            let spelled = |byte: u8| if (0x21..=0x7E).contains(&byte) { 1 } else { 2 };
            let mut spelled_starts = Vec::with_capacity(piece.len());
            let mut position = 0;
            for &byte in piece {
                spelled_starts.push(position);
                position += spelled(byte);
            }
            let byte_at = |position: usize| spelled_starts.partition_point(|&spelled_start| spelled_start <= position) - 1;
            let (mut at, mut kept) = (0, 0);
            for &id in &out[before..] {
                let first = kept;
                starts.push(text_offset(start, space, byte_at(kept)));
                for &byte in self.tokens.get(id).unwrap_or_default() {
                    kept += spelled(byte);
                    at += 1;
                }
                if let Some(ends) = ends.as_deref_mut() {
                    ends.push(if kept > first {
                        text_end(start, space, byte_at(kept - 1) + 1)
                    } else {
                        text_offset(start, space, byte_at(first))
                    });
                }
            }
            debug_assert_eq!(at, bytes.len());
        }
    }

    /// A piece holding bytes the vocabulary lacks, as llama.cpp encodes it: the piece itself when it
    /// is a token (with `ignore_merges`), else the merge loop on all its bytes, where a missing byte
    /// is a symbol no merge joins, which then gives no id. Each id starts where its bytes do
    /// (`(start, space)`, `starts` and `ends` as for [`Model::encode_dropping`]).
    fn encode_barriers(
        &self,
        byte_level: &ByteLevel,
        piece: &[u8],
        out: &mut Vec<Rank>,
        (start, space): (usize, bool),
        mut starts: Option<&mut Vec<usize>>,
        mut ends: Option<&mut Vec<usize>>,
    ) {
        if let Some(id) = byte_level.ignore_merges.then(|| self.token_id(piece)).flatten() {
            out.push(id);
            if let Some(starts) = starts {
                starts.push(start);
            }
            if let Some(ends) = ends {
                ends.push(text_end(start, space, piece.len()));
            }
            return;
        }
        let mut symbols = Vec::with_capacity(piece.len());
        byte_level.merges.encode_piece(piece, &mut symbols);
        let mut offset = 0;
        for id in symbols {
            if id == MISSING_BYTE {
                offset += 1;
                continue;
            }
            out.push(id);
            if let Some(starts) = starts.as_deref_mut() {
                starts.push(text_offset(start, space, offset));
            }
            offset += self.tokens.get(id).map_or(0, <[u8]>::len);
            if let Some(ends) = ends.as_deref_mut() {
                ends.push(text_end(start, space, offset));
            }
        }
        debug_assert_eq!(offset, piece.len());
    }

    /// Whether the single bytes the vocabulary lacks are dropped after merging (llama.cpp: each is a
    /// symbol no merge joins, then gives no id) rather than before (`tokenizers`, the default).
    pub fn set_dropped_after_merging(&mut self, after: bool) {
        if let Rule::ByteLevel(byte_level) = &mut self.rule {
            if byte_level.merge_list.is_some() {
                byte_level.dropped_after_merging = after;
                self.cache.clear();
            }
        }
    }

    /// Whether this merges-list model drops the bytes its vocabulary lacks after merging (see
    /// [`Model::set_dropped_after_merging`]).
    pub fn dropped_after_merging(&self) -> bool {
        self.byte_level().is_some_and(|byte_level| byte_level.dropped_after_merging)
    }

    /// Sets `tokenizers`' normalizer steps (none: no normalizer) of a byte-level model: each stretch
    /// of ordinary text is normalized before it is split; offsets stay in the original text.
    pub fn set_normalizer(&mut self, steps: Vec<NormalizeStep>) -> Result<(), BuildError> {
        let added_normalizer = AddedNormalizer::of(&steps).map_err(BuildError::Pattern)?;
        let normalizer = if steps.is_empty() { None } else { Some(Normalizer::new(steps).map_err(BuildError::Pattern)?) };
        match &mut self.rule {
            Rule::ByteLevel(byte_level) => (byte_level.normalizer, byte_level.added_normalizer) = (normalizer, added_normalizer),
            Rule::SentencePiece(_) if normalizer.is_none() => {}
            Rule::SentencePiece(_) => {
                return Err(BuildError::SentencePiece("a SentencePiece model has its own normalizer".into()))
            }
        }
        self.cache.clear();
        Ok(())
    }

    /// The normalizer steps of a byte-level model (empty: none).
    pub fn normalizer_steps(&self) -> &[NormalizeStep] {
        self.byte_level().and_then(|byte_level| byte_level.normalizer.as_ref()).map_or(&[], Normalizer::steps)
    }

    /// `text` as the model's normalizer leaves it (unchanged without one).
    pub fn normalize<'t>(&self, text: &'t str) -> Result<std::borrow::Cow<'t, str>, SplitError> {
        match self.byte_level().and_then(|byte_level| byte_level.normalizer.as_ref()) {
            Some(normalizer) => Ok(std::borrow::Cow::Owned(normalizer.normalize(text)?)),
            None => Ok(std::borrow::Cow::Borrowed(text)),
        }
    }

    /// `text` as `tokenizers` spells an added token with `normalized = true` (and matches it, see
    /// [`Model::added_token_matcher`]): normalized, where the normalizer changes text beyond
    /// `ByteLevel`'s prefix space (which it leaves out); else unchanged.
    pub fn normalize_added_token<'t>(&self, text: &'t str) -> Result<std::borrow::Cow<'t, str>, SplitError> {
        match self.byte_level().and_then(|byte_level| byte_level.added_normalizer.as_deref()) {
            Some(added) => Ok(std::borrow::Cow::Owned(added.before.normalize(text)?)),
            None => Ok(std::borrow::Cow::Borrowed(text)),
        }
    }

    /// The first byte of `bytes` the vocabulary lacks (merges-list models whose vocabulary lacks
    /// some single bytes): raw bytes holding it cannot be encoded.
    pub fn missing_byte_in(&self, bytes: &[u8]) -> Option<u8> {
        let byte_level = self.byte_level().filter(|byte_level| byte_level.any_missing)?;
        bytes.iter().copied().find(|&byte| byte_level.merges.byte_id(byte) == MISSING_BYTE)
    }

    /// The single bytes the vocabulary lacks (none for rank models, which need all 256).
    pub fn missing_bytes(&self) -> Vec<u8> {
        self.byte_level().map_or_else(Vec::new, |byte_level| {
            (0..=255u8).filter(|&byte| byte_level.merges.byte_id(byte) == MISSING_BYTE).collect()
        })
    }

    /// The ids of one piece of a byte-level model: the piece itself when it is a token (and the
    /// rule allows), else what the cache remembers, else the merge loop (remembered).
    #[inline(always)]
    fn encode_piece(
        &self,
        merges: &MergeTable,
        whole_piece: bool,
        piece: &[u8],
        cache: Option<&mut PieceCache>,
        out: &mut Vec<Rank>,
    ) {
        if let Some(id) = whole_piece.then(|| self.token_id(piece)).flatten() {
            return out.push(id);
        }
        let Some(cache) = cache else {
            return merges.encode_piece(piece, out);
        };
        if !cache.get_into(piece, out) {
            let before = out.len();
            merges.encode_piece(piece, out);
            cache.insert(piece, &out[before..]);
        }
    }

    /// [`Model::encode_piece`] of a piece longer than the thread's table holds, for a model whose
    /// pieces that are tokens encode as themselves: the cache first (its set was prefetched as the
    /// piece was packed; it holds such a piece's ids whether it is a token or was merged), the
    /// vocabulary only when the cache misses.
    fn encode_long_piece(&self, merges: &MergeTable, piece: &[u8], cache: &mut PieceCache, out: &mut Vec<Rank>) {
        if cache.get_into(piece, out) {
            return;
        }
        let before = out.len();
        match self.token_id(piece) {
            Some(id) => out.push(id),
            None => merges.encode_piece(piece, out),
        }
        cache.insert(piece, &out[before..]);
    }

    /// How many pieces at the end of a text more text can still change, when the split pattern
    /// bounds it (the named patterns: [`crate::scan::Scanner::UNSETTLED_PIECES`]); `None` for a
    /// custom pattern, which may look any distance ahead, and for SentencePiece models, which
    /// merge across the whole text.
    pub fn unsettled_pieces(&self) -> Option<usize> {
        let byte_level = self.byte_level()?;
        if byte_level.normalizer.is_some() || byte_level.dropped_bytes.is_some() || byte_level.affixed.is_some() {
            return None;
        }
        byte_level.splitter.unsettled_pieces()
    }

    /// For text that more ordinary text may follow: encodes the pieces at its start that no
    /// continuation can change (all but the last [`Model::unsettled_pieces`]) and returns where
    /// they end. `encode_ordinary(text + more)` is then those ids followed by
    /// `encode_ordinary(text[end..] + more)`. `None` when [`Model::unsettled_pieces`] is.
    pub fn encode_settled(&self, text: &str, out: &mut Vec<Rank>) -> Option<usize> {
        let unsettled = self.unsettled_pieces()?;
        let ByteLevel { splitter, merges, whole_piece, .. } = self.byte_level()?;
        let bytes = text.as_bytes();
        let mut held: std::collections::VecDeque<(usize, usize)> = std::collections::VecDeque::with_capacity(unsettled + 1);
        let mut guard = self.cache.lock();
        let mut cache = guard.as_mut().map(CacheGuard::cache);
        splitter
            .for_each_piece(text, |start, end, _| {
                held.push_back((start, end));
                if held.len() > unsettled {
                    let (start, end) = held.pop_front().expect("more than one piece held");
                    self.encode_piece(merges, *whole_piece, &bytes[start..end], cache.as_deref_mut(), out);
                }
            })
            .expect("the named patterns' scanners split any text");
        Some(held.front().map_or(text.len(), |&(start, _)| start))
    }

    /// Encodes the pieces of ordinary `text` that start before byte `stop`, as they are in all of
    /// `text`, and returns where the last of them ends: `stop` when a piece ends there. `None` when
    /// [`Model::unsettled_pieces`] is (only the scanners can stop early; see `crate::parallel`).
    pub(crate) fn encode_until(&self, text: &str, stop: usize, out: &mut Vec<Rank>) -> Option<usize> {
        self.unsettled_pieces()?;
        let ByteLevel { splitter, merges, whole_piece, .. } = self.byte_level()?;
        let scanner = splitter.scanner()?;
        let bytes = text.as_bytes();
        let mut guard = self.cache.lock();
        let mut cache = guard.as_mut().map(CacheGuard::cache);
        if let Some(cache) = cache.as_deref_mut() {
            if *whole_piece && cache.wants_table(stop) {
                crate::parallel::count_table_part();
                return Some(self.encode_scanned_with_table(scanner, merges, text, stop, cache, out));
            }
        }
        Some(scanner.for_each_piece_until(text, stop, |start, end| {
            memory::reserve(out, end - start, "the ids", text.len(), "bytes of text");
            self.encode_piece(merges, *whole_piece, &bytes[start..end], cache.as_deref_mut(), out);
        }))
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
        if let Some(later) = allowed.later_in_normalized() {
            let offsets = starts.map_or(Offsets::None, Offsets::Starts);
            return self.encode_normalizing_first(text, 0, allowed, later, out, offsets);
        }
        let mut done = 0;
        for special in allowed.find_all(text) {
            // A token stripping whitespace may reach past the next one's start (as in `tokenizers`,
            // which then gives both): no text between them.
            self.encode_ordinary_with_offsets(
                &text[done..special.start.max(done)],
                done,
                out,
                starts.as_deref_mut(),
            )?;
            memory::reserve(out, 1, "the ids", text.len(), "bytes of text");
            out.push(special.id);
            if let Some(starts) = starts.as_deref_mut() {
                memory::reserve(starts, 1, "the offsets", text.len(), "bytes of text");
                starts.push(special.start);
            }
            done = special.end;
        }
        self.encode_ordinary_with_offsets(&text[done..], done, out, starts)
    }

    /// The ids of `piece` merged as one piece, with no split pattern and no special tokens: the
    /// piece itself when `whole` and it is a token, else the merge loop on its bytes (any bytes,
    /// valid UTF-8 or not). `None` for SentencePiece models, which merge characters, not bytes.
    pub fn encode_single_piece(&self, piece: &[u8], whole: bool) -> Option<Vec<Rank>> {
        let ByteLevel { merges, .. } = self.byte_level().filter(|byte_level| byte_level.affixed.is_none())?;
        if self.missing_byte_in(piece).is_some() {
            return None;
        }
        let mut out = Vec::with_capacity(piece.len());
        match whole.then(|| self.token_id(piece)).flatten() {
            Some(id) => out.push(id),
            None => merges.encode_piece(piece, &mut out),
        }
        Some(out)
    }

    /// The bytes of one token (mergeable or special).
    #[inline]
    pub fn token_bytes(&self, id: Rank) -> Option<&[u8]> {
        self.tokens.get(id)
    }

    /// Empties the caches of merged pieces that no thread is using, freeing their memory; encoding
    /// fills them again. Results never depend on them.
    pub fn clear_cache(&self) {
        self.cache.clear();
    }

    /// The id of a mergeable token given its bytes.
    #[inline]
    pub fn token_id(&self, bytes: &[u8]) -> Option<Rank> {
        if bytes.len() <= SHORT {
            self.short.get(bytes)
        } else {
            self.long.get(bytes).copied()
        }
    }

    /// Appends the bytes of `ids` to `out`; on an unknown id, returns it.
    ///
    /// SentencePiece models decode as SentencePiece does: control pieces vanish, the unknown piece
    /// shows its surface, and the leading space of the dummy prefix is dropped.
    pub fn decode_bytes(&self, ids: &[Rank], out: &mut Vec<u8>) -> Result<(), Rank> {
        if let Rule::SentencePiece(model) = &self.rule {
            return model.decode(ids, out);
        }
        for &id in ids {
            let token = self.tokens.get(id).ok_or(id)?;
            memory::reserve(out, token.len(), "the decoded bytes", ids.len(), "ids");
            out.extend_from_slice(token);
        }
        Ok(())
    }

    /// Like [`Model::decode_bytes`] for ids that continue a sequence decoded earlier with the
    /// same `state`; the parts' bytes join to the bytes of the whole. (Only SentencePiece models
    /// need the state: their first piece loses its leading space.)
    pub fn decode_bytes_continuing(&self, ids: &[Rank], state: &mut DecodeState, out: &mut Vec<u8>) -> Result<(), Rank> {
        match &self.rule {
            Rule::SentencePiece(model) => model.decode_continuing(ids, state, out),
            Rule::ByteLevel(_) => self.decode_bytes(ids, out),
        }
    }

    /// Decodes ids to text: invalid UTF-8 becomes U+FFFD per maximal invalid sequence, or for
    /// SentencePiece models one U+FFFD per invalid byte, as SentencePiece does.
    pub fn decode_text(&self, ids: &[Rank]) -> Result<String, Rank> {
        let mut bytes = memory::with_capacity(ids.len().saturating_mul(4), "the decoded bytes", ids.len(), "ids");
        self.decode_bytes(ids, &mut bytes)?;
        Ok(match &self.rule {
            Rule::SentencePiece(_) => crate::char_merge::decode_utf8(&bytes),
            Rule::ByteLevel(_) => String::from_utf8_lossy(&bytes).into_owned(),
        })
    }

    // ------------------------------------------------------------------ comparing merge rules

    fn byte_level(&self) -> Option<&ByteLevel> {
        match &self.rule {
            Rule::ByteLevel(byte_level) => Some(byte_level),
            Rule::SentencePiece(_) => None,
        }
    }

    /// What the merge loop alone makes of one piece, with no split pattern and no whole-piece
    /// rule: for a byte-level model the ids `piece`'s bytes merge to; for a SentencePiece model
    /// `piece` is normalized text (spaces as `▁`, no dummy prefix added) whose characters merge by
    /// score, those left that are not pieces becoming byte pieces or `<unk>`
    /// ([`SentencePiece::merge_normalized`]). `None` when a SentencePiece model is given bytes that
    /// are not UTF-8.
    ///
    /// Whether a token can appear in any encoding follows from this loop (see `hf_bpe.audit`): a
    /// token formed inside a longer piece is formed the same way from its own bytes alone.
    pub fn merge_piece(&self, piece: &[u8], out: &mut Vec<Rank>) -> Option<()> {
        if self.missing_byte_in(piece).is_some() || self.affixed().is_some() {
            return None;
        }
        match &self.rule {
            Rule::ByteLevel(byte_level) => byte_level.merges.encode_piece(piece, out),
            Rule::SentencePiece(model) => model.merge_normalized(std::str::from_utf8(piece).ok()?, out),
        }
        Some(())
    }

    /// The ids of one piece as encoding a text whose split gives that piece makes them: for a
    /// byte-level model the piece itself when it is a token and the whole-piece rule applies, else
    /// the merge loop; for a SentencePiece model what [`Model::merge_piece`] makes of it. `None` as
    /// for [`Model::merge_piece`].
    pub fn encode_lone_piece(&self, piece: &[u8], out: &mut Vec<Rank>) -> Option<()> {
        if self.missing_byte_in(piece).is_some() || self.affixed().is_some() {
            return None;
        }
        match &self.rule {
            Rule::ByteLevel(byte_level) => {
                self.encode_piece(&byte_level.merges, byte_level.whole_piece, piece, None, out);
                Some(())
            }
            Rule::SentencePiece(_) => self.merge_piece(piece, out),
        }
    }

    /// The ids the merge loop alone makes of `bytes` (no whole-piece rule).
    fn merge_only(&self, bytes: &[u8]) -> Vec<Rank> {
        let mut parts = Vec::new();
        if let Some(byte_level) = self.byte_level() {
            byte_level.merges.encode_piece(bytes, &mut parts);
        }
        parts
    }

    /// The first multi-byte token (by id) whose bytes the merge loop does not turn back into it.
    /// (On the calling thread: callers reach it from Python outside any pool of ours, where rayon's
    /// global pool would be used, which a forked process cannot use.)
    fn first_not_self_merging(&self) -> Option<(Rank, Vec<Rank>)> {
        self.ranks().into_iter().filter(|(token, _)| token.len() > 1).find_map(|(token, id)| {
            let parts = self.merge_only(token);
            (parts != [id]).then_some((id, parts))
        })
    }

    fn bytes_of(&self, id: Rank) -> Vec<u8> {
        self.tokens.get(id).unwrap_or_default().to_vec()
    }

    /// The merges list of a byte-level model, as pairs of ids in priority order: the listed merges
    /// of a merges-list model; for a rank model, each multi-byte token's last merge: the two parts
    /// its own bytes merge to (if tiktoken ever forms the token by merging, no merge reaches outside
    /// its bytes first, so it joins exactly these). Tokens whose bytes do not reduce to two parts
    /// are reachable only as whole pieces and get none.
    pub fn merge_list(&self) -> Vec<(Rank, Rank)> {
        let Some(ByteLevel { merges, merge_list, .. }) = self.byte_level() else {
            return Vec::new();
        };
        if let Some(listed) = merge_list {
            return listed.clone();
        }
        self.ranks()
            .into_iter()
            .filter_map(|(token, _)| merges.last_merge(token).map(|(left, right, _)| (left, right)))
            .collect()
    }

    /// For a merges-list model: why tiktoken's rank rule, with this vocabulary's ids as ranks,
    /// would encode some text differently; `None` when it provably encodes everything the same.
    ///
    /// The rules agree when (1) no token is made by two merges, (2) merge order is id order, and
    /// (3) no token's bytes merge to exactly two parts (which the rank rule would join). Then in
    /// every state the merge loop reaches, any adjacent pair that spells a token is a listed merge
    /// (the loop restricted to that token's bytes passes through the pair, and by (3) goes on to
    /// merge it), so both rules see the same candidates in the same order. Without `ignore_merges`,
    /// (4) every token's bytes must also merge back into it, or the rank rule's whole-piece step
    /// differs. (5) An empty token needs a pattern that never matches the empty string, or the rank
    /// rule emits it where the merges list emits nothing. Rank models compare with themselves: `None`.
    pub fn rank_rule_difference(&self) -> Option<RuleDifference> {
        let ByteLevel { merge_list, ignore_merges, splitter, merges, affixed, .. } = self.byte_level()?;
        let (listed, ignore_merges) = (merge_list.as_deref()?, *ignore_merges);
        if affixed.is_some() {
            return Some(RuleDifference::WordAffixes);
        }
        if self.encoder.contains_key(&[][..]) && splitter.may_match_empty() {
            return Some(RuleDifference::EmptyMatches { pattern: splitter.pattern().unwrap_or_default().to_owned() });
        }
        let mut line_of_token: FxHashMap<Rank, usize> =
            FxHashMap::with_capacity_and_hasher(listed.len(), Default::default());
        let mut previous: Option<(usize, Rank)> = None;
        for (line, &(left, right)) in listed.iter().enumerate() {
            // Each listed pair is in the merge table, with the token it spells.
            let id = merges.get(left, right).expect("a listed merge is in the table").merged;
            if let Some(first_line) = line_of_token.insert(id, line) {
                let token = self.bytes_of(id);
                return Some(RuleDifference::TokenMergedTwice { token, first_line, second_line: line });
            }
            if let Some((earlier_line, earlier)) = previous {
                if earlier > id {
                    return Some(RuleDifference::OrderDiffers {
                        earlier_line,
                        earlier: self.bytes_of(earlier),
                        later_line: line,
                        later: self.bytes_of(id),
                    });
                }
            }
            previous = Some((line, id));
        }
        drop(line_of_token);
        // The first token (by id) that differs: on the current pool's threads when called on one,
        // else on the calling thread (as first_not_self_merging).
        let differs = |&(token, id): &(&[u8], Rank)| {
            let parts = self.merge_only(token);
            match parts[..] {
                [only] if only == id => None,
                [left, right] => Some(RuleDifference::UnlistedPair {
                    token: token.to_vec(),
                    left: self.bytes_of(left),
                    right: self.bytes_of(right),
                }),
                _ if ignore_merges => None,
                _ => Some(RuleDifference::NotSelfMerging {
                    token: token.to_vec(),
                    parts: parts.iter().map(|&part| self.bytes_of(part)).collect(),
                }),
            }
        };
        let tokens: Vec<(&[u8], Rank)> = self.ranks().into_iter().filter(|(token, _)| token.len() >= 2).collect();
        if rayon::current_thread_index().is_some() {
            tokens.par_iter().with_min_len(1024).find_map_first(differs)
        } else {
            tokens.iter().find_map(differs)
        }
    }

    /// Turns this merges-list model into the rank model it equals, when
    /// [`Model::rank_rule_difference`] finds no difference and the vocabulary has every byte;
    /// returns whether it did. The merge table stays: by that proof the listed merges meet the same
    /// candidates in the same order as tiktoken's rule, and their priorities (line numbers) are in
    /// id order. Much cheaper than building the rank model from its tokens again
    /// ([`Model::from_ranks`] looks up every split of every token).
    pub fn make_rank_rule(&mut self) -> bool {
        let convertible = match self.byte_level() {
            Some(ByteLevel { merge_list: Some(_), any_missing: false, .. }) => self.rank_rule_difference().is_none(),
            _ => false,
        };
        if let (true, Rule::ByteLevel(byte_level)) = (convertible, &mut self.rule) {
            byte_level.merge_list = None;
            byte_level.whole_piece = true;
            byte_level.ignore_merges = true;
            byte_level.dropped_bytes = None;
            byte_level.dropped_after_merging = false;
            byte_level.empty_matches = false; // rank_rule_difference refuses an empty token the pattern may match
            self.cache = ShardedCache::new();
        }
        convertible
    }

    /// Why a merges list (this model's [`Model::merge_list`]) with or without `ignore_merges`
    /// would encode some text differently from this model; `None` when it provably does not.
    pub fn merge_rule_difference(&self, ignore_merges: bool) -> Option<RuleDifference> {
        match self.kind() {
            Kind::SentencePiece => None,
            Kind::Merges { ignore_merges: own } => {
                if own == ignore_merges {
                    return None;
                }
                if self.affixed().is_some() {
                    return Some(RuleDifference::WordAffixes);
                }
                let (id, parts) = self.first_not_self_merging()?;
                Some(RuleDifference::NotSelfMerging {
                    token: self.bytes_of(id),
                    parts: parts.iter().map(|&part| self.bytes_of(part)).collect(),
                })
            }
            Kind::Ranks => {
                let vocab: Vec<(Vec<u8>, Rank)> =
                    self.ranks().into_iter().map(|(token, id)| (token.to_vec(), id)).collect();
                let split = self.split_rule().expect("a rank model splits by a rule");
                let listed = Model::from_merges(vocab, self.merge_list(), split, Vec::new(), ignore_merges)
                    .expect("a rank model's own merges form a valid merges list");
                listed.rank_rule_difference()
            }
        }
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
    fn normalized_added_tokens_are_looked_for_in_normalized_text() {
        use crate::special::{LATER, LSTRIP};
        // Lowercase, then ByteLevel's prefix space on each stretch the added tokens leave.
        let mut model = small_model();
        model.set_normalizer(vec![NormalizeStep::Lowercase, NormalizeStep::PrefixSpace]).unwrap();
        let matcher = model.added_token_matcher([("HeLLo", 400, LATER | LSTRIP), ("<E>", 401, 0)]).unwrap();
        assert!(matcher.later_in_normalized().is_some());
        let text = "A  HELLO<E>hello";
        let (mut ids, mut starts, mut spans) = (Vec::new(), Vec::new(), Vec::new());
        model.encode_with_offsets(text, &matcher, &mut ids, Some(&mut starts)).unwrap();
        // " a" before the token (its lstrip takes the spaces), "<E>" cut out of the raw text first.
        assert_eq!(ids, [32, 97, 400, 401, 400]);
        assert_eq!(starts, [0, 0, 1, 8, 11]);
        let mut again = Vec::new();
        model.encode_with_spans(text, &matcher, &mut again, &mut spans).unwrap();
        assert_eq!(again, ids);
        assert_eq!(spans, [(0, 1), (0, 1), (1, 8), (8, 11), (11, 16)]);
        // Without a normalizer changing text the tokens are matched as written, between the others.
        let plain = small_model().added_token_matcher([("HeLLo", 400, LATER), ("<E>", 401, 0)]).unwrap();
        assert!(plain.later_in_normalized().is_none());
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
    fn single_piece_of_any_bytes() {
        let model = small_model();
        // Whole: "hello" is a token; not whole: the merge loop gives the same here.
        assert_eq!(model.encode_single_piece(b"hello", true), Some(vec![259]));
        assert_eq!(model.encode_single_piece(b"hello", false), Some(vec![259]));
        // Spaces and invalid UTF-8 are merged as bytes, with no split pattern.
        assert_eq!(
            model.encode_single_piece(b"he \xff", true),
            Some(vec![256, Rank::from(b' '), 0xff])
        );
        assert_eq!(model.encode_single_piece(b"", true), Some(vec![]));
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

    /// Bytes, then the given tokens with ids from 256 on.
    fn vocab_with(tokens: &[&[u8]]) -> Vec<(Vec<u8>, Rank)> {
        let mut vocab = byte_ranks();
        for (offset, token) in tokens.iter().enumerate() {
            vocab.push((token.to_vec(), 256 + offset as Rank));
        }
        vocab
    }

    fn ids(model: &Model, text: &str) -> Vec<Rank> {
        let mut out = Vec::new();
        model.encode_ordinary(text, &mut out).unwrap();
        out
    }

    #[test]
    fn merges_lists_merge_only_listed_pairs() {
        // "bc" is a token but no merge makes it; "abc" is made as ab + c.
        let vocab = vocab_with(&[b"ab", b"bc", b"abc"]);
        let merges = vec![(b'a' as Rank, b'b' as Rank), (256, b'c' as Rank)];
        let strict = Model::from_merges(vocab.clone(), merges.clone(), r"\S+|\s+", vec![], false).unwrap();
        assert_eq!(strict.kind(), Kind::Merges { ignore_merges: false });
        assert_eq!(ids(&strict, "abc bc"), vec![258, b' ' as Rank, b'b' as Rank, b'c' as Rank]);
        let whole = Model::from_merges(vocab, merges, r"\S+|\s+", vec![], true).unwrap();
        assert_eq!(ids(&whole, "abc bc"), vec![258, b' ' as Rank, 257]);
        assert!(matches!(
            strict.merge_rule_difference(true),
            Some(RuleDifference::NotSelfMerging { .. })
        ));
        assert_eq!(whole.merge_list(), vec![(b'a' as Rank, b'b' as Rank), (256, b'c' as Rank)]);
    }

    #[test]
    fn bad_merges_are_rejected() {
        let vocab = vocab_with(&[b"ab"]);
        assert_eq!(
            Model::from_merges(vocab.clone(), vec![(b'a' as Rank, 999)], GPT2, vec![], false).unwrap_err(),
            BuildError::UnknownMergeId { line: 0, id: 999 }
        );
        assert!(matches!(
            Model::from_merges(vocab, vec![(b'x' as Rank, b'y' as Rank)], GPT2, vec![], false),
            Err(BuildError::MergeMakesUnknownToken { line: 0, .. })
        ));
    }

    #[test]
    fn rank_rule_differs_when_it_would_join_an_unlisted_pair() {
        let vocab = vocab_with(&[b"bc", b"pq", b"pqb", b"pqbc"]);
        let (b, c, p, q) = (b'b' as Rank, b'c' as Rank, b'p' as Rank, b'q' as Rank);
        let merges = vec![(b, c), (p, q), (257, b), (258, c)];
        let model = Model::from_merges(vocab.clone(), merges, GPT2, vec![], true).unwrap();
        // The merges make pq + bc of "pqbc"; tiktoken's rule joins them.
        assert_eq!(ids(&model, "xpqbc"), vec![b'x' as Rank, 257, 256]);
        let ranks = Model::from_ranks(vocab, GPT2, vec![]).unwrap();
        assert_eq!(ids(&ranks, "xpqbc"), vec![b'x' as Rank, 259]);
        assert!(matches!(model.rank_rule_difference(), Some(RuleDifference::UnlistedPair { .. })));
    }

    #[test]
    fn the_merge_loop_alone_ignores_the_pattern_and_the_whole_piece_rule() {
        // No split of "abcd" is two tokens: a piece "abcd" is emitted whole, its bytes merge to ab + c + d.
        let mut ranks = byte_ranks();
        ranks.push((b"ab".to_vec(), 300));
        ranks.push((b"abcd".to_vec(), 301));
        let model = Model::from_ranks(ranks, GPT2, vec![]).unwrap();
        let merged = |piece: &[u8]| {
            let mut out = Vec::new();
            model.merge_piece(piece, &mut out).unwrap();
            out
        };
        assert_eq!(ids(&model, "abcd"), vec![301]);
        assert_eq!(merged(b"abcd"), vec![300, b'c' as Rank, b'd' as Rank]);
        // No split pattern: the space stays inside, and bytes that are not UTF-8 merge too.
        assert_eq!(merged(b"ab ab\xff"), vec![300, b' ' as Rank, 300, 0xff]);
    }

    #[test]
    fn a_lone_piece_follows_the_whole_piece_rule() {
        let mut ranks = byte_ranks();
        ranks.push((b"ab".to_vec(), 300));
        ranks.push((b"abcd".to_vec(), 301));
        let model = Model::from_ranks(ranks, GPT2, vec![]).unwrap();
        let lone = |piece: &[u8]| {
            let mut out = Vec::new();
            model.encode_lone_piece(piece, &mut out).unwrap();
            out
        };
        assert_eq!(lone(b"abcd"), ids(&model, "abcd"));
        assert_eq!(lone(b"abc"), vec![300, b'c' as Rank]);
    }

    #[test]
    fn the_table_of_short_pieces_gives_the_ids_of_the_per_piece_path() {
        // Past `FUSED_AFTER` bytes a thread encodes through its table of short pieces (tokens and
        // pieces merged before, `crate::fused`); the path with offsets never does. Pieces short and
        // long (past the table's 15 bytes), tokens, merged, seen again, in chunks and across them.
        let model = small_model();
        let mut random = crate::test_rng::numbers(0x7AB1E);
        let words = ["hello", "hell", "he", "llo", "oh", "hellohello", "héllo", "a", "  ", "\n", "17", "ll!", "hellohellohellohello", "xyzzyxyzzyxyzzy"];
        let mut text = String::new();
        while text.len() < 3 * crate::tuning::FUSED_AFTER {
            text.push_str(words[random() as usize % words.len()]);
            if random() % 3 == 0 {
                text.push(' ');
            }
        }
        let mut reference = Vec::new();
        model.encode_ordinary_with_offsets(&text, 0, &mut reference, Some(&mut Vec::new())).unwrap();
        for _ in 0..2 {
            assert_eq!(ids(&model, &text), reference);
        }
        for part in text.as_bytes().chunks(1000).map(|part| String::from_utf8_lossy(part).into_owned()) {
            let mut expected = Vec::new();
            model.encode_ordinary_with_offsets(&part, 0, &mut expected, Some(&mut Vec::new())).unwrap();
            assert_eq!(ids(&model, &part), expected);
        }
    }

    #[test]
    fn long_pieces_that_are_tokens_stay_whole_when_the_cache_answers_them() {
        // Tokens past the table's 15 bytes that no merge reaches: the first meeting finds them in
        // the vocabulary, later ones in the cache; pieces a byte longer or shorter are no tokens and
        // merge to their bytes.
        let mut ranks = byte_ranks();
        ranks.push((b" xyzzyxyzzyxyzzy".to_vec(), 256));
        ranks.push((b" abcdefghijklmnopqrstuvwxyzabcdefghi".to_vec(), 257));
        let model = Model::from_ranks(ranks, GPT2, vec![]).unwrap();
        let rounds = 3 * crate::tuning::FUSED_AFTER / 30;
        let mut text = String::new();
        for round in 0..rounds {
            // Pieces of a space and a word: the 16-byte token, the 36-byte one, then each one byte
            // longer or shorter (no token).
            text.push(' ');
            text.push_str(["xyzzyxyzzyxyzzy", "abcdefghijklmnopqrstuvwxyzabcdefghi", "xyzzyxyzzyxyzzyx", "abcdefghijklmnopqrstuvwxyzabcdefgh"][round % 4]);
        }
        let mut reference = Vec::new();
        model.encode_ordinary_with_offsets(&text, 0, &mut reference, Some(&mut Vec::new())).unwrap();
        assert_eq!(reference.iter().filter(|&&id| id == 256).count(), rounds.div_ceil(4));
        assert_eq!(reference.iter().filter(|&&id| id == 257).count(), (rounds + 2) / 4);
        for _ in 0..3 {
            assert_eq!(ids(&model, &text), reference);
        }
    }

    #[test]
    fn rank_models_and_their_recovered_merges_agree() {
        let model = small_model();
        assert_eq!(model.merge_list(), vec![(b'h' as Rank, b'e' as Rank), (b'l' as Rank, b'l' as Rank), (256, 257), (258, b'o' as Rank)]);
        assert_eq!(model.merge_rule_difference(true), None);
        assert_eq!(model.merge_rule_difference(false), None);
        let listed: Vec<(Vec<u8>, Rank)> = model.ranks().into_iter().map(|(t, r)| (t.to_vec(), r)).collect();
        let merges = Model::from_merges(listed, model.merge_list(), GPT2, vec![], false).unwrap();
        assert_eq!(merges.rank_rule_difference(), None);
        assert_eq!(ids(&merges, "hello hell"), ids(&model, "hello hell"));
    }

    #[test]
    fn long_tokens_load_in_linear_time_and_merge_like_short_ones() {
        // A chain a, aa, ..., a*200 (some past LONG_TOKEN) and one token of a megabyte: every
        // prefix looked up took minutes for the megabyte token.
        let ranks_with = |long: usize| {
            let mut ranks = byte_ranks();
            for length in 2..=200 {
                ranks.push((vec![b'a'; length], 254 + length as Rank));
            }
            ranks.push((vec![b'z'; long], 1000));
            ranks
        };
        // Linear: 8 times the long token costs at most 16 times as much to build (a ratio, not a
        // duration: the machine may be slow; quadratic is 64 times; best of 3 each).
        let build_seconds = |long: usize| {
            (0..3)
                .map(|_| {
                    let ranks = ranks_with(long);
                    let started = std::time::Instant::now();
                    Model::from_ranks(ranks, r"\S+|\s+", vec![]).unwrap();
                    started.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min)
        };
        let (small, large) = (build_seconds(1 << 17), build_seconds(1 << 20));
        assert!(large <= 16.0 * small, "{small:.4} s, then {large:.4} s for 8 times the token");
        let model = Model::from_ranks(ranks_with(1 << 20), r"\S+|\s+", vec![]).unwrap();
        // The rank rule, naively: merge the adjacent pair whose bytes have the lowest rank.
        let rank_of = |bytes: &[u8]| model.token_id(bytes);
        let naive = |text: &[u8]| -> Vec<Rank> {
            let mut parts: Vec<Vec<u8>> = text.iter().map(|&byte| vec![byte]).collect();
            while let Some((_, at)) = (0..parts.len().saturating_sub(1))
                .filter_map(|at| rank_of(&[&parts[at][..], &parts[at + 1][..]].concat()).map(|rank| (rank, at)))
                .min()
            {
                let right = parts.remove(at + 1);
                parts[at].extend(right);
            }
            parts.iter().map(|part| rank_of(part).unwrap()).collect()
        };
        for length in [130, 199, 201, 450] {
            let text = "a".repeat(length);
            let mut ids = Vec::new();
            model.encode_ordinary(&text, &mut ids).unwrap();
            let expected = if length <= 200 { vec![254 + length as Rank] } else { naive(text.as_bytes()) };
            assert_eq!(ids, expected, "{length}");
            assert_eq!(model.merge_only(text.as_bytes()), naive(text.as_bytes()), "{length}");
        }
    }

    #[test]
    fn recovered_merges_may_join_parts_ranked_after_the_token() {
        // "abc" ranks before its part "ab": its bytes still merge to ab + c.
        let mut ranks = byte_ranks();
        ranks.push((b"abc".to_vec(), 300));
        ranks.push((b"ab".to_vec(), 400));
        let model = Model::from_ranks(ranks, GPT2, vec![]).unwrap();
        assert_eq!(model.merge_list(), vec![(400, b'c' as Rank), (b'a' as Rank, b'b' as Rank)]);
        assert_eq!(model.merge_rule_difference(false), None);
        assert_eq!(ids(&model, "abc ab"), vec![300, b' ' as Rank, 400]);
    }

    /// tiktoken's merge loop, as it is written: parts are spans of the piece, and two neighbours
    /// merge when their bytes together are a token, the lowest rank first, the leftmost on ties.
    fn tiktoken_merge(ranks: &FxHashMap<Vec<u8>, Rank>, piece: &[u8]) -> Vec<Rank> {
        let mut bounds: Vec<usize> = (0..=piece.len()).collect();
        loop {
            let best = (0..bounds.len().saturating_sub(2))
                .filter_map(|at| ranks.get(&piece[bounds[at]..bounds[at + 2]]).map(|&rank| (rank, at)))
                .min();
            let Some((_, at)) = best else { break };
            bounds.remove(at + 1);
        }
        bounds.windows(2).map(|span| ranks[&piece[span[0]..span[1]]]).collect()
    }

    #[test]
    fn keeping_only_last_merges_merges_like_tiktoken() {
        // Vocabularies grown by joining two tokens at random (tie-heavy: three letters and a
        // two-byte character), ranked in the order they were made or shuffled, so that a token may
        // rank before its parts and many tokens have several splits into two tokens.
        let mut random = crate::test_rng::numbers(0x9E37_79B9_7F4A_7C15u64);
        let mut next = move || random() as usize;
        let alphabet: Vec<Vec<u8>> = vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), "\u{e9}".as_bytes().to_vec()];
        let (mut several_splits, mut compared) = (0, 0);
        for round in 0..40 {
            let mut tokens: Vec<Vec<u8>> = alphabet.clone();
            while tokens.len() < 4 + 60 + round * 4 {
                let joined = [&tokens[next() % tokens.len()][..], &tokens[next() % tokens.len()][..]].concat();
                if joined.len() <= 12 && !tokens.contains(&joined) {
                    tokens.push(joined);
                }
            }
            let mut ids: Vec<Rank> = (256..256 + tokens.len() as Rank).collect();
            if round % 2 == 1 {
                for at in (1..ids.len()).rev() {
                    ids.swap(at, next() % (at + 1));
                }
            }
            let mut ranks = byte_ranks();
            ranks.retain(|(token, _)| !tokens.contains(token));
            ranks.extend(tokens.iter().cloned().zip(ids));
            let by_bytes: FxHashMap<Vec<u8>, Rank> = ranks.iter().cloned().collect();
            several_splits += tokens
                .iter()
                .filter(|token| (1..token.len()).filter(|&at| by_bytes.contains_key(&token[..at]) && by_bytes.contains_key(&token[at..])).count() > 1)
                .count();
            let model = Model::from_ranks(ranks, GPT2, vec![]).unwrap();
            for _ in 0..300 {
                let piece: Vec<u8> = (0..next() % 40).flat_map(|_| alphabet[next() % alphabet.len()].clone()).collect();
                let mut ours = Vec::new();
                model.merge_piece(&piece, &mut ours).unwrap();
                assert_eq!(ours, tiktoken_merge(&by_bytes, &piece), "round {round}, piece {:?}", String::from_utf8_lossy(&piece));
                compared += 1;
            }
        }
        assert!(several_splits > 1000, "only {several_splits} tokens have several splits");
        assert_eq!(compared, 40 * 300);
    }

    /// Bytes, "ab" and the empty token (as in Whisper's `multilingual.tiktoken`).
    fn ranks_with_empty_token() -> Vec<(Vec<u8>, Rank)> {
        let mut ranks = byte_ranks();
        ranks.push((b"ab".to_vec(), 256));
        ranks.push((Vec::new(), 257));
        ranks
    }

    #[test]
    fn the_empty_token_decodes_to_nothing_and_named_patterns_never_emit_it() {
        let model = Model::from_ranks(ranks_with_empty_token(), GPT2, vec![("<|end|>".into(), 258)]).unwrap();
        assert_eq!(model.token_id(b""), Some(257));
        assert_eq!(model.token_bytes(257), Some(&b""[..]));
        assert_eq!((model.n_vocab(), model.n_mergeable()), (259, 258));
        assert_eq!(model.sorted_token_bytes()[0], b"");
        let mut decoded = Vec::new();
        model.decode_bytes(&[97, 257, 256, 257], &mut decoded).unwrap();
        assert_eq!(decoded, b"aab");
        let mut ids = Vec::new();
        model.encode("ab  a\n\n<|end|>", &model.special_matcher(["<|end|>"]), &mut ids).unwrap();
        assert!(!ids.contains(&257), "{ids:?}");
        // No merge makes or joins it: the merges recovered for other formats leave it out.
        assert_eq!(model.merge_list(), vec![(97, 98)]);
        assert_eq!(model.merge_rule_difference(true), None);
    }

    #[test]
    fn empty_matches_become_the_empty_token_as_in_tiktoken() {
        // tiktoken looks every match of fancy-regex's find_iter up whole, an empty one included.
        let pattern = r"a*";
        let model = Model::from_ranks(ranks_with_empty_token(), pattern, vec![]).unwrap();
        for text in ["bab", "", "aab", "b", "ééa"] {
            let expected: Vec<Rank> = fancy_regex::Regex::new(pattern)
                .unwrap()
                .find_iter(text)
                .flat_map(|found| {
                    let piece = found.unwrap().as_str().as_bytes();
                    model.token_id(piece).map_or_else(|| model.merge_only(piece), |id| vec![id])
                })
                .collect();
            let mut ids = Vec::new();
            model.encode_ordinary(text, &mut ids).unwrap();
            assert_eq!(ids, expected, "{text:?}");
        }
        // Without an empty token, empty matches give nothing (tiktoken panics on them).
        let plain = Model::from_ranks(byte_ranks(), pattern, vec![]).unwrap();
        let mut ids = Vec::new();
        plain.encode_ordinary("bab", &mut ids).unwrap();
        assert_eq!(ids, vec![97]);
    }

    #[test]
    fn merges_lists_keep_the_empty_token_but_never_apply_a_merge_with_it() {
        let vocab = ranks_with_empty_token();
        let model = Model::from_merges(vocab.clone(), vec![(257, 97), (97, 98)], GPT2, vec![], false).unwrap();
        assert_eq!(model.merge_list(), vec![(97, 98)]);
        assert_eq!(ids(&model, "ab a"), vec![256, 32, 97]);
        assert_eq!(model.rank_rule_difference(), None);
        // With a pattern that may match the empty string, the rank rule would emit the empty token.
        let nullable = Model::from_merges(vocab, vec![(97, 98)], r"b|a*", vec![], true).unwrap();
        assert!(matches!(nullable.rank_rule_difference(), Some(RuleDifference::EmptyMatches { .. })));
        assert_eq!(ids(&nullable, "bab"), vec![98, 97, 98]);
    }

    /// llama.cpp's rule for bytes the vocabulary lacks, written plainly: each byte of a piece is a
    /// symbol, the listed pair of adjacent symbols with the lowest line merges (leftmost first) until
    /// none does, then each symbol gives its token, a missing byte nothing. With `ignore_merges` a
    /// piece that is a token is that token.
    fn reference_after_merging(
        vocab: &[(Vec<u8>, Rank)],
        merges: &[(&[u8], &[u8])],
        ignore_merges: bool,
        piece: &[u8],
    ) -> Vec<(Rank, usize)> {
        let id_of = |bytes: &[u8]| vocab.iter().find(|(token, _)| token[..] == *bytes).map(|&(_, id)| id);
        if let Some(id) = ignore_merges.then(|| id_of(piece)).flatten() {
            return vec![(id, 0)];
        }
        let mut symbols: Vec<(Vec<u8>, usize)> = piece.iter().enumerate().map(|(at, &byte)| (vec![byte], at)).collect();
        loop {
            let best = (0..symbols.len().saturating_sub(1))
                .filter_map(|at| {
                    let line = merges.iter().position(|&(left, right)| {
                        left == &symbols[at].0[..] && right == &symbols[at + 1].0[..]
                    })?;
                    Some((line, at))
                })
                .min();
            let Some((_, at)) = best else { break };
            let (right, _) = symbols.remove(at + 1);
            symbols[at].0.extend(right);
        }
        symbols.iter().filter_map(|(bytes, start)| Some((id_of(bytes)?, *start))).collect()
    }

    #[test]
    fn missing_bytes_dropped_after_merging_are_barriers_as_in_a_plain_loop() {
        // No token for 'c' nor for 0xF1 (the lead byte of U+40000..U+7FFFF); "xc" is a token merging
        // never makes (the whole-piece rule takes it).
        let mut vocab: Vec<(Vec<u8>, Rank)> =
            (0..=255u8).filter(|&byte| byte != b'c' && byte != 0xF1).map(|byte| (vec![byte], Rank::from(byte))).collect();
        let extra: [&[u8]; 6] = [b"ab", b"ba", b"aba", b"\x80\x80", b" a", b"xc"];
        for (offset, token) in extra.iter().enumerate() {
            vocab.push((token.to_vec(), 256 + offset as Rank));
        }
        let merges: [(&[u8], &[u8]); 5] =
            [(b"a", b"b"), (b"b", b"a"), (b"ab", b"a"), (b"\x80", b"\x80"), (b" ", b"a")];
        let id_of = |bytes: &[u8]| vocab.iter().find(|(token, _)| token[..] == *bytes).unwrap().1;
        let merge_ids: Vec<(Rank, Rank)> = merges.iter().map(|&(left, right)| (id_of(left), id_of(right))).collect();
        let alphabet = ["a", "b", "c", "x", " ", "\u{40000}", "\u{40080}", "ab", "\u{80}"];
        let mut next = crate::test_rng::numbers(0x5eed);
        for ignore_merges in [false, true] {
            let mut model = Model::from_merges(vocab.clone(), merge_ids.clone(), GPT2, vec![], ignore_merges).unwrap();
            model.set_dropped_after_merging(true);
            assert!(model.dropped_after_merging());
            for round in 0..400 {
                // Long texts too, whose pieces take the merge loop for long pieces.
                let length = if round % 10 == 0 { 120 } else { (next() % 12) as usize };
                let text: String =
                    (0..length).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
                let mut expected = Vec::new();
                for piece in model.byte_level().unwrap().splitter.pieces(&text).unwrap() {
                    let start = piece.as_ptr() as usize - text.as_ptr() as usize;
                    for (id, at) in reference_after_merging(&vocab, &merges, ignore_merges, piece.as_bytes()) {
                        expected.push((id, start + at));
                    }
                }
                let (mut ids, mut starts) = (Vec::new(), Vec::new());
                model.encode_ordinary_with_offsets(&text, 0, &mut ids, Some(&mut starts)).unwrap();
                let got: Vec<(Rank, usize)> = ids.into_iter().zip(starts).collect();
                assert_eq!(got, expected, "{text:?} (ignore_merges {ignore_merges})");
            }
        }
        // Dropped before merging instead (tokenizers), "aca" merges as "aa" would; after, 'c' parts them.
        let before = Model::from_merges(vocab.clone(), merge_ids.clone(), GPT2, vec![], false).unwrap();
        let mut after = before.clone();
        after.set_dropped_after_merging(true);
        let (mut before_ids, mut after_ids) = (Vec::new(), Vec::new());
        before.encode_ordinary("abcab", &mut before_ids).unwrap();
        after.encode_ordinary("abcab", &mut after_ids).unwrap();
        assert_eq!((before_ids, after_ids), (vec![id_of(b"ab"), id_of(b"ab")], vec![id_of(b"ab"), id_of(b"ab")]));
        let (mut before_ids, mut after_ids) = (Vec::new(), Vec::new());
        before.encode_ordinary("abca", &mut before_ids).unwrap();
        after.encode_ordinary("abca", &mut after_ids).unwrap();
        assert_eq!((before_ids, after_ids), (vec![id_of(b"aba")], vec![id_of(b"ab"), Rank::from(b'a')]));
    }
}
