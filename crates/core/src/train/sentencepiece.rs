//! SentencePiece's BPE trainer (`spm_train --model_type=bpe`, sentencepiece 0.2.3), reproduced
//! piece for piece.
//!
//! Two stages, as in `trainer_interface.cc` and `bpe_model_trainer.cc`:
//!
//! 1. [`WordCounter`] reads sentences (lines), drops those SentencePiece drops (empty, longer than
//!    `max_sentence_length` bytes, holding U+2585), normalizes them, replaces meta pieces (`<unk>`,
//!    control, user-defined and byte pieces) by a boundary, splits them into words at `▁` and counts
//!    the distinct words. SentencePiece keeps every sentence in memory; counting words as they
//!    stream gives the same counts, so memory grows with the number of distinct words only.
//! 2. [`learn_pieces`] picks the required characters from the character coverage and runs
//!    SentencePiece's merge loop: the pair of symbols with the highest frequency wins (ties: fewer
//!    characters, then the smaller text), its occurrences are replaced, and the frequencies of the
//!    pairs next to them are updated. Pairs are symbols made of two symbols, so one piece can be
//!    formed by several pairs (`aa·a`, `a·aa`); the first to win adds the piece, the others are
//!    dropped when they win. Frequencies are kept exact as SentencePiece keeps them (it adds on new
//!    pairs and subtracts on broken ones), and the candidates sit in a priority queue as in
//!    SentencePiece; where SentencePiece's queue leaves an order open (two pairs with the same
//!    text and frequency), the pair with the shorter left part wins.
//!
//! The result does not depend on the order of the words nor on the number of threads.

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
/// SentencePiece 0.2.0 and older used the tab; 0.2.3 uses U+001F (`kPretokenizationBoundaryChar`
/// in its `trainer_interface.cc`), so tabs are ordinary characters.
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

/// Distinct words (sentences without `split_by_whitespace`) and how often each occurs.
pub type WordCounts = FxHashMap<Box<str>, u64>;

/// Counts the words of a stream of sentences as SentencePiece's trainer sees them.
///
/// Each worker thread counts into its own table, kept across blocks of text; the tables are
/// added up once, at the end. Memory: the distinct words, once per worker at most.
pub struct WordCounter {
    options: SentenceOptions,
    normalizer: SentencePieceNormalizer,
    meta_pieces: Option<AhoCorasick>,
    shards: Vec<WordCounts>,
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
        Ok(Self {
            options,
            normalizer,
            meta_pieces,
            shards: Vec::new(),
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

    /// Distinct words so far (an upper bound while the workers' tables are apart).
    pub fn distinct_words(&self) -> usize {
        self.shards.iter().map(FxHashMap::len).max().unwrap_or(0)
    }

    /// True once `first_sentences` sentences are loaded: later text is not read.
    pub fn is_full(&self) -> bool {
        self.options.first_sentences > 0 && self.sentences >= self.options.first_sentences
    }

    /// The sentences of `text` (its lines, split at `\n` as `std::getline` does) that
    /// SentencePiece loads, in order, up to the `first_sentences` limit.
    pub fn select<'t>(&mut self, text: &'t str) -> Vec<&'t str> {
        let mut selected = Vec::new();
        let may_hold_unknown = text.contains(UNKNOWN_CHAR);
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
            if may_hold_unknown && line.contains(UNKNOWN_CHAR) {
                continue;
            }
            self.sentences += 1;
            selected.push(line);
        }
        selected
    }

    /// One sentence normalized, meta pieces replaced by the boundary, into `normalized` (`spare`
    /// is scratch space).
    pub fn normalize_into(&self, sentence: &str, normalized: &mut String, spare: &mut String) {
        normalized.clear();
        if self.normalizer.is_identity() {
            escape_spaces(sentence, self.normalizer.add_dummy_prefix(), normalized);
        } else {
            normalized.push_str(&self.normalizer.normalize(sentence).0);
        }
        if let Some(matcher) = &self.meta_pieces {
            if matcher.find(normalized.as_str()).is_some() {
                spare.clear();
                matcher.replace_all_with(normalized, spare, |_, _, out| {
                    out.push(BOUNDARY_CHAR);
                    true
                });
                std::mem::swap(normalized, spare);
            }
        }
    }

    /// One sentence normalized, meta pieces replaced by the boundary.
    pub fn normalize(&self, sentence: &str) -> String {
        let (mut normalized, mut spare) = (String::new(), String::new());
        self.normalize_into(sentence, &mut normalized, &mut spare);
        normalized
    }

    /// Normalizes sentences and counts their words (or, without `split_by_whitespace`, the
    /// sentences themselves) into `words`.
    fn count_sentences(&self, sentences: &[&str], words: &mut WordCounts) {
        let (mut normalized, mut spare) = (String::new(), String::new());
        let mut count = |word: &str| {
            if let Some(count) = words.get_mut(word) {
                *count += 1;
            } else {
                words.insert(word.into(), 1);
            }
        };
        for sentence in sentences {
            self.normalize_into(sentence, &mut normalized, &mut spare);
            if !self.options.split_by_whitespace {
                // SentencePiece removes the sentences normalization left empty.
                if !normalized.is_empty() {
                    count(&normalized);
                }
                continue;
            }
            for_each_word(
                &normalized,
                self.options.allow_whitespace_only_pieces,
                &mut count,
            );
        }
    }

    /// Adds the sentences of `text` (see [`WordCounter::select`]), normalizing and counting on the
    /// current rayon pool.
    pub fn add_text(&mut self, text: &str) {
        use rayon::prelude::*;
        let sentences = self.select(text);
        if sentences.is_empty() {
            return;
        }
        let workers = rayon::current_num_threads().max(1);
        if self.shards.len() < workers {
            self.shards.resize_with(workers, WordCounts::default);
        }
        let mut shards = std::mem::take(&mut self.shards);
        if sentences.len() < 256 || shards.len() == 1 {
            self.count_sentences(&sentences, &mut shards[0]);
        } else {
            // Contiguous parts of about the same number of bytes, one per worker.
            let bytes: usize = sentences.iter().map(|sentence| sentence.len()).sum();
            let share = bytes.div_ceil(shards.len());
            let mut parts: Vec<&[&str]> = Vec::with_capacity(shards.len());
            let (mut start, mut size) = (0, 0);
            for (index, sentence) in sentences.iter().enumerate() {
                size += sentence.len();
                if size >= share && parts.len() + 1 < shards.len() {
                    parts.push(&sentences[start..=index]);
                    (start, size) = (index + 1, 0);
                }
            }
            parts.push(&sentences[start..]);
            let this = &*self;
            shards
                .par_iter_mut()
                .zip(parts)
                .for_each(|(shard, part)| this.count_sentences(part, shard));
        }
        self.shards = shards;
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

    /// The distinct words (sentences without `split_by_whitespace`) and their counts, the
    /// workers' tables added up.
    pub fn into_words(self) -> WordCounts {
        let mut shards = self.shards.into_iter();
        let mut words = shards.next().unwrap_or_default();
        for shard in shards {
            words.reserve(shard.len() / 4);
            for (word, count) in shard {
                if let Some(total) = words.get_mut(&word) {
                    *total += count;
                } else {
                    words.insert(word, count);
                }
            }
        }
        words
    }
}

/// `Normalizer::Normalize` without a character map nor `remove_extra_whitespaces`: the dummy
/// prefix, then the text with each space escaped as `▁` (an empty text stays empty).
fn escape_spaces(text: &str, add_dummy_prefix: bool, out: &mut String) {
    if text.is_empty() {
        return;
    }
    if add_dummy_prefix {
        out.push(SPACE_CHAR);
    }
    let mut rest = text;
    while let Some(space) = memchr::memchr(b' ', rest.as_bytes()) {
        out.push_str(&rest[..space]);
        out.push(SPACE_CHAR);
        rest = &rest[space + 1..];
    }
    out.push_str(rest);
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
/// `allow_whitespace_only_pieces` at the first `▁` of a run. Calls `word` on each.
pub fn for_each_word<'t>(
    text: &'t str,
    allow_whitespace_only_pieces: bool,
    mut word: impl FnMut(&'t str),
) {
    if text.is_empty() {
        return;
    }
    const SPACE: &[u8] = "\u{2581}".as_bytes();
    let mut start = 0;
    let mut last_space_end = usize::MAX;
    for at in memchr::memmem::find_iter(text.as_bytes(), SPACE) {
        if at > 0 && !(allow_whitespace_only_pieces && last_space_end == at) {
            word(&text[start..at]);
            start = at;
        }
        last_space_end = at + SPACE.len();
    }
    word(&text[start..]);
}

/// The words of `text` (see [`for_each_word`]).
pub fn split_into_words(text: &str, allow_whitespace_only_pieces: bool) -> Vec<&str> {
    let mut words = Vec::new();
    for_each_word(text, allow_whitespace_only_pieces, |word| words.push(word));
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
        self.is_valid_with(piece.iter().copied(), piece.len(), script_of)
    }

    /// `IsValidSentencePiece` for the `length` characters `piece` yields, with `script` giving
    /// [`script_of`] (from a table, say).
    pub fn is_valid_with(
        &self,
        piece: impl Iterator<Item = char> + Clone,
        length: usize,
        mut script: impl FnMut(char) -> Script,
    ) -> bool {
        if length == 0 || length > self.max_sentencepiece_length {
            return false;
        }
        let all_space = piece.clone().all(|c| c == SPACE_CHAR);
        let mut previous: ScriptClass = None;
        for (position, c) in piece.enumerate() {
            if c == UNKNOWN_CHAR || c == '\0' || c == BOUNDARY_CHAR || c == ' ' {
                return false;
            }
            if c == SPACE_CHAR {
                if !self.allow_whitespace_only_pieces || !all_space {
                    if self.split_by_whitespace && position > 0 {
                        return false;
                    }
                    if !self.split_by_whitespace && position > 0 && position == length - 1 {
                        return false;
                    }
                }
                continue;
            }
            let mut class: ScriptClass = match script(c) {
                Script::Hiragana | Script::Katakana => Some(Script::Han),
                _ if c == '\u{30FC}' => Some(Script::Han),
                Script::Inherited => previous,
                other => Some(other),
            };
            if !self.split_by_number && is_decimal_digit(c) {
                class = None;
            }
            if self.split_digits && is_decimal_digit(c) && length > 1 {
                return false;
            }
            if self.split_by_unicode_script
                && class.is_some()
                && previous.is_some()
                && previous != class
            {
                return false;
            }
            previous = class;
        }
        true
    }
}

/// The characters that must be in the vocabulary: the most frequent ones, until their share of
/// all characters reaches `character_coverage` (compared in `f32`, as SentencePiece does), the
/// boundary character left out. Each with its count, most frequent first (ties: lower code point first).
pub fn required_chars(words: &WordCounts, character_coverage: f32) -> Vec<(char, u64)> {
    let mut counts: FxHashMap<char, u64> = FxHashMap::default();
    let mut all = 0u64;
    for (word, &count) in words {
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

/// A character or a pair of symbols (`bpe::Trainer::Symbol`).
struct Symbol {
    /// The two symbols of a pair; `NONE` for a character.
    left: u32,
    right: u32,
    /// The text: `texts[text_start..text_start + text_len]`.
    text_start: usize,
    text_len: u32,
    chars: u32,
    /// Characters of the left part (the last tie-break between pairs of the same text).
    left_chars: u32,
    /// Occurrences, weighted by the counts of their words: exact at all times.
    freq: u64,
    /// Where the pair was formed: word index << 32 | index of its left symbol in the word, in
    /// the order formed. Entries whose symbols changed since are skipped.
    positions: Vec<u64>,
    is_unknown: bool,
    /// Not yet merged nor dropped as a duplicate.
    active: bool,
    /// Formed again since the last step: its frequency goes into the queue after this one.
    pending: bool,
}

fn position(word: usize, left: usize) -> u64 {
    ((word as u64) << 32) | left as u64
}

/// The ranking of queue entries: frequency, then fewer characters, then the smaller text
/// (`QueueEntryComparator`), then the shorter left part.
fn ranks_before(symbols: &[Symbol], texts: &str, a: (u64, u32), b: (u64, u32)) -> bool {
    if a.0 != b.0 {
        return a.0 > b.0;
    }
    let (x, y) = (&symbols[a.1 as usize], &symbols[b.1 as usize]);
    if x.chars != y.chars {
        return x.chars < y.chars;
    }
    let text =
        |symbol: &Symbol| &texts[symbol.text_start..symbol.text_start + symbol.text_len as usize];
    match text(x).cmp(text(y)) {
        std::cmp::Ordering::Equal => (x.left_chars, a.1) < (y.left_chars, b.1),
        order => order.is_lt(),
    }
}

/// A binary max-heap of (frequency, symbol) entries under [`ranks_before`].
#[derive(Default)]
struct Queue {
    entries: Vec<(u64, u32)>,
}

impl Queue {
    fn push(&mut self, entry: (u64, u32), symbols: &[Symbol], texts: &str) {
        self.entries.push(entry);
        let mut child = self.entries.len() - 1;
        while child > 0 {
            let parent = (child - 1) / 2;
            if !ranks_before(symbols, texts, self.entries[child], self.entries[parent]) {
                break;
            }
            self.entries.swap(child, parent);
            child = parent;
        }
    }

    fn pop(&mut self, symbols: &[Symbol], texts: &str) -> Option<(u64, u32)> {
        let last = self.entries.pop()?;
        if self.entries.is_empty() {
            return Some(last);
        }
        let top = std::mem::replace(&mut self.entries[0], last);
        let mut parent = 0;
        loop {
            let left = 2 * parent + 1;
            if left >= self.entries.len() {
                break;
            }
            let right = left + 1;
            let child = if right < self.entries.len()
                && ranks_before(symbols, texts, self.entries[right], self.entries[left])
            {
                right
            } else {
                left
            };
            if !ranks_before(symbols, texts, self.entries[child], self.entries[parent]) {
                break;
            }
            self.entries.swap(child, parent);
            parent = child;
        }
        Some(top)
    }
}

struct Trainer<'r> {
    rules: &'r PieceRules,
    symbols: Vec<Symbol>,
    /// Every symbol's text, one after the other.
    texts: String,
    /// `symbols_cache_`: the live pair symbols by their two parts.
    pairs: FxHashMap<u64, u32>,
    /// Pairs that make no valid piece.
    invalid_pairs: FxHashSet<u64>,
    /// SentencePiece's script class of each character met, for [`PieceRules::is_valid_with`].
    scripts: FxHashMap<char, Script>,
    queue: Queue,
    pending: Vec<u32>,
    /// The words' symbols, one word after the other (`NONE` where a symbol was merged into the
    /// one before it), where each word starts, and each word's count.
    symbols_at: Vec<u32>,
    word_starts: Vec<usize>,
    counts: Vec<u64>,
}

fn pair_key(left: u32, right: u32) -> u64 {
    (u64::from(left) << 32) | u64::from(right)
}

impl Trainer<'_> {
    fn text(&self, id: u32) -> &str {
        let symbol = &self.symbols[id as usize];
        &self.texts[symbol.text_start..symbol.text_start + symbol.text_len as usize]
    }

    fn char_symbol(&mut self, c: char, is_unknown: bool) -> u32 {
        let id = self.symbols.len() as u32;
        let text_start = self.texts.len();
        self.texts.push(c);
        self.symbols.push(Symbol {
            left: NONE,
            right: NONE,
            text_start,
            text_len: c.len_utf8() as u32,
            chars: 1,
            left_chars: 0,
            freq: 0,
            positions: Vec::new(),
            is_unknown,
            active: false,
            pending: false,
        });
        id
    }

    /// `GetPairSymbol`: the live symbol of `left` then `right`, made when new and valid.
    fn pair_symbol(&mut self, left: u32, right: u32) -> Option<u32> {
        let key = pair_key(left, right);
        if let Some(&id) = self.pairs.get(&key) {
            return Some(id);
        }
        let (left_symbol, right_symbol) =
            (&self.symbols[left as usize], &self.symbols[right as usize]);
        if left_symbol.is_unknown || right_symbol.is_unknown || self.invalid_pairs.contains(&key) {
            return None;
        }
        let chars = left_symbol.chars + right_symbol.chars;
        let left_chars = left_symbol.chars;
        let valid = chars as usize <= self.rules.max_sentencepiece_length && {
            let text = [self.text(left), self.text(right)].concat();
            let scripts = &mut self.scripts;
            self.rules.is_valid_with(text.chars(), chars as usize, |c| {
                *scripts.entry(c).or_insert_with(|| script_of(c))
            })
        };
        if !valid {
            self.invalid_pairs.insert(key);
            return None;
        }
        let text_start = self.texts.len();
        let (left_start, left_len) = {
            let symbol = &self.symbols[left as usize];
            (symbol.text_start, symbol.text_len as usize)
        };
        let (right_start, right_len) = {
            let symbol = &self.symbols[right as usize];
            (symbol.text_start, symbol.text_len as usize)
        };
        self.texts
            .extend_from_within(left_start..left_start + left_len);
        self.texts
            .extend_from_within(right_start..right_start + right_len);
        let id = self.symbols.len() as u32;
        self.symbols.push(Symbol {
            left,
            right,
            text_start,
            text_len: (left_len + right_len) as u32,
            chars,
            left_chars,
            freq: 0,
            positions: Vec::new(),
            is_unknown: false,
            active: true,
            pending: false,
        });
        self.pairs.insert(key, id);
        Some(id)
    }

    /// `symbols_cache_.erase(fp)`: the pair is neither found nor ranked again.
    fn drop_pair(&mut self, id: u32) {
        let symbol = &mut self.symbols[id as usize];
        symbol.active = false;
        symbol.positions = Vec::new();
        let key = pair_key(symbol.left, symbol.right);
        if self.pairs.get(&key) == Some(&id) {
            self.pairs.remove(&key);
        }
    }

    fn next_index(&self, word: usize, index: usize) -> Option<usize> {
        let end = self.word_starts[word + 1];
        (index + 1..end).find(|&i| self.symbols_at[i] != NONE)
    }

    fn previous_index(&self, word: usize, index: usize) -> Option<usize> {
        let start = self.word_starts[word];
        (start..index).rev().find(|&i| self.symbols_at[i] != NONE)
    }

    /// `AddNewPair`: the pair at `left`, `right` (indices into `symbols_at`) is formed.
    fn add_pair(&mut self, word: usize, left: Option<usize>, right: Option<usize>) {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (a, b) = (self.symbols_at[left], self.symbols_at[right]);
        if let Some(id) = self.pair_symbol(a, b) {
            let count = self.counts[word];
            let symbol = &mut self.symbols[id as usize];
            symbol
                .positions
                .push(position(word, left - self.word_starts[word]));
            symbol.freq += count;
            if !symbol.pending {
                symbol.pending = true;
                self.pending.push(id);
            }
        }
    }

    /// `ResetFreq`: the pair at `left`, `right` is broken.
    fn break_pair(&mut self, word: usize, left: Option<usize>, right: Option<usize>, best: u32) {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let key = pair_key(self.symbols_at[left], self.symbols_at[right]);
        if let Some(&id) = self.pairs.get(&key) {
            if id != best {
                let symbol = &mut self.symbols[id as usize];
                symbol.freq -= self.counts[word];
            }
        }
    }

    /// Queues the pairs formed since the last step with their new frequencies.
    fn queue_pending(&mut self) {
        for id in std::mem::take(&mut self.pending) {
            let symbol = &mut self.symbols[id as usize];
            symbol.pending = false;
            if symbol.active {
                let entry = (symbol.freq, id);
                self.queue.push(entry, &self.symbols, &self.texts);
            }
        }
    }

    /// The best live pair. An entry whose frequency fell since it was queued goes back in with the
    /// frequency it has now; one whose frequency rose has a newer entry.
    fn best(&mut self) -> Option<u32> {
        while let Some((freq, id)) = self.queue.pop(&self.symbols, &self.texts) {
            let symbol = &self.symbols[id as usize];
            if !symbol.active || freq < symbol.freq {
                continue;
            }
            if freq > symbol.freq {
                let entry = (symbol.freq, id);
                self.queue.push(entry, &self.symbols, &self.texts);
                continue;
            }
            return Some(id);
        }
        None
    }

    /// `AcceptSymbol`: replaces every occurrence of the pair `best` by it.
    fn merge(&mut self, best: u32) {
        let positions = std::mem::take(&mut self.symbols[best as usize].positions);
        let (best_left, best_right) = {
            let symbol = &self.symbols[best as usize];
            (symbol.left, symbol.right)
        };
        for &packed in &positions {
            let word = (packed >> 32) as usize;
            let left = self.word_starts[word] + (packed & 0xFFFF_FFFF) as usize;
            if self.symbols_at[left] != best_left {
                continue;
            }
            let Some(right) = self.next_index(word, left) else {
                continue;
            };
            if self.symbols_at[right] != best_right {
                continue;
            }
            let next = self.next_index(word, right);
            let previous = self.previous_index(word, left);
            self.break_pair(word, previous, Some(left), best);
            self.break_pair(word, Some(right), next, best);
            self.symbols_at[left] = best;
            self.symbols_at[right] = NONE;
            self.add_pair(word, previous, Some(left));
            self.add_pair(word, Some(left), next);
        }
    }
}

/// A learned piece and its score.
pub type ScoredPiece = (String, f32);

/// Learns `merges_wanted` pieces from the counted `words` (SentencePiece's BPE loop), then
/// appends the required characters. `on_piece(count)` reports progress and returns false to stop.
/// Fails when the words run out of pairs first (SentencePiece: "Vocabulary size too high").
pub fn learn_pieces(
    words: WordCounts,
    required: &[(char, u64)],
    merges_wanted: usize,
    rules: &PieceRules,
    mut on_piece: impl FnMut(usize) -> bool,
) -> Result<Vec<ScoredPiece>, String> {
    if required.iter().any(|&(c, _)| c == UNKNOWN_CHAR) {
        return Err(format!(
            "the normalized corpus holds {UNKNOWN_CHAR:?} (U+2585), which SentencePiece reserves for \
             unknown characters; remove it from the corpus"
        ));
    }
    if words.len() >= NONE as usize {
        return Err(format!(
            "{} distinct words are more than this trainer holds",
            words.len()
        ));
    }
    let mut trainer = Trainer {
        rules,
        symbols: Vec::new(),
        texts: String::new(),
        pairs: FxHashMap::default(),
        invalid_pairs: FxHashSet::default(),
        scripts: FxHashMap::default(),
        queue: Queue::default(),
        pending: Vec::new(),
        symbols_at: Vec::new(),
        word_starts: Vec::with_capacity(words.len() + 1),
        counts: Vec::with_capacity(words.len()),
    };
    // Characters outside the required set become U+2585, which pairs with nothing. The words'
    // order only numbers the symbols, and the numbers decide nothing; sorting (most frequent first,
    // as SentencePiece does, then by text) keeps the work the same from run to run.
    let mut chars: FxHashMap<char, u32> = FxHashMap::default();
    for &(c, _) in required {
        let id = trainer.char_symbol(c, false);
        chars.insert(c, id);
    }
    let unknown = trainer.char_symbol(UNKNOWN_CHAR, true);
    let mut words: Vec<(Box<str>, u64)> = words.into_iter().collect();
    words.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (word, count) in words {
        trainer.word_starts.push(trainer.symbols_at.len());
        trainer.symbols_at.extend(
            word.chars()
                .map(|c| chars.get(&c).copied().unwrap_or(unknown)),
        );
        trainer.counts.push(count);
    }
    trainer.word_starts.push(trainer.symbols_at.len());
    for word in 0..trainer.counts.len() {
        for right in trainer.word_starts[word] + 1..trainer.word_starts[word + 1] {
            trainer.add_pair(word, Some(right - 1), Some(right));
        }
    }
    trainer.queue_pending();
    let mut pieces: Vec<ScoredPiece> = Vec::with_capacity(merges_wanted + required.len());
    let mut seen: FxHashSet<Box<str>> = FxHashSet::default();
    while pieces.len() < merges_wanted {
        let Some(best) = trainer.best() else {
            return Err(too_high(merges_wanted, pieces.len()));
        };
        let text = trainer.text(best);
        if seen.contains(text) {
            trainer.drop_pair(best);
            continue;
        }
        let text: Box<str> = text.into();
        pieces.push((text.to_string(), -(pieces.len() as f32)));
        seen.insert(text);
        trainer.merge(best);
        trainer.drop_pair(best);
        trainer.queue_pending();
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

    fn counts(words: &[(&str, u64)]) -> WordCounts {
        words
            .iter()
            .map(|&(word, count)| (word.into(), count))
            .collect()
    }

    #[test]
    fn words_start_at_each_space_or_at_each_space_run() {
        assert_eq!(split_into_words("▁a▁▁b", false), ["▁a", "▁", "▁b"]);
        assert_eq!(split_into_words("▁a▁▁b", true), ["▁a", "▁▁b"]);
        assert_eq!(split_into_words("ab▁c", true), ["ab", "▁c"]);
        assert_eq!(split_into_words("▁▁", false), ["▁", "▁"]);
        assert!(split_into_words("", false).is_empty());
    }

    #[test]
    fn escaping_spaces_is_the_identity_normalizer() {
        let texts = [
            "",
            " ",
            "a b",
            "  a  b ",
            "\u{2581}x y\u{2581}",
            "tab\there",
            "é ü",
        ];
        for add_dummy_prefix in [false, true] {
            let normalizer =
                SentencePieceNormalizer::new(b"", add_dummy_prefix, false, true, &[]).unwrap();
            for text in texts {
                let mut escaped = String::new();
                escape_spaces(text, add_dummy_prefix, &mut escaped);
                assert_eq!(escaped, normalizer.normalize(text).0, "{text:?}");
            }
        }
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
        let words = counts(&[("aab", 10), ("c", 1)]);
        let required = required_chars(&words, 0.9);
        assert_eq!(required, [('a', 20), ('b', 10)]);
        assert_eq!(required_chars(&words, 1.0).len(), 3);
    }

    #[test]
    fn the_most_frequent_pair_is_merged_first() {
        let words = counts(&[("▁ab", 3), ("▁abc", 2), ("▁b", 1)]);
        let required = required_chars(&words, 1.0);
        let pieces = learn_pieces(words, &required, 3, &rules(), |_| true).unwrap();
        let texts: Vec<&str> = pieces.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(&texts[..3], ["ab", "▁ab", "▁abc"]);
        assert_eq!(pieces[3].1, -3.0);
    }

    #[test]
    fn frequencies_stay_exact_after_merges() {
        // "bc" (4) wins; "ab" loses the 3 occurrences "bc" took, "a·bc" (3) is formed; "▁a" (3,
        // fewer characters) wins before it.
        let words = counts(&[("▁abc", 3), ("bc", 1)]);
        let required = required_chars(&words, 1.0);
        let pieces = learn_pieces(words, &required, 3, &rules(), |_| true).unwrap();
        let texts: Vec<&str> = pieces.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(texts[..3], ["bc", "▁a", "▁abc"]);
    }

    /// The merge loop recomputed from scratch at every step: every pair of neighbouring symbols
    /// counted anew, the best taken, its occurrences replaced left to right.
    fn learn_naively(words: &[(&str, u64)], merges: usize, rules: &PieceRules) -> Vec<String> {
        let mut words: Vec<(Vec<String>, u64)> = words
            .iter()
            .map(|&(word, count)| (word.chars().map(String::from).collect(), count))
            .collect();
        let mut learned: Vec<String> = Vec::new();
        let mut dropped: FxHashSet<(String, String)> = FxHashSet::default();
        while learned.len() < merges {
            let mut freqs: FxHashMap<(String, String), u64> = FxHashMap::default();
            for (symbols, count) in &words {
                for pair in symbols.windows(2) {
                    let key = (pair[0].clone(), pair[1].clone());
                    let text: Vec<char> = (pair[0].clone() + &pair[1]).chars().collect();
                    if !dropped.contains(&key) && rules.is_valid(&text) {
                        *freqs.entry(key).or_insert(0) += count;
                    }
                }
            }
            if freqs.is_empty() {
                break;
            }
            let best = freqs
                .into_iter()
                .min_by(|(a, fa), (b, fb)| {
                    let (ta, tb) = (a.0.clone() + &a.1, b.0.clone() + &b.1);
                    fb.cmp(fa)
                        .then(ta.chars().count().cmp(&tb.chars().count()))
                        .then(ta.cmp(&tb))
                        .then(a.0.chars().count().cmp(&b.0.chars().count()))
                })
                .map(|(key, _)| key)
                .expect("pairs left");
            let text = best.0.clone() + &best.1;
            dropped.insert(best.clone());
            if learned.contains(&text) {
                continue;
            }
            learned.push(text.clone());
            for (symbols, _) in &mut words {
                let mut merged = Vec::with_capacity(symbols.len());
                let mut index = 0;
                while index < symbols.len() {
                    if index + 1 < symbols.len()
                        && symbols[index] == best.0
                        && symbols[index + 1] == best.1
                    {
                        merged.push(text.clone());
                        index += 2;
                    } else {
                        merged.push(symbols[index].clone());
                        index += 1;
                    }
                }
                *symbols = merged;
            }
        }
        learned
    }

    #[test]
    fn the_queue_and_the_kept_frequencies_learn_what_counting_anew_learns() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        let alphabet = ['a', 'b', 'c', '▁', '1', 'б'];
        for round in 0..200 {
            let mut words: Vec<(String, u64)> = Vec::new();
            for _ in 0..1 + next(12) {
                let length = 1 + next(9) as usize;
                let word: String = (0..length).map(|_| alphabet[next(6) as usize]).collect();
                words.push((word, 1 + next(5)));
            }
            let rules = PieceRules {
                allow_whitespace_only_pieces: round % 2 == 0,
                split_by_whitespace: round % 3 != 0,
                max_sentencepiece_length: 2 + round % 5,
                ..rules()
            };
            let listed: Vec<(&str, u64)> = words
                .iter()
                .map(|(word, count)| (word.as_str(), *count))
                .collect();
            let table: WordCounts =
                listed
                    .iter()
                    .fold(WordCounts::default(), |mut table, &(word, count)| {
                        *table.entry(word.into()).or_insert(0) += count;
                        table
                    });
            // As many merges as leave a pair of positive frequency at every step (later ones would
            // take pairs whose occurrences are gone, as SentencePiece does).
            let expected = learn_naively(&listed, 12, &rules);
            let merges = expected.len();
            let required = required_chars(&table, 1.0);
            let pieces = learn_pieces(table, &required, merges, &rules, |_| true).unwrap();
            let texts: Vec<String> = pieces[..merges]
                .iter()
                .map(|(text, _)| text.clone())
                .collect();
            assert_eq!(texts, expected, "{words:?}");
        }
    }
}
