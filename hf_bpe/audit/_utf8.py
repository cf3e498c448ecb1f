"""Where a byte string can sit in UTF-8 text: the partial characters at its edges and the bytes that
complete them.

A token of a byte-level vocabulary need not be valid UTF-8: it may start inside a character
(continuation bytes ``10xxxxxx`` first), end inside one (a lead byte without all its continuation
bytes), or hold bytes that no UTF-8 text contains (``0xC0``, ``0xFF``, a surrogate's ``0xED 0xA0``).

>>> edges(b" \\xe6\\x9c")                  # a space, then two of the three bytes of a character
Edges(head=0, tail=b'\\xe6\\x9c')
>>> kind(b" \\xe6\\x9c"), kind(b"\\x88 x"), kind(b"\\x88\\xe6"), kind(b"\\xff"), kind(b"ok")
('lead', 'continuation', 'mixed', 'invalid', None)
"""

from __future__ import annotations

import codecs
import functools
import itertools
import random
from collections.abc import Iterable
from dataclasses import dataclass

CONTINUATIONS = range(0x80, 0xC0)

KINDS = {
    "lead": "ends inside a character: a lead byte without all its continuation bytes (starts on a boundary)",
    "continuation": "starts inside a character: continuation bytes first (ends on a boundary)",
    "mixed": "starts and ends inside characters",
    "invalid": "holds bytes that no UTF-8 text contains (0xC0, 0xC1, 0xF5-0xFF, a surrogate, ...)",
}
"""The kinds of partial UTF-8 tokens (:func:`kind`), with what each means."""


@dataclass(frozen=True)
class Edges:
    """How a byte string sits in UTF-8 text: ``head`` continuation bytes that finish a character
    begun before it, and ``tail``, the unfinished character it ends with (``b""`` if none)."""

    head: int
    tail: bytes


WHOLE = Edges(0, b"")
"""The edges of valid UTF-8: none."""


def is_continuation(byte: int) -> bool:
    return 0x80 <= byte < 0xC0


def edges(data: bytes) -> Edges | None:
    """The partial characters at the edges of ``data``, or ``None`` when no UTF-8 text contains it.

    >>> edges(b"\\x9c\\x88a"), edges(b"\\xed\\xa0"), edges(b"\\x80\\x80\\x80\\x80")
    (Edges(head=2, tail=b''), None, None)
    """
    try:
        data.decode("utf-8")
        return WHOLE
    except UnicodeDecodeError:
        pass
    head = 0
    while head < len(data) and is_continuation(data[head]):
        head += 1
    if head > 3:  # a character has at most three continuation bytes
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(data[head:], final=False)
    except UnicodeDecodeError:
        return None
    tail = decoder.getstate()[0]
    if tail and not _completable(tail):  # 0xED 0xA0 starts only surrogates
        return None
    return Edges(head, tail)


def kind(data: bytes) -> str | None:
    """``None`` for valid UTF-8, else the kind of partial token (see :data:`KINDS`)."""
    try:
        data.decode("utf-8")
        return None
    except UnicodeDecodeError:
        pass
    found = edges(data)
    if found is None:
        return "invalid"
    if found.head and found.tail:
        return "mixed"
    return "continuation" if found.head else "lead"


def _lead_bytes(length: int) -> range:
    return {2: range(0xC2, 0xE0), 3: range(0xE0, 0xF0), 4: range(0xF0, 0xF5)}[length]


def _length(lead: int) -> int:
    return 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def char_length(lead: int) -> int:
    """The length in bytes of the character that lead byte ``lead`` (0xC2 to 0xF4) starts."""
    return _length(lead)


def _second(lead: int) -> range:
    """The bytes that may follow ``lead`` (UTF-8 forbids overlong forms, surrogates, > U+10FFFF)."""
    return {0xE0: range(0xA0, 0xC0), 0xED: range(0x80, 0xA0), 0xF0: range(0x90, 0xC0),
            0xF4: range(0x80, 0x90)}.get(lead, CONTINUATIONS)


def _products(prefixes: list[tuple[bytes, list[range]]], limit: int | None, seed: int) -> list[bytes]:
    """The byte strings ``prefix + one byte of each range``, for each ``(prefix, ranges)`` in order;
    with ``limit``, at most that many: an equal share of each prefix (its first and a deterministic
    sample of the rest), so every lead byte is represented."""
    groups: list[list[bytes]] = []
    generator = random.Random(seed)
    share = None if limit is None else max(1, -(-limit // max(len(prefixes), 1)))
    for prefix, ranges in prefixes:
        size = _size(ranges)
        if share is None or size <= share:
            chosen: Iterable[int] = range(size)
        else:
            first = (share + 1) // 2
            chosen = [*range(first), *sorted(generator.sample(range(first, size), share - first))]
        group = []
        for index in chosen:
            rest = []
            for options in reversed(ranges):
                index, digit = divmod(index, len(options))
                rest.append(options[digit])
            group.append(prefix + bytes(reversed(rest)))
        groups.append(group)
    if limit is None:
        return [item for group in groups for item in group]
    interleaved = (item for row in itertools.zip_longest(*groups) for item in row if item is not None)
    return list(itertools.islice(interleaved, limit))


def _size(ranges: list[range]) -> int:
    size = 1
    for options in ranges:
        size *= len(options)
    return size


def _completable(tail: bytes) -> bool:
    """Whether continuation bytes can finish ``tail`` into one character."""
    return (
        bool(tail) and 0xC2 <= tail[0] <= 0xF4 and len(tail) < _length(tail[0])
        and all(map(is_continuation, tail[1:])) and (len(tail) == 1 or tail[1] in _second(tail[0]))
    )


def head_completions(continuations: bytes, *, limit: int | None = None, seed: int = 0) -> list[bytes]:
    """Byte strings ``h`` such that ``h + continuations`` is one whole character, shortest
    characters first; with ``limit``, at most that many, spread over all of them (deterministic).

    >>> head_completions(b"\\x80")[:3], len(head_completions(b"\\x80\\x80"))
    ([b'\\xc2', b'\\xc3', b'\\xc4'], 271)
    """
    return list(_heads(bytes(continuations), limit, seed))


@functools.lru_cache(maxsize=4096)
def _heads(continuations: bytes, limit: int | None, seed: int) -> tuple[bytes, ...]:
    if not 1 <= len(continuations) <= 3 or not all(map(is_continuation, continuations)):
        return ()
    prefixes: list[tuple[bytes, list[range]]] = []
    for length in range(len(continuations) + 1, 5):
        middle = length - 1 - len(continuations)
        for lead in _lead_bytes(length):
            if middle == 0:
                if continuations[0] in _second(lead):
                    prefixes.append((bytes([lead]), []))
            else:
                prefixes.append((bytes([lead]), [_second(lead)] + [CONTINUATIONS] * (middle - 1)))
    return tuple(_products(prefixes, limit, seed))


def tail_completions(tail: bytes, *, limit: int | None = None, seed: int = 0) -> list[bytes]:
    """Byte strings ``c`` such that ``tail + c`` is one whole character (``tail`` is an unfinished
    character: a lead byte and maybe some of its continuation bytes).

    >>> len(tail_completions(b"\\xe6\\x9c")), tail_completions(b"\\xed\\xa0")
    (64, [])
    """
    return list(_tails(bytes(tail), limit, seed))


@functools.lru_cache(maxsize=4096)
def _tails(tail: bytes, limit: int | None, seed: int) -> tuple[bytes, ...]:
    if not _completable(tail):
        return ()
    missing = _length(tail[0]) - len(tail)
    ranges = [_second(tail[0]) if len(tail) == 1 else CONTINUATIONS] + [CONTINUATIONS] * (missing - 1)
    return tuple(_products([(b"", ranges)], limit, seed))

