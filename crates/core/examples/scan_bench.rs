//! Pre-tokenization speed, hand-written scanner vs its regex engine (fancy-regex for the named
//! patterns, Oniguruma for the family scanners, as their files run them), single thread, on the
//! shared corpora: `cargo run --release -p hf_bpe_core --example scan_bench [corpus files...]`.
//!
//! Times are the thread's CPU time (best of the runs in about a second), so other processes on a
//! busy machine disturb them less than wall-clock time would.

#[path = "common/corpora.rs"]
mod corpora;
#[path = "common/timing.rs"]
mod timing;

use hf_bpe_core::pretokenize::{Behavior, SplitRule, SplitStep, Splitter};
use hf_bpe_core::scan::{Scanner, Semantics};
use timing::best_cpu_seconds;

/// MB/s (10^6 bytes of UTF-8 input per CPU second) of the best of a few runs, and the piece count.
fn megabytes_per_second(text: &str, mut split: impl FnMut(&str) -> usize) -> (f64, usize) {
    let (seconds, pieces) = best_cpu_seconds(1.0, || split(text));
    (text.len() as f64 / seconds / 1e6, pieces)
}

fn count_pieces(splitter: &Splitter, text: &str) -> usize {
    let mut pieces = 0;
    splitter.for_each_piece(text, |_, _, _| pieces += 1).expect("the regex splits the corpus");
    pieces
}

fn main() {
    let mut files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        files = corpora::corpus_files();
    }
    let corpora: Vec<(String, String)> = files
        .iter()
        .map(|path| {
            let name = path.rsplit('/').next().unwrap().trim_end_matches(".txt").to_owned();
            (name, std::fs::read_to_string(path).unwrap())
        })
        .collect();
    let all: String = corpora.iter().map(|(_, text)| text.as_str()).collect();

    println!(
        "{:<10} {:<20} {:>9} {:>12} {:>11} {:>8}",
        "pattern", "corpus", "MB", "scanner MB/s", "regex MB/s", "speedup"
    );
    for scanner in Scanner::ALL {
        let rule = if matches!(scanner, Scanner::Gpt2 | Scanner::Cl100k | Scanner::O200k) {
            SplitRule::Pattern(scanner.pattern().to_owned())
        } else {
            let regex = scanner.regex(Semantics::Oniguruma);
            SplitRule::Steps(vec![SplitStep::regex(regex, Behavior::Isolated, false)])
        };
        let fast = Splitter::new(rule.clone()).unwrap();
        let regex = Splitter::exact(rule).unwrap();
        let named: Vec<(&str, &str)> = corpora
            .iter()
            .map(|(name, text)| (name.as_str(), text.as_str()))
            .chain([("all", all.as_str())])
            .collect();
        for (name, text) in named {
            let (scanner_speed, scanner_pieces) =
                megabytes_per_second(text, |text| count_pieces(&fast, text));
            let (regex_speed, regex_pieces) = megabytes_per_second(text, |text| count_pieces(&regex, text));
            assert_eq!(scanner_pieces, regex_pieces, "{scanner:?} on {name}");
            println!(
                "{:<10} {:<20} {:>9.1} {:>12.1} {:>11.1} {:>7.1}x",
                format!("{scanner:?}"),
                name,
                text.len() as f64 / 1e6,
                scanner_speed,
                regex_speed,
                scanner_speed / regex_speed
            );
        }
    }
}
