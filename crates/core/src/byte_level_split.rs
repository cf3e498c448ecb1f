//! `tokenizers`' `ByteLevel` pre-tokenizer among Split steps, run as a `tokenizer.json` Sequence
//! runs it.
//!
//! The Split steps before `ByteLevel` cut the text ([`crate::onig_split`]). `ByteLevel` then, on
//! each of their pieces: puts a space before it when it does not start with one
//! (`add_prefix_space`); cuts it with its own regex, [`BYTE_LEVEL_REGEX`] on Oniguruma, keeping
//! every piece (`use_regex`); and spells its bytes in GPT-2's byte alphabet
//! ([`crate::byte_level`]), one character per byte. The Split steps after it cut that spelling, not
//! the text: they see `²` (U+00B2, the spelling of byte 0xB2, a byte of many characters) as a
//! digit, and a piece may end inside a character of the text. So a piece is given back as a range
//! of bytes of the text, after the space `ByteLevel` put before it, if any.

use crate::byte_level::spelling;
use crate::onig_split::{Behavior, CompiledSteps, SplitStep};
use crate::pretokenize::{Budget, SplitError};

/// The regex of `tokenizers`' `ByteLevel` pre-tokenizer (GPT-2's split, compiled by Oniguruma).
pub const BYTE_LEVEL_REGEX: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Split steps around one `ByteLevel` pre-tokenizer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ByteLevelSteps {
    /// The Split steps before `ByteLevel`, on the text.
    pub before: Vec<SplitStep>,
    /// `ByteLevel`'s `add_prefix_space`: a space before each piece of `before` not starting with one.
    pub add_prefix_space: bool,
    /// `ByteLevel`'s `use_regex`: each piece cut by [`BYTE_LEVEL_REGEX`].
    pub use_regex: bool,
    /// The Split steps after `ByteLevel`, on each piece spelled in the byte alphabet.
    pub after: Vec<SplitStep>,
}

/// [`ByteLevelSteps`] with their regexes compiled.
#[derive(Debug)]
pub(crate) struct CompiledByteLevel {
    before: Option<CompiledSteps>,
    add_prefix_space: bool,
    regex: Option<CompiledSteps>,
    after: Option<CompiledSteps>,
}

impl CompiledByteLevel {
    pub(crate) fn new(steps: &ByteLevelSteps) -> Result<Self, SplitError> {
        let compiled = |steps: &[SplitStep]| (!steps.is_empty()).then(|| CompiledSteps::new(steps)).transpose();
        let regex = [SplitStep::regex(BYTE_LEVEL_REGEX, Behavior::Isolated, false)];
        Ok(Self {
            before: compiled(&steps.before)?,
            add_prefix_space: steps.add_prefix_space,
            regex: if steps.use_regex { compiled(&regex)? } else { None },
            after: compiled(&steps.after)?,
        })
    }

    /// Calls `on_piece(start, end, space)` for each piece of `text`, in order: the piece is
    /// `text[start..end]`, after a space when `space` (the one `ByteLevel` put before a piece;
    /// `start` is then where that piece starts, and `end` may equal it). `start` and `end` may fall
    /// inside a character when Split steps follow `ByteLevel`.
    pub(crate) fn for_each_piece(
        &self,
        text: &str,
        budget: &Budget,
        on_piece: &mut dyn FnMut(usize, usize, bool),
    ) -> Result<(), SplitError> {
        let mut pieces = Vec::new();
        match &self.before {
            Some(steps) => steps.for_each_piece(text, budget, &mut |start, end| pieces.push((start, end)))?,
            None if !text.is_empty() => pieces.push((0, text.len())),
            None => {}
        }
        let (mut spaced, mut spelled, mut byte_at) = (String::new(), String::new(), Vec::new());
        let mut cut = Vec::new();
        for (start, end) in pieces {
            let piece = &text[start..end];
            let space = self.add_prefix_space && !piece.starts_with(' ');
            spaced.clear();
            if space {
                spaced.push(' ');
            }
            spaced.push_str(piece);
            // A range of `spaced` as a piece of the text.
            let mut emit = |from: usize, to: usize| match (space, from) {
                (true, 0) => on_piece(start, start + to - 1, true),
                (true, _) => on_piece(start + from - 1, start + to - 1, false),
                (false, _) => on_piece(start + from, start + to, false),
            };
            cut.clear();
            match &self.regex {
                Some(regex) => regex.for_each_piece(&spaced, budget, &mut |from, to| cut.push((from, to)))?,
                None => cut.push((0, spaced.len())),
            }
            for &(from, to) in &cut {
                let Some(after) = &self.after else {
                    emit(from, to);
                    continue;
                };
                // The bytes spelled one character each; `byte_at[offset]` is the byte whose
                // character starts at `offset` of the spelling.
                spelled.clear();
                byte_at.clear();
                for (index, &byte) in spaced.as_bytes()[from..to].iter().enumerate() {
                    let char = spelling(byte);
                    byte_at.resize(spelled.len(), usize::MAX);
                    byte_at.push(from + index);
                    spelled.push(char);
                }
                byte_at.resize(spelled.len(), usize::MAX);
                byte_at.push(to);
                after.for_each_piece(&spelled, budget, &mut |piece_start, piece_end| {
                    emit(byte_at[piece_start], byte_at[piece_end]);
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::pretokenize::Splitter;

    /// The pieces of `text` as bytes, each after its added space.
    fn pieces(steps: ByteLevelSteps, text: &str) -> Vec<Vec<u8>> {
        Splitter::new(steps).unwrap().piece_bytes(text).unwrap()
    }

    fn byte_pieces(pieces: &[&[u8]]) -> Vec<Vec<u8>> {
        pieces.iter().map(|piece| piece.to_vec()).collect()
    }

    #[test]
    fn steps_after_byte_level_split_the_spelling() {
        // "ò" is C3 B2, spelled "Ã²": `\p{N}` finds the digit "²" inside it.
        let steps = ByteLevelSteps {
            before: vec![],
            add_prefix_space: false,
            use_regex: false,
            after: vec![SplitStep::regex(r"\p{N}", Behavior::Isolated, false)],
        };
        assert_eq!(pieces(steps, "aò1"), byte_pieces(&[b"a\xc3", b"\xb2", b"1"]));
    }

    #[test]
    fn a_space_goes_before_each_piece_of_the_steps_before() {
        let steps = ByteLevelSteps {
            before: vec![SplitStep::regex(r"\d", Behavior::Isolated, false)],
            add_prefix_space: true,
            use_regex: true,
            after: vec![],
        };
        assert_eq!(pieces(steps.clone(), "ab1 c"), byte_pieces(&[b" ab", b" 1", b" c"]));
        let mut offsets = Vec::new();
        Splitter::new(steps).unwrap().for_each_piece("ab1 c", |start, end, space| offsets.push((start, end, space))).unwrap();
        assert_eq!(offsets, [(0, 2, true), (2, 3, true), (3, 5, false)]);
    }

    #[test]
    fn the_added_space_may_be_a_piece_of_its_own() {
        let steps = ByteLevelSteps {
            before: vec![],
            add_prefix_space: true,
            use_regex: false,
            after: vec![SplitStep::regex(r"\x{120}", Behavior::Isolated, false)], // Ġ spells the space
        };
        let mut offsets = Vec::new();
        Splitter::new(steps).unwrap().for_each_piece("ab", |start, end, space| offsets.push((start, end, space))).unwrap();
        assert_eq!(offsets, [(0, 0, true), (0, 2, false)]);
    }
}
