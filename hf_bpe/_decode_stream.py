"""``hf_bpe.DecodeStream``: `tokenizers`' incremental detokenizer (``tokenizers.decoders.DecodeStream``)
for hf_bpe models and for the tokenizers :func:`hf_bpe.patch_transformers` swaps in.

Serving stacks decode generated ids one at a time with ``DecodeStream(skip_special_tokens=...)`` and
``stream.step(tokenizer, id)``, which returns the text the id completes, or ``None`` while the text so
far ends inside a character. This class runs the same algorithm on the same decode (an exact one:
:meth:`hf_bpe.BPE.decode`, or the tokenizer's own ``decode``), so it returns the same sequence of
strings as `tokenizers`' on the same ids, ``None`` included: each step decodes the ids since the last
text it returned, plus a few before them (the prefix), and returns what the decode adds to the
prefix's decode unless it ends with U+FFFD (a character not yet complete).

For text that must never be cut inside a character and need not match `tokenizers` step by step,
:meth:`hf_bpe.BPE.stream_decoder` is cheaper (it never decodes an id twice).

>>> import hf_bpe
>>> enc = hf_bpe.get_encoding("gpt2")
>>> stream = hf_bpe.DecodeStream(skip_special_tokens=True)
>>> [stream.step(enc, token) for token in enc.encode("🦀 crab<|endoftext|>", allowed_special="all")]
[None, None, '🦀', ' crab', None]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hf_bpe.errors import DecodeStreamError
from hf_bpe.model import BPE

__all__ = ["DecodeStream"]


class DecodeStream:
    """Incremental decoding as ``tokenizers.decoders.DecodeStream``: ``step(tokenizer, id)`` adds an
    id (or a list of ids) and returns the text it completes, or ``None``.

    ``tokenizer`` is an :class:`hf_bpe.BPE` (its special tokens are the ones
    ``skip_special_tokens`` skips), a transformers tokenizer (its ``backend_tokenizer`` decodes: on
    :func:`hf_bpe.patch_transformers`' backend, hf_bpe does), or anything with `tokenizers`'
    ``decode(ids, skip_special_tokens=...)`` (a ``tokenizers.Tokenizer``). ``ids`` are ids already
    generated (a prompt), whose text is not returned.

    >>> import hf_bpe
    >>> enc = hf_bpe.get_encoding("cl100k_base")
    >>> stream = hf_bpe.DecodeStream(enc.encode("Bonjour"))
    >>> [stream.step(enc, token) for token in enc.encode(" ☕ ok")]
    [None, ' ☕', ' ok']
    """

    def __init__(self, ids: Sequence[int] | None = None, skip_special_tokens: bool | None = False) -> None:
        self.skip_special_tokens = bool(skip_special_tokens)
        self._ids: list[int] = [_checked_id(token) for token in ids or ()]
        self._prefix = ""
        self._prefix_index = 0

    def step(self, tokenizer: Any, id: int | Sequence[int]) -> str | None:
        """Add ``id`` (an int, or a list of ids) and return the new text, or ``None`` when there is none
        yet (the text ends inside a character, or the ids add no text)."""
        decode = _decoder(tokenizer, self.skip_special_tokens)
        new = [_checked_id(id)] if isinstance(id, int) else [_checked_id(token) for token in id]
        ids = self._ids
        if not self._prefix and ids:
            prefix = decode(ids)
            if not prefix.endswith("\ufffd"):
                self._prefix, self._prefix_index = prefix, len(ids)
        ids.extend(new)
        text = decode(ids)
        # tokenizers compares lengths in UTF-8 bytes
        if len(text.encode("utf-8", "surrogatepass")) <= len(self._prefix.encode("utf-8", "surrogatepass")) \
                or text.endswith("\ufffd"):
            return None
        if not text.startswith(self._prefix):
            raise DecodeStreamError(
                f"invalid prefix while decoding the stream at id {ids[-1]}: expected the text to start with "
                f"{self._prefix!r}, got {text!r}"
            )
        added = text[len(self._prefix):]
        kept = len(ids) - self._prefix_index
        self._ids = ids[self._prefix_index:]
        self._prefix = decode(self._ids)
        self._prefix_index = kept
        return added

    def __repr__(self) -> str:
        return f"DecodeStream(skip_special_tokens={self.skip_special_tokens}, pending ids={len(self._ids)})"


def _checked_id(token: Any) -> int:
    """``token`` as an id, which `tokenizers` takes as an unsigned 32-bit integer."""
    if isinstance(token, bool) or not isinstance(token, int) and not hasattr(token, "__index__"):
        raise TypeError(f"DecodeStream.step takes an id (an int) or a list of ids, got {type(token).__name__} {token!r:.40}")
    value = int(token)
    if not 0 <= value < 2**32:
        raise OverflowError(f"token id {value} is out of range (ids are unsigned 32-bit integers)")
    return value


def _decoder(tokenizer: Any, skip_special_tokens: bool) -> Any:
    """``ids -> text`` for ``tokenizer``, as :class:`DecodeStream` takes it."""
    if isinstance(tokenizer, BPE):
        if not skip_special_tokens:
            return tokenizer.decode
        special = set(tokenizer.special_tokens.values())
        return lambda ids: tokenizer.decode([token for token in ids if token not in special])
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)  # a transformers fast tokenizer
    decode = getattr(backend, "decode", None)
    if decode is None:
        raise TypeError(
            f"DecodeStream.step takes an hf_bpe.BPE, a transformers tokenizer or a tokenizers.Tokenizer, got "
            f"{type(tokenizer).__name__}"
        )
    return lambda ids: decode(ids, skip_special_tokens=skip_special_tokens)
