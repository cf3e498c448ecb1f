//! hf_bpe core: a byte-level BPE engine with tiktoken's semantics.
//!
//! Stages, each in its own module: `normalize` (SentencePiece's normalizer), `pretokenize` (split
//! pattern, or `onig_split`: `tokenizers`' Split pre-tokenizers on Oniguruma; `byte_level_split`: with `ByteLevel` among them), `merge` (byte-pair merging of one piece; its pair table in `pairs`), `special` (special-token matching),
//! `char_merge` (SentencePiece's BPE: merging from characters, on the same merge loop), `model` (the model: vocabulary,
//! encode, decode), `stream` (encoding text that arrives in parts), `parallel` (one long text on several threads), `tokenizer_json` (reading a `tokenizer.json`'s vocabulary and merges); `tuning` holds every tuning constant,
//! each with what it trades.
//! Nothing here knows about Python; the bindings live in the `hf_bpe_python` crate.

pub mod affix;
pub mod byte_level;
pub mod byte_level_split;
pub mod cache;
pub mod char_merge;
pub mod cpu_time;
pub mod fused;
pub mod halves;
pub mod hf_normalize;
pub mod huge;
pub mod long_pieces;
pub mod memory;
pub mod merge;
pub mod model;
pub mod normalize;
pub mod onig_split;
pub mod parallel;
pub mod pairs;
pub mod pretokenize;
pub mod recognize;
pub mod scan;
pub mod short_tokens;
pub mod special;
pub mod stream;
#[cfg(test)]
mod test_rng;
pub mod tokenizer_json;
pub mod train;
pub mod tuning;

pub use memory::OutOfMemory;
pub use model::{BuildError, Kind, Model, RuleDifference};
pub use pretokenize::{Behavior, ByteLevelSteps, SplitError, SplitRule, SplitStep, Splitter};
pub use special::SpecialMatcher;
pub use stream::{EncodeStream, StreamError};

/// A token id. In tiktoken-style vocabularies the id of a mergeable token is also its merge rank.
pub type Rank = u32;
