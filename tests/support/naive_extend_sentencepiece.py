"""Extending a SentencePiece BPE model, naive and readable, for the tests: what "continuing spm's loop" means
for ``hf_bpe.extend`` on a SentencePiece ``.model`` (the byte-level rule is ``tests/support/naive_extend_bpe.py``).
Written from SentencePiece's ``bpe_model_trainer.cc`` and hf_bpe's description of it
(``crates/core/src/train/sentencepiece/``), independent of hf_bpe; ``tests/test_naive_extend_sentencepiece
.py`` proves it against ``sentencepiece`` 0.2.3 itself.

SentencePiece cannot continue a training. Continuing its loop on a model means:

1. **Words** as ``spm_train`` makes them from the new corpus with the model's own normalizer and options
   (sentences are lines; ``▁`` for spaces and the dummy prefix; with ``split_by_whitespace`` a word begins
   at each ``▁``), counted. hf_bpe's SentencePiece word counter already cuts them so; this module's
   :func:`simple_words` does it only for text of single-space-separated words under the ``identity``
   normalizer (what the tests use).
2. **Starting state**: each word encoded with the model: its characters, then repeatedly the adjacent pair
   whose concatenation is a piece of the highest score, leftmost on ties (:func:`encode_word`); a
   character that is no piece stays alone and pairs with nothing (training's U+2585).
3. **SentencePiece's loop** (:func:`continue_sentencepiece`): among adjacent pairs whose text is a valid
   piece (``IsValidSentencePiece``: at most ``max_sentencepiece_length`` characters, ``▁`` only in front
   with ``split_by_whitespace``, one script, digits apart; :func:`valid_piece` checks the first two, all a
   single-script text of letters needs) and is not a piece yet, the greatest frequency wins (occurrences
   weighted by word counts, overlapping ones each counted), ties to fewer characters, then the smaller text
   (code point order), then the shorter left part. Not DESIGN.md §3's tie rule. Every occurrence is merged,
   left to right. A pair whose text is already a piece never merges (SentencePiece drops such a pair when
   it wins: "the same piece reached another way"). The loop stops when no pair occurs any more
   (``spm_train`` goes on there with pairs whose occurrences are gone, at frequency 0, in the order of its
   bookkeeping, until ``vocab_size``; an extension learns nothing that does not occur).
4. **Scores and ids**: ``spm_train`` scores its i-th learned piece ``-i`` (then the characters, below them);
   the i-th new piece scores one less than the lowest score among the model's learned pieces (those of
   two characters or more), minus ``i``, so the extended model's learned pieces score as a longer training
   would score them. New pieces take ids after the last one; every existing piece keeps its id, text,
   score and type (the characters' scores never decide a merge: only pairs are scored).

On its own corpus, continuing a model ``spm_train`` made for ``k`` more pieces gives the pieces (texts and
scores) ``spm_train`` learns with ``k`` more, and an extended model encodes every text as that longer model
does (the tests check both); the longer model has its characters after all learned pieces, so only the
ids of the characters differ.

>>> pieces = {"▁": -2.0, "a": -3.0, "b": -4.0, "ab": 0.0, "▁ab": -1.0}
>>> words = simple_words(["ab ab abab", "ba"])
>>> continue_sentencepiece(words, pieces, 2)
[('ba', -2.0), ('▁ba', -3.0)]
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from naive_bpe import merge_words

SPACE = "\u2581"


def simple_words(sentences: Iterable[str]) -> Counter[str]:
    """``spm_train``'s words of sentences of single-space-separated words (identity normalizer, dummy
    prefix, ``split_by_whitespace``), counted."""
    return Counter(SPACE + word for sentence in sentences for word in sentence.split())


def valid_piece(text: str, max_sentencepiece_length: int = 16) -> bool:
    """Length and ``▁`` placement of ``IsValidSentencePiece`` (enough for text of one script, no digits)."""
    return len(text) <= max_sentencepiece_length and SPACE not in text[1:]


def encode_word(word: str, pieces: Mapping[str, float]) -> list[str]:
    """SentencePiece BPE's encoding of one word: merge the adjacent pair whose concatenation is the piece
    of the highest score, leftmost on ties."""
    parts = list(word)
    while True:
        found = [(-pieces[a + b], i) for i, (a, b) in enumerate(itertools.pairwise(parts)) if a + b in pieces]
        if not found:
            return parts
        _, i = min(found)
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


def continue_sentencepiece(words: Mapping[str, int], pieces: Mapping[str, float], num_new_pieces: int,
                           valid: Callable[[str], bool] = valid_piece) -> list[tuple[str, float]]:
    """The next ``num_new_pieces`` pieces (text, score) SentencePiece's loop learns from the model's
    encoding of ``words`` (fewer when no pair is left). ``pieces``: the model's normal pieces and scores."""
    state: Counter[tuple[str, ...]] = Counter()
    for word, count in words.items():
        state[tuple(encode_word(word, pieces))] += count
    known = set(pieces)
    learned_scores = [score for text, score in pieces.items() if len(text) > 1]
    next_score = min(learned_scores, default=1.0) - 1
    learned: list[tuple[str, float]] = []
    while len(learned) < num_new_pieces:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, count in state.items():
            for left, right in itertools.pairwise(word):
                if left in known and right in known and left + right not in known and valid(left + right):
                    pairs[left, right] += count
        if not pairs:
            break
        left, right = min(pairs, key=lambda pair: (-pairs[pair], len(pair[0] + pair[1]), pair[0] + pair[1],
                                                   len(pair[0])))
        merged = left + right
        known.add(merged)
        learned.append((merged, next_score - len(learned)))
        state = merge_words(state, (left, right))
    return learned
