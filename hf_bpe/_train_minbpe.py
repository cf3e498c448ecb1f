"""The merge loop with minbpe's tie rule: of the most frequent pairs, the one seen first wins.

minbpe (``RegexTokenizer.train``) rebuilds its pair counts in a dict at every step, walking the
pieces of the corpus in order and the pairs of each piece left to right; ``max(stats,
key=stats.get)`` then returns the most frequent pair that entered the dict first, i.e. whose first
occurrence in the current corpus comes first. This module gives the same merges without rescanning
the corpus: each distinct piece (a *word*) keeps the index of its first occurrence, so a pair's
first occurrence is ``(first word holding it, byte offset of its left token in that word)``. That
key, like the count, only gets worse for a pair while other pairs merge (occurrences are removed,
never added, except for pairs with the new token, which are pushed afresh), so a max-heap with lazy
re-checking is exact, as in the Rust trainer.

Pure Python: fine for the corpora minbpe is used on (megabytes); the default tie rule runs in Rust.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable

Pair = tuple[int, int]


def learn_merges(
    pieces: Iterable[bytes], num_merges: int, on_merge: Callable[[int], object] | None = None
) -> list[bytes]:
    """The bytes of each new token, in merge order (ids 256, 257, ...), for ``pieces`` given in
    corpus order (repeats included).

    >>> learn_merges([b"ab", b"cd", b"cd", b"ab"], 2)
    [b'ab', b'cd']
    """
    counts: dict[bytes, int] = {}
    for piece in pieces:
        counts[piece] = counts.get(piece, 0) + 1
    words = [list(piece) for piece in counts if len(piece) > 1]  # in order of first occurrence
    weights = [counts[piece] for piece in counts if len(piece) > 1]
    token_bytes = [bytes([byte]) for byte in range(256)]
    pair_counts: dict[Pair, int] = {}
    pair_words: dict[Pair, set[int]] = {}
    for index, word in enumerate(words):
        for pair in itertools.pairwise(word):
            pair_counts[pair] = pair_counts.get(pair, 0) + weights[index]
            pair_words.setdefault(pair, set()).add(index)

    def first_seen(pair: Pair) -> tuple[int, int]:
        for index in sorted(pair_words.get(pair, ())):
            offset = 0
            word = words[index]
            for position in range(len(word) - 1):
                if (word[position], word[position + 1]) == pair:
                    return index, offset
                offset += len(token_bytes[word[position]])
        raise AssertionError(f"pair {pair} has a count but no word")

    heap = [(-count, *first_seen(pair), pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)
    merged: list[bytes] = []
    known = {token: index for index, token in enumerate(token_bytes)}
    while len(merged) < num_merges and heap:
        negative_count, word_index, offset, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if count <= 0:
            continue
        current = (-count, *first_seen(pair))
        if current != (negative_count, word_index, offset):
            heapq.heappush(heap, (*current, pair))
            continue
        new_id = len(token_bytes)
        token = token_bytes[pair[0]] + token_bytes[pair[1]]
        if token in known:
            raise ValueError(
                f"minbpe's loop makes the token {token!r} a second time at merge {len(merged) + 1} ({known[token]} "
                f"and {new_id} would both be {token!r}), which a model with one id per byte string cannot hold; "
                f"train with a smaller vocab_size (at most {256 + len(merged)} plus the special tokens) or with "
                "tie_break='cs336', which keeps one token per byte string"
            )
        known[token] = new_id
        token_bytes.append(token)
        merged.append(token_bytes[new_id])
        touched: set[Pair] = set()
        for index in sorted(pair_words.pop(pair, ())):
            word, weight = words[index], weights[index]
            if not any((word[i], word[i + 1]) == pair for i in range(len(word) - 1)):
                continue
            for old in itertools.pairwise(word):
                pair_counts[old] -= weight
            rebuilt: list[int] = []
            for symbol in word:  # minbpe's merge, left to right without overlaps (new_id is in no pair yet)
                if rebuilt and rebuilt[-1] == pair[0] and symbol == pair[1]:
                    rebuilt[-1] = new_id
                else:
                    rebuilt.append(symbol)
            words[index] = rebuilt
            for new in itertools.pairwise(rebuilt):
                pair_counts[new] = pair_counts.get(new, 0) + weight
                pair_words.setdefault(new, set()).add(index)
                if new_id in new:
                    touched.add(new)
        pair_counts.pop(pair, None)
        for new in touched:
            heapq.heappush(heap, (-pair_counts[new], *first_seen(new), new))
        if on_merge is not None:
            on_merge(1)
    return merged
