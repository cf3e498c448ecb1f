//! Pre-tokenization: cutting text into pieces with the split rule ([`SplitRule`]).
//!
//! A split pattern is run with `fancy-regex`, the engine tiktoken uses, so every pattern means
//! exactly what it means there (possessive quantifiers, look-ahead, `$` as end of text). A
//! `tokenizer.json`'s Split steps run on Oniguruma, as in `tokenizers` ([`crate::onig_split`]).
//! A rule that is exactly the regex of a hand-written scanner (`crate::scan`: the named patterns
//! and the splits of the model families people load), as a pattern or as one Split step that keeps
//! every piece, runs on that scanner, which finds the same pieces faster; each scanner is proven
//! identical to each engine separately (`tests/scan_identity.rs`). Other spellings of the same
//! split are `crate::recognize`'s, confirmed by a probe before they are used.
//!
//! A pattern from a file may backtrack catastrophically. fancy-regex bounds each match attempt
//! (1,000,000 backtracking steps, as in tiktoken), but not a text: a pattern that spends 900,000
//! steps on every match takes hours on a few kilobytes, and a look-around that rescans the text on
//! each step makes one attempt take minutes. So splitting one text has a time budget
//! ([`SPLIT_BASE_SECONDS`] plus [`SPLIT_SECONDS_PER_MB`] per megabyte, over 70 times what the
//! patterns of real tokenizers need on any text), checked between matches and counted in the
//! splitting thread's CPU time ([`crate::cpu_time`]: a machine busy with other work does not trip it); and each match is first
//! tried with a small backtracking limit, raised tenfold at a time up to fancy-regex's, giving up
//! early when the next attempt would, at the pace of the last one, overrun the budget. Results do
//! not change: an attempt that stays within its limit is the same search as with the full limit.
//! Split steps on Oniguruma share the budget (see [`crate::onig_split`] for their limits).
//!
//! With `tokenizers`' `ByteLevel` among Split steps ([`SplitRule::ByteLevel`],
//! [`crate::byte_level_split`]) a piece may start with a space `ByteLevel` added, and may start or
//! end inside a character: pieces are given as `(start, end, space)`, the bytes `text[start..end]`
//! after a space when `space`.

use std::cell::Cell;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use fancy_regex::{AstNode, Expr, Regex, RegexBuilder, RegexInput};

pub use crate::byte_level_split::ByteLevelSteps;
use crate::byte_level_split::CompiledByteLevel;
use crate::cpu_time::CpuInstant;
use crate::onig_split::CompiledSteps;
pub use crate::onig_split::{Behavior, SplitStep};
use crate::scan::{Scanner, Semantics};

/// Splitting one text with a regex may take this many seconds, plus [`SPLIT_SECONDS_PER_MB`].
pub const SPLIT_BASE_SECONDS: f64 = 1.0;
/// Seconds of budget per megabyte of text (a pace of 0.1 MB/s; regex splitting runs at 7-70 MB/s).
pub const SPLIT_SECONDS_PER_MB: f64 = 10.0;
/// The backtracking limits a match is tried with, in turn; the last is fancy-regex's default.
const BACKTRACK_LIMITS: [usize; 5] = [100, 1_000, 10_000, 100_000, 1_000_000];
/// The budget is checked after every this many matches.
pub(crate) const CHECK_EVERY: usize = 64;
/// The longest split pattern accepted, in bytes (real ones are under 1 KB). Compiling takes about
/// 400 bytes of memory per byte of pattern: a 10 MB pattern took 2 GB.
pub const MAX_PATTERN_BYTES: usize = 1 << 16;

/// Why a text could not be split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitError {
    /// The pattern does not compile.
    BadPattern { pattern: String, reason: String },
    /// The regex engine gave up on this text (e.g. its backtracking limit was reached).
    Engine { reason: String },
    /// Splitting the text would take longer than its time budget.
    TooSlow { pattern: String, bytes: usize, budget: Duration },
}

/// A pattern for a message: quoted, and cut short if long.
fn show_pattern(pattern: &str) -> String {
    const SHOWN: usize = 200;
    match pattern.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{:?}... ({} bytes)", &pattern[..cut], pattern.len()),
        None => format!("{pattern:?}"),
    }
}

impl fmt::Display for SplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SplitError::BadPattern { pattern, reason } => {
                write!(f, "split pattern {} does not compile: {reason}", show_pattern(pattern))
            }
            SplitError::Engine { reason } => write!(f, "the split pattern failed on this text: {reason}"),
            SplitError::TooSlow { pattern, bytes, budget } => write!(
                f,
                "the split pattern {} is too slow on this text: splitting its {bytes} bytes would take more \
                 than its budget of {:.1} s ({SPLIT_BASE_SECONDS} s + {SPLIT_SECONDS_PER_MB} s per MB); the \
                 pattern backtracks catastrophically (nested quantifiers, or a look-around that rescans the \
                 text): use another pattern",
                show_pattern(pattern),
                budget.as_secs_f64()
            ),
        }
    }
}

impl std::error::Error for SplitError {}

/// How text is cut into pieces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SplitRule {
    /// A tiktoken split pattern (fancy-regex): its matches are the pieces, the text between them is
    /// dropped (the named patterns match every character).
    Pattern(String),
    /// `tokenizers`' Split pre-tokenizers (Oniguruma), in order: each re-splits every piece of the
    /// one before.
    Steps(Vec<SplitStep>),
    /// `tokenizers`' `ByteLevel` pre-tokenizer among Split steps, where it does more than an
    /// isolated Split on its regex: Split steps after it, or its `add_prefix_space` after Split steps.
    ByteLevel(ByteLevelSteps),
}

impl SplitRule {
    /// The fancy-regex pattern, or `None` for Split steps.
    pub fn pattern(&self) -> Option<&str> {
        match self {
            SplitRule::Pattern(pattern) => Some(pattern),
            SplitRule::Steps(_) | SplitRule::ByteLevel(_) => None,
        }
    }
}

impl From<&str> for SplitRule {
    fn from(pattern: &str) -> Self {
        SplitRule::Pattern(pattern.to_owned())
    }
}

impl From<String> for SplitRule {
    fn from(pattern: String) -> Self {
        SplitRule::Pattern(pattern)
    }
}

impl From<&String> for SplitRule {
    fn from(pattern: &String) -> Self {
        SplitRule::Pattern(pattern.clone())
    }
}

impl From<&SplitRule> for SplitRule {
    fn from(rule: &SplitRule) -> Self {
        rule.clone()
    }
}

impl From<ByteLevelSteps> for SplitRule {
    fn from(steps: ByteLevelSteps) -> Self {
        SplitRule::ByteLevel(steps)
    }
}

impl From<Vec<SplitStep>> for SplitRule {
    fn from(steps: Vec<SplitStep>) -> Self {
        SplitRule::Steps(steps)
    }
}

/// Cuts text into pieces by a [`SplitRule`]. Text a split pattern does not match is dropped, as in
/// tiktoken; Split steps keep, drop or merge it as their behavior says, as in `tokenizers`.
///
/// Each piece is given as `(start, end, space)`: the bytes `text[start..end]`, after a space when
/// `space` (only [`SplitRule::ByteLevel`] adds spaces, and only its pieces may start or end inside a
/// character).
#[derive(Clone, Debug)]
pub struct Splitter {
    rule: SplitRule,
    /// The hand-written scanner when the rule is exactly a scanner's regex (checked first: the hot path).
    scanner: Option<Scanner>,
    engine: Engine,
}

#[derive(Clone, Debug)]
enum Engine {
    Fancy(Box<Fancy>),
    /// Compiled once, shared by clones (Oniguruma regexes cannot be cloned).
    Oniguruma(Arc<CompiledSteps>),
    /// Split steps around `ByteLevel`, on Oniguruma.
    ByteLevel(Arc<CompiledByteLevel>),
}

/// A split pattern on fancy-regex.
#[derive(Clone, Debug)]
struct Fancy {
    /// The pattern with fancy-regex's default backtracking limit (the last of `BACKTRACK_LIMITS`).
    regex: Regex,
    /// The pattern with the smaller limits, compiled when first needed.
    limited: [OnceLock<Regex>; BACKTRACK_LIMITS.len() - 1],
    /// Whether the pattern may match the empty string (see [`Splitter::may_match_empty`]).
    may_match_empty: bool,
}

impl Splitter {
    pub fn new(rule: impl Into<SplitRule>) -> Result<Self, SplitError> {
        match rule.into() {
            SplitRule::Pattern(pattern) => {
                let mut splitter = Self::regex_only(&pattern)?;
                splitter.scanner = Scanner::for_pattern(&pattern);
                Ok(splitter)
            }
            SplitRule::Steps(steps) => {
                let mut splitter = Self::exact_steps(steps)?;
                splitter.scanner = match &splitter.rule {
                    SplitRule::Steps(steps) => scanner_for_steps(steps),
                    SplitRule::Pattern(_) | SplitRule::ByteLevel(_) => None,
                };
                Ok(splitter)
            }
            SplitRule::ByteLevel(steps) => Self::exact_byte_level(steps),
        }
    }

    /// A splitter that runs the rule's own engine (fancy-regex, or Oniguruma for Split steps), never
    /// a scanner: the reference the scanners are proven against.
    pub fn exact(rule: impl Into<SplitRule>) -> Result<Self, SplitError> {
        match rule.into() {
            SplitRule::Pattern(pattern) => Self::regex_only(&pattern),
            SplitRule::Steps(steps) => Self::exact_steps(steps),
            SplitRule::ByteLevel(steps) => Self::exact_byte_level(steps),
        }
    }

    fn exact_byte_level(steps: ByteLevelSteps) -> Result<Self, SplitError> {
        let engine = Engine::ByteLevel(Arc::new(CompiledByteLevel::new(&steps)?));
        Ok(Self { rule: SplitRule::ByteLevel(steps), scanner: None, engine })
    }

    fn exact_steps(steps: Vec<SplitStep>) -> Result<Self, SplitError> {
        let compiled = CompiledSteps::new(&steps)?;
        let engine = Engine::Oniguruma(Arc::new(compiled));
        Ok(Self { rule: SplitRule::Steps(steps), scanner: None, engine })
    }

    /// What splits text: `"scanner llama3 (Oniguruma)"`, `"fancy-regex"`, `"Oniguruma"` (Split steps,
    /// with `ByteLevel` among them or not).
    pub fn engine(&self) -> String {
        match (self.scanner, &self.engine) {
            (Some(scanner), Engine::Fancy(_)) => format!("scanner {} (fancy-regex)", scanner.name()),
            (Some(scanner), Engine::Oniguruma(_)) => format!("scanner {} (Oniguruma)", scanner.name()),
            (None, Engine::Fancy(_)) => "fancy-regex".to_owned(),
            (None, Engine::Oniguruma(_) | Engine::ByteLevel(_)) => "Oniguruma".to_owned(),
            (Some(_), Engine::ByteLevel(_)) => unreachable!("no scanner splits around ByteLevel"),
        }
    }

    /// A splitter that always runs the regex, even for a named pattern (to test the scanners).
    pub fn regex_only(pattern: &str) -> Result<Self, SplitError> {
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(SplitError::BadPattern {
                pattern: pattern.to_owned(),
                reason: format!(
                    "it is {} bytes; hf_bpe takes split patterns up to {MAX_PATTERN_BYTES} bytes (real ones are under 1 KB)",
                    pattern.len()
                ),
            });
        }
        let regex = Regex::new(pattern).map_err(|error| SplitError::BadPattern {
            pattern: pattern.to_owned(),
            reason: error.to_string(),
        })?;
        let may_match_empty = Expr::parse_tree(pattern).map_or(true, |tree| nullable(&tree.expr));
        let fancy = Fancy { regex, limited: Default::default(), may_match_empty };
        Ok(Self { rule: SplitRule::Pattern(pattern.to_owned()), scanner: None, engine: Engine::Fancy(Box::new(fancy)) })
    }

    /// Whether some text may give an empty match: `false` only when every match provably takes at
    /// least one character (every named pattern, and most real ones: each alternative consumes).
    /// Split steps never give an empty piece (`tokenizers` drops them).
    pub fn may_match_empty(&self) -> bool {
        match &self.engine {
            Engine::Fancy(fancy) => fancy.may_match_empty,
            Engine::Oniguruma(_) | Engine::ByteLevel(_) => false,
        }
    }

    /// Like [`Splitter::for_each_piece`]; with `empty`, also calls `on_piece(at, at, false)` for
    /// each empty match that fancy-regex's `find_iter` yields (tiktoken looks each one up as a
    /// token). The named patterns and Split steps never give an empty match.
    pub fn for_each_match(
        &self,
        text: &str,
        empty: bool,
        mut on_piece: impl FnMut(usize, usize, bool),
    ) -> Result<(), SplitError> {
        match &self.engine {
            Engine::Fancy(fancy) if self.scanner.is_none() => fancy.for_each_piece(
                self.pattern().unwrap_or_default(),
                text,
                empty,
                |start, end| on_piece(start, end, false),
            ),
            _ => self.for_each_piece(text, on_piece),
        }
    }

    /// The rule this splitter was built from.
    pub fn rule(&self) -> &SplitRule {
        &self.rule
    }

    /// The fancy-regex pattern, or `None` for Split steps.
    pub fn pattern(&self) -> Option<&str> {
        self.rule.pattern()
    }

    /// The hand-written scanner, when the rule is exactly a scanner's regex.
    pub fn scanner(&self) -> Option<Scanner> {
        self.scanner
    }

    /// How many pieces at the end of a text more text can still change
    /// ([`Scanner::UNSETTLED_PIECES`] for rules on a scanner); `None` for other rules, where
    /// no bound is known (a regex may look any distance ahead: `a+b|a` cuts a run of `a` into
    /// single letters unless a `b` follows it).
    pub fn unsettled_pieces(&self) -> Option<usize> {
        self.scanner().map(|_| Scanner::UNSETTLED_PIECES)
    }

    /// Calls `on_piece(start, end, space)` for each piece, in order: the bytes `text[start..end]`,
    /// after a space when `space` (see [`Splitter`]).
    pub fn for_each_piece(&self, text: &str, mut on_piece: impl FnMut(usize, usize, bool)) -> Result<(), SplitError> {
        if let Some(scanner) = self.scanner {
            scanner.for_each_piece(text, |start, end| on_piece(start, end, false));
            return Ok(());
        }
        match &self.engine {
            Engine::Fancy(fancy) => fancy.for_each_piece(self.pattern().unwrap_or_default(), text, false, |start, end| {
                on_piece(start, end, false)
            }),
            Engine::Oniguruma(steps) => {
                steps.for_each_piece(text, &Budget::new(text.len()), &mut |start, end| on_piece(start, end, false))
            }
            Engine::ByteLevel(steps) => steps.for_each_piece(text, &Budget::new(text.len()), &mut on_piece),
        }
    }

    /// The pieces of `text` as string slices (convenient for tests and training); an error for a
    /// [`SplitRule::ByteLevel`] piece that is not one (see [`Splitter::piece_bytes`]).
    pub fn pieces<'t>(&self, text: &'t str) -> Result<Vec<&'t str>, SplitError> {
        let mut pieces = Vec::new();
        let mut not_text = None;
        self.for_each_piece(text, |start, end, space| match text.get(start..end) {
            Some(piece) if !space => pieces.push(piece),
            _ => not_text = not_text.or(Some(start)),
        })?;
        match not_text {
            None => Ok(pieces),
            Some(start) => Err(SplitError::Engine {
                reason: format!(
                    "the piece at byte {start} is not a slice of the text (it starts with the space ByteLevel adds, \
                     or a Split step after ByteLevel cuts a character); take the pieces as bytes"
                ),
            }),
        }
    }

    /// The pieces of `text` as bytes, each after the space `ByteLevel` put before it, if any.
    pub fn piece_bytes(&self, text: &str) -> Result<Vec<Vec<u8>>, SplitError> {
        let mut pieces = Vec::new();
        self.for_each_piece(text, |start, end, space| {
            let mut piece = Vec::with_capacity(end - start + usize::from(space));
            if space {
                piece.push(b' ');
            }
            piece.extend_from_slice(&text.as_bytes()[start..end]);
            pieces.push(piece);
        })?;
        Ok(pieces)
    }
}

impl Fancy {
    /// The regex with the backtracking limit `BACKTRACK_LIMITS[level]`.
    fn regex_at(&self, level: usize) -> &Regex {
        match self.limited.get(level) {
            None => &self.regex,
            Some(cell) => cell.get_or_init(|| {
                RegexBuilder::new(self.regex.as_str())
                    .backtrack_limit(BACKTRACK_LIMITS[level])
                    .build()
                    .expect("the pattern compiled with the default limit")
            }),
        }
    }

    /// The next match at or after `input`'s start, trying the backtracking limits in turn.
    fn find(
        &self,
        pattern: &str,
        input: &RegexInput<'_, str>,
        budget: &Budget,
    ) -> Result<Option<(usize, usize)>, SplitError> {
        for level in 0..BACKTRACK_LIMITS.len() {
            // The first attempt, the common case, is not timed: the time since the budget's last
            // check stands for its duration.
            let started = if level == 0 { budget.last_check() } else { CpuInstant::now() };
            match self.regex_at(level).find_input(input.clone()) {
                Ok(found) => return Ok(found.map(|found| (found.start(), found.end()))),
                Err(fancy_regex::Error::RuntimeError(fancy_regex::RuntimeError::BacktrackLimitExceeded))
                    if level + 1 < BACKTRACK_LIMITS.len() =>
                {
                    // The next attempt may backtrack ten times as much: give up now if, at this
                    // attempt's pace, it would overrun the budget.
                    budget.check(pattern, started.elapsed() * 10)?;
                }
                Err(error) => return Err(SplitError::Engine { reason: error.to_string() }),
            }
        }
        unreachable!("the last limit's error is returned")
    }

    /// Calls `on_piece(start, end)` with the byte range of each match of the regex, in order; with
    /// `empty`, empty matches too (as fancy-regex's `find_iter` yields them).
    fn for_each_piece(
        &self,
        pattern: &str,
        text: &str,
        empty: bool,
        mut on_piece: impl FnMut(usize, usize),
    ) -> Result<(), SplitError> {
        // fancy-regex's `find_iter`, with a budget: after an empty match the search moves on by one
        // character, an empty match right after a match is skipped, and `\G` does not match after
        // an empty match.
        let budget = Budget::new(text.len());
        let (mut start, mut last_end, mut skipped_empty) = (0, None, false);
        for found in 0.. {
            if start > text.len() {
                break;
            }
            if found % CHECK_EVERY == CHECK_EVERY - 1 {
                budget.check(pattern, Duration::ZERO)?;
            }
            let input = RegexInput::new(text).from_pos(start).continue_from_previous_match_end(!skipped_empty);
            let Some((piece_start, piece_end)) = self.find(pattern, &input, &budget)? else {
                break;
            };
            if piece_start == piece_end {
                skipped_empty = piece_end == start;
                start = piece_end + text[piece_end..].chars().next().map_or(1, char::len_utf8);
                if Some(piece_end) == last_end {
                    continue;
                }
                if empty {
                    on_piece(piece_end, piece_end);
                }
            } else {
                on_piece(piece_start, piece_end);
                start = piece_end;
                skipped_empty = false;
            }
            last_end = Some(piece_end);
        }
        Ok(())
    }
}

/// The scanner for Split steps that are one step on exactly a scanner's Oniguruma regex, keeping
/// every piece (`Isolated`, or `Removed` with `invert`): a scanner's regex matches every character,
/// so there is no text between matches for the behavior to keep or drop.
fn scanner_for_steps(steps: &[SplitStep]) -> Option<Scanner> {
    let [step] = steps else { return None };
    let keeps_matches = matches!((step.behavior, step.invert), (Behavior::Isolated, false) | (Behavior::Removed, true));
    if step.literal || !keeps_matches {
        return None;
    }
    Scanner::for_regex(&step.pattern, Semantics::Oniguruma)
}

/// Whether `expr` may match the empty string; `true` when unsure (look-arounds, backreferences,
/// conditionals and other constructs that do not obviously consume a character).
fn nullable(expr: &Expr) -> bool {
    match expr {
        Expr::Any { .. } | Expr::GeneralNewline { .. } | Expr::Delegate { .. } => false,
        Expr::Literal { val, .. } => val.is_empty(),
        Expr::LiteralBytes { bytes } => bytes.is_empty(),
        Expr::Concat(parts) => parts.iter().all(nullable),
        Expr::Alt(alternatives) => alternatives.iter().any(nullable),
        Expr::Group(inner) => nullable(inner),
        Expr::AtomicGroup(inner) => nullable(inner),
        Expr::Repeat { child, lo, .. } => *lo == 0 || nullable(child),
        Expr::AstNode(AstNode::AstGroup { inner, .. }, _) => nullable(inner),
        _ => true,
    }
}

/// How long splitting one text may take, in the CPU time of the thread splitting it.
pub(crate) struct Budget {
    bytes: usize,
    started: CpuInstant,
    last_check: Cell<CpuInstant>,
    limit: Duration,
}

impl Budget {
    pub(crate) fn new(bytes: usize) -> Self {
        let seconds = SPLIT_BASE_SECONDS + SPLIT_SECONDS_PER_MB * bytes as f64 / 1e6;
        let started = CpuInstant::now();
        Self { bytes, started, last_check: Cell::new(started), limit: Duration::from_secs_f64(seconds) }
    }

    /// When the budget was last checked (or started).
    pub(crate) fn last_check(&self) -> CpuInstant {
        self.last_check.get()
    }

    /// Fails, blaming `pattern`, when the time spent, plus `more`, is over the budget.
    pub(crate) fn check(&self, pattern: &str, more: Duration) -> Result<(), SplitError> {
        let now = CpuInstant::now();
        self.last_check.set(now);
        if now.since(self.started) + more > self.limit {
            return Err(self.too_slow(pattern));
        }
        Ok(())
    }

    /// The time left, or the error blaming `pattern` when none is.
    pub(crate) fn remaining(&self, pattern: &str) -> Result<Duration, SplitError> {
        let now = CpuInstant::now();
        self.last_check.set(now);
        self.limit.checked_sub(now.since(self.started)).ok_or_else(|| self.too_slow(pattern))
    }

    /// The error for a text whose splitting would overrun the budget.
    pub(crate) fn too_slow(&self, pattern: &str) -> SplitError {
        SplitError::TooSlow { pattern: pattern.to_owned(), bytes: self.bytes, budget: self.limit }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::scan::GPT2;

    #[test]
    fn splits_words_with_their_leading_space() {
        let splitter = Splitter::new(GPT2).unwrap();
        assert_eq!(splitter.pieces("Hello world's  end").unwrap(), ["Hello", " world", "'s", " ", " end"]);
    }

    #[test]
    fn named_patterns_use_a_scanner_and_others_the_regex() {
        assert!(Splitter::new(GPT2).unwrap().scanner().is_some());
        assert!(Splitter::regex_only(GPT2).unwrap().scanner().is_none());
        assert!(Splitter::new(r"\w+|\s+").unwrap().scanner().is_none());
    }

    #[test]
    fn regex_only_splits_like_the_scanner() {
        let text = "Hello world's  end";
        let regex = Splitter::regex_only(GPT2).unwrap();
        assert_eq!(regex.pieces(text), Splitter::new(GPT2).unwrap().pieces(text));
    }

    /// Non-empty matches of fancy-regex's own iterator.
    fn find_iter_pieces<'t>(pattern: &str, text: &'t str) -> Vec<&'t str> {
        Regex::new(pattern)
            .unwrap()
            .find_iter(text)
            .map(|found| found.unwrap().as_str())
            .filter(|piece| !piece.is_empty())
            .collect()
    }

    #[test]
    fn splits_as_fancy_regex_iterates() {
        // Patterns with empty matches (after a match, at the end, between multi-byte characters),
        // \G, look-arounds, possessive and atomic groups.
        let patterns = [
            r"a*", r"\b", r"(?=a)|b", r"x*(?!y)", r"\G\w", r"\G\w|\s", r"(?<=a)b*", r"\p{L}*+|\s",
            r"(?>a|ab)c|.", r"(?:)", r"é?", r"\s+(?!\S)|\s+|\S+", r"$|^", r"(?m:^)\w*",
        ];
        let texts = ["", "a", "aab ab b", "xyx yy x", "日本語 é a\u{e9}b", "\n a\nb\n", "ééé aaa \u{1F600}b"];
        for pattern in patterns {
            let splitter = Splitter::regex_only(pattern).unwrap();
            for text in texts {
                assert_eq!(splitter.pieces(text).unwrap(), find_iter_pieces(pattern, text), "{pattern:?} on {text:?}");
            }
        }
    }

    #[test]
    fn empty_matches_are_reported_as_fancy_regex_iterates_them() {
        let patterns = [r"a*", r"\b", r"(?=a)|b", r"x*(?!y)", r"(?:)", r"é?", r"$|^", r"(?m:^)\w*", r"\w+|\s+"];
        let texts = ["", "a", "aab ab b", "xyx yy x", "日本語 é a\u{e9}b", "\n a\nb\n"];
        for pattern in patterns {
            let splitter = Splitter::regex_only(pattern).unwrap();
            for text in texts {
                let mut found = Vec::new();
                splitter.for_each_match(text, true, |start, end, _| found.push(&text[start..end])).unwrap();
                let expected: Vec<&str> =
                    Regex::new(pattern).unwrap().find_iter(text).map(|found| found.unwrap().as_str()).collect();
                assert_eq!(found, expected, "{pattern:?} on {text:?}");
            }
        }
    }

    #[test]
    fn patterns_that_never_match_empty_are_told_apart() {
        let texts = ["", "a", "aab ab b", "xyx yy x", "日本語 é a\u{e9}b", "\n a\nb\n", "it's 42 ...  \t\n"];
        let patterns = [
            (crate::scan::GPT2, false),
            (crate::scan::CL100K, false),
            (crate::scan::O200K, false),
            (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+", false),
            (r"(?:ab|c)+|[\d]{2,3}|(?>x)", false),
            (r"a*", true),
            (r"\b", true),
            (r"(?=a)|b", true),
            (r"x*(?!y)", true),
            (r"é?", true),
            (r"\w+|", true),
            (r"(a)\1", false),
        ];
        for (pattern, nullable) in patterns {
            let splitter = Splitter::regex_only(pattern).unwrap();
            assert_eq!(splitter.may_match_empty(), nullable, "{pattern:?}");
            if !nullable {
                for text in texts {
                    let mut empty = false;
                    splitter.for_each_match(text, true, |start, end, _| empty |= start == end).unwrap();
                    assert!(!empty, "{pattern:?} matched empty in {text:?}");
                }
            }
        }
    }

    /// Splits `text`, returning the result and the CPU time it took.
    fn timed_split(pattern: &str, text: &str) -> (Result<usize, SplitError>, Duration) {
        let splitter = Splitter::new(pattern).unwrap();
        let started = CpuInstant::now();
        let result = splitter.pieces(text).map(|pieces| pieces.len());
        (result, started.elapsed())
    }

    fn assert_stopped_in_time(pattern: &str, text: &str) {
        let (result, took) = timed_split(pattern, text);
        assert!(matches!(result, Err(SplitError::TooSlow { .. })), "{pattern:?}: {result:?} after {took:?}");
        let budget = SPLIT_BASE_SECONDS + SPLIT_SECONDS_PER_MB * text.len() as f64 / 1e6;
        assert!(took.as_secs_f64() < budget + 5.0, "{pattern:?} took {took:?}, budget {budget} s");
    }

    #[test]
    fn catastrophic_backtracking_on_every_match_stops_within_the_budget() {
        // Each match spends about 500,000 steps, under fancy-regex's limit of 1,000,000 per match:
        // 3,000 matches took over 8 minutes.
        assert_stopped_in_time(r"(?:(?:a?){19}a{19}(?=x)|a)", &"a".repeat(3000));
    }

    #[test]
    fn a_look_around_rescanning_the_text_stops_within_the_budget() {
        // One match attempt runs the look-ahead over the rest of the text at each of its steps.
        assert_stopped_in_time(r"(?:a(?!a*!))+b", &"a".repeat(200_000));
    }

    #[test]
    fn quadratic_matching_stops_within_the_budget() {
        assert_stopped_in_time(r"\w+(?=!)|.", &"a".repeat(300_000));
    }

    #[test]
    fn patterns_without_catastrophic_backtracking_split_long_texts() {
        let (result, _) = timed_split(r"\w+(?=!)|.", &"ab!".repeat(100_000));
        assert_eq!(result.unwrap(), 200_000);
        let (result, _) = timed_split(r"(a+)+$", &"a".repeat(1_000_000)); // a regex-crate pattern: linear
        assert_eq!(result.unwrap(), 1);
    }

    #[test]
    fn patterns_over_the_limit_are_refused_before_compiling() {
        let pattern = "a|".repeat(MAX_PATTERN_BYTES / 2) + "b";
        let started = CpuInstant::now();
        let error = Splitter::new(&pattern).unwrap_err().to_string();
        assert!(error.contains("it is 65537 bytes; hf_bpe takes split patterns up to 65536 bytes"), "{error}");
        assert!(started.elapsed().as_secs_f64() < 0.1);
        assert!(Splitter::new("a|".repeat(MAX_PATTERN_BYTES / 2 - 1)).is_ok());
    }

    #[test]
    fn long_patterns_are_cut_short_in_messages() {
        let pattern = format!("({})", "a|".repeat(1000));
        let message = Splitter::new(format!("{pattern}(")).unwrap_err().to_string();
        assert!(message.len() < 600 && message.contains("... (2003 bytes)"), "{message}");
    }

    #[test]
    fn bad_pattern_is_reported() {
        assert!(matches!(Splitter::new("(unclosed"), Err(SplitError::BadPattern { .. })));
    }
}
