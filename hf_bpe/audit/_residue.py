"""Merge residue: merged tokens that are steps of other tokens' merges and that encoding a corpus almost
never emits.

BPE keeps every token it learns. A token learned early because its pair was frequent can later be absorbed
into longer tokens built on it, so that encoding text forms it on the way but rarely emits it: LiteToken
(Sun et al. 2026, arXiv 2602.04706) calls these *intermediate merge residues* and finds 5-10% of the
vocabularies of Llama 3, Qwen, Gemma 3 and o200k to be such tokens on their corpus. A residue token costs
an embedding row that is barely trained, like the unused tokens of "Fishing for Magikarp".

**Definition.** On a corpus, a token ``t`` is *merge residue* when

1. it is a merged token (not a single byte, a character or a byte piece: those are the alphabet), and it is
   the left or right part of the merge that makes some other token, its *parents* (the merges list of a
   merges-list model, each token's last merge in a rank model, SentencePiece's merge list:
   :func:`merge_parents`);
2. its share of all the tokens the corpus is encoded to is below ``residue_below`` (:data:`RESIDUE_BELOW`,
   one in 100,000 by default); and
3. its parents, together, are emitted more often than it is: on this corpus its bytes mostly end up inside
   tokens made from it (one merge up) rather than alone. A token whose parents do not occur either is
   merely unused (the language or domain is missing from the corpus), not residue.

All three read the per-token counts the audit already has (how often encoding the corpus emits each id); no
second pass over the corpus. LiteToken's own measure counts how often each token is formed and merged further
(its FI ratio); condition 3 is that ratio one merge up, from emitted counts.

>>> import numpy as np, hf_bpe
>>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257, b"abd": 258, b"xy": 259}
>>> model = hf_bpe.BPE(ranks, r"\\w+| ")
>>> counts = np.bincount(model.encode_ordinary("abc abd " * 50_000 + "ab xy"), minlength=model.n_vocab)
>>> [(found.id, found.count, found.parents_count) for found in merge_residue(model, counts)]
[(256, 1, 100000)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hf_bpe.sentencepiece_bpe import BYTE, merge_list

if TYPE_CHECKING:
    from hf_bpe.audit._vocabulary import TokenTable
    from hf_bpe.model import BPE

RESIDUE_BELOW = 1e-5
"""The share of the emitted tokens under which a merge step is residue (condition 2): fewer than one in
100,000 tokens. On a corpus too small to resolve it (fewer than 100,000 tokens) only never-emitted tokens
qualify."""


@dataclass(frozen=True)
class ResidueToken:
    """A merge-residue token: how often the corpus emitted it (``count``, and ``share`` of all emitted
    tokens), and how often it emitted the tokens made from it (``parents_count``, over ``parents``)."""

    id: int
    count: int
    share: float
    parents: tuple[int, ...]
    parents_count: int


def merge_parents(model: BPE) -> dict[int, tuple[int, ...]]:
    """For each ordinary token that is the left or right part of another token's merge, the ids of those
    other tokens (ascending). Byte-level models read :attr:`hf_bpe.BPE.merges` (for rank models each
    token's last merge: the pair tiktoken joins whenever it forms the token by merging); SentencePiece
    models their merge list (:func:`hf_bpe.sentencepiece_bpe.merge_list`: the pair that forms each piece).

    >>> import hf_bpe
    >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
    >>> merge_parents(hf_bpe.BPE(ranks, "gpt2"))
    {97: (256,), 98: (256,), 256: (257,), 99: (257,)}
    """
    spec = model.sentencepiece
    if spec is not None:
        ids = {piece.text: id for id, piece in enumerate(spec.pieces) if piece.type != BYTE}
        pairs: Any = merge_list(spec).merges
    else:
        ids = model.mergeable_ranks  # type: ignore[assignment]
        pairs = model.merges
    parents: dict[int, set[int]] = {}
    for left, right in pairs:
        whole = ids.get(left + right)
        if whole is None:
            continue
        for part in (left, right):
            part_id = ids.get(part)
            if part_id is not None and part_id != whole:
                parents.setdefault(part_id, set()).add(whole)
    return {id: tuple(sorted(found)) for id, found in parents.items()}


def merge_residue(model: BPE, counts: Any, *, residue_below: float = RESIDUE_BELOW,
                  table: TokenTable | None = None, parents: Mapping[int, tuple[int, ...]] | None = None,
                  ) -> list[ResidueToken]:
    """The merge-residue tokens of ``model`` on a corpus (see the module), from ``counts``: how often
    encoding the corpus emitted each id (indexed by id, as :func:`hf_bpe.counting.token_counts` gives it),
    rarest first (ties by id). ``table`` and ``parents`` (:func:`hf_bpe.audit._vocabulary.tokens_of`,
    :func:`merge_parents`) are computed when not given."""
    if not isinstance(residue_below, (int, float)) or isinstance(residue_below, bool) or not 0 < residue_below <= 1:
        raise ValueError(f"residue_below must be a share in (0, 1], got {residue_below!r}")
    import numpy as np

    from hf_bpe.audit._vocabulary import tokens_of

    table = tokens_of(model) if table is None else table
    parents = merge_parents(model) if parents is None else parents
    total = int(np.asarray(counts).sum())

    def emitted(id: int) -> int:
        return int(counts[id]) if id < len(counts) else 0

    found = []
    for id, made in parents.items():
        if id not in table.merge_position:
            continue
        count = emitted(id)
        if count >= residue_below * total:
            continue
        above = sum(emitted(parent) for parent in made)
        if count < above:
            found.append(ResidueToken(id, count, count / max(total, 1), made, above))
    found.sort(key=lambda token: (token.count, token.id))
    return found
