//! The pairs waiting to be merged, popped in SentencePiece's rank order.

use super::trainer::Symbol;

/// A queued pair: its frequency when queued, and what ranks it (copied, so that ranking reads
/// the symbols only when the first 8 bytes of two texts tie).
#[derive(Clone, Copy)]
struct Entry {
    freq: u64,
    prefix: u64,
    chars: u32,
    id: u32,
}

/// The ranking of queue entries: frequency, then fewer characters, then the smaller text
/// (`QueueEntryComparator`), then the shorter left part.
fn ranks_before(symbols: &[Symbol], texts: &str, a: &Entry, b: &Entry) -> bool {
    if a.freq != b.freq {
        return a.freq > b.freq;
    }
    if a.chars != b.chars {
        return a.chars < b.chars;
    }
    if a.prefix != b.prefix {
        return a.prefix < b.prefix;
    }
    let (x, y) = (&symbols[a.id as usize], &symbols[b.id as usize]);
    let text =
        |symbol: &Symbol| &texts[symbol.text_start..symbol.text_start + symbol.text_len as usize];
    match text(x).cmp(text(y)) {
        std::cmp::Ordering::Equal => (x.left_chars, a.id) < (y.left_chars, b.id),
        order => order.is_lt(),
    }
}

/// Children of a node of [`Queue`]: four 24-byte entries span two cache lines, and the heap is
/// half as deep as a binary one (the queue holds every pair ever formed, far more than fit in cache).
const QUEUE_ARITY: usize = 4;

/// The queued pairs, popped in the order of [`ranks_before`] (a total order: the pops do not
/// depend on how the entries are kept). The entries of frequency `floor` or more are in a 4-ary
/// max-heap; the others, which cannot be the best while the heap holds any entry, wait in lists
/// by the power of two below their frequency (`below[k]`: 2^k to 2^(k + 1) - 1; `below[0]`
/// also 0) until the heap runs out: most pairs formed never come near the top, and the heap they
/// stay out of is small.
pub(super) struct Queue {
    entries: Vec<Entry>,
    below: Vec<Vec<Entry>>,
    floor: u64,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            below: (0..u64::BITS).map(|_| Vec::new()).collect(),
            floor: u64::MAX,
        }
    }
}

impl Queue {
    /// Queues the pair `id` with the frequency `freq`.
    pub(super) fn push(&mut self, freq: u64, id: u32, symbols: &[Symbol], texts: &str) {
        let symbol = &symbols[id as usize];
        let entry = Entry {
            freq,
            prefix: symbol.prefix,
            chars: symbol.chars,
            id,
        };
        if freq < self.floor {
            self.below[freq.max(1).ilog2() as usize].push(entry);
        } else {
            self.push_on_heap(entry, symbols, texts);
        }
    }

    fn push_on_heap(&mut self, entry: Entry, symbols: &[Symbol], texts: &str) {
        self.entries.push(entry);
        let mut child = self.entries.len() - 1;
        while child > 0 {
            let parent = (child - 1) / QUEUE_ARITY;
            if !ranks_before(symbols, texts, &self.entries[child], &self.entries[parent]) {
                break;
            }
            self.entries.swap(child, parent);
            child = parent;
        }
    }

    /// The best entry: (frequency when queued, pair). When the heap is empty, the highest list
    /// waiting goes onto it, and the floor falls to that list's lowest frequency.
    pub(super) fn pop(&mut self, symbols: &[Symbol], texts: &str) -> Option<(u64, u32)> {
        if self.entries.is_empty() {
            let power = self.below.iter().rposition(|list| !list.is_empty())?;
            self.floor = if power == 0 { 0 } else { 1 << power };
            for entry in std::mem::take(&mut self.below[power]) {
                self.push_on_heap(entry, symbols, texts);
            }
        }
        let last = self.entries.pop()?;
        if self.entries.is_empty() {
            return Some((last.freq, last.id));
        }
        let top = std::mem::replace(&mut self.entries[0], last);
        let mut parent = 0;
        loop {
            let first = QUEUE_ARITY * parent + 1;
            if first >= self.entries.len() {
                break;
            }
            let last = (first + QUEUE_ARITY).min(self.entries.len());
            let mut child = first;
            for other in first + 1..last {
                if ranks_before(symbols, texts, &self.entries[other], &self.entries[child]) {
                    child = other;
                }
            }
            if !ranks_before(symbols, texts, &self.entries[child], &self.entries[parent]) {
                break;
            }
            self.entries.swap(child, parent);
            parent = child;
        }
        Some((top.freq, top.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::sentencepiece::script_of;
    use crate::train::sentencepiece::test_support::{below, rules};
    use crate::train::sentencepiece::trainer::text_prefix;

    #[test]
    fn the_queue_pops_in_rank_order_whatever_it_waits_in() {
        // Symbols of 1 to 3 characters with texts that tie often, and a left part of 0 to 2.
        let rules = rules();
        let (mut texts, mut symbols) = (String::new(), Vec::new());
        for id in 0..60u32 {
            let chars = 1 + id % 3;
            let text: String = (0..chars)
                .map(|k| ['a', 'b', 'c'][((id + k) % 3) as usize])
                .collect();
            let text_start = texts.len();
            texts.push_str(&text);
            symbols.push(Symbol {
                prefix: text_prefix(&text),
                text_start,
                text_len: text.len() as u32,
                chars,
                left_chars: id % chars,
                is_unknown: false,
                shape: rules.char_shape('a', script_of('a')),
            });
        }
        let mut next = below(0x9e37_79b9_7f4a_7c15);
        for _ in 0..50 {
            let mut queue = Queue::default();
            let mut queued: Vec<Entry> = Vec::new();
            for _ in 0..300 {
                if next(3) == 0 {
                    // The best queued entry, by a sort under `ranks_before`.
                    queued.sort_by(|a, b| {
                        if ranks_before(&symbols, &texts, a, b) {
                            std::cmp::Ordering::Less
                        } else if ranks_before(&symbols, &texts, b, a) {
                            std::cmp::Ordering::Greater
                        } else {
                            std::cmp::Ordering::Equal
                        }
                    });
                    let expected = (!queued.is_empty()).then(|| queued.remove(0));
                    let popped = queue.pop(&symbols, &texts);
                    assert_eq!(popped, expected.map(|entry| (entry.freq, entry.id)));
                } else {
                    // Frequencies from 0 to about 2^20, most of them small.
                    let bits = next(21);
                    let freq = next(1 << bits);
                    let id = next(60) as u32;
                    queue.push(freq, id, &symbols, &texts);
                    let symbol = &symbols[id as usize];
                    queued.push(Entry {
                        freq,
                        prefix: symbol.prefix,
                        chars: symbol.chars,
                        id,
                    });
                }
            }
        }
    }
}
