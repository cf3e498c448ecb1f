//! Special-token matching: finding special tokens in text with Aho-Corasick.

use aho_corasick::{AhoCorasick, MatchKind};

use crate::Rank;

/// A set of special tokens to look for in text. Overlapping candidates resolve to the leftmost
/// match, and among matches starting at the same place, the longest.
#[derive(Clone, Debug)]
pub struct SpecialMatcher {
    automaton: Option<AhoCorasick>,
    ids: Vec<Rank>,
    tokens: Vec<String>,
    /// The length in bytes of the longest token.
    longest: usize,
}

/// A special token found in text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecialMatch {
    pub start: usize,
    pub end: usize,
    pub id: Rank,
}

impl SpecialMatcher {
    /// Builds a matcher for `(token, id)` pairs. Empty tokens are ignored (they cannot be matched).
    pub fn new<'a>(tokens: impl IntoIterator<Item = (&'a str, Rank)>) -> Self {
        let (tokens, ids): (Vec<String>, Vec<Rank>) = tokens
            .into_iter()
            .filter(|(token, _)| !token.is_empty())
            .map(|(token, id)| (token.to_owned(), id))
            .unzip();
        let automaton = if tokens.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&tokens)
                    .expect("special-token automaton within size limits"),
            )
        };
        let longest = tokens.iter().map(String::len).max().unwrap_or(0);
        Self {
            automaton,
            ids,
            tokens,
            longest,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// The length in bytes of the longest token (0 when there are none).
    pub fn longest(&self) -> usize {
        self.longest
    }

    /// The first special token in `text`, if any.
    pub fn find(&self, text: &str) -> Option<(&str, SpecialMatch)> {
        let found = self.automaton.as_ref()?.find(text)?;
        let index = found.pattern().as_usize();
        Some((
            &self.tokens[index],
            SpecialMatch {
                start: found.start(),
                end: found.end(),
                id: self.ids[index],
            },
        ))
    }

    /// Every special token in `text`, non-overlapping, left to right.
    pub fn find_all<'s, 't>(&'s self, text: &'t str) -> impl Iterator<Item = SpecialMatch> + 's
    where
        't: 's,
    {
        self.automaton.iter().flat_map(move |automaton| {
            automaton.find_iter(text).map(move |found| SpecialMatch {
                start: found.start(),
                end: found.end(),
                id: self.ids[found.pattern().as_usize()],
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_match_wins_among_overlapping_tokens() {
        let matcher = SpecialMatcher::new([("<|a", 1), ("<|a|>", 2)]);
        let found: Vec<_> = matcher
            .find_all("x<|a|>y<|a")
            .map(|m| (m.start, m.end, m.id))
            .collect();
        assert_eq!(found, vec![(1, 6, 2), (7, 10, 1)]);
    }

    #[test]
    fn empty_matcher_finds_nothing() {
        let matcher = SpecialMatcher::new([]);
        assert!(matcher.find("<|endoftext|>").is_none());
        assert_eq!(matcher.find_all("abc").count(), 0);
    }
}
