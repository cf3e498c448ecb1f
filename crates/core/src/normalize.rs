//! Normalizers: rewriting text before it is split into symbols.
//!
//! [`SentencePieceNormalizer`] is SentencePiece's own normalizer (`normalizer.cc`), transcribed:
//! an optional precompiled character map (a darts-clone double-array trie of rewrite rules, the
//! longest rule at each position wins), whitespace handling (`remove_extra_whitespaces`), the dummy
//! prefix and escaping spaces as `▁` (U+2581). User-defined pieces pass through unnormalized. It also
//! returns, for each normalized byte, the byte offset in the input it came from.

use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};

/// U+2581, SentencePiece's visible space.
pub const SPACE_SYMBOL: &str = "\u{2581}";

/// A precompiled character map: SentencePiece's `precompiled_charsmap` blob.
///
/// Layout: a little-endian `u32` with the size in bytes of the trie, the trie (darts-clone double
/// array units, little-endian `u32`), then the replacement strings, each ending in a NUL byte. A
/// trie leaf's value is the offset of its replacement string.
#[derive(Clone, Debug)]
pub struct CharsMap {
    units: Vec<u32>,
    replacements: Vec<u8>,
}

/// The most rules that can match at one position (`Normalizer::kMaxTrieResultsSize`).
const MAX_TRIE_RESULTS: usize = 32;

impl CharsMap {
    /// Parses a `precompiled_charsmap` blob.
    pub fn parse(blob: &[u8]) -> Result<Self, String> {
        if blob.len() <= 4 {
            return Err("the precompiled charsmap is too short to hold its trie size".into());
        }
        let trie_size = u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
        if trie_size >= blob.len() || !trie_size.is_multiple_of(4) {
            return Err(format!(
                "the precompiled charsmap declares a trie of {trie_size} bytes in a blob of {}",
                blob.len()
            ));
        }
        let trie = &blob[4..4 + trie_size];
        if trie.is_empty() {
            return Err("the precompiled charsmap has an empty trie".into());
        }
        let units = trie
            .chunks_exact(4)
            .map(|unit| u32::from_le_bytes([unit[0], unit[1], unit[2], unit[3]]))
            .collect();
        Ok(Self {
            units,
            replacements: blob[4 + trie_size..].to_vec(),
        })
    }

    /// Parses a `precompiled_charsmap` blob as `tokenizers` reads it (its `spm_precompiled` crate):
    /// the replacement strings must be UTF-8 as a whole.
    pub fn parse_for_tokenizers(blob: &[u8]) -> Result<Self, String> {
        let map = Self::parse(blob)?;
        if std::str::from_utf8(&map.replacements).is_err() {
            return Err("the replacement strings of the precompiled charsmap are not UTF-8".into());
        }
        Ok(map)
    }

    /// The replacement of the shortest rule matching a prefix of `key` (the search stops at a NUL
    /// byte), which `tokenizers`' `Precompiled` normalizer takes for the whole key. A replacement
    /// that does not start on a character boundary is no rule (only a corrupt map has one).
    pub fn shortest_rule(&self, key: &[u8]) -> Option<&str> {
        let unit = |position: usize| self.units.get(position).copied();
        let offset = |unit: u32| ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize;
        let mut position = offset(unit(0)?);
        for &byte in key.iter().take_while(|&&byte| byte != 0) {
            position ^= byte as usize;
            let current = unit(position)?;
            if current & ((1 << 31) | 0xFF) != u32::from(byte) {
                return None;
            }
            position ^= offset(current);
            if (current >> 8) & 1 == 1 {
                let value = (unit(position)? & ((1 << 31) - 1)) as usize;
                let rest = self.replacements.get(value..)?;
                let end = rest.iter().position(|&byte| byte == 0).unwrap_or(rest.len());
                return std::str::from_utf8(&rest[..end]).ok();
            }
        }
        None
    }

    /// The longest rule matching a prefix of `text`: (bytes it covers, its replacement). A rule whose
    /// replacement is not UTF-8 (only a corrupt map has one) is no rule.
    fn longest_prefix(&self, text: &[u8]) -> Option<(usize, &[u8])> {
        let unit = |position: usize| self.units.get(position).copied();
        let offset = |unit: u32| ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize;
        let mut position = offset(unit(0)?);
        let mut best: Option<(usize, usize)> = None;
        let mut found = 0;
        for (index, &byte) in text.iter().enumerate() {
            position ^= byte as usize;
            let current = unit(position)?;
            // The label (with the leaf marker bit) must be exactly this byte.
            if current & ((1 << 31) | 0xFF) != u32::from(byte) {
                break;
            }
            position ^= offset(current);
            if (current >> 8) & 1 == 1 {
                if found < MAX_TRIE_RESULTS {
                    let value = (unit(position)? & ((1 << 31) - 1)) as usize;
                    best = Some((index + 1, value));
                }
                found += 1;
            }
        }
        let (length, value) = best?;
        let rest = self.replacements.get(value..)?;
        let end = rest.iter().position(|&byte| byte == 0).unwrap_or(rest.len());
        let replacement = &rest[..end];
        std::str::from_utf8(replacement).ok()?;
        Some((length, replacement))
    }
}

/// SentencePiece's normalizer settings (its `NormalizerSpec`).
#[derive(Clone, Debug)]
pub struct SentencePieceNormalizer {
    charsmap: Option<CharsMap>,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
    /// User-defined pieces, matched anchored (longest) at each position; they pass through.
    user_defined: Option<AhoCorasick>,
}

impl SentencePieceNormalizer {
    /// `charsmap`: the precompiled blob, empty for the identity normalizer.
    pub fn new(
        charsmap: &[u8],
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        escape_whitespaces: bool,
        user_defined: &[&str],
    ) -> Result<Self, String> {
        let charsmap = if charsmap.is_empty() {
            None
        } else {
            Some(CharsMap::parse(charsmap)?)
        };
        let user_defined = if user_defined.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .start_kind(StartKind::Anchored)
                    .build(user_defined)
                    .map_err(|error| format!("cannot index the user-defined pieces: {error}"))?,
            )
        };
        Ok(Self {
            charsmap,
            add_dummy_prefix,
            remove_extra_whitespaces,
            escape_whitespaces,
            user_defined,
        })
    }

    /// True when normalizing only escapes spaces and adds the dummy prefix.
    pub fn is_identity(&self) -> bool {
        self.charsmap.is_none() && !self.remove_extra_whitespaces
    }

    pub fn add_dummy_prefix(&self) -> bool {
        self.add_dummy_prefix
    }

    pub fn remove_extra_whitespaces(&self) -> bool {
        self.remove_extra_whitespaces
    }

    /// The length of the user-defined piece starting at `text[at..]`, if any.
    fn user_defined_at(&self, text: &str, at: usize) -> Option<usize> {
        let matcher = self.user_defined.as_ref()?;
        let input = Input::new(text).range(at..).anchored(Anchored::Yes);
        matcher.find(input).map(|found| found.end() - found.start())
    }

    /// `NormalizePrefix`: how many input bytes the next step consumes and what it produces.
    fn next_step<'a>(&'a self, text: &'a str, at: usize) -> (usize, &'a [u8]) {
        if let Some(length) = self.user_defined_at(text, at) {
            return (length, &text.as_bytes()[at..at + length]);
        }
        if let Some(charsmap) = &self.charsmap {
            if let Some((length, replacement)) = charsmap.longest_prefix(&text.as_bytes()[at..]) {
                // A rule ending inside a character (only a corrupt map has one) is no rule.
                if text.is_char_boundary(at + length) {
                    return (length, replacement);
                }
            }
        }
        let length = text[at..].chars().next().map_or(1, char::len_utf8);
        (length, &text.as_bytes()[at..at + length])
    }

    /// Normalizes `text` (`Normalizer::Normalize`). Returns the normalized text and, for each of its
    /// bytes plus one past the end, the offset of the input byte it came from.
    pub fn normalize(&self, text: &str) -> (String, Vec<usize>) {
        self.normalize_with_prefix(text, self.add_dummy_prefix)
    }

    /// [`SentencePieceNormalizer::normalize`] with the dummy prefix added or not as `prefix` says.
    pub fn normalize_with_prefix(&self, text: &str, prefix: bool) -> (String, Vec<usize>) {
        let mut normalized: Vec<u8> = Vec::with_capacity(text.len() + 3);
        let mut origins: Vec<usize> = Vec::with_capacity(text.len() + 4);
        if text.is_empty() {
            origins.push(0);
            return (String::new(), origins);
        }
        let mut consumed = 0;
        if self.remove_extra_whitespaces {
            while consumed < text.len() {
                let (length, produced) = self.next_step(text, consumed);
                if produced != b" " {
                    break;
                }
                consumed += length;
            }
            if consumed == text.len() {
                return (String::new(), vec![consumed]);
            }
        }
        let space: &[u8] = if self.escape_whitespaces {
            SPACE_SYMBOL.as_bytes()
        } else {
            b" "
        };
        if prefix {
            normalized.extend_from_slice(space);
            origins.extend(std::iter::repeat_n(consumed, space.len()));
        }
        let mut previous_was_space = self.remove_extra_whitespaces;
        while consumed < text.len() {
            let (length, mut produced) = self.next_step(text, consumed);
            while previous_was_space && produced.first() == Some(&b' ') {
                produced = &produced[1..];
            }
            if !produced.is_empty() {
                for &byte in produced {
                    if byte == b' ' {
                        normalized.extend_from_slice(space);
                        origins.extend(std::iter::repeat_n(consumed, space.len()));
                    } else {
                        normalized.push(byte);
                        origins.push(consumed);
                    }
                }
                previous_was_space = produced.last() == Some(&b' ');
            }
            consumed += length;
            if !self.remove_extra_whitespaces {
                previous_was_space = false;
            }
        }
        if self.remove_extra_whitespaces {
            while normalized.ends_with(space) {
                let length = normalized.len() - space.len();
                consumed = origins[length];
                normalized.truncate(length);
                origins.truncate(length);
            }
        }
        origins.push(consumed);
        // Every step consumes whole characters and produces UTF-8: input characters, user-defined
        // pieces, spaces, and replacements `CharsMap::longest_prefix` checked.
        let normalized = String::from_utf8(normalized).expect("normalizing produces UTF-8");
        (normalized, origins)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(add_dummy_prefix: bool, remove_extra_whitespaces: bool) -> SentencePieceNormalizer {
        SentencePieceNormalizer::new(b"", add_dummy_prefix, remove_extra_whitespaces, true, &[]).unwrap()
    }

    #[test]
    fn identity_escapes_spaces_and_adds_the_dummy_prefix() {
        let (normalized, origins) = identity(true, false).normalize("a b ");
        assert_eq!(normalized, "▁a▁b▁");
        assert_eq!(origins.len(), normalized.len() + 1);
        assert_eq!(&origins[..4], &[0, 0, 0, 0]);
        assert_eq!(identity(true, false).normalize("").0, "");
        assert_eq!(identity(false, false).normalize(" x").0, "▁x");
    }

    #[test]
    fn extra_whitespace_is_removed_when_asked() {
        let normalizer = identity(true, true);
        assert_eq!(normalizer.normalize("  a   b  ").0, "▁a▁b");
        assert_eq!(normalizer.normalize("   ").0, "");
    }

    #[test]
    fn user_defined_pieces_pass_through() {
        let normalizer = SentencePieceNormalizer::new(b"", true, false, true, &["[X]", "[X]]"]).unwrap();
        assert_eq!(normalizer.user_defined_at("a[X]]", 1), Some(4));
        assert_eq!(normalizer.user_defined_at("a[X]]", 0), None);
        assert_eq!(normalizer.normalize("a [X]]").0, "▁a▁[X]]");
    }

    /// A precompiled map (darts-clone double array) with one rule: the single byte `key` becomes
    /// `replacement`.
    fn one_rule_charsmap(key: u8, replacement: &[u8]) -> Vec<u8> {
        let mut units = vec![0u32; 256 + 2];
        units[0] = 1 << 10; // the root: children at offset 1
        let child = (1 ^ key) as usize; // a child's index is the parent's offset XOR its label
        units[child] = (1 << 10) | (1 << 8) | u32::from(key); // label `key`, has a leaf at offset 1
        units[child ^ 1] = 1 << 31; // the leaf: value 0, the first replacement string
        let mut blob = ((units.len() * 4) as u32).to_le_bytes().to_vec();
        blob.extend(units.iter().flat_map(|unit| unit.to_le_bytes()));
        blob.extend_from_slice(replacement);
        blob.push(0);
        blob
    }

    fn with_charsmap(charsmap: &[u8]) -> SentencePieceNormalizer {
        SentencePieceNormalizer::new(charsmap, false, false, true, &[]).unwrap()
    }

    #[test]
    fn a_charsmap_rule_rewrites_text() {
        let normalizer = with_charsmap(&one_rule_charsmap(b'a', "b\u{e9}".as_bytes()));
        let (normalized, origins) = normalizer.normalize("xa");
        assert_eq!(normalized, "xb\u{e9}");
        assert_eq!(origins, [0, 1, 1, 1, 2]);
    }

    #[test]
    fn a_rule_ending_inside_a_character_is_ignored() {
        // A corrupt map whose rule matches the first byte of "é": applying it would cut the
        // character in two (slicing the text there would panic).
        let normalizer = with_charsmap(&one_rule_charsmap(0xC3, b"x"));
        assert_eq!(normalizer.normalize("a\u{e9}b").0, "a\u{e9}b");
    }

    #[test]
    fn a_rule_whose_replacement_is_not_utf8_is_ignored() {
        // Replacing with lossy text would shift the offsets against the normalized text (a panic in
        // encode_with_offsets).
        let normalizer = with_charsmap(&one_rule_charsmap(b'a', b"\xff\xfe"));
        let (normalized, origins) = normalizer.normalize("xay");
        assert_eq!(normalized, "xay");
        assert_eq!(origins.len(), normalized.len() + 1);
    }

    #[test]
    fn broken_charsmaps_are_rejected() {
        assert!(CharsMap::parse(b"\x01\x00").is_err());
        assert!(CharsMap::parse(b"\xff\x00\x00\x00abcd").is_err());
    }
}
