//! What makes a piece valid (`TrainerInterface::IsValidSentencePiece`), judged on characters or,
//! for a pair of symbols, on the shapes of its two parts.

use unic_ucd_age::Age;
use unicode_script::{Script, UnicodeScript};

use super::{BOUNDARY_CHAR, SPACE_CHAR, UNKNOWN_CHAR};

/// What makes a piece valid (`TrainerInterface::IsValidSentencePiece`), the `TrainerSpec` fields
/// of the same names.
#[derive(Clone, Debug)]
pub struct PieceRules {
    pub max_sentencepiece_length: usize,
    pub split_by_whitespace: bool,
    pub allow_whitespace_only_pieces: bool,
    pub split_by_unicode_script: bool,
    pub split_by_number: bool,
    pub split_digits: bool,
}

/// A script as SentencePiece's table has it; `None` is its "any" type.
type ScriptClass = Option<Script>;

/// SentencePiece's script of `c`: Unicode 9.0's `Scripts.txt` (the version its table was made
/// from), characters it does not list being Common.
///
/// Four characters 9.0 already had have changed script since, so today's property
/// is not 9.0's for them: U+0589 ARMENIAN FULL STOP and U+061C ARABIC LETTER MARK were Common,
/// U+0953 and U+0954 (Devanagari grave and acute accents) were Devanagari. Checked on every code
/// point against sentencepiece's `unicode_script_map.h`: these four were the only differences.
pub fn script_of(c: char) -> Script {
    let known_in_unicode_9 = Age::of(c).is_some_and(|age| {
        let version = age.actual();
        (version.major, version.minor) <= (9, 0)
    });
    if !known_in_unicode_9 {
        return Script::Common;
    }
    match c {
        '\u{0589}' | '\u{061C}' => return Script::Common,
        '\u{0953}' | '\u{0954}' => return Script::Devanagari,
        _ => {}
    }
    match c.script() {
        Script::Unknown => Script::Common,
        script => script,
    }
}

fn is_decimal_digit(c: char) -> bool {
    c.is_ascii_digit() || ('\u{FF10}'..='\u{FF19}').contains(&c)
}

impl PieceRules {
    /// `IsValidSentencePiece` for the characters of `piece`.
    pub fn is_valid(&self, piece: &[char]) -> bool {
        self.is_valid_with(piece.iter().copied(), piece.len(), script_of)
    }

    /// `IsValidSentencePiece` for the `length` characters `piece` yields, with `script` giving
    /// [`script_of`] (from a table, say).
    pub fn is_valid_with(
        &self,
        piece: impl Iterator<Item = char> + Clone,
        length: usize,
        mut script: impl FnMut(char) -> Script,
    ) -> bool {
        if length == 0 || length > self.max_sentencepiece_length {
            return false;
        }
        let all_space = piece.clone().all(|c| c == SPACE_CHAR);
        let mut previous: ScriptClass = None;
        for (position, c) in piece.enumerate() {
            if c == UNKNOWN_CHAR || c == '\0' || c == BOUNDARY_CHAR || c == ' ' {
                return false;
            }
            if c == SPACE_CHAR {
                if !self.allow_whitespace_only_pieces || !all_space {
                    if self.split_by_whitespace && position > 0 {
                        return false;
                    }
                    if !self.split_by_whitespace && position > 0 && position == length - 1 {
                        return false;
                    }
                }
                continue;
            }
            let mut class: ScriptClass = match script(c) {
                Script::Hiragana | Script::Katakana => Some(Script::Han),
                _ if c == '\u{30FC}' => Some(Script::Han),
                Script::Inherited => previous,
                other => Some(other),
            };
            if !self.split_by_number && is_decimal_digit(c) {
                class = None;
            }
            if self.split_digits && is_decimal_digit(c) && length > 1 {
                return false;
            }
            if self.split_by_unicode_script
                && class.is_some()
                && previous.is_some()
                && previous != class
            {
                return false;
            }
            previous = class;
        }
        true
    }
}

/// What [`PieceRules::is_valid`] needs to know of a piece to judge it joined to another piece:
/// a pair of symbols is judged from the shapes of its two parts ([`PieceRules::join`]), without
/// reading its characters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    flags: u8,
    /// The script class the first character that sets one gives (`Some(None)`: a digit without
    /// `split_by_number`, which matches anything); `None`: no such character (spaces and
    /// combining marks only, which take the class before them).
    lead: Option<ScriptClass>,
    /// The script class after the last character, when `lead` is set.
    tail: ScriptClass,
}

impl Shape {
    const FORBIDDEN: u8 = 1;
    const ALL_SPACE: u8 = 1 << 1;
    const HAS_SPACE: u8 = 1 << 2;
    /// A space after the first character.
    const LATE_SPACE: u8 = 1 << 3;
    const LAST_SPACE: u8 = 1 << 4;
    const DIGIT: u8 = 1 << 5;
}

impl PieceRules {
    /// The shape of the one-character piece `c`, whose SentencePiece script is `script`.
    pub fn char_shape(&self, c: char, script: Script) -> Shape {
        if c == UNKNOWN_CHAR || c == '\0' || c == BOUNDARY_CHAR || c == ' ' {
            return Shape {
                flags: Shape::FORBIDDEN,
                lead: None,
                tail: None,
            };
        }
        if c == SPACE_CHAR {
            return Shape {
                flags: Shape::ALL_SPACE | Shape::HAS_SPACE | Shape::LAST_SPACE,
                lead: None,
                tail: None,
            };
        }
        let digit = is_decimal_digit(c);
        let lead: Option<ScriptClass> = if !self.split_by_number && digit {
            Some(None)
        } else {
            match script {
                Script::Hiragana | Script::Katakana => Some(Some(Script::Han)),
                _ if c == '\u{30FC}' => Some(Some(Script::Han)),
                Script::Inherited => None,
                other => Some(Some(other)),
            }
        };
        Shape {
            flags: if digit { Shape::DIGIT } else { 0 },
            lead,
            tail: lead.flatten(),
        }
    }

    /// The shape of the piece `left` then `right` (`length` characters in all, at least 2), or
    /// `None` when it is not a valid piece: [`PieceRules::is_valid`] of the joined characters,
    /// when `left` and `right` are each valid or one character.
    pub fn join(&self, left: Shape, right: Shape, length: usize) -> Option<Shape> {
        if length > self.max_sentencepiece_length
            || (left.flags | right.flags) & Shape::FORBIDDEN != 0
        {
            return None;
        }
        let all_space = left.flags & right.flags & Shape::ALL_SPACE != 0;
        if !(self.allow_whitespace_only_pieces && all_space) {
            let misplaced = if self.split_by_whitespace {
                left.flags & Shape::LATE_SPACE != 0 || right.flags & Shape::HAS_SPACE != 0
            } else {
                right.flags & Shape::LAST_SPACE != 0
            };
            if misplaced {
                return None;
            }
        }
        if self.split_digits && (left.flags | right.flags) & Shape::DIGIT != 0 {
            return None;
        }
        let left_tail = if left.lead.is_some() { left.tail } else { None };
        if let (true, Some(Some(first)), Some(before)) =
            (self.split_by_unicode_script, right.lead, left_tail)
        {
            if first != before {
                return None;
            }
        }
        let mut flags = (left.flags | right.flags) & (Shape::HAS_SPACE | Shape::DIGIT);
        if all_space {
            flags |= Shape::ALL_SPACE;
        }
        if left.flags & Shape::LATE_SPACE != 0 || right.flags & Shape::HAS_SPACE != 0 {
            flags |= Shape::LATE_SPACE;
        }
        flags |= right.flags & Shape::LAST_SPACE;
        Some(Shape {
            flags,
            lead: left.lead.or(right.lead),
            tail: if right.lead.is_some() {
                right.tail
            } else {
                left_tail
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::sentencepiece::test_support::{below, rules};

    fn chars(text: &str) -> Vec<char> {
        text.chars().collect()
    }

    #[test]
    fn pieces_keep_one_script_and_spaces_in_front() {
        let rules = rules();
        assert!(rules.is_valid(&chars("▁ab")));
        assert!(!rules.is_valid(&chars("a▁")));
        assert!(!rules.is_valid(&chars("a,")));
        assert!(rules.is_valid(&chars("ひら漢")), "kana joins Han");
        assert!(!rules.is_valid(&chars("aб")));
        assert!(
            rules.is_valid(&chars("e\u{301}")),
            "a combining mark takes its base's script"
        );
        assert!(!rules.is_valid(&chars("▁▁")));
        let spaces = PieceRules {
            allow_whitespace_only_pieces: true,
            ..rules.clone()
        };
        assert!(spaces.is_valid(&chars("▁▁")));
        let digits = PieceRules {
            split_digits: true,
            ..rules.clone()
        };
        assert!(!digits.is_valid(&chars("12")) && rules.is_valid(&chars("12")));
        assert!(!rules.is_valid(&chars("a1")));
        let numbers = PieceRules {
            split_by_number: false,
            ..rules
        };
        assert!(numbers.is_valid(&chars("a1")));
    }

    /// The shape of `piece` by its definition, character by character.
    fn shape_of(rules: &PieceRules, piece: &[char]) -> Shape {
        let shapes: Vec<Shape> = piece
            .iter()
            .map(|&c| rules.char_shape(c, script_of(c)))
            .collect();
        let any = |flag: u8| shapes.iter().any(|shape| shape.flags & flag != 0);
        let mut flags = 0;
        for (flag, set) in [
            (Shape::FORBIDDEN, any(Shape::FORBIDDEN)),
            (Shape::ALL_SPACE, piece.iter().all(|&c| c == SPACE_CHAR)),
            (Shape::HAS_SPACE, any(Shape::HAS_SPACE)),
            (Shape::LATE_SPACE, piece[1..].contains(&SPACE_CHAR)),
            (Shape::LAST_SPACE, piece.last() == Some(&SPACE_CHAR)),
            (Shape::DIGIT, any(Shape::DIGIT)),
        ] {
            if set {
                flags |= flag;
            }
        }
        let lead = shapes.iter().find_map(|shape| shape.lead);
        let tail = shapes.iter().rev().find_map(|shape| shape.lead).flatten();
        Shape { flags, lead, tail }
    }

    #[test]
    fn pairs_judged_by_their_parts_shapes_are_judged_as_their_characters() {
        let alphabet = [
            'a', 'b', 'б', '1', '\u{FF12}', '▁', ' ', '\u{301}', 'ひ', 'カ', 'ー', '漢', ',',
            '\u{1F}', '\u{2585}',
        ];
        let mut next = below(0x9e37_79b9_7f4a_7c15);
        let mut judged = 0;
        for options in 0..64u32 {
            let flag = |bit: u32| options & (1 << bit) != 0;
            let rules = PieceRules {
                max_sentencepiece_length: if flag(5) { 4 } else { 16 },
                split_by_whitespace: flag(0),
                allow_whitespace_only_pieces: flag(1),
                split_by_unicode_script: flag(2),
                split_by_number: flag(3),
                split_digits: flag(4),
            };
            let part = |piece: &[char]| piece.len() == 1 || rules.is_valid(piece);
            for _ in 0..400 {
                let length = 2 + next(5) as usize;
                let piece: Vec<char> = (0..length)
                    .map(|_| alphabet[next(alphabet.len() as u64) as usize])
                    .collect();
                for cut in 1..length {
                    let (left, right) = piece.split_at(cut);
                    if !part(left) || !part(right) {
                        continue;
                    }
                    judged += 1;
                    let joined =
                        rules.join(shape_of(&rules, left), shape_of(&rules, right), length);
                    assert_eq!(
                        joined.is_some(),
                        rules.is_valid(&piece),
                        "{piece:?} at {cut}, {rules:?}"
                    );
                    if let Some(shape) = joined {
                        assert_eq!(
                            shape,
                            shape_of(&rules, &piece),
                            "{piece:?} at {cut}, {rules:?}"
                        );
                    }
                }
            }
        }
        assert!(judged > 10_000, "{judged}");
    }

    #[test]
    fn characters_new_after_unicode_9_are_common() {
        assert_eq!(script_of('\u{9FD5}'), Script::Han);
        assert_eq!(script_of('\u{9FD6}'), Script::Common, "added in Unicode 10");
        // Assigned by 9.0, their script changed later: 9.0's is SentencePiece's.
        assert_eq!(script_of('\u{0589}'), Script::Common, "Armenian today");
        assert_eq!(script_of('\u{061C}'), Script::Common, "Arabic today");
        assert_eq!(script_of('\u{0953}'), Script::Devanagari, "Inherited today");
        assert_eq!(script_of('\u{0954}'), Script::Devanagari, "Inherited today");
    }
}
