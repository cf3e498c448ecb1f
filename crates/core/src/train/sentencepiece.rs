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
use compact_str::CompactString;
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

/// Distinct words (sentences without `split_by_whitespace`) and how often each occurs. A word of
/// up to 24 bytes is held in the table itself: counting allocates nothing for it, looking it up
/// reads no other memory, and freeing the table frees no word one by one.
pub type WordCounts = FxHashMap<CompactString, u64>;

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
    /// Where [`WordCounter::add_file`] reads.
    read_buffer: Vec<u8>,
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
            read_buffer: Vec::new(),
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
        on_bytes: impl FnMut(u64) -> bool,
    ) -> Result<(), FileError> {
        // One buffer for every file: its pages are touched once.
        let mut buffer = std::mem::take(&mut self.read_buffer);
        buffer.clear();
        let result = self.add_file_with(path, on_bytes, &mut buffer);
        self.read_buffer = buffer;
        result
    }

    fn add_file_with(
        &mut self,
        path: &std::path::Path,
        mut on_bytes: impl FnMut(u64) -> bool,
        buffer: &mut Vec<u8>,
    ) -> Result<(), FileError> {
        use std::io::Read;
        const BLOCK: usize = 8 << 20;
        let io_error = |error| FileError::Io {
            path: path.to_path_buf(),
            error,
        };
        let mut file = std::fs::File::open(path).map_err(io_error)?;
        buffer.reserve(BLOCK * 2);
        let mut offset = 0u64;
        let mut at_end = false;
        while !at_end && !self.is_full() {
            // Read into the buffer's spare room, which is not zeroed first (a block short of
            // `BLOCK` bytes ends the file).
            let read = (&mut file)
                .take(BLOCK as u64)
                .read_to_end(buffer)
                .map_err(io_error)?;
            at_end = read < BLOCK;
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

    /// The distinct words laid out for the merge loop, built on the current rayon pool: each
    /// worker's table gives, on a thread of its own, the words that no earlier table holds, each
    /// with its count added up over the tables (looked up, never moved into a new table); the
    /// parts are laid out in parallel, one after the other, into one table made at its final
    /// size. The words are freed once every part is laid out.
    pub fn into_table(self) -> WordTable {
        use rayon::prelude::*;
        let shards = self.shards;
        let parts: Vec<Vec<(&str, u64)>> = (0..shards.len())
            .into_par_iter()
            .map(|index| {
                let (earlier, rest) = shards.split_at(index);
                let (own, later) = rest.split_first().expect("an index of a table");
                own.iter()
                    .filter(|(word, _)| !earlier.iter().any(|shard| shard.contains_key(*word)))
                    .map(|(word, &count)| {
                        let others: u64 = later.iter().filter_map(|shard| shard.get(word)).sum();
                        (word.as_str(), count + others)
                    })
                    .collect()
            })
            .collect();
        let table = WordTable::lay_out(&parts);
        drop(parts);
        shards.into_par_iter().for_each(drop);
        table
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
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut last_space_end = usize::MAX;
    // `▁` is E2 96 81: its first byte, then the other two (a lead byte starts no other match).
    let spaces =
        memchr::memchr_iter(SPACE[0], bytes).filter(|&at| bytes[at + 1..].starts_with(&SPACE[1..]));
    for at in spaces {
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
///
/// Four characters 9.0 already had have changed script since, so today's property
/// is not 9.0's for them: U+0589 ARMENIAN FULL STOP and U+061C ARABIC LETTER MARK were Common,
/// U+0953 and U+0954 (Devanagari grave and acute accents) were Devanagari. Checked on every code
/// point against sentencepiece's `unicode_script_map.h`: these four were the only differences.
pub fn script_of(c: char) -> Script {
    let known_in_unicode_9 = Age::of(c).is_some_and(|age| {
        let version = age.actual();
        (version.major, version.minor) <= (9, 0)
    });
    if !known_in_unicode_9 {
        return Script::Common;
    }
    match c {
        '\u{0589}' | '\u{061C}' => return Script::Common,
        '\u{0953}' | '\u{0954}' => return Script::Devanagari,
        _ => {}
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

/// What [`PieceRules::is_valid`] needs to know of a piece to judge it joined to another piece:
/// a pair of symbols is judged from the shapes of its two parts ([`PieceRules::join`]), without
/// reading its characters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    flags: u8,
    /// The script class the first character that sets one gives (`Some(None)`: a digit without
    /// `split_by_number`, which matches anything); `None`: no such character (spaces and
    /// combining marks only, which take the class before them).
    lead: Option<ScriptClass>,
    /// The script class after the last character, when `lead` is set.
    tail: ScriptClass,
}

impl Shape {
    const FORBIDDEN: u8 = 1;
    const ALL_SPACE: u8 = 1 << 1;
    const HAS_SPACE: u8 = 1 << 2;
    /// A space after the first character.
    const LATE_SPACE: u8 = 1 << 3;
    const LAST_SPACE: u8 = 1 << 4;
    const DIGIT: u8 = 1 << 5;
}

impl PieceRules {
    /// The shape of the one-character piece `c`, whose SentencePiece script is `script`.
    pub fn char_shape(&self, c: char, script: Script) -> Shape {
        if c == UNKNOWN_CHAR || c == '\0' || c == BOUNDARY_CHAR || c == ' ' {
            return Shape {
                flags: Shape::FORBIDDEN,
                lead: None,
                tail: None,
            };
        }
        if c == SPACE_CHAR {
            return Shape {
                flags: Shape::ALL_SPACE | Shape::HAS_SPACE | Shape::LAST_SPACE,
                lead: None,
                tail: None,
            };
        }
        let digit = is_decimal_digit(c);
        let lead: Option<ScriptClass> = if !self.split_by_number && digit {
            Some(None)
        } else {
            match script {
                Script::Hiragana | Script::Katakana => Some(Some(Script::Han)),
                _ if c == '\u{30FC}' => Some(Some(Script::Han)),
                Script::Inherited => None,
                other => Some(Some(other)),
            }
        };
        Shape {
            flags: if digit { Shape::DIGIT } else { 0 },
            lead,
            tail: lead.flatten(),
        }
    }

    /// The shape of the piece `left` then `right` (`length` characters in all, at least 2), or
    /// `None` when it is not a valid piece: [`PieceRules::is_valid`] of the joined characters,
    /// when `left` and `right` are each valid or one character.
    pub fn join(&self, left: Shape, right: Shape, length: usize) -> Option<Shape> {
        if length > self.max_sentencepiece_length
            || (left.flags | right.flags) & Shape::FORBIDDEN != 0
        {
            return None;
        }
        let all_space = left.flags & right.flags & Shape::ALL_SPACE != 0;
        if !(self.allow_whitespace_only_pieces && all_space) {
            let misplaced = if self.split_by_whitespace {
                left.flags & Shape::LATE_SPACE != 0 || right.flags & Shape::HAS_SPACE != 0
            } else {
                right.flags & Shape::LAST_SPACE != 0
            };
            if misplaced {
                return None;
            }
        }
        if self.split_digits && (left.flags | right.flags) & Shape::DIGIT != 0 {
            return None;
        }
        let left_tail = if left.lead.is_some() { left.tail } else { None };
        if let (true, Some(Some(first)), Some(before)) =
            (self.split_by_unicode_script, right.lead, left_tail)
        {
            if first != before {
                return None;
            }
        }
        let mut flags = (left.flags | right.flags) & (Shape::HAS_SPACE | Shape::DIGIT);
        if all_space {
            flags |= Shape::ALL_SPACE;
        }
        if left.flags & Shape::LATE_SPACE != 0 || right.flags & Shape::HAS_SPACE != 0 {
            flags |= Shape::LATE_SPACE;
        }
        flags |= right.flags & Shape::LAST_SPACE;
        Some(Shape {
            flags,
            lead: left.lead.or(right.lead),
            tail: if right.lead.is_some() {
                right.tail
            } else {
                left_tail
            },
        })
    }
}

/// The counted words laid out for the merge loop: their characters one word after the other,
/// where each word starts, each word's count, and how often each character occurs (weighted).
pub struct WordTable {
    /// A [`SEPARATOR`] slot, then each word's characters followed by a [`SEPARATOR`]: word `w`
    /// is `slots[word_starts[w]..word_starts[w + 1] - 1]`.
    slots: Vec<Slot>,
    word_starts: Vec<usize>,
    counts: Vec<u64>,
    /// Occurrences of the characters of the Basic Multilingual Plane by code point, and beyond.
    basic_counts: Vec<u64>,
    other_counts: FxHashMap<char, u64>,
    all_chars: u64,
}

impl WordTable {
    /// Lays out `words` (in any order: the order decides nothing), counting the characters as
    /// they are laid out.
    pub fn new<W: AsRef<str> + Sync>(words: impl IntoIterator<Item = (W, u64)>) -> Self {
        Self::lay_out(&[words.into_iter().collect()])
    }

    /// Lays out the words of `parts` one part after the other, each part on a thread of the
    /// current rayon pool, into one table made at its final size.
    fn lay_out<W: AsRef<str> + Sync>(parts: &[Vec<(W, u64)>]) -> Self {
        use rayon::prelude::*;
        // Each part's slots: a character each, and the separator after each word. One part gets
        // a slot per byte, the rest cut off after (counting the characters first would read
        // every word twice).
        let slots_of = |word: &W| match parts.len() {
            1 => word.as_ref().len() + 1,
            _ => word.as_ref().chars().count() + 1,
        };
        let sizes: Vec<usize> = parts
            .par_iter()
            .map(|words| words.iter().map(|(word, _)| slots_of(word)).sum())
            .collect();
        let words = parts.iter().map(Vec::len).sum::<usize>();
        let mut slots = vec![SEPARATOR_SLOT; 1 + sizes.iter().sum::<usize>()];
        let mut word_starts = vec![0; words + 1];
        let mut counts = vec![0; words];
        // Each part's share of the three lists, and where its slots start.
        let mut shares = Vec::with_capacity(parts.len());
        let (mut slots_left, mut starts_left, mut counts_left) = (
            &mut slots[1..],
            &mut word_starts[..words],
            counts.as_mut_slice(),
        );
        let mut offset = 1;
        for (part, &size) in parts.iter().zip(&sizes) {
            let (part_slots, rest) = std::mem::take(&mut slots_left).split_at_mut(size);
            slots_left = rest;
            let (part_starts, rest) = std::mem::take(&mut starts_left).split_at_mut(part.len());
            starts_left = rest;
            let (part_counts, rest) = std::mem::take(&mut counts_left).split_at_mut(part.len());
            counts_left = rest;
            shares.push((part, part_slots, part_starts, part_counts, offset));
            offset += size;
        }
        // Each part fills its share and counts its characters.
        let tallies: Vec<(usize, Vec<u64>, FxHashMap<char, u64>)> = shares
            .into_par_iter()
            .map(|(part, slots, starts, counts, offset)| {
                let mut basic_counts = vec![0u64; 0x10000];
                let mut other_counts: FxHashMap<char, u64> = FxHashMap::default();
                let mut at = 0;
                for (index, (word, count)) in part.iter().enumerate() {
                    starts[index] = offset + at;
                    counts[index] = *count;
                    for c in word.as_ref().chars() {
                        let code = u32::from(c);
                        slots[at].symbol = code;
                        at += 1;
                        match basic_counts.get_mut(code as usize) {
                            Some(total) => *total += count,
                            None => *other_counts.entry(c).or_insert(0) += count,
                        }
                    }
                    // The separator is in place.
                    at += 1;
                }
                (at, basic_counts, other_counts)
            })
            .collect();
        if let [(filled, _, _)] = tallies[..] {
            slots.truncate(1 + filled);
        }
        word_starts[words] = slots.len();
        let mut tallies = tallies.into_iter();
        let (_, mut basic_counts, mut other_counts) = tallies
            .next()
            .unwrap_or_else(|| (0, vec![0; 0x10000], FxHashMap::default()));
        for (_, basic, other) in tallies {
            for (total, count) in basic_counts.iter_mut().zip(&basic) {
                *total += count;
            }
            for (c, count) in other {
                *other_counts.entry(c).or_insert(0) += count;
            }
        }
        let all_chars = basic_counts[1..].iter().sum::<u64>() + other_counts.values().sum::<u64>();
        Self {
            slots,
            word_starts,
            counts,
            basic_counts,
            other_counts,
            all_chars,
        }
    }

    /// Distinct words.
    pub fn words(&self) -> usize {
        self.counts.len()
    }

    /// The characters that must be in the vocabulary: the most frequent ones, until their share
    /// of all characters reaches `character_coverage` (compared in `f32`, as SentencePiece does),
    /// the boundary character left out. Each with its count, most frequent first (ties: lower code
    /// point first).
    pub fn required_chars(&self, character_coverage: f32) -> Vec<(char, u64)> {
        let mut sorted: Vec<(char, u64)> = self
            .other_counts
            .iter()
            .map(|(&c, &count)| (c, count))
            .collect();
        for (code, &count) in self.basic_counts.iter().enumerate().skip(1) {
            if count > 0 {
                let c = char::from_u32(code as u32).expect("a counted character");
                sorted.push((c, count));
            }
        }
        sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut required = Vec::new();
        let mut accumulated = 0u64;
        for (c, count) in sorted {
            let coverage = (accumulated as f64 / self.all_chars as f64) as f32;
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
}

const NONE: u32 = u32::MAX;

/// The symbol of the slot between two words: where a word starts and ends is read next to the
/// slot the merge loop reads anyway.
const SEPARATOR: u32 = u32::MAX - 1;

const SEPARATOR_SLOT: Slot = Slot {
    symbol: SEPARATOR,
    pair: NONE,
};

/// A character or a pair of symbols (`bpe::Trainer::Symbol`); what the merge loop reads on
/// every occurrence is apart, in [`Tally`].
struct Symbol {
    /// The first 8 bytes of the text, big-endian, zero-padded: compares as the text does (texts
    /// hold no NUL).
    prefix: u64,
    /// The text: `texts[text_start..text_start + text_len]`.
    text_start: usize,
    text_len: u32,
    chars: u32,
    /// Characters of the left part (the last tie-break between pairs of the same text).
    left_chars: u32,
    is_unknown: bool,
    /// What judging a pair with this symbol as a part needs.
    shape: Shape,
}

/// A symbol's frequency and state in one word, 8 bytes a symbol: the merge loop updates the
/// tallies of pairs all over the table, so they are kept apart from the rest of [`Symbol`], packed.
#[derive(Clone, Copy)]
struct Tally(u64);

impl Tally {
    /// Merged, dropped as a duplicate, or not a pair at all.
    const INACTIVE: u64 = 1 << 63;
    /// Formed again since the last step: its frequency goes into the queue after this one.
    const PENDING: u64 = 1 << 62;
    const FREQ: u64 = Self::PENDING - 1;

    /// Occurrences, weighted by the counts of their words: exact at all times.
    fn freq(self) -> u64 {
        self.0 & Self::FREQ
    }

    fn is_active(self) -> bool {
        self.0 & Self::INACTIVE == 0
    }
}

/// The most entries a table of [`Trainer::merge`] keeps room for from one merge to the next.
const KEPT_TABLE_ROOM: usize = 1 << 10;

/// The count of a packed position whose word's count takes more than 32 bits.
const COUNT_ELSEWHERE: u64 = u32::MAX as u64;

/// How many occurrences ahead [`Trainer::merge`] asks for their slots.
const PREFETCH_AHEAD: usize = 16;

/// Asks the processor to bring `value` into the cache (a hint; no effect off x86-64).
#[inline(always)]
fn prefetch<T>(value: &T) {
    // SAFETY: a prefetch reads nothing (any address may be hinted); SSE is part of x86-64.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (value as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

fn text_prefix(text: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let length = text.len().min(8);
    bytes[..length].copy_from_slice(&text.as_bytes()[..length]);
    u64::from_be_bytes(bytes)
}

/// A queued pair: its frequency when queued, and what ranks it (copied, so that ranking reads
/// the symbols only when the first 8 bytes of two texts tie).
#[derive(Clone, Copy)]
struct Entry {
    freq: u64,
    prefix: u64,
    chars: u32,
    id: u32,
}

/// The ranking of queue entries: frequency, then fewer characters, then the smaller text
/// (`QueueEntryComparator`), then the shorter left part.
fn ranks_before(symbols: &[Symbol], texts: &str, a: &Entry, b: &Entry) -> bool {
    if a.freq != b.freq {
        return a.freq > b.freq;
    }
    if a.chars != b.chars {
        return a.chars < b.chars;
    }
    if a.prefix != b.prefix {
        return a.prefix < b.prefix;
    }
    let (x, y) = (&symbols[a.id as usize], &symbols[b.id as usize]);
    let text =
        |symbol: &Symbol| &texts[symbol.text_start..symbol.text_start + symbol.text_len as usize];
    match text(x).cmp(text(y)) {
        std::cmp::Ordering::Equal => (x.left_chars, a.id) < (y.left_chars, b.id),
        order => order.is_lt(),
    }
}

/// Children of a node of [`Queue`]: four 24-byte entries span two cache lines, and the heap is
/// half as deep as a binary one (the queue holds every pair ever formed, far more than fit in cache).
const QUEUE_ARITY: usize = 4;

/// The queued pairs, popped in the order of [`ranks_before`] (a total order: the pops do not
/// depend on how the entries are kept). The entries of frequency `floor` or more are in a 4-ary
/// max-heap; the others, which cannot be the best while the heap holds any entry, wait in lists
/// by the power of two below their frequency (`below[k]`: 2^k to 2^(k + 1) - 1; `below[0]`
/// also 0) until the heap runs out: most pairs formed never come near the top, and the heap they
/// stay out of is small.
struct Queue {
    entries: Vec<Entry>,
    below: Vec<Vec<Entry>>,
    floor: u64,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            below: (0..u64::BITS).map(|_| Vec::new()).collect(),
            floor: u64::MAX,
        }
    }
}

impl Queue {
    /// Queues the pair `id` with the frequency `freq`.
    fn push(&mut self, freq: u64, id: u32, symbols: &[Symbol], texts: &str) {
        let symbol = &symbols[id as usize];
        let entry = Entry {
            freq,
            prefix: symbol.prefix,
            chars: symbol.chars,
            id,
        };
        if freq < self.floor {
            self.below[freq.max(1).ilog2() as usize].push(entry);
        } else {
            self.push_on_heap(entry, symbols, texts);
        }
    }

    fn push_on_heap(&mut self, entry: Entry, symbols: &[Symbol], texts: &str) {
        self.entries.push(entry);
        let mut child = self.entries.len() - 1;
        while child > 0 {
            let parent = (child - 1) / QUEUE_ARITY;
            if !ranks_before(symbols, texts, &self.entries[child], &self.entries[parent]) {
                break;
            }
            self.entries.swap(child, parent);
            child = parent;
        }
    }

    /// The best entry: (frequency when queued, pair). When the heap is empty, the highest list
    /// waiting goes onto it, and the floor falls to that list's lowest frequency.
    fn pop(&mut self, symbols: &[Symbol], texts: &str) -> Option<(u64, u32)> {
        if self.entries.is_empty() {
            let power = self.below.iter().rposition(|list| !list.is_empty())?;
            self.floor = if power == 0 { 0 } else { 1 << power };
            for entry in std::mem::take(&mut self.below[power]) {
                self.push_on_heap(entry, symbols, texts);
            }
        }
        let last = self.entries.pop()?;
        if self.entries.is_empty() {
            return Some((last.freq, last.id));
        }
        let top = std::mem::replace(&mut self.entries[0], last);
        let mut parent = 0;
        loop {
            let first = QUEUE_ARITY * parent + 1;
            if first >= self.entries.len() {
                break;
            }
            let last = (first + QUEUE_ARITY).min(self.entries.len());
            let mut child = first;
            for other in first + 1..last {
                if ranks_before(symbols, texts, &self.entries[other], &self.entries[child]) {
                    child = other;
                }
            }
            if !ranks_before(symbols, texts, &self.entries[child], &self.entries[parent]) {
                break;
            }
            self.entries.swap(child, parent);
            parent = child;
        }
        Some((top.freq, top.id))
    }
}

/// One character position of a word, or the [`SEPARATOR`] between two words.
#[derive(Clone, Copy)]
struct Slot {
    /// The symbol that starts here (`NONE` once merged into the one before it).
    symbol: u32,
    /// The pair it forms with the next symbol of the word (`NONE`: none, or no valid piece).
    /// In the last slot of a symbol of several characters (`symbol` is `NONE` there): how many
    /// slots back that symbol starts.
    /// SentencePiece looks pairs up by their two parts in `symbols_cache_`; a pair formed in a
    /// word stays the one found there until a merge changes one of its parts, so the lookup is
    /// read from here.
    pair: u32,
}

struct Trainer<'r> {
    rules: &'r PieceRules,
    symbols: Vec<Symbol>,
    /// Each symbol's [`Tally`], by id.
    tallies: Vec<Tally>,
    /// Where each pair was formed, in the order formed, packed by [`Trainer::position`] with its
    /// word's count (the merge loop reads nothing else of the word). Entries whose symbols
    /// changed since are skipped.
    positions: Vec<Vec<u64>>,
    /// Every symbol's text, one after the other.
    texts: String,
    queue: Queue,
    pending: Vec<u32>,
    /// [`Trainer::merge`]'s tables of the pairs it forms, kept for their room: `x·best` by `x`,
    /// `best·y` by `y`.
    before_best: FxHashMap<u32, u32>,
    after_best: FxHashMap<u32, u32>,
    /// [`Trainer::merge`]'s pairs formed and where, kept for its room.
    formed: Vec<(u32, u64)>,
    /// The words, one after the other, where each word starts, and each word's count (laid out
    /// as in [`WordTable`]).
    slots: Vec<Slot>,
    word_starts: Vec<usize>,
    counts: Vec<u64>,
}

impl Trainer<'_> {
    fn text(&self, id: u32) -> &str {
        let symbol = &self.symbols[id as usize];
        &self.texts[symbol.text_start..symbol.text_start + symbol.text_len as usize]
    }

    /// A position packed: the slot, then its word's count (`COUNT_ELSEWHERE` when it does not
    /// fit; [`Trainer::unpack`] then finds the word).
    fn position(slot: usize, count: u64) -> u64 {
        ((slot as u64) << 32) | count.min(COUNT_ELSEWHERE)
    }

    /// The slot and its word's count.
    fn unpack(&self, position: u64) -> (usize, u64) {
        let slot = (position >> 32) as usize;
        let count = match position & COUNT_ELSEWHERE {
            COUNT_ELSEWHERE => {
                self.counts[self.word_starts.partition_point(|&start| start <= slot) - 1]
            }
            count => count,
        };
        (slot, count)
    }

    fn push_symbol(&mut self, symbol: Symbol, tally: Tally) -> u32 {
        let id = self.symbols.len() as u32;
        debug_assert!(id < SEPARATOR, "symbol ids stay below NONE and SEPARATOR");
        self.symbols.push(symbol);
        self.tallies.push(tally);
        self.positions.push(Vec::new());
        id
    }

    fn char_symbol(&mut self, c: char, is_unknown: bool) -> u32 {
        let text_start = self.texts.len();
        self.texts.push(c);
        self.push_symbol(
            Symbol {
                prefix: text_prefix(&self.texts[text_start..]),
                text_start,
                text_len: c.len_utf8() as u32,
                chars: 1,
                left_chars: 0,
                is_unknown,
                shape: self.rules.char_shape(c, script_of(c)),
            },
            Tally(Tally::INACTIVE),
        )
    }

    /// The body of `GetPairSymbol` for a pair not seen before: the symbol of `left` then `right`,
    /// or `NONE` when it makes no valid piece.
    fn new_pair(&mut self, left: u32, right: u32) -> u32 {
        let (left_symbol, right_symbol) =
            (&self.symbols[left as usize], &self.symbols[right as usize]);
        if left_symbol.is_unknown || right_symbol.is_unknown {
            return NONE;
        }
        let chars = left_symbol.chars + right_symbol.chars;
        let left_chars = left_symbol.chars;
        let (left_start, left_len) = (left_symbol.text_start, left_symbol.text_len as usize);
        let (right_start, right_len) = (right_symbol.text_start, right_symbol.text_len as usize);
        let Some(shape) = self
            .rules
            .join(left_symbol.shape, right_symbol.shape, chars as usize)
        else {
            return NONE;
        };
        let text_start = self.texts.len();
        self.texts
            .extend_from_within(left_start..left_start + left_len);
        self.texts
            .extend_from_within(right_start..right_start + right_len);
        self.push_symbol(
            Symbol {
                prefix: text_prefix(&self.texts[text_start..]),
                text_start,
                text_len: (left_len + right_len) as u32,
                chars,
                left_chars,
                is_unknown: false,
                shape,
            },
            Tally(0),
        )
    }

    /// `symbols_cache_.erase(fp)`: the pair is neither found nor ranked again.
    fn drop_pair(&mut self, id: u32) {
        self.tallies[id as usize].0 |= Tally::INACTIVE;
        self.positions[id as usize] = Vec::new();
    }

    /// Where the symbol before the one at `slot` starts, found from the last slot of that symbol
    /// (none at the start of a word).
    fn previous_slot(&self, slot: usize) -> Option<usize> {
        let last = slot - 1;
        let before = self.slots[last];
        match before.symbol {
            SEPARATOR => None,
            NONE => Some(last - before.pair as usize),
            _ => Some(last),
        }
    }

    /// The rest of `AddNewPair`: the pair `id` (or none) is formed at `slot` in a word counted
    /// `count` times. The caller stores the position.
    fn form_pair(&mut self, count: u64, slot: usize, id: u32) {
        self.slots[slot].pair = id;
        if id == NONE {
            return;
        }
        let tally = &mut self.tallies[id as usize];
        tally.0 += count;
        if tally.0 & Tally::PENDING == 0 {
            tally.0 |= Tally::PENDING;
            self.pending.push(id);
        }
    }

    /// `ResetFreq`: the pair formed at `slot` in a word counted `count` times is broken. A pair
    /// already merged or dropped is no longer SentencePiece's to count.
    fn break_pair(&mut self, count: u64, slot: usize, best: u32) {
        let id = self.slots[slot].pair;
        if id != NONE && id != best {
            let tally = &mut self.tallies[id as usize];
            if tally.is_active() {
                tally.0 -= count;
            }
        }
    }

    /// Sets each slot's pair with the next slot of its word (making the pair symbols), and returns
    /// how often each pair occurs, by id.
    fn find_pairs(&mut self) -> Vec<u32> {
        use rayon::prelude::*;

        /// A part of the words: its pairs (keys) in the order met, and how often each occurs.
        #[derive(Default)]
        struct Part {
            keys: Vec<u64>,
            occurrences: Vec<u32>,
        }
        let key = |slots: &[Slot], right: usize| {
            (u64::from(slots[right - 1].symbol) << 32) | u64::from(slots[right].symbol)
        };
        let words = self.counts.len();
        let parts = rayon::current_num_threads().clamp(1, words.max(1));
        // Parts of about equal slots, cut between words.
        let mut bounds = vec![0];
        for part in 1..parts {
            let target = self.slots.len() * part / parts;
            let word = self
                .word_starts
                .partition_point(|&start| start < target)
                .min(words);
            bounds.push(word.max(*bounds.last().unwrap_or(&0)));
        }
        bounds.push(words);
        // Each part numbers its pairs (kept in the slots for now).
        let mut chunks = word_chunks(&mut self.slots, &self.word_starts, &bounds);
        let found: Vec<Part> = chunks
            .par_iter_mut()
            .map(|(slots, starts)| {
                let offset = starts[0];
                let mut part = Part::default();
                let mut numbers: FxHashMap<u64, u32> = FxHashMap::default();
                for word in starts.windows(2) {
                    for right in word[0] + 1 - offset..word[1] - 1 - offset {
                        let key = key(slots, right);
                        let number = *numbers.entry(key).or_insert_with(|| {
                            part.keys.push(key);
                            part.occurrences.push(0);
                            (part.keys.len() - 1) as u32
                        });
                        part.occurrences[number as usize] += 1;
                        slots[right - 1].pair = number;
                    }
                }
                part
            })
            .collect();
        drop(chunks);
        // The parts' numbers as pair ids, made in order.
        let mut pairs: FxHashMap<u64, u32> = FxHashMap::default();
        let mut occurrences: Vec<u32> = Vec::new();
        let mut ids: Vec<Vec<u32>> = Vec::with_capacity(parts);
        for part in &found {
            let part_ids: Vec<u32> = part
                .keys
                .iter()
                .zip(&part.occurrences)
                .map(|(&key, &count)| {
                    let id = match pairs.get(&key) {
                        Some(&id) => id,
                        None => {
                            let id = self.new_pair((key >> 32) as u32, key as u32);
                            pairs.insert(key, id);
                            id
                        }
                    };
                    if id != NONE {
                        occurrences.resize(occurrences.len().max(id as usize + 1), 0);
                        occurrences[id as usize] += count;
                    }
                    id
                })
                .collect();
            ids.push(part_ids);
        }
        drop(pairs);
        drop(found);
        // The slots' numbers as pair ids.
        let mut chunks = word_chunks(&mut self.slots, &self.word_starts, &bounds);
        chunks.par_iter_mut().zip(&ids).for_each(|((slots, starts), part_ids)| {
            let offset = starts[0];
            for word in starts.windows(2) {
                for left in word[0] - offset..(word[1] - 1 - offset).saturating_sub(1) {
                    slots[left].pair = part_ids[slots[left].pair as usize];
                }
            }
        });
        occurrences
    }

    /// Queues the pairs formed since the last step with their new frequencies.
    fn queue_pending(&mut self) {
        for &id in &self.pending {
            let tally = &mut self.tallies[id as usize];
            tally.0 &= !Tally::PENDING;
            if tally.is_active() {
                let freq = tally.freq();
                self.queue.push(freq, id, &self.symbols, &self.texts);
            }
        }
        self.pending.clear();
    }

    /// The best live pair. An entry whose frequency fell since it was queued goes back in with the
    /// frequency it has now; one whose frequency rose has a newer entry.
    fn best(&mut self) -> Option<u32> {
        while let Some((freq, id)) = self.queue.pop(&self.symbols, &self.texts) {
            let tally = self.tallies[id as usize];
            if !tally.is_active() || freq < tally.freq() {
                continue;
            }
            if freq > tally.freq() {
                let freq = tally.freq();
                self.queue.push(freq, id, &self.symbols, &self.texts);
                continue;
            }
            return Some(id);
        }
        None
    }

    /// `AcceptSymbol`: replaces every occurrence of the pair `best` by it. The pairs it forms all
    /// hold `best`, new in the words, so they are new pairs: they are looked up in tables of this
    /// merge only.
    fn merge(&mut self, best: u32) {
        let positions = std::mem::take(&mut self.positions[best as usize]);
        let mut before_best = std::mem::take(&mut self.before_best);
        let mut after_best = std::mem::take(&mut self.after_best);
        before_best.clear();
        after_best.clear();
        // A symbol covers one slot per character: the parts of `best` are found without a scan.
        let (chars, left_chars) = {
            let symbol = &self.symbols[best as usize];
            (symbol.chars as usize, symbol.left_chars as usize)
        };
        // Every pair formed here is new: its positions are gathered, then stored in lists of the
        // right size.
        let first_new = self.symbols.len();
        let mut formed = std::mem::take(&mut self.formed);
        for (index, &packed) in positions.iter().enumerate() {
            // The occurrences lie all over the words: ask for a later one's slot, word end and
            // count ahead of time.
            if let Some(&ahead) = positions.get(index + PREFETCH_AHEAD) {
                prefetch(&self.slots[(ahead >> 32) as usize]);
            }
            let (left, count) = self.unpack(packed);
            // Still `best`'s parts, next to each other (SentencePiece compares both parts).
            let slot = self.slots[left];
            if slot.symbol == NONE || slot.pair != best {
                continue;
            }
            let right = left + left_chars;
            let end = left + chars;
            let next = (self.slots[end].symbol != SEPARATOR).then_some(end);
            let previous = self.previous_slot(left);
            if let Some(previous) = previous {
                self.break_pair(count, previous, best);
            }
            if next.is_some() {
                self.break_pair(count, right, best);
            }
            self.slots[left].symbol = best;
            self.slots[right] = Slot {
                symbol: NONE,
                pair: NONE,
            };
            self.slots[end - 1].pair = (end - 1 - left) as u32;
            if let Some(previous) = previous {
                let before = self.slots[previous].symbol;
                let id = match before_best.get(&before) {
                    Some(&id) => id,
                    None => {
                        let id = self.new_pair(before, best);
                        before_best.insert(before, id);
                        id
                    }
                };
                self.form_pair(count, previous, id);
                if id != NONE {
                    formed.push((id, Self::position(previous, count)));
                }
            }
            let id = match next {
                None => NONE,
                Some(next) => {
                    let after = self.slots[next].symbol;
                    // (best, best) is one pair, whichever side finds it first.
                    let table = if after == best {
                        &mut before_best
                    } else {
                        &mut after_best
                    };
                    match table.get(&after) {
                        Some(&id) => id,
                        None => {
                            let id = self.new_pair(best, after);
                            table.insert(after, id);
                            id
                        }
                    }
                }
            };
            self.form_pair(count, left, id);
            if id != NONE {
                formed.push((id, packed));
            }
        }
        // Clearing a table costs its room: the few large ones of the first merges are not kept.
        for table in [&mut before_best, &mut after_best] {
            if table.capacity() > KEPT_TABLE_ROOM {
                *table = FxHashMap::default();
            }
        }
        (self.before_best, self.after_best) = (before_best, after_best);
        let mut sizes = vec![0u32; self.symbols.len() - first_new];
        for &(id, _) in &formed {
            sizes[id as usize - first_new] += 1;
        }
        for (list, &size) in self.positions[first_new..].iter_mut().zip(&sizes) {
            list.reserve_exact(size as usize);
        }
        for &(id, position) in &formed {
            self.positions[id as usize].push(position);
        }
        formed.clear();
        self.formed = formed;
    }
}

/// A learned piece and its score.
pub type ScoredPiece = (String, f32);

/// Learns `merges_wanted` pieces from the counted `words` (SentencePiece's BPE loop), then
/// appends the required characters. `on_piece(count)` reports progress and returns false to stop.
/// The words' pairs are first found on the threads of the current rayon pool.
/// Fails when the words run out of pairs first (SentencePiece: "Vocabulary size too high").
pub fn learn_pieces(
    table: WordTable,
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
    let mut trainer = Trainer {
        rules,
        symbols: Vec::new(),
        tallies: Vec::new(),
        positions: Vec::new(),
        texts: String::new(),
        queue: Queue::default(),
        pending: Vec::new(),
        before_best: FxHashMap::default(),
        after_best: FxHashMap::default(),
        formed: Vec::new(),
        slots: Vec::new(),
        word_starts: Vec::new(),
        counts: Vec::new(),
    };
    // Characters outside the required set become U+2585, which pairs with nothing. The words are
    // taken in no particular order (SentencePiece sorts them): the order numbers the symbols and
    // the occurrences, and neither decides anything.
    let unknown = trainer.char_symbol(UNKNOWN_CHAR, true);
    // The character symbols by code point: a table for the Basic Multilingual Plane, a map beyond.
    let mut basic = vec![unknown; 0x10000];
    let mut beyond: FxHashMap<u32, u32> = FxHashMap::default();
    for &(c, _) in required {
        let id = trainer.char_symbol(c, false);
        match u32::from(c) {
            code if code < 0x10000 => basic[code as usize] = id,
            code => {
                beyond.insert(code, id);
            }
        }
    }
    let WordTable {
        mut slots,
        word_starts,
        counts,
        ..
    } = table;
    for slot in &mut slots {
        slot.symbol = match slot.symbol {
            SEPARATOR => SEPARATOR,
            code if code < 0x10000 => basic[code as usize],
            code => beyond.get(&code).copied().unwrap_or(unknown),
        };
    }
    (trainer.slots, trainer.word_starts, trainer.counts) = (slots, word_starts, counts);
    // A packed position holds a slot in 32 bits.
    if trainer.slots.len() as u64 > 1 << 32 {
        return Err(format!(
            "{} distinct words of {} characters in all are more than this trainer holds",
            trainer.counts.len(),
            trainer.slots.len() - trainer.counts.len() - 1
        ));
    }
    // The pairs of neighbouring characters, then each pair's occurrences stored in a list of the
    // right size. Each part of the words (one per thread of the current rayon pool) numbers the
    // pairs it holds in the order it meets them; the parts' numbers are then turned into pair ids
    // part after part, which numbers the pairs in the order one pass over every word meets them,
    // whatever the number of parts.
    let occurrences = trainer.find_pairs();
    for (id, &count) in occurrences.iter().enumerate() {
        trainer.positions[id].reserve_exact(count as usize);
    }
    drop(occurrences);
    for word in 0..trainer.counts.len() {
        let count = trainer.counts[word];
        for left in trainer.word_starts[word]..trainer.word_starts[word + 1] - 1 {
            let id = trainer.slots[left].pair;
            trainer.form_pair(count, left, id);
            if id != NONE {
                trainer.positions[id as usize].push(Trainer::position(left, count));
            }
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
    // Freeing the trainer (a position list per pair: ~50 ms at vocab 32,000 on 25 MB) is not the
    // caller's wait.
    // (Its fields are moved out one by one: the trainer itself borrows the rules.)
    drop_in_background((
        trainer.symbols,
        trainer.tallies,
        trainer.positions,
        trainer.texts,
        trainer.queue,
        trainer.slots,
        trainer.word_starts,
        trainer.counts,
    ));
    Ok(pieces)
}

/// The slots of the words `bounds[i]..bounds[i + 1]` for each part `i`, each word followed by its
/// separator (the separator before the first word is in no part), with the part's word starts
/// (its last entry: where the part ends).
fn word_chunks<'s>(
    slots: &'s mut [Slot],
    word_starts: &'s [usize],
    bounds: &[usize],
) -> Vec<(&'s mut [Slot], &'s [usize])> {
    let mut chunks = Vec::with_capacity(bounds.len().saturating_sub(1));
    let mut taken = word_starts[0];
    let mut rest = &mut slots[taken..];
    for window in bounds.windows(2) {
        let end = word_starts[window[1]];
        let (chunk, tail) = rest.split_at_mut(end - taken);
        chunks.push((chunk, &word_starts[window[0]..=window[1]]));
        (rest, taken) = (tail, end);
    }
    chunks
}

/// Drops `value` on a thread of its own (at once, on this thread, when no thread can be started).
fn drop_in_background<T: Send + 'static>(value: T) {
    // A failed spawn drops its closure, and with it `value`, here.
    let _ = std::thread::Builder::new()
        .name("hf_bpe-free".into())
        .spawn(move || drop(value));
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

    /// A small xorshift generator: each call gives a number below its argument.
    fn below(seed: u64) -> impl FnMut(u64) -> u64 {
        let mut numbers = crate::test_rng::numbers(seed);
        move |bound| numbers() % bound
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

    /// The shape of `piece` by its definition, character by character.
    fn shape_of(rules: &PieceRules, piece: &[char]) -> Shape {
        let shapes: Vec<Shape> = piece
            .iter()
            .map(|&c| rules.char_shape(c, script_of(c)))
            .collect();
        let any = |flag: u8| shapes.iter().any(|shape| shape.flags & flag != 0);
        let mut flags = 0;
        for (flag, set) in [
            (Shape::FORBIDDEN, any(Shape::FORBIDDEN)),
            (Shape::ALL_SPACE, piece.iter().all(|&c| c == SPACE_CHAR)),
            (Shape::HAS_SPACE, any(Shape::HAS_SPACE)),
            (Shape::LATE_SPACE, piece[1..].contains(&SPACE_CHAR)),
            (Shape::LAST_SPACE, piece.last() == Some(&SPACE_CHAR)),
            (Shape::DIGIT, any(Shape::DIGIT)),
        ] {
            if set {
                flags |= flag;
            }
        }
        let lead = shapes.iter().find_map(|shape| shape.lead);
        let tail = shapes.iter().rev().find_map(|shape| shape.lead).flatten();
        Shape { flags, lead, tail }
    }

    #[test]
    fn pairs_judged_by_their_parts_shapes_are_judged_as_their_characters() {
        let alphabet = [
            'a', 'b', 'б', '1', '\u{FF12}', '▁', ' ', '\u{301}', 'ひ', 'カ', 'ー', '漢', ',',
            '\u{1F}', '\u{2585}',
        ];
        let mut next = below(0x9e37_79b9_7f4a_7c15);
        let mut judged = 0;
        for options in 0..64u32 {
            let flag = |bit: u32| options & (1 << bit) != 0;
            let rules = PieceRules {
                max_sentencepiece_length: if flag(5) { 4 } else { 16 },
                split_by_whitespace: flag(0),
                allow_whitespace_only_pieces: flag(1),
                split_by_unicode_script: flag(2),
                split_by_number: flag(3),
                split_digits: flag(4),
            };
            let part = |piece: &[char]| piece.len() == 1 || rules.is_valid(piece);
            for _ in 0..400 {
                let length = 2 + next(5) as usize;
                let piece: Vec<char> = (0..length)
                    .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                    .collect();
                for cut in 1..length {
                    let (left, right) = piece.split_at(cut);
                    if !part(left) || !part(right) {
                        continue;
                    }
                    judged += 1;
                    let joined =
                        rules.join(shape_of(&rules, left), shape_of(&rules, right), length);
                    assert_eq!(
                        joined.is_some(),
                        rules.is_valid(&piece),
                        "{piece:?} at {cut}, {rules:?}"
                    );
                    if let Some(shape) = joined {
                        assert_eq!(
                            shape,
                            shape_of(&rules, &piece),
                            "{piece:?} at {cut}, {rules:?}"
                        );
                    }
                }
            }
        }
        assert!(judged > 10_000, "{judged}");
    }

    #[test]
    fn characters_new_after_unicode_9_are_common() {
        assert_eq!(script_of('\u{9FD5}'), Script::Han);
        assert_eq!(script_of('\u{9FD6}'), Script::Common, "added in Unicode 10");
        // Assigned by 9.0, their script changed later: 9.0's is SentencePiece's.
        assert_eq!(script_of('\u{0589}'), Script::Common, "Armenian today");
        assert_eq!(script_of('\u{061C}'), Script::Common, "Arabic today");
        assert_eq!(script_of('\u{0953}'), Script::Devanagari, "Inherited today");
        assert_eq!(script_of('\u{0954}'), Script::Devanagari, "Inherited today");
    }

    #[test]
    fn coverage_stops_at_the_share_asked() {
        let words = counts(&[("aab", 10), ("c", 1)]);
        let required = WordTable::new(words.clone()).required_chars(0.9);
        assert_eq!(required, [('a', 20), ('b', 10)]);
        assert_eq!(WordTable::new(words).required_chars(1.0).len(), 3);
    }

    #[test]
    fn the_most_frequent_pair_is_merged_first() {
        let words = counts(&[("▁ab", 3), ("▁abc", 2), ("▁b", 1)]);
        let table = WordTable::new(words);
        let required = table.required_chars(1.0);
        let pieces = learn_pieces(table, &required, 3, &rules(), |_| true).unwrap();
        let texts: Vec<&str> = pieces.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(&texts[..3], ["ab", "▁ab", "▁abc"]);
        assert_eq!(pieces[3].1, -3.0);
    }

    #[test]
    fn frequencies_stay_exact_after_merges() {
        // "bc" (4) wins; "ab" loses the 3 occurrences "bc" took, "a·bc" (3) is formed; "▁a" (3,
        // fewer characters) wins before it.
        let words = counts(&[("▁abc", 3), ("bc", 1)]);
        let table = WordTable::new(words);
        let required = table.required_chars(1.0);
        let pieces = learn_pieces(table, &required, 3, &rules(), |_| true).unwrap();
        let texts: Vec<&str> = pieces.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(texts[..3], ["bc", "▁a", "▁abc"]);
    }

    #[test]
    fn the_order_of_the_words_decides_nothing() {
        let listed = [
            ("▁aab", 3),
            ("▁abab", 2),
            ("ba", 2),
            ("▁bb", 1),
            ("aaa", 2),
            ("▁a", 4),
        ];
        let words: WordCounts = listed
            .iter()
            .map(|&(word, count)| (word.into(), count))
            .collect();
        let required = WordTable::new(words).required_chars(1.0);
        let learn = |words: Vec<(Box<str>, u64)>| {
            learn_pieces(WordTable::new(words), &required, 8, &rules(), |_| true).unwrap()
        };
        let forward: Vec<(Box<str>, u64)> = listed
            .iter()
            .map(|&(word, count)| (word.into(), count))
            .collect();
        let mut backward = forward.clone();
        backward.reverse();
        let mut sorted = forward.clone();
        sorted.sort();
        assert_eq!(learn(forward.clone()), learn(backward));
        assert_eq!(learn(forward), learn(sorted));
    }

    #[test]
    fn words_counted_on_several_threads_learn_what_one_thread_learns() {
        let mut text = String::new();
        for index in 0..3000 {
            text.push_str(&format!(
                "the {} cat sat on mat {} and other words\n",
                index % 37,
                index % 11
            ));
        }
        let learn = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let options = SentenceOptions {
                    max_sentence_length: 4192,
                    split_by_whitespace: true,
                    allow_whitespace_only_pieces: false,
                    first_sentences: 0,
                };
                let normalizer = SentencePieceNormalizer::new(b"", true, false, true, &[]).unwrap();
                let mut counter = WordCounter::new(options, normalizer, &["<unk>"]).unwrap();
                for block in text
                    .split_inclusive("words\n")
                    .collect::<Vec<_>>()
                    .chunks(700)
                {
                    counter.add_text(&block.concat());
                }
                let table = counter.into_table();
                let required = table.required_chars(1.0);
                learn_pieces(table, &required, 40, &rules(), |_| true).unwrap()
            })
        };
        assert_eq!(learn(1), learn(3));
    }

    #[test]
    fn the_queue_pops_in_rank_order_whatever_it_waits_in() {
        // Symbols of 1 to 3 characters with texts that tie often, and a left part of 0 to 2.
        let rules = rules();
        let (mut texts, mut symbols) = (String::new(), Vec::new());
        for id in 0..60u32 {
            let chars = 1 + id % 3;
            let text: String = (0..chars)
                .map(|k| ['a', 'b', 'c'][((id + k) % 3) as usize])
                .collect();
            let text_start = texts.len();
            texts.push_str(&text);
            symbols.push(Symbol {
                prefix: text_prefix(&text),
                text_start,
                text_len: text.len() as u32,
                chars,
                left_chars: id % chars,
                is_unknown: false,
                shape: rules.char_shape('a', script_of('a')),
            });
        }
        let mut next = below(0x9e37_79b9_7f4a_7c15);
        for _ in 0..50 {
            let mut queue = Queue::default();
            let mut queued: Vec<Entry> = Vec::new();
            for _ in 0..300 {
                if next(3) == 0 {
                    // The best queued entry, by a sort under `ranks_before`.
                    queued.sort_by(|a, b| {
                        if ranks_before(&symbols, &texts, a, b) {
                            std::cmp::Ordering::Less
                        } else if ranks_before(&symbols, &texts, b, a) {
                            std::cmp::Ordering::Greater
                        } else {
                            std::cmp::Ordering::Equal
                        }
                    });
                    let expected = (!queued.is_empty()).then(|| queued.remove(0));
                    let popped = queue.pop(&symbols, &texts);
                    assert_eq!(popped, expected.map(|entry| (entry.freq, entry.id)));
                } else {
                    // Frequencies from 0 to about 2^20, most of them small.
                    let bits = next(21);
                    let freq = next(1 << bits);
                    let id = next(60) as u32;
                    queue.push(freq, id, &symbols, &texts);
                    let symbol = &symbols[id as usize];
                    queued.push(Entry {
                        freq,
                        prefix: symbol.prefix,
                        chars: symbol.chars,
                        id,
                    });
                }
            }
        }
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
                // Every fourth round, counts from 2^31 (which a packed position holds) to 5 * 2^31
                // (which it does not).
                let scale = if round % 4 == 3 { 1 << 31 } else { 1 };
                words.push((word, (1 + next(5)) * scale));
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
            let table = WordTable::new(table);
            let required = table.required_chars(1.0);
            // The pairs are found by 1, 2 or 3 parts of the words.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(1 + round % 3)
                .build()
                .unwrap();
            let pieces = pool
                .install(|| learn_pieces(table, &required, merges, &rules, |_| true))
                .unwrap();
            let texts: Vec<String> = pieces[..merges]
                .iter()
                .map(|(text, _)| text.clone())
                .collect();
            assert_eq!(texts, expected, "{words:?}");
        }
    }
}
