"""Encoders with extra tokens cut out of the text first: the tokens a transformers tokenizer adds at
run time (``BPETokenizer.add_tokens``), matched before the model's BPE; and the look-up of an ordinary
token's id. The transformers layer encodes through these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hf_bpe.model import BPE, IdType, Nulls, _arrow_strings, id_type_for

__all__ = ["AddedTokensEncoder", "added_tokens_encoder", "ordinary_token_id"]


def added_tokens_encoder(model: BPE, tokens: Iterable[tuple[str, int]]) -> AddedTokensEncoder:
    """An encoder that first cuts out ``tokens`` (``(text, id)`` pairs, e.g. the tokens a
    transformers tokenizer adds at run time; the longest match wins, none is disallowed) and
    encodes the text between them with ``model``; :class:`~hf_bpe.BPETokenizer` encodes
    through it.

    >>> import hf_bpe
    >>> encoder = added_tokens_encoder(hf_bpe.get_encoding("gpt2"), [("<|pad|>", 50257)])
    >>> encoder.encode("hello<|pad|>"), encoder.encode_with_offsets("hi <|pad|>")
    ([31373, 50257], ([5303, 220, 50257], [0, 2, 3]))
    """
    tokens = list(tokens)
    largest_id = max([model.n_vocab - 1, *(token_id for _, token_id in tokens)])
    return AddedTokensEncoder(model._core, model._core.added_tokens_policy(tokens), largest_id)


def ordinary_token_id(model: BPE, token: bytes) -> int | None:
    """The id of the ordinary (mergeable) token ``token`` of ``model``, or ``None`` when it is not one
    (special tokens are not looked up; see :meth:`~hf_bpe.BPE.encode_single_token`).

    >>> import hf_bpe
    >>> enc = hf_bpe.get_encoding("gpt2")
    >>> ordinary_token_id(enc, b" world"), ordinary_token_id(enc, b"<|endoftext|>")
    (995, None)
    """
    return model._ordinary_id(token)


class AddedTokensEncoder:
    """A model's encoder with extra tokens cut out of the text first (see
    :func:`added_tokens_encoder`). Immutable, and safe to share between threads."""

    __slots__ = ("_core", "_largest_id", "_policy")

    def __init__(self, core: Any, policy: Any, largest_id: int) -> None:
        self._core = core
        self._policy = policy
        self._largest_id = largest_id

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``: the added tokens' where they match, the model's in between."""
        return self._core.encode(text, self._policy)  # type: ignore[no-any-return]

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        """Like :meth:`encode`, also returning the character offset where each token starts (see
        :meth:`BPE.encode_with_offsets`)."""
        return self._core.encode_with_offsets(text, self._policy)  # type: ignore[no-any-return]

    def encode_with_spans(self, text: str, within: tuple[int, int] | None = None) -> tuple[list[int], list[tuple[int, int]]]:
        """Like :meth:`encode`, also returning the characters each token covers (see
        :func:`hf_bpe.model.encode_with_spans`); with ``within`` (characters ``start, end``), of that part
        of ``text`` alone, the spans in all of it, as `tokenizers` gives them for text between tokens
        it cut out first."""
        return self._core.encode_with_spans(text, self._policy, within)  # type: ignore[no-any-return]

    def encode_batch(self, texts: Sequence[str], *, num_threads: int | None = None) -> list[list[int]]:
        """:meth:`encode` on each text, in parallel (GIL released); ``None`` threads: every core."""
        return self._core.encode_batch(texts, self._policy, num_threads)  # type: ignore[no-any-return]

    def encode_rows(self, texts: Sequence[str], *, num_threads: int | None = None) -> Any:
        """:meth:`encode_batch`, the ids kept in the core until ``padded`` lays them out as NumPy arrays."""
        return self._core.encode_rows(texts, self._policy, num_threads)

    def encode_batch_flat(self, texts: Sequence[str], *, num_threads: int | None = None) -> tuple[bytes, bytes]:
        """:meth:`encode_batch` as two buffers instead of lists of ints: every text's ids one after the
        other (native-endian ``uint32``), and each text's number of ids (native-endian ``uint64``),
        for ``numpy.frombuffer``."""
        return self._core.encode_batch_flat(texts, self._policy, num_threads)  # type: ignore[no-any-return]

    def encode_arrow(
        self,
        texts: Any,
        *,
        num_threads: int | None = None,
        dtype: IdType = "uint32",
        nulls: Nulls = "raise",
        prefix: Sequence[int] = (),
        suffix: Sequence[int] = (),
    ) -> Any:
        """:meth:`encode` on each string of an Arrow column, Arrow in and Arrow out as
        :meth:`BPE.encode_arrow` (``texts``, ``num_threads``, ``dtype``, ``nulls``), with the ids
        ``prefix`` before and ``suffix`` after every row that is not null (a BOS or EOS token).
        ``dtype="auto"`` counts the added tokens' and the framing ids with the vocabulary's.

        >>> import hf_bpe, pyarrow as pa
        >>> encoder = added_tokens_encoder(hf_bpe.get_encoding("gpt2"), [("<x>", 50257)])
        >>> encoder.encode_arrow(pa.array(["a<x>b", ""]), suffix=[50256]).to_pylist()
        [[64, 50257, 65, 50256], [50256]]
        """
        id_type = id_type_for(dtype, max([self._largest_id, *prefix, *suffix]))
        return self._core.encode_arrow(_arrow_strings(texts), self._policy, num_threads, id_type, nulls,
                                       list(prefix), list(suffix))
