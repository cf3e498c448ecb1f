"""The audit's result: :class:`AuditReport`, as a dict (JSON), Markdown and charts."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hf_bpe.audit._corpus import CorpusStats, Group, Magikarp
from hf_bpe.audit._reachability import REASONS, Reachability
from hf_bpe.audit._residue import RESIDUE_BELOW, ResidueToken
from hf_bpe.audit._specials import SpecialToken
from hf_bpe.audit._vocabulary import TokenTable, VariantGroup


@dataclass
class AuditReport:
    """What :func:`hf_bpe.audit.audit` found. The lists of ids are attributes:
    :attr:`unreachable`, :attr:`partial_utf8`, :attr:`unused`; every section is in
    :meth:`to_dict` (JSON-ready), :meth:`to_markdown` and, as charts, :meth:`plots`."""

    name: str
    kind: str
    pattern: str
    n_vocab: int
    tokens: TokenTable
    reachability: Reachability
    round_trip_failures: list[int]
    partial_by_kind: dict[str, list[int]]
    near_duplicates: list[VariantGroup]
    specials: list[SpecialToken]
    special_overlaps: list[tuple[str, str, str]]
    length_counts: Counter[int]
    longest: list[int]
    corpus: CorpusStats | None = None
    corpus_name: str | None = None
    rare_below: int = 10
    magikarps: list[Magikarp] = field(default_factory=list)
    top: int = 50
    residue: list[ResidueToken] = field(default_factory=list)
    residue_below: float = RESIDUE_BELOW

    # --------------------------------------------------------------------------- the id lists

    @property
    def unreachable(self) -> list[int]:
        """Ordinary tokens no text encodes to (see :mod:`hf_bpe.audit._reachability`)."""
        return self.reachability.unreachable

    @property
    def undecided(self) -> list[int]:
        """Ordinary tokens the bounded reachability search neither witnessed nor proved unreachable
        (see :attr:`search_bounds`)."""
        return self.reachability.undecided

    @property
    def search_bounds(self) -> str:
        """What the reachability verdicts rest on, in words: what is checked for every token and
        the bounds of the neighbour search, with the work done."""
        work = self.reachability.work
        return (f"Every ordinary token is checked: its text encoded alone and next to each probe character, "
                f"its bytes merged alone, its UTF-8 edges, and for the named patterns whether the split pattern "
                f"ever keeps its text in one piece. The neighbour search for the rest shares a budget of "
                f"{work.budget:,} pieces merged and texts tried: it checked at most {work.neighbours_per_side:,} "
                f"neighbours per token and side (shortest first) and tried at most {work.texts_per_round:,} texts "
                f"per token and round; {len(self.undecided):,} tokens not decided within these bounds are listed "
                f"as undecided. Work done: {work.pieces_merged:,} pieces merged, {work.texts_encoded:,} texts "
                f"encoded, {work.texts_split:,} texts split.")

    @property
    def intermediate(self) -> list[int]:
        """Unreachable tokens that encoding still forms on the way to reachable ones."""
        return sorted(self.reachability.intermediate)

    @property
    def partial_utf8(self) -> list[int]:
        """Tokens that are not valid UTF-8 on their own (all kinds)."""
        return sorted(id for ids in self.partial_by_kind.values() for id in ids)

    @property
    def unused(self) -> list[int]:
        """Reachable ordinary tokens the corpus never produced (empty without a corpus)."""
        if self.corpus is None:
            return []
        counts = self.corpus.counts
        return [id for id in self.reachability.reachable if counts[id] == 0]

    @property
    def rare(self) -> list[int]:
        """Reachable ordinary tokens the corpus produced at least once but fewer than
        :attr:`rare_below` times (empty without a corpus)."""
        if self.corpus is None:
            return []
        counts = self.corpus.counts
        return [id for id in self.reachability.reachable if 0 < counts[id] < self.rare_below]

    @property
    def merge_residue(self) -> list[int]:
        """Merged tokens that are steps of other tokens' merges and that the corpus almost never emitted,
        while the tokens made from them it did (see :mod:`hf_bpe.audit._residue`; empty without a corpus),
        rarest first."""
        return [found.id for found in self.residue]

    @property
    def spent_on_variants(self) -> int:
        """Ids the vocabulary spends on variants of words it already has."""
        return sum(group.extra_ids for group in self.near_duplicates)

    def show(self, id: int) -> str:
        """A token as readable text: ``repr`` of its text, or of its bytes when not UTF-8."""
        text = self.tokens.text(id)
        if text is not None:
            return repr(text)
        return repr(self.tokens.bytes_of.get(id, b""))

    # ------------------------------------------------------------------------------- summary

    def summary(self) -> dict[str, Any]:
        """The headline numbers."""
        reasons = Counter(self.reachability.verdicts[id].reason for id in self.unreachable)
        summary: dict[str, Any] = {
            "tokenizer": self.name,
            "kind": self.kind,
            "vocab_size": self.n_vocab,
            "ordinary_tokens": len(self.tokens.bytes_of),
            "special_tokens": len(self.specials),
            "unreachable": len(self.unreachable),
            "unreachable_by_reason": dict(sorted(reasons.items())),
            "undecided": len(self.undecided),
            "search": dataclasses.asdict(self.reachability.work),
            "intermediate_only": len(self.intermediate),
            "round_trip_failures": len(self.round_trip_failures),
            "partial_utf8": len(self.partial_utf8),
            "partial_utf8_by_kind": {kind: len(ids) for kind, ids in self.partial_by_kind.items()},
            "variant_groups": len(self.near_duplicates),
            "ids_spent_on_variants": self.spent_on_variants,
            "specials_also_ordinary": sum(special.also_ordinary_token for special in self.specials),
            "special_overlaps": len(self.special_overlaps),
            "longest_token_bytes": max(self.length_counts, default=0),
        }
        if self.corpus is not None:
            summary["corpus"] = self.corpus_name
            summary["corpus_tokens"] = int(self.corpus.counts.sum())
            summary["unused"] = len(self.unused)
            summary["rare"] = len(self.rare)
            summary["rare_below"] = self.rare_below
            summary["merge_residue"] = len(self.residue)
            summary["merge_residue_share"] = round(len(self.residue) / max(len(self.tokens.bytes_of), 1), 4)
            summary["residue_below"] = self.residue_below
        return summary

    # ------------------------------------------------------------------------------------ dict

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready (ids as ints, tokens as readable strings)."""

        def tokens(ids: list[int]) -> list[dict[str, Any]]:
            return [{"id": id, "token": self.show(id)} for id in ids]

        verdicts = self.reachability.verdicts
        document: dict[str, Any] = {
            "summary": self.summary(),
            "unreachable": [
                {"id": id, "token": self.show(id), "reason": verdicts[id].reason,
                 "intermediate": id in self.reachability.intermediate, "texts_searched": verdicts[id].searched}
                for id in self.unreachable
            ],
            "undecided": [{"id": id, "token": self.show(id), "texts_searched": verdicts[id].searched}
                          for id in self.undecided],
            "search_bounds": self.search_bounds,
            "round_trip_failures": tokens(self.round_trip_failures),
            "partial_utf8": {kind: tokens(ids) for kind, ids in self.partial_by_kind.items()},
            "near_duplicates": [
                {"word": group.key, "kinds": group.kinds, "tokens": tokens(group.ids)}
                for group in self.near_duplicates[: self.top]
            ],
            "specials": [
                {"id": special.id, "text": special.text, "ordinary_ids": special.ordinary_ids,
                 "also_ordinary_token": special.also_ordinary_token, "produced_by_text": special.produced_by_text}
                for special in self.specials
            ],
            "special_overlaps": [list(overlap) for overlap in self.special_overlaps],
            "token_lengths": {str(length): count for length, count in sorted(self.length_counts.items())},
            "longest": tokens(self.longest),
            "reasons": {reason: REASONS[reason]
                        for reason in sorted({verdicts[id].reason or "" for id in self.unreachable})},
        }
        if self.corpus is not None:
            counts = self.corpus.counts
            document["corpus"] = {
                "name": self.corpus_name,
                "unused": tokens(self.unused),
                "rare": [{"id": id, "token": self.show(id), "count": int(counts[id])} for id in self.rare],
                "merge_residue": [
                    {"id": found.id, "token": self.show(found.id), "count": found.count, "share": found.share,
                     "parents": [{"id": parent, "token": self.show(parent)} for parent in found.parents],
                     "parents_count": found.parents_count}
                    for found in self.residue
                ],
                "magikarps": [
                    {"id": found.id, "token": self.show(found.id), "score": round(found.score, 4),
                     "count": found.count, "merge_position": found.merge_position}
                    for found in self.magikarps
                ],
                "compression": [self._group_dict(group) for group in self.corpus.groups],
            }
        return document

    def _group_dict(self, group: Group) -> dict[str, Any]:
        return {
            "group": group.name, "documents": group.documents, "characters": group.characters, "bytes": group.bytes,
            "tokenizers": {
                name: {"tokens": group.tokens[name],
                       "bytes_per_token": round(group.bytes_per_token(name), 4),
                       "characters_per_token": round(group.characters_per_token(name), 4)}
                for name in self.corpus.tokenizers  # type: ignore[union-attr]
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1)

    # -------------------------------------------------------------------------------- Markdown

    def to_markdown(self, *, images: dict[str, str] | None = None) -> str:
        """The report as Markdown; ``images`` maps chart names (:meth:`plots`) to file names to show."""
        from hf_bpe.audit import _markdown

        return _markdown.render(self, images or {})

    # ---------------------------------------------------------------------------------- charts

    def plots(self, directory: str | Path, names: Sequence[str] | None = None) -> dict[str, Path]:
        """Draw the charts (``findings``, ``lengths``; with a corpus ``compression`` and ``usage``; or
        those of ``names``) as PNG files in ``directory`` (created if needed); returns their paths by
        name. Needs matplotlib (``pip install 'hf_bpe[plots]'``)."""
        from hf_bpe.audit import _plots

        return _plots.draw(self, Path(directory), names)

