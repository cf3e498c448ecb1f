//! The shared corpora the examples read by default.

/// `../shared/data/corpora` beside the repository.
pub const CORPORA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/corpora");

/// The corpus files (`*.txt`, licence texts left out), sorted.
pub fn corpus_files() -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(CORPORA)
        .unwrap_or_else(|error| panic!("cannot read {CORPORA}: {error}"))
        .map(|entry| entry.unwrap().path().display().to_string())
        .filter(|path| path.ends_with(".txt") && !path.ends_with("COPYING.txt"))
        .collect();
    found.sort();
    found
}
