//! Hand-written pre-tokenizers for the three named split patterns (GPT-2, cl100k, o200k).
//!
//! A scanner cuts text into exactly the pieces `fancy_regex::Regex::find_iter` finds with its
//! pattern, several times faster. The character classes (`\p{L}`, `\p{N}`, `\s`, o200k's upper
//! and lower classes) and the case folding of the contractions are derived once from
//! `regex-syntax`, the crate the regex engine builds them with, so both agree on every code point.
//! `tests/scan_identity.rs` compares scanner and regex on corpora, fuzzed text and every code point.
//!
//! Every named pattern matches at every position of any text (each character is a letter, a
//! number, white space or "other", and some alternative takes each), never with an empty match.
//! So each piece starts where the previous one ended, and a scanner only decides where the first
//! alternative that matches there — in the regex's backtracking order — ends. How each
//! alternative resolves is written next to the code that implements it.

use std::collections::HashMap;
use std::sync::OnceLock;

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, HirKind};

/// GPT-2's pattern (tiktoken's `r50k_pat_str`), also used by `r50k_base` and `p50k_base`.
pub const GPT2: &str = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";

/// GPT-3.5/GPT-4's pattern (`cl100k_base`).
pub const CL100K: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

/// GPT-4o's pattern (`o200k_base`).
pub const O200K: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+(?!\S)",
    "|",
    r"\s+",
);

/// Llama 3's pattern (Meta's tiktoken pattern and its `tokenizer.json` Split), also that of OLMo 2,
/// GLM-4, Phi-4, DBRX and the models built on them: cl100k's older form, without `\s++$`.
pub const LLAMA3: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen 2's pattern (Qwen 2, 2.5, 3, and StableLM 2, Hunyuan, Grok-2): Llama 3's with single digits.
pub const QWEN2: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen 3.5's pattern: Qwen 2's with combining marks in words.
pub const QWEN35: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Seed-Coder's pattern: Qwen 2's without line breaks after punctuation.
pub const SEED_CODER: &str =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\r\n]+|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

/// Mistral's tekken pattern: o200k's without contractions, with single digits.
pub const TEKKEN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
    "|",
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
);

/// `tokenizers`' ByteLevel regex (its `use_regex`): GPT-2's pattern as Oniguruma reads it.
pub const BYTE_LEVEL: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// cl100k's pattern as `hf_bpe` writes it into a `tokenizer.json` (possessive quantifiers as atomic
/// groups, `$` as `\z`: the same meaning in Oniguruma).
pub const CL100K_ONIGURUMA: &str = r"'(?i:[sdmt]|ll|ve|re)|(?>[^\r\n\p{L}\p{N}]?)(?>\p{L}+)|(?>\p{N}{1,3})| ?(?>[^\s\p{L}\p{N}]+)(?>[\r\n]*)|(?>\s+)\z|\s*[\r\n]|\s+(?!\S)|\s";

/// Which regex engine's meaning a pattern has: tiktoken's (fancy-regex) or `tokenizers`'
/// (Oniguruma). A scanner is proven identical to each engine separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Semantics {
    /// A tiktoken split pattern, run by fancy-regex.
    FancyRegex,
    /// A `tokenizer.json` Split regex, run by Oniguruma.
    Oniguruma,
}

/// A hand-written scanner: the named patterns and the splits of the model families people load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scanner {
    Gpt2,
    Cl100k,
    O200k,
    Llama3,
    Qwen2,
    Qwen35,
    SeedCoder,
    Tekken,
}

impl Scanner {
    /// Every scanner.
    pub const ALL: [Scanner; 8] = [
        Scanner::Gpt2,
        Scanner::Cl100k,
        Scanner::O200k,
        Scanner::Llama3,
        Scanner::Qwen2,
        Scanner::Qwen35,
        Scanner::SeedCoder,
        Scanner::Tekken,
    ];

    /// The scanner for `pattern` when it is exactly one of the named patterns.
    pub fn for_pattern(pattern: &str) -> Option<Scanner> {
        Self::for_regex(pattern, Semantics::FancyRegex)
    }

    /// The scanner whose regex for `semantics` is exactly `regex` (spelled as [`Scanner::regex`]
    /// gives it: recognising other spellings is [`crate::recognize`]'s, checked by a probe).
    pub fn for_regex(regex: &str, semantics: Semantics) -> Option<Scanner> {
        Self::ALL.into_iter().find(|scanner| scanner.regex(semantics) == regex)
    }

    /// The tiktoken (fancy-regex) pattern this scanner is identical to.
    pub fn pattern(self) -> &'static str {
        self.regex(Semantics::FancyRegex)
    }

    /// The regex this scanner is identical to under `semantics`. The pattern of each family as its
    /// files spell it; where tiktoken's and `tokenizers`' spellings of a named pattern differ, each.
    pub fn regex(self, semantics: Semantics) -> &'static str {
        match (self, semantics) {
            (Scanner::Gpt2, Semantics::FancyRegex) => GPT2,
            (Scanner::Gpt2, Semantics::Oniguruma) => BYTE_LEVEL,
            (Scanner::Cl100k, Semantics::FancyRegex) => CL100K,
            (Scanner::Cl100k, Semantics::Oniguruma) => CL100K_ONIGURUMA,
            (Scanner::O200k, _) => O200K,
            (Scanner::Llama3, _) => LLAMA3,
            (Scanner::Qwen2, _) => QWEN2,
            (Scanner::Qwen35, _) => QWEN35,
            (Scanner::SeedCoder, _) => SEED_CODER,
            (Scanner::Tekken, _) => TEKKEN,
        }
    }

    /// A short name for descriptions: `llama3`, `o200k`...
    pub fn name(self) -> &'static str {
        match self {
            Scanner::Gpt2 => "gpt2",
            Scanner::Cl100k => "cl100k",
            Scanner::O200k => "o200k",
            Scanner::Llama3 => "llama3",
            Scanner::Qwen2 => "qwen2",
            Scanner::Qwen35 => "qwen3.5",
            Scanner::SeedCoder => "seed-coder",
            Scanner::Tekken => "tekken",
        }
    }

    /// How many pieces at the end of a text more text can still change: every piece of `text`
    /// but the last `UNSETTLED_PIECES` is also a piece of `text + more`, at the same place, for
    /// any `more`. Streams (`crate::stream`) encode those pieces before the rest arrives.
    ///
    /// Why two. A scanner decides a piece from the characters at its start and after; only where
    /// that decision reads past the end of the text can more text change it, and then the piece
    /// reaches the end, or is followed by one piece that does:
    /// - a run (letters, numbers, "other", white space) ends at the first character outside
    ///   it; when the text ends first, so does the piece (and `\s++$` takes a whole final run);
    /// - a contraction reads at most two characters after its apostrophe; when the text ends
    ///   within them, the apostrophe starts the last piece (cl100k, o200k: `'l`) or is the piece
    ///   before it (GPT-2: `'`, `l`), and a word before the apostrophe ends at it either way;
    /// - o200k's `[UPPER]*[LOWER]+` can end a word inside a run of upper-class characters, after
    ///   the last that is also lower-class; when that run reaches the end, its rest (letters
    ///   that are only upper-class) is one last piece. Likewise `\s*[\r\n]+` ends after the last
    ///   line break of a white-space run that reaches the end, and the rest (white space without
    ///   a line break) is one last piece.
    ///
    /// The family scanners are these same rules with other parameters (digit groups, the set of
    /// word characters, the tail after punctuation), so the same bound holds. Tests check it
    /// exhaustively on short texts of characters of every class, and on random longer ones,
    /// against every short continuation, for every scanner.
    pub const UNSETTLED_PIECES: usize = 2;

    /// Calls `on_piece(start, end)` with the byte range of each piece, in order: the ranges
    /// `fancy_regex` finds with `self.pattern()` (and Oniguruma with `self.regex(Oniguruma)`),
    /// which cover the whole text.
    pub fn for_each_piece(self, text: &str, on_piece: impl FnMut(usize, usize)) {
        self.for_each_piece_until(text, text.len(), on_piece);
    }

    /// Like [`Scanner::for_each_piece`] for the pieces that start before byte `stop`; returns
    /// where the last of them ends (`stop` exactly when a piece ends there, which a position
    /// [`always_ends_piece`] names guarantees).
    pub fn for_each_piece_until(self, text: &str, stop: usize, on_piece: impl FnMut(usize, usize)) -> usize {
        let classes = ClassTable::get();
        let bytes = text.as_bytes();
        let stop = stop.min(bytes.len());
        match self {
            Scanner::Gpt2 => gpt2_split(classes, bytes, stop, on_piece),
            Scanner::Cl100k => block_split::<true, { Words::Letters as u8 }>(
                classes,
                bytes,
                stop,
                ClassTable::word_piece::<true, LETTER, 3, true, true>,
                word_starts::<false, 3, true, true>,
                on_piece,
            ),
            Scanner::O200k => block_split::<true, { Words::Cases as u8 }>(
                classes,
                bytes,
                stop,
                ClassTable::o200k_piece::<true, 3>,
                word_starts::<true, 3, true, true>,
                on_piece,
            ),
            Scanner::Llama3 => block_split::<true, { Words::Letters as u8 }>(
                classes,
                bytes,
                stop,
                ClassTable::word_piece::<true, LETTER, 3, true, false>,
                word_starts::<false, 3, true, true>,
                on_piece,
            ),
            Scanner::Qwen2 => block_split::<true, { Words::Letters as u8 }>(
                classes,
                bytes,
                stop,
                ClassTable::word_piece::<true, LETTER, 1, true, false>,
                word_starts::<false, 1, true, true>,
                on_piece,
            ),
            Scanner::Qwen35 => block_split::<true, { Words::LettersAndMarks as u8 }>(
                classes,
                bytes,
                stop,
                ClassTable::word_piece::<true, { LETTER | MARK }, 1, true, false>,
                word_starts::<false, 1, true, true>,
                on_piece,
            ),
            Scanner::SeedCoder => block_split::<true, { Words::Letters as u8 }>(
                classes,
                bytes,
                stop,
                ClassTable::word_piece::<true, LETTER, 1, false, false>,
                word_starts::<false, 1, false, true>,
                on_piece,
            ),
            Scanner::Tekken => block_split::<true, { Words::Cases as u8 }>(
                classes,
                bytes,
                stop,
                ClassTable::o200k_piece::<false, 1>,
                word_starts::<true, 1, true, false>,
                on_piece,
            ),
        }
    }
}

/// Whether every scanner ends a piece at byte `at` of `text` (a character boundary strictly inside
/// it), whatever text comes before: where a long text may be cut, its parts split from their
/// starts, with the ids of the whole (`crate::parallel`). Two pairs of characters, in every
/// named pattern and family pattern:
/// - a character that is not white space, then white space other than `\r` and `\n`: no
///   alternative takes white space after anything else (words, numbers, contractions and runs of
///   "other" end at it; only the tail of punctuation takes line breaks, and o200k's also `/`);
/// - `\r` or `\n`, then a character that is neither white space nor `/`: pieces holding a line
///   break are white space, or punctuation with its tail of line breaks (and slashes); and no piece
///   starts with a line break before something else (the optional prefix of words excludes line
///   breaks, that of punctuation is a space).
///
/// The split of the text from `at` on is then the whole text's from `at` on: a scanner decides a
/// piece from the characters at its start and after, never before. A test checks this rule against
/// each scanner and its regex on random text of characters of every class.
pub fn always_ends_piece(text: &str, at: usize) -> bool {
    at > 0 && at < text.len() && text.is_char_boundary(at) && next_piece_end(text, at, at + 1) == Some(at)
}

/// [`always_ends_piece`] for a character of class `left` (first byte `left_byte`) followed by one
/// of class `right` (first byte `right_byte`).
#[inline(always)]
fn ends_piece_between(left: u8, left_byte: u8, right: u8, right_byte: u8) -> bool {
    let line_break = |byte: u8| byte == b'\r' || byte == b'\n';
    (left & SPACE == 0 && right & SPACE != 0 && !line_break(right_byte))
        || (line_break(left_byte) && right & (SPACE | END) == 0 && right_byte != b'/')
}

/// The first position `at` with `from <= at < until` where [`always_ends_piece`] holds, reading
/// `text` from the first character boundary at or after `from`.
pub fn next_piece_end(text: &str, from: usize, until: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let until = until.min(bytes.len());
    let mut at = from.max(1);
    while at < until && !text.is_char_boundary(at) {
        at += 1;
    }
    if at >= until {
        return None;
    }
    let classes = ClassTable::get();
    let mut before = at - 1;
    while before > 0 && !text.is_char_boundary(before) {
        before -= 1;
    }
    let (mut left, mut left_byte) = (classes.class_at(bytes, before).0, bytes[before]);
    while at < until {
        let (right, len) = classes.class_at(bytes, at);
        if ends_piece_between(left, left_byte, right, bytes[at]) {
            return Some(at);
        }
        (left, left_byte) = (right, bytes[at]);
        at += len;
    }
    None
}

/// Builds the scanners' character table now rather than on first use. A process forked while
/// another thread is building it would wait for that build forever (the thread does not exist in
/// the child), so the Python bindings call this at import, before any thread can encode.
pub fn prepare() {
    ClassTable::get();
}

/// Cuts `bytes` into consecutive pieces, `piece_end` telling where the piece at a position ends,
/// up to the first piece ending at or after `stop`; returns where that piece ends. (The scalar
/// scanners alone, which tests compare with the block scanners.)
#[cfg(test)]
fn split(
    classes: &ClassTable,
    bytes: &[u8],
    stop: usize,
    piece_end: impl Fn(&ClassTable, &[u8], usize) -> usize,
    mut on_piece: impl FnMut(usize, usize),
) -> usize {
    let mut start = 0;
    while start < stop {
        let end = piece_end(classes, bytes, start);
        on_piece(start, end);
        start = end;
    }
    start
}

/// Bytes of a block the block scanners classify at once.
const BLOCK: usize = 64;
/// Bytes a block scanner splits without blocks after a block that settled fewer than two pieces,
/// at first and at most (doubling while blocks keep failing).
const FIRST_BACKOFF: usize = 4 * BLOCK;
const LAST_BACKOFF: usize = 64 * BLOCK;
/// Of a block's piece starts, those below this bit are trusted: a start is decided by the byte
/// before it and up to two after it (a contraction's letters).
const TRUSTED: usize = BLOCK - 3;

/// One bit per byte of a block (bit `i`: byte `i`), for each class the block scanners tell apart
/// among ASCII bytes. The last three only for the scanners of words (`WORDS`), 0 for gpt2's.
struct BlockMasks {
    letter: u64,
    digit: u64,
    space: u64,
    /// White space other than the space: `\t \n \v \f \r`.
    other_space: u64,
    apostrophe: u64,
    /// Bytes of 0x80 and above: characters the masks do not classify.
    high: u64,
    /// `A-Z`.
    upper: u64,
    /// `\r \n`.
    newline: u64,
    slash: u64,
    /// The bytes after the first of the characters of two and three bytes classified ([`BlockMasks::classify_multibyte`]).
    continuation: u64,
}

/// The high bit of each byte of `word` that lies in `first..=last` once `fold` is or-ed into it
/// (for bytes below 0x80; others never match). Each byte's low seven bits plus a constant below
/// 0x80 cannot carry into the next byte; the sum's high bit says whether the byte reaches the bound.
#[inline(always)]
fn bytes_in(word: u64, first: u8, last: u8, fold: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let low = (word | (ONES * u64::from(fold))) & !HIGH;
    let from_first = low + ONES * u64::from(0x80 - first);
    let past_last = low + ONES * u64::from(0x7F - last);
    from_first & !past_last & !word & HIGH
}

/// The eight high bits of `bits` (one per byte) as the low eight bits, byte 0 first.
#[inline(always)]
fn gather(bits: u64) -> u64 {
    ((bits >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

impl BlockMasks {
    const EMPTY: BlockMasks = BlockMasks {
        letter: 0,
        digit: 0,
        space: 0,
        other_space: 0,
        apostrophe: 0,
        high: 0,
        upper: 0,
        newline: 0,
        slash: 0,
        continuation: 0,
    };

    /// The masks of `block[..BLOCK]`: sixteen bytes a compare (SSE2, which every x86-64 has).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn of<const WORDS: bool>(block: &[u8]) -> BlockMasks {
        use std::arch::x86_64::*;
        let block = &block[..BLOCK];
        let mut masks = BlockMasks::EMPTY;
        // SAFETY: SSE2 is part of x86-64; each load reads 16 of the block's 64 bytes.
        unsafe {
            // A byte in `first..first + count`: moved so that `first` lands on -128, it is below
            // -128 + `count` as a signed byte. (Bytes of 0x80 and above are masked out below.)
            let within = |vector: __m128i, first: u8, count: u8| {
                let moved = _mm_add_epi8(vector, _mm_set1_epi8(0x80u8.wrapping_sub(first) as i8));
                _mm_movemask_epi8(_mm_cmplt_epi8(moved, _mm_set1_epi8((0x80u8.wrapping_add(count)) as i8))) as u16 as u64
            };
            let equal = |vector: __m128i, byte: u8| _mm_movemask_epi8(_mm_cmpeq_epi8(vector, _mm_set1_epi8(byte as i8))) as u16 as u64;
            for index in 0..BLOCK / 16 {
                let vector = _mm_loadu_si128(block.as_ptr().add(16 * index).cast());
                let shift = 16 * index;
                let folded = _mm_or_si128(vector, _mm_set1_epi8(0x20));
                masks.letter |= within(folded, b'a', 26) << shift;
                masks.digit |= within(vector, b'0', 10) << shift;
                masks.space |= equal(vector, b' ') << shift;
                masks.other_space |= within(vector, b'\t', 5) << shift;
                masks.apostrophe |= equal(vector, b'\'') << shift;
                masks.high |= (_mm_movemask_epi8(vector) as u16 as u64) << shift;
                if WORDS {
                    masks.upper |= within(vector, b'A', 26) << shift;
                    masks.newline |= (equal(vector, b'\n') | equal(vector, b'\r')) << shift;
                    masks.slash |= equal(vector, b'/') << shift;
                }
            }
        }
        let ascii = !masks.high;
        masks.letter &= ascii;
        masks.digit &= ascii;
        masks.other_space &= ascii;
        masks.upper &= ascii;
        masks
    }

    /// The masks of `block[..BLOCK]`, eight bytes a word.
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    #[inline(always)]
    fn of_words<const WORDS: bool>(block: &[u8]) -> BlockMasks {
        let mut masks = BlockMasks::EMPTY;
        for (index, chunk) in block[..BLOCK].chunks_exact(8).enumerate() {
            let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            let shift = 8 * index;
            masks.letter |= gather(bytes_in(word, b'a', b'z', 0x20)) << shift;
            masks.digit |= gather(bytes_in(word, b'0', b'9', 0)) << shift;
            masks.space |= gather(bytes_in(word, b' ', b' ', 0)) << shift;
            masks.other_space |= gather(bytes_in(word, b'\t', b'\r', 0)) << shift;
            masks.apostrophe |= gather(bytes_in(word, b'\'', b'\'', 0)) << shift;
            masks.high |= gather(word & 0x8080_8080_8080_8080) << shift;
            if WORDS {
                masks.upper |= gather(bytes_in(word, b'A', b'Z', 0)) << shift;
                masks.newline |= gather(bytes_in(word, b'\n', b'\n', 0) | bytes_in(word, b'\r', b'\r', 0)) << shift;
                masks.slash |= gather(bytes_in(word, b'/', b'/', 0)) << shift;
            }
        }
        masks
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn of<const WORDS: bool>(block: &[u8]) -> BlockMasks {
        BlockMasks::of_words::<WORDS>(block)
    }

    /// Classifies the characters of two and three bytes of `block` from its first byte of 0x80 or
    /// above on, up to the first character of four bytes, or one the block scanners leave
    /// unsettled ([`BlockClass::Unsettled`]), or one cut by the block's end: its bytes take the
    /// character's class for the scanners of [`Words`] kind `WORDS_KIND` (none: other), and leave
    /// `high`; those after the first are marked in `continuation`.
    #[inline(never)]
    fn classify_multibyte<const WORDS_KIND: u8>(&mut self, classes: &ClassTable, block: &[u8]) {
        let words = match WORDS_KIND {
            0 => Words::Letters,
            1 => Words::LettersAndMarks,
            _ => Words::Cases,
        };
        let mut rest = self.high;
        while rest != 0 {
            let at = rest.trailing_zeros() as usize;
            let lead = block[at];
            let continuation = |offset: usize| u32::from(block[at + offset] & 0x3F);
            let (code, len) = if (0xC2..0xE0).contains(&lead) && at + 1 < BLOCK {
                let code_point = (u32::from(lead & 0x1F) << 6) | continuation(1);
                (classes.two_byte[code_point as usize] >> (2 * WORDS_KIND) & 3, 2)
            } else if (0xE0..0xF0).contains(&lead) && at + 2 < BLOCK {
                let code_point = (u32::from(lead & 0x0F) << 12) | (continuation(1) << 6) | continuation(2);
                (BlockClass::of(classes.class_of_code_point(code_point), words) as u8, 3)
            } else {
                break;
            };
            let bytes = low_bits(len) << at;
            const OTHER: u8 = BlockClass::Other as u8;
            const LETTER_CLASS: u8 = BlockClass::Letter as u8;
            const UPPER_CLASS: u8 = BlockClass::Upper as u8;
            match code {
                OTHER => {}
                LETTER_CLASS => self.letter |= bytes,
                UPPER_CLASS => {
                    self.letter |= bytes;
                    self.upper |= bytes;
                }
                _ => break,
            }
            self.continuation |= bytes & !(1u64 << at);
            rest &= !bytes;
        }
        self.high = rest;
    }
}

/// gpt2's split of `bytes` (see [`Scanner::for_each_piece_until`]) by blocks ([`block_split`]).
///
/// Among ASCII bytes gpt2's pattern starts a piece at:
/// - each byte whose class (letter, digit, white space, other) differs from the byte's before,
///   but one after a space (0x20) that is not white space: ` ?X+` takes the space into its run;
/// - the last white space before a byte that is not (`\s+(?!\S)` gives it back): that piece is
///   the white space alone, or the space that starts the run after it;
/// - after a contraction (`'s`, `'t`, `'re`, `'ve`, `'m`, `'ll`, `'d`) at an apostrophe that starts a
///   piece, and nowhere inside it.
///
/// A test compares it with the scalar scanner and the regex on generated texts of up to a few
/// hundred bytes, mostly ASCII.
fn gpt2_split(classes: &ClassTable, bytes: &[u8], stop: usize, on_piece: impl FnMut(usize, usize)) -> usize {
    block_split::<false, { Words::Letters as u8 }>(classes, bytes, stop, ClassTable::gpt2_piece, gpt2_starts, on_piece)
}

/// Splits `bytes` (see [`Scanner::for_each_piece_until`]) a block of 64 bytes at a time where the
/// block is ASCII: each class a bit mask ([`BlockMasks`], the word classes when `WORDS`), the piece
/// starts derived from them with bit operations by `starts(bytes, at, masks)`, which also says
/// below which bit they are settled, and the pieces read off the starts (no decision per piece);
/// the scalar scanner `piece_end` for a piece the block cannot settle (it reaches a character that
/// is not ASCII, or past the settled bits), and for a while after a block that settled few pieces.
#[inline(always)]
fn block_split<const WORDS: bool, const WORDS_KIND: u8>(
    classes: &ClassTable,
    bytes: &[u8],
    stop: usize,
    piece_end: impl Fn(&ClassTable, &[u8], usize) -> usize,
    starts: impl Fn(&[u8], usize, &BlockMasks) -> (u64, usize),
    mut on_piece: impl FnMut(usize, usize),
) -> usize {
    let mut start = 0;
    // Blocks are not tried before this byte: after one that settled fewer than two pieces (text
    // that is mostly not ASCII), for a stretch that doubles while they keep failing.
    let mut scalar_until = 0;
    let mut backoff = FIRST_BACKOFF;
    loop {
        // The scalar scanner, up to where a block is tried.
        while start < stop && start < scalar_until {
            let end = piece_end(classes, bytes, start);
            on_piece(start, end);
            start = end;
        }
        if start >= stop {
            return start;
        }
        if bytes.len() - start < BLOCK {
            scalar_until = usize::MAX;
            continue;
        }
        let mut masks = BlockMasks::of::<WORDS>(&bytes[start..]);
        if masks.high != 0 {
            masks.classify_multibyte::<WORDS_KIND>(classes, &bytes[start..start + BLOCK]);
        }
        let (starts, settled_below) = starts(bytes, start, &masks);
        // Pieces between consecutive settled starts; the last one starts the next block.
        let mut rest = starts & low_bits(settled_below) & !1;
        let block = start;
        let mut settled = 0;
        while rest != 0 && start < stop {
            let end = block + rest.trailing_zeros() as usize;
            on_piece(start, end);
            start = end;
            rest &= rest - 1;
            settled += 1;
        }
        #[cfg(test)]
        tests::BLOCK_PIECES.fetch_add(settled, std::sync::atomic::Ordering::Relaxed);
        if settled >= 2 {
            backoff = FIRST_BACKOFF;
            scalar_until = start;
        } else {
            // The piece at `start` (when none was settled) is left to the scalar scanner.
            scalar_until = start + backoff;
            backoff = (backoff * 2).min(LAST_BACKOFF);
        }
    }
}

/// The bits below `count` (at most 64).
#[inline(always)]
fn low_bits(count: usize) -> u64 {
    if count >= 64 { u64::MAX } else { (1u64 << count) - 1 }
}

/// The first bit of each run of ones of `mask`.
#[inline(always)]
fn run_starts(mask: u64) -> u64 {
    mask & !(mask << 1)
}

/// The length of the contraction (`'s 't 're 've 'm 'll 'd`, the apostrophe included) at byte `at`,
/// an apostrophe, with the letters in either case when `FOLD`; 0 if none. Folds ASCII letters only
/// (gpt2's contractions do not fold; the block scanners call it where the two bytes after the
/// apostrophe are ASCII).
#[inline(always)]
fn ascii_contraction<const FOLD: bool>(bytes: &[u8], at: usize) -> usize {
    let letter = |offset: usize| bytes.get(at + offset).map(|&byte| if FOLD && byte.is_ascii_uppercase() { byte | 0x20 } else { byte });
    match (letter(1), letter(2)) {
        (Some(b's' | b'd' | b'm' | b't'), _) => 2,
        (Some(b'l'), Some(b'l')) | (Some(b'v' | b'r'), Some(b'e')) => 3,
        _ => 0,
    }
}

/// The piece starts of gpt2's split in the block at `at` (bit 0, `at` itself, is a piece start),
/// from its masks, and the bit below which they are settled: the bits at and past two bytes before
/// a byte that is not ASCII are not (a start is decided by the byte before it and up to two after
/// it, a contraction's letters), nor the last three of the block.
#[inline(always)]
fn gpt2_starts(bytes: &[u8], at: usize, masks: &BlockMasks) -> (u64, usize) {
    let white = masks.space | masks.other_space;
    let other = !(masks.letter | masks.digit | white | masks.high);
    let not_white = masks.letter | masks.digit | other;
    let mut starts = run_starts(masks.letter) | run_starts(masks.digit) | run_starts(other) | run_starts(white);
    // ` ?X+`: a space before what is not white space starts that run.
    starts &= !(not_white & (masks.space << 1));
    // `\s+(?!\S)`: the last white space before what is not white space starts a piece.
    starts |= white & (not_white >> 1);
    starts |= 1;
    let settled = (masks.high.trailing_zeros() as usize).saturating_sub(2).min(TRUSTED);
    let apostrophes = masks.apostrophe & starts & low_bits(settled);
    let starts = with_contractions::<false, false>(bytes, at, apostrophes, starts);
    (starts, settled)
}

/// `starts` with the contractions at the `apostrophes` (settled bits of the block at `at`): the
/// start after each, none inside. Their letters in either case when `FOLD`. When `SUFFIX` (o200k's)
/// the contraction ends the word before it, so its apostrophe starts no piece, and an apostrophe
/// just after one follows its letters, not a word: it is skipped.
#[inline(always)]
fn with_contractions<const FOLD: bool, const SUFFIX: bool>(
    bytes: &[u8],
    at: usize,
    mut apostrophes: u64,
    mut starts: u64,
) -> u64 {
    let mut contraction_end = usize::MAX;
    while apostrophes != 0 {
        let bit = apostrophes.trailing_zeros() as usize;
        apostrophes &= apostrophes - 1;
        if SUFFIX && bit == contraction_end {
            continue;
        }
        let length = ascii_contraction::<FOLD>(bytes, at + bit);
        if length > 0 {
            contraction_end = bit + length;
            // Below bit 64: a settled apostrophe is below bit 61.
            let inside = low_bits(length - 1) << (bit + 1) | if SUFFIX { 1u64 << bit } else { 0 };
            starts = (starts & !inside) | (1u64 << (bit + length));
        }
    }
    starts
}

/// The piece starts of a word scanner's split in the block at `at` (see [`gpt2_starts`]): the
/// cl100k shape (cl100k, Llama 3, Qwen 2 and 3.5, Seed-Coder), or o200k's when `O200K` (o200k,
/// tekken); numbers of up to `DIGITS` digits; punctuation taking the line breaks after it (and
/// o200k's slashes) when `TAIL`; contractions when `CONTRACTIONS` (o200k's after a word; the cl100k
/// shape always has them, at a piece's start, in either case).
///
/// Among ASCII bytes these patterns start a piece at:
/// - each byte whose class (letter, digit, white space, other) differs from the byte's before, and
///   every `DIGITS` digits from the start of a run of them; o200k also at an upper-case letter after
///   a lower-case one (`[A-Z]*[a-z]+` ends there);
/// - but not at a letter after a character that can be a word's prefix (`[^\r\n\p{L}\p{N}]?`) and
///   starts a piece: white space other than a line break, or "other" that starts its run, which it
///   does unless a space comes before it (` ?[^\s\p{L}\p{N}]+` takes the space);
/// - in a white-space run: the run's first byte (unless it is the line breaks punctuation takes),
///   just after its last line break, and its last byte when the bytes since the line break (or since
///   its start) are two or more (`\s+(?!\S)` gives it back); see [`ClassTable::word_piece`];
/// - after the tail of line breaks (and o200k's slashes) of a run of other characters, and nowhere
///   inside it;
/// - after a contraction at an apostrophe that starts a piece (o200k's: after a letter), and nowhere
///   inside it.
///
/// Settled: below two bytes before one that is not ASCII, below the last three of the block, up to
/// the first byte of a white-space run that reaches either, and (o200k) up to just after a tail
/// that ends with a slash and is followed by other characters (the rules for words read two bytes
/// back, and that slash is not the start of its run). Tests compare the split with the scalar
/// scanners' and the regexes' on generated texts.
#[inline(always)]
fn word_starts<const O200K: bool, const DIGITS: usize, const TAIL: bool, const CONTRACTIONS: bool>(
    bytes: &[u8],
    at: usize,
    masks: &BlockMasks,
) -> (u64, usize) {
    let limit = masks.high.trailing_zeros() as usize;
    let mut settled = limit.saturating_sub(2).min(TRUSTED);
    let white = masks.space | masks.other_space;
    let other = !(masks.letter | masks.digit | white | masks.high);
    let letter_starts = run_starts(masks.letter);
    let mut starts = letter_starts | run_starts(masks.digit) | run_starts(other) | run_starts(white) | 1;
    if O200K {
        starts |= masks.upper & ((masks.letter & !masks.upper) << 1);
    }
    if DIGITS == 1 {
        starts |= masks.digit;
    } else {
        // Runs of more than `DIGITS` digits: a start every `DIGITS` of them.
        let digits = masks.digit;
        let mut long = run_starts(digits);
        for shift in 1..=DIGITS {
            long &= digits >> shift;
        }
        while long != 0 {
            let first = long.trailing_zeros() as usize;
            long &= long - 1;
            let end = first + (!(digits >> first)).trailing_zeros() as usize;
            for group in (first + DIGITS..end).step_by(DIGITS) {
                starts |= 1 << group;
            }
        }
    }
    // A letter after a prefix that starts a piece: white space other than a line break, or other
    // alone in its run (of characters, which may have two bytes each) that a space does not take.
    // Marked from each character of a run after its first, and from a run's first after a space,
    // to the run's end.
    let other_starts = run_starts(other);
    let marks = (other & !masks.continuation & !other_starts) | (other_starts & (masks.space << 1));
    let not_prefix = ((other.wrapping_add(marks) ^ other) & other) | marks;
    let prefix = ((white & !masks.newline) << 1) | ((other & !not_prefix) << 1);
    starts &= !(letter_starts & prefix);
    // ` ?[^\s\p{L}\p{N}]+`: a space before other starts that run.
    starts &= !(other_starts & (masks.space << 1));
    // Runs of white space of two bytes or more.
    let mut runs = run_starts(white) & (white >> 1);
    let tail = if TAIL {
        // A tail starts at each line break after other characters (the end of their run, or a
        // slash of a tail) and goes on over the tail's bytes. Adding the starts to the tail's bytes
        // clears each run of them from its first start on; the other starts of a run are set in
        // the sum instead, and put back.
        let tail_bytes = if O200K { masks.newline | masks.slash } else { masks.newline };
        let first = (other << 1) & masks.newline;
        ((tail_bytes.wrapping_add(first) ^ tail_bytes) & tail_bytes) | first
    } else {
        0
    };
    while runs != 0 {
        let first = runs.trailing_zeros() as usize;
        runs &= runs - 1;
        let end = first + (!(white >> first)).trailing_zeros() as usize;
        if end >= settled {
            settled = settled.min(first + 1);
            break;
        }
        // After the line breaks punctuation takes.
        let start = (first + (tail >> first).trailing_ones() as usize).min(end);
        if start == end {
            continue;
        }
        starts |= 1 << start;
        let breaks = (masks.newline >> start) & low_bits(end - start);
        let after_break = if breaks == 0 { start } else { start + 64 - breaks.leading_zeros() as usize };
        if after_break < end {
            starts |= 1 << after_break;
        }
        if end - after_break >= 2 {
            starts |= 1 << (end - 1);
        }
    }
    if TAIL {
        // Each tail is part of its punctuation's piece, and ends one.
        let after_tails = (tail << 1) & !tail;
        starts = (starts & !tail) | after_tails;
        if O200K {
            let after_slash = after_tails & (masks.slash << 1) & other;
            if after_slash != 0 {
                settled = settled.min(after_slash.trailing_zeros() as usize + 1);
            }
        }
    }
    if CONTRACTIONS {
        // o200k's contraction is a suffix of the word before it; the cl100k shape's starts a piece.
        let after = if O200K { masks.letter << 1 } else { starts };
        let apostrophes = masks.apostrophe & after & low_bits(settled);
        starts = with_contractions::<true, O200K>(bytes, at, apostrophes, starts);
    }
    (starts, settled)
}

// Class bits of a character.
/// `\p{L}`
const LETTER: u8 = 1;
/// `\p{N}`
const NUMBER: u8 = 1 << 1;
/// `\s` (Unicode White_Space)
const SPACE: u8 = 1 << 2;
/// o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`
const UPPER: u8 = 1 << 3;
/// o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`
const LOWER: u8 = 1 << 4;
/// `\p{M}` (Qwen 3.5's words take marks)
const MARK: u8 = 1 << 5;
/// Past the end of the text (no character).
const END: u8 = 1 << 7;

/// `[^\s\p{L}\p{N}]`: punctuation, symbols, marks, controls, unassigned code points...
#[inline(always)]
fn is_other(class: u8) -> bool {
    is_other_than::<LETTER>(class)
}

/// "Other" beside words of the class bits `WORD`: `[^\s\p{L}\p{N}]` for letters, and
/// `[^\s\p{L}\p{M}\p{N}]` for letters and marks.
#[inline(always)]
fn is_other_than<const WORD: u8>(class: u8) -> bool {
    class & (WORD | NUMBER | SPACE | END) == 0
}

/// Code points per block of the two-level class table.
const BLOCK_BITS: u32 = 7;
const BLOCK_LEN: usize = 1 << BLOCK_BITS;
const CODE_POINTS: usize = 0x11_0000;

/// The letters of the contractions `'s 't 're 've 'm 'll 'd`.
const CONTRACTION_LETTERS: &[u8] = b"sdmtlvre";

/// The class bits of every code point, and the case folding of the contraction letters.
struct ClassTable {
    ascii: [u8; 128],
    /// Block number of each `BLOCK_LEN` code points; identical blocks are stored once.
    block_of: Box<[u16]>,
    blocks: Box<[u8]>,
    /// Each character a contraction letter matches case-insensitively, with that (lowercase ASCII)
    /// letter: `s`, `S` and U+017F LATIN SMALL LETTER LONG S for `s`, and so on.
    folds: Box<[(char, u8)]>,
    /// For each code point of two UTF-8 bytes (U+0080 to U+07FF, by code point), its class for the
    /// block scanners of each [`Words`] kind: two bits per kind, a [`BlockClass`] code.
    two_byte: Box<[u8]>,
}

/// How the block scanners see a character of two or three UTF-8 bytes: its bytes take its class in
/// the masks, or it ends what a block settles.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum BlockClass {
    Other = 0,
    /// A word character (o200k: lower case only).
    Letter = 1,
    /// o200k: upper case only.
    Upper = 2,
    /// White space and numbers (the rules count them in bytes), a character in both of o200k's
    /// cases, and one that folds to a contraction's letter.
    Unsettled = 3,
}

impl BlockClass {
    /// The code of a character of class `class` (not ASCII, not folding to a contraction's letter)
    /// for the scanners of `words`.
    #[inline(always)]
    fn of(class: u8, words: Words) -> BlockClass {
        if class & (SPACE | NUMBER) != 0 {
            return BlockClass::Unsettled;
        }
        match words {
            Words::Letters if class & LETTER != 0 => BlockClass::Letter,
            Words::LettersAndMarks if class & (LETTER | MARK) != 0 => BlockClass::Letter,
            Words::Cases => match (class & UPPER != 0, class & LOWER != 0) {
                (true, true) => BlockClass::Unsettled,
                (true, false) => BlockClass::Upper,
                (false, true) => BlockClass::Letter,
                (false, false) if class & LETTER != 0 => BlockClass::Unsettled,
                (false, false) => BlockClass::Other,
            },
            _ => BlockClass::Other,
        }
    }
}

/// Which characters the block scanners take as word characters.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
enum Words {
    /// `\p{L}`: gpt2 and the cl100k shape.
    Letters = 0,
    /// `[\p{L}\p{M}]`: Qwen 3.5.
    LettersAndMarks = 1,
    /// o200k's cases: `[UPPER]` and `[LOWER]` (o200k, tekken).
    Cases = 2,
}

/// The code points of a regex class, as `regex-syntax` (Unicode mode) parses it.
fn class_ranges(regex: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::Parser::new()
        .parse(regex)
        .unwrap_or_else(|error| panic!("regex-syntax rejects the class {regex}: {error}"));
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => {
            class.ranges().iter().map(|range| (range.start() as u32, range.end() as u32)).collect()
        }
        other => panic!("{regex} is not a Unicode class: {other:?}"),
    }
}

impl ClassTable {
    fn get() -> &'static ClassTable {
        static TABLE: OnceLock<ClassTable> = OnceLock::new();
        TABLE.get_or_init(ClassTable::build)
    }

    fn build() -> ClassTable {
        let mut class_of = vec![0u8; CODE_POINTS];
        for (regex, bit) in [
            (r"\p{L}", LETTER),
            (r"\p{N}", NUMBER),
            (r"\s", SPACE),
            (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", UPPER),
            (r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", LOWER),
            (r"\p{M}", MARK),
        ] {
            for (first, last) in class_ranges(regex) {
                for class in &mut class_of[first as usize..=last as usize] {
                    *class |= bit;
                }
            }
        }

        let mut ascii = [0u8; 128];
        ascii.copy_from_slice(&class_of[..128]);
        let mut block_of = Vec::with_capacity(CODE_POINTS / BLOCK_LEN);
        let mut blocks = Vec::new();
        let mut known: HashMap<&[u8], u16> = HashMap::new();
        for block in class_of.chunks(BLOCK_LEN) {
            let number = *known.entry(block).or_insert_with(|| {
                blocks.extend_from_slice(block);
                u16::try_from(blocks.len() / BLOCK_LEN - 1).expect("fewer than 65536 distinct blocks")
            });
            block_of.push(number);
        }

        // Each contraction letter's simple case-fold class: what fancy-regex's case-insensitive
        // literals match (its `LitCasei` is built the same way).
        let mut folds = Vec::new();
        for &letter in CONTRACTION_LETTERS {
            let letter_char = char::from(letter);
            let mut class = ClassUnicode::new([ClassUnicodeRange::new(letter_char, letter_char)]);
            class.try_case_fold_simple().expect("regex-syntax has its case-folding tables");
            for range in class.ranges() {
                for folded in range.start()..=range.end() {
                    assert!(
                        folds.iter().all(|&(known, _)| known != folded),
                        "{folded:?} folds to two contraction letters"
                    );
                    folds.push((folded, letter));
                }
            }
        }

        // Characters of three bytes take their code from their class alone
        // ([`BlockMasks::classify_multibyte`]): none folds to a contraction's letter.
        assert!(folds.iter().all(|&(folded, _)| (folded as u32) < 0x800), "a contraction letter folds from {folds:?}");
        let two_byte = (0..0x800u32)
            .map(|code_point| {
                let folds_to_letter = folds.iter().any(|&(folded, _)| folded as u32 == code_point);
                [Words::Letters, Words::LettersAndMarks, Words::Cases]
                    .iter()
                    .map(|&words| {
                        let code = if code_point < 0x80 || folds_to_letter {
                            BlockClass::Unsettled
                        } else {
                            BlockClass::of(class_of[code_point as usize], words)
                        };
                        (code as u8) << (2 * words as u8)
                    })
                    .sum::<u8>()
            })
            .collect();

        ClassTable { ascii, block_of: block_of.into(), blocks: blocks.into(), folds: folds.into(), two_byte }
    }

    #[inline(always)]
    fn class_of_code_point(&self, code_point: u32) -> u8 {
        let block = self.block_of[(code_point >> BLOCK_BITS) as usize] as usize;
        self.blocks[(block << BLOCK_BITS) | (code_point as usize & (BLOCK_LEN - 1))]
    }

    /// The class of the character at byte `at` and its length in bytes; `(END, 0)` at the end.
    #[inline(always)]
    fn class_at(&self, bytes: &[u8], at: usize) -> (u8, usize) {
        match bytes.get(at) {
            Some(&byte) if byte < 0x80 => (self.ascii[byte as usize], 1),
            Some(_) => {
                let (code_point, len) = decode(bytes, at);
                (self.class_of_code_point(code_point), len)
            }
            None => (END, 0),
        }
    }

    /// ` ?[^\s\p{L}\p{N}]+` (with `WORD` = `\p{L}`; "other" is [`is_other_than`]) at a character
    /// `byte` of class `class` ending at `after`, followed by a character of class `next.0` and
    /// length `next.1`: where the run ends, if it matches here.
    #[inline]
    fn space_and_other_run<const WORD: u8>(
        &self,
        bytes: &[u8],
        byte: u8,
        class: u8,
        after: usize,
        next: (u8, usize),
    ) -> Option<usize> {
        let body = if is_other_than::<WORD>(class) {
            after
        } else if byte == b' ' && is_other_than::<WORD>(next.0) {
            after + next.1
        } else {
            return None;
        };
        Some(self.run(bytes, body, is_other_than::<WORD>))
    }

    /// The end of the longest run of characters from `from` whose class satisfies `keep`.
    #[inline(always)]
    fn run(&self, bytes: &[u8], from: usize, keep: impl Fn(u8) -> bool) -> usize {
        let mut at = from;
        while let Some(&byte) = bytes.get(at) {
            let (class, len) = if byte < 0x80 {
                (self.ascii[byte as usize], 1)
            } else {
                let (code_point, len) = decode(bytes, at);
                (self.class_of_code_point(code_point), len)
            };
            if !keep(class) {
                break;
            }
            at += len;
        }
        at
    }

    /// The end of the `\p{L}` run from `at`: ASCII letters eight bytes at a time (among ASCII
    /// characters `\p{L}` is exactly `A-Za-z`; a test checks the class table), the general loop
    /// from the first character that is not ASCII.
    #[inline(always)]
    fn letter_run(&self, bytes: &[u8], at: usize) -> usize {
        self.word_run::<LETTER>(bytes, at)
    }

    /// The end of the run of characters of class bits `WORD` (`\p{L}`, or `[\p{L}\p{M}]`) from
    /// `at`; among ASCII characters both are exactly `A-Za-z`.
    #[inline(always)]
    fn word_run<const WORD: u8>(&self, bytes: &[u8], at: usize) -> usize {
        self.run_after_ascii(bytes, ascii_letter_run(bytes, at), WORD)
    }

    /// The end of a run of characters of class `bit` whose ASCII part ends at `ascii_end`: there,
    /// or further when a character that is not ASCII follows (only those can still be in the class).
    #[inline(always)]
    fn run_after_ascii(&self, bytes: &[u8], ascii_end: usize, bit: u8) -> usize {
        if bytes.get(ascii_end).is_some_and(|&byte| byte >= 0x80) {
            self.run(bytes, ascii_end, |class| class & bit != 0)
        } else {
            ascii_end
        }
    }

    /// The white-space run starting at `start` (which must be white space).
    fn space_run(&self, bytes: &[u8], start: usize) -> SpaceRun {
        let mut run = SpaceRun { end: start, last_start: start, after_last_newline: None };
        while let Some(&byte) = bytes.get(run.end) {
            let (class, len) = self.class_at(bytes, run.end);
            if class & SPACE == 0 {
                break;
            }
            if byte == b'\r' || byte == b'\n' {
                run.after_last_newline = Some(run.end + 1);
            }
            run.last_start = run.end;
            run.end += len;
        }
        run
    }

    /// `\p{N}{1,DIGITS}` from `start`, which is a number of `first_len` bytes.
    #[inline(always)]
    fn up_to_numbers<const DIGITS: usize>(&self, bytes: &[u8], start: usize, first_len: usize) -> usize {
        let mut end = start + first_len;
        for _ in 1..DIGITS {
            let (class, len) = self.class_at(bytes, end);
            if class & NUMBER == 0 {
                break;
            }
            end += len;
        }
        end
    }

    /// The contraction letter the character at `at` matches case-insensitively, and its length.
    fn folded_letter(&self, bytes: &[u8], at: usize) -> Option<(u8, usize)> {
        if at >= bytes.len() {
            return None;
        }
        let (code_point, len) = if bytes[at] < 0x80 { (u32::from(bytes[at]), 1) } else { decode(bytes, at) };
        let letter = self.folds.iter().find(|&&(folded, _)| folded as u32 == code_point).map(|&(_, l)| l)?;
        Some((letter, len))
    }

    /// The end of `(?i:[sdmt]|ll|ve|re)` at `at` (just after an apostrophe), if it matches.
    fn contraction(&self, bytes: &[u8], at: usize) -> Option<usize> {
        let (first, first_len) = self.folded_letter(bytes, at)?;
        let second_wanted = match first {
            b's' | b'd' | b'm' | b't' => return Some(at + first_len),
            b'l' => b'l',
            b'v' | b'r' => b'e',
            _ => return None,
        };
        let (second, second_len) = self.folded_letter(bytes, at + first_len)?;
        (second == second_wanted).then_some(at + first_len + second_len)
    }

    // GPT-2: '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
    #[inline(always)]
    fn gpt2_piece(&self, bytes: &[u8], start: usize) -> usize {
        // '(?:[sdmt]|ll|ve|re), case-sensitive.
        if bytes[start] == b'\'' {
            let length = ascii_contraction::<false>(bytes, start);
            if length > 0 {
                return start + length;
            }
        }
        // ` ?X++` for X = letters, numbers, other: an ASCII space joins the run of the non-space
        // that follows it; otherwise the run starts here.
        let (mut class, len) = self.class_at(bytes, start);
        let mut body = start + len;
        if bytes[start] == b' ' {
            let (next, next_len) = self.class_at(bytes, body);
            if next & (SPACE | END) == 0 {
                class = next;
                body += next_len;
            }
        }
        if class & LETTER != 0 {
            return self.letter_run(bytes, body);
        }
        if class & NUMBER != 0 {
            return self.run(bytes, body, |class| class & NUMBER != 0);
        }
        if class & SPACE == 0 {
            return self.run(bytes, body, is_other);
        }
        let run = self.space_run(bytes, start);
        if run.end == bytes.len() {
            run.end // \s++$
        } else if run.last_start > start {
            run.last_start // \s+(?!\S) gives back the last white space before a non-space
        } else {
            run.end // \s
        }
    }

    // The cl100k shape, in backtracking order (cl100k, Llama 3, Qwen 2, Qwen 3.5, Seed-Coder):
    //   1. (?i:'s|'t|'re|'ve|'m|'ll|'d)                  when CONTRACTIONS
    //   2. [^\r\n\p{L}\p{N}]?WORD+                      WORD: \p{L}, or [\p{L}\p{M}]
    //   3. \p{N}{1,DIGITS}
    //   4.  ?[^\s WORD \p{N}]+[\r\n]*                   the tail when TAIL
    //   5. \s++$                                         when FINAL_RUN (cl100k)
    //   6. \s*[\r\n]+ (cl100k: \s*[\r\n], the same)   7. \s+(?!\S)   8. \s+ (cl100k: \s)
    // Possessive quantifiers (cl100k's) change nothing here: no alternative can fail after one.
    #[inline(always)]
    fn word_piece<
        const CONTRACTIONS: bool,
        const WORD: u8,
        const DIGITS: usize,
        const TAIL: bool,
        const FINAL_RUN: bool,
    >(
        &self,
        bytes: &[u8],
        start: usize,
    ) -> usize {
        let byte = bytes[start];
        if CONTRACTIONS && byte == b'\'' {
            if let Some(end) = self.contraction(bytes, start + 1) {
                return end;
            }
        }
        let (class, len) = self.class_at(bytes, start);
        let after = start + len;
        // [^\r\n\p{L}\p{N}]?WORD+: a word, with any one character before it that is not a word
        // character, a number or a line break (a space, a tab, punctuation...). With WORD =
        // [\p{L}\p{M}] that character may be a mark, which is a word character anyway.
        if class & WORD != 0 {
            return self.word_run::<WORD>(bytes, after);
        }
        if class & NUMBER != 0 {
            return self.up_to_numbers::<DIGITS>(bytes, start, len);
        }
        let (next, next_len) = self.class_at(bytes, after);
        if next & WORD != 0 && byte != b'\r' && byte != b'\n' {
            return self.word_run::<WORD>(bytes, after + next_len);
        }
        //  ?[^\s WORD \p{N}]+[\r\n]*
        if let Some(end) = self.space_and_other_run::<WORD>(bytes, byte, class, after, (next, next_len)) {
            return if TAIL { end + count_leading(&bytes[end..], |byte| matches!(byte, b'\r' | b'\n')) } else { end };
        }
        let run = self.space_run(bytes, start);
        if FINAL_RUN && run.end == bytes.len() {
            run.end // \s++$
        } else if let Some(end) = run.after_last_newline {
            end // \s*[\r\n]+: up to the run's last line break
        } else if run.end == bytes.len() {
            run.end // \s+(?!\S) at the end of the text
        } else if run.last_start > start {
            run.last_start // \s+(?!\S) gives back the last white space before a non-space
        } else {
            run.end // \s+ of one character
        }
    }

    // The o200k shape (o200k, tekken), in backtracking order:
    //   1. [^\r\n\p{L}\p{N}]?[UPPER]*[LOWER]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?   (the suffix when CONTRACTIONS)
    //   2. [^\r\n\p{L}\p{N}]?[UPPER]+[LOWER]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
    //   3. \p{N}{1,DIGITS}   4.  ?[^\s\p{L}\p{N}]+[\r\n/]*   5. \s*[\r\n]+   6. \s+(?!\S)   7. \s+
    // Alternatives 1 and 2 first try with the one-character prefix, then without it.
    fn o200k_piece<const CONTRACTIONS: bool, const DIGITS: usize>(&self, bytes: &[u8], start: usize) -> usize {
        let byte = bytes[start];
        let (class, len) = self.class_at(bytes, start);
        let after = start + len;
        if class & LETTER != 0 {
            // No prefix (a letter is not one). Alternative 2 is reached only for an upper-case
            // word that alternative 1 cannot end with a lower-class character.
            let end =
                self.o200k_lower_word(bytes, start).unwrap_or_else(|| self.o200k_upper_word(bytes, start));
            return self.o200k_contraction_suffix::<CONTRACTIONS>(bytes, end);
        }
        if class & NUMBER != 0 {
            return self.up_to_numbers::<DIGITS>(bytes, start, len);
        }
        if byte != b'\r' && byte != b'\n' {
            // This character can be the prefix.
            let word_end = if let Some(end) = self.o200k_lower_word(bytes, after) {
                Some(end)
            } else if class & UPPER != 0 {
                // A mark (the only non-letter in UPPER) is in both UPPER and LOWER, so
                // alternative 1 without the prefix matches at least the mark itself.
                self.o200k_lower_word(bytes, start)
            } else if self.class_at(bytes, after).0 & UPPER != 0 {
                Some(self.o200k_upper_word(bytes, after))
            } else {
                None
            };
            if let Some(end) = word_end {
                return self.o200k_contraction_suffix::<CONTRACTIONS>(bytes, end);
            }
            //  ?[^\s\p{L}\p{N}]+[\r\n/]*
            let next = self.class_at(bytes, after);
            if let Some(end) = self.space_and_other_run::<LETTER>(bytes, byte, class, after, next) {
                return end + count_leading(&bytes[end..], |byte| matches!(byte, b'\r' | b'\n' | b'/'));
            }
        }
        let run = self.space_run(bytes, start);
        if let Some(end) = run.after_last_newline {
            end // \s*[\r\n]+: up to the run's last line break
        } else if run.end == bytes.len() {
            run.end // \s+(?!\S) at the end of the text
        } else if run.last_start > start {
            run.last_start // \s+(?!\S) gives back the last white space before a non-space
        } else {
            run.end // \s+ of one character
        }
    }

    /// The end of o200k's `[UPPER]*[LOWER]+` at `start`, if it matches. `[UPPER]*` backtracks from
    /// its longest run: it ends before the first character after the run if that is LOWER (a
    /// lower-case letter), else before the run's last character that is also LOWER (Lm, Lo or a
    /// mark), which `[LOWER]+` then matches alone (the characters after it in the run are not LOWER).
    ///
    /// ASCII runs are taken eight bytes at a time: among ASCII characters UPPER is exactly `A-Z`
    /// and LOWER exactly `a-z` (a test checks the class table), so the general loop only takes over
    /// at the first character that is not ASCII.
    #[inline(always)]
    fn o200k_lower_word(&self, bytes: &[u8], start: usize) -> Option<usize> {
        match bytes.get(start) {
            Some(b'a'..=b'z') => Some(self.o200k_lower_run(bytes, start + 1)),
            Some(b'A'..=b'Z') => {
                let upper_end = ascii_run(bytes, start + 1, b'A', b'Z');
                match bytes.get(upper_end) {
                    Some(b'a'..=b'z') => Some(self.o200k_lower_run(bytes, upper_end + 1)),
                    // `A-Z` are not LOWER: the run so far holds no LOWER character.
                    Some(&byte) if byte >= 0x80 => self.o200k_lower_word_from(bytes, upper_end),
                    _ => None,
                }
            }
            _ => self.o200k_lower_word_from(bytes, start),
        }
    }

    /// The end of the LOWER run from `at` (after a LOWER character).
    #[inline(always)]
    fn o200k_lower_run(&self, bytes: &[u8], at: usize) -> usize {
        self.run_after_ascii(bytes, ascii_run(bytes, at, b'a', b'z'), LOWER)
    }

    /// [`ClassTable::o200k_lower_word`] from `at` inside the `[UPPER]*` run, no LOWER character
    /// before it.
    fn o200k_lower_word_from(&self, bytes: &[u8], at: usize) -> Option<usize> {
        let mut at = at;
        let mut after_last_lower = None;
        loop {
            let (class, len) = self.class_at(bytes, at);
            if class & UPPER == 0 {
                if class & LOWER != 0 {
                    return Some(self.run(bytes, at + len, |class| class & LOWER != 0));
                }
                return after_last_lower;
            }
            if class & LOWER != 0 {
                after_last_lower = Some(at + len);
            }
            at += len;
        }
    }

    /// The end of o200k's `[UPPER]+[LOWER]*` at `start`, whose character is UPPER.
    fn o200k_upper_word(&self, bytes: &[u8], start: usize) -> usize {
        let upper_end = self.run(bytes, start, |class| class & UPPER != 0);
        self.run(bytes, upper_end, |class| class & LOWER != 0)
    }

    /// `end` extended by o200k's optional `(?i:'s|'t|'re|'ve|'m|'ll|'d)` there (when CONTRACTIONS).
    #[inline(always)]
    fn o200k_contraction_suffix<const CONTRACTIONS: bool>(&self, bytes: &[u8], end: usize) -> usize {
        if CONTRACTIONS && bytes.get(end) == Some(&b'\'') {
            if let Some(contraction_end) = self.contraction(bytes, end + 1) {
                return contraction_end;
            }
        }
        end
    }
}

struct SpaceRun {
    /// Just after the run.
    end: usize,
    /// Where the run's last character starts.
    last_start: usize,
    /// Just after the run's last `\r` or `\n`, if it has one.
    after_last_newline: Option<usize>,
}

/// The end of the run of ASCII bytes in `first..=last` from `at`: the first byte after `at` outside
/// the range (or the end), eight bytes at a time while eight are left.
#[inline(always)]
fn ascii_run(bytes: &[u8], at: usize, first: u8, last: u8) -> usize {
    ascii_run_folding(bytes, at, first, last, 0)
}

/// The end of the run of ASCII letters (`A-Za-z`) from `at`.
#[inline(always)]
fn ascii_letter_run(bytes: &[u8], at: usize) -> usize {
    // Setting bit 5 turns `A-Z` into `a-z` and no other byte into one of them.
    ascii_run_folding(bytes, at, b'a', b'z', 0x20)
}

/// The end of the run of ASCII bytes that are in `first..=last` once `fold` is or-ed into them.
#[inline(always)]
fn ascii_run_folding(bytes: &[u8], at: usize, first: u8, last: u8, fold: u8) -> usize {
    let mut end = at;
    while let Some(chunk) = bytes.get(end..end + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let outside = !bytes_in(word, first, last, fold) & 0x8080_8080_8080_8080;
        if outside != 0 {
            return end + (outside.trailing_zeros() / 8) as usize;
        }
        end += 8;
    }
    end + count_leading(&bytes[end..], |byte| byte < 0x80 && ((byte | fold) >= first && (byte | fold) <= last))
}

/// How many leading bytes of `bytes` satisfy `keep`.
#[inline(always)]
fn count_leading(bytes: &[u8], keep: impl Fn(u8) -> bool) -> usize {
    bytes.iter().take_while(|&&byte| keep(byte)).count()
}

/// Decodes the multi-byte UTF-8 character starting at `at`: its code point and length. The lead
/// byte at `at` must be followed by all its continuation bytes (so in valid UTF-8, always).
#[inline(always)]
pub(crate) fn decode(bytes: &[u8], at: usize) -> (u32, usize) {
    let lead = u32::from(bytes[at]);
    let continuation = |offset: usize| u32::from(bytes[at + offset]) & 0x3F;
    if lead < 0xE0 {
        (((lead & 0x1F) << 6) | continuation(1), 2)
    } else if lead < 0xF0 {
        (((lead & 0x0F) << 12) | (continuation(1) << 6) | continuation(2), 3)
    } else {
        (((lead & 0x07) << 18) | (continuation(1) << 12) | (continuation(2) << 6) | continuation(3), 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(scanner: Scanner, text: &str) -> Vec<&str> {
        let mut pieces = Vec::new();
        scanner.for_each_piece(text, |start, end| pieces.push(&text[start..end]));
        pieces
    }

    /// Characters of every class and special case the scanners tell apart: letters that are or
    /// fold to contraction letters, an upper-case letter, Lt, Lm and Lo letters (o200k's upper and
    /// lower classes overlap on them), a mark, numbers, white space with and without line breaks,
    /// the apostrophe, the slash, other punctuation and an emoji.
    const EVERY_CLASS: &[char] = &[
        'a', 's', 'l', 'e', 'v', 'L', 'S', 'A', '\u{17F}', '\u{1C5}', '\u{2B0}', '中', '\u{301}', '1', '²',
        '٣', ' ', '\t', '\n', '\r', '\u{A0}', '\u{3000}', '\'', '/', '!', '😀',
    ];

    /// The first continuation-sensitive piece: `None` when every piece of `text` but the last
    /// `unsettled` is a piece of `text + more`.
    fn unsettled_by(scanner: Scanner, text: &str, more: &str, unsettled: usize) -> Option<String> {
        let mut alone = Vec::new();
        scanner.for_each_piece(text, |start, end| alone.push((start, end)));
        let mut joined = Vec::new();
        scanner.for_each_piece(&format!("{text}{more}"), |start, end| joined.push((start, end)));
        let settled = alone.len().saturating_sub(unsettled);
        (alone[..settled] != joined[..settled.min(joined.len())])
            .then(|| format!("{scanner:?}: {text:?} + {more:?}: {alone:?} vs {joined:?}"))
    }

    fn strings(length: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        for _ in 0..length {
            all = all.iter().flat_map(|prefix| EVERY_CLASS.iter().map(move |&c| format!("{prefix}{c}"))).collect();
        }
        all
    }

    #[test]
    fn all_pieces_but_the_last_two_are_settled_on_every_short_text() {
        let continuations: Vec<String> = (1..=2).flat_map(strings).collect();
        for scanner in Scanner::ALL {
            for text in (1..=3).flat_map(strings) {
                for more in &continuations {
                    if let Some(problem) = unsettled_by(scanner, &text, more, Scanner::UNSETTLED_PIECES) {
                        panic!("{problem}");
                    }
                }
            }
        }
    }

    #[test]
    fn all_pieces_but_the_last_two_are_settled_on_random_texts() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        let mut random_text = |length: usize| -> String { (0..length).map(|_| EVERY_CLASS[next(EVERY_CLASS.len())]).collect() };
        let texts: Vec<String> = (0..3000).map(|n| random_text(4 + n % 12)).collect();
        let continuations: Vec<String> = (0..100).map(|n| random_text(1 + n % 6)).collect();
        for scanner in Scanner::ALL {
            for text in &texts {
                for more in &continuations {
                    if let Some(problem) = unsettled_by(scanner, text, more, Scanner::UNSETTLED_PIECES) {
                        panic!("{problem}");
                    }
                }
            }
        }
    }

    /// Checks that where `always_ends_piece` holds in `text`, a piece of `scanner` ends, the
    /// pieces from there are the split of that rest alone, and splitting up to there stops there;
    /// returns how many such positions `text` has.
    fn check_piece_ends(scanner: Scanner, text: &str) -> usize {
        let whole = pieces(scanner, text);
        let mut ends = vec![0];
        for piece in &whole {
            ends.push(ends.last().unwrap() + piece.len());
        }
        let mut found = 0;
        for at in (1..text.len()).filter(|&at| always_ends_piece(text, at)) {
            let index = ends.iter().position(|&end| end == at);
            let Some(index) = index else {
                panic!("{scanner:?}: no piece ends at {at} of {text:?}: {whole:?}");
            };
            assert_eq!(pieces(scanner, &text[at..]), whole[index..], "{scanner:?}: {text:?} from {at}");
            let mut stopped = Vec::new();
            let end = scanner.for_each_piece_until(text, at, |start, end| stopped.push(&text[start..end]));
            assert_eq!((end, &stopped[..]), (at, &whole[..index]), "{scanner:?}: {text:?} up to {at}");
            assert_eq!(next_piece_end(text, at, text.len()), Some(at));
            found += 1;
        }
        found
    }

    #[test]
    fn pieces_end_where_the_cut_rule_says_on_every_short_text() {
        let mut found = 0;
        for scanner in Scanner::ALL {
            for &a in EVERY_CLASS {
                for &b in EVERY_CLASS {
                    for &c in EVERY_CLASS {
                        found += check_piece_ends(scanner, &format!("{a}{b}{c}"));
                    }
                }
            }
        }
        assert!(found > 8 * 26 * 26 * 5, "only {found} cuts");
    }

    #[test]
    fn pieces_end_where_the_cut_rule_says_on_random_texts() {
        let mut next = crate::test_rng::numbers(0x9E6C_63D0_676A_9A99u64);
        let mut found = 0;
        for n in 0..1000 {
            let text: String = (0..4 + n % 40).map(|_| EVERY_CLASS[next() as usize % EVERY_CLASS.len()]).collect();
            for scanner in Scanner::ALL {
                found += check_piece_ends(scanner, &text);
            }
            // The scanners are the regexes (tests/scan_identity.rs); the three named ones again here.
            for scanner in [Scanner::Gpt2, Scanner::Cl100k, Scanner::O200k].into_iter().filter(|_| n % 4 == 0) {
                let regex = crate::pretokenize::Splitter::regex_only(scanner.pattern()).unwrap();
                assert_eq!(regex.pieces(&text).unwrap(), pieces(scanner, &text), "{text:?}");
            }
        }
        assert!(found > 1000 * 8 * 3, "only {found} cuts");
        // The rule's pairs, and pairs it leaves out because some pattern joins them.
        assert!(always_ends_piece("a b", 1) && always_ends_piece("1\tb", 1) && always_ends_piece("x\ny", 2));
        assert!(always_ends_piece("\r\n中", 2) && always_ends_piece("!\u{3000}", 1));
        assert!(!always_ends_piece(" a", 1) && !always_ends_piece(".\n", 1) && !always_ends_piece("\n/", 1));
        assert!(!always_ends_piece("\r\n", 1) && !always_ends_piece("ab", 1) && !always_ends_piece("é", 1));
    }

    #[test]
    fn block_masks_by_vector_and_by_word_agree_on_every_byte() {
        // Every byte value at every position of a block, among neighbours that vary.
        let mut next = crate::test_rng::numbers(7);
        for round in 0..256 * BLOCK {
            let mut block: Vec<u8> = (0..BLOCK).map(|_| next() as u8).collect();
            block[round % BLOCK] = (round / BLOCK) as u8;
            let (vector, words) = (BlockMasks::of::<true>(&block), BlockMasks::of_words::<true>(&block));
            let fields = |masks: &BlockMasks| {
                [
                    masks.letter,
                    masks.digit,
                    masks.space,
                    masks.other_space,
                    masks.apostrophe,
                    masks.high,
                    masks.upper,
                    masks.newline,
                    masks.slash,
                ]
            };
            assert_eq!(fields(&vector), fields(&words), "{block:?}");
            let byte = block[round % BLOCK];
            let bit = |mask: u64| mask >> (round % BLOCK) & 1 == 1;
            assert_eq!(bit(vector.letter), byte.is_ascii_alphabetic(), "{byte:#x}");
            assert_eq!(bit(vector.upper), byte.is_ascii_uppercase(), "{byte:#x}");
            assert_eq!(bit(vector.digit), byte.is_ascii_digit(), "{byte:#x}");
            assert_eq!(bit(vector.space | vector.other_space), byte.is_ascii_whitespace() || byte == 0x0b, "{byte:#x}");
            assert_eq!(bit(vector.newline), byte == b'\n' || byte == b'\r', "{byte:#x}");
            assert_eq!(bit(vector.high), byte >= 0x80, "{byte:#x}");
        }
    }

    /// Pieces settled by blocks (rather than by the scalar scanners), in this process.
    pub(super) static BLOCK_PIECES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// Every scanner, and its scalar scanner alone.
    fn with_scalar() -> Vec<(Scanner, fn(&ClassTable, &[u8], usize) -> usize)> {
        vec![
            (Scanner::Gpt2, ClassTable::gpt2_piece),
            (Scanner::Cl100k, ClassTable::word_piece::<true, LETTER, 3, true, true>),
            (Scanner::O200k, ClassTable::o200k_piece::<true, 3>),
            (Scanner::Llama3, ClassTable::word_piece::<true, LETTER, 3, true, false>),
            (Scanner::Qwen2, ClassTable::word_piece::<true, LETTER, 1, true, false>),
            (Scanner::Qwen35, ClassTable::word_piece::<true, { LETTER | MARK }, 1, true, false>),
            (Scanner::SeedCoder, ClassTable::word_piece::<true, LETTER, 1, false, false>),
            (Scanner::Tekken, ClassTable::o200k_piece::<false, 1>),
        ]
    }

    #[test]
    fn blocks_split_as_the_scalar_scanners_and_the_regexes() {
        // Mostly ASCII, as the blocks need, with every case of their rules: contractions (and
        // near misses, in both cases) at block edges, runs of white space of each kind, line breaks
        // and slashes after punctuation, spaces before each class, case changes inside words, runs
        // of digits, runs longer than a block, and characters that are not ASCII.
        const PARTS: &[&str] = &[
            "a", "s", "l", "e", "v", "r", "d", "m", "t", "X", "Q", "L", "E", "S", " ", "  ", "\t", "\n", "\r", "\r\n",
            "\x0b", "\x0c", "'", "'s", "'ll", "'l", "'ve", "'re", "'r", "'d", "'m", "'t", "'S", "'LL", "'Ve", "'rE", "1",
            "42", "12345", "!", ".", "-", "/", "(", "\x1f", "\x7f", "word", " word", "Word", "WORD", "wORD", "HeLLo",
            " 12", " ...", "\t\tx", " \n ", ".\n", ".\n/", "/\n", "://", " (", "x'", "é", "中", "\u{A0}", "\u{85}",
            "😀", "\u{17F}", "\u{2B0}", "\u{300}", "\u{2028}", "Ωμέγα", " Привет", "ПРИВЕТ", "ǅ", "ß", "«", "»",
            "«x»", " «", "°", "§", "×", "²", "٣", "\u{301}", "א", "ʼ", "'ñ", "Ñ'S", "—", "’", "、", "。", "…", "€", " Việt", "ỆT", "日本語",
            "\u{3000}", "\u{212A}", "Ⅻ", "\u{20DD}",
            "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz",
            "                                                                      ",
            "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
        ];
        let classes = ClassTable::get();
        let mut next = crate::test_rng::numbers(0x6A09_E667_F3BC_C908u64);
        let ascii: Vec<&str> = PARTS.iter().copied().filter(|part| part.is_ascii()).collect();
        for (scanner, piece_end) in with_scalar() {
            let regex = crate::pretokenize::Splitter::regex_only(scanner.pattern()).unwrap();
            let before = BLOCK_PIECES.load(std::sync::atomic::Ordering::Relaxed);
            for n in 0..2000 {
                // Every other text all ASCII: most of its blocks are settled by the masks.
                let parts = if n % 2 == 0 { &ascii[..] } else { PARTS };
                let text: String = (0..10 + n % 120).map(|_| parts[next() as usize % parts.len()]).collect();
                let bytes = text.as_bytes();
                let scalar = |stop: usize| {
                    let mut pieces = Vec::new();
                    let end = split(classes, bytes, stop, piece_end, |start, end| pieces.push((start, end)));
                    (end, pieces)
                };
                let blocks = |stop: usize| {
                    let mut pieces = Vec::new();
                    let end = scanner.for_each_piece_until(&text, stop, |start, end| pieces.push((start, end)));
                    (end, pieces)
                };
                assert_eq!(blocks(bytes.len()), scalar(bytes.len()), "{scanner:?} {text:?}");
                for stop in [1, 63, 64, 65, 100, bytes.len() / 2, bytes.len().saturating_sub(1)] {
                    let stop = stop.min(bytes.len()); // as `for_each_piece_until` bounds it
                    assert_eq!(blocks(stop), scalar(stop), "{scanner:?} {text:?} up to {stop}");
                }
                if n % 8 == 0 {
                    let expected: Vec<&str> = regex.pieces(&text).unwrap();
                    assert_eq!(pieces(scanner, &text), expected, "{scanner:?} {text:?}");
                }
            }
            let settled = BLOCK_PIECES.load(std::sync::atomic::Ordering::Relaxed) - before;
            assert!(settled > 40_000, "{scanner:?}: only {settled} pieces were settled by blocks");
        }
    }

    #[test]
    fn one_unsettled_piece_would_not_be_enough() {
        // GPT-2: "x'l" is x, ', l; with another l the apostrophe starts the contraction 'll.
        assert!(unsettled_by(Scanner::Gpt2, "x'l", "l", 1).is_some());
        // o200k: "Aʰ" ends a word inside the upper-class run "AʰB", which a lower-case c joins.
        assert!(unsettled_by(Scanner::O200k, "A\u{2B0}B", "c", 1).is_some());
        // o200k: a white-space run's last line break ends a piece only until another one comes.
        assert!(unsettled_by(Scanner::O200k, "\n ", "\n", 1).is_some());
    }

    #[test]
    fn named_patterns_are_recognised_exactly() {
        assert_eq!(Scanner::for_pattern(GPT2), Some(Scanner::Gpt2));
        assert_eq!(Scanner::for_pattern(CL100K), Some(Scanner::Cl100k));
        assert_eq!(Scanner::for_pattern(O200K), Some(Scanner::O200k));
        assert_eq!(Scanner::for_pattern(&format!("{GPT2}|x")), None);
    }

    #[test]
    fn ascii_letter_classes_are_the_ascii_letters() {
        let classes = ClassTable::get();
        for byte in 0u8..0x80 {
            let class = classes.ascii[usize::from(byte)];
            assert_eq!(class & UPPER != 0, byte.is_ascii_uppercase(), "{byte:#x}");
            assert_eq!(class & LOWER != 0, byte.is_ascii_lowercase(), "{byte:#x}");
            assert_eq!(class & LETTER != 0, byte.is_ascii_alphabetic(), "{byte:#x}");
        }
    }

    #[test]
    fn ascii_runs_match_a_byte_loop() {
        let mut next = crate::test_rng::numbers(0x853C_49E6_748F_EA9Bu64);
        // Bytes near the bounds of each range, non-ASCII bytes and every length and start.
        let alphabet = [b'a', b'b', b'y', b'z', b'`', b'{', b'A', b'Z', b'@', b'[', b' ', 0x80, 0xC3, 0xFF, 0x7F, 0];
        for _ in 0..20_000 {
            let len = (next() % 40) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
            let at = if len == 0 { 0 } else { (next() % (len as u64 + 1)) as usize };
            for (first, last) in [(b'a', b'z'), (b'A', b'Z'), (b'0', b'9'), (0, 0x7F), (0x7F, 0x7F)] {
                let expected = at + bytes[at..].iter().take_while(|&&byte| (first..=last).contains(&byte)).count();
                assert_eq!(ascii_run(&bytes, at, first, last), expected, "{bytes:?} from {at}, {first}..={last}");
            }
            let letters = at + bytes[at..].iter().take_while(|byte| byte.is_ascii_alphabetic()).count();
            assert_eq!(ascii_letter_run(&bytes, at), letters, "{bytes:?} from {at}, letters");
        }
    }

    #[test]
    fn decode_agrees_with_std() {
        for text in ["é", "€", "𝄞", "\u{7FF}", "\u{800}", "\u{FFFF}", "\u{10000}", "\u{10FFFF}"] {
            let expected = text.chars().next().unwrap();
            assert_eq!(decode(text.as_bytes(), 0), (expected as u32, text.len()), "{text:?}");
        }
    }

    #[test]
    fn class_table_matches_regex_syntax_ranges() {
        let table = ClassTable::get();
        for (regex, bit) in [(r"\p{L}", LETTER), (r"\p{N}", NUMBER), (r"\s", SPACE)] {
            let ranges = class_ranges(regex);
            for code_point in (0..CODE_POINTS as u32).step_by(7) {
                let inside = ranges.iter().any(|&(first, last)| (first..=last).contains(&code_point));
                assert_eq!(
                    table.class_of_code_point(code_point) & bit != 0,
                    inside,
                    "{regex} {code_point:#x}"
                );
            }
        }
    }

    #[test]
    fn contraction_folds_include_long_s() {
        let table = ClassTable::get();
        assert!(table.folds.contains(&('\u{17F}', b's')));
        assert!(table.folds.contains(&('S', b's')));
        assert_eq!(pieces(Scanner::Cl100k, "it'\u{17F}"), ["it", "'\u{17F}"]);
        assert_eq!(pieces(Scanner::Gpt2, "it'\u{17F}"), ["it", "'", "\u{17F}"]);
    }

    #[test]
    fn gpt2_gives_back_the_last_space_before_a_word() {
        assert_eq!(
            pieces(Scanner::Gpt2, "Hello world's  end  "),
            ["Hello", " world", "'s", " ", " end", "  "]
        );
        assert_eq!(pieces(Scanner::Gpt2, "a\n\nb"), ["a", "\n", "\n", "b"]);
    }

    #[test]
    fn cl100k_cuts_numbers_in_threes_and_keeps_line_breaks_together() {
        assert_eq!(pieces(Scanner::Cl100k, "x 1234567 \n\n y"), ["x", " ", "123", "456", "7", " \n\n", " y"]);
        assert_eq!(pieces(Scanner::Cl100k, "\tword!!\n\nI'M"), ["\tword", "!!\n\n", "I", "'M"]);
    }

    #[test]
    fn o200k_splits_camel_case_and_attaches_contractions() {
        assert_eq!(pieces(Scanner::O200k, "HTMLParser don't WE'LL"), ["HTMLParser", " don't", " WE'LL"]);
        assert_eq!(pieces(Scanner::O200k, "helloWorld a/b\n/"), ["hello", "World", " a", "/b", "\n", "/"]);
    }
}
