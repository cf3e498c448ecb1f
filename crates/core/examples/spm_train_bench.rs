//! SentencePiece BPE training by phase, no Python: for profiling and A/B comparisons.
//!
//! `cargo run --release -p hf_bpe_core --example spm_train_bench -- VOCAB THREADS [corpus files]`
//! trains as `hf_bpe.train_sentencepiece(files=..., vocab_size=VOCAB, num_threads=THREADS,
//! **LLAMA2_OPTIONS)` does (identity normalizer, byte fallback's 256 byte pieces and `<unk>`,
//! `<s>`, `</s>` as meta pieces) and prints each phase's time: reading and counting words,
//! laying out the word table, the required characters, the merge loop. Wall time and the
//! process's CPU time (every phase runs on the pool's threads). The default
//! corpus is `../shared/data/corpora`.

#[path = "common/corpora.rs"]
mod corpora;
use std::time::Instant;

use hf_bpe_core::normalize::SentencePieceNormalizer;
use hf_bpe_core::train::sentencepiece::{
    learn_pieces, PieceRules, ScoredPiece, SentenceOptions, WordCounter, WordTable,
};

/// CPU time used by this process so far (every thread: the phases run on the pool's threads).
fn process_cpu_time() -> std::time::Duration {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid, writable timespec.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut time) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    std::time::Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

/// Reports a phase: wall seconds, the process's CPU seconds.
struct Phases {
    wall: Instant,
    cpu: std::time::Duration,
}

impl Phases {
    fn start() -> Self {
        Self {
            wall: Instant::now(),
            cpu: process_cpu_time(),
        }
    }

    fn report(&mut self, phase: &str) {
        let (wall, cpu) = (self.wall.elapsed(), process_cpu_time() - self.cpu);
        println!(
            "{phase:<12} wall {:.3} s, the process's CPU {:.3} s",
            wall.as_secs_f64(),
            cpu.as_secs_f64()
        );
        *self = Self::start();
    }
}

// Each phase is a function of its own, never inlined, so that a profiler can take one phase
// apart: `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*merge_pairs*' ...`.

#[inline(never)]
fn count_words(
    pool: &rayon::ThreadPool,
    files: &[String],
    options: SentenceOptions,
    normalizer: SentencePieceNormalizer,
    meta: &[&str],
) -> WordCounter {
    let mut counter = WordCounter::new(options, normalizer, meta).unwrap();
    for file in files {
        pool.install(|| counter.add_file(std::path::Path::new(file), |_| true))
            .unwrap();
    }
    counter
}

#[inline(never)]
fn lay_out_words(pool: &rayon::ThreadPool, counter: WordCounter) -> WordTable {
    pool.install(|| counter.into_table())
}

#[inline(never)]
fn merge_pairs(
    pool: &rayon::ThreadPool,
    table: WordTable,
    required: &[(char, u64)],
    merges: usize,
    rules: &PieceRules,
) -> Vec<ScoredPiece> {
    pool.install(|| learn_pieces(table, required, merges, rules, |_| true))
        .unwrap()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: spm_train_bench VOCAB THREADS [FILES]";
    let vocab: usize = args
        .next()
        .and_then(|vocab| vocab.parse().ok())
        .expect(usage);
    let threads: usize = args
        .next()
        .and_then(|threads| threads.parse().ok())
        .expect(usage);
    let files: Vec<String> = args.collect();
    let files = if files.is_empty() {
        corpora::corpus_files()
    } else {
        files
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let normalizer = SentencePieceNormalizer::new(&[], true, false, true, &[]).unwrap();
    let options = SentenceOptions {
        max_sentence_length: 4192,
        split_by_whitespace: true,
        allow_whitespace_only_pieces: true,
        first_sentences: 200_000_000,
    };
    let bytes: Vec<String> = (0..=255).map(|byte| format!("<0x{byte:02X}>")).collect();
    let mut meta: Vec<&str> = vec!["<unk>", "<s>", "</s>"];
    meta.extend(bytes.iter().map(String::as_str));
    let rules = PieceRules {
        max_sentencepiece_length: 16,
        split_by_whitespace: true,
        allow_whitespace_only_pieces: true,
        split_by_unicode_script: true,
        split_by_number: true,
        split_digits: true,
    };
    let mut phases = Phases::start();
    let counter = count_words(&pool, &files, options, normalizer, &meta);
    let sentences = counter.sentences();
    phases.report("counting");
    let table = lay_out_words(&pool, counter);
    phases.report("word table");
    let required = table.required_chars(0.99995);
    phases.report("required");
    let words = table.words();
    let merges = vocab - meta.len() - required.len();
    let pieces = merge_pairs(&pool, table, &required, merges, &rules);
    phases.report("merge loop");
    println!(
        "{sentences} sentences, {words} distinct words, {} required characters, {} pieces",
        required.len(),
        pieces.len()
    );
}
