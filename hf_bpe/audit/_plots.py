"""The audit's charts as PNG files (matplotlib, an optional extra: ``pip install 'hf_bpe[plots]'``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hf_bpe.audit._report import AuditReport

FILES = {
    "findings": "audit_findings.png",
    "lengths": "audit_token_lengths.png",
    "compression": "audit_compression.png",
    "usage": "audit_usage.png",
    "training_usage": "audit_training_usage.png",
}
"""The file each chart is written to."""

COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend, or a clear error when it is missing."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "the audit's charts need matplotlib, an optional dependency: pip install 'hf_bpe[plots]' "
            "(or pip install matplotlib); the report itself (to_dict, to_markdown) works without it"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(report: AuditReport, directory: Path, names: Sequence[str] | None = None) -> dict[str, Path]:
    """The charts of ``names`` (default: every chart that applies to ``report``), written into
    ``directory``; returns their paths by name."""
    plt = pyplot()
    directory.mkdir(parents=True, exist_ok=True)
    charts = {"findings": _findings, "lengths": _lengths}
    if report.corpus is not None:
        charts |= {"compression": _compression, "usage": _usage}
    paths = {}
    for name, chart in charts.items():
        if names is None or name in names:
            paths[name] = _save(plt, chart(plt, report), directory / FILES[name])
    return paths


def usage_histogram(histogram: Mapping[str, int], path: Path, title: str) -> Path:
    """A bar chart of reachable tokens by how often a corpus produced them (``histogram`` as
    :func:`hf_bpe.audit.training_usage` gives it: bucket label to tokens)."""
    plt = pyplot()
    labels = list(histogram)
    values = [histogram[label] for label in labels]
    figure, axes = plt.subplots(figsize=(8, 3.6))
    bars = axes.bar(range(len(values)), values, color=[COLORS[3] if label == "0" else COLORS[0] for label in labels])
    axes.bar_label(bars, labels=[f"{value:,}" for value in values], fontsize=7, padding=1)
    axes.set_xticks(range(len(values)))
    axes.set_xticklabels(labels, fontsize=7, rotation=45, ha="right")
    axes.set_xlabel("times produced on the corpus")
    axes.set_ylabel("reachable tokens")
    axes.set_title(title)
    return _save(plt, figure, path)


def _save(plt: Any, figure: Any, path: Path) -> Path:
    figure.tight_layout()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp.png")
    try:
        figure.savefig(temporary, dpi=100)
        os.replace(temporary, path)
    finally:
        plt.close(figure)
        temporary.unlink(missing_ok=True)
    return path


def _findings(plt: Any, report: AuditReport) -> Any:
    summary = report.summary()
    rows = [
        ("unreachable", summary["unreachable"]),
        ("  intermediate only", summary["intermediate_only"]),
        ("round-trip failures", summary["round_trip_failures"]),
    ]
    rows += [(f"partial UTF-8: {kind}", count) for kind, count in summary["partial_utf8_by_kind"].items()]
    rows.append(("ids on variants", summary["ids_spent_on_variants"]))
    if report.corpus is not None:
        rows += [("never produced", summary["unused"]), (f"produced < {report.rare_below}x", summary["rare"])]
    figure, axes = plt.subplots(figsize=(7, 0.42 * len(rows) + 1.2))
    labels = [label for label, _ in rows][::-1]
    values = [value for _, value in rows][::-1]
    bars = axes.barh(labels, values, color=COLORS[0])
    axes.bar_label(bars, labels=[f"{value:,}" for value in values], padding=3, fontsize=9)
    axes.set_xlabel("tokens")
    axes.set_xlim(0, max(values + [1]) * 1.18)
    axes.set_title(f"{report.name}: audit findings ({summary['ordinary_tokens']:,} ordinary tokens)")
    return figure


def _lengths(plt: Any, report: AuditReport) -> Any:
    counts = report.length_counts
    cap = 32
    lengths = list(range(0 if counts.get(0) else 1, cap + 1))
    values = [counts.get(length, 0) for length in lengths]
    over = sum(count for length, count in counts.items() if length > cap)
    labels = [str(length) for length in lengths]
    if over:
        labels.append(f">{cap}")
        values.append(over)
    figure, axes = plt.subplots(figsize=(8, 3.6))
    axes.bar(range(len(values)), values, color=COLORS[0])
    axes.set_xticks(range(len(values)))
    axes.set_xticklabels(labels, fontsize=7, rotation=0)
    axes.set_xlabel("token length (bytes)")
    axes.set_ylabel("ordinary tokens")
    axes.set_title(f"{report.name}: ordinary tokens by length")
    return figure


def _compression(plt: Any, report: AuditReport) -> Any:
    corpus = report.corpus
    assert corpus is not None
    names = corpus.tokenizers
    groups = corpus.groups
    width = 0.8 / len(names)
    figure, axes = plt.subplots(figsize=(max(6, 1.3 * len(groups) * max(1, len(names) / 2)), 4))
    for index, name in enumerate(names):
        positions = [group_index + (index - (len(names) - 1) / 2) * width for group_index in range(len(groups))]
        values = [group.characters_per_token(name) for group in groups]
        bars = axes.bar(positions, values, width, label=report.name if name == "model" else name,
                        color=COLORS[index % len(COLORS)])
        axes.bar_label(bars, labels=[f"{value:.1f}" for value in values], fontsize=7, padding=1)
    axes.set_xticks(range(len(groups)))
    axes.set_xticklabels([group.name for group in groups])
    axes.set_ylabel("characters per token (higher is better)")
    axes.set_title("Compression by group and tokenizer")
    axes.margins(y=0.12)  # room above the tallest bar's label
    # Beside the plot, not over it: inside, "best" still covered the last bar's label.
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return figure


def _usage(plt: Any, report: AuditReport) -> Any:
    corpus = report.corpus
    assert corpus is not None
    counts = corpus.counts
    positions = report.tokens.merge_position
    reachable = [id for id in report.reachability.reachable if id in positions]
    figure, axes = plt.subplots(figsize=(8, 4.2))
    axes.scatter([positions[id] for id in reachable], [int(counts[id]) + 1 for id in reachable], s=2, alpha=0.35,
                 color=COLORS[0], rasterized=True, label="merged tokens")
    top = report.magikarps[:20]
    if top:
        axes.scatter([found.merge_position for found in top], [found.count + 1 for found in top], s=18,
                     color=COLORS[3], label="top magikarp scores")
        # The top points often sit on one spot (merged first, never produced): name the first five.
        # !a (ascii) keeps every token drawable in the default font (no missing glyphs).
        names = "\n".join(f"{report.tokens.text(found.id) or report.tokens.bytes_of.get(found.id, b'')!a} "
                          f"(merge {found.merge_position:,}, {found.count:,}x)" for found in top[:5])
        axes.text(0.99, 0.80, f"highest magikarp scores:\n{names}", transform=axes.transAxes, ha="right",
                  va="top", multialignment="left", fontsize=7, family="monospace",
                  bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "0.7"})
    axes.set_yscale("log")
    axes.set_xlabel("merge position (0 = merged first)")
    axes.set_ylabel("count on the corpus + 1 (log)")
    axes.set_title(f"{report.name}: merged early but rare on {report.corpus_name}")
    axes.legend(fontsize=8, loc="upper right")
    return figure
