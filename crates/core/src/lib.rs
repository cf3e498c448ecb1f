//! hf_bpe core: a byte-level BPE engine with tiktoken's semantics.
//!
//! Stages, each in its own module: `pretokenize` (split pattern), `merge` (byte-pair merging of one
//! piece), `special` (special-token matching), `model` (the model: vocabulary, encode, decode).
//! Nothing here knows about Python; the bindings live in the `hf_bpe_python` crate.

pub mod pretokenize;
pub mod train;

/// A token id. In tiktoken-style vocabularies the id of a mergeable token is also its merge rank.
pub type Rank = u32;
