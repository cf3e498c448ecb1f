"""Counting tokens without building per-text lists: how often each id occurs in a corpus (from its
texts or from its piece counts), and how many ids each of many UTF-8 byte strings encodes to. The
audit and ``hf-bpe count`` count through these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hf_bpe import _core
from hf_bpe.model import _NOTHING, BPE, AllowedSpecial

__all__ = ["count_utf8_batch", "piece_token_counts", "token_counts"]


def token_counts(model: BPE, texts: Iterable[str], *, num_threads: int | None = None) -> Any:
    """How often each id occurs in the ordinary encodings of ``texts``: a NumPy array of
    ``n_vocab`` counts (index = id), encoded in parallel without building per-text lists.

    >>> import hf_bpe
    >>> counts = token_counts(hf_bpe.get_encoding("gpt2"), ["hello world", "hello"])
    >>> int(counts[31373]), int(counts.sum())
    (2, 3)
    """
    import numpy as np

    if isinstance(texts, str):
        raise TypeError("token_counts expects an iterable of str, got a single str")
    ids, _ = model._core.encode_batch_flat(texts, None, num_threads)
    return np.bincount(np.frombuffer(ids, dtype=np.uint32), minlength=model.n_vocab)


def piece_token_counts(model: BPE, counts: _core.PieceCounts) -> Any:
    """How often encoding the counted corpus with ``model`` produces each id, from its piece counts
    alone (a :class:`~hf_bpe.train.PieceCounts` from :func:`hf_bpe.train.count_pieces`): each distinct
    piece is encoded once, as encoding a text that splits into it does (the whole-piece rule
    included), and its ids count as often as the piece occurred. A NumPy array of ``n_vocab`` counts
    (index = id), the same as :func:`token_counts` of the corpus when the table was counted with this
    model's pattern and special tokens; memory is the array, never a copy of the table.

    >>> import hf_bpe
    >>> from hf_bpe.train import count_pieces
    >>> texts = ["the cat", "the hat"]
    >>> enc = hf_bpe.get_encoding("gpt2")
    >>> counts = count_pieces(texts, show_progress=False)
    >>> bool((piece_token_counts(enc, counts) == token_counts(enc, texts)).all())
    True
    """
    import numpy as np

    if not isinstance(counts, _core.PieceCounts):
        raise TypeError(f"counts must be a PieceCounts (from hf_bpe.train.count_pieces), got {type(counts).__name__}")
    return np.array(model._core.piece_token_counts(counts), dtype=np.int64)


def count_utf8_batch(
    model: BPE, parts: Sequence[bytes | str], *, allowed_special: AllowedSpecial = _NOTHING,
    num_threads: int | None = None
) -> list[int]:
    """The number of ids of each of ``parts``, UTF-8 bytes (as read from a file) or ``str``, counted
    in parallel without making the ids (nor a ``str`` of bytes): ``len(model.encode_ordinary(text))``
    for each text (a bytes part's decoded), with the special tokens of ``allowed_special`` (``"all"``:
    every one) cut out as one id each. ``ValueError`` naming the part and byte when bytes are not UTF-8.

    >>> import hf_bpe
    >>> count_utf8_batch(hf_bpe.get_encoding("gpt2"), [b"hello world", "caf\u00e9", b"<|endoftext|>"])
    [2, 3, 7]
    """
    if isinstance(parts, (str, bytes, bytearray)):
        raise TypeError(f"count_utf8_batch expects a sequence of bytes or str, got a single {type(parts).__name__}"
                        " (put it in a list to count it)")
    if allowed_special is _NOTHING or not allowed_special:
        return model._core.count_utf8_batch(list(parts), None, num_threads)  # type: ignore[no-any-return]
    policy = model._policy(allowed_special, ())
    return model._core.count_utf8_batch(list(parts), policy, num_threads)  # type: ignore[no-any-return]
