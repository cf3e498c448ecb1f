"""Which tokens can appear in an encoding at all, derived from the merge rule and the split pattern.

**Definition.** An ordinary token (not a special token) is *reachable* when some text ``s`` has it
in ``model.encode_ordinary(s)``. Special tokens are left to :mod:`hf_bpe.audit._specials`.

Every reachable verdict comes with a *witness*: a text whose encoding holds the token, checked by
encoding it with the model itself, so a reachable verdict is never wrong. Every unreachable verdict
names its reason (:data:`REASONS`); the reasons rest on two facts about the merge loop (join the
adjacent pair of best priority, the leftmost on ties, where the priority depends on the pair only:
tiktoken's ranks, a merges list's line order and SentencePiece's scores all do):

1. *Locality.* If the loop run on a piece ends with a run of tokens ``t_i .. t_j``, the loop run on
   the bytes of that run alone ends with exactly ``t_i .. t_j``: no merge crossed the run's edges,
   so the merges inside it were each the best pair inside it when made. (``bpe``'s corollary II,
   github/rust-gems.) In particular a token is in the loop's output on some piece only if its own
   bytes merge to it alone (it is *valid*); and its neighbours ``l`` and ``r`` in that output
   satisfy ``merge(l + t) == [l, t]`` and ``merge(t + r) == [t, r]`` (they are *compatible*).
2. *Gluing.* If the loop makes ``[.., t]`` of ``x + t`` and ``[t, ..]`` of ``t + y``, it makes
   ``[.., t, ..]`` of ``x + t + y`` (corollary III): the two sides of a token never interact.

The byte-level decision, token by token (``t`` its bytes):

- *Witnessed alone*: ``t`` is UTF-8 and encoding its text, alone or next to one probe character
  (:data:`PROBES`: one of each class the named patterns tell apart), gives the token.
- ``invalid_utf8``: no UTF-8 text contains ``t`` (``0xC0``, ``0xFF``, a surrogate's ``0xED 0xA0``,
  more than three continuation bytes in a row...). Exact: text is UTF-8.
- ``merges_apart``: ``t`` is not valid and was not witnessed as a whole piece. Exact by fact 1 when
  no piece can be ``t`` itself: a token that is not valid appears only through the whole-piece rule
  (rank models, ``ignore_merges``), for a piece equal to ``t``; that ``t`` is no piece is decided by
  the probes above (exact for patterns whose pieces depend on the next character at most: the
  named ones look ahead one character, ``(?!\\S)``, or to the end, ``$``).
- ``no_left_neighbour`` / ``no_right_neighbour``: ``t`` starts (ends) inside a character, so a
  token must precede (follow) it in its piece, and every token whose bytes fit there is
  incompatible (checked over the whole vocabulary). Exact by fact 1.
- ``never_one_piece``: ``t`` is valid UTF-8 and valid, and the split pattern cuts its text apart
  alone and with every probe character (or none) on each side: no piece holds it. For ``t`` partial
  on one side only, the same for the character each compatible neighbour there finishes, when every
  token that fits there was checked. Decided for the named patterns run by their scanners, whose
  pieces depend on one character on each side at most (as above), under a normalizer that leaves the
  probe texts as they are; exact there.
- ``split_apart``: ``t`` is valid and has compatible neighbours, but no text built from them was
  witnessed: the split pattern never keeps ``t`` in one piece with a compatible neighbour on each
  side. Found by search in two rounds, first with no neighbour on the sides that need none, then
  with compatible neighbours on both sides: pairs of neighbours, small ones first, completed to
  whole characters, each bare and then with probe characters around. Concluded only when the search
  ran out of texts within its bounds; such verdicts record how many texts were tried
  (:attr:`Verdict.searched`). This is the one byte-level verdict resting on a search; the tests
  check it against brute-force enumeration on small vocabularies.

**Bounds.** Everything above the neighbour search costs a fixed number of texts or pieces per
token (the split check at most ``(1 + len(PROBES)) ** 2`` texts per character it checks). The
neighbour search is bounded: it shares a budget of ``max(2**20, 8 * V)`` pieces merged and texts
tried (``V`` tokens in the vocabulary) among the tokens it searches, so that each checks at most
``min(neighbour_limit, share / 4)`` tokens per side for compatibility (shortest first;
:data:`DEFAULT_NEIGHBOUR_LIMIT`), scans at most 16 times that many partial tokens for the ones that
fit a partial edge, and tries at most ``min(search_limit, share / 4)`` texts per round
(:data:`DEFAULT_SEARCH_LIMIT`). A token whose verdict needs more is *undecided*
(:attr:`Reachability.undecided`): neither a witness nor a reason, never a guess.
:attr:`Reachability.work` records the bounds and the work done (pieces merged, texts encoded, texts
split).

SentencePiece models have no split pattern; their normalized text starts with the dummy prefix
``▁``. A normal piece is ``merges_apart`` when the merge step does not turn its own text into it
(fact 1 holds for the score rule), otherwise witnessed or ``no_context`` (no text built from its
text, a compatible left neighbour and the probes made it: a search, as ``split_apart``, bounded
alike: at most ``neighbour_limit`` left neighbours, shortest first, else undecided). A byte
piece ``<0xXX>`` is reachable when byte fallback emits it for some character that is not a piece:
``byte_never_needed`` when every character whose UTF-8 holds the byte is a piece (exact).

*Intermediate* tokens are unreachable tokens that encoding real text still forms on the way: a part
of the last merge of a reachable token (whose witness forms it exactly as its own bytes do, by
fact 1), or a part of such a part. For merges lists every listed pair of valid tokens that makes the
token counts (a list may make one token by several pairs).

>>> import hf_bpe
>>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
>>> found = reachability(hf_bpe.BPE(ranks, "gpt2"))
>>> found.verdicts[257].witness, found.verdicts[0xFF].reason, found.undecided
('abc', 'invalid_utf8', [])
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, NamedTuple

from hf_bpe._rules import merge_pieces
from hf_bpe.audit import _utf8
from hf_bpe.sentencepiece_bpe import BYTE, NORMAL, USER_DEFINED, merge_list

if TYPE_CHECKING:
    from hf_bpe.model import BPE

REASONS = {
    "invalid_utf8": "its bytes occur in no UTF-8 text",
    "merges_apart": "its own bytes merge into other tokens (so no piece forms it) and no piece is exactly its bytes",
    "no_left_neighbour": "it starts inside a character, and every token that could precede it in a piece merges "
    "across the boundary first",
    "no_right_neighbour": "it ends inside a character, and every token that could follow it in a piece merges "
    "across the boundary first",
    "never_one_piece": "the split pattern cuts its text apart whatever character stands on either side",
    "split_apart": "the split pattern never keeps it in one piece with neighbours that leave it intact (search)",
    "no_context": "no text normalizes to characters that merge to it (search)",
    "byte_never_needed": "byte fallback never emits it: every character whose UTF-8 holds this byte is a piece",
}
"""Why a token is unreachable (:attr:`Verdict.reason`), in words."""

PROBES = (
    " ", "a", "s", "t", "d", "m", "re", "ll", "ve", "A", "S", "T", "D", "M", "RE", "LL", "VE", "ǅ", "ʰ", "中",
    "\u0301", "1", "²", "'", ".", "/", "\n", "\r", "\t", "\u00a0", "  ", "é", "Ω", "ж", "あ", "😀",
)
"""Characters put next to a token's text to see whether the split pattern makes it a piece: one of
each class the named patterns distinguish (letters by case: lower, upper, title, modifier, other;
marks; digits and other numbers; apostrophe and the letters of contractions; punctuation, ``/``;
space, newline, carriage return, tab, other whitespace) and a few scripts."""

DEFAULT_SEARCH_LIMIT = 4_000
"""Texts tried per token and search round; a search that reaches it without a witness leaves the
token undecided, one that runs out of texts first concludes ``split_apart`` / ``no_context``.
(Witnesses, where they exist, come early: on the random vocabularies of the tests every one was
found within the first 400 texts of its round.)"""

DEFAULT_NEIGHBOUR_LIMIT = 1024
"""Candidate neighbours checked per token and side (the merge loop run on neighbour and token
together), shortest first, before the neighbour search goes on with those found. When more tokens
fit there, the search is bounded: a verdict it cannot reach within the bound is *undecided*."""

_BUDGET_PER_TOKEN = 8
_MIN_BUDGET = 1 << 20
"""The neighbour search's budget: pieces merged and texts tried, ``_BUDGET_PER_TOKEN`` per token of
the vocabulary and at least ``_MIN_BUDGET``, shared among the tokens it searches."""

_SCAN_FACTOR = 16
"""Partial tokens scanned per token and side for the ones that fit its partial edge (as UTF-8),
per neighbour checked: at most ``_SCAN_FACTOR * neighbour_limit``."""

_CHUNK = 8192


class Verdict(NamedTuple):
    """Whether one token is reachable: a ``witness`` text whose encoding holds it, or the
    ``reason`` (a key of :data:`REASONS`) it is not; neither when the bounded search decided
    nothing (*undecided*). ``searched`` counts the texts tried when the verdict came from a search."""

    id: int
    witness: str | None = None
    reason: str | None = None
    searched: int = 0

    @property
    def reachable(self) -> bool:
        return self.witness is not None

    @property
    def decided(self) -> bool:
        return self.witness is not None or self.reason is not None


@dataclass(frozen=True)
class Work:
    """The bounds the search ran under and the work it did. ``search_limit`` and ``neighbour_limit``
    are the limits asked for; the neighbour search shares ``budget`` (pieces merged and texts tried)
    among the tokens it searches, so it checked at most ``neighbours_per_side`` neighbours per token
    and side and tried at most ``texts_per_round`` texts per token and round. The work:
    ``pieces_merged`` (pieces given to the merge loop alone), ``texts_encoded`` and ``texts_split``
    (texts cut by the split pattern only)."""

    search_limit: int
    neighbour_limit: int
    budget: int
    neighbours_per_side: int
    texts_per_round: int
    pieces_merged: int = 0
    texts_encoded: int = 0
    texts_split: int = 0


@dataclass(frozen=True)
class Reachability:
    """The verdict on every ordinary token, and the unreachable ones formed on the way (see the
    module's docstring)."""

    verdicts: dict[int, Verdict]
    intermediate: frozenset[int]
    valid: frozenset[int]
    """Tokens whose own bytes (SentencePiece: text) the merge loop turns into them alone."""
    work: Work
    """The search's bounds and the work done within them."""

    @property
    def unreachable(self) -> list[int]:
        return sorted(id for id, verdict in self.verdicts.items() if verdict.reason is not None)

    @property
    def undecided(self) -> list[int]:
        """Tokens the search bounded by :attr:`work` neither witnessed nor proved unreachable."""
        return sorted(id for id, verdict in self.verdicts.items() if not verdict.decided)

    @property
    def reachable(self) -> list[int]:
        return sorted(id for id, verdict in self.verdicts.items() if verdict.reachable)


def reachability(model: BPE, *, search_limit: int = DEFAULT_SEARCH_LIMIT,
                 neighbour_limit: int = DEFAULT_NEIGHBOUR_LIMIT, num_threads: int | None = None) -> Reachability:
    """The verdict on every ordinary token of ``model`` (see the module's docstring); the search
    tries at most ``search_limit`` texts per token and round and checks at most ``neighbour_limit``
    neighbours per token and side, and leaves a token undecided when it needed more."""
    for name, value in (("search_limit", search_limit), ("neighbour_limit", neighbour_limit)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if model.sentencepiece is not None:
        return _SentencePieceSearch(model, search_limit, neighbour_limit, num_threads).run()
    return _ByteLevelSearch(model, search_limit, neighbour_limit, num_threads).run()


# ------------------------------------------------------------------------------------- helpers


class _Search:
    """What both searches share: the model, its tokens and a batch witness test."""

    def __init__(self, model: BPE, tokens: dict[int, bytes], search_limit: int, neighbour_limit: int,
                 num_threads: int | None) -> None:
        self.model = model
        self.tokens = tokens
        self.limits = (search_limit, neighbour_limit)
        self.budget = max(_MIN_BUDGET, _BUDGET_PER_TOKEN * len(tokens))
        self.search_limit = search_limit
        self.neighbour_limit = neighbour_limit
        self.num_threads = num_threads
        self.verdicts: dict[int, Verdict] = {}
        self._tried: dict[int, set[str]] = {}
        self.pieces_merged = self.texts_encoded = self.texts_split = 0

    def work(self) -> Work:
        return Work(*self.limits, self.budget, self.neighbour_limit, self.search_limit, self.pieces_merged,
                    self.texts_encoded, self.texts_split)

    def share(self, count: int) -> None:
        """Bound the neighbour search of ``count`` tokens to the budget: each gets a quarter of its
        share for the neighbours on each side and for the texts of each round (at most the limits)."""
        each = self.budget // (4 * max(count, 1))
        self.search_limit = max(1, min(self.limits[0], each))
        self.neighbour_limit = max(1, min(self.limits[1], each))

    def witness(self, candidates: Iterable[tuple[int, str]]) -> dict[int, str]:
        """For each token id among ``candidates`` (id, text), the first text whose encoding holds it."""
        found: dict[int, str] = {}
        iterator = iter(candidates)
        while chunk := [(id, text) for id, text in islice(iterator, _CHUNK) if id not in found]:
            encoded = self.model.encode_ordinary_batch([text for _, text in chunk], num_threads=self.num_threads)
            self.texts_encoded += len(chunk)
            for (id, text), ids in zip(chunk, encoded):
                if id not in found and id in ids:
                    found[id] = text
        return found

    def settle(self, found: dict[int, str]) -> None:
        for id, text in found.items():
            self.verdicts[id] = Verdict(id, witness=text)

    def pending(self) -> list[int]:
        return [id for id in self.tokens if id not in self.verdicts]

    def merged(self, pieces: Sequence[bytes]) -> list[list[int] | None]:
        self.pieces_merged += len(pieces)
        return merge_pieces(self.model, pieces, num_threads=self.num_threads)

    def search(self, plans: dict[int, Iterator[str]]) -> dict[int, int]:
        """Try each token's candidate texts in rounds (growing chunks, all tokens at once) until one
        is witnessed (settled) or ``search_limit`` new texts were tried (a text tried for the token
        in an earlier search is skipped); returns the number of texts tried for each token left
        without a witness (``search_limit`` when the limit, not the plan, ended its search)."""
        tried = dict.fromkeys(plans, 0)
        plans = {id: self._fresh(id, plan) for id, plan in plans.items()}
        size = 16
        while plans:
            candidates: list[tuple[int, str]] = []
            for id, plan in list(plans.items()):
                texts = list(islice(plan, min(size, self.search_limit - tried[id])))
                tried[id] += len(texts)
                if not texts:
                    del plans[id]
                candidates.extend((id, text) for text in texts)
            found = self.witness(candidates)
            self.settle(found)
            for id in found:
                plans.pop(id, None)
                del tried[id]
            size *= 4
        return tried

    def _fresh(self, id: int, plan: Iterator[str]) -> Iterator[str]:
        tried = self._tried.setdefault(id, set())
        for text in plan:
            if text not in tried:
                tried.add(text)
                yield text

    def intermediate(self, valid: frozenset[int]) -> frozenset[int]:
        """Unreachable tokens formed while reachable ones form: parts of their last merges, and so on.
        Only valid tokens with a reason that leaves them formable can be (not ``invalid_utf8``: the
        bytes of a reachable token are in UTF-8 text, so are its parts), so most vocabularies need
        no merge list at all."""
        candidates = {id for id, verdict in self.verdicts.items()
                      if verdict.reason is not None and id in valid and verdict.reason not in ("invalid_utf8", "byte_never_needed")}
        if not candidates:
            return frozenset()
        parts_of = self._parts(valid)
        formed: set[int] = set()
        stack = [id for id, verdict in self.verdicts.items() if verdict.reachable]
        while stack:
            for pair in parts_of.get(stack.pop(), ()):
                for part in pair:
                    if part not in formed:
                        formed.add(part)
                        stack.append(part)
        return frozenset(formed & candidates)

    def _parts(self, valid: frozenset[int]) -> dict[int, list[tuple[int, int]]]:
        raise NotImplementedError


def _pairs(left: Sequence[int | None], right: Sequence[int | None]) -> Iterator[tuple[int | None, int | None]]:
    """Every pair of ``left`` x ``right``, in growing squares: (0, 0), then the rest within 2 x 2, ..."""
    for size in range(1, max(len(left), len(right)) + 1):
        last = size - 1
        if last < len(right):
            for index in range(min(last, len(left))):
                yield left[index], right[last]
        if last < len(left):
            for index in range(min(size, len(right))):
                yield left[last], right[index]


def _probed(id: int, text: str) -> Iterator[tuple[int, str]]:
    for probe in PROBES:
        yield id, text + probe
        yield id, probe + text


def _wrapped(core: str) -> Iterator[str]:
    """``core`` alone, then with one probe after, one before, and one on each side."""
    yield core
    for probe in PROBES:
        yield core + probe
    for probe in PROBES:
        yield probe + core
    for before in PROBES:
        for after in PROBES:
            yield before + core + after


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ---------------------------------------------------------------------------------- byte level


class _ByteLevelSearch(_Search):
    def __init__(self, model: BPE, search_limit: int, neighbour_limit: int, num_threads: int | None) -> None:
        tokens = {id: token for token, id in model.mergeable_ranks.items()}
        super().__init__(model, tokens, search_limit, neighbour_limit, num_threads)
        self._edges: dict[int, _utf8.Edges | None] | None = None
        self._fitting: dict[str, list[int]] | None = None
        self._found: dict[tuple[int, str], tuple[list[int | None], bool]] = {}

    def run(self) -> Reachability:
        texts = {id: text for id, token in self.tokens.items() if (text := _text(token)) is not None}
        self.settle(self.witness((id, text) for id, text in texts.items()))
        self.settle(self.witness(pair for id, text in texts.items() if id not in self.verdicts
                                 for pair in _probed(id, text)))

        ids = list(self.tokens)
        merged = self.merged([self.tokens[id] for id in ids])
        valid = frozenset(id for id, parts in zip(ids, merged) if parts == [id])
        edges: dict[int, _utf8.Edges] = {}
        for id in self.pending():
            found = _utf8.edges(self.tokens[id])
            if found is None:
                self.verdicts[id] = Verdict(id, reason="invalid_utf8")
            elif id not in valid:
                self.verdicts[id] = Verdict(id, reason="merges_apart")
            elif found == _utf8.WHOLE and self._never_one_piece(texts[id]):
                self.verdicts[id] = Verdict(id, reason="never_one_piece")
            else:
                edges[id] = found

        # Quick: the edge characters completed by bytes; then neighbours from the vocabulary.
        rest = self.search({id: self._completed(id, edges[id]) for id in edges})
        if rest:
            self._neighbour_search(list(rest), edges)
        return Reachability(self.verdicts, self.intermediate(valid), valid, self.work())

    def _never_one_piece(self, text: str) -> bool:
        """Whether the split pattern cuts ``text`` apart with every probe character (or none) on
        each side. Decided only for the named patterns (run by their scanners), whose pieces depend
        on one character on each side at most, and where the normalizer leaves the probe texts as
        they are; ``False`` (not decided) otherwise."""
        engine = self.model._core.split_engine or ""
        if not engine.startswith("scanner "):
            return False
        plain = not isinstance(self.model.pattern, tuple)
        for before, after in itertools.chain([("", "")], (("", probe) for probe in PROBES),
                                             ((probe, "") for probe in PROBES),
                                             itertools.product(PROBES, PROBES)):
            whole = before + text + after
            self.texts_split += 1
            if not plain and self.model._core.normalize(whole) != whole:
                return False
            start = 0
            for piece in self.model._split(whole) or ():
                end = start + len(piece)
                if start <= len(before) and len(before) + len(text) <= end:
                    return False
                start = end
        return True

    def _cut_with_every(self, id: int, left: list[int | None] | None, right: list[int | None] | None) -> bool:
        """For a token partial on one side only, whose compatible neighbours there are all known
        (``left`` or ``right``, the other ``None``): whether the split pattern cuts apart (see
        :meth:`_never_one_piece`) the token with the character each of them finishes. A piece
        holding the token holds it next to one of them (fact 1), so then no piece holds it."""
        if (left is None) == (right is None):
            return False
        token, edges_of = self.tokens[id], self.edges_of()
        cores = set()
        for other in right or ():
            assert other is not None
            mine = edges_of[id]
            assert mine is not None
            needed = _utf8.char_length(mine.tail[0]) - len(mine.tail)
            cores.add(_text(token + self.tokens[other][:needed]) if len(self.tokens[other]) >= needed else None)
        for other in left or ():
            assert other is not None
            found = edges_of[other]
            cores.add(_text(found.tail + token) if found is not None and found.tail else None)
        return None not in cores and all(self._never_one_piece(core or "") for core in sorted(cores, key=str))

    def _completed(self, id: int, edges: _utf8.Edges, limit: int = 256) -> Iterator[str]:
        """The token with its edge characters completed by bytes, alternating choices on each side."""
        token = self.tokens[id]
        heads = _utf8.head_completions(token[: edges.head], limit=limit) if edges.head else [b""]
        tails = _utf8.tail_completions(edges.tail, limit=limit) if edges.tail else [b""]
        for step in range(max(len(heads), len(tails)) * 4):
            head = heads[step % len(heads)]
            tail = tails[(step // len(heads) + step) % len(tails)]
            text = _text(head + token + tail)
            if text is not None:
                yield text

    def _neighbour_search(self, ids: list[int], edges: dict[int, _utf8.Edges]) -> None:
        """The bounded part. A side where the token starts (ends) inside a character needs a
        neighbour: the tokens of the vocabulary that fit there are checked for compatibility (at
        most ``neighbour_limit``, shortest first), and none compatible among all of them settles the
        verdict. Otherwise texts are built from compatible neighbour pairs, completed to whole
        characters, bare and then with probes around; first with no neighbour on sides that need
        none, then (for the pattern's sake) with compatible ones. ``split_apart`` is concluded only
        when every fitting neighbour was checked and every text of both rounds tried within
        ``search_limit``; a token the bounds stopped is left undecided."""
        plans: dict[int, Iterator[str]] = {}
        complete: dict[int, bool] = {}
        nothing: list[int | None] = [None]
        self.share(len(ids))
        for id in ids:
            left, left_complete = self._neighbours(id, "left") if edges[id].head else (nothing, True)
            right, right_complete = self._neighbours(id, "right") if edges[id].tail else (nothing, True)
            if not left and left_complete or not right and right_complete:
                self.verdicts[id] = Verdict(id, reason="no_left_neighbour" if not left and left_complete
                                            else "no_right_neighbour")
                continue
            if not left or not right:
                self.verdicts[id] = Verdict(id)
                continue
            if self._cut_with_every(id, left if edges[id].head and left_complete else None,
                                    right if edges[id].tail and right_complete else None):
                self.verdicts[id] = Verdict(id, reason="never_one_piece")
                continue
            complete[id] = left_complete and right_complete
            plans[id] = self._neighbour_texts(id, left, right)
        first = self.search(plans)
        plans = {}
        for id in first:
            left, left_complete = self._neighbours(id, "left")
            right, right_complete = self._neighbours(id, "right")
            complete[id] = complete[id] and left_complete and right_complete and first[id] < self.search_limit
            plans[id] = self._neighbour_texts(id, ([] if edges[id].head else nothing) + left,
                                              ([] if edges[id].tail else nothing) + right)
        for id, tried in self.search(plans).items():
            decided = complete[id] and tried < self.search_limit
            self.verdicts[id] = Verdict(id, reason="split_apart" if decided else None, searched=first[id] + tried)

    def _neighbours(self, id: int, side: str) -> tuple[list[int | None], bool]:
        """The tokens that fit on ``side`` of token ``id`` in UTF-8 text and are compatible there
        (the merge loop on both leaves both), shortest first, among the first ``neighbour_limit``
        that fit; and whether those were all that fit."""
        key = (id, side)
        if key not in self._found:
            token, edges_of = self.tokens[id], self.edges_of()
            mine = edges_of[id]
            assert mine is not None
            fitting = self.fitting()
            # (group, whether the pair must be checked to be UTF-8 where the two meet)
            if side == "left":
                sources = [(fitting["no_tail"], False)] if mine.head == 0 else [(fitting["open_end"], True)]
            else:
                sources = [] if mine.tail else [(fitting["whole_start"], False)]
                if mine.tail or mine.head == len(token):
                    sources.append((fitting["open_start"], True))
            candidates: list[int] = []
            scanned_all, fit = True, 0
            for source, check in sources:
                if check:  # partial tokens: scanned, at most SCAN_FACTOR x neighbour_limit of them
                    scanned = source[: _SCAN_FACTOR * self.neighbour_limit]
                    scanned_all = scanned_all and len(scanned) == len(source)
                    joins = ((self.tokens[other] + token if side == "left" else token + self.tokens[other], other)
                             for other in scanned)
                    source = [other for joined, other in joins if _utf8.edges(joined) is not None]
                fit += len(source)
                candidates.extend(source[: self.neighbour_limit])
            complete = scanned_all and fit <= self.neighbour_limit
            candidates = sorted(candidates, key=lambda other: (len(self.tokens[other]), other))[: self.neighbour_limit]
            joined = [self.tokens[other] + token if side == "left" else token + self.tokens[other]
                      for other in candidates]
            merged = self.merged(joined)
            found: list[int | None] = [other for other, parts in zip(candidates, merged)
                                       if parts == ([other, id] if side == "left" else [id, other])]
            self._found[key] = (found, complete)
        return self._found[key]

    def fitting(self) -> dict[str, list[int]]:
        """The tokens by how they can meet a neighbour: ending with no unfinished character
        (``no_tail``), ending open (``open_end``: inside a character, or all continuation bytes),
        starting on a character boundary (``whole_start``) or not (``open_start``); shortest first."""
        if self._fitting is None:
            groups: dict[str, list[int]] = {"no_tail": [], "open_end": [], "whole_start": [], "open_start": []}
            for other, found in self.edges_of().items():
                if found is None:
                    continue
                if not found.tail:
                    groups["no_tail"].append(other)
                if found.tail or found.head == len(self.tokens[other]) > 0:
                    groups["open_end"].append(other)
                groups["open_start" if found.head else "whole_start"].append(other)
            for group in groups.values():
                group.sort(key=lambda other: (len(self.tokens[other]), other))
            self._fitting = groups
        return self._fitting

    def edges_of(self) -> dict[int, _utf8.Edges | None]:
        if self._edges is None:
            self._edges = {id: _utf8.edges(token) for id, token in self.tokens.items()}
        return self._edges

    def _neighbour_texts(self, id: int, left: list[int | None], right: list[int | None]) -> Iterator[str]:
        """Texts holding ``left-neighbour + token + right-neighbour`` for pairs of neighbours (small
        ones first), every pair bare first, then each with probe characters around."""
        cores = []
        for before, after in _pairs(left, right):
            middle = b"".join(self.tokens[part] if part is not None else b"" for part in (before, id, after))
            for core in self._completions(middle):
                cores.append(core)
                yield core
        for core in cores:
            yield from islice(_wrapped(core), 1, None)

    def _completions(self, data: bytes, limit: int = 3) -> Iterator[str]:
        found = _utf8.edges(data)
        if found is None:
            return
        heads = _utf8.head_completions(data[: found.head], limit=limit) if found.head else [b""]
        tails = _utf8.tail_completions(found.tail, limit=limit) if found.tail else [b""]
        for head in heads:
            for tail in tails:
                text = _text(head + data + tail)
                if text is not None:
                    yield text

    def _parts(self, valid: frozenset[int]) -> dict[int, list[tuple[int, int]]]:
        ids = {token: id for id, token in self.tokens.items()}
        parts: dict[int, list[tuple[int, int]]] = {}
        for left, right in self.model.merges:
            whole, left_id, right_id = ids.get(left + right), ids.get(left), ids.get(right)
            if whole is not None and left_id in valid and right_id in valid:
                parts.setdefault(whole, []).append((left_id, right_id))  # type: ignore[arg-type]
        return parts


# ------------------------------------------------------------------------------- SentencePiece


class _SentencePieceSearch(_Search):
    def __init__(self, model: BPE, search_limit: int, neighbour_limit: int, num_threads: int | None) -> None:
        spec = model.sentencepiece
        assert spec is not None
        self.spec = spec
        ordinary = {id: piece for id, piece in enumerate(spec.pieces) if piece.type in (NORMAL, USER_DEFINED, BYTE)}
        tokens = {id: piece.text.encode("utf-8") for id, piece in ordinary.items()}
        super().__init__(model, tokens, search_limit, neighbour_limit, num_threads)
        self.pieces = ordinary
        self._normal = sorted((id for id, piece in ordinary.items() if piece.type == NORMAL),
                              key=lambda id: (len(ordinary[id].text), id))

    def visible(self, text: str) -> str:
        """What to type to get normalized ``text``: ``▁`` as a space."""
        return text.replace("\u2581", " ") if self.spec.escape_whitespaces else text

    def run(self) -> Reachability:
        pieces = self.pieces
        words = {id: piece.text for id, piece in pieces.items() if piece.type != BYTE}
        self.settle(self.witness(pair for id, text in words.items() for pair in self._own_texts(id, text)))
        self.settle(self.witness(
            (id, variant) for id, text in words.items() if id not in self.verdicts
            for own in (pair[1] for pair in self._own_texts(id, text)) for variant in islice(_wrapped(own), 1, 64)
        ))
        ids = list(words)
        merged = self.merged([words[id].encode("utf-8") for id in ids])
        valid = frozenset(id for id, parts in zip(ids, merged) if parts == [id])
        plans = {}
        complete: dict[int, bool] = {}
        pending = [id for id in words if id not in self.verdicts]
        self.share(sum(id in valid for id in pending))
        for id in pending:
            if id not in valid:
                self.verdicts[id] = Verdict(id, reason="merges_apart")
            else:
                left, complete[id] = self._left_neighbours(id)
                plans[id] = self._left_neighbour_texts(id, left)
        for id, tried in self.search(plans).items():
            decided = complete[id] and tried < self.search_limit
            self.verdicts[id] = Verdict(id, reason="no_context" if decided else None, searched=tried)
        self._bytes()
        return Reachability(self.verdicts, self.intermediate(valid), valid, self.work())

    def _own_texts(self, id: int, text: str) -> Iterator[tuple[int, str]]:
        shown = self.visible(text)
        yield id, shown
        if shown.startswith(" ") and (self.spec.add_dummy_prefix or self.spec.remove_extra_whitespaces):
            yield id, shown[1:]

    def _left_neighbours(self, id: int) -> tuple[list[int], bool]:
        """The normal pieces compatible on the left of piece ``id`` (the merge step on both leaves
        both), shortest first, among the first ``neighbour_limit``; and whether those were all."""
        text = self.pieces[id].text
        others = self._normal[: self.neighbour_limit]
        merged = self.merged([(self.pieces[other].text + text).encode("utf-8") for other in others])
        return [other for other, parts in zip(others, merged) if parts == [other, id]], len(others) == len(self._normal)

    def _left_neighbour_texts(self, id: int, left: list[int]) -> Iterator[str]:
        text = self.pieces[id].text
        for other in left:
            for _, before in self._own_texts(other, self.pieces[other].text):
                yield from islice(_wrapped(before + self.visible(text)), 0, 1 + len(PROBES))

    def _bytes(self) -> None:
        byte_ids = {int(piece.text[3:5], 16): id for id, piece in self.pieces.items() if piece.type == BYTE}
        if not byte_ids:
            return
        single = {piece.text for piece in self.pieces.values() if piece.type != BYTE and len(piece.text) == 1}
        chars = _chars_holding(set(byte_ids), lambda char: char not in single and not (
            self.spec.escape_whitespaces and char == " "))
        plans: dict[int, Iterator[str]] = {}
        for byte, id in byte_ids.items():
            if not chars.get(byte):
                self.verdicts[id] = Verdict(id, reason="byte_never_needed")
            else:
                # The character must stay a symbol of its own: try it alone, then next to probes.
                plans[id] = itertools.chain(chars[byte], *(islice(_wrapped(char), 1, None) for char in chars[byte]))
        for id, tried in self.search(plans).items():
            self.verdicts[id] = Verdict(id, reason="no_context" if tried < self.search_limit else None, searched=tried)

    def _parts(self, valid: frozenset[int]) -> dict[int, list[tuple[int, int]]]:
        ids = {piece.text: id for id, piece in self.pieces.items() if piece.type != BYTE}
        parts: dict[int, list[tuple[int, int]]] = {}
        for left, right in merge_list(self.spec).merges:
            whole, left_id, right_id = ids.get(left + right), ids.get(left), ids.get(right)
            if whole is not None and left_id is not None and right_id is not None:
                parts.setdefault(whole, []).append((left_id, right_id))
        return parts


def _chars_holding(wanted: set[int], allowed, per_byte: int = 8) -> dict[int, list[str]]:  # type: ignore[no-untyped-def]
    """Up to ``per_byte`` characters whose UTF-8 holds each wanted byte and that ``allowed`` accepts."""
    found: dict[int, list[str]] = {byte: [] for byte in wanted}

    def scan(code_points: Iterable[int], bytes_of_interest: Iterable[int]) -> None:
        targets = [byte for byte in bytes_of_interest if byte in found]
        for code_point in code_points:
            if all(len(found[byte]) >= per_byte for byte in targets):
                return
            if 0xD800 <= code_point < 0xE000:
                continue
            char = chr(code_point)
            if not allowed(char):
                continue
            for byte in char.encode("utf-8"):
                if byte in found and len(found[byte]) < per_byte:
                    found[byte].append(char)

    scan(range(0x80), range(0x80))
    scan(range(0x80, 0x800), range(0x80, 0xE0))
    for lead in range(0xE0, 0xF0):
        scan(range((lead - 0xE0) << 12, (lead - 0xDF) << 12), [lead])
    for lead in range(0xF0, 0xF5):
        start = (lead - 0xF0) << 18
        scan(range(max(start, 0x10000), min(start + (1 << 18), 0x110000)), [lead])
    return found
