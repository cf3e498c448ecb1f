"""What a SentencePiece BPE model is made of: pieces with scores and types, and the normalizer.

:class:`SentencePieceSpec` holds everything SentencePiece's own ``.model`` file says about encoding
and decoding, as plain Python data; :meth:`hf_bpe.BPE.from_sentencepiece` builds a model from it and
``conversion.sentencepiece`` reads and writes it as protobuf.

>>> spec = SentencePieceSpec(pieces=(Piece("<unk>", 0.0, UNKNOWN), Piece("▁a", -1.0, NORMAL),
...                                  Piece("▁", -2.0, NORMAL), Piece("a", -3.0, NORMAL)))
>>> spec.unk_id
0
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

from hf_bpe.patterns import Normalize

__all__ = [
    "BYTE", "CONTROL", "DEFAULT_UNK_SURFACE", "MAX_TIED_RUN", "NORMAL", "TYPE_NAMES", "UNKNOWN", "UNUSED",
    "USER_DEFINED", "MergeConflict", "MergeList", "Piece", "SentencePieceSpec", "merge_list",
]

NORMAL = 1
UNKNOWN = 2
CONTROL = 3
USER_DEFINED = 4
UNUSED = 5
BYTE = 6
"""Piece types, numbered as in ``sentencepiece_model.proto``."""

TYPE_NAMES = {NORMAL: "NORMAL", UNKNOWN: "UNKNOWN", CONTROL: "CONTROL", USER_DEFINED: "USER_DEFINED",
              UNUSED: "UNUSED", BYTE: "BYTE"}

DEFAULT_UNK_SURFACE = " \u2047 "
"""What SentencePiece decodes ``<unk>`` to unless the model says otherwise."""


@dataclass(frozen=True)
class Piece:
    """One vocabulary entry; its id is its position in :attr:`SentencePieceSpec.pieces`."""

    text: str
    score: float
    type: int = NORMAL


@dataclass(frozen=True)
class SentencePieceSpec:
    """A SentencePiece BPE model, as the parts of its ``ModelProto`` that shape encoding.

    ``charsmap`` is the normalizer's precompiled character map (empty for the ``identity``
    normalizer); ``normalizer_name`` is kept for writing the file back. ``trainer_spec`` holds the
    serialized ``TrainerSpec`` of a loaded file (training settings, kept so a round trip preserves
    them); it does not affect encoding.

    ``metaspace`` is set for models read from a ``tokenizer.json`` whose ``Metaspace``
    pre-tokenizer decides where ``▁`` goes (no ``.model`` file can say this): ``"always"`` puts it
    before each stretch of text between special tokens that does not start with a space or ``▁``,
    ``"first"`` only before the stretch at the start of the text, ``"never"`` nowhere (then
    ``add_dummy_prefix`` is false); ``None``: SentencePiece's dummy prefix, before every text that
    is not empty. ``metaspace_split`` merges each word (from one ``▁`` to the next) alone, as
    Metaspace's ``split`` does (with ``metaspace=None``: a ``Prepend("▁")`` normalizer before it).

    ``tokenizers_normalizer`` is set for models read from a ``tokenizer.json`` whose normalizer
    SentencePiece's cannot express (a ``Precompiled`` character map, which `tokenizers` applies per
    grapheme cluster; ``Replace`` or ``Strip`` of whitespace): that normalizer's steps, run as
    `tokenizers` runs them (see :class:`hf_bpe.patterns.Normalize`) on each stretch of text between
    special tokens before anything else. ``charsmap`` is then empty and ``remove_extra_whitespaces``
    false; the steps escape spaces and add the prefix themselves, unless ``metaspace`` is set (then
    ``Metaspace`` follows them, as in the file); ``add_dummy_prefix`` says whether decoding drops the
    text's first ``▁``, and with ``metaspace`` ``"never"`` may be true.
    """

    pieces: tuple[Piece, ...]
    byte_fallback: bool = False
    unk_surface: str = DEFAULT_UNK_SURFACE
    normalizer_name: str = "identity"
    charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = False
    escape_whitespaces: bool = True
    trainer_spec: bytes = b""
    metaspace: str | None = None
    metaspace_split: bool = False
    tokenizers_normalizer: tuple[Normalize, ...] = ()

    @property
    def unk_id(self) -> int | None:
        return next((index for index, piece in enumerate(self.pieces) if piece.type == UNKNOWN), None)


# ------------------------------------------------------------------------------------ merge list


@dataclass(frozen=True)
class MergeConflict:
    """Pieces that keep a list of pair merges from encoding as SentencePiece does, and why."""

    pieces: tuple[str, ...]
    reason: str

    def __str__(self) -> str:
        shown = ", ".join(repr(piece) for piece in self.pieces[:6])
        more = f" and {len(self.pieces) - 6} more" if len(self.pieces) > 6 else ""
        return f"{shown}{more}: {self.reason}"


@dataclass(frozen=True)
class MergeList:
    """SentencePiece's merge rule written as a list of pair merges in priority order, the form
    `tokenizers`' BPE (and GPT-2's merges files) run: see :func:`merge_list`."""

    merges: tuple[tuple[str, str], ...]
    """For each piece that some text forms, the pair that forms it, highest score first."""
    conflicts: tuple[MergeConflict, ...]
    """Empty when running :attr:`merges` by list position encodes every text as SentencePiece does."""
    unreachable: tuple[str, ...]
    """Normal pieces that no text forms (SentencePiece merges their characters otherwise)."""


def merge_list(spec: SentencePieceSpec) -> MergeList:
    """The merges of ``spec`` as a list, and when that list reproduces SentencePiece.

    SentencePiece (``bpe_model.cc``) starts from the characters of the normalized text (user-defined
    pieces cut out first, frozen) and repeatedly joins the adjacent pair whose concatenation is a
    normal or user-defined piece with the highest score, the leftmost on ties. `tokenizers` joins the
    adjacent pair that comes first in its merges list, the leftmost on ties, and starts from
    characters that are pieces (others become byte pieces or ``<unk>`` at once). When does the list
    rule give the same result?

    1. *Where a piece forms, only one pair forms it.* Say adjacent symbols ``l, r`` spell a piece
       ``p`` at some point. No merge so far crossed the edges of their span, so the merges inside it
       were each the best pair inside it when made: they are exactly the first merges of
       SentencePiece on the text of ``p`` alone, which is deterministic. So ``l, r`` is the state
       that run passes through with two symbols left, and ``p`` forms on its own text: the pair is
       the last merge of that run, whatever other splits of ``p`` are pieces. A piece whose own run
       gets stuck before one symbol is formed by no text at all (``unreachable``), and neither is a
       piece containing a user-defined piece (that part is always cut out).
    2. *Same candidates.* By 1, the pairs SentencePiece may join at any point are list entries, and
       every list entry spells a piece; as long as both start from the same characters. They do
       when every character of a formed piece is a piece itself; a character that is not would be
       joined by SentencePiece and turned into bytes or ``<unk>`` by `tokenizers`: a conflict.
    3. *Same choice.* Ordered by score, the list makes the same choice whenever the best pair's
       score is unique. Pieces with equal scores are joined leftmost-first by SentencePiece but in
       list order by `tokenizers`: a conflict, except for runs of one character (``▁▁``, ``▁▁▁``, ...,
       which Llama and Mistral models give one score): if no other piece contains the character
       twice, their merges only ever meet inside runs of it, and an order of their pairs is derived
       and then proven on every run (see :func:`_run_merges`).

    Scores alone order the merges otherwise; the piece ids play no part.

    >>> spec = SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("a", -1), Piece("b", -2),
    ...                           Piece("ab", -3), Piece("ba", -4), Piece("aba", -5)))
    >>> merge_list(spec).merges
    (('a', 'b'), ('b', 'a'), ('ab', 'a'))
    >>> merge_list(spec).conflicts
    ()
    """
    pieces = spec.pieces
    scores: dict[str, float] = {piece.text: piece.score for piece in pieces if piece.type in (NORMAL, USER_DEFINED)}
    user_defined = {piece.text for piece in pieces if piece.type == USER_DEFINED}
    holds_user_defined = re.compile("|".join(map(re.escape, sorted(user_defined)))).search if user_defined else None
    formed: dict[str, tuple[str, str]] = {}
    unreachable: list[str] = []
    for piece in pieces:
        text = piece.text
        if piece.type != NORMAL or len(text) < 2:
            continue
        pair = None if holds_user_defined and holds_user_defined(text) else _last_merge(text, scores)
        if pair is None:
            unreachable.append(text)
        else:
            formed[text] = pair

    conflicts: list[MergeConflict] = []
    strangers = [text for text in formed if any(scores.get(char) is None or char in user_defined for char in text)]
    if strangers:
        conflicts.append(MergeConflict(tuple(strangers), (
            "SentencePiece forms these pieces from characters that are not pieces themselves; tokenizers "
            "turns such characters into byte pieces or <unk> before merging, so it never forms them")))

    by_score: dict[float, list[str]] = {}
    for text in formed:
        by_score.setdefault(scores[text], []).append(text)
    order: dict[str, int] = {}
    for score, group in by_score.items():
        if len(group) == 1:
            order[group[0]] = 0
            continue
        ranked, problem = _tied_order(group, formed, scores)
        if problem is not None:
            conflicts.append(MergeConflict(tuple(group), f"these pieces share the score {score:g}: {problem}"))
            ranked = sorted(group, key=lambda text: (len(formed[text][0]), text))
        for position, text in enumerate(ranked):
            order[text] = position
    listed = sorted(formed, key=lambda text: (-scores[text], order[text]))
    return MergeList(tuple(formed[text] for text in listed), tuple(conflicts), tuple(unreachable))


def _last_merge(text: str, scores: dict[str, float]) -> tuple[str, str] | None:
    """The pair SentencePiece joins last when it encodes ``text`` alone (its characters, no
    normalizer), or ``None`` when that run stops before one symbol."""
    if len(text) > 64:
        return _last_merge_long(text, scores)
    symbols = list(text)
    last = None
    while len(symbols) > 1:
        best, best_at = None, -1
        for at in range(len(symbols) - 1):
            score = scores.get(symbols[at] + symbols[at + 1])
            if score is not None and (best is None or score > best):
                best, best_at = score, at
        if best_at < 0:
            return None
        last = (symbols[best_at], symbols[best_at + 1])
        symbols[best_at : best_at + 2] = [last[0] + last[1]]
    return last


def _last_merge_long(text: str, scores: dict[str, float]) -> tuple[str, str] | None:
    """:func:`_last_merge` with SentencePiece's own agenda (a heap of pairs, stale ones skipped): time
    O(n log n) in the length of the piece rather than quadratic."""
    import heapq

    symbols: list[str] = list(text)
    following = list(range(1, len(text))) + [-1]
    preceding = list(range(-1, len(text) - 1))
    agenda: list[tuple[float, int, int, int]] = []  # (-score, left, right, size of the joined text)

    def consider(left: int, right: int) -> None:
        if left < 0 or right < 0:
            return
        joined = symbols[left] + symbols[right]
        score = scores.get(joined)
        if score is not None:
            heapq.heappush(agenda, (-score, left, right, len(joined)))

    for at in range(len(text) - 1):
        consider(at, at + 1)
    last = None
    remaining = len(text)
    while agenda:
        _, left, right, size = heapq.heappop(agenda)
        if not symbols[left] or not symbols[right] or len(symbols[left]) + len(symbols[right]) != size:
            continue
        last = (symbols[left], symbols[right])
        symbols[left], symbols[right] = symbols[left] + symbols[right], ""
        following[left] = following[right]
        if following[right] >= 0:
            preceding[following[right]] = left
        remaining -= 1
        consider(preceding[left], left)
        consider(left, following[left])
    return last if remaining == 1 else None


def _tied_order(group: list[str], formed: dict[str, tuple[str, str]],
                scores: dict[str, float]) -> tuple[list[str], str | None]:
    """An order for the merges of pieces that share a score under which `tokenizers` joins what
    SentencePiece joins, or the reason none is known (then the order is a guess)."""
    families: dict[str, list[str]] = {}
    for text in group:
        if len(set(text)) != 1:
            return group, (f"SentencePiece joins the leftmost of them first, tokenizers the one listed first, "
                           f"and {text!r} is not a run of one character (the case hf_bpe can order)")
        families.setdefault(text[0], []).append(text)
    ranked: list[str] = []
    for char, family in families.items():
        twice = char + char
        intruders = [text for text in formed if twice in text and (set(text) != {char} or text not in family)]
        if intruders:
            return group, (f"SentencePiece joins the leftmost first, tokenizers the one listed first, and the "
                           f"piece {intruders[0]!r} (score {scores[intruders[0]]:g}) also holds {twice!r}, so "
                           "their merges do not stay inside runs of one character")
        lengths = {len(text) for text in family}
        pairs = {len(text): (len(formed[text][0]), len(formed[text][1])) for text in family}
        order, problem = _run_merges(lengths, pairs)
        if order is None:
            return group, f"SentencePiece joins the leftmost first, tokenizers the one listed first: {problem}"
        by_pair = {pair: char * (pair[0] + pair[1]) for pair in pairs.values()}
        ranked.extend(by_pair[pair] for pair in order)
    return ranked, None


MAX_TIED_RUN = 128
"""The longest runs of one character sharing a score whose merge order :func:`_run_merges` proves."""


def _run_merges(lengths: set[int], pairs: dict[int, tuple[int, int]]) -> tuple[list[tuple[int, int]] | None, str]:
    """Order the merges of pieces that are runs of one character, all with one score, so that a list
    of them joins runs as SentencePiece does; or ``None`` and why not.

    ``lengths`` are the lengths of the pieces (the character's runs), ``pairs`` the part lengths of
    each piece some text forms. Inside a run, SentencePiece joins the leftmost pair that spells a
    piece. Its merges happen at or left of the first two characters not yet joined, so a run is a
    row of joined blocks followed by untouched characters; once the blocks have no pair to join and
    the last one can never grow (no piece is that long plus any block), they are final and the rest
    is a fresh, shorter run. Run long enough, that happens after ``reset`` characters. Every state
    of a run of any length is then a state of a run of at most ``reset + 2`` characters with final
    blocks in front (which join nothing): checking the list's choice against SentencePiece's on all
    of those proves it for all runs. The order comes from the same states: the pair SentencePiece
    joins goes before every other kind of pair present.
    """
    top = max(lengths)
    if top > MAX_TIED_RUN:
        return None, f"runs of up to {top} characters share the score (hf_bpe proves orders up to {MAX_TIED_RUN})"
    sizes = {1} | set(pairs)

    def leftmost(state: list[int]) -> int | None:
        return next((at for at in range(len(state) - 1) if state[at] + state[at + 1] in lengths), None)

    def steps(count: int) -> Iterator[tuple[list[int], int]]:
        state = [1] * count
        while (at := leftmost(state)) is not None:
            yield state, at
            state = state[:at] + [state[at] + state[at + 1]] + state[at + 2 :]

    # A long run: blocks joined so far, then `untouched` characters (at least two remain throughout).
    blocks: list[int] = []
    untouched = 16 * top + 16
    while True:
        if blocks and leftmost(blocks) is None and all(blocks[-1] + size not in lengths for size in sizes):
            reset = sum(blocks)
            break
        at = leftmost([*blocks, 1, 1])
        if at is None or untouched < 4:
            return None, f"runs of {16 * top + 16} characters never settle into final blocks"
        if at < len(blocks) - 1:
            blocks[at : at + 2] = [blocks[at] + blocks[at + 1]]
        elif at == len(blocks) - 1:
            blocks[-1] += 1
            untouched -= 1
        else:
            blocks.append(2)
            untouched -= 2

    before: dict[tuple[int, int], set[tuple[int, int]]] = {pair: set() for pair in pairs.values()}
    for count in range(reset + 3):
        for state, at in steps(count):
            chosen = (state[at], state[at + 1])
            if chosen not in before:
                return None, f"SentencePiece joins {chosen} in a run of {count}, a pair no list entry makes"
            before[chosen].update(pair for pair in pairwise(state) if pair in before and pair != chosen)
    order: list[tuple[int, int]] = []
    visiting: set[tuple[int, int]] = set()
    done: set[tuple[int, int]] = set()

    def visit(pair: tuple[int, int]) -> bool:  # depth-first topological sort; False on a cycle
        if pair in done:
            return True
        if pair in visiting:
            return False
        visiting.add(pair)
        if not all(visit(later) for later in sorted(before[pair])):
            return False
        visiting.discard(pair)
        done.add(pair)
        order.append(pair)
        return True

    if not all(visit(pair) for pair in sorted(before)):
        return None, "SentencePiece joins their pairs in an order that depends on the run (no list order fits)"
    order.reverse()
    rank = {pair: position for position, pair in enumerate(order)}
    for count in range(reset + 3):
        for state, at in steps(count):
            listed = min(((rank[pair], where) for where, pair in enumerate(pairwise(state)) if pair in rank),
                         default=None)
            if listed is None or listed[1] != at:
                return None, f"on a run of {count} the list would join at {listed}, SentencePiece at {at}"
    return order, ""
