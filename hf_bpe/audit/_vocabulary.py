"""What the vocabulary alone shows: its tokens' bytes, merge order, partial UTF-8 tokens, near
duplicates and lengths.

>>> import hf_bpe
>>> ranks = {bytes([b]): b for b in range(256)} | {b"the": 256, b" the": 257, b"The": 258, b"the,": 259}
>>> table = tokens_of(hf_bpe.BPE(ranks, "gpt2"))
>>> [(group.key, group.ids, group.kinds) for group in near_duplicates(table)]
[('the', [256, 257, 258, 259], ['case', 'punctuation', 'space'])]
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hf_bpe.audit import _utf8
from hf_bpe.sentencepiece_bpe import BYTE, NORMAL, USER_DEFINED

if TYPE_CHECKING:
    from hf_bpe.model import BPE

TRAILING_PUNCTUATION = ".,;:!?'\")]}"
"""Characters whose presence at the end of a token makes it a *punctuation variant*."""

SPACES = " \u2581"


@dataclass(frozen=True)
class TokenTable:
    """The ordinary tokens of a model: bytes by id, and each merged token's position in the merge
    order (0 = merged first; single bytes, characters and byte pieces have none)."""

    bytes_of: dict[int, bytes]
    merge_position: dict[int, int]
    n_merges: int

    def text(self, id: int) -> str | None:
        try:
            return self.bytes_of[id].decode("utf-8")
        except UnicodeDecodeError:
            return None


def tokens_of(model: BPE) -> TokenTable:
    """The ordinary tokens of ``model`` and their merge order: the id for rank models (tiktoken's
    rank), the line of the merge that makes the token for merges lists, the score order (highest
    first) for SentencePiece's normal pieces."""
    spec = model.sentencepiece
    if spec is not None:
        ordinary = [id for id, piece in enumerate(spec.pieces) if piece.type in (NORMAL, USER_DEFINED, BYTE)]
        bytes_of = {id: model.decode_single_token_bytes(id) for id in ordinary}
        merged = sorted((id for id in ordinary if spec.pieces[id].type == NORMAL and len(spec.pieces[id].text) > 1),
                        key=lambda id: (-spec.pieces[id].score, id))
        return TokenTable(bytes_of, {id: position for position, id in enumerate(merged)}, len(merged))
    ranks = model.mergeable_ranks
    bytes_of = {id: token for token, id in ranks.items()}
    if model.kind == "ranks":
        merged = sorted(id for token, id in ranks.items() if len(token) > 1)
        return TokenTable(bytes_of, {id: position for position, id in enumerate(merged)}, len(merged))
    positions: dict[int, int] = {}
    merges = model.merges
    for line, (left, right) in enumerate(merges):
        id = ranks.get(left + right)
        if id is not None:
            positions.setdefault(id, line)
    return TokenTable(bytes_of, positions, len(merges))


# ----------------------------------------------------------------------------------- partial UTF-8


def partial_utf8(model: BPE, table: TokenTable) -> dict[str, list[int]]:
    """The tokens that are not valid UTF-8 on their own, by kind (:data:`hf_bpe.audit._utf8.KINDS`).
    For SentencePiece only byte pieces can be: ``<0xE3>`` is ``lead``, ``<0x81>`` ``continuation``."""
    found: dict[str, list[int]] = {kind: [] for kind in _utf8.KINDS}
    spec = model.sentencepiece
    for id, data in table.bytes_of.items():
        if spec is not None and spec.pieces[id].type != BYTE:
            continue
        kind = _utf8.kind(data)
        if kind is not None:
            found[kind].append(id)
    return found


# ------------------------------------------------------------------------------- near duplicates


@dataclass(frozen=True)
class VariantGroup:
    """Tokens that spell the same word: ``key`` (the word without leading space, case or trailing
    punctuation), the ``ids`` and the kinds of variation among them."""

    key: str
    ids: list[int]
    kinds: list[str] = field(default_factory=list)

    @property
    def extra_ids(self) -> int:
        """Ids spent on variants: all but one."""
        return len(self.ids) - 1


def variant_key(text: str) -> str | None:
    """The word a token spells, with leading spaces (and ``▁``), trailing punctuation and case
    removed; ``None`` when fewer than two characters or no letter or digit is left (the single
    characters are the alphabet, not variants).

    >>> variant_key(" Hello!"), variant_key("..."), variant_key("▁Ωmega"), variant_key(" A")
    ('hello', None, 'ωmega', None)
    """
    core = text.lstrip(SPACES).rstrip(TRAILING_PUNCTUATION)
    if len(core) < 2:
        return None
    if core.isascii():
        return core.lower() if any(char.isalnum() for char in core) else None
    if not any(char.isalnum() for char in core):
        return None
    return unicodedata.normalize("NFC", core).casefold()


def near_duplicates(table: TokenTable) -> list[VariantGroup]:
    """Groups of two or more tokens spelling the same word (:func:`variant_key`), largest first;
    each group says how its members differ: ``space`` (with and without a leading space),
    ``case`` and ``punctuation`` (with trailing punctuation)."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for id, data in table.bytes_of.items():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        key = variant_key(text)
        if key is not None:
            groups.setdefault(key, []).append((id, text))
    found = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        texts = [text for _, text in members]
        kinds = []
        if len({text.lstrip(SPACES) != text for text in texts}) > 1:
            kinds.append("space")
        if len({text.lstrip(SPACES).rstrip(TRAILING_PUNCTUATION) for text in texts}) > 1:
            kinds.append("case")
        if len({text.rstrip(TRAILING_PUNCTUATION) != text for text in texts}) > 1:
            kinds.append("punctuation")
        found.append(VariantGroup(key, sorted(id for id, _ in members), sorted(kinds)))
    found.sort(key=lambda group: (-len(group.ids), group.key))
    return found


# ---------------------------------------------------------------------------------------- lengths


def length_counts(table: TokenTable) -> Counter[int]:
    """How many ordinary tokens have each length in bytes."""
    return Counter(len(data) for data in table.bytes_of.values())


def longest(table: TokenTable, count: int) -> list[int]:
    """The ids of the ``count`` longest tokens (in bytes; ties by id)."""
    return sorted(table.bytes_of, key=lambda id: (-len(table.bytes_of[id]), id))[:count]


# ------------------------------------------------------------------------------------- round trip

ROUND_TRIP_PREFIXES = ("«", "»")
"""What SentencePiece tokens are encoded after, so the dummy prefix lands on it (as "Fishing for
Magikarp" does: its ``clean_encode``)."""


def round_trip_failures(model: BPE, table: TokenTable) -> list[int]:
    """Ordinary tokens whose decoded text does not encode back to the token alone: the "unreachable"
    indicator of Land & Bartolo (2024), which is weaker than :mod:`hf_bpe.audit._reachability` (a token
    can fail it yet appear inside longer text) and skips tokens that are not UTF-8. SentencePiece
    tokens are encoded after a one-token prefix (``«``) that is then dropped, so the dummy prefix
    does not change their first character."""
    ids = [id for id in table.bytes_of if table.text(id) is not None]
    texts = [table.text(id) or "" for id in ids]
    prefix, prefix_id = "", None
    if model.sentencepiece is not None:
        for candidate in ROUND_TRIP_PREFIXES:
            alone = model.encode_ordinary(candidate)
            if len(alone) == 1:
                prefix, prefix_id = candidate, alone[0]
                break
    encoded = model.encode_ordinary_batch([prefix + text for text in texts])
    failed = []
    for id, ids_of_text in zip(ids, encoded):
        if prefix_id is not None and ids_of_text[:1] == [prefix_id]:
            ids_of_text = ids_of_text[1:]
        if ids_of_text != [id]:
            failed.append(id)
    return failed
