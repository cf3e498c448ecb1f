//! The merge loop of `bpe_model_trainer.cc`: symbols, their exact frequencies, where each pair
//! occurs, and the merges.

use rustc_hash::{FxHashMap, FxHashSet};

use super::queue::Queue;
use super::rules::{script_of, PieceRules, Shape};
use super::words::{Slot, WordTable, NONE, SEPARATOR};
use super::UNKNOWN_CHAR;

/// A character or a pair of symbols (`bpe::Trainer::Symbol`); what the merge loop reads on
/// every occurrence is apart, in [`Tally`].
pub(super) struct Symbol {
    /// The first 8 bytes of the text, big-endian, zero-padded: compares as the text does (texts
    /// hold no NUL).
    pub(super) prefix: u64,
    /// The text: `texts[text_start..text_start + text_len]`.
    pub(super) text_start: usize,
    pub(super) text_len: u32,
    pub(super) chars: u32,
    /// Characters of the left part (the last tie-break between pairs of the same text).
    pub(super) left_chars: u32,
    pub(super) is_unknown: bool,
    /// What judging a pair with this symbol as a part needs.
    pub(super) shape: Shape,
}

/// A symbol's frequency and state in one word, 8 bytes a symbol: the merge loop updates the
/// tallies of pairs all over the table, so they are kept apart from the rest of [`Symbol`], packed.
#[derive(Clone, Copy)]
struct Tally(u64);

impl Tally {
    /// Merged, dropped as a duplicate, or not a pair at all.
    const INACTIVE: u64 = 1 << 63;
    /// Formed again since the last step: its frequency goes into the queue after this one.
    const PENDING: u64 = 1 << 62;
    const FREQ: u64 = Self::PENDING - 1;

    /// Occurrences, weighted by the counts of their words: exact at all times.
    fn freq(self) -> u64 {
        self.0 & Self::FREQ
    }

    fn is_active(self) -> bool {
        self.0 & Self::INACTIVE == 0
    }
}

/// The most entries a table of [`Trainer::merge`] keeps room for from one merge to the next.
const KEPT_TABLE_ROOM: usize = 1 << 10;

/// The count of a packed position whose word's count takes more than 32 bits.
const COUNT_ELSEWHERE: u64 = u32::MAX as u64;

/// How many occurrences ahead [`Trainer::merge`] asks for their slots.
const PREFETCH_AHEAD: usize = 16;

/// Asks the processor to bring `value` into the cache (a hint; no effect off x86-64).
#[inline(always)]
fn prefetch<T>(value: &T) {
    // SAFETY: a prefetch reads nothing (any address may be hinted); SSE is part of x86-64.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (value as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

pub(super) fn text_prefix(text: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let length = text.len().min(8);
    bytes[..length].copy_from_slice(&text.as_bytes()[..length]);
    u64::from_be_bytes(bytes)
}

struct Trainer<'r> {
    rules: &'r PieceRules,
    symbols: Vec<Symbol>,
    /// Each symbol's [`Tally`], by id.
    tallies: Vec<Tally>,
    /// Where each pair was formed, in the order formed, packed by [`Trainer::position`] with its
    /// word's count (the merge loop reads nothing else of the word). Entries whose symbols
    /// changed since are skipped.
    positions: Vec<Vec<u64>>,
    /// Every symbol's text, one after the other.
    texts: String,
    queue: Queue,
    pending: Vec<u32>,
    /// [`Trainer::merge`]'s tables of the pairs it forms, kept for their room: `x·best` by `x`,
    /// `best·y` by `y`.
    before_best: FxHashMap<u32, u32>,
    after_best: FxHashMap<u32, u32>,
    /// [`Trainer::merge`]'s pairs formed and where, kept for its room.
    formed: Vec<(u32, u64)>,
    /// The words, one after the other, where each word starts, and each word's count (laid out
    /// as in [`WordTable`]).
    slots: Vec<Slot>,
    word_starts: Vec<usize>,
    counts: Vec<u64>,
}

impl Trainer<'_> {
    fn text(&self, id: u32) -> &str {
        let symbol = &self.symbols[id as usize];
        &self.texts[symbol.text_start..symbol.text_start + symbol.text_len as usize]
    }

    /// A position packed: the slot, then its word's count (`COUNT_ELSEWHERE` when it does not
    /// fit; [`Trainer::unpack`] then finds the word).
    fn position(slot: usize, count: u64) -> u64 {
        ((slot as u64) << 32) | count.min(COUNT_ELSEWHERE)
    }

    /// The slot and its word's count.
    fn unpack(&self, position: u64) -> (usize, u64) {
        let slot = (position >> 32) as usize;
        let count = match position & COUNT_ELSEWHERE {
            COUNT_ELSEWHERE => {
                self.counts[self.word_starts.partition_point(|&start| start <= slot) - 1]
            }
            count => count,
        };
        (slot, count)
    }

    fn push_symbol(&mut self, symbol: Symbol, tally: Tally) -> u32 {
        let id = self.symbols.len() as u32;
        debug_assert!(id < SEPARATOR, "symbol ids stay below NONE and SEPARATOR");
        self.symbols.push(symbol);
        self.tallies.push(tally);
        self.positions.push(Vec::new());
        id
    }

    fn char_symbol(&mut self, c: char, is_unknown: bool) -> u32 {
        let text_start = self.texts.len();
        self.texts.push(c);
        self.push_symbol(
            Symbol {
                prefix: text_prefix(&self.texts[text_start..]),
                text_start,
                text_len: c.len_utf8() as u32,
                chars: 1,
                left_chars: 0,
                is_unknown,
                shape: self.rules.char_shape(c, script_of(c)),
            },
            Tally(Tally::INACTIVE),
        )
    }

    /// The body of `GetPairSymbol` for a pair not seen before: the symbol of `left` then `right`,
    /// or `NONE` when it makes no valid piece.
    fn new_pair(&mut self, left: u32, right: u32) -> u32 {
        let (left_symbol, right_symbol) =
            (&self.symbols[left as usize], &self.symbols[right as usize]);
        if left_symbol.is_unknown || right_symbol.is_unknown {
            return NONE;
        }
        let chars = left_symbol.chars + right_symbol.chars;
        let left_chars = left_symbol.chars;
        let (left_start, left_len) = (left_symbol.text_start, left_symbol.text_len as usize);
        let (right_start, right_len) = (right_symbol.text_start, right_symbol.text_len as usize);
        let Some(shape) = self
            .rules
            .join(left_symbol.shape, right_symbol.shape, chars as usize)
        else {
            return NONE;
        };
        let text_start = self.texts.len();
        self.texts
            .extend_from_within(left_start..left_start + left_len);
        self.texts
            .extend_from_within(right_start..right_start + right_len);
        self.push_symbol(
            Symbol {
                prefix: text_prefix(&self.texts[text_start..]),
                text_start,
                text_len: (left_len + right_len) as u32,
                chars,
                left_chars,
                is_unknown: false,
                shape,
            },
            Tally(0),
        )
    }

    /// `symbols_cache_.erase(fp)`: the pair is neither found nor ranked again.
    fn drop_pair(&mut self, id: u32) {
        self.tallies[id as usize].0 |= Tally::INACTIVE;
        self.positions[id as usize] = Vec::new();
    }

    /// Where the symbol before the one at `slot` starts, found from the last slot of that symbol
    /// (none at the start of a word).
    fn previous_slot(&self, slot: usize) -> Option<usize> {
        let last = slot - 1;
        let before = self.slots[last];
        match before.symbol {
            SEPARATOR => None,
            NONE => Some(last - before.pair as usize),
            _ => Some(last),
        }
    }

    /// The rest of `AddNewPair`: the pair `id` (or none) is formed at `slot` in a word counted
    /// `count` times. The caller stores the position.
    fn form_pair(&mut self, count: u64, slot: usize, id: u32) {
        self.slots[slot].pair = id;
        if id == NONE {
            return;
        }
        let tally = &mut self.tallies[id as usize];
        tally.0 += count;
        if tally.0 & Tally::PENDING == 0 {
            tally.0 |= Tally::PENDING;
            self.pending.push(id);
        }
    }

    /// `ResetFreq`: the pair formed at `slot` in a word counted `count` times is broken. A pair
    /// already merged or dropped is no longer SentencePiece's to count.
    fn break_pair(&mut self, count: u64, slot: usize, best: u32) {
        let id = self.slots[slot].pair;
        if id != NONE && id != best {
            let tally = &mut self.tallies[id as usize];
            if tally.is_active() {
                tally.0 -= count;
            }
        }
    }

    /// Sets each slot's pair with the next slot of its word (making the pair symbols), and returns
    /// how often each pair occurs, by id.
    fn find_pairs(&mut self) -> Vec<u32> {
        use rayon::prelude::*;

        /// A part of the words: its pairs (keys) in the order met, and how often each occurs.
        #[derive(Default)]
        struct Part {
            keys: Vec<u64>,
            occurrences: Vec<u32>,
        }
        let key = |slots: &[Slot], right: usize| {
            (u64::from(slots[right - 1].symbol) << 32) | u64::from(slots[right].symbol)
        };
        let words = self.counts.len();
        let parts = rayon::current_num_threads().clamp(1, words.max(1));
        // Parts of about equal slots, cut between words.
        let mut bounds = vec![0];
        for part in 1..parts {
            let target = self.slots.len() * part / parts;
            let word = self
                .word_starts
                .partition_point(|&start| start < target)
                .min(words);
            bounds.push(word.max(*bounds.last().unwrap_or(&0)));
        }
        bounds.push(words);
        // Each part numbers its pairs (kept in the slots for now).
        let mut chunks = word_chunks(&mut self.slots, &self.word_starts, &bounds);
        let found: Vec<Part> = chunks
            .par_iter_mut()
            .map(|(slots, starts)| {
                let offset = starts[0];
                let mut part = Part::default();
                let mut numbers: FxHashMap<u64, u32> = FxHashMap::default();
                for word in starts.windows(2) {
                    for right in word[0] + 1 - offset..word[1] - 1 - offset {
                        let key = key(slots, right);
                        let number = *numbers.entry(key).or_insert_with(|| {
                            part.keys.push(key);
                            part.occurrences.push(0);
                            (part.keys.len() - 1) as u32
                        });
                        part.occurrences[number as usize] += 1;
                        slots[right - 1].pair = number;
                    }
                }
                part
            })
            .collect();
        drop(chunks);
        // The parts' numbers as pair ids, made in order.
        let mut pairs: FxHashMap<u64, u32> = FxHashMap::default();
        let mut occurrences: Vec<u32> = Vec::new();
        let mut ids: Vec<Vec<u32>> = Vec::with_capacity(parts);
        for part in &found {
            let part_ids: Vec<u32> = part
                .keys
                .iter()
                .zip(&part.occurrences)
                .map(|(&key, &count)| {
                    let id = match pairs.get(&key) {
                        Some(&id) => id,
                        None => {
                            let id = self.new_pair((key >> 32) as u32, key as u32);
                            pairs.insert(key, id);
                            id
                        }
                    };
                    if id != NONE {
                        occurrences.resize(occurrences.len().max(id as usize + 1), 0);
                        occurrences[id as usize] += count;
                    }
                    id
                })
                .collect();
            ids.push(part_ids);
        }
        drop(pairs);
        drop(found);
        // The slots' numbers as pair ids.
        let mut chunks = word_chunks(&mut self.slots, &self.word_starts, &bounds);
        chunks.par_iter_mut().zip(&ids).for_each(|((slots, starts), part_ids)| {
            let offset = starts[0];
            for word in starts.windows(2) {
                for left in word[0] - offset..(word[1] - 1 - offset).saturating_sub(1) {
                    slots[left].pair = part_ids[slots[left].pair as usize];
                }
            }
        });
        occurrences
    }

    /// Queues the pairs formed since the last step with their new frequencies.
    fn queue_pending(&mut self) {
        for &id in &self.pending {
            let tally = &mut self.tallies[id as usize];
            tally.0 &= !Tally::PENDING;
            if tally.is_active() {
                let freq = tally.freq();
                self.queue.push(freq, id, &self.symbols, &self.texts);
            }
        }
        self.pending.clear();
    }

    /// The best live pair. An entry whose frequency fell since it was queued goes back in with the
    /// frequency it has now; one whose frequency rose has a newer entry.
    fn best(&mut self) -> Option<u32> {
        while let Some((freq, id)) = self.queue.pop(&self.symbols, &self.texts) {
            let tally = self.tallies[id as usize];
            if !tally.is_active() || freq < tally.freq() {
                continue;
            }
            if freq > tally.freq() {
                let freq = tally.freq();
                self.queue.push(freq, id, &self.symbols, &self.texts);
                continue;
            }
            return Some(id);
        }
        None
    }

    /// `AcceptSymbol`: replaces every occurrence of the pair `best` by it. The pairs it forms all
    /// hold `best`, new in the words, so they are new pairs: they are looked up in tables of this
    /// merge only.
    fn merge(&mut self, best: u32) {
        let positions = std::mem::take(&mut self.positions[best as usize]);
        let mut before_best = std::mem::take(&mut self.before_best);
        let mut after_best = std::mem::take(&mut self.after_best);
        before_best.clear();
        after_best.clear();
        // A symbol covers one slot per character: the parts of `best` are found without a scan.
        let (chars, left_chars) = {
            let symbol = &self.symbols[best as usize];
            (symbol.chars as usize, symbol.left_chars as usize)
        };
        // Every pair formed here is new: its positions are gathered, then stored in lists of the
        // right size.
        let first_new = self.symbols.len();
        let mut formed = std::mem::take(&mut self.formed);
        for (index, &packed) in positions.iter().enumerate() {
            // The occurrences lie all over the words: ask for a later one's slot, word end and
            // count ahead of time.
            if let Some(&ahead) = positions.get(index + PREFETCH_AHEAD) {
                prefetch(&self.slots[(ahead >> 32) as usize]);
            }
            let (left, count) = self.unpack(packed);
            // Still `best`'s parts, next to each other (SentencePiece compares both parts).
            let slot = self.slots[left];
            if slot.symbol == NONE || slot.pair != best {
                continue;
            }
            let right = left + left_chars;
            let end = left + chars;
            let next = (self.slots[end].symbol != SEPARATOR).then_some(end);
            let previous = self.previous_slot(left);
            if let Some(previous) = previous {
                self.break_pair(count, previous, best);
            }
            if next.is_some() {
                self.break_pair(count, right, best);
            }
            self.slots[left].symbol = best;
            self.slots[right] = Slot {
                symbol: NONE,
                pair: NONE,
            };
            self.slots[end - 1].pair = (end - 1 - left) as u32;
            if let Some(previous) = previous {
                let before = self.slots[previous].symbol;
                let id = match before_best.get(&before) {
                    Some(&id) => id,
                    None => {
                        let id = self.new_pair(before, best);
                        before_best.insert(before, id);
                        id
                    }
                };
                self.form_pair(count, previous, id);
                if id != NONE {
                    formed.push((id, Self::position(previous, count)));
                }
            }
            let id = match next {
                None => NONE,
                Some(next) => {
                    let after = self.slots[next].symbol;
                    // (best, best) is one pair, whichever side finds it first.
                    let table = if after == best {
                        &mut before_best
                    } else {
                        &mut after_best
                    };
                    match table.get(&after) {
                        Some(&id) => id,
                        None => {
                            let id = self.new_pair(best, after);
                            table.insert(after, id);
                            id
                        }
                    }
                }
            };
            self.form_pair(count, left, id);
            if id != NONE {
                formed.push((id, packed));
            }
        }
        // Clearing a table costs its room: the few large ones of the first merges are not kept.
        for table in [&mut before_best, &mut after_best] {
            if table.capacity() > KEPT_TABLE_ROOM {
                *table = FxHashMap::default();
            }
        }
        (self.before_best, self.after_best) = (before_best, after_best);
        let mut sizes = vec![0u32; self.symbols.len() - first_new];
        for &(id, _) in &formed {
            sizes[id as usize - first_new] += 1;
        }
        for (list, &size) in self.positions[first_new..].iter_mut().zip(&sizes) {
            list.reserve_exact(size as usize);
        }
        for &(id, position) in &formed {
            self.positions[id as usize].push(position);
        }
        formed.clear();
        self.formed = formed;
    }
}

/// A learned piece and its score.
pub type ScoredPiece = (String, f32);

/// Learns `merges_wanted` pieces from the counted `words` (SentencePiece's BPE loop), then
/// appends the required characters. `on_piece(count)` reports progress and returns false to stop.
/// The words' pairs are first found on the threads of the current rayon pool.
/// Fails when the words run out of pairs first (SentencePiece: "Vocabulary size too high").
pub fn learn_pieces(
    table: WordTable,
    required: &[(char, u64)],
    merges_wanted: usize,
    rules: &PieceRules,
    mut on_piece: impl FnMut(usize) -> bool,
) -> Result<Vec<ScoredPiece>, String> {
    if required.iter().any(|&(c, _)| c == UNKNOWN_CHAR) {
        return Err(format!(
            "the normalized corpus holds {UNKNOWN_CHAR:?} (U+2585), which SentencePiece reserves for \
             unknown characters; remove it from the corpus"
        ));
    }
    let mut trainer = Trainer {
        rules,
        symbols: Vec::new(),
        tallies: Vec::new(),
        positions: Vec::new(),
        texts: String::new(),
        queue: Queue::default(),
        pending: Vec::new(),
        before_best: FxHashMap::default(),
        after_best: FxHashMap::default(),
        formed: Vec::new(),
        slots: Vec::new(),
        word_starts: Vec::new(),
        counts: Vec::new(),
    };
    // Characters outside the required set become U+2585, which pairs with nothing. The words are
    // taken in no particular order (SentencePiece sorts them): the order numbers the symbols and
    // the occurrences, and neither decides anything.
    let unknown = trainer.char_symbol(UNKNOWN_CHAR, true);
    // The character symbols by code point: a table for the Basic Multilingual Plane, a map beyond.
    let mut basic = vec![unknown; 0x10000];
    let mut beyond: FxHashMap<u32, u32> = FxHashMap::default();
    for &(c, _) in required {
        let id = trainer.char_symbol(c, false);
        match u32::from(c) {
            code if code < 0x10000 => basic[code as usize] = id,
            code => {
                beyond.insert(code, id);
            }
        }
    }
    let WordTable {
        mut slots,
        word_starts,
        counts,
        ..
    } = table;
    for slot in &mut slots {
        slot.symbol = match slot.symbol {
            SEPARATOR => SEPARATOR,
            code if code < 0x10000 => basic[code as usize],
            code => beyond.get(&code).copied().unwrap_or(unknown),
        };
    }
    (trainer.slots, trainer.word_starts, trainer.counts) = (slots, word_starts, counts);
    // A packed position holds a slot in 32 bits.
    if trainer.slots.len() as u64 > 1 << 32 {
        return Err(format!(
            "{} distinct words of {} characters in all are more than this trainer holds",
            trainer.counts.len(),
            trainer.slots.len() - trainer.counts.len() - 1
        ));
    }
    // The pairs of neighbouring characters, then each pair's occurrences stored in a list of the
    // right size. Each part of the words (one per thread of the current rayon pool) numbers the
    // pairs it holds in the order it meets them; the parts' numbers are then turned into pair ids
    // part after part, which numbers the pairs in the order one pass over every word meets them,
    // whatever the number of parts.
    let occurrences = trainer.find_pairs();
    for (id, &count) in occurrences.iter().enumerate() {
        trainer.positions[id].reserve_exact(count as usize);
    }
    drop(occurrences);
    for word in 0..trainer.counts.len() {
        let count = trainer.counts[word];
        for left in trainer.word_starts[word]..trainer.word_starts[word + 1] - 1 {
            let id = trainer.slots[left].pair;
            trainer.form_pair(count, left, id);
            if id != NONE {
                trainer.positions[id as usize].push(Trainer::position(left, count));
            }
        }
    }
    trainer.queue_pending();
    let mut pieces: Vec<ScoredPiece> = Vec::with_capacity(merges_wanted + required.len());
    let mut seen: FxHashSet<Box<str>> = FxHashSet::default();
    while pieces.len() < merges_wanted {
        let Some(best) = trainer.best() else {
            return Err(too_high(merges_wanted, pieces.len()));
        };
        let text = trainer.text(best);
        if seen.contains(text) {
            trainer.drop_pair(best);
            continue;
        }
        let text: Box<str> = text.into();
        pieces.push((text.to_string(), -(pieces.len() as f32)));
        seen.insert(text);
        trainer.merge(best);
        trainer.drop_pair(best);
        trainer.queue_pending();
        if !on_piece(pieces.len()) {
            return Err("interrupted".into());
        }
    }
    for &(c, _) in required {
        pieces.push((c.to_string(), -(pieces.len() as f32)));
    }
    // Freeing the trainer (a position list per pair: ~50 ms at vocab 32,000 on 25 MB) is not the
    // caller's wait.
    // (Its fields are moved out one by one: the trainer itself borrows the rules.)
    drop_in_background((
        trainer.symbols,
        trainer.tallies,
        trainer.positions,
        trainer.texts,
        trainer.queue,
        trainer.slots,
        trainer.word_starts,
        trainer.counts,
    ));
    Ok(pieces)
}

/// The slots of the words `bounds[i]..bounds[i + 1]` for each part `i`, each word followed by its
/// separator (the separator before the first word is in no part), with the part's word starts
/// (its last entry: where the part ends).
fn word_chunks<'s>(
    slots: &'s mut [Slot],
    word_starts: &'s [usize],
    bounds: &[usize],
) -> Vec<(&'s mut [Slot], &'s [usize])> {
    let mut chunks = Vec::with_capacity(bounds.len().saturating_sub(1));
    let mut taken = word_starts[0];
    let mut rest = &mut slots[taken..];
    for window in bounds.windows(2) {
        let end = word_starts[window[1]];
        let (chunk, tail) = rest.split_at_mut(end - taken);
        chunks.push((chunk, &word_starts[window[0]..=window[1]]));
        (rest, taken) = (tail, end);
    }
    chunks
}

/// Drops `value` on a thread of its own (at once, on this thread, when no thread can be started).
fn drop_in_background<T: Send + 'static>(value: T) {
    // A failed spawn drops its closure, and with it `value`, here.
    let _ = std::thread::Builder::new()
        .name("hf_bpe-free".into())
        .spawn(move || drop(value));
}

fn too_high(wanted: usize, learned: usize) -> String {
    format!(
        "the corpus has pairs for only {learned} merged pieces, fewer than the {wanted} this vocab_size \
         needs (SentencePiece fails alike: \"Vocabulary size too high\")"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::sentencepiece::test_support::{counts, rules};
    use crate::train::sentencepiece::WordCounts;

    #[test]
    fn the_most_frequent_pair_is_merged_first() {
        let words = counts(&[("▁ab", 3), ("▁abc", 2), ("▁b", 1)]);
        let table = WordTable::new(words);
        let required = table.required_chars(1.0);
        let pieces = learn_pieces(table, &required, 3, &rules(), |_| true).unwrap();
        let texts: Vec<&str> = pieces.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(&texts[..3], ["ab", "▁ab", "▁abc"]);
        assert_eq!(pieces[3].1, -3.0);
    }

    #[test]
    fn frequencies_stay_exact_after_merges() {
        // "bc" (4) wins; "ab" loses the 3 occurrences "bc" took, "a·bc" (3) is formed; "▁a" (3,
        // fewer characters) wins before it.
        let words = counts(&[("▁abc", 3), ("bc", 1)]);
        let table = WordTable::new(words);
        let required = table.required_chars(1.0);
        let pieces = learn_pieces(table, &required, 3, &rules(), |_| true).unwrap();
        let texts: Vec<&str> = pieces.iter().map(|(text, _)| text.as_str()).collect();
        assert_eq!(texts[..3], ["bc", "▁a", "▁abc"]);
    }

    #[test]
    fn the_order_of_the_words_decides_nothing() {
        let listed = [
            ("▁aab", 3),
            ("▁abab", 2),
            ("ba", 2),
            ("▁bb", 1),
            ("aaa", 2),
            ("▁a", 4),
        ];
        let words: WordCounts = listed
            .iter()
            .map(|&(word, count)| (word.into(), count))
            .collect();
        let required = WordTable::new(words).required_chars(1.0);
        let learn = |words: Vec<(Box<str>, u64)>| {
            learn_pieces(WordTable::new(words), &required, 8, &rules(), |_| true).unwrap()
        };
        let forward: Vec<(Box<str>, u64)> = listed
            .iter()
            .map(|&(word, count)| (word.into(), count))
            .collect();
        let mut backward = forward.clone();
        backward.reverse();
        let mut sorted = forward.clone();
        sorted.sort();
        assert_eq!(learn(forward.clone()), learn(backward));
        assert_eq!(learn(forward), learn(sorted));
    }

    /// The merge loop recomputed from scratch at every step: every pair of neighbouring symbols
    /// counted anew, the best taken, its occurrences replaced left to right.
    fn learn_naively(words: &[(&str, u64)], merges: usize, rules: &PieceRules) -> Vec<String> {
        let mut words: Vec<(Vec<String>, u64)> = words
            .iter()
            .map(|&(word, count)| (word.chars().map(String::from).collect(), count))
            .collect();
        let mut learned: Vec<String> = Vec::new();
        let mut dropped: FxHashSet<(String, String)> = FxHashSet::default();
        while learned.len() < merges {
            let mut freqs: FxHashMap<(String, String), u64> = FxHashMap::default();
            for (symbols, count) in &words {
                for pair in symbols.windows(2) {
                    let key = (pair[0].clone(), pair[1].clone());
                    let text: Vec<char> = (pair[0].clone() + &pair[1]).chars().collect();
                    if !dropped.contains(&key) && rules.is_valid(&text) {
                        *freqs.entry(key).or_insert(0) += count;
                    }
                }
            }
            if freqs.is_empty() {
                break;
            }
            let best = freqs
                .into_iter()
                .min_by(|(a, fa), (b, fb)| {
                    let (ta, tb) = (a.0.clone() + &a.1, b.0.clone() + &b.1);
                    fb.cmp(fa)
                        .then(ta.chars().count().cmp(&tb.chars().count()))
                        .then(ta.cmp(&tb))
                        .then(a.0.chars().count().cmp(&b.0.chars().count()))
                })
                .map(|(key, _)| key)
                .expect("pairs left");
            let text = best.0.clone() + &best.1;
            dropped.insert(best.clone());
            if learned.contains(&text) {
                continue;
            }
            learned.push(text.clone());
            for (symbols, _) in &mut words {
                let mut merged = Vec::with_capacity(symbols.len());
                let mut index = 0;
                while index < symbols.len() {
                    if index + 1 < symbols.len()
                        && symbols[index] == best.0
                        && symbols[index + 1] == best.1
                    {
                        merged.push(text.clone());
                        index += 2;
                    } else {
                        merged.push(symbols[index].clone());
                        index += 1;
                    }
                }
                *symbols = merged;
            }
        }
        learned
    }

    #[test]
    fn the_queue_and_the_kept_frequencies_learn_what_counting_anew_learns() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        let alphabet = ['a', 'b', 'c', '▁', '1', 'б'];
        for round in 0..200 {
            let mut words: Vec<(String, u64)> = Vec::new();
            for _ in 0..1 + next(12) {
                let length = 1 + next(9) as usize;
                let word: String = (0..length).map(|_| alphabet[next(6) as usize]).collect();
                // Every fourth round, counts from 2^31 (which a packed position holds) to 5 * 2^31
                // (which it does not).
                let scale = if round % 4 == 3 { 1 << 31 } else { 1 };
                words.push((word, (1 + next(5)) * scale));
            }
            let rules = PieceRules {
                allow_whitespace_only_pieces: round % 2 == 0,
                split_by_whitespace: round % 3 != 0,
                max_sentencepiece_length: 2 + round % 5,
                ..rules()
            };
            let listed: Vec<(&str, u64)> = words
                .iter()
                .map(|(word, count)| (word.as_str(), *count))
                .collect();
            let table: WordCounts =
                listed
                    .iter()
                    .fold(WordCounts::default(), |mut table, &(word, count)| {
                        *table.entry(word.into()).or_insert(0) += count;
                        table
                    });
            // As many merges as leave a pair of positive frequency at every step (later ones would
            // take pairs whose occurrences are gone, as SentencePiece does).
            let expected = learn_naively(&listed, 12, &rules);
            let merges = expected.len();
            let table = WordTable::new(table);
            let required = table.required_chars(1.0);
            // The pairs are found by 1, 2 or 3 parts of the words.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(1 + round % 3)
                .build()
                .unwrap();
            let pieces = pool
                .install(|| learn_pieces(table, &required, merges, &rules, |_| true))
                .unwrap();
            let texts: Vec<String> = pieces[..merges]
                .iter()
                .map(|(text, _)| text.clone())
                .collect();
            assert_eq!(texts, expected, "{words:?}");
        }
    }
}
