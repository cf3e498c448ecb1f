"""Extending a trained BPE model, naive and readable, for the tests: the rule ``hf_bpe.extend(model, corpus,
num_new_tokens, ...)`` must follow (DESIGN.md §5, "Training rules beyond plain BPE"), independent of hf_bpe.
``tests/test_naive_extend_bpe.py`` proves its parts.

The rule
    1. **Pieces.** The corpus is cut as the model's own training would cut it (:func:`naive_bpe.naive_pieces`):
       each document split on the model's special tokens (never merged across), each part pre-tokenized
       with the model's pattern; distinct pieces are counted.
    2. **Starting state: the model's encoding.** Each piece becomes the tokens the existing model encodes
       it to, by the model's own rule:

       - a rank model (tiktoken files, ``get_encoding``, hf_bpe's own models; :func:`encode_with_ranks`): a
         piece that is itself a token is that one token (the whole-piece rule); otherwise from its bytes,
         repeatedly merge the adjacent pair whose concatenation is a token of the lowest rank, the leftmost
         on ties;
       - a merges-list model (``tokenizer.json``, GPT-2's ``vocab.bpe``; :func:`encode_with_merges`): from
         its bytes, repeatedly merge the adjacent pair listed earliest in the merges, the leftmost on ties
         (a pair listed twice counts at its last line, as ``tokenizers`` reads such a list); no whole-piece
         rule.

       The state is these tokens, not the state the model's trainer ended in: an existing model knows no
       such state, and the encoding is what the model does with the text. Pairs are counted over these
       tokens.
    3. **The merge loop continues** (DESIGN.md §3's rule, :func:`continue_merges`): count every pair of
       adjacent tokens, weighted by the piece counts; the greatest ``(count, left bytes, right bytes)``
       wins (ties to the lexicographically greatest pair by raw bytes); replace it in every piece, left to
       right, non-overlapping; recount. A merge whose bytes are already a token (an existing one, or one
       learned earlier in the loop) adds no token. The loop stops after ``num_new_tokens`` new tokens, or
       when no piece has two tokens left.
    4. **Ids.** Every existing token keeps its id and bytes, every existing merge its rank; new tokens take
       ids after the last id in use (special tokens included; holes stay holes). With
       ``move_special_tokens=True`` the new tokens follow the last ordinary id instead, and the special
       tokens move after them, in the order of their old ids (the map old id -> new id is returned, for
       the caller to print). A merges-list model appends each merge of the loop whose pair it does not
       list yet, including merges that add no token (they now reach an existing token another way).

When "continuing on the training corpus" equals "training longer"
    Continuing a model on its own training corpus for ``k`` more tokens gives the tokens of training ``k``
    more from scratch exactly when encoding each training piece with the model gives the trainer's final
    state. For a model DESIGN.md §3's rule trained from single bytes on the same pieces it does, by both
    encoders: a run of tokens in a piece whose outer edges are token boundaries evolves as the same run
    alone would (no merge ever crossed those edges, and tokens only grow), so (i) a piece that is a token
    was merged whole in training too (the whole-piece rule changes nothing), (ii) no token is reached by
    two different splits (no merge ever repeats bytes, so a rank table and its merges list encode alike),
    and (iii) merging in rank order replays the training merges. The tests check it on text full of ties
    and on the shared corpora (and ``naive_bpe.Recount`` never saw a repeated token there).

    It does not hold for a model that rule did not train on those pieces. Another corpus, pattern or
    special tokens give another state. Another trainer of plain BPE from bytes leaves its state equal to
    the encoding too (the argument above does not need the tie rule), but its own continuation would break
    ties its own way (``tokenizers``' ``BpeTrainer``: the smaller pair of ids; SentencePiece: fewer
    characters, then the smaller text), where this one takes DESIGN.md §3's. A vocabulary edited by hand
    can have an encoding no training reaches: a rank table holding ``ab``, ``bc`` and ``abc`` encodes the
    piece ``abc`` as one token (rank rule) while its merges list ``a b``, ``b c``, ``a bc`` leaves ``ab`` +
    ``c`` (merges rule); the continuation starts from that encoding, by definition.

SentencePiece BPE
    Continuing a SentencePiece model continues *its* loop, with its own word cutting, validity rules, tie
    rule and scores: ``tests/support/naive_extend_sentencepiece.py``.

>>> ranks = {bytes([byte]): byte for byte in range(256)} | {b"lo": 256, b"low": 257}
>>> result = extend_rank_model(ranks, {"<|end|>": 258}, r" ?\\w+| ", ["lower lowest<|end|>lowered"], 2)
>>> sorted(result.ranks.items(), key=lambda item: item[1])[-2:], result.special_tokens
([(b'lowe', 259), (b'lower', 260)], {'<|end|>': 258})
>>> extend_rank_model(ranks, {"<|end|>": 258}, r" ?\\w+| ", ["lower lowest<|end|>lowered"], 2,
...                   move_special_tokens=True).special_tokens
{'<|end|>': 260}
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from naive_bpe import merge_words, naive_pieces

# Where new tokens go is the documented placement (ids after the last, specials kept or moved); what this
# reference checks is the merges.
from hf_bpe.extend import place_new_tokens

Pair = tuple[bytes, bytes]


def encode_with_ranks(piece: bytes, ranks: Mapping[bytes, int]) -> list[bytes]:
    """tiktoken's rule: the whole piece when it is a token, else merge the lowest-ranked pair, leftmost."""
    if piece in ranks:
        return [piece]
    parts = [bytes([byte]) for byte in piece]
    _require_tokens(parts, ranks)
    while True:
        found = [(ranks[a + b], i) for i, (a, b) in enumerate(itertools.pairwise(parts)) if a + b in ranks]
        if not found:
            return parts
        _, i = min(found)
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


def encode_with_merges(piece: bytes, merges: Sequence[Pair], tokens: Iterable[bytes] = ()) -> list[bytes]:
    """The merges-list rule: merge the pair listed earliest, leftmost; no whole-piece rule. A pair listed
    twice takes its last line (``tokenizers`` builds a map from the list)."""
    rank = {pair: i for i, pair in enumerate(merges)}
    parts = [bytes([byte]) for byte in piece]
    if tokens:
        _require_tokens(parts, set(tokens))
    while True:
        found = [(rank[pair], i) for i, pair in enumerate(itertools.pairwise(parts)) if pair in rank]
        if not found:
            return parts
        _, i = min(found)
        parts[i:i + 2] = [parts[i] + parts[i + 1]]


def _require_tokens(parts: list[bytes], tokens: Mapping[bytes, int] | set[bytes]) -> None:
    missing = next((part for part in parts if part not in tokens), None)
    if missing is not None:
        raise ValueError(f"the byte {missing!r} is not a token of the model: the corpus cannot be encoded")


@dataclass
class Continuation:
    """What :func:`continue_merges` learned."""

    merges: list[Pair]
    """Every merge of the loop, in order."""
    tokens: list[bytes]
    """The new tokens, in order (merges whose bytes were already tokens add none)."""


def continue_merges(pieces: Mapping[bytes, int], tokens_of: Callable[[bytes], list[bytes]],
                    known: Iterable[bytes], num_new_tokens: int,
                    allowed: Callable[[bytes], bool] | None = None) -> Continuation:
    """DESIGN.md §3's loop, started from ``tokens_of(piece)`` for each piece, until ``num_new_tokens`` tokens
    not in ``known`` are learned (or no pair is left). From single bytes (``tokens_of`` splitting into
    bytes, ``known`` the 256 bytes) it is training from scratch. A pair whose merged bytes are not
    ``allowed`` is never counted (SuperBPE's limits)."""
    words: Counter[tuple[bytes, ...]] = Counter()
    for piece, count in pieces.items():
        words[tuple(tokens_of(piece))] += count
    seen = set(known)
    merges: list[Pair] = []
    learned: list[bytes] = []
    while len(learned) < num_new_tokens:
        pairs: Counter[Pair] = Counter()
        for word, count in words.items():
            for pair in itertools.pairwise(word):
                if allowed is None or allowed(pair[0] + pair[1]):
                    pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))
        merged = best[0] + best[1]
        merges.append(best)
        if merged not in seen:
            seen.add(merged)
            learned.append(merged)
        words = merge_words(words, best)
    return Continuation(merges, learned)


@dataclass
class ExtendedRanks:
    ranks: dict[bytes, int]
    special_tokens: dict[str, int]
    special_id_map: dict[int, int]
    """Old id -> new id of every special token (the identity unless they moved)."""
    continuation: Continuation


def extend_rank_model(ranks: Mapping[bytes, int], special_tokens: Mapping[str, int], pattern: str,
                      documents: Iterable[str], num_new_tokens: int, *,
                      move_special_tokens: bool = False) -> ExtendedRanks:
    """A rank model (tiktoken's rule) extended by ``num_new_tokens`` tokens learned on ``documents``."""
    pieces = naive_pieces(documents, pattern, list(special_tokens))
    continuation = continue_merges(pieces, lambda piece: encode_with_ranks(piece, ranks), ranks,
                                   num_new_tokens)
    new_ids, specials, id_map = place_new_tokens(ranks.values(), special_tokens, continuation.tokens, move_special_tokens=move_special_tokens)
    return ExtendedRanks({**ranks, **new_ids}, specials, id_map, continuation)


@dataclass
class ExtendedMerges:
    vocab: dict[bytes, int]
    merges: list[Pair]
    special_tokens: dict[str, int]
    special_id_map: dict[int, int]
    continuation: Continuation


def extend_merges_model(vocab: Mapping[bytes, int], merges: Sequence[Pair], special_tokens: Mapping[str, int],
                        pattern: str, documents: Iterable[str], num_new_tokens: int, *,
                        move_special_tokens: bool = False) -> ExtendedMerges:
    """A merges-list model (``tokenizer.json``, GPT-2 files) extended by ``num_new_tokens`` tokens."""
    pieces = naive_pieces(documents, pattern, list(special_tokens))
    continuation = continue_merges(pieces, lambda piece: encode_with_merges(piece, merges, vocab), vocab,
                                   num_new_tokens)
    new_ids, specials, id_map = place_new_tokens(vocab.values(), special_tokens, continuation.tokens, move_special_tokens=move_special_tokens)
    listed = set(merges)
    appended = []
    for pair in continuation.merges:
        if pair not in listed:
            listed.add(pair)
            appended.append(pair)
    return ExtendedMerges({**vocab, **new_ids}, [*merges, *appended], specials, id_map, continuation)
