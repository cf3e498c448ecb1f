//! Training: learn a byte-level BPE vocabulary from a corpus.
//!
//! Two stages, each usable alone: [`count`] turns text into a [`PieceCounts`] table (parallel,
//! streaming, summable across workers), and [`merges::learn_merges`] runs the incremental merge loop
//! on a table. Ids: 0–255 are the single bytes, the `i`-th learned token gets id `256 + i`.
//! [`parity`] runs the loop over several corpora (parity-aware BPE) or from a given state under
//! limits, which [`superbpe`]'s second stage uses.
//! [`extend::extend_merges`] continues the merge loop from an existing model's encoding of a table.

pub mod count;
pub mod counts;
pub mod extend;
pub mod merges;
pub mod parity;
pub mod sentencepiece;
pub mod superbpe;

pub use count::{check_utf8, CountError, Counter};
pub use counts::PieceCounts;
pub use merges::{continue_merges, learn_merges, learn_merges_consuming, Learned};
