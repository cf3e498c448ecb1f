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

use std::time::{Duration, Instant};

use hf_bpe_core::scan::CL100K;
use hf_bpe_core::train::{learn_merges_consuming, Counter, PieceCounts};

/// CPU time used by all the threads of this process so far.
fn process_cpu_time() -> Duration {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `time` is a valid, writable timespec.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut time) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

/// Learns `merges` merges from `counts` (consumed, as `hf_bpe.train` does), printing the wall and
/// CPU time (this thread's, and the process's: the big merges run on rayon's threads) spent when
/// the number of merges reaches each power of four.
#[inline(never)]
fn learn(counts: PieceCounts, merges: usize) -> Vec<Vec<u8>> {
    let (wall, thread, process) = (Instant::now(), timing::thread_cpu_time(), process_cpu_time());
    learn_merges_consuming(counts, merges, |done| {
        if done.is_power_of_two() && done.trailing_zeros() % 2 == 0 || done == merges {
            println!(
                "{done:>7} merges: {:.2} s wall, {:.2} s CPU (this thread), {:.2} s CPU (process)",
                wall.elapsed().as_secs_f64(),
                (timing::thread_cpu_time() - thread).as_secs_f64(),
                (process_cpu_time() - process).as_secs_f64()
            );
        }
        true
    })
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
        "{:.1} MB, {distinct} distinct pieces: counting {:.2} s, {} merges {:.2} s (CPU time, this thread)",
        texts.iter().map(String::len).sum::<usize>() as f64 / 1e6,
        (counted - started).as_secs_f64(),
        tokens.len(),
        (learned - counted).as_secs_f64()
    );
    // A fingerprint of the merges, to see at a glance that two builds learn the same tokens.
    let fingerprint = tokens.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, token| {
        token.iter().chain([&0xff]).fold(hash, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
    });
    println!("tokens' fingerprint: {fingerprint:016x}");
}
