//! Streams: encoding text that arrives in parts (the lines of a file, a socket) in bounded memory,
//! to exactly the ids of encoding all of it at once.
//!
//! A stream encodes what no later text can change, and holds back the rest:
//! - Allowed special tokens are cut out leftmost-longest. One that starts fewer than `longest`
//!   bytes (the longest allowed token) before the end of the text so far could still grow, or a
//!   longer one start there, so matching stops before that point; every match that starts earlier
//!   is final, and so is the ordinary text before it.
//! - Ordinary text is encoded piece by piece, so the ids of a settled piece are final: all pieces
//!   but the last few are settled when the split pattern bounds how far it looks ahead
//!   ([`Model::encode_settled`]: the named patterns; custom regexes give no bound and cannot stream).
//! - Disallowed special tokens are searched in all text; each search starts `longest - 1` bytes
//!   before the end of the last one, so a token spanning two parts is found.
//!
//! A text with no settled boundary (a long run of letters) is held whole, so the stream retries only
//! when its unencoded text has doubled (linear work), and gives up with [`StreamError::TooLong`] as
//! soon as it passes a limit rather than hold unbounded text.

use std::fmt;

use crate::model::Model;
use crate::pretokenize::SplitError;
use crate::special::SpecialMatcher;
use crate::Rank;

/// Why a stream cannot go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// The model's split pattern gives no bound on what more text can change.
    Unsupported,
    /// The text contains this disallowed special token.
    Disallowed(String),
    /// `held` bytes arrived with no settled piece boundary, more than the stream's `limit`.
    TooLong { held: usize, limit: usize },
    Split(SplitError),
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Unsupported => f.write_str(
                "this model cannot encode a stream exactly: only the named split patterns (gpt2, cl100k, o200k) \
                 bound how far ahead a piece boundary depends on the text",
            ),
            StreamError::Disallowed(token) => write!(f, "the text contains the disallowed special token {token:?}"),
            StreamError::TooLong { held, limit } => write!(
                f,
                "{held} bytes of text arrived without a piece boundary that later text cannot move, more than \
                 the limit of {limit} bytes (a piece this long, such as a run of letters without spaces, is only \
                 encoded whole)"
            ),
            StreamError::Split(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for StreamError {}

/// The state of one stream: text received and not yet encoded.
#[derive(Clone, Debug)]
pub struct EncodeStream {
    /// Text received: `done` bytes already encoded (kept as context for disallowed tokens), then
    /// the unencoded rest.
    pending: String,
    done: usize,
    /// Bytes of `pending` searched for disallowed special tokens.
    checked: usize,
    /// Encode when this many unencoded bytes wait.
    due: usize,
    /// Encode at least this many new bytes at a time.
    block: usize,
    /// The most unencoded text held after encoding what is settled.
    limit: usize,
}

impl EncodeStream {
    /// How many bytes a stream gathers before it encodes, by default: big enough that the work
    /// per call does not matter, small enough to keep memory low and ids flowing.
    pub const BLOCK: usize = 1 << 16;

    /// A stream for `model`, holding at most `limit` bytes without a settled boundary, encoding
    /// every `block` bytes (at least 1).
    pub fn new(model: &Model, limit: usize, block: usize) -> Result<Self, StreamError> {
        model.unsettled_pieces().ok_or(StreamError::Unsupported)?;
        let block = block.max(1);
        Ok(Self { pending: String::new(), done: 0, checked: 0, due: block, block, limit })
    }

    /// Whether pushing `more` bytes makes the stream encode (the work worth releasing a lock for).
    pub fn is_due(&self, more: usize) -> bool {
        self.held() + more >= self.due
    }

    /// Bytes received and not encoded yet.
    pub fn held(&self) -> usize {
        self.pending.len() - self.done
    }

    /// Takes the next part of the text; appends to `out` the ids of what is settled, if it is
    /// time to encode (see [`EncodeStream::is_due`]).
    pub fn push(
        &mut self,
        model: &Model,
        allowed: &SpecialMatcher,
        disallowed: &SpecialMatcher,
        text: &str,
        out: &mut Vec<Rank>,
    ) -> Result<(), StreamError> {
        self.pending.push_str(text);
        if self.held() >= self.due {
            self.encode_settled(model, allowed, disallowed, out)?;
        }
        Ok(())
    }

    /// Ends the text: appends the ids of everything not encoded yet and empties the stream.
    pub fn finish(
        &mut self,
        model: &Model,
        allowed: &SpecialMatcher,
        disallowed: &SpecialMatcher,
        out: &mut Vec<Rank>,
    ) -> Result<(), StreamError> {
        self.check_disallowed(disallowed)?;
        model.encode(&self.pending[self.done..], allowed, out).map_err(StreamError::Split)?;
        self.pending = String::new();
        (self.done, self.checked, self.due) = (0, 0, self.block);
        Ok(())
    }

    fn encode_settled(
        &mut self,
        model: &Model,
        allowed: &SpecialMatcher,
        disallowed: &SpecialMatcher,
        out: &mut Vec<Rank>,
    ) -> Result<(), StreamError> {
        self.check_disallowed(disallowed)?;
        let end = self.pending.len();
        // An allowed token starting at `horizon` or later may not have arrived whole.
        let horizon =
            self.pending.floor_char_boundary(end.saturating_sub(allowed.longest().saturating_sub(1))).max(self.done);
        let mut segment = self.done;
        for special in allowed.find_all(&self.pending[self.done..]) {
            let start = self.done + special.start;
            if start >= horizon {
                break;
            }
            model.encode_ordinary(&self.pending[segment..start], out).map_err(StreamError::Split)?;
            out.push(special.id);
            segment = self.done + special.end;
        }
        // The ordinary text from `segment` goes on past `horizon` or ends at a special token there.
        self.done = if horizon > segment {
            segment + model.encode_settled(&self.pending[segment..horizon], out).ok_or(StreamError::Unsupported)?
        } else {
            segment
        };
        let held = self.held();
        if held > self.limit {
            return Err(StreamError::TooLong { held, limit: self.limit });
        }
        let keep = disallowed.longest().saturating_sub(1);
        let drop = self.pending.floor_char_boundary(self.done.saturating_sub(keep));
        self.pending.drain(..drop);
        self.done -= drop;
        self.checked -= drop;
        if self.pending.capacity() > 4 * (self.pending.len() + self.block) {
            self.pending.shrink_to(2 * (self.pending.len() + self.block));
        }
        // Retry only once the unencoded text has doubled (linear work when nothing settles), and
        // as soon as it passes the limit.
        self.due = self.block.max((2 * held).min(self.limit.saturating_add(1)));
        Ok(())
    }

    /// Searches what arrived since the last search (and the `longest - 1` bytes before it).
    fn check_disallowed(&mut self, disallowed: &SpecialMatcher) -> Result<(), StreamError> {
        if !disallowed.is_empty() {
            let from = self.pending.floor_char_boundary(self.checked.saturating_sub(disallowed.longest() - 1));
            if let Some((token, _)) = disallowed.find(&self.pending[from..]) {
                return Err(StreamError::Disallowed(token.to_owned()));
            }
        }
        self.checked = self.pending.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::scan::{CL100K, GPT2, O200K};

    fn model(pattern: &str) -> Model {
        let mut ranks: Vec<(Vec<u8>, Rank)> = (0..=255u8).map(|byte| (vec![byte], Rank::from(byte))).collect();
        for (offset, token) in [&b"he"[..], b"ll", b"hell", b"hello", b" w", b"or", b" wor", b"ld", b" world", b"'ll"]
            .iter()
            .enumerate()
        {
            ranks.push((token.to_vec(), 256 + offset as Rank));
        }
        let specials = vec![("<|end|>".to_owned(), 300), ("<|e".to_owned(), 301), ("<|x|>".to_owned(), 302)];
        Model::from_ranks(ranks, pattern, specials).unwrap()
    }

    fn whole(model: &Model, text: &str, allowed: &SpecialMatcher) -> Vec<Rank> {
        let mut ids = Vec::new();
        model.encode(text, allowed, &mut ids).unwrap();
        ids
    }

    /// The ids of `parts` streamed, encoding on every push.
    fn streamed(
        model: &Model,
        parts: &[&str],
        allowed: &SpecialMatcher,
        disallowed: &SpecialMatcher,
    ) -> Result<Vec<Rank>, StreamError> {
        let mut stream = EncodeStream::new(model, usize::MAX, 1)?;
        let mut ids = Vec::new();
        for part in parts {
            stream.push(model, allowed, disallowed, part, &mut ids)?;
        }
        stream.finish(model, allowed, disallowed, &mut ids)?;
        Ok(ids)
    }

    #[test]
    fn every_split_of_a_text_streams_to_the_ids_of_the_whole() {
        let text = "hello world's  <|end|>he'll  \n\n <|e<|end|> wor<|x|>ld\t1234 héllo 😀!!\r\n";
        let cuts: Vec<usize> = (0..=text.len()).filter(|&at| text.is_char_boundary(at)).collect();
        for pattern in [GPT2, CL100K, O200K] {
            let model = model(pattern);
            for names in [&[][..], &["<|end|>"][..], &["<|end|>", "<|e", "<|x|>"][..]] {
                let allowed = model.special_matcher(names.iter().copied());
                let expected = whole(&model, text, &allowed);
                for &first in &cuts {
                    for &second in cuts.iter().filter(|&&second| second >= first) {
                        let parts = [&text[..first], &text[first..second], &text[second..]];
                        let ids = streamed(&model, &parts, &allowed, &SpecialMatcher::new([])).unwrap();
                        assert_eq!(ids, expected, "{names:?} {parts:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_disallowed_token_is_found_across_parts() {
        let model = model(GPT2);
        let disallowed = SpecialMatcher::new([("<|end|>", 0)]);
        for cut in 1..7 {
            let text = "abc <|end|> def";
            let parts = [&text[..4 + cut], &text[4 + cut..]];
            let found = streamed(&model, &parts, &SpecialMatcher::new([]), &disallowed);
            assert_eq!(found, Err(StreamError::Disallowed("<|end|>".into())), "{parts:?}");
        }
    }

    #[test]
    fn a_long_piece_is_held_up_to_the_limit() {
        let model = model(GPT2);
        let none = SpecialMatcher::new([]);
        let mut stream = EncodeStream::new(&model, 1000, 10).unwrap();
        let mut ids = Vec::new();
        let mut result = Ok(());
        let mut pushes = 0;
        while result.is_ok() && pushes < 1000 {
            result = stream.push(&model, &none, &none, "aaaaaaaaaa", &mut ids);
            pushes += 1;
        }
        assert!(matches!(result, Err(StreamError::TooLong { limit: 1000, .. })), "{result:?}");
        assert!(ids.is_empty() && stream.held() <= 1000 + 10, "{}", stream.held());
    }

    #[test]
    fn retries_wait_for_the_held_text_to_double() {
        let model = model(GPT2);
        let none = SpecialMatcher::new([]);
        let mut stream = EncodeStream::new(&model, usize::MAX, 10).unwrap();
        let mut ids = Vec::new();
        stream.push(&model, &none, &none, &"a".repeat(100), &mut ids).unwrap();
        assert!(!stream.is_due(99) && stream.is_due(100));
    }

    #[test]
    fn custom_patterns_cannot_stream() {
        let custom = Model::from_ranks((0..=255u8).map(|b| (vec![b], Rank::from(b))).collect(), r"a+b|a|\s+|[^a\s]+", vec![])
            .unwrap();
        assert_eq!(EncodeStream::new(&custom, 10, 10).unwrap_err(), StreamError::Unsupported);
    }
}
