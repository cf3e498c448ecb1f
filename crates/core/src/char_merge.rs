//! SentencePiece's BPE model (`bpe_model.cc`, `sentencepiece_processor.cc`) on the shared merge loop.
//!
//! Encoding: normalize ([`SentencePieceNormalizer`]: escape spaces as `▁`, dummy prefix, optional
//! character map; or, for models read from a `tokenizer.json` whose normalizer SentencePiece's cannot
//! say, that normalizer run as `tokenizers` runs it, [`Normalizer`], then `Metaspace`); cut out user-defined pieces (they never merge); split the rest into characters;
//! merge the adjacent pair whose concatenation is a piece with the highest score, leftmost on ties
//! (a [`MergeTable`] filled with every split of every piece, priority = rank of the score); then each
//! symbol that is not a piece becomes its UTF-8 bytes as `<0xXX>` pieces (byte fallback) or `<unk>`,
//! a run of unknown symbols making one `<unk>`. Decoding follows `SentencePieceProcessor::Decode`:
//! control pieces vanish, `<unk>` shows the unknown surface, `▁` becomes a space, the first piece
//! loses its leading `▁`, and byte pieces that do not form UTF-8 become one U+FFFD per byte.

use std::fmt;

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;

use crate::halves::Halves;
use crate::hf_normalize::{NormalizeStep, Normalizer};
use crate::merge::{Merge, MergeTable};
use crate::normalize::{SentencePieceNormalizer, SPACE_SYMBOL};
use crate::tuning::LONG_TOKEN;
use crate::{Rank, SplitError};

/// The type of a piece (`ModelProto.SentencePiece.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceKind {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl PieceKind {
    /// The kind for the protobuf enum value.
    pub fn from_proto(value: i32) -> Option<Self> {
        Some(match value {
            1 => PieceKind::Normal,
            2 => PieceKind::Unknown,
            3 => PieceKind::Control,
            4 => PieceKind::UserDefined,
            5 => PieceKind::Unused,
            6 => PieceKind::Byte,
            _ => return None,
        })
    }

    /// Normal, user-defined and unused pieces are what the merge loop can produce (`pieces_`).
    fn is_mergeable(self) -> bool {
        matches!(self, PieceKind::Normal | PieceKind::UserDefined | PieceKind::Unused)
    }
}

/// One vocabulary entry; its id is its position.
#[derive(Clone, Debug)]
pub struct Piece {
    pub text: String,
    pub score: f32,
    pub kind: PieceKind,
}

/// Everything a SentencePiece BPE `.model` says about encoding and decoding.
#[derive(Clone, Debug)]
pub struct SentencePieceSpec {
    pub pieces: Vec<Piece>,
    pub byte_fallback: bool,
    pub unk_surface: String,
    /// The normalizer's precompiled character map; empty for the identity normalizer.
    pub charsmap: Vec<u8>,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
    pub escape_whitespaces: bool,
    /// `tokenizers`' `Metaspace` pre-tokenizer in place of SentencePiece's dummy prefix and single
    /// stretch of text (`None`: SentencePiece's own behaviour).
    pub metaspace: Option<Metaspace>,
    /// A `tokenizer.json`'s normalizer steps (empty: none), run as `tokenizers` runs them on each
    /// stretch of text before anything else. With them there is no character map nor
    /// `remove_extra_whitespaces`, and the steps do all the whitespace handling but `Metaspace`'s: with
    /// `metaspace` `None` spaces are not escaped and no dummy prefix is added when encoding
    /// (`add_dummy_prefix` then only says that decoding drops the text's first `▁`).
    pub normalizer: Vec<NormalizeStep>,
}

/// `tokenizers`' `Metaspace` pre-tokenizer (spaces escaped as `▁`): its `prepend_scheme` decides
/// where `▁` goes in front of a stretch of text between special tokens (`add_dummy_prefix` false:
/// `"never"`), `split` cuts the text before each `▁` into words that merge separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metaspace {
    /// `▁` goes in front of stretches at all (not `"never"`).
    pub prepend: bool,
    /// `"first"`: only the stretch at the start of the text gets the `▁` (else every stretch).
    pub first_only: bool,
    /// Not before a stretch that starts with `▁` or a space (Metaspace's own prefix); false: before
    /// any stretch that is not empty (a `Prepend("▁")` normalizer's).
    pub unless_space: bool,
    pub split: bool,
}

/// Why a SentencePiece spec cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

fn error<T>(message: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError(message.into()))
}

/// Symbols for characters that are not pieces but occur in pieces start here (above every id).
const HIDDEN_BASE: Rank = 1 << 31;
/// The symbol of a character that occurs in no piece: it never merges.
const UNKNOWN: Rank = Rank::MAX - 1;

/// The text of byte piece `byte` (`ByteToPiece`).
pub fn byte_piece(byte: u8) -> String {
    format!("<0x{byte:02X}>")
}

/// A SentencePiece BPE model ready to encode and decode.
#[derive(Clone, Debug)]
pub struct SentencePiece {
    spec: SentencePieceSpec,
    normalizer: SentencePieceNormalizer,
    /// `spec.normalizer`, run before `normalizer`.
    tokenizers_normalizer: Option<Normalizer>,
    /// The initial symbol of each character that is a piece or occurs inside one.
    symbols: FxHashMap<char, Rank>,
    merges: MergeTable,
    /// User-defined pieces, found in normalized text (leftmost, longest).
    user_defined: Option<(AhoCorasick, Vec<Rank>)>,
    byte_ids: Option<[Rank; 256]>,
    unk: Rank,
    /// Byte length of each piece's text in normalized text.
    lengths: Vec<u32>,
}

impl SentencePiece {
    pub fn new(spec: SentencePieceSpec) -> Result<Self, SpecError> {
        let pieces = &spec.pieces;
        if pieces.len() > crate::model::MAX_ID as usize {
            return error("too many pieces");
        }
        let mut mergeable: FxHashMap<&str, Rank> = FxHashMap::default();
        let mut reserved: FxHashMap<&str, Rank> = FxHashMap::default();
        let mut unk = None;
        let mut byte_ids = [Rank::MAX; 256];
        for (id, piece) in pieces.iter().enumerate() {
            let id = id as Rank;
            if piece.text.is_empty() {
                return error(format!("piece {id} is empty"));
            }
            if piece.score.is_nan() {
                return error(format!("piece {id} ({:?}) has a NaN score", piece.text));
            }
            let group = if piece.kind.is_mergeable() { &mut mergeable } else { &mut reserved };
            if let Some(first) = group.insert(&piece.text, id) {
                return error(format!("piece {:?} is defined twice (ids {first} and {id})", piece.text));
            }
            match piece.kind {
                PieceKind::Unknown if unk.is_some() => return error("more than one unknown piece"),
                PieceKind::Unknown => unk = Some(id),
                PieceKind::Unused => {
                    return error(format!(
                        "piece {id} ({:?}) is of type UNUSED, which hf_bpe does not support \
                         (SentencePiece merges through unused pieces and then splits them again)",
                        piece.text
                    ))
                }
                PieceKind::Byte => {
                    if !spec.byte_fallback {
                        return error(format!("byte piece {:?} found although byte_fallback is off", piece.text));
                    }
                    let byte = (0..=255u8).find(|&byte| byte_piece(byte) == piece.text);
                    match byte {
                        Some(byte) => byte_ids[byte as usize] = id,
                        None => return error(format!("byte piece {:?} is not of the form <0xXX>", piece.text)),
                    }
                }
                _ => {}
            }
        }
        let Some(unk) = unk else {
            return error("the model has no unknown piece (<unk>)");
        };
        if spec.byte_fallback {
            if let Some(byte) = byte_ids.iter().position(|&id| id == Rank::MAX) {
                return error(format!("byte_fallback is on but the byte piece {} is missing", byte_piece(byte as u8)));
            }
        }
        for (&text, &id) in &reserved {
            if let Some(&other) = mergeable.get(text) {
                return error(format!(
                    "piece {text:?} is both reserved (id {id}) and mergeable (id {other}); \
                     SentencePiece fails on text that forms it"
                ));
            }
            if text.chars().count() == 1 {
                return error(format!(
                    "reserved piece {text:?} (id {id}) is a single character; \
                     SentencePiece fails on text that contains it"
                ));
            }
        }

        // Priority: the rank of the piece's score, highest score first; equal scores tie.
        let mut scores: Vec<f32> = pieces
            .iter()
            .filter(|piece| piece.kind.is_mergeable())
            .map(|piece| piece.score)
            .collect();
        scores.sort_by(|a, b| b.total_cmp(a));
        scores.dedup();
        let priority_of = |score: f32| -> u32 {
            scores.partition_point(|&other| other.total_cmp(&score) == std::cmp::Ordering::Greater) as u32
        };

        let mut symbols: FxHashMap<char, Rank> = FxHashMap::default();
        let mut next_hidden = HIDDEN_BASE;
        for (&text, &id) in &mergeable {
            let mut chars = text.chars();
            if let (Some(only), None) = (chars.next(), chars.next()) {
                symbols.insert(only, id);
            }
        }
        let mut merges = MergeTable::builder([UNKNOWN; 256]);
        // Long pieces find their splits by rolling hash (see `crate::halves`); a part that is one
        // character can only be the first or the last.
        let halves = pieces
            .iter()
            .any(|piece| piece.text.len() > LONG_TOKEN)
            .then(|| Halves::new(mergeable.keys().map(|text| text.as_bytes())));
        for (id, piece) in pieces.iter().enumerate() {
            if !piece.kind.is_mergeable() {
                continue;
            }
            let merge = Merge { priority: priority_of(piece.score), merged: id as Rank };
            let text = &piece.text;
            let splits: Vec<usize> = match &halves {
                Some(halves) if text.len() > LONG_TOKEN => {
                    let first = text.chars().next().map_or(0, char::len_utf8);
                    let last = text.len() - text.chars().next_back().map_or(0, char::len_utf8);
                    let mut splits = halves.candidates(text.as_bytes());
                    splits.extend([first, last]);
                    splits.retain(|&at| 0 < at && at < text.len() && text.is_char_boundary(at));
                    splits.sort_unstable();
                    splits.dedup();
                    splits
                }
                _ => text.char_indices().skip(1).map(|(at, _)| at).collect(),
            };
            for split in splits {
                let (left, right) = piece.text.split_at(split);
                let mut symbol_of = |part: &str| -> Option<Rank> {
                    if let Some(&id) = mergeable.get(part) {
                        return Some(id);
                    }
                    let mut chars = part.chars();
                    match (chars.next(), chars.next()) {
                        (Some(only), None) => Some(*symbols.entry(only).or_insert_with(|| {
                            next_hidden += 1;
                            next_hidden - 1
                        })),
                        _ => None,
                    }
                };
                if let (Some(left), Some(right)) = (symbol_of(left), symbol_of(right)) {
                    merges.insert(left, right, merge);
                }
            }
        }

        let user_defined_pieces: Vec<(&str, Rank)> = pieces
            .iter()
            .enumerate()
            .filter(|(_, piece)| piece.kind == PieceKind::UserDefined)
            .map(|(id, piece)| (piece.text.as_str(), id as Rank))
            .collect();
        let tokenizers_normalizer = if spec.normalizer.is_empty() {
            None
        } else {
            if !spec.charsmap.is_empty() || spec.remove_extra_whitespaces || !user_defined_pieces.is_empty() {
                return error(
                    "a tokenizers normalizer takes no character map, remove_extra_whitespaces or user-defined pieces",
                );
            }
            Some(Normalizer::new(spec.normalizer.clone()).map_err(|problem| SpecError(problem.to_string()))?)
        };
        if spec.metaspace.is_some()
            && (!spec.charsmap.is_empty()
                || spec.remove_extra_whitespaces
                || !spec.escape_whitespaces
                || !user_defined_pieces.is_empty())
        {
            return error(
                "Metaspace takes no character map, remove_extra_whitespaces, unescaped spaces or user-defined pieces",
            );
        }
        // With a tokenizers normalizer and no Metaspace, its steps escape spaces and add the prefix.
        let by_steps = tokenizers_normalizer.is_some() && spec.metaspace.is_none();
        let normalizer = SentencePieceNormalizer::new(
            &spec.charsmap,
            spec.add_dummy_prefix && !by_steps,
            spec.remove_extra_whitespaces,
            spec.escape_whitespaces && !by_steps,
            &user_defined_pieces.iter().map(|(text, _)| *text).collect::<Vec<_>>(),
        )
        .map_err(SpecError)?;
        let user_defined = if user_defined_pieces.is_empty() {
            None
        } else {
            let matcher = AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(user_defined_pieces.iter().map(|(text, _)| text))
                .map_err(|error| SpecError(format!("cannot index the user-defined pieces: {error}")))?;
            Some((matcher, user_defined_pieces.iter().map(|(_, id)| *id).collect()))
        };
        let lengths = pieces.iter().map(|piece| piece.text.len() as u32).collect();
        Ok(Self {
            normalizer,
            tokenizers_normalizer,
            symbols,
            merges: merges.build(),
            user_defined,
            byte_ids: spec.byte_fallback.then_some(byte_ids),
            unk,
            lengths,
            spec,
        })
    }

    pub fn spec(&self) -> &SentencePieceSpec {
        &self.spec
    }

    pub fn normalizer(&self) -> &SentencePieceNormalizer {
        &self.normalizer
    }

    pub fn unk_id(&self) -> Rank {
        self.unk
    }

    /// The bytes a piece stands for in decoded text (`▁` as a space, byte pieces as their byte).
    pub fn piece_bytes(&self, id: Rank) -> Option<Vec<u8>> {
        let piece = self.spec.pieces.get(id as usize)?;
        Some(match piece.kind {
            PieceKind::Byte => {
                let byte = self.byte_ids?.iter().position(|&byte_id| byte_id == id)?;
                vec![byte as u8]
            }
            PieceKind::Control | PieceKind::Unknown => piece.text.as_bytes().to_vec(),
            _ => piece.text.replace(SPACE_SYMBOL, " ").into_bytes(),
        })
    }

    /// Encodes `text` as `SentencePieceProcessor::Encode`; `starts` gets the input byte offset
    /// where each id starts (plus `base`).
    /// With [`Metaspace`], `base == 0` marks the stretch at the start of the text (`"first"`).
    /// Fails only where the `tokenizers` normalizer's `Replace` steps do (see [`Normalizer`]).
    pub fn encode(
        &self,
        text: &str,
        base: usize,
        out: &mut Vec<Rank>,
        starts: Option<&mut Vec<usize>>,
    ) -> Result<(), SplitError> {
        // `"first"` asks whether the stretch starts the text: `tokenizers` asks where the original of
        // its first normalized character starts (past what the normalizer removed in front).
        let first_stretch = base == 0 && self.spec.metaspace.is_some_and(|metaspace| metaspace.first_only);
        let steps = match &self.tokenizers_normalizer {
            None => None,
            Some(normalizer) if starts.is_some() || first_stretch => Some(normalizer.normalize_aligned(text)?),
            Some(normalizer) => Some((normalizer.normalize(text)?, Vec::new())),
        };
        let text = steps.as_ref().map_or(text, |(normalized, _)| normalized.as_str());
        let (normalized, mut origins) = match self.spec.metaspace {
            None => self.normalizer.normalize(text),
            Some(metaspace) => {
                let shift = base + steps.as_ref().and_then(|(_, origins)| origins.first().copied()).unwrap_or(0);
                let prefix = metaspace.prepend
                    && (shift == 0 || !metaspace.first_only)
                    && !(metaspace.unless_space && (text.starts_with(' ') || text.starts_with(SPACE_SYMBOL)));
                self.normalizer.normalize_with_prefix(text, prefix)
            }
        };
        if let Some((_, steps_origins)) = steps.as_ref().filter(|_| starts.is_some()) {
            origins.iter_mut().for_each(|origin| *origin = steps_origins[*origin]);
        }
        let mut state = Output { out, starts, origins: &origins, base, previous_unknown: false };
        let mut done = 0;
        if let Some((matcher, ids)) = &self.user_defined {
            for found in matcher.find_iter(&normalized) {
                self.encode_segment(&normalized, done, found.start(), &mut state);
                state.push(ids[found.pattern().as_usize()], found.start());
                state.previous_unknown = false;
                done = found.end();
            }
        }
        self.encode_segment(&normalized, done, normalized.len(), &mut state);
        Ok(())
    }

    /// The merge step alone on `normalized` (text as the normalizer leaves it: spaces as `▁`):
    /// its characters merged by score, then characters that are not pieces as byte pieces or
    /// `<unk>`. No normalizer, dummy prefix or user-defined pieces: what the merge loop makes of
    /// one stretch of normalized text between user-defined pieces.
    pub fn merge_normalized(&self, normalized: &str, out: &mut Vec<Rank>) {
        let mut state = Output { out, starts: None, origins: &[], base: 0, previous_unknown: false };
        self.encode_segment(normalized, 0, normalized.len(), &mut state);
    }

    fn encode_segment(&self, normalized: &str, start: usize, end: usize, state: &mut Output<'_>) {
        if start == end {
            return;
        }
        if self.spec.metaspace.is_some_and(|metaspace| metaspace.split) {
            // Words start at each `▁` (`MergedWithNext`); each merges alone, unknown runs end with it.
            let mut word = start;
            for (at, _) in normalized[start..end].match_indices(SPACE_SYMBOL) {
                if start + at > word {
                    self.encode_word(normalized, word, start + at, state);
                    state.previous_unknown = false;
                    word = start + at;
                }
            }
            self.encode_word(normalized, word, end, state);
            return;
        }
        self.encode_word(normalized, start, end, state);
    }

    fn encode_word(&self, normalized: &str, start: usize, end: usize, state: &mut Output<'_>) {
        let segment = &normalized[start..end];
        let initial: Vec<Rank> = segment.chars().map(|c| *self.symbols.get(&c).unwrap_or(&UNKNOWN)).collect();
        let mut merged = Vec::with_capacity(initial.len());
        self.merges.encode_symbols(&initial, &mut merged);
        let mut at = start;
        for id in merged {
            if id < HIDDEN_BASE {
                state.push(id, at);
                state.previous_unknown = false;
                at += self.lengths[id as usize] as usize;
                continue;
            }
            // A character that is not a piece.
            let length = normalized[at..].chars().next().map_or(1, char::len_utf8);
            match &self.byte_ids {
                Some(byte_ids) => {
                    for &byte in &normalized.as_bytes()[at..at + length] {
                        state.push(byte_ids[byte as usize], at);
                    }
                }
                None if state.previous_unknown => {}
                None => state.push(self.unk, at),
            }
            state.previous_unknown = true;
            at += length;
        }
    }

    /// Decodes ids as `SentencePieceProcessor::Decode` does, to bytes (see [`decode_utf8`] for the
    /// text); an id that is not a piece is returned as the error.
    pub fn decode(&self, ids: &[Rank], out: &mut Vec<u8>) -> Result<(), Rank> {
        self.decode_continuing(ids, &mut DecodeState::default(), out)
    }

    /// Like [`SentencePiece::decode`] for ids that continue a sequence whose earlier ids were
    /// decoded with the same `state`: only the first piece of the whole sequence loses its `▁`.
    pub fn decode_continuing(&self, ids: &[Rank], state: &mut DecodeState, out: &mut Vec<u8>) -> Result<(), Rank> {
        let strip_first = self.spec.add_dummy_prefix || self.spec.remove_extra_whitespaces;
        let start = out.len();
        let result = (|| {
            for &id in ids {
                let piece = self.spec.pieces.get(id as usize).ok_or(id)?;
                if piece.kind == PieceKind::Byte {
                    out.extend(self.piece_bytes(id).ok_or(id)?);
                    continue;
                }
                if state.first_space_seen || state.produced || out.len() > start {
                    state.expect_first_space = false;
                }
                state.first_space_seen = false;
                match piece.kind {
                    PieceKind::Control => {}
                    PieceKind::Unknown => out.extend_from_slice(self.spec.unk_surface.as_bytes()),
                    _ => {
                        let mut text = piece.text.as_str();
                        if state.expect_first_space && strip_first {
                            if let Some(rest) = text.strip_prefix(SPACE_SYMBOL) {
                                text = rest;
                                state.first_space_seen = !self.spec.remove_extra_whitespaces;
                            }
                        }
                        out.extend_from_slice(text.replace(SPACE_SYMBOL, " ").as_bytes());
                    }
                }
            }
            Ok(())
        })();
        state.produced |= out.len() > start;
        result
    }
}

/// Where encoded ids go, with the offsets of their starts.
struct Output<'a> {
    out: &'a mut Vec<Rank>,
    starts: Option<&'a mut Vec<usize>>,
    origins: &'a [usize],
    base: usize,
    previous_unknown: bool,
}

impl Output<'_> {
    fn push(&mut self, id: Rank, normalized_at: usize) {
        self.out.push(id);
        if let Some(starts) = self.starts.as_deref_mut() {
            starts.push(self.base + self.origins[normalized_at]);
        }
    }
}

/// Where a sequence decoded in parts stands ([`SentencePiece::decode_continuing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeState {
    /// No piece other than a byte piece has been decoded yet (its leading `▁` is dropped).
    expect_first_space: bool,
    /// The last piece had its leading `▁` dropped (and spaces are not collapsed).
    first_space_seen: bool,
    /// Some bytes were decoded.
    produced: bool,
}

impl Default for DecodeState {
    fn default() -> Self {
        Self { expect_first_space: true, first_space_seen: false, produced: false }
    }
}

/// Decodes UTF-8 as SentencePiece does: each byte that does not start a valid character becomes
/// one U+FFFD (Python's `errors="replace"` replaces a truncated sequence with a single U+FFFD).
pub fn decode_utf8(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                text.push_str(valid);
                break;
            }
            Err(error) => {
                let valid = error.valid_up_to();
                text.push_str(std::str::from_utf8(&rest[..valid]).expect("checked valid"));
                text.push('\u{FFFD}');
                rest = &rest[valid + 1..];
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(text: &str, score: f32, kind: PieceKind) -> Piece {
        Piece { text: text.into(), score, kind }
    }

    fn spec(pieces: Vec<Piece>, byte_fallback: bool) -> SentencePieceSpec {
        SentencePieceSpec {
            pieces,
            byte_fallback,
            unk_surface: " \u{2047} ".into(),
            charsmap: Vec::new(),
            add_dummy_prefix: true,
            remove_extra_whitespaces: false,
            escape_whitespaces: true,
            metaspace: None,
            normalizer: Vec::new(),
        }
    }

    /// <unk> <s> ▁ a b ▁a ab ▁ab (scores favour "ab" over "▁a").
    fn small(byte_fallback: bool) -> SentencePiece {
        let mut pieces = vec![
            piece("<unk>", 0.0, PieceKind::Unknown),
            piece("<s>", 0.0, PieceKind::Control),
            piece("▁", -1.0, PieceKind::Normal),
            piece("a", -2.0, PieceKind::Normal),
            piece("b", -3.0, PieceKind::Normal),
            piece("▁a", -5.0, PieceKind::Normal),
            piece("ab", -4.0, PieceKind::Normal),
            piece("▁ab", -6.0, PieceKind::Normal),
            piece("[U]", 0.0, PieceKind::UserDefined),
        ];
        if byte_fallback {
            pieces.extend((0..=255u8).map(|byte| piece(&byte_piece(byte), 0.0, PieceKind::Byte)));
        }
        SentencePiece::new(spec(pieces, byte_fallback)).unwrap()
    }

    fn encode(model: &SentencePiece, text: &str) -> Vec<Rank> {
        let mut out = Vec::new();
        model.encode(text, 0, &mut out, None).unwrap();
        out
    }

    #[test]
    fn a_tokenizers_normalizer_runs_before_metaspace_which_looks_at_where_the_stretch_starts() {
        let pieces = vec![
            piece("<unk>", 0.0, PieceKind::Unknown),
            piece("▁", -1.0, PieceKind::Normal),
            piece("a", -2.0, PieceKind::Normal),
            piece("b", -3.0, PieceKind::Normal),
        ];
        let strip = NormalizeStep::Replace { pattern: r"\A +".into(), literal: false, content: String::new() };
        let upper = NormalizeStep::Replace { pattern: "B".into(), literal: true, content: "b".into() };
        let mut first = spec(pieces.clone(), false);
        first.normalizer = vec![strip.clone(), upper];
        first.metaspace = Some(Metaspace { prepend: true, first_only: true, unless_space: true, split: false });
        let model = SentencePiece::new(first).unwrap();
        assert_eq!(encode(&model, "aB b"), vec![1, 2, 3, 1, 3]);
        // The space the normalizer removed started the text: "first" then adds no prefix.
        assert_eq!(encode(&model, "  aB"), vec![2, 3]);
        let mut starts = Vec::new();
        model.encode(" a", 0, &mut Vec::new(), Some(&mut starts)).unwrap();
        assert_eq!(starts, [1]);
        // Without Metaspace the steps do the whitespace handling: spaces stay spaces (<unk>).
        let mut by_steps = spec(pieces, false);
        by_steps.normalizer = vec![strip];
        assert_eq!(encode(&SentencePiece::new(by_steps).unwrap(), " a b"), vec![2, 0, 3]);
    }

    #[test]
    fn higher_scores_merge_first() {
        // ▁ a b: "ab" (-4) beats "▁a" (-5), then "▁" + "ab" makes "▁ab".
        assert_eq!(encode(&small(false), "ab"), vec![7]);
        assert_eq!(encode(&small(false), "ab a"), vec![7, 5]);
    }

    #[test]
    fn unknown_characters_fall_back_to_bytes_or_one_unk_per_run() {
        assert_eq!(encode(&small(false), "aé日b"), vec![5, 0, 4]);
        let with_bytes = small(true);
        let ids = encode(&with_bytes, "aé");
        assert_eq!(ids.len(), 3);
        let mut decoded = Vec::new();
        with_bytes.decode(&ids, &mut decoded).unwrap();
        assert_eq!(decoded, "aé".as_bytes());
    }

    #[test]
    fn the_merge_step_alone_adds_no_dummy_prefix_and_cuts_out_nothing() {
        let merged = |model: &SentencePiece, normalized: &str| {
            let mut out = Vec::new();
            model.merge_normalized(normalized, &mut out);
            out
        };
        let model = small(false);
        // encode("ab") normalizes to "▁ab"; the merge step on "ab" itself makes the piece "ab".
        assert_eq!(merged(&model, "ab"), vec![6]);
        assert_eq!(merged(&model, "▁ab"), encode(&model, "ab"));
        // "[U]" is not cut out: its characters are not pieces, one <unk> for the run.
        assert_eq!(merged(&model, "a[U]"), vec![3, 0]);
        assert_eq!(merged(&small(true), "é").len(), 2);
    }

    #[test]
    fn user_defined_pieces_never_merge() {
        assert_eq!(encode(&small(false), "a[U]b"), vec![5, 8, 4]);
    }

    #[test]
    fn decoding_strips_the_dummy_prefix_and_hides_control_pieces() {
        let model = small(false);
        let mut out = Vec::new();
        model.decode(&[1, 7, 5, 0], &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "ab a \u{2047} ");
        assert_eq!(model.decode(&[99], &mut Vec::new()), Err(99));
    }

    #[test]
    fn decoding_in_parts_joins_to_decoding_the_whole() {
        let model = small(true);
        let byte = |value: u8| 9 + Rank::from(value);
        let sequences: [&[Rank]; 4] = [&[1, 7, 5, 0], &[byte(b'x'), 2, 5, 7], &[2, 2, 3, byte(0xE6), 5], &[1, 1, 5, 5]];
        for ids in sequences {
            let mut whole = Vec::new();
            model.decode(ids, &mut whole).unwrap();
            for cut in 0..=ids.len() {
                let (mut parts, mut state) = (Vec::new(), DecodeState::default());
                model.decode_continuing(&ids[..cut], &mut state, &mut parts).unwrap();
                model.decode_continuing(&ids[cut..], &mut state, &mut parts).unwrap();
                assert_eq!(parts, whole, "{ids:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn invalid_utf8_becomes_one_replacement_per_byte() {
        assert_eq!(decode_utf8(b"a\xe6\x97b\xff"), "a\u{FFFD}\u{FFFD}b\u{FFFD}");
        assert_eq!(decode_utf8("日".as_bytes()), "日");
    }

    #[test]
    fn long_pieces_load_in_linear_time_and_merge_as_short_ones() {
        // Pieces ▁, a, aa, ..., a*100 (scores favour longer ones) and one of 500,000 characters.
        let mut pieces = vec![piece("<unk>", 0.0, PieceKind::Unknown), piece("▁", -1.0, PieceKind::Normal)];
        for length in 1..=100 {
            pieces.push(piece(&"a".repeat(length), length as f32, PieceKind::Normal));
        }
        pieces.push(piece(&"é".repeat(250_000), 0.0, PieceKind::Normal));
        let started = std::time::Instant::now();
        let model = SentencePiece::new(spec(pieces, false)).unwrap();
        assert!(started.elapsed().as_secs_f64() < 5.0, "{:?}", started.elapsed());
        // 100 a's are one piece (id 101), 130 are a*100 + a*30: merges prefer higher scores.
        assert_eq!(encode(&model, &"a".repeat(100)), vec![1, 101]);
        assert_eq!(encode(&model, &"a".repeat(130)), vec![1, 101, 31]);
    }

    #[test]
    fn unsupported_models_are_refused() {
        let no_unk = spec(vec![piece("a", 0.0, PieceKind::Normal)], false);
        assert!(SentencePiece::new(no_unk).unwrap_err().0.contains("unknown piece"));
        let unused = spec(
            vec![piece("<unk>", 0.0, PieceKind::Unknown), piece("x", 0.0, PieceKind::Unused)],
            false,
        );
        assert!(SentencePiece::new(unused).unwrap_err().0.contains("UNUSED"));
    }
}
