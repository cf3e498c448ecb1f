"""Streams: text that arrives in parts encoded exactly, ids decoded without half characters.

:meth:`hf_bpe.BPE.encode_iterable` yields the ids of ``"".join(texts)`` while the texts arrive. The
core (``crates/core/src/stream.rs``) encodes what later text cannot change and holds back the rest:
the last two pieces (for the named patterns, no continuation can change any earlier piece) and
the last bytes that could start an allowed special token. So memory does not grow with the input.

:meth:`hf_bpe.BPE.stream_decoder` (a :class:`StreamDecoder`; :func:`decode_parts` over an iterable of ids)
decodes ids as they come, holding back the bytes of a character split between tokens, so the text
they give, joined, is exactly ``decode(all ids)``.

>>> import hf_bpe
>>> enc = hf_bpe.get_encoding("cl100k_base")
>>> ids = list(enc.encode_iterable(["naïve caf", "é ☕"]))
>>> ids == enc.encode("naïve café ☕")
True
>>> decoder = enc.stream_decoder()
>>> [decoder.feed(token) for token in enc.encode("☕ ok")], decoder.finish()  # "☕" spans two tokens
(['', '☕', ' ok'], '')
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

from hf_bpe import _core

__all__ = [
    "BLOCK_BYTES", "DEFAULT_MAX_PIECE_BYTES", "FEED_CHARS", "REPLACE_EACH_BYTE", "StreamDecoder",
    "decode_parts", "encode_parts"
]

DEFAULT_MAX_PIECE_BYTES = 1 << 24
"""``encode_iterable``'s default limit on text held without a settled piece boundary (16 MiB)."""

BLOCK_BYTES = 1 << 16
"""How much text the core gathers before it encodes (tests make it tiny to stress the boundaries)."""

FEED_CHARS = 1 << 20
"""A longer text is fed in slices of this many characters, so one huge text does not become one
huge list of ids at once."""

REPLACE_EACH_BYTE = "hf_bpe.replace_each_byte"
"""A codec error handler: one U+FFFD per invalid byte, as SentencePiece decodes (Python's
``"replace"`` gives one per maximal invalid sequence, as byte-level models decode)."""


def _replace_each_byte(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "\ufffd", error.start + 1


codecs.register_error(REPLACE_EACH_BYTE, _replace_each_byte)


def encode_parts(stream: _core.TextStream, texts: Iterator[Any]) -> Iterator[int]:
    """The ids of ``texts`` fed to the core's ``stream``, one by one as they settle."""
    # chain flattens the lists in C: yielding each id from Python would halve the throughput.
    return itertools.chain.from_iterable(_settled_lists(stream, texts))


def _settled_lists(stream: _core.TextStream, texts: Iterator[Any]) -> Iterator[list[int]]:
    for part in _feedable(texts, max(1, BLOCK_BYTES // 4)):
        ids = stream.feed(part)
        if ids:
            yield ids
    yield stream.finish()


def _feedable(texts: Iterator[Any], gather_chars: int) -> Iterator[str]:
    """The texts joined into parts of ``gather_chars`` to :data:`FEED_CHARS` characters (short lines
    would cost a call each), a high surrogate at the end of a part moved to the next, where it pairs
    with a low one as it does in the joined text (lone ones become U+FFFD, as in encode)."""
    gathered: list[str] = []
    size = 0
    carry = ""
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"encode_iterable expects an iterable of str, got an item of type {type(text).__name__}")
        gathered.append(text)
        size += len(text)
        if size < gather_chars:
            continue
        joined = "".join(gathered)
        gathered.clear()
        size = 0
        for start in range(0, len(joined), FEED_CHARS):
            part = carry + joined[start : start + FEED_CHARS]
            carry = ""
            if "\ud800" <= part[-1] <= "\udbff":
                carry, part = part[-1], part[:-1]
            yield part
    yield carry + "".join(gathered)


class StreamDecoder:
    """Decodes ids that arrive one at a time (or in groups) to text, never emitting part of a
    character: the bytes of a character split between tokens wait for the token that completes it.

    The texts :meth:`feed` returns, followed by :meth:`finish`'s, join to exactly
    ``model.decode(all ids, errors=errors)``: invalid bytes follow ``errors`` as soon as they are
    known to be invalid, and a character still incomplete at :meth:`finish` is decoded as ``decode``
    would decode it (``"replace"``: one U+FFFD). Made by :meth:`hf_bpe.BPE.stream_decoder`.

    >>> import hf_bpe
    >>> enc = hf_bpe.get_encoding("gpt2")
    >>> decoder = enc.stream_decoder()
    >>> [decoder.feed(token) for token in enc.encode("🦀 crab")]  # "🦀" is split between three tokens
    ['', '', '🦀', ' crab']
    """

    def __init__(self, core: Any, errors: str = "replace", *, each_byte: bool = False) -> None:
        self._core = core
        self._errors = REPLACE_EACH_BYTE if each_byte and errors == "replace" else errors
        codecs.lookup_error(self._errors)  # an unknown handler fails here, not at the first bad byte
        self._start()

    def _start(self) -> None:
        self._bytes: _core.IdStream = self._core.decode_stream()
        self._text = codecs.getincrementaldecoder("utf-8")(errors=self._errors)

    def feed(self, ids: int | Iterable[int]) -> str:
        """The text the ids complete: the characters whose last byte they bring, possibly ``""``."""
        if isinstance(ids, int):
            batch: Sequence[int] = (ids,)
        elif isinstance(ids, Sequence) or hasattr(ids, "__len__"):  # lists, tuples, numpy arrays
            batch = cast(Sequence[int], ids)
        else:
            batch = list(ids)
        text: str = self._text.decode(self._bytes.feed(batch))
        return text

    def finish(self) -> str:
        """The end of the text (bytes of an incomplete character, decoded by ``errors``); the decoder
        then starts a new sequence."""
        text: str = self._text.decode(b"", final=True)
        self._start()
        return text


def decode_parts(decoder: StreamDecoder, ids: Iterable[int | Iterable[int]]) -> Iterator[str]:
    """The texts ``decoder`` makes of ``ids`` (each an id or a group of ids), empty ones skipped."""
    for item in ids:
        text = decoder.feed(item)
        if text:
            yield text
    text = decoder.finish()
    if text:
        yield text
