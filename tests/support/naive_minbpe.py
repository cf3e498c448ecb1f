"""minbpe's ``RegexTokenizer.train`` loop, minimal, for the tests (written from minbpe's behaviour,
independent of hf_bpe).

The text is cut into chunks by the pattern (the ``regex`` module, as minbpe), each chunk becomes its
UTF-8 bytes, and before each merge the pair counts are rebuilt in a dict, chunk by chunk, pair by
pair; the winner is ``max(stats, key=stats.get)``: the most frequent pair that entered the dict
first. Every occurrence is then replaced left to right. Documents (our extension: minbpe trains on
one string) are chunked one after the other, and split on special tokens first.

>>> naive_minbpe_train(["ab cd cd ab"], 2, r" ?\\w+")
[(b'a', b'b'), (b' ', b'c')]
"""

from __future__ import annotations

import itertools
import re

import regex


def _stats(chunks: list[list[int]]) -> dict[tuple[int, int], int]:
    counts: dict[tuple[int, int], int] = {}
    for ids in chunks:
        for pair in itertools.pairwise(ids):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def _merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out, i = [], 0
    while i < len(ids):
        if i < len(ids) - 1 and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def naive_minbpe_train(documents: list[str], num_merges: int, pattern: str,
                       special_tokens: list[str] = ()) -> list[tuple[bytes, bytes]]:  # type: ignore[assignment]
    """minbpe's merges as byte pairs, in order (fewer when the chunks run out of pairs)."""
    cut = re.compile("|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True))))
    chunks = [list(match.encode("utf-8"))
              for document in documents
              for part in (cut.split(document) if special_tokens else [document])
              for match in regex.findall(pattern, part)]
    vocab = {i: bytes([i]) for i in range(256)}
    merges = []
    for step in range(num_merges):
        stats = _stats(chunks)
        if not stats:
            break
        pair = max(stats, key=stats.get)  # type: ignore[arg-type]
        new_id = 256 + step
        chunks = [_merge(ids, pair, new_id) for ids in chunks]
        vocab[new_id] = vocab[pair[0]] + vocab[pair[1]]
        merges.append((vocab[pair[0]], vocab[pair[1]]))
    return merges
