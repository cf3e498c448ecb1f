//! The merge loop over several corpora at once: parity-aware BPE (Foroutan, Meister et al., arXiv
//! 2508.04796) exactly as `tokenizers`' `ParityBpeTrainer` (0.23.3) learns it, and, with one corpus,
//! the plain loop continued from a given state under a limit on what it may learn (SuperBPE's second
//! stage, [`super::superbpe`]).
//!
//! Each word (a distinct piece) belongs to one *owner*: the training corpus of a language, or its
//! dev corpus. Every merge is applied to every word; pair counts are kept per language, over its
//! training words only; and the length (tokens times counts) of every training and dev corpus is kept
//! up to date for the language choice. Nothing is recounted per merge: a merge rewrites only the
//! words listed for its pair (as in [`super::merges`]) and adds the changes to the counts of the
//! word's language. Each language has its own max-heap with lazy deletion, exact for the reason given
//! in [`super::merges`] (a pair's count in a language grows only when a merge forms one of its tokens
//! next to it, and it is pushed then), and the global phase has one over the sums.
//!
//! The rule, as [`learn_parity`] applies it (the tests hold it to the readable reference
//! `tests/naive_parity_bpe.py` and to `ParityBpeTrainer` itself):
//! - the pair with the greatest `(count, key(left), key(right))` wins, where a token's key is its
//!   ByteLevel string (GPT-2's byte-to-character map), so ties follow those characters' order, not
//!   the bytes' ([`TieOrder::ByteLevel`]);
//! - `max_token_length = m` counts a pair only when its merged length is below `m` (no token of
//!   exactly `m` bytes is learned), except pairs of two single bytes, which always count;
//! - the first `global_merges` merges take the best pair of the counts summed over the languages;
//!   later ones first choose a language, then take that language's best pair. A language whose best
//!   pair is missing or below `min_frequency` is *exhausted* and the choice is made again; the loop
//!   ends when every language is exhausted (in the global phase, at once).
//! - The choice reads one value per language (higher is worse): the dev corpus's length when dev
//!   corpora are given, else minus the adjusted compression `(L0 / L) / ratio` of its training corpus
//!   when ratios are, else the training corpus's length `L`. `Base` takes the worst language not
//!   exhausted (ties to the lowest index); `Window` keeps the last `size` choices and takes, from the
//!   worst down, the first language whose share of them is at most `alpha / languages`.
//!
//! On two kinds of input the oracle never returns (a language without training text under ratios
//! wins no choice, and the exhausted language 0 is chosen again and again); there [`learn_parity`]
//! returns [`LoopsForever`] naming the case instead.

use super::counts::PieceCounts;
use super::merges::{append, compare_pairs, merge_symbols, pack, unpack, PackedPair, PairHeap, TokenBytes, WordList};
use crate::byte_level::is_printable;
use crate::Rank;
use rustc_hash::FxHashMap;
use std::cmp::Ordering;
use std::collections::VecDeque;

/// How pairs of equal count are ordered: the greater pair wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieOrder {
    /// By `(bytes of left, bytes of right)`: DESIGN.md's rule, hf_bpe's trainer.
    Bytes,
    /// By the tokens' ByteLevel strings (each byte as GPT-2's printable character for it, compared
    /// as characters): `tokenizers`' `ParityBpeTrainer`.
    ByteLevel,
}

/// GPT-2's byte-to-character map as an order: `BYTE_LEVEL_ORDER[byte]` is the byte's place among
/// the 256 characters sorted. Printable bytes stand for themselves (`!`..`~`, `¡`..`¬`, `®`..`ÿ`),
/// the others take U+0100 on, in byte order, so they sort after every printable one.
const BYTE_LEVEL_ORDER: [u8; 256] = {
    let mut order = [0u8; 256];
    let mut next = 0usize;
    let mut byte = 0usize;
    while byte < 256 {
        if is_printable(byte as u8) {
            order[byte] = next as u8;
            next += 1;
        }
        byte += 1;
    }
    byte = 0;
    while byte < 256 {
        if !is_printable(byte as u8) {
            order[byte] = next as u8;
            next += 1;
        }
        byte += 1;
    }
    order
};


/// Which pairs may be counted (and so merged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Every pair.
    None,
    /// `ParityBpeTrainer`'s `max_token_length = m`: merged length below `m`, or two single bytes.
    MaxTokenLength(usize),
    /// SuperBPE's: the merged token holds at most `max_words` words (runs of bytes other than the
    /// space, 0x20) and not the bytes `": "`.
    Superwords { max_words: u32 },
}

/// How the parity phase chooses a language.
#[derive(Clone, Debug, PartialEq)]
pub enum Variant {
    /// The worst language that is not exhausted, ties to the lowest index.
    Base,
    /// The moving window of the last `size` choices, and the threshold `alpha / languages`.
    Window { size: usize, alpha: f64 },
}

/// `ParityBpeTrainer`'s options (those that decide the merges).
#[derive(Clone, Debug, PartialEq)]
pub struct ParityOptions {
    /// Merges to make (a merge whose token already exists counts too).
    pub num_merges: usize,
    /// Merges chosen on the counts summed over the languages before the parity phase.
    pub global_merges: usize,
    pub variant: Variant,
    /// Target compression per language, used when no dev corpora are given.
    pub ratio: Option<Vec<f64>>,
    pub min_frequency: u64,
    pub max_token_length: Option<usize>,
}

/// What a loop learned. Ids: the starting tokens first (the 256 bytes, then any given tokens), then
/// `tokens` in order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Learned {
    /// Every merge in order, as the ids of its two tokens; a pair can recur when a merge re-formed
    /// an existing token.
    pub merges: Vec<(Rank, Rank)>,
    /// The language that chose each merge, `None` in the global phase.
    pub chosen_by: Vec<Option<u32>>,
    /// The bytes of each new token, in id order.
    pub tokens: Vec<Vec<u8>>,
}

/// Inputs on which `ParityBpeTrainer` never returns: the message names the case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopsForever(pub &'static str);

impl std::fmt::Display for LoopsForever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for LoopsForever {}

const RATIO_WITHOUT_TEXT: &str = "the base variant with ratios: every language that is not exhausted has no training \
     text, so none of them is ever chosen and the exhausted language 0 is chosen forever (ParityBpeTrainer never \
     returns here)";
const WINDOW_OVER_THRESHOLD: &str = "the window variant: language 0 is over the window's threshold and every \
     language not yet tried is exhausted (or has no training text, with ratios), so the choice finds language 0 \
     again forever (ParityBpeTrainer never returns here)";
const WINDOW_IDLE: &str = "the window variant: only exhausted languages are chosen, so no merge is ever made again \
     (ParityBpeTrainer never returns here)";

/// Words of several owners in one flat array of symbols.
#[derive(Default)]
struct Words {
    symbols: Vec<Rank>,
    start: Vec<usize>,
    len: Vec<u32>,
    count: Vec<u64>,
    owner: Vec<u32>,
}

impl Words {
    fn push(&mut self, symbols: impl IntoIterator<Item = Rank>, count: u64, owner: u32) {
        let start = self.symbols.len();
        self.symbols.extend(symbols);
        let len = u32::try_from(self.symbols.len() - start).expect("a piece longer than 4 billion symbols");
        self.start.push(start);
        self.len.push(len);
        self.count.push(count);
        self.owner.push(owner);
        assert!(self.count.len() <= u32::MAX as usize, "more than 4 billion distinct pieces");
    }

    fn symbols(&self, word: usize) -> &[Rank] {
        &self.symbols[self.start[word]..self.start[word] + self.len[word] as usize]
    }
}

/// What SuperBPE's limit needs to know of a token: its words, its edges, whether it holds `": "`.
#[derive(Clone, Copy)]
struct Shape {
    words: u32,
    first: u8,
    last: u8,
    colon_space: bool,
}

impl Shape {
    fn of(token: &[u8]) -> Self {
        Shape {
            words: token.split(|&byte| byte == b' ').filter(|word| !word.is_empty()).count() as u32,
            first: token.first().copied().unwrap_or(b' '),
            last: token.last().copied().unwrap_or(b' '),
            colon_space: token.windows(2).any(|pair| pair == b": "),
        }
    }
}

/// The tokens: their keys (bytes in the tie order, for comparing), real bytes, shapes, and ids by key.
struct Tokens {
    keys: TokenBytes,
    bytes: Vec<Vec<u8>>,
    shapes: Vec<Shape>,
    ids: FxHashMap<Vec<u8>, Rank>,
    order: TieOrder,
}

impl Tokens {
    fn new(order: TieOrder) -> Self {
        Tokens {
            keys: TokenBytes { bytes: Vec::new(), prefixes: Vec::new() },
            bytes: Vec::new(),
            shapes: Vec::new(),
            ids: FxHashMap::default(),
            order,
        }
    }

    fn key(&self, bytes: &[u8]) -> Vec<u8> {
        match self.order {
            TieOrder::Bytes => bytes.to_vec(),
            TieOrder::ByteLevel => bytes.iter().map(|&byte| BYTE_LEVEL_ORDER[byte as usize]).collect(),
        }
    }

    /// The id of `bytes`, a new one when they are not a token yet; and whether it is new.
    fn intern(&mut self, bytes: Vec<u8>) -> (Rank, bool) {
        let key = self.key(&bytes);
        if let Some(&id) = self.ids.get(&key) {
            return (id, false);
        }
        let id = Rank::try_from(self.bytes.len()).expect("more than 4 billion tokens");
        self.ids.insert(key.clone(), id);
        self.keys.push(key);
        self.shapes.push(Shape::of(&bytes));
        self.bytes.push(bytes);
        (id, true)
    }

    fn len(&self, id: Rank) -> usize {
        self.bytes[id as usize].len()
    }

    /// Whether the pair may be counted under `limit`.
    fn allowed(&self, limit: &Limit, pair: PackedPair) -> bool {
        let (left, right) = unpack(pair);
        match *limit {
            Limit::None => true,
            Limit::MaxTokenLength(max) => {
                let len = self.len(left) + self.len(right);
                len < max || len == 2
            }
            Limit::Superwords { max_words } => {
                let (left, right) = (self.shapes[left as usize], self.shapes[right as usize]);
                let joined = u32::from(left.last != b' ' && right.first != b' ');
                left.words + right.words - joined <= max_words
                    && !left.colon_space
                    && !right.colon_space
                    && !(left.last == b':' && right.first == b' ')
            }
        }
    }

    fn greater(&self, a: &(u64, PackedPair), b: &(u64, PackedPair)) -> bool {
        a.0.cmp(&b.0).then_with(|| compare_pairs(&self.keys, a.1, b.1)) == Ordering::Greater
    }
}

/// One set of pair counts and its heap.
#[derive(Default)]
struct Counts {
    counts: FxHashMap<PackedPair, u64>,
    heap: PairHeap,
}

impl Counts {
    fn add(&mut self, pair: PackedPair, delta: i64, tokens: &Tokens) {
        let entry = self.counts.entry(pair).or_insert(0);
        let updated = (*entry as i64 + delta) as u64;
        if updated == 0 {
            self.counts.remove(&pair);
        } else {
            *entry = updated;
            if delta > 0 {
                self.heap.push((updated, pair), &|a, b| tokens.greater(a, b));
            }
        }
    }

    fn heapify(&mut self, tokens: &Tokens) {
        self.heap.entries = self.counts.iter().map(|(&pair, &count)| (count, pair)).collect();
        self.heap.heapify(&|a, b| tokens.greater(a, b));
    }

    /// The best pair and its count, dropping stale entries on the way.
    fn best(&mut self, tokens: &Tokens) -> Option<(u64, PackedPair)> {
        let greater = |a: &(u64, PackedPair), b: &(u64, PackedPair)| tokens.greater(a, b);
        loop {
            let (count, pair) = self.heap.pop(&greater)?;
            let current = self.counts.get(&pair).copied().unwrap_or(0);
            if current == count {
                return Some((count, pair));
            }
            if current > 0 {
                self.heap.push((current, pair), &greater);
            }
        }
    }
}

impl Default for PairHeap {
    fn default() -> Self {
        PairHeap { entries: Vec::new() }
    }
}

/// When the loop stops.
#[derive(Clone, Copy, Debug)]
enum Stop {
    Merges(usize),
    NewTokens(usize),
}

/// The loop's state.
struct Loop {
    words: Words,
    languages: usize,
    tokens: Tokens,
    limit: Limit,
    /// Per language, over its training words.
    counts: Vec<Counts>,
    /// The sums, during the global phase only.
    global: Option<Counts>,
    pair_words: FxHashMap<PackedPair, WordList>,
    /// Tokens times counts per owner (languages' training corpora, then their dev corpora).
    lengths: Vec<u64>,
}

impl Loop {
    /// The state before the first merge: `lengths` holds each owner's length (words of one symbol,
    /// which `words` may leave out, included); `global` keeps the sums for a global phase.
    fn new(
        words: Words,
        languages: usize,
        tokens: Tokens,
        limit: Limit,
        lengths: Vec<u64>,
        global: bool,
    ) -> Self {
        let mut state = Loop {
            words,
            languages,
            tokens,
            limit,
            counts: (0..languages).map(|_| Counts::default()).collect(),
            global: None,
            pair_words: FxHashMap::default(),
            lengths,
        };
        for word in 0..state.words.count.len() {
            let (owner, count) = (state.words.owner[word] as usize, state.words.count[word]);
            for window in state.words.symbols(word).windows(2) {
                let pair = pack(window[0], window[1]);
                if !state.tokens.allowed(&state.limit, pair) {
                    continue;
                }
                if owner < languages {
                    *state.counts[owner].counts.entry(pair).or_insert(0) += count;
                }
                let listed = state.pair_words.entry(pair).or_default();
                if listed.last() != Some(&(word as u32)) {
                    listed.push(word as u32);
                }
            }
        }
        if global {
            let mut sums = Counts::default();
            for language in &state.counts {
                for (&pair, &count) in &language.counts {
                    *sums.counts.entry(pair).or_insert(0) += count;
                }
            }
            sums.heapify(&state.tokens);
            state.global = Some(sums);
        }
        for language in &mut state.counts {
            language.heapify(&state.tokens);
        }
        state
    }

    /// Merges `pair` in every word that holds it; returns the merged token's id and whether it is new.
    fn merge(&mut self, pair: PackedPair) -> (Rank, bool) {
        let (left, right) = unpack(pair);
        let bytes = [&self.tokens.bytes[left as usize][..], &self.tokens.bytes[right as usize][..]].concat();
        let (merged, new) = self.tokens.intern(bytes);
        let listed = self.pair_words.remove(&pair).unwrap_or_default();
        let languages = self.languages;
        // (pair, language) -> change in count; pair -> the words it appeared in.
        let mut deltas: FxHashMap<(PackedPair, u32), i64> = FxHashMap::default();
        let mut appeared: FxHashMap<PackedPair, WordList> = FxHashMap::default();
        let Loop { words, tokens, limit, lengths, .. } = self;
        for &word in &listed {
            let word = word as usize;
            let (owner, count) = (words.owner[word], words.count[word]);
            let start = words.start[word];
            let symbols = &mut words.symbols[start..start + words.len[word] as usize];
            let before = symbols.len();
            let after = merge_symbols(symbols, left, right, merged, |changed, delta| {
                if changed == pair || !tokens.allowed(limit, changed) {
                    return;
                }
                if (owner as usize) < languages {
                    *deltas.entry((changed, owner)).or_insert(0) += delta * count as i64;
                }
                if delta > 0 {
                    let listed = appeared.entry(changed).or_default();
                    if listed.last() != Some(&(word as u32)) {
                        listed.push(word as u32);
                    }
                }
            });
            words.len[word] = after as u32;
            lengths[owner as usize] -= (before - after) as u64 * count;
        }
        for language in &mut self.counts {
            language.counts.remove(&pair);
        }
        let mut sums: FxHashMap<PackedPair, i64> = FxHashMap::default();
        for ((changed, language), delta) in deltas {
            if delta == 0 {
                continue;
            }
            self.counts[language as usize].add(changed, delta, &self.tokens);
            if self.global.is_some() {
                *sums.entry(changed).or_insert(0) += delta;
            }
        }
        if let Some(global) = &mut self.global {
            global.counts.remove(&pair);
            for (changed, delta) in sums {
                if delta != 0 {
                    global.add(changed, delta, &self.tokens);
                }
            }
        }
        for (changed, new_words) in appeared {
            append(self.pair_words.entry(changed).or_default(), new_words);
        }
        (merged, new)
    }

    /// Runs the loop: `global_merges` merges on the sums, then the parity phase.
    fn run(
        &mut self,
        stop: Stop,
        global_merges: usize,
        choice: &Choice,
        min_frequency: u64,
        mut on_step: impl FnMut(usize, usize) -> bool,
    ) -> Result<Learned, LoopsForever> {
        let n = self.languages;
        let first_token = self.tokens.bytes.len();
        let mut learned = Learned::default();
        let mut new_tokens = 0usize;
        let mut exhausted = vec![false; n];
        let mut n_exhausted = 0usize;
        let mut window: VecDeque<u32> = VecDeque::new();
        let mut in_window = vec![0usize; n];
        let mut idle = 0usize;
        let initial: Vec<f64> = self.lengths[..n].iter().map(|&length| length as f64).collect();
        loop {
            let done = match stop {
                Stop::Merges(target) => learned.merges.len() >= target,
                Stop::NewTokens(target) => new_tokens >= target,
            };
            if done || n_exhausted >= n {
                break;
            }
            let global_phase = learned.merges.len() < global_merges;
            let language = if global_phase {
                None
            } else {
                let values: Vec<f64> = (0..n)
                    .map(|language| {
                        if exhausted[language] {
                            f64::NEG_INFINITY
                        } else {
                            choice.value(language, &self.lengths, &initial, n)
                        }
                    })
                    .collect();
                let chosen = match &choice.variant {
                    Variant::Base => worst(&values, |_| false),
                    Variant::Window { size, alpha } => {
                        let chosen = window_choice(&values, &in_window, *size, *alpha / n as f64)?;
                        window.push_back(chosen as u32);
                        in_window[chosen] += 1;
                        if window.len() > *size {
                            let oldest = window.pop_front().expect("the window is not empty") as usize;
                            in_window[oldest] -= 1;
                        }
                        chosen
                    }
                };
                Some(chosen)
            };
            let counts = match language {
                None => self.global.as_mut().expect("the global phase keeps the sums"),
                Some(language) => &mut self.counts[language],
            };
            let best = counts.best(&self.tokens).filter(|&(count, _)| count >= min_frequency);
            let Some((_, pair)) = best else {
                let Some(language) = language else {
                    break;
                };
                if choice.variant == Variant::Base && exhausted[language] {
                    return Err(LoopsForever(RATIO_WITHOUT_TEXT));
                }
                if !exhausted[language] {
                    exhausted[language] = true;
                    n_exhausted += 1;
                }
                idle += 1;
                let size = match choice.variant {
                    Variant::Base => 100,
                    Variant::Window { size, .. } => size,
                };
                if idle > size + n + 1 {
                    return Err(LoopsForever(WINDOW_IDLE));
                }
                continue;
            };
            idle = 0;
            let (_, new) = self.merge(pair);
            learned.merges.push(unpack(pair));
            learned.chosen_by.push(language.map(|language| language as u32));
            new_tokens += usize::from(new);
            if learned.merges.len() == global_merges {
                self.global = None; // the parity phase starts: the sums are needed no more
            }
            if !on_step(learned.merges.len(), new_tokens) {
                break;
            }
        }
        learned.tokens = self.tokens.bytes.split_off(first_token);
        Ok(learned)
    }
}

/// What the language choice reads.
struct Choice {
    variant: Variant,
    balance: Balance,
}

enum Balance {
    Dev,
    Ratio(Vec<f64>),
    Training,
}

impl Choice {
    /// The language's value (higher is worse).
    fn value(&self, language: usize, lengths: &[u64], initial: &[f64], n: usize) -> f64 {
        match &self.balance {
            Balance::Dev => lengths[n + language] as f64,
            Balance::Ratio(ratio) => -((initial[language] / lengths[language] as f64) / ratio[language]),
            Balance::Training => lengths[language] as f64,
        }
    }
}

/// The first language of the highest value among those not `skipped` (`-inf` and NaN never win);
/// language 0 when none has a value above `-inf`.
fn worst(values: &[f64], skipped: impl Fn(usize) -> bool) -> usize {
    let (mut best, mut best_value) = (0, f64::NEG_INFINITY);
    for (language, &value) in values.iter().enumerate() {
        if !skipped(language) && value > best_value {
            (best, best_value) = (language, value);
        }
    }
    best
}

/// The window's choice: from the worst language down, the first whose share of the window is at
/// most `threshold`; the last one tried when every language is over it.
fn window_choice(values: &[f64], in_window: &[usize], size: usize, threshold: f64) -> Result<usize, LoopsForever> {
    let mut tried = vec![false; values.len()];
    loop {
        let best = worst(values, |language| tried[language]);
        if in_window[best] as f64 / size as f64 <= threshold {
            return Ok(best);
        }
        if tried[best] {
            return Err(LoopsForever(WINDOW_OVER_THRESHOLD));
        }
        tried[best] = true;
        if tried.iter().all(|&tried| tried) {
            return Ok(best);
        }
    }
}

/// Parity-aware BPE on per-language piece counts (and dev piece counts, one table per language):
/// the merges `ParityBpeTrainer` learns on the same pieces with the same options (see the module's
/// documentation). Ids: 0-255 the bytes, then the new tokens. `on_merge(done)` is called after each
/// merge; when it returns `false` the merges so far come back.
pub fn learn_parity(
    languages: Vec<PieceCounts>,
    dev: Option<Vec<PieceCounts>>,
    options: &ParityOptions,
    mut on_merge: impl FnMut(usize) -> bool,
) -> Result<Learned, LoopsForever> {
    let n = languages.len();
    assert!(n > 0, "parity-aware training needs one language at least");
    let has_dev = dev.is_some();
    if let Some(dev) = &dev {
        assert_eq!(dev.len(), n, "one dev table per language");
    }
    let mut tokens = Tokens::new(TieOrder::ByteLevel);
    for byte in 0..=255u8 {
        tokens.intern(vec![byte]);
    }
    let mut words = Words::default();
    let mut lengths = vec![0u64; 2 * n];
    // Each table is dropped once its words are copied.
    let owners = languages.into_iter().enumerate().chain(dev.unwrap_or_default().into_iter().enumerate().map(|(i, c)| (n + i, c)));
    for (owner, counts) in owners {
        for (piece, count) in counts.iter() {
            lengths[owner] += piece.len() as u64 * count;
            if piece.len() >= 2 && count > 0 {
                words.push(piece.iter().map(|&byte| Rank::from(byte)), count, owner as u32);
            }
        }
    }
    let limit = options.max_token_length.map_or(Limit::None, Limit::MaxTokenLength);
    let mut state = Loop::new(words, n, tokens, limit, lengths, options.global_merges > 0);
    let balance = match (has_dev, &options.ratio) {
        (true, _) => Balance::Dev,
        (false, Some(ratio)) => {
            assert_eq!(ratio.len(), n, "one ratio per language");
            Balance::Ratio(ratio.clone())
        }
        (false, None) => Balance::Training,
    };
    let choice = Choice { variant: options.variant.clone(), balance };
    state.run(
        Stop::Merges(options.num_merges),
        options.global_merges,
        &choice,
        options.min_frequency,
        |merges, _| on_merge(merges),
    )
}

/// DESIGN.md's loop (ties to the greatest bytes) continued from given words: `tokens` are the
/// tokens the words are made of (ids in order; they must include the 256 bytes at ids 0-255), each
/// word a sequence of their ids with a count. Learns until `num_new_tokens` tokens not yet in
/// `tokens` are made (a merge that re-forms a token counts as a merge, not a token) or no pair is
/// left, counting only the pairs `limit` allows. `on_token(done)` is called after each merge with
/// the new tokens so far; when it returns `false` the merges so far come back.
pub fn continue_merges(
    words: impl IntoIterator<Item = (Vec<Rank>, u64)>,
    tokens: impl IntoIterator<Item = Vec<u8>>,
    num_new_tokens: usize,
    limit: Limit,
    mut on_token: impl FnMut(usize) -> bool,
) -> Learned {
    let mut table = Tokens::new(TieOrder::Bytes);
    for token in tokens {
        table.intern(token);
    }
    let mut all = Words::default();
    let mut length = 0u64;
    for (symbols, count) in words {
        length += symbols.len() as u64 * count;
        if symbols.len() >= 2 && count > 0 {
            all.push(symbols, count, 0);
        }
    }
    let mut state = Loop::new(all, 1, table, limit, vec![length, 0], false);
    let choice = Choice { variant: Variant::Base, balance: Balance::Training };
    state
        .run(Stop::NewTokens(num_new_tokens), 0, &choice, 0, |_, tokens| on_token(tokens))
        .expect("one language without a parity choice always stops")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::counts::tests::table;

    fn options(num_merges: usize) -> ParityOptions {
        ParityOptions {
            num_merges,
            global_merges: 0,
            variant: Variant::Base,
            ratio: None,
            min_frequency: 1,
            max_token_length: None,
        }
    }

    fn spelled(languages: &[&PieceCounts], dev: Option<&[&PieceCounts]>, options: &ParityOptions) -> Vec<String> {
        let dev = dev.map(|dev| dev.iter().map(|&counts| counts.clone()).collect());
        let learned = learn_parity(languages.iter().map(|&counts| counts.clone()).collect(), dev, options, |_| true).unwrap();
        let mut bytes: Vec<Vec<u8>> = (0..=255u8).map(|byte| vec![byte]).collect();
        bytes.extend(learned.tokens);
        learned
            .merges
            .iter()
            .map(|&(left, right)| {
                format!(
                    "{} {}",
                    String::from_utf8_lossy(&bytes[left as usize]),
                    String::from_utf8_lossy(&bytes[right as usize])
                )
            })
            .collect()
    }

    /// The examples of `ParityBpeTrainer`'s own unit tests, with its results.
    #[test]
    fn the_oracle_s_own_examples() {
        let (aabb, ccdd) = (table(&[("aabb", 10)]), table(&[("ccdd", 10)]));
        assert_eq!(spelled(&[&aabb, &ccdd], None, &options(6)), ["b b", "d d", "a bb", "c dd", "a abb", "c cdd"]);

        let (ab, cd) = (table(&[("ab", 10)]), table(&[("cd", 5)]));
        let (dev_ab, dev_cd) = (table(&[("ab", 1)]), table(&[("cd", 10)]));
        assert_eq!(spelled(&[&ab, &cd], Some(&[&dev_ab, &dev_cd]), &options(2)), ["c d", "a b"]);

        let (many, few) = (table(&[("aabb", 100)]), table(&[("ccdd", 1)]));
        assert_eq!(spelled(&[&many, &few], None, &options(6)), ["b b", "a bb", "a abb", "d d", "c dd", "c cdd"]);
        let window = ParityOptions { variant: Variant::Window { size: 2, alpha: 1.0 }, ..options(6) };
        assert_eq!(spelled(&[&many, &few], None, &window), ["b b", "a bb", "d d", "a abb", "c dd", "c cdd"]);

        let (ab, cdef) = (table(&[("ab", 10)]), table(&[("cdef", 10)]));
        assert_eq!(spelled(&[&ab, &cdef], None, &options(10)), ["e f", "d ef", "a b", "c def"]);

        let first = table(&[("ab", 5), ("cd", 1)]);
        let second = table(&[("ab", 1), ("cd", 5)]);
        let global = ParityOptions { global_merges: 1, ..options(2) };
        assert_eq!(spelled(&[&first, &second], None, &global), ["c d", "a b"]);
        assert_eq!(spelled(&[&first, &second], None, &options(2)), ["a b", "c d"]);
    }

    #[test]
    fn ties_follow_byte_level_characters() {
        // b"\x01" is U+0101 in the ByteLevel alphabet, above "b".
        let counts = table(&[("ab", 1), ("a\u{1}", 1)]);
        let learned = learn_parity(vec![counts], None, &options(1), |_| true).unwrap();
        assert_eq!(learned.tokens, [b"a\x01".to_vec()]);
        let bytes = continue_merges(
            [(vec![97, 98], 1), (vec![97, 1], 1)],
            (0..=255u8).map(|byte| vec![byte]),
            1,
            Limit::None,
            |_| true,
        );
        assert_eq!(bytes.tokens, [b"ab".to_vec()]);
    }

    #[test]
    fn the_oracle_s_endless_loops_are_errors() {
        let (long, short) = (table(&[("abcdefgh", 1)]), table(&[("xy", 1)]));
        let window = ParityOptions { variant: Variant::Window { size: 3, alpha: 0.6 }, min_frequency: 0, ..options(10) };
        let tables = || vec![long.clone(), short.clone()];
        assert_eq!(learn_parity(tables(), None, &window, |_| true), Err(LoopsForever(WINDOW_OVER_THRESHOLD)));
        let window = ParityOptions { variant: Variant::Window { size: 3, alpha: 2.0 }, min_frequency: 0, ..options(10) };
        assert_eq!(learn_parity(tables(), None, &window, |_| true).unwrap().merges.len(), 8);
        let ratio = ParityOptions { ratio: Some(vec![1.0, 1.0]), min_frequency: 0, ..options(10) };
        let (text, nothing) = (table(&[("abcd", 1)]), table(&[]));
        assert_eq!(learn_parity(vec![text, nothing], None, &ratio, |_| true), Err(LoopsForever(RATIO_WITHOUT_TEXT)));
    }

    #[test]
    fn superword_limits() {
        let mut tokens = Tokens::new(TieOrder::Bytes);
        let words: [&[u8]; 4] = [b" by the", b" way of", b" way of it", b"e:"];
        for token in (0..=255u8).map(|byte| vec![byte]).chain(words.map(<[u8]>::to_vec)) {
            tokens.intern(token);
        }
        let limit = Limit::Superwords { max_words: 4 };
        let allowed = |left: &[u8], right: &[u8]| tokens.allowed(&limit, pack(tokens.ids[left], tokens.ids[right]));
        assert!(allowed(b" by the", b" way of"));
        assert!(!allowed(b" by the", b" way of it"));
        assert!(allowed(b"e:", b"e:"));
        assert!(!allowed(b"e:", b" "));
        assert!(allowed(b" ", b"e:"));
    }

    /// The reference's loop, recounting every pair of every word before each merge: the rule of the
    /// module's documentation read directly.
    fn naive_parity(
        languages: &[Vec<(Vec<u8>, u64)>],
        dev: Option<&[Vec<(Vec<u8>, u64)>]>,
        options: &ParityOptions,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, LoopsForever> {
        type Word = Vec<Vec<u8>>;
        let split = |pieces: &Vec<(Vec<u8>, u64)>| -> Vec<(Word, u64)> {
            pieces.iter().map(|(piece, count)| (piece.iter().map(|&b| vec![b]).collect(), *count)).collect()
        };
        let mut words: Vec<Vec<(Word, u64)>> = languages.iter().map(split).collect();
        let mut dev_words: Vec<Vec<(Word, u64)>> = dev.map(|dev| dev.iter().map(split).collect()).unwrap_or_default();
        let n = languages.len();
        let length = |words: &Vec<(Word, u64)>| words.iter().map(|(word, count)| word.len() as u64 * count).sum::<u64>();
        let initial: Vec<f64> = words.iter().map(|w| length(w) as f64).collect();
        let key = |token: &[u8]| token.iter().map(|&b| BYTE_LEVEL_ORDER[b as usize]).collect::<Vec<u8>>();
        let mut exhausted = vec![false; n];
        let mut window: VecDeque<usize> = VecDeque::new();
        let mut merges = Vec::new();
        let mut idle = 0;
        let size = match options.variant {
            Variant::Base => 100,
            Variant::Window { size, .. } => size,
        };
        while merges.len() < options.num_merges && exhausted.iter().any(|&e| !e) {
            let language = if merges.len() < options.global_merges {
                None
            } else {
                let values: Vec<f64> = (0..n)
                    .map(|l| {
                        if exhausted[l] {
                            f64::NEG_INFINITY
                        } else if dev.is_some() {
                            length(&dev_words[l]) as f64
                        } else if let Some(ratio) = &options.ratio {
                            -((initial[l] / length(&words[l]) as f64) / ratio[l])
                        } else {
                            length(&words[l]) as f64
                        }
                    })
                    .collect();
                Some(match &options.variant {
                    Variant::Base => worst(&values, |_| false),
                    Variant::Window { size, alpha } => {
                        let in_window: Vec<usize> = (0..n).map(|l| window.iter().filter(|&&c| c == l).count()).collect();
                        let chosen = window_choice(&values, &in_window, *size, alpha / n as f64)?;
                        window.push_back(chosen);
                        if window.len() > *size {
                            window.pop_front();
                        }
                        chosen
                    }
                })
            };
            let mut pairs: FxHashMap<(Vec<u8>, Vec<u8>), u64> = FxHashMap::default();
            for (l, language_words) in words.iter().enumerate() {
                if language.is_some_and(|chosen| chosen != l) {
                    continue;
                }
                for (word, count) in language_words {
                    for w in word.windows(2) {
                        let len = w[0].len() + w[1].len();
                        if options.max_token_length.is_none_or(|max| len < max || len == 2) {
                            *pairs.entry((w[0].clone(), w[1].clone())).or_insert(0) += count;
                        }
                    }
                }
            }
            let best = pairs
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then_with(|| (key(&a.0 .0), key(&a.0 .1)).cmp(&(key(&b.0 .0), key(&b.0 .1)))))
                .filter(|(_, count)| *count >= options.min_frequency);
            let Some(((left, right), _)) = best else {
                let Some(language) = language else { break };
                if options.variant == Variant::Base && exhausted[language] {
                    return Err(LoopsForever(RATIO_WITHOUT_TEXT));
                }
                exhausted[language] = true;
                idle += 1;
                if idle > size + n + 1 {
                    return Err(LoopsForever(WINDOW_IDLE));
                }
                continue;
            };
            idle = 0;
            for (word, _) in words.iter_mut().chain(dev_words.iter_mut()).flatten() {
                let mut out: Word = Vec::new();
                let mut i = 0;
                while i < word.len() {
                    if i + 1 < word.len() && word[i] == left && word[i + 1] == right {
                        out.push([left.clone(), right.clone()].concat());
                        i += 2;
                    } else {
                        out.push(word[i].clone());
                        i += 1;
                    }
                }
                *word = out;
            }
            merges.push((left, right));
        }
        Ok(merges)
    }

    /// Up to `pieces` pieces of a few letters, ties galore, bytes whose ByteLevel order differs.
    fn random_corpus(next: &mut impl FnMut() -> u64, pieces: u64) -> Vec<(Vec<u8>, u64)> {
        let alphabet: [&[u8]; 7] = [b"a", b"b", b"c", b" ", b"\x01", "\u{e9}".as_bytes(), "\u{915}".as_bytes()];
        let mut found: FxHashMap<Vec<u8>, u64> = FxHashMap::default();
        for _ in 0..next() % pieces {
            let piece: Vec<u8> = (0..1 + next() % 6).flat_map(|_| alphabet[(next() % 7) as usize].to_vec()).collect();
            *found.entry(piece).or_insert(0) += 1 + next() % 3;
        }
        found.into_iter().collect()
    }

    #[test]
    fn agrees_with_the_naive_loop_on_pseudo_random_corpora() {
        let mut next = crate::test_rng::numbers(0x2508_0479_6a09_e667u64);
        let (mut merges, mut endless) = (0, 0);
        for round in 0..300 {
            let n = 1 + (next() % 4) as usize;
            let languages: Vec<Vec<(Vec<u8>, u64)>> = (0..n).map(|_| random_corpus(&mut next, 25)).collect();
            let dev: Option<Vec<Vec<(Vec<u8>, u64)>>> =
                (round % 3 == 0).then(|| (0..n).map(|_| random_corpus(&mut next, 8)).collect());
            let options = ParityOptions {
                num_merges: (next() % 60) as usize,
                global_merges: [0, 0, 3, 20][(next() % 4) as usize],
                variant: if next() % 2 == 0 {
                    Variant::Base
                } else {
                    Variant::Window { size: [1, 3, 10, 100][(next() % 4) as usize], alpha: [2.0, 1.0, 3.5, 0.6][(next() % 4) as usize] }
                },
                ratio: (round % 3 == 1).then(|| (0..n).map(|_| [0.5, 1.0, 1.5, 2.57][(next() % 4) as usize]).collect()),
                min_frequency: [0, 0, 2, 3][(next() % 4) as usize],
                max_token_length: [None, None, Some(2), Some(3), Some(5)][(next() % 5) as usize],
            };
            let tables: Vec<PieceCounts> = languages.iter().map(|pieces| pieces.iter().cloned().collect()).collect();
            let dev_tables: Option<Vec<PieceCounts>> =
                dev.as_ref().map(|dev| dev.iter().map(|pieces| pieces.iter().cloned().collect()).collect());
            let fast = learn_parity(tables, dev_tables, &options, |_| true);
            let expected = naive_parity(&languages, dev.as_deref(), &options);
            match (fast, expected) {
                (Ok(fast), Ok(expected)) => {
                    let mut bytes: Vec<Vec<u8>> = (0..=255u8).map(|byte| vec![byte]).collect();
                    bytes.extend(fast.tokens);
                    let spelled: Vec<(Vec<u8>, Vec<u8>)> =
                        fast.merges.iter().map(|&(l, r)| (bytes[l as usize].clone(), bytes[r as usize].clone())).collect();
                    assert_eq!(spelled, expected, "round {round}: {options:?}");
                    merges += spelled.len();
                }
                (Err(fast), Err(expected)) => {
                    assert_eq!(fast, expected, "round {round}");
                    endless += 1;
                }
                (fast, expected) => panic!("round {round}: {options:?}: fast {fast:?}, naive {expected:?}"),
            }
        }
        assert!(merges > 2000 && endless > 0, "{merges} merges, {endless} endless loops");
    }
}
