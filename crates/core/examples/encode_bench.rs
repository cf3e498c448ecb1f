//! Encode speed of the core, single thread, no Python: for profiling (`perf record`, callgrind).
//!
//! `cargo run --release -p hf_bpe_core --example encode_bench -- NAME=RANKS.tiktoken... [-- corpus files]`
//! where NAME is gpt2, cl100k or o200k (it picks the split pattern). Rank files in tiktoken's format
//! (`base64(token) rank` per line); `python -c "import hf_bpe, conversion.tiktoken as t;
//! t.save(hf_bpe.get_encoding('cl100k_base'), 'cl100k.tiktoken')"` writes one. Times are the thread's
//! CPU time, best of the runs in about a second; the split-only time is printed beside it.
//! Environment: BENCH_SECONDS (time per measurement, default 2; 0 runs each once, for callgrind),
//! BENCH_SPLIT=0 and BENCH_ADVERSARIAL=0 (skip the split-only and the worst-case timings),
//! BENCH_THREADS=N (also time documents of ~5 KB on N threads), BENCH_HELD_OUT and BENCH_DOCS (text
//! the caches have not seen; see below), BENCH_AB (two models measured in turn).

#[path = "common/corpora.rs"]
mod corpora;
#[path = "common/timing.rs"]
mod timing;

use base64::Engine;
use hf_bpe_core::model::Model;
use hf_bpe_core::pretokenize::Splitter;
use hf_bpe_core::scan::{CL100K, GPT2, O200K};
use timing::best_cpu_seconds as best_seconds;

fn read_ranks(path: &str) -> Vec<(Vec<u8>, u32)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"));
    text.lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (token, rank) = line.split_once(' ').expect("base64 rank");
            (base64::engine::general_purpose::STANDARD.decode(token).unwrap(), rank.parse().unwrap())
        })
        .collect()
}

/// BENCH_HELD_OUT=SHARE: what `benchmarks/encode.py` measures, text the caches have not seen. Each
/// file's first SHARE (a fraction) warms the piece caches (emptied first); the rest is then encoded
/// once per run, in [`measure_held_out`] (for `valgrind --tool=callgrind
/// --toggle-collect='*measure_held_out*'` with BENCH_SECONDS=0).
fn held_out(model: &Model, files: &[String], share: f64, seconds: f64, name: &str) {
    let (mut warm, mut measured) = (String::new(), String::new());
    for path in files {
        let text = std::fs::read_to_string(path).unwrap();
        let mut cut = (text.len() as f64 * share) as usize;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        cut += text[cut..].find('\n').map_or(text.len() - cut, |at| at + 1);
        warm.push_str(&text[..cut]);
        measured.push_str(&text[cut..]);
    }
    let mut out = Vec::with_capacity(measured.len());
    let (mut encode, mut tokens) = (f64::MAX, 0);
    let start = std::time::Instant::now();
    while encode == f64::MAX || start.elapsed().as_secs_f64() < seconds {
        model.clear_cache();
        out.clear();
        model.encode_ordinary(&warm, &mut out).unwrap();
        let before = timing::thread_cpu_time();
        tokens = measure_held_out(model, &measured, &mut out);
        encode = encode.min((timing::thread_cpu_time() - before).as_secs_f64());
    }
    println!(
        "{name:<7} held out: warmed on {:.1} MB, encode {:>6.1} MB/s ({tokens} tokens of {:.1} MB)",
        warm.len() as f64 / 1e6,
        measured.len() as f64 / 1e6 / encode,
        measured.len() as f64 / 1e6
    );
}

/// BENCH_DOCS=PREFIX: what `benchmarks/encode.py`'s single mode measures, without Python's lists.
/// `PREFIX.warm` and `PREFIX.timed` hold documents separated by NUL bytes, cut and shuffled as
/// `encode.py` does (`python benchmarks/encode.py --save-documents PREFIX` writes them); the caches
/// are emptied and warmed on the first, then each document of the second is encoded in its own call.
///
/// With BENCH_AB set too, two models are measured in turn, round after round, and each one's best
/// and median printed: the first is built and run with the variables of BENCH_AB set
/// (`NAME=VALUE,...`, e.g. `HF_BPE_HUGE_PAGES=0`), the second without them. On a shared machine
/// a busy spell then slows both alike.
fn documents(models: &[&Model], prefix: &str, seconds: f64, name: &str) {
    let read = |suffix: &str| std::fs::read_to_string(format!("{prefix}.{suffix}")).unwrap();
    let (warm, timed) = (read("warm"), read("timed"));
    let docs: Vec<&str> = timed.split('\0').collect();
    let mut out = Vec::new();
    if let [first, second] = models {
        let encode = |model: &Model, doc: &str| {
            let mut ids = Vec::new();
            model.encode_ordinary(doc, &mut ids).unwrap();
            ids
        };
        set_ab_variables(true);
        let expected: Vec<Vec<u32>> = docs.iter().map(|doc| encode(first, doc)).collect();
        set_ab_variables(false);
        let same = docs.iter().zip(&expected).filter(|(doc, ids)| encode(second, doc) == **ids).count();
        println!("{name:<7} the two models' ids are equal on {same} of {} documents", docs.len());
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); models.len()];
    let start = std::time::Instant::now();
    while times[0].len() < 3 || start.elapsed().as_secs_f64() < seconds {
        for (index, model) in models.iter().enumerate() {
            // A model's piece cache is allocated when it first encodes, under its own variables.
            set_ab_variables(models.len() == 2 && index == 0);
            model.clear_cache();
            for doc in warm.split('\0') {
                out.clear();
                model.encode_ordinary(doc, &mut out).unwrap();
            }
            let before = timing::thread_cpu_time();
            measure_documents(model, &docs, &mut out);
            times[index].push((timing::thread_cpu_time() - before).as_secs_f64());
        }
    }
    let mb = timed.len() as f64 / 1e6;
    if let [with, without] = &times[..] {
        // Each round times the two models back to back: the ratio of the pair is what a busy
        // spell of the machine disturbs least.
        let mut ratios: Vec<f64> = with.iter().zip(without).map(|(with, without)| without / with).collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "{name:<7} speed with BENCH_AB / without, per round: median {:.3}, quartiles {:.3} to {:.3} ({} rounds)",
            ratios[ratios.len() / 2],
            ratios[ratios.len() / 4],
            ratios[ratios.len() * 3 / 4],
            ratios.len()
        );
    }
    for (index, mut seconds) in times.into_iter().enumerate() {
        seconds.sort_by(f64::total_cmp);
        let label = if models.len() == 2 { [" with BENCH_AB", " without"][index] } else { "" };
        println!(
            "{name:<7} documents{label}: {} of {mb:.1} MB, best {:>6.1} MB/s, median {:>6.1} ({} rounds)",
            docs.len(),
            mb / seconds[0],
            mb / seconds[seconds.len() / 2],
            seconds.len()
        );
    }
}

/// Sets (or removes) the variables BENCH_AB names.
fn set_ab_variables(set: bool) {
    let variables = std::env::var("BENCH_AB").unwrap_or_default();
    for assignment in variables.split(',').filter(|assignment| !assignment.is_empty()) {
        let (name, value) = assignment.split_once('=').expect("BENCH_AB holds NAME=VALUE,...");
        if set {
            std::env::set_var(name, value);
        } else {
            std::env::remove_var(name);
        }
    }
}

/// Encodes each document in its own call; the CPU time counted is this call's alone.
#[inline(never)]
fn measure_documents(model: &Model, docs: &[&str], out: &mut Vec<u32>) -> usize {
    let mut tokens = 0;
    for doc in docs {
        out.clear();
        model.encode_ordinary(doc, out).unwrap();
        tokens += out.len();
    }
    tokens
}

/// Encodes `text` (the held-out part); the CPU time counted is this call's alone.
#[inline(never)]
fn measure_held_out(model: &Model, text: &str, out: &mut Vec<u32>) -> usize {
    out.clear();
    model.encode_ordinary(text, out).unwrap();
    out.len()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (models, files) = match args.iter().position(|arg| arg == "--") {
        Some(at) => (args[..at].to_vec(), args[at + 1..].to_vec()),
        None => (args, Vec::new()),
    };
    let files = if files.is_empty() { corpora::corpus_files() } else { files };
    let text: String = files.iter().map(|path| std::fs::read_to_string(path).unwrap()).collect();
    let seconds: f64 = std::env::var("BENCH_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    println!("input: {:.1} MB from {} files", text.len() as f64 / 1e6, files.len());
    for spec in models {
        let (name, path) = spec.split_once('=').expect("NAME=RANKS");
        let pattern = match name {
            "gpt2" => GPT2,
            "cl100k" => CL100K,
            "o200k" => O200K,
            other => panic!("unknown pattern name {other}"),
        };
        let model = Model::from_ranks(read_ranks(path), pattern, Vec::new()).unwrap();
        if let Ok(prefix) = std::env::var("BENCH_DOCS") {
            if std::env::var_os("BENCH_AB").is_some() {
                set_ab_variables(true);
                let with = Model::from_ranks(read_ranks(path), pattern, Vec::new()).unwrap();
                documents(&[&with, &model], &prefix, seconds, name);
            } else {
                documents(&[&model], &prefix, seconds, name);
            }
            continue;
        }
        let splitter = Splitter::new(pattern).unwrap();
        // BENCH_SPLIT=0 skips the split-only timing (for profiling the encode alone).
        let split_seconds = if std::env::var("BENCH_SPLIT").as_deref() == Ok("0") { 0.0 } else { seconds };
        let (split, pieces) = best_seconds(split_seconds, || {
            let mut pieces = 0;
            splitter.for_each_piece(&text, |_, _, _| pieces += 1).unwrap();
            pieces
        });
        let mut out = Vec::with_capacity(text.len());
        if let Some(share) = std::env::var("BENCH_HELD_OUT").ok().and_then(|share| share.parse::<f64>().ok()) {
            held_out(&model, &files, share, seconds, name);
            continue;
        }
        let (encode, tokens) = best_seconds(seconds, || {
            out.clear();
            model.encode_ordinary(&text, &mut out).unwrap();
            out.len()
        });
        // Adversarial inputs: one piece of a megabyte each (BENCH_ADVERSARIAL=0 skips them).
        let adversarial_seconds = if std::env::var("BENCH_ADVERSARIAL").as_deref() == Ok("0") { None } else { Some(seconds) };
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let letters: String = (0..1_000_000).map(|_| char::from(b'a' + (random() % 26) as u8)).collect();
        let adversarial_inputs = [("repeated", "a".repeat(1_000_000)), ("letters", letters)];
        for (label, adversarial) in adversarial_inputs.iter().filter(|_| adversarial_seconds.is_some()) {
            let (time, _) = best_seconds(seconds / 2.0, || {
                out.clear();
                model.encode_ordinary(adversarial, &mut out).unwrap();
                out.len()
            });
            print!("{name:<7} {label} {:.1} MB/s; ", adversarial.len() as f64 / 1e6 / time);
        }
        // BENCH_THREADS=N: documents of ~5 KB encoded in parallel on N threads (wall time).
        if let Some(threads) = std::env::var("BENCH_THREADS").ok().and_then(|n| n.parse::<usize>().ok()) {
            use rayon::prelude::*;
            let mut docs = Vec::new();
            let mut at = 0;
            while at < text.len() {
                let mut end = (at + 5000).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                docs.push(&text[at..end]);
                at = end;
            }
            let mut expected = None;
            for n in [1, threads] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap();
                let mut best = f64::MAX;
                for _ in 0..3 {
                    let start = std::time::Instant::now();
                    let total: usize = pool.install(|| {
                        docs.par_iter()
                            .map(|doc| {
                                let mut ids = Vec::new();
                                model.encode_ordinary(doc, &mut ids).unwrap();
                                ids.len()
                            })
                            .sum()
                    });
                    // Cutting the text into documents changes a few pieces; the threads must not.
                    assert_eq!(*expected.get_or_insert(total), total);
                    best = best.min(start.elapsed().as_secs_f64());
                }
                print!("{name:<7} batch on {n} threads {:.1} MB/s; ", text.len() as f64 / 1e6 / best);
            }
        }
        let mb = text.len() as f64 / 1e6;
        println!(
            "{name:<7} encode {:>6.1} MB/s ({tokens} tokens)  split only {:>6.1} MB/s ({pieces} pieces, {:.0}% of encode time)",
            mb / encode,
            mb / split,
            100.0 * split / encode
        );
    }
}
