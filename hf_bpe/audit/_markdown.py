"""The audit report as Markdown (:meth:`hf_bpe.audit.AuditReport.to_markdown`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hf_bpe.audit import _utf8
from hf_bpe.audit._reachability import REASONS

if TYPE_CHECKING:
    from hf_bpe.audit._report import AuditReport

ROWS = 20
"""Rows shown per list; the JSON (``to_dict``) has them all."""


def render(report: AuditReport, images: dict[str, str]) -> str:
    summary = report.summary()
    sections = [
        f"# Vocabulary audit: {report.name}",
        (f"{report.kind} model, {summary['vocab_size']:,} ids: {summary['ordinary_tokens']:,} ordinary tokens and "
        f"{summary['special_tokens']:,} special; split pattern {report.pattern}."),
        _headline(report),
        _unreachable(report),
        _partial(report),
    ]
    if report.corpus is not None:
        sections += [_usage(report), _residue(report), _compression(report, images)]
    sections += [_variants(report), _specials(report), _lengths(report, images)]
    return "\n\n".join(section for section in sections if section) + "\n"


def cell(text: str) -> str:
    """Text made safe for a Markdown table cell inside backticks."""
    return "`" + text.replace("`", "'").replace("|", "\\|").replace("\n", "\\n") + "`"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _more(total: int, shown: int) -> str:
    return f"\n\n{total - shown:,} more in the JSON report." if total > shown else ""


def _headline(report: AuditReport) -> str:
    summary = report.summary()
    rows = [
        ["unreachable tokens (no text encodes to them)", f"{summary['unreachable']:,}"],
        ["  of which formed on the way to other tokens (intermediate only)", f"{summary['intermediate_only']:,}"],
        ["undecided within the reachability search's bounds", f"{summary['undecided']:,}"],
        ["tokens whose own text does not encode back to them (round trip)", f"{summary['round_trip_failures']:,}"],
        ["partial UTF-8 tokens", f"{summary['partial_utf8']:,}"],
        ["ids spent on variants (case, leading space, trailing punctuation)", f"{summary['ids_spent_on_variants']:,}"],
        ["special tokens that are also one ordinary token", f"{summary['specials_also_ordinary']:,}"],
        ["overlapping special tokens", f"{summary['special_overlaps']:,}"],
    ]
    if report.corpus is not None:
        rows += [
            [f"reachable tokens never produced on {report.corpus_name}", f"{summary['unused']:,}"],
            [f"reachable tokens produced fewer than {report.rare_below} times", f"{summary['rare']:,}"],
            [f"merge residue (merge steps below {report.residue_below:g} of the tokens; see below)",
             f"{summary['merge_residue']:,} ({summary['merge_residue_share']:.1%} of the ordinary tokens)"],
        ]
    return "## Summary\n\n" + _table(["finding", "tokens"], rows)


def _unreachable(report: AuditReport) -> str:
    ids = report.unreachable
    text = [
        "## Unreachable tokens",
        ("A token is unreachable when no text encodes to a sequence holding it. Each verdict is derived "
        "from the merge rule and the split pattern (see `hf_bpe.audit._reachability`); reachable tokens "
        "have a witness text that was encoded to check it."),
        report.search_bounds,
    ]
    if not ids:
        text.append("None: every ordinary token appears in the encoding of some text"
                    + (", or is undecided." if report.undecided else "."))
    else:
        verdicts = report.reachability.verdicts
        rows = [
            [str(id), cell(report.show(id)), verdicts[id].reason or "", "yes" if id in report.reachability.intermediate else ""]
            for id in ids[:ROWS]
        ]
        text.append(_table(["id", "token", "reason", "intermediate"], rows) + _more(len(ids), ROWS))
        reasons = sorted({verdicts[id].reason or "" for id in ids})
        text.append("\n".join(f"- `{reason}`: {REASONS[reason]}" for reason in reasons))
    if report.undecided:
        shown = ", ".join(cell(report.show(id)) for id in report.undecided[:ROWS])
        text.append(f"Undecided ({len(report.undecided):,}): {shown}" + _more(len(report.undecided), ROWS))
    return "\n\n".join(text)


def _partial(report: AuditReport) -> str:
    rows = []
    for kind, ids in report.partial_by_kind.items():
        examples = ", ".join(cell(report.show(id)) for id in ids[:4])
        rows.append([kind, _utf8.KINDS[kind], f"{len(ids):,}", examples])
    return "## Partial UTF-8 tokens\n\n" + _table(["kind", "meaning", "tokens", "examples"], rows)


def _usage(report: AuditReport) -> str:
    corpus = report.corpus
    assert corpus is not None
    counts = corpus.counts
    text = [
        f"## Usage on {report.corpus_name}",
        (f"{int(counts.sum()):,} tokens. {len(report.unused):,} reachable tokens were never produced and "
        f"{len(report.rare):,} fewer than {report.rare_below} times."),
        ("The *magikarp score* of a merged token is its rank by frequency on this corpus minus its merge "
        "position, both as fractions of the merged tokens: near 1 for a token merged early (frequent in the "
        "tokenizer's own training text) but rare here, the profile of under-trained \"glitch\" tokens."),
    ]
    rows = [[str(found.id), cell(report.show(found.id)), f"{found.score:.3f}", f"{found.count:,}",
             f"{found.merge_position:,}"] for found in report.magikarps[:ROWS]]
    if rows:
        text.append(_table(["id", "token", "score", "count", "merge position"], rows))
    return "\n\n".join(text)


def _residue(report: AuditReport) -> str:
    found = report.residue
    ordinary = len(report.tokens.bytes_of)
    text = [
        "## Merge residue",
        (f"{len(found):,} merged tokens ({len(found) / max(ordinary, 1):.1%} of the {ordinary:,} ordinary tokens) are "
         f"steps of other tokens' merges that {report.corpus_name} almost never emits: each makes up less than "
         f"{report.residue_below:g} of its tokens, while the tokens made from it (one merge up) are emitted more "
         "often than it is (LiteToken's *intermediate merge residues*; see `hf_bpe.audit._residue`)."),
    ]
    rows = [[str(token.id), cell(report.show(token.id)), f"{token.count:,}", f"{token.share:.2e}",
             " ".join(cell(report.show(parent)) for parent in token.parents[:4])
             + (f" +{len(token.parents) - 4}" if len(token.parents) > 4 else ""), f"{token.parents_count:,}"]
            for token in found[:ROWS]]
    if rows:
        text.append(_table(["id", "token", "count", "share", "made into", "their count"], rows)
                    + _more(len(found), ROWS))
    return "\n\n".join(text)


def _compression(report: AuditReport, images: dict[str, str]) -> str:
    corpus = report.corpus
    assert corpus is not None
    names = corpus.tokenizers
    header = ["group", "bytes", "characters"] + [f"{_label(report, name)} bytes/token" for name in names] + [
        f"{_label(report, name)} chars/token" for name in names]
    rows = []
    for group in corpus.groups:
        rows.append([group.name, f"{group.bytes:,}", f"{group.characters:,}"]
                    + [f"{group.bytes_per_token(name):.2f}" for name in names]
                    + [f"{group.characters_per_token(name):.2f}" for name in names])
    text = ["## Compression", "Higher is better (fewer tokens for the same text).", _table(header, rows)]
    if len(corpus.groups) > 1:
        reference = corpus.groups[0]
        lines = [(f"Tokens per character relative to {reference.name} (the same text is not available in every "
                 "group, so this compares scripts, not translations):")]
        for group in corpus.groups[1:]:
            parts = []
            for name in names:
                ratio = reference.characters_per_token(name) / max(group.characters_per_token(name), 1e-9)
                parts.append(f"{ratio:.2f}x with {_label(report, name)}")
            lines.append(f"- {group.name}: " + ", ".join(parts))
        text.append("\n".join(lines))
    if "compression" in images:
        text.append(f"![Characters per token by group and tokenizer]({images['compression']})")
    return "\n\n".join(text)


def _label(report: AuditReport, name: str) -> str:
    return report.name if name == "model" else name


def _variants(report: AuditReport) -> str:
    groups = report.near_duplicates
    text = [
        "## Near duplicates",
        (f"{len(groups):,} words have several tokens that differ only by a leading space, case or trailing "
        f"punctuation; the vocabulary spends {report.spent_on_variants:,} ids on such variants."),
    ]
    rows = [[cell(group.key), ", ".join(group.kinds), " ".join(cell(report.show(id)) for id in group.ids[:8])]
            for group in groups[:ROWS]]
    if rows:
        text.append(_table(["word", "variation", "tokens"], rows) + _more(len(groups), ROWS))
    return "\n\n".join(text)


def _specials(report: AuditReport) -> str:
    if not report.specials:
        return "## Special tokens\n\nNone."
    rows = []
    for special in report.specials:
        notes = []
        if special.also_ordinary_token:
            notes.append(f"its text is also the ordinary token {special.ordinary_ids[0]}")
        if special.produced_by_text:
            notes.append("ordinary text produces it (characters the vocabulary lacks)")
        rows.append([str(special.id), cell(special.text), f"{len(special.ordinary_ids)}", "; ".join(notes)])
    text = ["## Special tokens", _table(["id", "text", "ordinary tokens for its text", "note"], rows[:ROWS])
            + _more(len(rows), ROWS)]
    if report.special_overlaps:
        text.append("Overlapping special tokens (the longest match wins where both match):\n\n"
                    + "\n".join(f"- {cell(first)} {'is inside' if how == 'inside' else 'ends where'} "
                                f"{cell(second)}{'' if how == 'inside' else ' starts'}"
                                for first, second, how in report.special_overlaps[:ROWS]))
    return "\n\n".join(text)


def _lengths(report: AuditReport, images: dict[str, str]) -> str:
    counts = report.length_counts
    longest = max(counts, default=0)
    rows = [[str(length), f"{counts.get(length, 0):,}"] for length in range(min(longest, 16) + 1)
            if length or counts.get(0)]
    if longest > 16:
        rows.append([f"17 to {longest}", f"{sum(n for size, n in counts.items() if size > 16):,}"])
    text = ["## Token lengths"]
    if "lengths" in images:
        text.append(f"![Ordinary tokens by length in bytes]({images['lengths']})")
    text.append(_table(["bytes", "tokens"], rows))
    text.append("Longest tokens: " + ", ".join(f"{cell(report.show(id))} ({len(report.tokens.bytes_of[id])})"
                                             for id in report.longest[:10]))
    return "\n\n".join(text)
