//! SentencePiece's BPE trainer (`spm_train --model_type=bpe`), reproduced piece for piece.
//!
//! Two stages, as in `trainer_interface.cc` and `bpe_model_trainer.cc`:
//!
//! 1. [`WordCounter`] reads sentences (lines), drops those SentencePiece drops (empty, longer than
//!    `max_sentence_length` bytes, holding U+2585), normalizes them, replaces meta pieces (`<unk>`,
//!    control, user-defined and byte pieces) by a boundary, splits them into words at `▁` and counts
//!    the distinct words. SentencePiece keeps every sentence in memory; counting words as they
//!    stream gives the same counts, so memory grows with the number of distinct words only.
//! 2. [`learn_pieces`] picks the required characters from the character coverage and runs
//!    SentencePiece's merge loop, including its approximations: a pair's frequency is cached and
//!    only recomputed after a merge next to it reset it, and only the "active" pairs (the most
//!    frequent 5%, at least 1,000, refreshed every 100 pieces, plus pairs formed since) are
//!    candidates. Pairs are symbols made of two symbols, so one piece can be formed by several
//!    pairs (`aa·a`, `a·aa`); the first to win adds the piece, the others are dropped when they win.

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::{FxHashMap, FxHashSet};
use unic_ucd_age::Age;
use unicode_script::{Script, UnicodeScript};

use crate::normalize::SentencePieceNormalizer;

/// U+2581, the visible space.
pub const SPACE_CHAR: char = '\u{2581}';
/// U+2585, what SentencePiece puts in place of characters outside the required set.
pub const UNKNOWN_CHAR: char = '\u{2585}';
/// U+001F: what meta pieces found in the text are replaced by (a boundary no piece crosses).
/// SentencePiece 0.2.0 and older used the tab; the installed 0.2.x uses U+001F (its
/// `kUPPBoundaryChar`, read from the library's constants), so tabs are ordinary characters.
pub const BOUNDARY_CHAR: char = '\u{1F}';

/// How sentences become words (`TrainerSpec` fields of the same names).
#[derive(Clone, Debug)]
pub struct SentenceOptions {
    pub max_sentence_length: usize,
    pub split_by_whitespace: bool,
    pub allow_whitespace_only_pieces: bool,
    /// Keep only the first this many sentences (0: all), as `input_sentence_size` without
    /// `shuffle_input_sentence`.
    pub first_sentences: u64,
}

/// One thread's share of a batch: words counted, or sentences in order.
type CountedPart = (FxHashMap<Box<str>, u64>, Vec<Box<str>>);

/// Counts the words of a stream of sentences as SentencePiece's trainer sees them.
pub struct WordCounter {
    options: SentenceOptions,
    normalizer: SentencePieceNormalizer,
    meta_pieces: Option<AhoCorasick>,
    boundaries: Vec<String>,
    words: FxHashMap<Box<str>, u64>,
    in_order: Vec<Box<str>>,
    /// Sentences kept so far (the ones SentencePiece loads; the sampler counts these).
    sentences: u64,
    too_long: u64,
}

impl WordCounter {
    pub fn new(
        options: SentenceOptions,
        normalizer: SentencePieceNormalizer,
        meta_pieces: &[&str],
    ) -> Result<Self, String> {
        let meta_pieces = if meta_pieces.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(meta_pieces)
                    .map_err(|error| format!("cannot index the meta pieces: {error}"))?,
            )
        };
        let boundaries = vec![
            BOUNDARY_CHAR.to_string();
            meta_pieces.as_ref().map_or(0, AhoCorasick::patterns_len)
        ];
        Ok(Self {
            options,
            normalizer,
            meta_pieces,
            boundaries,
            words: FxHashMap::default(),
            in_order: Vec::new(),
            sentences: 0,
            too_long: 0,
        })
    }

    /// Sentences loaded so far.
    pub fn sentences(&self) -> u64 {
        self.sentences
    }

    /// Sentences skipped for being longer than `max_sentence_length` bytes.
    pub fn too_long(&self) -> u64 {
        self.too_long
    }

    /// Distinct words so far (sentences without `split_by_whitespace`).
    pub fn distinct_words(&self) -> usize {
        self.words.len() + self.in_order.len()
    }

    /// True once `first_sentences` sentences are loaded: later text is not read.
    pub fn is_full(&self) -> bool {
        self.options.first_sentences > 0 && self.sentences >= self.options.first_sentences
    }

    /// The sentences of `text` (its lines, split at `\n` as `std::getline` does) that
    /// SentencePiece loads, in order, up to the `first_sentences` limit.
    pub fn select<'t>(&mut self, text: &'t str) -> Vec<&'t str> {
        let mut selected = Vec::new();
        for line in text.split('\n') {
            if self.is_full() {
                break;
            }
            if line.is_empty() {
                continue;
            }
            if line.len() > self.options.max_sentence_length {
                self.too_long += 1;
                continue;
            }
            if line.contains(UNKNOWN_CHAR) {
                continue;
            }
            self.sentences += 1;
            selected.push(line);
        }
        selected
    }

    /// One sentence normalized, meta pieces replaced by the boundary.
    pub fn normalize(&self, sentence: &str) -> String {
        let (normalized, _) = self.normalizer.normalize(sentence);
        match &self.meta_pieces {
            Some(matcher) => matcher.replace_all(&normalized, &self.boundaries),
            None => normalized,
        }
    }

    /// Normalizes sentences: with `split_by_whitespace`, their words counted into `words`;
    /// otherwise the normalized sentences in order (empty ones too: SentencePiece removes them
    /// later in its own way).
    fn count_sentences(
        &self,
        sentences: &[&str],
        words: &mut FxHashMap<Box<str>, u64>,
        in_order: &mut Vec<Box<str>>,
    ) {
        for sentence in sentences {
            let normalized = self.normalize(sentence);
            if !self.options.split_by_whitespace {
                in_order.push(normalized.into());
                continue;
            }
            for word in split_into_words(&normalized, self.options.allow_whitespace_only_pieces) {
                if let Some(count) = words.get_mut(word) {
                    *count += 1;
                } else {
                    words.insert(word.into(), 1);
                }
            }
        }
    }

    /// Adds the sentences of `text` (see [`WordCounter::select`]), normalizing on the current
    /// rayon pool.
    pub fn add_text(&mut self, text: &str) {
        use rayon::prelude::*;
        let sentences = self.select(text);
        let mut words = std::mem::take(&mut self.words);
        let mut in_order = std::mem::take(&mut self.in_order);
        if sentences.len() < 256 {
            self.count_sentences(&sentences, &mut words, &mut in_order);
        } else {
            let this = &*self;
            let parts: Vec<CountedPart> = sentences
                .par_chunks(
                    sentences
                        .len()
                        .div_ceil(rayon::current_num_threads() * 4)
                        .max(64),
                )
                .map(|chunk| {
                    let (mut part_words, mut part_order) = (FxHashMap::default(), Vec::new());
                    this.count_sentences(chunk, &mut part_words, &mut part_order);
                    (part_words, part_order)
                })
                .collect();
            for (part_words, part_order) in parts {
                if words.is_empty() {
                    words = part_words;
                } else {
                    for (word, count) in part_words {
                        *words.entry(word).or_insert(0) += count;
                    }
                }
                in_order.extend(part_order);
            }
        }
        self.words = words;
        self.in_order = in_order;
    }

    /// Adds the sentences (lines) of a UTF-8 file, read in blocks cut after a newline.
    /// `on_bytes(n)` reports progress and returns false to stop.
    pub fn add_file(
        &mut self,
        path: &std::path::Path,
        mut on_bytes: impl FnMut(u64) -> bool,
    ) -> Result<(), FileError> {
        use std::io::Read;
        const BLOCK: usize = 8 << 20;
        let io_error = |error| FileError::Io {
            path: path.to_path_buf(),
            error,
        };
        let mut file = std::fs::File::open(path).map_err(io_error)?;
        let mut buffer: Vec<u8> = Vec::with_capacity(BLOCK * 2);
        let mut offset = 0u64;
        let mut at_end = false;
        while !at_end && !self.is_full() {
            let start = buffer.len();
            buffer.resize(start + BLOCK, 0);
            let mut filled = start;
            while filled < buffer.len() {
                let read = file.read(&mut buffer[filled..]).map_err(io_error)?;
                if read == 0 {
                    at_end = true;
                    break;
                }
                filled += read;
            }
            buffer.truncate(filled);
            let cut = if at_end {
                buffer.len()
            } else {
                match buffer.iter().rposition(|&byte| byte == b'\n') {
                    Some(newline) => newline + 1,
                    None => continue,
                }
            };
            let text = std::str::from_utf8(&buffer[..cut]).map_err(|error| FileError::NotUtf8 {
                path: path.to_path_buf(),
                offset: offset + error.valid_up_to() as u64,
            })?;
            self.add_text(text);
            offset += cut as u64;
            buffer.drain(..cut);
            if !on_bytes(cut as u64) {
                return Err(FileError::Interrupted);
            }
        }
        Ok(())
    }

    /// The sentences the merge loop starts from, with their counts: the distinct words (with
    /// `split_by_whitespace`, in no particular order), or every sentence in SentencePiece's order
    /// (empty ones removed as it removes them: swapped with the last, the one swapped in not
    /// checked again).
    pub fn into_sentences(self) -> Vec<(Box<str>, u64)> {
        if self.options.split_by_whitespace {
            return self.words.into_iter().collect();
        }
        let mut sentences = self.in_order;
        let mut index = 0;
        while index < sentences.len() {
            if sentences[index].is_empty() {
                let last = sentences.len() - 1;
                sentences.swap(index, last);
                sentences.truncate(last);
            }
            index += 1;
        }
        sentences
            .into_iter()
            .map(|sentence| (sentence, 1))
            .collect()
    }
}

/// Why a file could not be read.
#[derive(Debug)]
pub enum FileError {
    Io {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    NotUtf8 {
        path: std::path::PathBuf,
        offset: u64,
    },
    Interrupted,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io { path, error } => {
                write!(formatter, "cannot read {}: {error}", path.display())
            }
            Self::NotUtf8 { path, offset } => write!(
                formatter,
                "{} is not UTF-8 text: invalid byte at offset {offset}; convert the file to UTF-8 \
                 (SentencePiece would train on the broken bytes)",
                path.display()
            ),
            Self::Interrupted => write!(formatter, "interrupted"),
        }
    }
}

/// `SplitIntoWords` (whitespace as a prefix): a word starts at the start and at each `▁`, or with
/// `allow_whitespace_only_pieces` at the first `▁` of a run.
pub fn split_into_words(text: &str, allow_whitespace_only_pieces: bool) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = 0;
    let mut in_space_run = false;
    for (at, c) in text.char_indices() {
        let is_space = c == SPACE_CHAR;
        if at == 0 || (is_space && (!in_space_run || !allow_whitespace_only_pieces)) {
            if at > 0 {
                words.push(&text[start..at]);
            }
            start = at;
            in_space_run = true;
        }
        if in_space_run && !is_space {
            in_space_run = false;
        }
    }
    if !text.is_empty() {
        words.push(&text[start..]);
    }
    words
}

/// What makes a piece valid (`TrainerInterface::IsValidSentencePiece`), the `TrainerSpec` fields
/// of the same names.
#[derive(Clone, Debug)]
pub struct PieceRules {
    pub max_sentencepiece_length: usize,
    pub split_by_whitespace: bool,
    pub allow_whitespace_only_pieces: bool,
    pub split_by_unicode_script: bool,
    pub split_by_number: bool,
    pub split_digits: bool,
}

/// A script as SentencePiece's table has it; `None` is its "any" type.
type ScriptClass = Option<Script>;

/// SentencePiece's script of `c`: Unicode 9.0's `Scripts.txt` (the version its table was made
/// from), characters it does not list being Common.
pub fn script_of(c: char) -> Script {
    let known_in_unicode_9 = Age::of(c).is_some_and(|age| {
        let version = age.actual();
        (version.major, version.minor) <= (9, 0)
    });
    if !known_in_unicode_9 {
        return Script::Common;
    }
    match c.script() {
        Script::Unknown => Script::Common,
        script => script,
    }
}

fn is_decimal_digit(c: char) -> bool {
    c.is_ascii_digit() || ('\u{FF10}'..='\u{FF19}').contains(&c)
}

impl PieceRules {
    /// `IsValidSentencePiece` for the characters of `piece`.
    pub fn is_valid(&self, piece: &[char]) -> bool {
        if piece.is_empty() || piece.len() > self.max_sentencepiece_length {
            return false;
        }
        let all_space = piece.iter().all(|&c| c == SPACE_CHAR);
        let mut previous: ScriptClass = None;
        for (position, &c) in piece.iter().enumerate() {
            if c == UNKNOWN_CHAR || c == '\0' || c == BOUNDARY_CHAR || c == ' ' {
                return false;
            }
            if c == SPACE_CHAR {
                if !self.allow_whitespace_only_pieces || !all_space {
                    if self.split_by_whitespace && position > 0 {
                        return false;
                    }
                    if !self.split_by_whitespace && position > 0 && position == piece.len() - 1 {
                        return false;
                    }
                }
                continue;
            }
            let mut script: ScriptClass = match script_of(c) {
                Script::Hiragana | Script::Katakana => Some(Script::Han),
                _ if c == '\u{30FC}' => Some(Script::Han),
                Script::Inherited => previous,
                script => Some(script),
            };
            if !self.split_by_number && is_decimal_digit(c) {
                script = None;
            }
            if self.split_digits && is_decimal_digit(c) && piece.len() > 1 {
                return false;
            }
            if self.split_by_unicode_script
                && script.is_some()
                && previous.is_some()
                && previous != script
            {
                return false;
            }
            previous = script;
        }
        true
    }
}

/// The characters that must be in the vocabulary: the most frequent ones, until their share of
/// all characters reaches `character_coverage` (compared in `f32`, as SentencePiece does), the
/// boundary character left out. Each with its count, most frequent first (ties: lower code point first).
pub fn required_chars(words: &[(Box<str>, u64)], character_coverage: f32) -> Vec<(char, u64)> {
    let mut counts: FxHashMap<char, u64> = FxHashMap::default();
    let mut all = 0u64;
    for (word, count) in words {
        let count = *count;
        for c in word.chars() {
            if c == '\0' {
                continue;
            }
            *counts.entry(c).or_insert(0) += count;
            all += count;
        }
    }
    let mut sorted: Vec<(char, u64)> = counts.into_iter().collect();
    sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut required = Vec::new();
    let mut accumulated = 0u64;
    for (c, count) in sorted {
        let coverage = (accumulated as f64 / all as f64) as f32;
        if coverage >= character_coverage {
            break;
        }
        accumulated += count;
        if c == BOUNDARY_CHAR {
            continue;
        }
        required.push((c, count));
    }
    required
}

const NONE: u32 = u32::MAX;

/// SentencePiece's `port::FingerprintCat`: the key of a pair symbol (Bob Jenkins' 64-bit mix).
fn fingerprint_cat(x: u64, y: u64) -> u64 {
    let (mut a, mut b, mut c) = (x, 0xe08c_1d66_8b75_6f82_u64, y);
    let steps: [(u32, bool); 12] = [
        (43, false),
        (9, true),
        (8, false),
        (38, false),
        (23, true),
        (5, false),
        (35, false),
        (49, true),
        (11, false),
        (12, false),
        (18, true),
        (22, false),
    ];
    for (round, &(shift, left)) in steps.iter().enumerate() {
        match round % 3 {
            0 => {
                a = a.wrapping_sub(b).wrapping_sub(c);
                a ^= if left { c << shift } else { c >> shift };
            }
            1 => {
                b = b.wrapping_sub(c).wrapping_sub(a);
                b ^= if left { a << shift } else { a >> shift };
            }
            _ => {
                c = c.wrapping_sub(a).wrapping_sub(b);
                c ^= if left { b << shift } else { b >> shift };
            }
        }
    }
    c
}

/// A character or a pair of symbols (`bpe::Trainer::Symbol`).
struct Symbol {
    left: u32,
    right: u32,
    text: Box<str>,
    chars: u32,
    is_unknown: bool,
    /// Cached frequency; 0 means "recompute from the positions".
    freq: u64,
    /// Where the pair occurs: word index << 32 | left index << 16 | right index.
    positions: Vec<u64>,
    in_cache: bool,
    active: bool,
}

fn position(word: usize, left: usize, right: usize) -> u64 {
    ((word as u64) << 32) | ((left as u64) << 16) | right as u64
}

fn unpack(position: u64) -> (usize, usize, usize) {
    (
        (position >> 32) as usize,
        ((position >> 16) & 0xFFFF) as usize,
        (position & 0xFFFF) as usize,
    )
}

/// The longest word (in characters) the merge loop takes: positions hold 16-bit indices.
pub const MAX_WORD_CHARS: usize = 1 << 16;

struct Trainer<'r> {
    rules: &'r PieceRules,
    symbols: Vec<Symbol>,
    /// `symbols_cache_`: the live symbols by key (a character's code point, a pair's
    /// fingerprint), and the order the library walks them in.
    cache: FxHashMap<u64, u32>,
    keys: Vec<u64>,
    invalid_pairs: FxHashSet<u64>,
    active: Vec<u32>,
    words: Vec<Vec<u32>>,
    counts: Vec<u64>,
}

impl Trainer<'_> {
    fn char_symbol(&mut self, c: char, required: &FxHashMap<char, u64>) -> u32 {
        let key = u64::from(c);
        if let Some(&id) = self.cache.get(&key) {
            return id;
        }
        let id = self.symbols.len() as u32;
        self.symbols.push(Symbol {
            left: NONE,
            right: NONE,
            text: c.to_string().into(),
            chars: 1,
            is_unknown: c == UNKNOWN_CHAR,
            freq: required.get(&c).copied().unwrap_or(1),
            positions: Vec::new(),
            in_cache: true,
            active: false,
        });
        self.remember(key, id);
        id
    }

    /// `GetPairSymbol`: the symbol of `left` then `right`, made when new and valid.
    fn pair_symbol(&mut self, left: u32, right: u32) -> Option<u32> {
        if self.symbols[left as usize].is_unknown || self.symbols[right as usize].is_unknown {
            return None;
        }
        let key = fingerprint_cat(self.keys[left as usize], self.keys[right as usize]);
        if let Some(&id) = self.cache.get(&key) {
            return Some(id);
        }
        if self.invalid_pairs.contains(&key) {
            return None;
        }
        let text: String = [
            &*self.symbols[left as usize].text,
            &*self.symbols[right as usize].text,
        ]
        .concat();
        let chars: Vec<char> = text.chars().collect();
        if !self.rules.is_valid(&chars) {
            self.invalid_pairs.insert(key);
            return None;
        }
        let id = self.symbols.len() as u32;
        self.symbols.push(Symbol {
            left,
            right,
            text: text.into(),
            chars: chars.len() as u32,
            is_unknown: false,
            freq: 0,
            positions: Vec::new(),
            in_cache: true,
            active: false,
        });
        self.remember(key, id);
        Some(id)
    }

    fn remember(&mut self, key: u64, id: u32) {
        debug_assert_eq!(self.keys.len(), id as usize);
        self.keys.push(key);
        self.cache.insert(key, id);
    }

    /// `symbols_cache_.erase(fp)`.
    fn uncache(&mut self, id: u32) {
        let symbol = &mut self.symbols[id as usize];
        symbol.active = false;
        if symbol.in_cache {
            symbol.in_cache = false;
            let key = self.keys[id as usize];
            if self.cache.get(&key) == Some(&id) {
                self.cache.remove(&key);
            }
        }
    }

    /// `ComputeFreq`: recounts a pair whose frequency was reset, dropping stale positions.
    fn compute_freq(&mut self, id: u32) {
        let symbol = &mut self.symbols[id as usize];
        if symbol.freq > 0 {
            return;
        }
        let (left, right) = (symbol.left, symbol.right);
        let words = &self.words;
        let counts = &self.counts;
        let mut freq = 0;
        symbol.positions.retain(|&packed| {
            let (word, l, r) = unpack(packed);
            let valid = words[word][l] == left && words[word][r] == right;
            if valid {
                freq += counts[word];
            }
            valid
        });
        symbol.freq = freq;
    }

    fn next_index(&self, word: usize, index: usize) -> Option<usize> {
        let symbols = &self.words[word];
        (index + 1..symbols.len()).find(|&i| symbols[i] != NONE)
    }

    fn previous_index(&self, word: usize, index: usize) -> Option<usize> {
        let symbols = &self.words[word];
        (0..index).rev().find(|&i| symbols[i] != NONE)
    }

    /// `AddNewPair`.
    fn add_pair(&mut self, word: usize, left: Option<usize>, right: Option<usize>) {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (a, b) = (self.words[word][left], self.words[word][right]);
        if let Some(id) = self.pair_symbol(a, b) {
            let symbol = &mut self.symbols[id as usize];
            if !symbol.active {
                symbol.active = true;
                self.active.push(id);
            }
            symbol.positions.push(position(word, left, right));
        }
    }

    /// `ResetFreq`.
    fn reset_freq(&mut self, word: usize, left: Option<usize>, right: Option<usize>, best: u32) {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (a, b) = (self.words[word][left], self.words[word][right]);
        if let Some(id) = self.pair_symbol(a, b) {
            if id != best {
                self.symbols[id as usize].freq = 0;
            }
        }
    }

    /// `UpdateActiveSymbols`: the most frequent pairs become the candidates. Pairs tied at the
    /// cut are taken in the order they were made; SentencePiece takes them in the iteration order
    /// of its `absl::flat_hash_map` (then `std::partial_sort`), which this does not reproduce.
    fn update_active(&mut self) -> Result<(), String> {
        let mut ranked: Vec<(u64, u32)> = Vec::with_capacity(self.cache.len());
        let pairs: Vec<u32> = self
            .cache
            .values()
            .copied()
            .filter(|&id| self.symbols[id as usize].left != NONE)
            .collect();
        for id in pairs {
            self.compute_freq(id);
            ranked.push((self.symbols[id as usize].freq, id));
        }
        if ranked.is_empty() {
            return Err("no pair of symbols is left to merge".into());
        }
        let wanted = ((self.cache.len() as f32) * 0.05f32) as i64;
        let size = wanted.max(1000).min(ranked.len() as i64) as usize;
        if size < ranked.len() {
            ranked.select_nth_unstable_by(size - 1, |a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        }
        for &id in &self.active {
            self.symbols[id as usize].active = false;
        }
        self.active.clear();
        for &(_, id) in &ranked[..size] {
            self.symbols[id as usize].active = true;
            self.active.push(id);
        }
        Ok(())
    }

    /// The best active pair: most frequent, then fewest characters, then the smallest text, then
    /// the first made.
    fn best_active(&mut self) -> Option<u32> {
        let mut active = std::mem::take(&mut self.active);
        active.retain(|&id| self.symbols[id as usize].active);
        let mut best: Option<u32> = None;
        for &id in &active {
            self.compute_freq(id);
            let better = match best {
                None => true,
                Some(best_id) => {
                    let (candidate, best) =
                        (&self.symbols[id as usize], &self.symbols[best_id as usize]);
                    candidate.freq > best.freq
                        || (candidate.freq == best.freq
                            && (candidate.chars < best.chars
                                || (candidate.chars == best.chars
                                    && (candidate.text < best.text
                                        || (candidate.text == best.text && id < best_id)))))
                }
            };
            if better {
                best = Some(id);
            }
        }
        self.active = active;
        best
    }

    /// Replaces every occurrence of the pair `best` by it (the main loop's body).
    fn merge(&mut self, best: u32) {
        let mut positions = std::mem::take(&mut self.symbols[best as usize].positions);
        positions.sort_unstable();
        positions.dedup();
        for &packed in &positions {
            let (word, left, right) = unpack(packed);
            if self.words[word][left] == NONE {
                continue;
            }
            debug_assert_eq!(self.words[word][left], self.symbols[best as usize].left);
            debug_assert_eq!(self.words[word][right], self.symbols[best as usize].right);
            let next = self.next_index(word, right);
            let previous = self.previous_index(word, left);
            self.reset_freq(word, previous, Some(left), best);
            self.reset_freq(word, Some(right), next, best);
            self.words[word][left] = best;
            self.words[word][right] = NONE;
            self.add_pair(word, previous, Some(left));
            self.add_pair(word, Some(left), next);
        }
    }
}

/// A learned piece and its score.
pub type ScoredPiece = (String, f32);

/// Learns `merges_wanted` pieces from `sentences` (from [`WordCounter::into_sentences`]:
/// SentencePiece's BPE loop), then appends the required characters. With `in_order` the
/// sentences are taken in the order given (SentencePiece without `split_by_whitespace`);
/// otherwise, their rare characters replaced, as SentencePiece sorts its words. `on_piece(count)` reports progress and returns false to stop. Fails when
/// the words run out of pairs first (SentencePiece: "Vocabulary size too high").
pub fn learn_pieces(
    sentences: Vec<(Box<str>, u64)>,
    in_order: bool,
    required: &[(char, u64)],
    merges_wanted: usize,
    rules: &PieceRules,
    mut on_piece: impl FnMut(usize) -> bool,
) -> Result<Vec<ScoredPiece>, String> {
    let required_counts: FxHashMap<char, u64> = required.iter().copied().collect();
    if required_counts.contains_key(&UNKNOWN_CHAR) {
        return Err(format!(
            "the normalized corpus holds {UNKNOWN_CHAR:?} (U+2585), which SentencePiece reserves for \
             unknown characters; remove it from the corpus"
        ));
    }
    let mut trainer = Trainer {
        rules,
        symbols: Vec::new(),
        cache: FxHashMap::default(),
        keys: Vec::new(),
        invalid_pairs: FxHashSet::default(),
        active: Vec::new(),
        words: Vec::new(),
        counts: Vec::new(),
    };
    // Rare characters become U+2585 first; SentencePiece then counts the words (merging those
    // that became equal) and sorts them (most frequent first, then by text). The order decides
    // the order symbols are made in, and so its cache's order.
    let replace = |text: &str| -> Box<str> {
        text.chars()
            .map(|c| {
                if required_counts.contains_key(&c) {
                    c
                } else {
                    UNKNOWN_CHAR
                }
            })
            .collect::<String>()
            .into()
    };
    let sentences: Vec<(Box<str>, u64)> = if in_order {
        sentences
            .into_iter()
            .map(|(text, count)| (replace(&text), count))
            .collect()
    } else {
        let mut merged: FxHashMap<Box<str>, u64> = FxHashMap::default();
        for (text, count) in sentences {
            *merged.entry(replace(&text)).or_insert(0) += count;
        }
        let mut sorted: Vec<(Box<str>, u64)> = merged.into_iter().collect();
        sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        sorted
    };
    trainer.words.reserve(sentences.len());
    trainer.counts.reserve(sentences.len());
    for (word, count) in sentences {
        let symbols: Vec<u32> = word
            .chars()
            .map(|c| trainer.char_symbol(c, &required_counts))
            .collect();
        if symbols.len() > MAX_WORD_CHARS {
            return Err(format!(
                "a word of {} characters is longer than the {MAX_WORD_CHARS} SentencePiece's trainer \
                 can hold (it aborts on such input); lower max_sentence_length or keep \
                 split_by_whitespace=True",
                symbols.len()
            ));
        }
        trainer.words.push(symbols);
        trainer.counts.push(count);
    }
    for word in 0..trainer.words.len() {
        for right in 1..trainer.words[word].len() {
            trainer.add_pair(word, Some(right - 1), Some(right));
        }
    }
    let mut pieces: Vec<ScoredPiece> = Vec::with_capacity(merges_wanted + required.len());
    let mut seen: FxHashSet<Box<str>> = FxHashSet::default();
    while pieces.len() < merges_wanted {
        if pieces.len().is_multiple_of(100) {
            trainer
                .update_active()
                .map_err(|_| too_high(merges_wanted, pieces.len()))?;
        }
        let Some(best) = trainer.best_active() else {
            return Err(too_high(merges_wanted, pieces.len()));
        };
        let text = trainer.symbols[best as usize].text.clone();
        if seen.contains(&text) {
            trainer.uncache(best);
            continue;
        }
        seen.insert(text.clone());
        pieces.push((text.into(), -(pieces.len() as f32)));
        trainer.merge(best);
        trainer.uncache(best);
        if !on_piece(pieces.len()) {
            return Err("interrupted".into());
        }
    }
    for &(c, _) in required {
        pieces.push((c.to_string(), -(pieces.len() as f32)));
    }
    Ok(pieces)
}

fn too_high(wanted: usize, learned: usize) -> String {
    format!(
        "the corpus has pairs for only {learned} merged pieces, fewer than the {wanted} this vocab_size \
         needs (SentencePiece fails alike: \"Vocabulary size too high\")"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> PieceRules {
        PieceRules {
            max_sentencepiece_length: 16,
            split_by_whitespace: true,
            allow_whitespace_only_pieces: false,
            split_by_unicode_script: true,
            split_by_number: true,
            split_digits: false,
        }
    }

    fn chars(text: &str) -> Vec<char> {
        text.chars().collect()
    }

    #[test]
    fn words_start_at_each_space_or_at_each_space_run() {
        assert_eq!(split_into_words("▁a▁▁b", false), ["▁a", "▁", "▁b"]);
        assert_eq!(split_into_words("▁a▁▁b", true), ["▁a", "▁▁b"]);
        assert_eq!(split_into_words("ab▁c", true), ["ab", "▁c"]);
        assert!(split_into_words("", false).is_empty());
    }

    #[test]
    fn pieces_keep_one_script_and_spaces_in_front() {
        let rules = rules();
        assert!(rules.is_valid(&chars("▁ab")));
        assert!(!rules.is_valid(&chars("a▁")));
        assert!(!rules.is_valid(&chars("a,")));
        assert!(rules.is_valid(&chars("ひら漢")), "kana joins Han");
        assert!(!rules.is_valid(&chars("aб")));
        assert!(
            rules.is_valid(&chars("e\u{301}")),
            "a combining mark takes its base's script"
        );
        assert!(!rules.is_valid(&chars("▁▁")));
        let spaces = PieceRules {
            allow_whitespace_only_pieces: true,
            ..rules.clone()
        };
        assert!(spaces.is_valid(&chars("▁▁")));
        let digits = PieceRules {
            split_digits: true,
            ..rules.clone()
        };
        assert!(!digits.is_valid(&chars("12")) && rules.is_valid(&chars("12")));
        assert!(!rules.is_valid(&chars("a1")));
        let numbers = PieceRules {
            split_by_number: false,
            ..rules
        };
        assert!(numbers.is_valid(&chars("a1")));
    }

    #[test]
    fn characters_new_after_unicode_9_are_common() {
        assert_eq!(script_of('\u{9FD5}'), Script::Han);
        assert_eq!(script_of('\u{9FD6}'), Script::Common, "added in Unicode 10");
    }

    #[test]
    fn coverage_stops_at_the_share_asked() {
        let words: Vec<(Box<str>, u64)> = vec![("aab".into(), 10), ("c".into(), 1)];
        let required = required_chars(&words, 0.9);
        assert_eq!(required, [('a', 20), ('b', 10)]);
        assert_eq!(required_chars(&words, 1.0).len(), 3);
    }

    #[test]
    fn the_most_frequent_pair_is_merged_first() {
        let words: Vec<(Box<str>, u64)> =
            vec![("▁ab".into(), 3), ("▁abc".into(), 2), ("▁b".into(), 1)];
        let required = required_chars(&words, 1.0);
        let pieces = learn_pieces(words, false, &required, 3, &rules(), |_| true).unwrap();
        let texts: Vec<&str> = pieces.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(&texts[..3], ["ab", "▁ab", "▁abc"]);
        assert_eq!(pieces[3].1, -3.0);
    }
}
