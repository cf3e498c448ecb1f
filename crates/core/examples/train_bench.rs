//! The merge loop of training alone, no Python: for profiling (callgrind) and A/B comparisons.
//!
//! `cargo run --release -p hf_bpe_core --example train_bench -- VOCAB [corpus files]` counts the
//! files' pieces with cl100k's pattern, then learns `VOCAB - 256` merges in [`learn`] and prints the
//! counting and merging times (the thread's CPU time). The default corpus is `../shared/data/corpora`.
//! `valgrind --tool=callgrind --toggle-collect='*train_bench*learn*'` counts the merge loop alone.

#[path = "common/corpora.rs"]
mod corpora;
#[path = "common/timing.rs"]
#[allow(dead_code)] // best_cpu_seconds serves encode_bench
mod timing;

use hf_bpe_core::scan::CL100K;
use hf_bpe_core::train::{learn_merges_consuming, Counter, PieceCounts};

/// Learns `merges` merges from `counts` (consumed, as `hf_bpe.train` does).
#[inline(never)]
fn learn(counts: PieceCounts, merges: usize) -> Vec<Vec<u8>> {
    learn_merges_consuming(counts, merges, |_| true)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let vocab: usize = args.next().and_then(|vocab| vocab.parse().ok()).expect("usage: train_bench VOCAB [FILES]");
    let files: Vec<String> = args.collect();
    let files = if files.is_empty() { corpora::corpus_files() } else { files };
    let texts: Vec<String> = files.iter().map(|path| std::fs::read_to_string(path).unwrap()).collect();
    let counter = Counter::new(CL100K.to_owned(), &[]).unwrap();
    let started = timing::thread_cpu_time();
    let mut counts = PieceCounts::new();
    for text in &texts {
        for chunk in counter.chunks(text) {
            counter.count_text(chunk, &mut counts).unwrap();
        }
    }
    let counted = timing::thread_cpu_time();
    let distinct = counts.len();
    let tokens = learn(counts, vocab - 256);
    let learned = timing::thread_cpu_time();
    println!(
        "{:.1} MB, {distinct} distinct pieces: counting {:.2} s, {} merges {:.2} s (CPU time, one thread)",
        texts.iter().map(String::len).sum::<usize>() as f64 / 1e6,
        (counted - started).as_secs_f64(),
        tokens.len(),
        (learned - counted).as_secs_f64()
    );
}
