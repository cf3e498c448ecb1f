//! Sentences into counted words, as `trainer_interface.cc` loads them: which lines are kept,
//! normalization, meta pieces replaced by the boundary, `SplitIntoWords`.

use aho_corasick::{AhoCorasick, MatchKind};
use compact_str::CompactString;
use rustc_hash::FxHashMap;

use super::words::WordTable;
use super::{BOUNDARY_CHAR, SPACE_CHAR, UNKNOWN_CHAR};
use crate::normalize::SentencePieceNormalizer;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::sentencepiece::learn_pieces;
    use crate::train::sentencepiece::test_support::rules;

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
}
