//! Pre-tokenization: cutting text into pieces with the split pattern.
//!
//! The pattern is run with `fancy-regex`, the engine tiktoken uses, so every pattern means exactly
//! what it means there (possessive quantifiers, look-ahead, `$` as end of text). The three named
//! patterns run on hand-written scanners (`crate::scan`) that find the same pieces, faster.

use std::fmt;

use crate::scan::Scanner;

/// Why a text could not be split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitError {
    /// The pattern does not compile.
    BadPattern { pattern: String, reason: String },
    /// The regex engine gave up on this text (e.g. its backtracking limit was reached).
    Engine { reason: String },
}

impl fmt::Display for SplitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SplitError::BadPattern { pattern, reason } => {
                write!(f, "split pattern {pattern:?} does not compile: {reason}")
            }
            SplitError::Engine { reason } => write!(f, "the split pattern failed on this text: {reason}"),
        }
    }
}

impl std::error::Error for SplitError {}

/// Cuts text into pieces with a split pattern. Text the pattern does not match is dropped, as in
/// tiktoken; the named patterns match every character.
#[derive(Clone, Debug)]
pub struct Splitter {
    pattern: String,
    regex: fancy_regex::Regex,
    /// The hand-written scanner when `pattern` is exactly a named pattern.
    scanner: Option<Scanner>,
}

impl Splitter {
    pub fn new(pattern: &str) -> Result<Self, SplitError> {
        let mut splitter = Self::regex_only(pattern)?;
        splitter.scanner = Scanner::for_pattern(pattern);
        Ok(splitter)
    }

    /// A splitter that always runs the regex, even for a named pattern (to test the scanners).
    pub fn regex_only(pattern: &str) -> Result<Self, SplitError> {
        let regex = fancy_regex::Regex::new(pattern).map_err(|error| SplitError::BadPattern {
            pattern: pattern.to_owned(),
            reason: error.to_string(),
        })?;
        Ok(Self { pattern: pattern.to_owned(), regex, scanner: None })
    }

    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// How many pieces at the end of a text more text can still change
    /// ([`Scanner::UNSETTLED_PIECES`] for the named patterns); `None` for other patterns, where
    /// no bound is known (a regex may look any distance ahead: `a+b|a` cuts a run of `a` into
    /// single letters unless a `b` follows it).
    pub fn unsettled_pieces(&self) -> Option<usize> {
        self.scanner.map(|_| Scanner::UNSETTLED_PIECES)
    }

    /// Calls `on_piece(start, end)` with the byte range of each piece, in order.
    pub fn for_each_piece(
        &self,
        text: &str,
        mut on_piece: impl FnMut(usize, usize),
    ) -> Result<(), SplitError> {
        if let Some(scanner) = self.scanner {
            scanner.for_each_piece(text, on_piece);
            return Ok(());
        }
        for found in self.regex.find_iter(text) {
            let piece = found.map_err(|error| SplitError::Engine { reason: error.to_string() })?;
            if piece.start() < piece.end() {
                on_piece(piece.start(), piece.end());
            }
        }
        Ok(())
    }

    /// The pieces of `text` as string slices (convenient for tests and training).
    pub fn pieces<'t>(&self, text: &'t str) -> Result<Vec<&'t str>, SplitError> {
        let mut pieces = Vec::new();
        self.for_each_piece(text, |start, end| pieces.push(&text[start..end]))?;
        Ok(pieces)
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
        assert!(Splitter::new(GPT2).unwrap().scanner.is_some());
        assert!(Splitter::regex_only(GPT2).unwrap().scanner.is_none());
        assert!(Splitter::new(r"\w+|\s+").unwrap().scanner.is_none());
    }

    #[test]
    fn regex_only_splits_like_the_scanner() {
        let text = "Hello world's  end";
        let regex = Splitter::regex_only(GPT2).unwrap();
        assert_eq!(regex.pieces(text), Splitter::new(GPT2).unwrap().pieces(text));
    }

    #[test]
    fn bad_pattern_is_reported() {
        assert!(matches!(Splitter::new("(unclosed"), Err(SplitError::BadPattern { .. })));
    }
}
