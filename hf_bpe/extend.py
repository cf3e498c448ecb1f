"""Extending a trained tokenizer: new tokens learned on a new corpus, every existing id kept.

:func:`extend` adds ``num_new_tokens`` tokens to a model (a language or a domain the model splits
badly) so that a language model's embeddings still line up: every existing token keeps its id and
bytes, every existing merge its order, and the new tokens take the ids after the last one.

The rule (``tests/support/naive_extend_bpe.py`` is its readable reference):

1. the corpus is cut as the model's own training would cut it: split on the model's special tokens,
   pre-tokenized with its pattern, distinct pieces counted (:func:`hf_bpe.train.count_pieces`);
2. each distinct piece starts as the tokens the model encodes it to, by the model's own rule (the
   whole-piece rule of a rank model, the merges list of a merges-list model);
3. the merge loop of :func:`hf_bpe.train` continues from there: the most frequent adjacent pair is
   merged first, ties go to the greatest ``(bytes of left, bytes of right)``; a merge whose bytes are
   already a token adds none; the loop stops after ``num_new_tokens`` new tokens (or when no piece has
   two tokens left);
4. new tokens take the ids after the last id in use, special tokens included (holes stay holes); with
   ``move_special_tokens=True`` they follow the last ordinary id and the special tokens move after
   them, in the order of their old ids. A merges-list model also appends the loop's merges it does
   not list yet (merges into tokens it already has included: they reach that token another way).

SentencePiece BPE models continue SentencePiece's own loop instead (its words, validity rules, tie
rule and scores; ``tests/support/naive_extend_sentencepiece.py``).

>>> import hf_bpe
>>> base = hf_bpe.train(["low lower lowest"], 260, show_progress=False)
>>> longer = extend(base, ["newer newest newer"], 2, show_progress=False)
>>> longer.n_vocab - base.n_vocab, [longer.decode_single_token_bytes(i) for i in (260, 261)]
(2, [b'we', b'ne'])
>>> all(longer.decode_single_token_bytes(i) == base.decode_single_token_bytes(i) for i in range(260))
True
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, overload

from hf_bpe._corpus import Corpus, Paths
from hf_bpe.model import BPE, as_model, missing_bytes_rule
from hf_bpe.sentencepiece_bpe import NORMAL, Piece
from hf_bpe.train import _check_num_threads, _progress, count_pieces
from hf_bpe.train_sentencepiece import continue_learning, with_vocab_size

__all__ = ["extend", "place_new_tokens"]


@overload
def extend(model: BPE, corpus: Corpus | None = ..., num_new_tokens: int | None = ..., *,
           files: Paths | None = ..., text_column: str = ..., move_special_tokens: Literal[False] = ...,
           show_progress: bool = ..., num_threads: int | None = ..., name: str | None = ...) -> BPE: ...


@overload
def extend(model: BPE, corpus: Corpus | None = ..., num_new_tokens: int | None = ..., *,
           files: Paths | None = ..., text_column: str = ..., move_special_tokens: Literal[True],
           show_progress: bool = ..., num_threads: int | None = ...,
           name: str | None = ...) -> tuple[BPE, dict[int, int]]: ...


def extend(
    model: BPE,
    corpus: Corpus | None = None,
    num_new_tokens: int | None = None,
    *,
    files: Paths | None = None,
    text_column: str = "text",
    move_special_tokens: bool = False,
    show_progress: bool = True,
    num_threads: int | None = None,
    name: str | None = None,
) -> BPE | tuple[BPE, dict[int, int]]:
    """``model`` with ``num_new_tokens`` more tokens learned on the corpus; see :mod:`hf_bpe.extend`.

    ``model`` is an :class:`hf_bpe.BPE` of any kind (a rank model such as ``hf_bpe.get_encoding
    ("cl100k_base")`` or a ``.tiktoken`` file, a merges list from ``tokenizer.json`` or GPT-2's files)
    or an ``hf_bpe.tiktoken.Encoding``. The corpus is given as for :func:`hf_bpe.train`: ``files=``
    (text files, each a document), an iterable of ``str`` or a ``datasets`` dataset (its
    ``text_column``). Fewer tokens come back (with a warning) when the corpus runs out of pairs.

    Returns the new model. With ``move_special_tokens=True`` the new tokens take the ids right after
    the ordinary ones and the special tokens move after them; then a pair ``(model, id_map)`` comes
    back, ``id_map`` mapping each special token's old id to its new id (the rows of an embedding
    matrix to move). ``name`` names the new model (default: the old name with ``+N``).

    >>> import hf_bpe
    >>> base = hf_bpe.train(["aaab aab"], 258, pattern=r"\\w+| ", special_tokens=["<|end|>"], show_progress=False)
    >>> base.special_tokens
    {'<|end|>': 258}
    >>> extend(base, ["abab ab"], 1, show_progress=False).special_tokens
    {'<|end|>': 258}
    >>> moved, id_map = extend(base, ["abab ab"], 1, move_special_tokens=True, show_progress=False)
    >>> moved.decode_single_token_bytes(258), moved.special_tokens, id_map
    (b'ab', {'<|end|>': 259}, {258: 259})
    """
    model = as_model(model)
    wanted = _num_new_tokens(num_new_tokens)
    _check_num_threads(num_threads)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if model.sentencepiece is not None:
        if move_special_tokens:
            raise ValueError(f"{model!r} is a SentencePiece model: its meta pieces (unk, control, byte pieces) keep "
                             "their ids and the new pieces follow the last one; drop move_special_tokens")
        return _extend_sentencepiece(model, corpus, files, text_column, wanted, show_progress, num_threads, name)
    counts = count_pieces(corpus, files=files, pattern=model.pattern, special_tokens=list(model.special_tokens),
                          show_progress=show_progress, num_threads=num_threads, text_column=text_column)
    with _progress(show_progress, total=wanted, unit=" tokens", desc="Extending") as bar:
        tokens, merges = model._core.extend_merges(counts, wanted, bar.update if bar is not None else None,
                                                   num_threads)
    if len(tokens) < wanted:
        _warn_fewer(len(tokens), wanted, "every piece became a single token", stacklevel=3)
    ranks = model.mergeable_ranks
    new_ids, specials, id_map = place_new_tokens(ranks.values(), model.special_tokens, tokens,
                                                 move_special_tokens=move_special_tokens)
    name = name if name is not None else (f"{model.name}+{len(tokens)}" if model.name else None)
    if model.kind == "merges":
        listed = model.merges
        seen = set(listed)
        for pair in merges:
            if pair not in seen:
                seen.add(pair)
                listed.append(pair)
        extended = BPE.from_merges({**ranks, **new_ids}, listed, model.pattern, specials,
                                   ignore_merges=bool(model._core.ignore_merges),
                                   drop_missing_bytes=missing_bytes_rule(model) if model._core.missing_bytes else False,
                                   name=name)
    else:
        extended = BPE({**ranks, **new_ids}, model.pattern, specials, name=name)
    if move_special_tokens:
        return extended, id_map
    return extended


def place_new_tokens(
    ordinary_ids: Iterable[int],
    special_tokens: Mapping[str, int],
    new_tokens: Sequence[bytes],
    *,
    move_special_tokens: bool = False,
) -> tuple[dict[bytes, int], dict[str, int], dict[int, int]]:
    """Ids for ``new_tokens`` added to a vocabulary of ``ordinary_ids`` and ``special_tokens``: after
    the last id in use, or, with ``move_special_tokens``, after the last ordinary id with the special
    tokens moved after them (in the order of their old ids). Returns the new tokens' ids, the special
    tokens' ids, and each special token's old id -> new id (the identity when they stay).

    >>> place_new_tokens(range(256), {"<|end|>": 300}, [b"ab"])
    ({b'ab': 301}, {'<|end|>': 300}, {300: 300})
    >>> place_new_tokens(range(256), {"<|end|>": 300}, [b"ab"], move_special_tokens=True)
    ({b'ab': 256}, {'<|end|>': 257}, {300: 257})
    """
    last_ordinary = max(ordinary_ids, default=-1)
    if not move_special_tokens:
        start = max([last_ordinary, *special_tokens.values()]) + 1
        return ({token: start + i for i, token in enumerate(new_tokens)}, dict(special_tokens),
                {token_id: token_id for token_id in special_tokens.values()})
    start = last_ordinary + 1
    new_ids = {token: start + i for i, token in enumerate(new_tokens)}
    after = start + len(new_tokens)
    order = sorted(special_tokens.items(), key=lambda item: item[1])
    id_map = {old: after + i for i, (_, old) in enumerate(order)}
    return new_ids, {text: id_map[old] for text, old in order}, id_map


def _extend_sentencepiece(model: BPE, corpus: Corpus | None, files: Paths | None, text_column: str, wanted: int,
                          show_progress: bool, num_threads: int | None, name: str | None) -> BPE:
    """SentencePiece's loop continued (see the module): words counted with the model's normalizer and
    training options (its ``TrainerSpec``), each encoded by the model, then merged by SentencePiece's rule."""
    spec = model.sentencepiece
    assert spec is not None
    learned = continue_learning(spec, corpus, files=files, text_column=text_column, num_new=wanted,
                                show_progress=show_progress, num_threads=num_threads)
    if len(learned) < wanted:
        _warn_fewer(len(learned), wanted, "no pair of pieces that may merge is left", stacklevel=4)
    pieces = (*spec.pieces, *(Piece(text, score, NORMAL) for text, score in learned))
    trainer_spec = with_vocab_size(spec.trainer_spec, len(pieces)) if spec.trainer_spec else b""
    extended = dataclasses.replace(spec, pieces=pieces, trainer_spec=trainer_spec)
    name = name if name is not None else (f"{model.name}+{len(learned)}" if model.name else None)
    return BPE.from_sentencepiece(extended, name=name)


def _warn_fewer(learned: int, wanted: int, why: str, *, stacklevel: int) -> None:
    warnings.warn(f"the corpus allows only {learned} new tokens ({why}), not {wanted}", stacklevel=stacklevel)


def _num_new_tokens(value: object) -> int:
    if value is None:
        raise TypeError("num_new_tokens is required: how many tokens to add (e.g. num_new_tokens=1000)")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"num_new_tokens must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"num_new_tokens must be 0 or more, got {value}")
    return value
