//! Special-token matching: finding special tokens in text with Aho-Corasick.
//!
//! Building and matching cost time linear in the tokens' total length. The `aho-corasick` crate
//! picks a DFA for up to 100 tokens, and its DFA construction follows failure links byte class by
//! byte class, which is quadratic in a token's length (a single token of 40,000 bytes took 6 s);
//! so tokens longer in total than [`DFA_MAX_BYTES`] use its contiguous NFA, built in linear time.
//!
//! Tokens may carry `tokenizers`' added-token rules ([`LSTRIP`], [`RSTRIP`], [`SINGLE_WORD`],
//! [`LATER`]); a matcher with rules finds them as `tokenizers`' `AddedVocabulary` does.

use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};

use crate::Rank;

/// The token's match takes in the whitespace before it (`tokenizers`' `lstrip`), back to the end of
/// the previous match.
pub const LSTRIP: u8 = 1;
/// The token's match takes in the whitespace after it (`rstrip`).
pub const RSTRIP: u8 = 2;
/// The token matches only between non-word characters or the ends of the text (`single_word`;
/// word characters are those of the `regex` crate's Unicode `\w`).
pub const SINGLE_WORD: u8 = 4;
/// The token is looked for only in the text between the matches of the tokens without this rule
/// (`tokenizers`' `normalized = true`; where a normalizer changes the text, in that text normalized:
/// see [`SpecialMatcher::with_rules_normalized`]).
pub const LATER: u8 = 8;

/// One character of the `regex` crate's Unicode `\w` (what `tokenizers` tests for single words).
static WORD: LazyLock<fancy_regex::Regex> =
    LazyLock::new(|| fancy_regex::Regex::new(r"\A\w\z").expect("a valid regex"));
/// One character of its Unicode `\s` (what `tokenizers` strips).
static SPACE: LazyLock<fancy_regex::Regex> =
    LazyLock::new(|| fancy_regex::Regex::new(r"\A\s\z").expect("a valid regex"));

fn is_class(class: &fancy_regex::Regex, c: char) -> bool {
    let mut buffer = [0; 4];
    class.is_match(c.encode_utf8(&mut buffer)).unwrap_or(false)
}

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
    /// Each token's rules ([`LSTRIP`], [`RSTRIP`], [`SINGLE_WORD`]); empty when none has any.
    rules: Vec<u8>,
    /// The tokens with the [`LATER`] rule, looked for between this matcher's matches (only when
    /// some token lacks it, or when they are looked for in normalized text: otherwise they are this
    /// matcher's own tokens).
    later: Option<Box<SpecialMatcher>>,
    /// Whether the [`LATER`] tokens are spelled as normalized and looked for in the normalized text
    /// of each stretch between this matcher's matches, which the model finds
    /// ([`SpecialMatcher::later_in_normalized`]).
    in_normalized: bool,
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
        Self::with_rules(tokens.into_iter().map(|(token, id)| (token, id, 0)))
    }

    /// Builds a matcher for `(token, id, rules)` triples, the rules a combination of [`LSTRIP`],
    /// [`RSTRIP`], [`SINGLE_WORD`] and [`LATER`]. Empty tokens are ignored.
    pub fn with_rules<'a>(tokens: impl IntoIterator<Item = (&'a str, Rank, u8)>) -> Self {
        let tokens: Vec<(&str, Rank, u8)> = tokens.into_iter().filter(|(token, _, _)| !token.is_empty()).collect();
        let first = tokens.iter().filter(|(_, _, rules)| rules & LATER == 0).count();
        if first == 0 || first == tokens.len() {
            return Self::one_phase(tokens.iter().map(|&(token, id, rules)| (token, id, rules & !LATER)));
        }
        let mut matcher = Self::one_phase(tokens.iter().filter(|(_, _, rules)| rules & LATER == 0).copied());
        let later = Self::one_phase(
            tokens.iter().filter(|(_, _, rules)| rules & LATER != 0).map(|&(token, id, rules)| (token, id, rules & !LATER)),
        );
        matcher.longest = matcher.longest.max(later.longest);
        matcher.later = Some(Box::new(later));
        matcher
    }

    /// Builds a matcher for `(token, id, rules)` triples whose [`LATER`] tokens are looked for as
    /// `tokenizers` looks for `normalized` added tokens under a normalizer that changes text: spelled
    /// as `normalize` writes them, in the normalized text of each stretch between the other tokens'
    /// matches. [`SpecialMatcher::find_all`] then finds only the other tokens; the model normalizes
    /// each stretch and finds the rest with [`SpecialMatcher::later_in_normalized`]. A token whose
    /// normalized spelling is empty is ignored (as `tokenizers` never matches it).
    pub fn with_rules_normalized<'a, E>(
        tokens: impl IntoIterator<Item = (&'a str, Rank, u8)>,
        mut normalize: impl FnMut(&str) -> Result<String, E>,
    ) -> Result<Self, E> {
        let tokens: Vec<(&str, Rank, u8)> = tokens.into_iter().filter(|(token, _, _)| !token.is_empty()).collect();
        if tokens.iter().all(|(_, _, rules)| rules & LATER == 0) {
            return Ok(Self::with_rules(tokens));
        }
        let normalized = tokens
            .iter()
            .filter(|(_, _, rules)| rules & LATER != 0)
            .map(|&(token, id, rules)| Ok((normalize(token)?, id, rules & !LATER)))
            .collect::<Result<Vec<_>, E>>()?;
        let later = Self::one_phase(
            normalized.iter().filter(|(token, _, _)| !token.is_empty()).map(|(token, id, rules)| (token.as_str(), *id, *rules)),
        );
        let mut matcher = Self::one_phase(tokens.iter().filter(|(_, _, rules)| rules & LATER == 0).copied());
        matcher.longest = matcher.longest.max(later.longest);
        matcher.later = Some(Box::new(later));
        matcher.in_normalized = true;
        Ok(matcher)
    }

    /// The tokens to look for in the normalized text of each stretch between the matches of
    /// [`SpecialMatcher::find_all`], spelled as normalized, when this matcher has such tokens (see
    /// [`SpecialMatcher::with_rules_normalized`]).
    pub fn later_in_normalized(&self) -> Option<&SpecialMatcher> {
        self.later.as_deref().filter(|_| self.in_normalized)
    }

    fn one_phase<'a>(tokens: impl IntoIterator<Item = (&'a str, Rank, u8)>) -> Self {
        let mut ids = Vec::new();
        let mut rules = Vec::new();
        let tokens: Vec<String> = tokens
            .into_iter()
            .map(|(token, id, rule)| {
                ids.push(id);
                rules.push(rule);
                token.to_owned()
            })
            .collect();
        if rules.iter().all(|&rule| rule == 0) {
            rules.clear();
        }
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
            rules,
            later: None,
            in_normalized: false,
            longest,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.automaton.is_none() && self.later.is_none()
    }

    /// Whether some token has a rule (then a match depends on text beyond the token itself, and
    /// [`SpecialMatcher::find_all`] collects its matches first).
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty() || self.later.is_some()
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

    /// Every special token in `text`, non-overlapping, left to right. With rules, as `tokenizers`
    /// finds added tokens: a match spans the whitespace its token strips, and tokens with
    /// [`LATER`] are looked for in the text between the others' matches (unless they are looked for
    /// in normalized text: [`SpecialMatcher::later_in_normalized`]).
    pub fn find_all<'s, 't>(&'s self, text: &'t str) -> Box<dyn Iterator<Item = SpecialMatch> + 's>
    where
        't: 's,
    {
        if !self.has_rules() {
            return Box::new(self.automaton.iter().flat_map(move |automaton| {
                automaton.find_iter(text).map(move |found| SpecialMatch {
                    start: found.start(),
                    end: found.end(),
                    id: self.ids[found.pattern().as_usize()],
                })
            }));
        }
        let first = self.find_with_rules(text, 0);
        let Some(later) = self.later.as_deref().filter(|_| !self.in_normalized) else {
            return Box::new(first.into_iter());
        };
        let mut all = Vec::with_capacity(first.len());
        let mut done = 0;
        for found in first {
            all.extend(later.find_with_rules(&text[done..found.start], done));
            all.push(found);
            done = found.end;
        }
        all.extend(later.find_with_rules(&text[done..], done));
        Box::new(all.into_iter())
    }

    /// The matches in `text` (offsets plus `base`) with this matcher's rules applied, as
    /// `tokenizers`' `AddedVocabulary::find_matches`: a single-word token between word characters is
    /// skipped, stripping takes in whitespace (lstrip no further back than the previous match).
    pub(crate) fn find_with_rules(&self, text: &str, base: usize) -> Vec<SpecialMatch> {
        let Some(automaton) = &self.automaton else { return Vec::new() };
        let mut found = Vec::new();
        let mut done = 0;
        for candidate in automaton.find_iter(text) {
            let index = candidate.pattern().as_usize();
            let rules = self.rules.get(index).copied().unwrap_or(0);
            let (mut start, mut end) = (candidate.start(), candidate.end());
            if rules & SINGLE_WORD != 0 {
                let word_before = text[..start].chars().next_back().is_some_and(|c| is_class(&WORD, c));
                let word_after = text[end..].chars().next().is_some_and(|c| is_class(&WORD, c));
                if word_before || word_after {
                    continue;
                }
            }
            if rules & LSTRIP != 0 {
                let before = text[..start].chars().rev();
                let spaces: usize = before.take_while(|&c| is_class(&SPACE, c)).map(char::len_utf8).sum();
                start = (start - spaces).max(done);
            }
            if rules & RSTRIP != 0 {
                end += text[end..].chars().take_while(|&c| is_class(&SPACE, c)).map(char::len_utf8).sum::<usize>();
            }
            found.push(SpecialMatch { start: base + start, end: base + end, id: self.ids[index] });
            done = end;
        }
        found
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
    fn rules_strip_whitespace_and_skip_matches_inside_words() {
        let matcher = SpecialMatcher::with_rules([("<s>", 1, LSTRIP | RSTRIP), ("ab", 2, SINGLE_WORD), ("x", 3, LATER)]);
        let found = |text: &str| matcher.find_all(text).map(|m| (m.start, m.end, m.id)).collect::<Vec<_>>();
        assert_eq!(found("a \u{3000}<s>\n b"), vec![(1, 10, 1)]);
        assert_eq!(found("ab cab ab_ ab."), vec![(0, 2, 2), (11, 13, 2)]);
        assert_eq!(found("ab\u{301} \u{301}ab"), vec![]); // a combining mark is a word character
        // LATER tokens are looked for between the others: "<s>" is cut out first, then "x" around it.
        assert_eq!(found("x<s>x"), vec![(0, 1, 3), (1, 4, 1), (4, 5, 3)]);
        // lstrip reaches back no further than the previous match.
        let both = SpecialMatcher::with_rules([("<a>", 1, RSTRIP), ("<b>", 2, LSTRIP)]);
        assert_eq!(both.find_all("<a>  <b>").map(|m| (m.start, m.end)).collect::<Vec<_>>(), vec![(0, 5), (5, 8)]);
        assert!(both.has_rules() && !SpecialMatcher::new([("<a>", 1)]).has_rules());
    }

    #[test]
    fn empty_matcher_finds_nothing() {
        let matcher = SpecialMatcher::new([]);
        assert!(matcher.find("<|endoftext|>").is_none());
        assert_eq!(matcher.find_all("abc").count(), 0);
    }
}
