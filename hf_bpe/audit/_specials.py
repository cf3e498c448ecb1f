"""Special tokens that collide with ordinary text or with each other.

A special token's text can also be ordinary text: ``encode_ordinary`` gives ordinary ids for it, and
so does ``encode`` with ``disallowed_special=()``. When those are one ordinary token, the same string
has two ids, and a model learns two meanings for it.
Two special tokens *overlap* when one contains the other or one's end is the other's start: text
matching both is cut by the longest-match rule, so one of them may never be matched there.

>>> import hf_bpe
>>> ranks = {bytes([b]): b for b in range(256)} | {b"eos": 256}
>>> model = hf_bpe.BPE(ranks, "gpt2", special_tokens={"eos": 257, "eos!": 258})
>>> [(found.text, found.ordinary_ids, found.also_ordinary_token) for found in special_tokens(model)]
[('eos', [256], True), ('eos!', [256, 33], False)]
>>> overlaps(model)
[('eos', 'eos!', 'inside')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from hf_bpe.sentencepiece_bpe import UNKNOWN

if TYPE_CHECKING:
    from hf_bpe.model import BPE


@dataclass(frozen=True)
class SpecialToken:
    """One special token: its ``text``, ``id``, the ids its text gets as ordinary text, and whether
    ordinary text can produce the id itself (SentencePiece's ``<unk>`` without byte fallback)."""

    text: str
    id: int
    ordinary_ids: list[int]
    produced_by_text: bool = False

    @property
    def also_ordinary_token(self) -> bool:
        """Its text is one ordinary token too: the same string has two ids."""
        return len(self.ordinary_ids) == 1


def special_tokens(model: BPE) -> list[SpecialToken]:
    """Every special token of ``model``, by id, with how its text encodes as ordinary text."""
    specials = sorted(model.special_tokens.items(), key=lambda item: item[1])
    encoded = model.encode_ordinary_batch([text for text, _ in specials])
    unknown_from_text = _unknown_from_text(model)
    return [
        SpecialToken(text, id, ids, produced_by_text=id == unknown_from_text)
        for (text, id), ids in zip(specials, encoded)
    ]


def overlaps(model: BPE) -> list[tuple[str, str, str]]:
    """Pairs of special tokens that overlap in text: ``(a, b, "inside")`` when ``a`` occurs inside
    ``b``, ``(a, b, "end-start")`` when an end of ``a`` is a start of ``b`` (and neither is inside the
    other), sorted.

    Each token's windows of the lengths the special tokens have, and its ends, are looked up in
    tables, so Whisper's 1,608 special tokens take milliseconds, not the seconds of comparing every
    pair of tokens."""
    texts = set(model.special_tokens)
    lengths = sorted({len(text) for text in texts})
    # Every proper start of each token (its first 1 .. len - 1 characters) -> the tokens starting so.
    starting: dict[str, list[str]] = {}
    for text in texts:
        for size in range(1, len(text)):
            starting.setdefault(text[:size], []).append(text)
    inside: set[tuple[str, str]] = set()
    for outer in texts:
        for size in lengths:
            if size >= len(outer):
                break
            inside.update((outer[start:start + size], outer) for start in range(len(outer) - size + 1)
                          if outer[start:start + size] in texts)
    found = [(first, second, "inside") for first, second in inside]
    longest_start = lengths[-1] - 1 if lengths else 0
    for first in texts:
        seconds = {second for size in range(1, min(len(first), longest_start) + 1)
                   for second in starting.get(first[-size:], ())}
        found.extend((first, second, "end-start") for second in seconds
                     if second != first and (first, second) not in inside and (second, first) not in inside)
    return sorted(found)


def _unknown_from_text(model: BPE) -> int | None:
    """The id of SentencePiece's ``<unk>`` when ordinary text produces it (no byte fallback: a
    character the vocabulary lacks), else ``None``."""
    spec = model.sentencepiece
    if spec is None or spec.byte_fallback:
        return None
    unk = next((id for id, piece in enumerate(spec.pieces) if piece.type == UNKNOWN), None)
    known = {piece.text for piece in spec.pieces}
    stranger = next(chr(code) for code in range(0xF0000, 0x10FFFF) if chr(code) not in known)
    return unk if unk in model.encode_ordinary(stranger) else None
