//! `tokenizers`' Split pre-tokenizer, run with Oniguruma as it is there.
//!
//! A `tokenizer.json` Split step holds an Oniguruma regex (or a plain string, matched literally), a
//! behavior and an `invert` flag. `tokenizers` compiles the regex with `onig::Regex::new`
//! (Oniguruma's default syntax and options; a plain string is first escaped with the regex crate's
//! `escape`), finds its matches as `onig`'s `find_iter` does, lists the text between them as
//! non-matches, swaps the two with `invert`, keeps, drops or merges them by the behavior, and drops
//! empty pieces; a sequence of steps re-splits every piece of the step before. This module does the
//! same with the same library, so every construct (POSIX brackets, `\w`, `\b`, `\h`, `\R`, `\X`,
//! look-behind, case folding, the Unicode tables) means exactly what it means there.
//!
//! Bounded cost. Oniguruma stops one match attempt after 10,000,000 backtracking retries (its
//! default, which `tokenizers` keeps; it panics there, we return an error). A search may try many
//! start positions, each up to that limit, so a search is first run with a small limit on the
//! retries of the whole search, raised tenfold at a time but never past what the rest of the text's
//! time budget ([`crate::pretokenize`]) affords at the pace of the last attempt; when even that is
//! not more than the last attempt had, the text is too slow. A search that stays within its limit
//! is the same search as an unlimited one, so results do not change.

use std::borrow::Cow;
use std::os::raw::c_ulong;
use std::time::Duration;

use onig::{MatchParam, Regex, Region, SearchOptions};

use crate::cpu_time::CpuInstant;
use crate::memory;
use crate::pretokenize::{Budget, SplitError, MAX_PATTERN_BYTES};

/// What a Split step does with the matches of its regex (`tokenizers`' `SplitDelimiterBehavior`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Behavior {
    /// Matches are dropped.
    Removed,
    /// Matches and the text between them are pieces of their own.
    Isolated,
    /// A match joins the piece before it.
    MergedWithPrevious,
    /// A match joins the piece after it.
    MergedWithNext,
    /// Adjacent matches form one piece.
    Contiguous,
}

impl Behavior {
    pub const ALL: [Behavior; 5] = [
        Behavior::Removed,
        Behavior::Isolated,
        Behavior::MergedWithPrevious,
        Behavior::MergedWithNext,
        Behavior::Contiguous,
    ];

    /// The name `tokenizers`' Python API gives it (`"merged_with_previous"`).
    pub fn name(self) -> &'static str {
        match self {
            Behavior::Removed => "removed",
            Behavior::Isolated => "isolated",
            Behavior::MergedWithPrevious => "merged_with_previous",
            Behavior::MergedWithNext => "merged_with_next",
            Behavior::Contiguous => "contiguous",
        }
    }

    /// The behavior [`Behavior::name`] names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|behavior| behavior.name() == name)
    }
}

/// One Split pre-tokenizer of a `tokenizer.json`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitStep {
    /// An Oniguruma regex, or with `literal` a plain string.
    pub pattern: String,
    /// `pattern` is a plain string (`{"String": ...}` in the file), not a regex.
    pub literal: bool,
    pub behavior: Behavior,
    pub invert: bool,
}

impl SplitStep {
    /// A step splitting on an Oniguruma regex.
    pub fn regex(pattern: &str, behavior: Behavior, invert: bool) -> Self {
        Self { pattern: pattern.to_owned(), literal: false, behavior, invert }
    }

    /// The regex Oniguruma compiles: the pattern, or a plain string escaped as `tokenizers` escapes
    /// it (the regex crate's `escape`, which is `regex_syntax::escape`).
    pub fn oniguruma_regex(&self) -> Cow<'_, str> {
        if self.literal {
            Cow::Owned(regex_syntax::escape(&self.pattern))
        } else {
            Cow::Borrowed(&self.pattern)
        }
    }
}

/// Split steps with their compiled regexes.
#[derive(Debug)]
pub(crate) struct CompiledSteps {
    steps: Vec<(SplitStep, Regex)>,
}

/// The retry limit of the first try of each search; each further try allows up to ten times more.
const FIRST_SEARCH_RETRY_LIMIT: u64 = 100_000;
/// The budget is checked after every this many searches (reading the thread's CPU clock is a system
/// call; between two checks each search stays within its first try's limit or is timed itself).
const SEARCHES_PER_CHECK: usize = 64;

impl CompiledSteps {
    pub(crate) fn new(steps: &[SplitStep]) -> Result<Self, SplitError> {
        if steps.is_empty() {
            return Err(SplitError::BadPattern {
                pattern: String::new(),
                reason: "a sequence of Split steps needs at least one step".to_owned(),
            });
        }
        let mut compiled = Vec::with_capacity(steps.len());
        for step in steps {
            let regex = step.oniguruma_regex();
            if regex.len() > MAX_PATTERN_BYTES {
                return Err(SplitError::BadPattern {
                    pattern: step.pattern.clone(),
                    reason: format!(
                        "it is {} bytes; hf_bpe takes split patterns up to {MAX_PATTERN_BYTES} bytes (real ones are under 1 KB)",
                        regex.len()
                    ),
                });
            }
            let compiled_regex = Regex::new(&regex).map_err(|error| SplitError::BadPattern {
                pattern: step.pattern.clone(),
                reason: format!("Oniguruma (the regex engine of `tokenizers`) refuses it: {}", error.description()),
            })?;
            compiled.push((step.clone(), compiled_regex));
        }
        Ok(Self { steps: compiled })
    }

    /// Calls `on_piece(start, end)` with the byte range of each piece of `text`, in order. (A
    /// `dyn` callback: one copy of this for every caller, none in the named patterns' hot path.)
    pub(crate) fn for_each_piece(
        &self,
        text: &str,
        budget: &Budget,
        on_piece: &mut dyn FnMut(usize, usize),
    ) -> Result<(), SplitError> {
        let mut matches = Vec::new();
        let mut pieces = vec![(0, text.len())];
        let mut next = Vec::new();
        for (step, regex) in &self.steps {
            next.clear();
            for &(start, end) in &pieces {
                find_matches(regex, &step.pattern, &text[start..end], budget, &mut matches)?;
                memory::reserve(&mut next, matches.len(), "the pieces of a split", text.len(), "bytes of text");
                apply_behavior(&matches, step.behavior, step.invert, |piece_start, piece_end| {
                    // Empty pieces are dropped after every step (`PreTokenizedString::split`).
                    if piece_start < piece_end {
                        next.push((start + piece_start, start + piece_end));
                    }
                });
            }
            std::mem::swap(&mut pieces, &mut next);
        }
        for (start, end) in pieces {
            on_piece(start, end);
        }
        Ok(())
    }
}

/// `text` cut into the matches of `regex` and the text between them, as `(start, end, is_match)`
/// covering it in order: `tokenizers`' `find_matches` over `onig`'s `find_iter` (an empty match
/// right after the last match is skipped by moving on one character; an empty text is one
/// non-match).
pub(crate) fn find_matches(
    regex: &Regex,
    pattern: &str,
    text: &str,
    budget: &Budget,
    matches: &mut Vec<(usize, usize, bool)>,
) -> Result<(), SplitError> {
    matches.clear();
    if text.is_empty() {
        matches.push((0, 0, false));
        return Ok(());
    }
    let mut region = Region::new();
    let (mut from, mut last_match_end, mut previous) = (0, None, 0);
    let mut searches = 0usize;
    while from <= text.len() {
        searches += 1;
        if searches.is_multiple_of(SEARCHES_PER_CHECK) {
            budget.check(pattern, Duration::ZERO)?;
        }
        let Some((start, end)) = search(regex, pattern, text, from, &mut region, budget)? else {
            break;
        };
        if start == end && last_match_end == Some(end) {
            from += text[from..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        from = end;
        last_match_end = Some(end);
        memory::reserve(matches, 2, "the matches of a split", text.len(), "bytes of text");
        if previous != start {
            matches.push((previous, start, false));
        }
        matches.push((start, end, true));
        previous = end;
    }
    if previous != text.len() {
        matches.push((previous, text.len(), false));
    }
    Ok(())
}

/// The first match of `regex` in `text` at or after `from` (the whole text is the subject, so
/// look-behind sees before `from`), under ever larger limits on the retries of the search.
fn search(
    regex: &Regex,
    pattern: &str,
    text: &str,
    from: usize,
    region: &mut Region,
    budget: &Budget,
) -> Result<Option<(usize, usize)>, SplitError> {
    let mut limit = FIRST_SEARCH_RETRY_LIMIT;
    // The first try is not timed: nearly every search ends within it, and reading the thread's CPU
    // clock is a system call that cost as much as the search itself. A try that runs out starts
    // the clock for the next, whose pace then bounds the tries after it.
    let mut started: Option<CpuInstant> = None;
    loop {
        let param = MatchParam::default();
        // SAFETY: `param` owns a live `OnigMatchParam`; this sets one of its fields.
        unsafe {
            onig_sys::onig_set_retry_limit_in_search_of_match_param(
                param.as_raw(),
                c_ulong::try_from(limit).unwrap_or(c_ulong::MAX),
            );
        }
        region.clear();
        match regex.search_with_param(text, from, text.len(), SearchOptions::SEARCH_OPTION_NONE, Some(region), param) {
            Ok(None) => return Ok(None),
            Ok(Some(_)) => return Ok(region.pos(0)),
            Err(error) if error.code() == onig_sys::ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER => {
                // Try again with up to ten times the retries, but no more than the rest of the
                // budget affords at the last timed try's pace: the last try ends near the budget.
                let remaining = budget.remaining(pattern)?;
                if let Some(started) = started {
                    let pace = limit as f64 / started.elapsed().as_secs_f64().max(1e-9);
                    let affordable = (pace * remaining.as_secs_f64()) as u64;
                    if affordable <= limit {
                        return Err(budget.too_slow(pattern));
                    }
                    limit = affordable.min(limit.saturating_mul(10));
                } else {
                    limit = limit.saturating_mul(10);
                }
                started = Some(CpuInstant::now());
            }
            Err(error) => {
                return Err(SplitError::Engine {
                    reason: format!(
                        "Oniguruma gave up on the split regex {pattern:?} ({}); `tokenizers` fails on this text too",
                        error.description()
                    ),
                })
            }
        }
    }
}

/// Calls `on_piece(start, end)` with the pieces `tokenizers`' `NormalizedString::split` keeps from
/// `matches` (`is_match` swapped when `invert`), empty ones included.
fn apply_behavior(
    matches: &[(usize, usize, bool)],
    behavior: Behavior,
    invert: bool,
    mut on_piece: impl FnMut(usize, usize),
) {
    let marked = matches.iter().map(|&(start, end, is_match)| (start, end, is_match != invert));
    let mut kept: Vec<(usize, usize)> = memory::with_capacity(matches.len(), "the pieces of a split", matches.len(), "matches");
    match behavior {
        Behavior::Isolated => kept.extend(marked.map(|(start, end, _)| (start, end))),
        Behavior::Removed => kept.extend(marked.filter(|&(_, _, is_match)| !is_match).map(|(start, end, _)| (start, end))),
        Behavior::Contiguous => {
            let mut previous_match = false;
            for (start, end, is_match) in marked {
                match kept.last_mut() {
                    Some(last) if is_match == previous_match => last.1 = end,
                    _ => kept.push((start, end)),
                }
                previous_match = is_match;
            }
        }
        Behavior::MergedWithPrevious => {
            let mut previous_match = false;
            for (start, end, is_match) in marked {
                match kept.last_mut() {
                    Some(last) if is_match && !previous_match => last.1 = end,
                    _ => kept.push((start, end)),
                }
                previous_match = is_match;
            }
        }
        Behavior::MergedWithNext => {
            let mut previous_match = false;
            for (start, end, is_match) in marked.rev() {
                match kept.last_mut() {
                    Some(last) if is_match && !previous_match => last.0 = start,
                    _ => kept.push((start, end)),
                }
                previous_match = is_match;
            }
            kept.reverse();
        }
    }
    for (start, end) in kept {
        on_piece(start, end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pretokenize::{SplitRule, Splitter};

    fn pieces<'t>(steps: &[SplitStep], text: &'t str) -> Vec<&'t str> {
        Splitter::new(SplitRule::Steps(steps.to_vec())).unwrap().pieces(text).unwrap()
    }

    fn split<'t>(pattern: &str, behavior: Behavior, invert: bool, text: &'t str) -> Vec<&'t str> {
        pieces(&[SplitStep::regex(pattern, behavior, invert)], text)
    }

    #[test]
    fn behaviors_split_as_tokenizers_documents_them() {
        // The examples of tokenizers' own split.rs tests.
        let text = "How are you doing?";
        let expected: [(Behavior, &[&str]); 5] = [
            (Behavior::Removed, &["How", "are", "you", "doing?"]),
            (Behavior::Isolated, &["How", " ", "are", " ", "you", " ", "doing?"]),
            (Behavior::MergedWithPrevious, &["How ", "are ", "you ", "doing?"]),
            (Behavior::MergedWithNext, &["How", " are", " you", " doing?"]),
            (Behavior::Contiguous, &["How", " ", "are", " ", "you", " ", "doing?"]),
        ];
        for (behavior, pieces) in expected {
            assert_eq!(split(" ", behavior, false, text), pieces, "{behavior:?}");
        }
        assert_eq!(split(r"\w+", Behavior::Removed, true, text), ["How", "are", "you", "doing"]);
        assert_eq!(split("-", Behavior::Contiguous, false, "a--b-c"), ["a", "--", "b", "-", "c"]);
    }

    #[test]
    fn empty_matches_keep_the_text_between_them() {
        // tokenizers keeps the gaps of a regex that can match the empty string.
        assert_eq!(split("[A-Z]*", Behavior::Isolated, false, " "), [" "]);
        assert_eq!(split("[A-Z]*", Behavior::Isolated, false, "AB cd"), ["AB", " ", "c", "d"]);
        assert_eq!(split("[A-Z]*", Behavior::Removed, true, "AB cd"), ["AB"]);
        assert_eq!(split("[A-Z]*", Behavior::MergedWithPrevious, true, "AB cd"), ["AB ", "c", "d"]);
    }

    #[test]
    fn oniguruma_constructs_mean_what_they_mean_there() {
        assert_eq!(split("[[:alpha:]]+", Behavior::Isolated, false, "Bạn x"), ["Bạn", " ", "x"]);
        assert_eq!(split(r"\w+", Behavior::Removed, true, "a²b c"), ["a²b", "c"]);
        assert_eq!(split(r"\h+", Behavior::Isolated, false, "abg12"), ["ab", "g", "12"]);
        assert_eq!(split(r"\p{N}{1,2}+", Behavior::Isolated, false, "12345"), ["12345"]);
        // `$` matches at every line end, and the empty matches leave the text between them whole.
        assert_eq!(split("$", Behavior::Isolated, false, "a\nb"), ["a", "\nb"]);
    }

    #[test]
    fn literal_patterns_are_escaped() {
        let step = SplitStep { pattern: ".+".to_owned(), literal: true, behavior: Behavior::Isolated, invert: false };
        assert_eq!(pieces(&[step], "a.+b.c"), ["a", ".+", "b.c"]);
    }

    #[test]
    fn each_step_splits_every_piece_of_the_last() {
        let steps = [
            SplitStep::regex(r"\p{N}{1,3}", Behavior::Isolated, false),
            SplitStep::regex(r"\s+|\S+", Behavior::Removed, true),
        ];
        // Look-behind sees only its own piece: `(?<=\d)` never matches at a piece's start.
        assert_eq!(pieces(&steps, "ab12345 cd"), ["ab", "123", "45", " ", "cd"]);
        let look_behind = [
            SplitStep::regex(r"\d+", Behavior::Isolated, false),
            SplitStep::regex(r"(?<=\d)x|.", Behavior::Isolated, false),
        ];
        assert_eq!(pieces(&look_behind, "1x"), ["1", "x"]);
    }

    #[test]
    fn empty_text_has_no_pieces() {
        assert!(split("a*", Behavior::Isolated, false, "").is_empty());
        assert!(split("a*", Behavior::Removed, true, "").is_empty());
    }

    #[test]
    fn patterns_oniguruma_refuses_are_reported() {
        let error = Splitter::new(SplitRule::Steps(vec![SplitStep::regex(r"[b-a]", Behavior::Isolated, false)]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("Oniguruma (the regex engine of `tokenizers`) refuses it: empty range in char class"), "{error}");
        assert!(Splitter::new(SplitRule::Steps(Vec::new())).is_err());
    }

    #[test]
    fn a_match_over_oniguruma_limit_is_an_error_as_in_tokenizers() {
        let error = Splitter::new(SplitRule::Steps(vec![SplitStep::regex("(a+)+$", Behavior::Isolated, false)]))
            .unwrap()
            .pieces(&format!("{}!", "a".repeat(40)))
            .unwrap_err()
            .to_string();
        assert!(error.contains("retry-limit-in-match over"), "{error}");
    }

    #[test]
    fn a_search_over_many_start_positions_stops_within_the_budget() {
        // At each start position the match backtracks through the rest of the text and fails, so
        // one search is quadratic, with no match to check the budget between.
        let splitter = Splitter::new(SplitRule::Steps(vec![SplitStep::regex(r"(?:a|b)*\d", Behavior::Isolated, false)]))
            .unwrap();
        let text = "ab".repeat(50_000);
        let started = CpuInstant::now();
        let result = splitter.pieces(&text);
        assert!(matches!(result, Err(SplitError::TooSlow { .. })), "{result:?}");
        assert!(started.elapsed().as_secs_f64() < 1.0 + 10.0 * text.len() as f64 / 1e6 + 5.0);
    }

    #[test]
    fn regexes_are_shared_by_threads() {
        fn send_and_sync<T: Send + Sync>() {}
        send_and_sync::<Splitter>();
    }
}
