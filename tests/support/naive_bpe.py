"""A naive BPE trainer for the tests, written from the training rule (docs/training.md, "The rule") and independent of hf_bpe.

- :func:`naive_pieces`: split each document on the special tokens (leftmost, longest first), pre-tokenize
  each part with the ``regex`` module and the pattern, count the pieces' UTF-8 bytes.
- :func:`naive_train`: the seeds' loop, for reading: before each merge recount every adjacent pair of
  every piece (weighted by the piece's count), take the greatest ``(count, left bytes, right bytes)``,
  replace it left to right (non-overlapping) in every piece. Equal bytes reached twice stay one token.
- :func:`recount_train`: exactly that loop on NumPy arrays (it still recounts every pair of every piece
  before each merge, nothing incremental), fast enough for vocabularies of thousands on tens of KB;
  ``tests/test_train_rule.py`` proves it equal to :func:`naive_train`.

The ``regex`` module's Unicode tables are newer than the ones tiktoken, and so hf_bpe, split with (Unicode
16.0): :func:`regex_only_code_points` lists the code points it alone knows, where the two cut text
differently; corpora that compare the two trainers leave them out.

>>> pieces = naive_pieces(["low lower<|end|>lowest"], r"\\w+|\\s+", ["<|end|>"])
>>> sorted(pieces.items())
[(b' ', 1), (b'low', 1), (b'lower', 1), (b'lowest', 1)]
>>> naive_train(["low lower<|end|>lowest"], 259, r"\\w+|\\s+", ["<|end|>"])
[b'ow', b'low']
>>> recount_train(pieces, 2).tokens
[b'ow', b'low']
"""

from __future__ import annotations

import itertools
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import regex


def merge_word(word: tuple[Any, ...], pair: tuple[Any, Any]) -> tuple[Any, ...]:
    """``word`` with every occurrence of ``pair`` replaced, left to right and non-overlapping, by the
    two symbols joined (bytes or str)."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def merge_words(words: Mapping[tuple[Any, ...], int], pair: tuple[Any, Any]) -> dict[tuple[Any, ...], int]:
    """Every word of a count table with ``pair`` merged (:func:`merge_word`); words that become equal add up."""
    merged: Counter[tuple[Any, ...]] = Counter()
    for word, count in words.items():
        merged[merge_word(word, pair)] += count
    return dict(merged)


def naive_pieces(documents: Iterable[str], pattern: str, special_tokens: list[str]) -> Counter[bytes]:
    """How often each piece occurs: documents split on the special tokens, each part pre-tokenized."""
    pieces: Counter[bytes] = Counter()
    splitter = re.compile("|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True))))
    for document in documents:
        for part in splitter.split(document) if special_tokens else [document]:
            for match in regex.finditer(pattern, part):
                pieces[match.group().encode("utf-8")] += 1
    return pieces


def naive_train(documents: list[str], vocab_size: int, pattern: str, special_tokens: list[str]) -> list[bytes]:
    """The learned tokens, in order, of a vocabulary of ``vocab_size`` (bytes, merges, special tokens)."""
    pieces = naive_pieces(documents, pattern, special_tokens)
    words: dict[tuple[bytes, ...], int] = {tuple(bytes([b]) for b in piece): n for piece, n in pieces.items()}
    learned: list[bytes] = []
    while 256 + len(learned) + len(special_tokens) < vocab_size:
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, n in words.items():
            for pair in itertools.pairwise(word):
                pairs[pair] += n
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))
        merged = best[0] + best[1]
        if merged not in learned:  # the same bytes reached twice stay one token
            learned.append(merged)
        words = merge_words(words, best)
    return learned


@dataclass
class Recount:
    """What :func:`recount_train` learned: the new tokens in order, how many merges it made (a merge whose
    bytes are already a token adds none), and how many of them were chosen among tied counts."""

    tokens: list[bytes]
    merges: int
    ties: int


def recount_train(pieces: Mapping[bytes, int], num_tokens: int) -> Recount:
    """:func:`naive_train`'s loop on a piece table, learning up to ``num_tokens`` tokens.

    Every piece is a run of symbols (token ids) in one array, ``piece_of`` telling which piece each
    symbol belongs to. Before each merge, every pair of adjacent symbols of one piece is counted again,
    weighted by its piece's count.
    """
    tokens = [bytes([byte]) for byte in range(256)]
    ids = {token: i for i, token in enumerate(tokens)}
    kept = [(piece, n) for piece, n in pieces.items() if len(piece) >= 2 and n > 0]
    symbols = np.frombuffer(b"".join(piece for piece, _ in kept), dtype=np.uint8).astype(np.int64)
    piece_of = np.repeat(np.arange(len(kept)), [len(piece) for piece, _ in kept])
    weight = np.array([n for _, n in kept], dtype=np.int64)
    learned: list[bytes] = []
    merges = ties = 0
    while len(learned) < num_tokens:
        adjacent = piece_of[:-1] == piece_of[1:]
        if not adjacent.any():
            break
        pairs = (symbols[:-1] << 32 | symbols[1:])[adjacent]
        distinct, which = np.unique(pairs, return_inverse=True)
        counts = np.zeros(len(distinct), dtype=np.int64)
        np.add.at(counts, which, weight[piece_of[:-1][adjacent]])
        tied = [(int(pair) >> 32, int(pair) & 0xFFFF_FFFF) for pair in distinct[counts == counts.max()]]
        left, right = max(tied, key=lambda pair: (tokens[pair[0]], tokens[pair[1]]))
        merges += 1
        ties += len(tied) > 1
        merged = tokens[left] + tokens[right]
        if merged not in ids:
            ids[merged] = len(tokens)
            tokens.append(merged)
            learned.append(merged)
        starts = np.flatnonzero(adjacent & (symbols[:-1] == left) & (symbols[1:] == right))
        if left == right:  # in a run "a a a", the second "a a" overlaps the first: left to right
            chosen, last = [], -2
            for start in starts.tolist():
                if start >= last + 2:
                    chosen.append(start)
                    last = start
            starts = np.array(chosen, dtype=np.int64)
        symbols[starts] = ids[merged]
        symbols = np.delete(symbols, starts + 1)
        piece_of = np.delete(piece_of, starts + 1)
    return Recount(learned, merges, ties)


@cache
def regex_only_code_points() -> frozenset[int]:
    """Code points the ``regex`` module assigns but this Python's ``unicodedata`` does not.

    Python's tables (14.0 in 3.11, 16.0 in 3.14) are never newer than the Unicode 16.0 of tiktoken and
    hf_bpe's pre-tokenizer, so these include every character the ``regex`` module knows and they do not
    (CJK Extension J U+323B0-U+33479, U+3D000-U+3FC3F, ...): the ``regex`` module may call them letters
    where tiktoken sees unassigned code points.
    """
    unassigned = "".join(
        chr(code) for code in range(sys.maxunicode + 1)
        if not 0xD800 <= code <= 0xDFFF and unicodedata.category(chr(code)) == "Cn"
    )
    return frozenset(ord(char) for char in regex.findall(r"\P{Cn}", unassigned))
