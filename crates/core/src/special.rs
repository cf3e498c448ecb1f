//! Special-token matching: finding special tokens in text with Aho-Corasick.
//!
//! Building and matching cost time linear in the tokens' total length. The `aho-corasick` crate
//! picks a DFA for up to 100 tokens, and its DFA construction follows failure links byte class by
//! byte class, which is quadratic in a token's length (a single token of 40,000 bytes took 6 s);
//! so tokens longer in total than [`DFA_MAX_BYTES`] use its contiguous NFA, built in linear time.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use crate::Rank;

/// Tokens of at most this many bytes in total may be matched with a DFA (the fastest to run, but
/// quadratic to build in a token's length: about 15 ms here); longer sets use an NFA.
const DFA_MAX_BYTES: usize = 2048;

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
        let total: usize = tokens.iter().map(String::len).sum();
        // None: the crate's choice (a DFA for few tokens); the NFA when a DFA would be slow to build.
        let kind = (total > DFA_MAX_BYTES).then_some(AhoCorasickKind::ContiguousNFA);
        let automaton = if tokens.is_empty() {
            None
        } else {
            let build = |kind| AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).kind(kind).build(&tokens);
            // The contiguous NFA has tighter size limits than the noncontiguous one it is made from.
            Some(
                build(kind)
                    .or_else(|_| build(Some(AhoCorasickKind::NoncontiguousNFA)))
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
    fn long_and_many_tokens_build_in_linear_time() {
        // A DFA took seconds for one token of 40,000 bytes (quadratic); the NFA takes milliseconds
        // for a 1 MB token. Counted by the automaton's size, which is linear in the tokens' bytes.
        let long = "\u{65e5}".repeat((1 << 20) / 3);
        let matcher = SpecialMatcher::new([(long.as_str(), 7)]);
        let text = format!("ab{long}c");
        assert_eq!(matcher.find_all(&text).map(|m| (m.start, m.end, m.id)).collect::<Vec<_>>(), vec![(2, 2 + long.len(), 7)]);
        let automaton = matcher.automaton.as_ref().unwrap();
        assert_eq!(automaton.kind(), AhoCorasickKind::ContiguousNFA);
        assert!(automaton.memory_usage() < 64 * long.len(), "{} bytes", automaton.memory_usage());
        let many: Vec<String> = (0..100_000).map(|i| format!("<|special_{i}|>")).collect();
        let matcher = SpecialMatcher::new(many.iter().enumerate().map(|(i, t)| (t.as_str(), i as Rank)));
        assert_eq!(matcher.find("x<|special_99999|>").map(|(_, m)| m.id), Some(99_999));
        // Few short tokens keep the DFA.
        let short = SpecialMatcher::new([("<|endoftext|>", 1)]);
        assert_eq!(short.automaton.as_ref().unwrap().kind(), AhoCorasickKind::DFA);
    }

    #[test]
    fn empty_matcher_finds_nothing() {
        let matcher = SpecialMatcher::new([]);
        assert!(matcher.find("<|endoftext|>").is_none());
        assert_eq!(matcher.find_all("abc").count(), 0);
    }
}
