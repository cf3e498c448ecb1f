//! Counting: split documents on special tokens, pre-tokenize each part, count distinct pieces.
//!
//! Work is spread over rayon's threads. Large texts (whole files, long documents) are cut into
//! chunks, and a chunk is cut only where pre-tokenizing the two sides separately gives exactly the
//! pieces of the whole (see [`safe_cut`]), so chunking never changes a count. Files are streamed:
//! memory grows with the number of distinct pieces, not with the size of the corpus.

use super::counts::PieceCounts;
use crate::pretokenize::{SplitError, SplitRule, Splitter};
use aho_corasick::{AhoCorasick, MatchKind};
use rayon::prelude::*;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Chunk size for files and long documents: large enough that cutting costs nothing, small enough
/// that two cores share a 20 MB corpus evenly.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 20;

/// Why counting failed.
#[derive(Debug)]
pub enum CountError {
    /// A file could not be opened or read.
    Io { path: PathBuf, error: io::Error },
    /// A file is not valid UTF-8: `offset` is the position of the first bad byte.
    NotUtf8 {
        path: PathBuf,
        offset: u64,
        byte: u8,
    },
    /// The split pattern failed (or does not compile).
    Split(SplitError),
    /// A special token that cannot be used (empty, or given twice).
    BadSpecialToken(String),
    /// The progress callback asked to stop.
    Interrupted,
}

impl fmt::Display for CountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CountError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            CountError::NotUtf8 { path, offset, byte } => write!(
                f,
                "{}: not UTF-8 text: invalid byte 0x{byte:02x} at byte offset {offset}; \
                 convert the file to UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or leave it out",
                path.display()
            ),
            CountError::Split(error) => write!(f, "{error}"),
            CountError::BadSpecialToken(problem) => write!(f, "{problem}"),
            CountError::Interrupted => write!(f, "counting was interrupted"),
        }
    }
}

impl std::error::Error for CountError {}

impl From<SplitError> for CountError {
    fn from(error: SplitError) -> Self {
        CountError::Split(error)
    }
}

/// Where a chunk may be cut without changing the pieces, for patterns we can reason about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CutRule {
    /// tiktoken's GPT-2, cl100k and o200k patterns (see [`safe_cut`]).
    NamedPatterns,
}

/// The regexes [`CutRule::NamedPatterns`] was worked out for, as `hf_bpe.patterns` spells them.
const NAMED_PATTERNS: [&str; 3] = [
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s",
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s",
    concat!(
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"|\p{N}{1,3}",
        r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"|\s*[\r\n]+",
        r"|\s+(?!\S)",
        r"|\s+",
    ),
];

/// Whether texts split by `rule` can be cut into chunks (and so counted in parallel and
/// streamed): the named patterns. Other rules are counted a whole document (or file) at a time.
pub fn can_chunk(rule: &SplitRule) -> bool {
    rule.pattern().is_some_and(|pattern| NAMED_PATTERNS.contains(&pattern))
}

fn char_at(text: &[u8], at: usize) -> Option<char> {
    let width = match *text.get(at)? {
        byte if byte < 0x80 => 1,
        byte if byte >= 0xF0 => 4,
        byte if byte >= 0xE0 => 3,
        _ => 2,
    };
    std::str::from_utf8(text.get(at..at + width)?)
        .ok()?
        .chars()
        .next()
}

fn char_before(text: &[u8], end: usize) -> Option<char> {
    let start = (end.saturating_sub(4)..end)
        .rev()
        .find(|&i| text[i] & 0xC0 != 0x80)?;
    std::str::from_utf8(&text[start..end]).ok()?.chars().next()
}

/// Whether cutting `text` at `at` leaves the pieces of tiktoken's named patterns unchanged.
///
/// Two kinds of position qualify (all three patterns have no look-behind, so only the left side's
/// view of the end of text can change; both kinds make that view irrelevant):
/// - right after a `\n` that follows a non-space character, before a non-space character other
///   than `/`: the `\n` ends a piece in the whole text (alone, or after punctuation in cl100k and
///   o200k, whose `[\r\n]*`/`[\r\n/]*` stop at the next character), and it is the same piece when
///   the text ends there (`\s++$`, `\s*[\r\n]` and `\s+(?!\S)` all take just the `\n`). No
///   alternative takes a `\n` as the optional prefix of the next piece.
/// - at a space between two ASCII letters: the letters before end their piece (no alternative
///   runs from a letter into a space), and the space starts the next piece (` ?\p{L}`,
///   `[^\r\n\p{L}\p{N}]?\p{L}`) in both.
///
/// The callers also keep `at` away from special tokens. Proven against whole-text counting by the
/// tests here and in `tests/test_train.py`.
fn safe_cut(text: &[u8], at: usize) -> bool {
    if at < 2 || at + 1 >= text.len() {
        return false;
    }
    match text[at - 1] {
        b'\n' => {
            let before = char_before(text, at - 1);
            let after = char_at(text, at);
            matches!(before, Some(c) if !c.is_whitespace())
                && matches!(after, Some(c) if !c.is_whitespace() && c != '/')
        }
        byte if byte.is_ascii_alphabetic() => {
            text[at] == b' ' && text[at + 1].is_ascii_alphabetic()
        }
        _ => false,
    }
}

/// Special tokens as the splitter of documents.
#[derive(Clone, Debug)]
struct Specials {
    /// Leftmost-longest: where documents are cut.
    splitter: AhoCorasick,
    /// Every occurrence, overlapping: to keep chunk cuts out of any special token.
    finder: AhoCorasick,
    longest: usize,
}

/// Counts pieces with one split pattern and one set of special tokens.
#[derive(Clone, Debug)]
pub struct Counter {
    splitter: Splitter,
    specials: Option<Specials>,
    cut_rule: Option<CutRule>,
    chunk_bytes: usize,
    /// The memory budget: at most this many distinct pieces in the table counted into (see
    /// [`Counter::with_max_pieces`]).
    max_pieces: Option<usize>,
}

impl Counter {
    pub fn new(split: impl Into<SplitRule>, special_tokens: &[String]) -> Result<Self, CountError> {
        let splitter = Splitter::new(split)?;
        let mut seen = std::collections::HashSet::new();
        for token in special_tokens {
            if token.is_empty() {
                return Err(CountError::BadSpecialToken(
                    "a special token cannot be the empty string".into(),
                ));
            }
            if !seen.insert(token) {
                return Err(CountError::BadSpecialToken(format!(
                    "special token {token:?} is given twice"
                )));
            }
        }
        let specials = if special_tokens.is_empty() {
            None
        } else {
            let build = |kind| {
                AhoCorasick::builder()
                    .match_kind(kind)
                    .build(special_tokens)
                    .expect("special tokens are plain strings")
            };
            Some(Specials {
                splitter: build(MatchKind::LeftmostLongest),
                finder: build(MatchKind::Standard),
                longest: special_tokens.iter().map(String::len).max().unwrap_or(0),
            })
        };
        let cut_rule = can_chunk(splitter.rule()).then_some(CutRule::NamedPatterns);
        Ok(Self {
            splitter,
            specials,
            cut_rule,
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            max_pieces: None,
        })
    }

    /// Keeps the tables this counter fills within `max_pieces` distinct pieces: whenever one grows
    /// past its share (each thread's table a share of it), its rarest pieces are dropped until half
    /// remain ([`PieceCounts::limit`], recorded in [`PieceCounts::pruned`]). A corpus of ever new
    /// words otherwise grows the table until memory runs out.
    pub fn with_max_pieces(mut self, max_pieces: Option<usize>) -> Self {
        self.max_pieces = max_pieces.map(|max_pieces| max_pieces.max(2));
        self
    }

    /// The budget of one thread's table.
    fn share_of_max_pieces(&self) -> Option<usize> {
        self.max_pieces.map(|max_pieces| (max_pieces / rayon::current_num_threads().max(1)).max(2))
    }

    /// Keeps `counts`, the sum of the threads' tables, within the budget.
    pub fn limit(&self, counts: &mut PieceCounts) {
        counts.limit(self.max_pieces);
    }

    /// Sets the chunk size (tests use tiny chunks to exercise cutting).
    pub fn with_chunk_bytes(mut self, chunk_bytes: usize) -> Self {
        self.chunk_bytes = chunk_bytes.max(1);
        self
    }

    /// Counts one text (a document or a chunk of one) into `counts`, on this thread.
    pub fn count_text(&self, text: &str, counts: &mut PieceCounts) -> Result<(), SplitError> {
        let bytes = text.as_bytes();
        let mut spaced = Vec::new();
        let mut count_part = |part: &str| {
            self.splitter.for_each_piece(part, |start, end, space| {
                if space {
                    spaced.clear();
                    spaced.push(b' ');
                    spaced.extend_from_slice(&part.as_bytes()[start..end]);
                    counts.add(&spaced, 1);
                } else {
                    counts.add(&part.as_bytes()[start..end], 1);
                }
            })
        };
        match &self.specials {
            None => count_part(text),
            Some(specials) => {
                let mut start = 0;
                for found in specials.splitter.find_iter(bytes) {
                    count_part(&text[start..found.start()])?;
                    start = found.end();
                }
                count_part(&text[start..])
            }
        }
    }

    /// Whether `at` is a position where `text` may be cut (pattern rule and no special token across).
    fn can_cut(&self, text: &[u8], at: usize) -> bool {
        if self.cut_rule.is_none() || !safe_cut(text, at) {
            return false;
        }
        match &self.specials {
            None => true,
            Some(specials) => {
                let from = at.saturating_sub(specials.longest);
                let to = (at + specials.longest).min(text.len());
                !specials
                    .finder
                    .find_overlapping_iter(&text[from..to])
                    .any(|found| from + found.start() < at && at < from + found.end())
            }
        }
    }

    /// Bytes past a cut that [`Counter::can_cut`] must see: the rule looks one character ahead and
    /// special tokens reach `longest` bytes.
    fn lookahead(&self) -> usize {
        4 + self
            .specials
            .as_ref()
            .map_or(0, |specials| specials.longest)
    }

    /// The last position in `text[..limit]` after `floor` where it may be cut.
    fn last_cut(&self, text: &[u8], floor: usize, limit: usize) -> Option<usize> {
        (floor.max(1)..limit)
            .rev()
            .find(|&at| self.can_cut(text, at))
    }

    /// Cuts `text` into chunks of about the chunk size at safe positions.
    pub fn chunks<'t>(&self, text: &'t str) -> Vec<&'t str> {
        let bytes = text.as_bytes();
        let mut chunks = Vec::new();
        let mut start = 0;
        while self.cut_rule.is_some()
            && bytes.len() - start > self.chunk_bytes + self.chunk_bytes / 2
        {
            let target = start + self.chunk_bytes;
            let cut = self
                .last_cut(bytes, start + 1, target)
                .or_else(|| (target..bytes.len()).find(|&at| self.can_cut(bytes, at)));
            match cut {
                Some(cut) => {
                    chunks.push(&text[start..cut]);
                    start = cut;
                }
                None => break,
            }
        }
        chunks.push(&text[start..]);
        chunks
    }

    /// Counts many documents in parallel (long ones in chunks). Documents never share a piece.
    pub fn count_texts(&self, texts: &[&str]) -> Result<PieceCounts, SplitError> {
        texts
            .par_iter()
            .flat_map_iter(|text| self.chunks(text))
            .try_fold(PieceCounts::new, |mut counts, chunk| {
                self.count_text(chunk, &mut counts)?;
                counts.limit(self.share_of_max_pieces());
                Ok(counts)
            })
            .try_reduce(PieceCounts::new, |mut left, right| {
                left.absorb(right);
                self.limit(&mut left);
                Ok(left)
            })
    }

    /// Counts UTF-8 text files, streamed in chunks, in parallel. Each file is a document (pieces
    /// never span two files). `on_bytes(n)` is called as each chunk of `n` bytes is counted; when
    /// it returns `false`, counting stops with [`CountError::Interrupted`].
    /// Call [`check_utf8`] first to fail before counting anything.
    pub fn count_files(
        &self,
        paths: &[PathBuf],
        on_bytes: impl Fn(u64) -> bool + Sync,
    ) -> Result<PieceCounts, CountError> {
        self.count_files_into(PieceCounts::new(), paths, on_bytes)
    }

    /// [`Counter::count_files`] adding to `counts` (one thread counts into it directly, so on one
    /// thread nothing is copied or added). On failure `counts` is dropped with the rest.
    pub fn count_files_into(
        &self,
        counts: PieceCounts,
        paths: &[PathBuf],
        on_bytes: impl Fn(u64) -> bool + Sync,
    ) -> Result<PieceCounts, CountError> {
        let start = Mutex::new(Some(counts));
        // One table per thread, each thread taking the next chunk as it frees up, then the
        // threads' tables added. (A parallel fold over a bridged iterator made a table per
        // stolen job: dozens of partial tables of most of the distinct pieces, whose adding
        // cost a fifth of the counting.)
        let chunks = Mutex::new(paths.iter().flat_map(|path| FileChunks::new(self, path)));
        let failed = AtomicBool::new(false);
        let count_some = || -> Result<PieceCounts, CountError> {
            let taken = start.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
            let mut counts = taken.unwrap_or_default();
            while !failed.load(Ordering::Relaxed) {
                let next = chunks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).next();
                let Some(chunk) = next else { break };
                let counted = chunk.and_then(|chunk| {
                    self.count_text(&chunk, &mut counts)?;
                    counts.limit(self.share_of_max_pieces());
                    if on_bytes(chunk.len() as u64) {
                        Ok(())
                    } else {
                        Err(CountError::Interrupted)
                    }
                });
                if let Err(error) = counted {
                    failed.store(true, Ordering::Relaxed);
                    return Err(error);
                }
            }
            Ok(counts)
        };
        let threads = rayon::current_num_threads().max(1);
        let tables: Vec<Result<PieceCounts, CountError>> = (0..threads)
            .into_par_iter()
            .map(|_| count_some())
            .collect();
        let mut total = start.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()).unwrap_or_default();
        let mut first_error = None;
        for table in tables {
            match table {
                Ok(table) => {
                    total.absorb(table);
                    self.limit(&mut total);
                }
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(total),
        }
    }
}

/// The chunks of one file, read in blocks; each chunk ends at a safe cut (or at the end of file).
struct FileChunks<'c> {
    counter: &'c Counter,
    path: PathBuf,
    file: Option<File>,
    /// Bytes read but not yet handed out; `pending[..checked]` is known to be valid UTF-8.
    pending: Vec<u8>,
    checked: usize,
    /// Cuts were looked for (and none found) in `pending[..searched]`.
    searched: usize,
    /// File offset of `pending[0]`.
    offset: u64,
    done: bool,
}

impl<'c> FileChunks<'c> {
    fn new(counter: &'c Counter, path: &Path) -> Self {
        FileChunks {
            counter,
            path: path.to_owned(),
            file: None,
            pending: Vec::new(),
            checked: 0,
            searched: 0,
            offset: 0,
            done: false,
        }
    }

    fn io_error(&self, error: io::Error) -> CountError {
        CountError::Io {
            path: self.path.clone(),
            error,
        }
    }

    /// Validates newly read bytes; an incomplete character at the very end waits for more input.
    fn check(&mut self, at_end: bool) -> Result<(), CountError> {
        match std::str::from_utf8(&self.pending[self.checked..]) {
            Ok(_) => self.checked = self.pending.len(),
            Err(error) => {
                let bad = self.checked + error.valid_up_to();
                if error.error_len().is_some() || at_end {
                    return Err(CountError::NotUtf8 {
                        path: self.path.clone(),
                        offset: self.offset + bad as u64,
                        byte: self.pending[bad],
                    });
                }
                self.checked = bad;
            }
        }
        Ok(())
    }

    /// Hands out `pending[..end]` as a chunk.
    fn take(&mut self, end: usize) -> String {
        let rest = self.pending.split_off(end);
        let chunk = std::mem::replace(&mut self.pending, rest);
        self.offset += end as u64;
        self.checked -= end;
        self.searched = 0;
        String::from_utf8(chunk).expect("validated as UTF-8")
    }

    fn next_chunk(&mut self) -> Result<Option<String>, CountError> {
        if self.done {
            return Ok(None);
        }
        if self.file.is_none() {
            self.file = Some(File::open(&self.path).map_err(|error| self.io_error(error))?);
        }
        let chunk_bytes = self.counter.chunk_bytes;
        loop {
            let want = (chunk_bytes + self.counter.lookahead())
                .saturating_sub(self.pending.len())
                .max(chunk_bytes / 2)
                .max(64);
            let file = self.file.as_mut().expect("opened above");
            let read = file
                .take(want as u64)
                .read_to_end(&mut self.pending)
                .map_err(|error| self.io_error(error))?;
            let at_end = read == 0;
            self.check(at_end)?;
            if at_end {
                self.done = true;
                return Ok((!self.pending.is_empty()).then(|| self.take(self.pending.len())));
            }
            if self.counter.cut_rule.is_none() || self.checked < chunk_bytes {
                continue;
            }
            let limit = self.checked.saturating_sub(self.counter.lookahead());
            let floor = self.searched;
            self.searched = limit;
            if let Some(cut) = self
                .counter
                .last_cut(&self.pending[..self.checked], floor, limit)
            {
                return Ok(Some(self.take(cut)));
            }
        }
    }
}

impl Iterator for FileChunks<'_> {
    type Item = Result<String, CountError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_chunk() {
            Ok(chunk) => chunk.map(Ok),
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

/// Checks that every file exists and is UTF-8, in parallel, without counting anything; returns
/// the total size in bytes. Errors name the file (and the byte offset of the first bad byte).
pub fn check_utf8(paths: &[PathBuf]) -> Result<u64, CountError> {
    let sizes: Result<Vec<u64>, CountError> =
        paths.par_iter().map(|path| check_file(path)).collect();
    Ok(sizes?.into_iter().sum())
}

fn check_file(path: &Path) -> Result<u64, CountError> {
    let io_error = |error| CountError::Io {
        path: path.to_owned(),
        error,
    };
    let mut file = File::open(path).map_err(io_error)?;
    let mut block = vec![0u8; DEFAULT_CHUNK_BYTES];
    let (mut filled, mut offset) = (0usize, 0u64);
    loop {
        let read = file.read(&mut block[filled..]).map_err(io_error)?;
        let at_end = read == 0;
        filled += read;
        let valid = match std::str::from_utf8(&block[..filled]) {
            Ok(_) => filled,
            Err(error) if error.error_len().is_none() && !at_end => error.valid_up_to(),
            Err(error) => {
                let bad = error.valid_up_to();
                return Err(CountError::NotUtf8 {
                    path: path.to_owned(),
                    offset: offset + bad as u64,
                    byte: block[bad],
                });
            }
        };
        if at_end {
            return Ok(offset + filled as u64);
        }
        block.copy_within(valid..filled, 0);
        offset += valid as u64;
        filled -= valid;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPT2: &str = NAMED_PATTERNS[0];

    fn whole(counter: &Counter, text: &str) -> PieceCounts {
        let mut counts = PieceCounts::new();
        counter.count_text(text, &mut counts).unwrap();
        counts
    }

    #[test]
    fn special_tokens_split_documents_and_are_not_counted() {
        let counter = Counter::new(GPT2, &["<|endoftext|>".to_owned()]).unwrap();
        let counts = whole(&counter, "a b<|endoftext|> c");
        let expected: PieceCounts = [("a", 1), (" b", 1), (" c", 1)]
            .iter()
            .map(|(p, c)| (p.as_bytes().to_vec(), *c))
            .collect();
        assert_eq!(counts, expected);
    }

    #[test]
    fn a_budget_of_distinct_pieces_bounds_the_table_of_ever_new_words() {
        let words: String = (0..20_000).map(|index| format!(" w{index}")).collect();
        let common = " the".repeat(30_000);
        let text = format!("{words}{common}");
        let exact = Counter::new(GPT2, &[]).unwrap();
        assert_eq!(exact.count_texts(&[&text]).unwrap().pruned(), 0);
        let counter = Counter::new(GPT2, &[]).unwrap().with_chunk_bytes(4096).with_max_pieces(Some(1000));
        let counts = counter.count_texts(&[&text]).unwrap();
        assert!(counts.len() <= 1000, "{} pieces", counts.len());
        assert!(counts.pruned() > 0);
        // The frequent piece survives every pruning with its count almost whole.
        assert!(counts.get(b" the") > 29_000, "{}", counts.get(b" the"));
        assert_eq!(counts.total() + counts.pruned(), 70_000); // " w", the digits, " the"
        let path = std::env::temp_dir().join(format!("hf_bpe_budget_{}.txt", std::process::id()));
        std::fs::write(&path, &text).unwrap();
        let from_file = counter.count_files(std::slice::from_ref(&path), |_| true).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(from_file.len() <= 1000 && from_file.pruned() > 0);
        assert_eq!(from_file.total() + from_file.pruned(), 70_000);
    }

    #[test]
    fn safe_cuts_follow_the_rules() {
        let text = b"ab cd\nef \ngh\n/ij";
        let cuts: Vec<usize> = (0..text.len()).filter(|&at| safe_cut(text, at)).collect();
        // "ab| cd", "cd\n|ef"; not after " \n", not before "/".
        assert_eq!(cuts, vec![2, 6]);
    }

    #[test]
    fn chunked_counting_equals_whole_text_counting() {
        let text = "Hello world.\nThe  end\n\n  of it's 12345 lines \u{3000}\n\u{65e5}\u{672c}\u{8a9e}<|eot|>\nnext\t doc\r\nok/\nno ";
        let specials = ["<|eot|>".to_owned(), "<|eot|>\nne".to_owned()];
        for pattern in NAMED_PATTERNS {
            let counter = Counter::new(pattern, &specials).unwrap();
            let expected = whole(&counter, &text.repeat(7));
            for chunk_bytes in [1, 2, 3, 5, 8, 13, 40, 1000] {
                let small = counter.clone().with_chunk_bytes(chunk_bytes);
                assert_eq!(
                    small.count_texts(&[&text.repeat(7)]).unwrap(),
                    expected,
                    "chunk {chunk_bytes}"
                );
            }
        }
    }

    #[test]
    fn files_stream_in_chunks_and_match_whole_text() {
        let dir = std::env::temp_dir().join(format!("hf_bpe_count_test_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = "Caf\u{e9} society\nmeets  here\n\n\u{1F600} smile 42\nend".repeat(50);
        let path = dir.join("corpus.txt");
        std::fs::write(&path, &text).unwrap();
        for pattern in NAMED_PATTERNS {
            let counter = Counter::new(pattern, &[]).unwrap();
            let expected = whole(&counter, &text);
            for chunk_bytes in [1, 7, 64, 100_000] {
                let small = counter.clone().with_chunk_bytes(chunk_bytes);
                let counted = small.count_files(std::slice::from_ref(&path), |_| true).unwrap();
                assert_eq!(counted, expected, "chunk {chunk_bytes}");
                // Counting into a table adds to it: the file counted twice, once into the other.
                let twice = small
                    .count_files_into(counted.clone(), std::slice::from_ref(&path), |_| true)
                    .unwrap();
                let mut doubled = expected.clone();
                doubled.absorb(expected.clone());
                assert_eq!(twice, doubled, "chunk {chunk_bytes}");
            }
        }
        std::fs::write(&path, b"ok text\n\xff bad").unwrap();
        let error = check_utf8(std::slice::from_ref(&path)).unwrap_err();
        assert!(
            matches!(
                error,
                CountError::NotUtf8 {
                    offset: 8,
                    byte: 0xff,
                    ..
                }
            ),
            "{error}"
        );
        let counter = Counter::new(GPT2, &[]).unwrap();
        assert!(matches!(
            counter.count_files(&[path], |_| true),
            Err(CountError::NotUtf8 { offset: 8, .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
