//! A byte-level `tokenizer.json`'s `model.vocab` and `model.merges`, read here: they hold hundreds
//! of thousands of entries, which a JSON parser building Python objects takes most of a load to make
//! and free. The rest of the document (normalizer, pre-tokenizer, added tokens, ...) is small; it is
//! handed back as JSON text, entries in file order, for the caller to read.
//!
//! Only regular files are read: [`read`] and [`SpelledVocab`] give `None` for anything else (a key
//! twice, an id that is not an integer in range, a merge that is not two tokens of the vocabulary,
//! ...), and the caller's own reading then says what is wrong.

use std::fmt;

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::byte_level::unspell;
use crate::model::MAX_ID;
use crate::Rank;

/// One line of `model.merges`: `"left right"` (split at the first space) or `["left", "right"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpelledMerge {
    pub left: String,
    pub right: String,
    /// Written as a pair (`["left", "right"]`) rather than as one string.
    pub as_pair: bool,
}

/// A `tokenizer.json` split in two: its model's vocabulary and merges, and everything else.
#[derive(Debug)]
pub struct TokenizerJson {
    /// The document without `model.vocab` and `model.merges`, as JSON text: the other entries of the
    /// top level and of `model` in file order, each as the file writes it.
    pub rest: String,
    /// `model.vocab`'s entries (token spelled in GPT-2's byte-to-unicode alphabet, id) in file order.
    pub vocab: Vec<(String, Rank)>,
    pub merges: Vec<SpelledMerge>,
}

/// `text` read as a `tokenizer.json` (see [`TokenizerJson`]); `None` when it is not JSON, not an
/// object with one `model` object holding one `vocab` and one `merges`, or when those are not
/// regular: a vocabulary entry whose id is not an integer from 0 to [`MAX_ID`], a merge that is
/// neither a string holding a space nor an array of two strings.
pub fn read(text: &str) -> Option<TokenizerJson> {
    let Entries(top) = serde_json::from_str(text).ok()?;
    let [model] = entries_named(&top, "model")[..] else { return None };
    let Entries(model) = serde_json::from_str(model.get()).ok()?;
    let ([vocab], [merges]) = (&entries_named(&model, "vocab")[..], &entries_named(&model, "merges")[..]) else {
        return None;
    };
    let Vocab(vocab) = serde_json::from_str(vocab.get()).ok()?;
    let merges: Vec<SpelledMerge> = serde_json::from_str(merges.get()).ok()?;
    let mut rest = String::with_capacity(4096);
    rest.push('{');
    for (index, (key, value)) in top.iter().enumerate() {
        if index > 0 {
            rest.push(',');
        }
        rest.push_str(&serde_json::to_string(key).ok()?);
        rest.push(':');
        if key != "model" {
            rest.push_str(value.get());
            continue;
        }
        rest.push('{');
        let kept = model.iter().filter(|(key, _)| key != "vocab" && key != "merges");
        for (index, (key, value)) in kept.enumerate() {
            if index > 0 {
                rest.push(',');
            }
            rest.push_str(&serde_json::to_string(key).ok()?);
            rest.push(':');
            rest.push_str(value.get());
        }
        rest.push('}');
    }
    rest.push('}');
    Some(TokenizerJson { rest, vocab, merges })
}

fn entries_named<'a>(entries: &[(String, &'a RawValue)], name: &str) -> Vec<&'a RawValue> {
    entries.iter().filter(|(key, _)| key == name).map(|(_, value)| *value).collect()
}

/// A JSON object's entries in file order (repeated keys kept), values as the file writes them.
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Entries<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for EntriesVisitor<'a> {
            type Value = Entries<'a>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    entries.push((key, map.next_value::<&'a RawValue>()?));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor(std::marker::PhantomData))
    }
}

/// `model.vocab`: token -> id, ids integers from 0 to [`MAX_ID`].
struct Vocab(Vec<(String, Rank)>);

/// An id of `model.vocab`.
struct Id(Rank);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = Id;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                write!(formatter, "an integer from 0 to {MAX_ID}")
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Id, E> {
                Rank::try_from(value)
                    .ok()
                    .filter(|&id| id <= MAX_ID)
                    .map(Id)
                    .ok_or_else(|| E::custom("id out of range"))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

impl<'de> Deserialize<'de> for Vocab {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct VocabVisitor;
        impl<'de> Visitor<'de> for VocabVisitor {
            type Value = Vocab;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("an object of tokens and ids")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Vocab, M::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(token) = map.next_key::<String>()? {
                    let Id(id) = map.next_value()?;
                    entries.push((token, id));
                }
                Ok(Vocab(entries))
            }
        }
        deserializer.deserialize_map(VocabVisitor)
    }
}

impl<'de> Deserialize<'de> for SpelledMerge {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MergeVisitor;
        impl<'de> Visitor<'de> for MergeVisitor {
            type Value = SpelledMerge;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str(r#""left right" or ["left", "right"]"#)
            }
            fn visit_str<E: de::Error>(self, line: &str) -> Result<SpelledMerge, E> {
                let (left, right) = line.split_once(' ').ok_or_else(|| E::custom("a merge without a space"))?;
                Ok(SpelledMerge { left: left.to_owned(), right: right.to_owned(), as_pair: false })
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut pair: S) -> Result<SpelledMerge, S::Error> {
                let (Some(left), Some(right), None) =
                    (pair.next_element::<String>()?, pair.next_element::<String>()?, pair.next_element::<IgnoredAny>()?)
                else {
                    return Err(de::Error::custom("a merge that is not a pair"));
                };
                Ok(SpelledMerge { left, right, as_pair: true })
            }
        }
        deserializer.deserialize_any(MergeVisitor)
    }
}

/// A byte-level vocabulary read for the model it spells: each entry's token bytes, and the merges
/// as pairs of ids. Added tokens (`specials`) keep out of both; so do tokens spelled outside the
/// alphabet (byte-level input never forms them) and merges naming either.
pub struct SpelledVocab<'a> {
    /// Every entry: its id, `None` for a token spelled outside the alphabet or an added token.
    ids: FxHashMap<&'a str, Option<Rank>>,
    special_ids: FxHashMap<&'a str, Rank>,
}

impl<'a> SpelledVocab<'a> {
    /// The vocabulary of `entries` and its tokens' bytes (tokens spelled in the alphabet, in entry
    /// order); `None` when an entry appears twice, when an added token's id is another entry's, or
    /// when an added token is in the vocabulary under another id.
    #[allow(clippy::type_complexity)]
    pub fn new(
        entries: impl ExactSizeIterator<Item = (&'a str, Rank)>,
        specials: &'a [(String, Rank)],
    ) -> Option<(Self, Vec<(Vec<u8>, Rank)>)> {
        let special_ids: FxHashMap<&str, Rank> = specials.iter().map(|(text, id)| (text.as_str(), *id)).collect();
        let special_id_set: rustc_hash::FxHashSet<Rank> = specials.iter().map(|(_, id)| *id).collect();
        let entries: Vec<(&'a str, Rank)> = entries.collect();
        // Each entry's bytes (on the current pool's threads when called on one); added tokens' unused.
        let mut unspelled: Vec<Option<Vec<u8>>> = if rayon::current_thread_index().is_some() {
            entries.par_iter().with_min_len(4096).map(|(spelled, _)| unspell(spelled)).collect()
        } else {
            entries.iter().map(|(spelled, _)| unspell(spelled)).collect()
        };
        let mut ids = FxHashMap::with_capacity_and_hasher(entries.len(), Default::default());
        let mut tokens = Vec::with_capacity(entries.len());
        for (&(spelled, id), token) in entries.iter().zip(&mut unspelled) {
            let token_id = if special_id_set.contains(&id) {
                if special_ids.get(spelled) != Some(&id) {
                    return None;
                }
                None
            } else if special_ids.contains_key(spelled) {
                return None;
            } else {
                token.take().map(|token| {
                    tokens.push((token, id));
                    id
                })
            };
            if ids.insert(spelled, token_id).is_some() {
                return None; // an entry twice
            }
        }
        Some((Self { ids, special_ids }, tokens))
    }

    /// The ids a merge joins: `Some(None)` for a merge left out (naming an added token or a token
    /// spelled outside the alphabet), `None` when a part is not in the vocabulary or the joined
    /// token is not a token of the alphabet. `joined` is a buffer for the joined token.
    pub fn merge(&self, joined: &mut String, left: &str, right: &str) -> Option<Option<(Rank, Rank)>> {
        if self.special_ids.contains_key(left) || self.special_ids.contains_key(right) {
            return Some(None);
        }
        let (Some(left_id), Some(right_id)) = (*self.ids.get(left)?, *self.ids.get(right)?) else {
            return Some(None);
        };
        joined.clear();
        joined.push_str(left);
        joined.push_str(right);
        match self.ids.get(joined.as_str()) {
            Some(Some(_)) => Some(Some((left_id, right_id))),
            _ => None,
        }
    }
}

impl TokenizerJson {
    /// The model's tokens (bytes, id) and merges (pairs of ids), as [`SpelledVocab`] reads them;
    /// `None` for anything irregular.
    #[allow(clippy::type_complexity)]
    pub fn tokens_and_merges(&self, specials: &[(String, Rank)]) -> Option<(Vec<(Vec<u8>, Rank)>, Vec<(Rank, Rank)>)> {
        let (vocab, tokens) =
            SpelledVocab::new(self.vocab.iter().map(|(spelled, id)| (spelled.as_str(), *id)), specials)?;
        // The lines' lookups are independent: on the current pool's threads when called on one.
        let look_up = |joined: &mut String, merge: &SpelledMerge| vocab.merge(joined, &merge.left, &merge.right);
        let pairs: Vec<Option<Option<(Rank, Rank)>>> = if rayon::current_thread_index().is_some() {
            self.merges.par_iter().with_min_len(4096).map_init(String::new, look_up).collect()
        } else {
            let mut joined = String::new();
            self.merges.iter().map(|merge| look_up(&mut joined, merge)).collect()
        };
        let mut merges = Vec::with_capacity(pairs.len());
        for pair in pairs {
            merges.extend(pair?);
        }
        Some((tokens, merges))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_and_merges_are_taken_out_and_the_rest_kept_in_order() {
        let text = r#"{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
            "merges": ["a b", ["a", "b"]], "ignore_merges": false}, "decoder": {"type": "ByteLevel"}}"#;
        let file = read(text).unwrap();
        assert_eq!(
            file.rest,
            r#"{"version":"1.0","model":{"type":"BPE","ignore_merges":false},"decoder":{"type": "ByteLevel"}}"#
        );
        assert_eq!(file.vocab, [("a".to_owned(), 0), ("b".to_owned(), 1), ("ab".to_owned(), 2)]);
        assert_eq!(file.merges[0], SpelledMerge { left: "a".into(), right: "b".into(), as_pair: false });
        assert!(file.merges[1].as_pair);
        assert_eq!(file.tokens_and_merges(&[]).unwrap().1, [(0, 1), (0, 1)]);
    }

    #[test]
    fn irregular_files_are_left_to_the_caller() {
        for text in [
            r#"[]"#,
            r#"{"model": {"vocab": {}, "merges": []}, "model": {"vocab": {}, "merges": []}}"#,
            r#"{"model": {"vocab": {}}}"#,
            r#"{"model": {"vocab": {"a": 1.0}, "merges": []}}"#,
            r#"{"model": {"vocab": {"a": -1}, "merges": []}}"#,
            r#"{"model": {"vocab": {"a": 2147483648}, "merges": []}}"#,
            r#"{"model": {"vocab": {"a": true}, "merges": []}}"#,
            r#"{"model": {"vocab": {}, "merges": ["ab"]}}"#,
            r#"{"model": {"vocab": {}, "merges": [["a", "b", "c"]]}}"#,
            r#"{"model": {"vocab": {}, "merges": [["a", 1]]}}"#,
            r#"{"model": {"vocab": {"\ud800": 0}, "merges": []}}"#,
            r#"{"model": {"vocab": {}, "merges": []}} x"#,
        ] {
            assert!(read(text).is_none(), "{text}");
        }
        let irregular = |text: &str, specials: &[(String, Rank)]| read(text).unwrap().tokens_and_merges(specials);
        assert!(irregular(r#"{"model": {"vocab": {"a": 0, "a": 1}, "merges": []}}"#, &[]).is_none());
        assert!(irregular(r#"{"model": {"vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}"#, &[]).is_none());
        assert!(irregular(r#"{"model": {"vocab": {"a": 0}, "merges": ["a c"]}}"#, &[]).is_none());
        assert!(irregular(r#"{"model": {"vocab": {"a": 0, "<s>": 1}, "merges": []}}"#, &[("<s>".into(), 2)]).is_none());
        assert!(irregular(r#"{"model": {"vocab": {"a": 0, "b": 1}, "merges": []}}"#, &[("<s>".into(), 1)]).is_none());
    }

    #[test]
    fn added_tokens_and_tokens_outside_the_alphabet_are_left_out() {
        let text = r#"{"model": {"vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3, "ŉ": 4, "aŉ": 5},
            "merges": ["a b", "a <s>", "a ŉ"]}}"#;
        let (tokens, merges) = read(text).unwrap().tokens_and_merges(&[("<s>".into(), 3)]).unwrap();
        assert_eq!(tokens, [(b"a".to_vec(), 0), (b"b".to_vec(), 1), (b"ab".to_vec(), 2)]);
        assert_eq!(merges, [(0, 1)]);
    }
}
