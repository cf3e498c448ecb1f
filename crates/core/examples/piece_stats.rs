use base64::Engine;
use hf_bpe_core::model::Model;
use hf_bpe_core::pretokenize::Splitter;
use hf_bpe_core::scan::{CL100K, GPT2, O200K};
use std::collections::HashMap;
fn read_ranks(path: &str) -> Vec<(Vec<u8>, u32)> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().filter(|l| !l.is_empty()).map(|line| {
        let (token, rank) = line.split_once(' ').unwrap();
        (base64::engine::general_purpose::STANDARD.decode(token).unwrap(), rank.parse().unwrap())
    }).collect()
}
fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/corpora");
    let mut text = String::new();
    for e in std::fs::read_dir(dir).unwrap() { let p = e.unwrap().path(); let s = p.display().to_string(); if s.ends_with(".txt") && !s.contains("COPYING") { text += &std::fs::read_to_string(p).unwrap(); } }
    for (name, pat, path) in [("gpt2", GPT2, "/tmp/ranks/gpt2.tiktoken"), ("cl100k", CL100K, "/tmp/ranks/cl100k_base.tiktoken"), ("o200k", O200K, "/tmp/ranks/o200k_base.tiktoken")] {
        let model = Model::from_ranks(read_ranks(path), pat, Vec::new()).unwrap();
        let sp = Splitter::new(pat).unwrap();
        let (mut pieces, mut whole, mut merged_bytes, mut total_bytes) = (0usize, 0usize, 0usize, 0usize);
        let mut counts: HashMap<&[u8], usize> = HashMap::new();
        let mut lens = [0usize; 8];
        sp.for_each_piece(&text, |s, e| {
            let p = &text.as_bytes()[s..e];
            pieces += 1; total_bytes += p.len();
            if model.token_id(p).is_some() { whole += 1; } else { merged_bytes += p.len(); *counts.entry(p).or_default() += 1; lens[(p.len()/8).min(7)] += 1; }
        }).unwrap();
        let mut freq: Vec<usize> = counts.values().copied().collect();
        freq.sort_unstable_by(|a, b| b.cmp(a));
        let merged = pieces - whole;
        let top = |k: usize| freq.iter().take(k).sum::<usize>() as f64 / merged as f64;
        println!("{name}: pieces {pieces} whole {:.1}% merged {merged} ({:.1}% of bytes) distinct merged {} top1k {:.2} top10k {:.2} top64k {:.2} lens/8 {:?}",
            100.0 * whole as f64 / pieces as f64, 100.0 * merged_bytes as f64 / total_bytes as f64, freq.len(), top(1000), top(10000), top(65536), lens);
    }
}
