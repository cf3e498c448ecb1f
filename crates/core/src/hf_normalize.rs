//! `tokenizers`' normalizers (a `tokenizer.json`'s `normalizer`), with the offsets they keep.
//!
//! `tokenizers` rewrites each stretch of text between added tokens with its normalizer before
//! splitting it, and keeps, for every byte of the rewritten text, the range of the original it came
//! from (its `NormalizedString` alignments). This module runs the same steps on the same tables:
//! NFC, NFD, NFKC and NFKD with `unicode-normalization-alignments` (the crate `tokenizers` uses, with
//! its Unicode 9 tables: Python's `unicodedata` would normalize characters added since differently),
//! `Lowercase` with Rust's `char::to_lowercase`, `Strip` with `char::is_whitespace`, `Replace` on
//! Oniguruma (found as a Split step finds its matches, [`crate::onig_split`]), `Prepend`, and
//! `Precompiled` (a SentencePiece charsmap, run as `tokenizers` runs it: see [`precompiled`]).
//!
//! Alignments follow `tokenizers`' rules for rewriting text: a character that replaces one of the
//! original takes that character's range, a character added after another takes the range of the
//! one before it (the first character of a text, with nothing before, gets the empty range at 0),
//! and a replacement takes the range of the last character of what it replaces. A token's offsets
//! run from the start of its first byte's range to the end of its last byte's.

use std::sync::Arc;

use onig::Regex;
use unicode_normalization_alignments::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

use crate::normalize::CharsMap;

use crate::onig_split::find_matches;
use crate::pretokenize::{Budget, SplitError, MAX_PATTERN_BYTES};

/// One normalizer of a `tokenizer.json` (the steps of a `Sequence` are listed in turn).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NormalizeStep {
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
    Lowercase,
    /// Drop leading (`left`) and trailing (`right`) whitespace (`char::is_whitespace`).
    Strip { left: bool, right: bool },
    /// Replace each match of `pattern` (an Oniguruma regex, or with `literal` a plain string) by
    /// `content`.
    Replace { pattern: String, literal: bool, content: String },
    /// Put `0` in front of any text that is not empty.
    Prepend(String),
    /// `ByteLevel`'s `add_prefix_space`: put a space in front of a text that is not empty and does
    /// not start with one (run on each stretch between added tokens, as that pre-tokenizer is when
    /// it is the only one).
    PrefixSpace,
    /// A SentencePiece `precompiled_charsmap`, base64 (standard alphabet, padded) as a
    /// `tokenizer.json` holds it.
    Precompiled(String),
}

impl NormalizeStep {
    /// The name `tokenizers` gives the normalizer (its `type` in the file).
    pub fn name(&self) -> &'static str {
        match self {
            NormalizeStep::Nfc => "NFC",
            NormalizeStep::Nfd => "NFD",
            NormalizeStep::Nfkc => "NFKC",
            NormalizeStep::Nfkd => "NFKD",
            NormalizeStep::Lowercase => "Lowercase",
            NormalizeStep::Strip { .. } => "Strip",
            NormalizeStep::Replace { .. } => "Replace",
            NormalizeStep::Prepend(_) => "Prepend",
            NormalizeStep::PrefixSpace => "ByteLevel",
            NormalizeStep::Precompiled(_) => "Precompiled",
        }
    }
}

/// Normalizer steps ready to run (regexes compiled once, shared by clones).
#[derive(Clone, Debug)]
pub struct Normalizer {
    steps: Vec<NormalizeStep>,
    regexes: Vec<Option<Arc<Regex>>>,
    charsmaps: Vec<Option<Arc<CharsMap>>>,
}

/// Normalized text, and with offsets wanted, for each of its bytes the range of the original it
/// stands for.
type Normalized = (String, Option<Vec<(usize, usize)>>);

/// Text being normalized: the text, and (when offsets are wanted) for each of its bytes the start
/// and end of the original bytes it stands for.
struct Aligned {
    text: String,
    align: Option<Vec<(usize, usize)>>,
}

impl Aligned {
    /// Replaces `text[range]` by the characters of `dest`, each with its change: `0` replaces the
    /// next character of the range, `1` is added, `-n` replaces the next character and removes the
    /// `n` after it; `skipped` characters at the start of the range are removed first.
    fn transform(&mut self, range: std::ops::Range<usize>, dest: impl IntoIterator<Item = (char, isize)>, skipped: usize) {
        let old = &self.text[range.clone()];
        let mut replaced = old.chars();
        let mut offset = range.start + (&mut replaced).take(skipped).map(char::len_utf8).sum::<usize>();
        let mut text = String::with_capacity(old.len());
        let mut align = self.align.as_ref().map(|_| Vec::with_capacity(old.len()));
        for (char, change) in dest {
            if let (Some(align), Some(old_align)) = (align.as_mut(), self.align.as_ref()) {
                let at = if change > 0 {
                    if offset == 0 { (0, 0) } else { old_align[offset - 1] }
                } else {
                    old_align[offset]
                };
                align.extend(std::iter::repeat_n(at, char.len_utf8()));
            }
            if change <= 0 {
                offset += replaced.next().map_or(0, char::len_utf8);
            }
            if change < 0 {
                offset += (&mut replaced).take(change.unsigned_abs()).map(char::len_utf8).sum::<usize>();
            }
            text.push(char);
        }
        if let (Some(all), Some(align)) = (self.align.as_mut(), align) {
            all.splice(range.clone(), align);
        }
        self.text.replace_range(range, &text);
    }

    fn transform_all(&mut self, dest: impl IntoIterator<Item = (char, isize)>, skipped: usize) {
        self.transform(0..self.text.len(), dest, skipped);
    }
}

impl Normalizer {
    pub fn new(steps: Vec<NormalizeStep>) -> Result<Self, SplitError> {
        let regexes = steps
            .iter()
            .map(|step| match step {
                NormalizeStep::Replace { pattern, literal, .. } => {
                    let regex = if *literal { regex_syntax::escape(pattern) } else { pattern.clone() };
                    if regex.len() > MAX_PATTERN_BYTES {
                        return Err(SplitError::BadPattern {
                            pattern: pattern.clone(),
                            reason: format!("it is {} bytes; hf_bpe takes Replace patterns up to {MAX_PATTERN_BYTES} bytes", regex.len()),
                        });
                    }
                    Regex::new(&regex).map(|regex| Some(Arc::new(regex))).map_err(|error| SplitError::BadPattern {
                        pattern: pattern.clone(),
                        reason: format!("Oniguruma (the regex engine of `tokenizers`) refuses it: {}", error.description()),
                    })
                }
                _ => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        let charsmaps = steps
            .iter()
            .map(|step| match step {
                NormalizeStep::Precompiled(encoded) => {
                    let bad = |reason: String| SplitError::BadPattern { pattern: "Precompiled charsmap".into(), reason };
                    let blob = decode_base64(encoded).ok_or_else(|| bad("it is not standard padded base64".into()))?;
                    CharsMap::parse_for_tokenizers(&blob).map(|map| Some(Arc::new(map))).map_err(bad)
                }
                _ => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { steps, regexes, charsmaps })
    }

    pub fn steps(&self) -> &[NormalizeStep] {
        &self.steps
    }

    /// `text` normalized.
    pub fn normalize(&self, text: &str) -> Result<String, SplitError> {
        Ok(self.run(text, false)?.0)
    }

    /// `text` normalized, and for each of its bytes (and one past the end) the byte offset in
    /// `text` where the original it stands for starts.
    pub fn normalize_aligned(&self, text: &str) -> Result<(String, Vec<usize>), SplitError> {
        let (normalized, align) = self.run(text, true)?;
        let mut starts: Vec<usize> = align.unwrap_or_default().into_iter().map(|(start, _)| start).collect();
        starts.push(text.len());
        Ok((normalized, starts))
    }

    /// `text` normalized, and for each of its bytes the range of `text` (byte offsets) it stands
    /// for: `tokenizers`' alignments.
    pub fn normalize_with_alignments(&self, text: &str) -> Result<(String, Vec<(usize, usize)>), SplitError> {
        let (normalized, align) = self.run(text, true)?;
        Ok((normalized, align.unwrap_or_default()))
    }

    /// `text` normalized, where `align` holds for each byte of `text` the range of some original
    /// text it stands for (a stretch of text normalized before): each byte of the result with the
    /// range of that original it stands for, as `tokenizers` keeps alignments from step to step.
    pub fn normalize_realigned(&self, text: &str, align: Vec<(usize, usize)>) -> Result<(String, Vec<(usize, usize)>), SplitError> {
        debug_assert_eq!(text.len(), align.len());
        let (normalized, align) = self.run_from(text, Some(align))?;
        Ok((normalized, align.unwrap_or_default()))
    }

    fn run(&self, text: &str, aligned: bool) -> Result<Normalized, SplitError> {
        let align = aligned.then(|| {
            text.char_indices()
                .flat_map(|(start, char)| std::iter::repeat_n((start, start + char.len_utf8()), char.len_utf8()))
                .collect()
        });
        self.run_from(text, align)
    }

    fn run_from(&self, text: &str, align: Option<Vec<(usize, usize)>>) -> Result<Normalized, SplitError> {
        let mut state = Aligned { text: text.to_owned(), align };
        for ((step, regex), charsmap) in self.steps.iter().zip(&self.regexes).zip(&self.charsmaps) {
            match step {
                NormalizeStep::Nfc => normalize_with(&mut state, |text| text.nfc().collect()),
                NormalizeStep::Nfd => normalize_with(&mut state, |text| text.nfd().collect()),
                NormalizeStep::Nfkc => normalize_with(&mut state, |text| text.nfkc().collect()),
                NormalizeStep::Nfkd => normalize_with(&mut state, |text| text.nfkd().collect()),
                NormalizeStep::Lowercase => {
                    if state.text.chars().any(|char| char.to_lowercase().ne(std::iter::once(char))) {
                        let dest: Vec<(char, isize)> = state
                            .text
                            .chars()
                            .flat_map(|char| char.to_lowercase().enumerate().map(|(index, lower)| (lower, isize::from(index > 0))))
                            .collect();
                        state.transform_all(dest, 0);
                    }
                }
                NormalizeStep::Strip { left, right } => strip(&mut state, *left, *right),
                NormalizeStep::Replace { pattern, content, .. } => {
                    replace(&mut state, regex.as_deref().expect("compiled in new"), pattern, content)?;
                }
                NormalizeStep::PrefixSpace => {
                    let prefix = if state.text.starts_with(' ') { "" } else { " " };
                    prepend(&mut state, prefix);
                }
                NormalizeStep::Prepend(prefix) => prepend(&mut state, prefix),
                NormalizeStep::Precompiled(_) => precompiled(&mut state, charsmap.as_deref().expect("parsed in new")),
            }
        }
        Ok((state.text, state.align))
    }
}

/// `Precompiled`, as `tokenizers` runs a charsmap (not as SentencePiece does): the text is cut into
/// extended grapheme clusters; a cluster of under 6 bytes with a rule matching a prefix of it is
/// replaced whole by the shortest such rule's replacement; any other cluster has each of its
/// characters replaced by the shortest rule matching a prefix of that character, if any.
///
/// Offsets follow how `tokenizers` records a replacement of `k` characters by `m`: each new
/// character replaces one; when `m > k` the last `m - k` new characters are added instead; when
/// `m < k` the last change recorded so far (possibly a character of an earlier replacement, or none
/// at the start of the text) also removes the `k - m` left over.
fn precompiled(state: &mut Aligned, map: &CharsMap) {
    fn push(dest: &mut Vec<(char, isize)>, replacement: &str, replaced: usize) {
        let count = replacement.chars().count();
        dest.extend(replacement.chars().map(|char| (char, 0)));
        if count > replaced {
            let from = dest.len() - (count - replaced);
            dest[from..].iter_mut().for_each(|(_, change)| *change = 1);
        } else if count < replaced {
            if let Some((_, change)) = dest.last_mut() {
                *change -= (replaced - count) as isize;
            }
        }
    }
    let mut dest = Vec::with_capacity(state.text.len());
    let mut modified = false;
    for cluster in state.text.graphemes(true) {
        if cluster.len() < 6 {
            if let Some(replacement) = map.shortest_rule(cluster.as_bytes()) {
                modified = true;
                push(&mut dest, replacement, cluster.chars().count());
                continue;
            }
        }
        for char in cluster.chars() {
            let mut buffer = [0; 4];
            match map.shortest_rule(char.encode_utf8(&mut buffer).as_bytes()) {
                Some(replacement) => {
                    modified = true;
                    push(&mut dest, replacement, 1);
                }
                None => dest.push((char, 0)),
            }
        }
    }
    if modified {
        state.transform_all(dest, 0);
    }
}

/// Standard base64 with its padding (what `tokenizers` reads a charsmap with); `None` for anything
/// else.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let value = |byte: u8| match byte {
        b'A'..=b'Z' => Some(byte - b'A'),
        b'a'..=b'z' => Some(byte - b'a' + 26),
        b'0'..=b'9' => Some(byte - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (index, quad) in bytes.chunks_exact(4).enumerate() {
        let last = index + 1 == bytes.len() / 4;
        let padding = quad.iter().rev().take_while(|&&byte| byte == b'=').count();
        if padding > 2 || (padding > 0 && !last) {
            return None;
        }
        let mut bits = 0u32;
        for &byte in &quad[..4 - padding] {
            bits = bits << 6 | u32::from(value(byte)?);
        }
        bits <<= 6 * padding as u32;
        let decoded = [(bits >> 16) as u8, (bits >> 8) as u8, bits as u8];
        // Bits past the last byte must be zero (canonical encoding).
        if decoded[3 - padding..].iter().any(|&byte| byte != 0) {
            return None;
        }
        out.extend_from_slice(&decoded[..3 - padding]);
    }
    Some(out)
}

/// `prefix` in front of a text that is not empty; the added characters take the range of the
/// first character.
fn prepend(state: &mut Aligned, prefix: &str) {
    if let Some(first) = state.text.chars().next().filter(|_| !prefix.is_empty()) {
        let dest: Vec<(char, isize)> = prefix
            .chars()
            .enumerate()
            .map(|(index, char)| (char, isize::from(index > 0)))
            .chain(std::iter::once((first, 1)))
            .collect();
        state.transform(0..first.len_utf8(), dest, 0);
    }
}

/// A Unicode normalization form, skipped when it changes nothing (the usual case).
fn normalize_with(state: &mut Aligned, form: impl Fn(&str) -> Vec<(char, isize)>) {
    let dest = form(&state.text);
    let unchanged = dest.len() == state.text.chars().count()
        && dest.iter().zip(state.text.chars()).all(|(&(new, change), old)| change == 0 && new == old);
    if !unchanged {
        state.transform_all(dest, 0);
    }
}

/// `Strip`: leading and trailing characters that are `char::is_whitespace`.
fn strip(state: &mut Aligned, left: bool, right: bool) {
    let leading = if left { state.text.chars().take_while(|char| char.is_whitespace()).count() } else { 0 };
    let count = state.text.chars().count();
    let trailing = if right && leading < count {
        state.text.chars().rev().take_while(|char| char.is_whitespace()).count()
    } else {
        0
    };
    if leading == 0 && trailing == 0 {
        return;
    }
    let kept: Vec<(char, isize)> = state
        .text
        .chars()
        .enumerate()
        .filter(|&(index, _)| index >= leading && index < count - trailing)
        .map(|(_, char)| (char, 0))
        .collect();
    state.transform_all(kept, leading);
}

/// `Replace`: every match (empty ones too) becomes `content`, whose characters take the range of
/// the last character before the match's end.
fn replace(state: &mut Aligned, regex: &Regex, pattern: &str, content: &str) -> Result<(), SplitError> {
    let mut matches = Vec::new();
    find_matches(regex, pattern, &state.text, &Budget::new(state.text.len()), &mut matches)?;
    if !matches.iter().any(|&(_, _, is_match)| is_match) {
        return Ok(());
    }
    let mut text = String::with_capacity(state.text.len());
    let mut align = state.align.as_ref().map(|_| Vec::with_capacity(state.text.len()));
    for &(start, end, is_match) in &matches {
        if !is_match {
            text.push_str(&state.text[start..end]);
            if let (Some(align), Some(old)) = (align.as_mut(), state.align.as_ref()) {
                align.extend_from_slice(&old[start..end]);
            }
            continue;
        }
        text.push_str(content);
        if let (Some(align), Some(old)) = (align.as_mut(), state.align.as_ref()) {
            let at = if end == 0 { (0, 0) } else { old[end - 1] };
            align.extend(std::iter::repeat_n(at, content.len()));
        }
    }
    state.text = text;
    state.align = align;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(steps: Vec<NormalizeStep>, text: &str) -> (String, Vec<usize>) {
        Normalizer::new(steps).unwrap().normalize_aligned(text).unwrap()
    }

    #[test]
    fn nfc_composes_and_keeps_the_start_of_each_character() {
        let (text, starts) = normalized(vec![NormalizeStep::Nfc], "e\u{301}x");
        assert_eq!(text, "\u{e9}x");
        assert_eq!(starts, [0, 0, 3, 4]);
    }

    #[test]
    fn prepend_and_replace_take_neighbouring_ranges() {
        let steps = vec![
            NormalizeStep::Replace { pattern: " ".into(), literal: true, content: "\u{2581}".into() },
            NormalizeStep::Prepend("\u{2581}".into()),
        ];
        let (text, starts) = normalized(steps, "a b");
        assert_eq!(text, "\u{2581}a\u{2581}b");
        assert_eq!(starts, [0, 0, 0, 0, 1, 1, 1, 2, 3]);
    }

    #[test]
    fn strip_drops_whitespace_at_either_end() {
        let steps = vec![NormalizeStep::Strip { left: true, right: true }];
        assert_eq!(normalized(steps, "\u{3000} ab \n").0, "ab");
        assert_eq!(Normalizer::new(vec![NormalizeStep::Strip { left: true, right: true }]).unwrap().normalize("  ").unwrap(), "");
    }

    #[test]
    fn base64_is_read_strictly() {
        assert_eq!(decode_base64("YWJj").unwrap(), b"abc");
        assert_eq!(decode_base64("YWI=").unwrap(), b"ab");
        assert_eq!(decode_base64("YQ==").unwrap(), b"a");
        assert_eq!(decode_base64("").unwrap(), b"");
        for bad in ["YQ=", "YR==", "Y===", "YQ==YWJj", "YW J"] {
            assert_eq!(decode_base64(bad), None, "{bad}");
        }
    }

    #[test]
    fn lowercase_may_add_characters() {
        let (text, starts) = normalized(vec![NormalizeStep::Lowercase], "\u{130}A");
        assert_eq!(text, "i\u{307}a");
        assert_eq!(starts, [0, 0, 0, 2, 3]);
    }
}
