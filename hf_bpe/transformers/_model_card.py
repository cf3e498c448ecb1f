"""The model card (``README.md``) of a saved tokenizer folder, from ``model_cards/tokenizer.md``.

The card states what the folder holds (vocabulary size, split pattern, special tokens), what is known
about the training data, the compression measured on a sample (bytes per token) and the distribution
of token lengths, with a histogram image when matplotlib is installed.
"""

from __future__ import annotations

import os
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from hf_bpe import patterns
from hf_bpe._io import atomic_write

if TYPE_CHECKING:
    from hf_bpe.audit import AuditReport
    from hf_bpe.model import BPE
    from hf_bpe.transformers._tokenizer import BPETokenizer

CARD_FILE = "README.md"
HISTOGRAM_FILE = "token_lengths.png"
TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "model_cards"
"""Where the templates are: next to the package, in the repository and in an installed wheel."""


def template_path(name: str = "tokenizer.md") -> Path:
    path = TEMPLATE_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"model card template {path} is missing; reinstall hf_bpe")
    return path


def bytes_per_token(tokenizer: BPETokenizer, text: str) -> tuple[int, int]:
    """UTF-8 bytes of ``text`` and the number of tokens it encodes to (no BOS/EOS)."""
    return len(text.encode("utf-8")), len(tokenizer.encode(text, add_special_tokens=False))


def token_length_counts(tokenizer: BPETokenizer) -> Counter[int]:
    """How many ordinary tokens have each length in bytes."""
    return Counter(len(token) for token in tokenizer.model.mergeable_ranks)


def render(tokenizer: BPETokenizer, *, histogram: str | None = None, audit: str | None = None) -> str:
    """The card's Markdown; ``histogram`` is the image file to show, if one was drawn; ``audit`` the
    vocabulary audit's section (:func:`audit_section`, computed when not given)."""
    model = tokenizer.model
    card: dict[str, Any] = tokenizer._card
    pattern_name = patterns.name_of(model.pattern)
    added = tokenizer.added_tokens_decoder
    fields = {
        "title": card.get("title") or (f"{model.name} tokenizer" if model.name else "BPE tokenizer"),
        "provenance": card.get("provenance", ""),
        "last_id": len(tokenizer) - 1,
        "vocab_size": len(tokenizer),
        "n_mergeable": len(model.mergeable_ranks),
        "n_added": len(added),
        "pattern_name": f"`{pattern_name}`" if pattern_name else "custom" if isinstance(model.pattern, str)
        else "`tokenizers` Split pre-tokenizer (Oniguruma)",
        "bos_eos": _bos_eos(tokenizer),
        "pattern": model.pattern if isinstance(model.pattern, str) else _splits(model.pattern),
        "special_tokens": _special_tokens(tokenizer),
        "training": _training(card.get("training")),
        "compression": _compression(tokenizer, card.get("training")),
        "lengths": _lengths(token_length_counts(tokenizer), histogram),
        "audit": audit if audit is not None else audit_section(tokenizer),
    }
    return Template(template_path().read_text(encoding="utf-8")).substitute(fields)


def _splits(pattern: patterns.Split | tuple[patterns.Step, ...]) -> str:
    """Normalizer, Split and ByteLevel steps, one per line: the normalizer, the Oniguruma regex (or
    plain string), behavior and invert, or the ByteLevel step."""
    steps = (pattern,) if isinstance(pattern, patterns.Split) else pattern
    return "\n".join(
        f"{step.pattern}    ({'string' if step.literal else 'regex'}; {step.behavior}{'; inverted' if step.invert else ''})"
        if isinstance(step, patterns.Split) else repr(step) if isinstance(step, patterns.ByteLevel)
        else f"normalizer {step!r}"
        for step in steps
    )


def write_model_card(tokenizer: BPETokenizer, directory: str | os.PathLike[str]) -> Path:
    """Write ``README.md`` (and, when matplotlib is installed, ``token_lengths.png`` and the audit's
    charts) into ``directory``."""
    directory = Path(directory)
    counts = token_length_counts(tokenizer)
    histogram = _chart(tokenizer.model, directory / HISTOGRAM_FILE, lambda path: _draw_histogram(counts, path))
    audit = audit_section(tokenizer, directory)
    return atomic_write(directory / CARD_FILE, render(tokenizer, histogram=histogram, audit=audit))


@dataclass
class _Audited:
    """A model's audit and the charts drawn from the model alone (file name -> PNG bytes)."""

    model: weakref.ref[BPE]
    report: AuditReport
    charts: dict[str, bytes] = field(default_factory=dict)


# The last model audited for a card (held weakly: the cache never keeps a vocabulary alive), its report
# and charts: saving the same vocabulary again (a checkpoint every few steps, or a folder loaded and
# saved back while the first is still in use) neither audits it nor draws its charts again. Found by
# equality of the models (models are immutable) and their names, so the card is always the model's own.
_last_audited: list[_Audited] = []


def _audited(model: BPE) -> _Audited:
    from hf_bpe.audit import audit

    if _last_audited:
        held = _last_audited[0].model()
        if held is not None and held.name == model.name and held == model:
            return _last_audited[0]
    _last_audited[:] = [_Audited(weakref.ref(model), audit(model))]
    return _last_audited[0]


def _chart(model: BPE, path: Path, draw: Callable[[Path], object]) -> str | None:
    """The file name of a chart of ``model`` alone at ``path``: the bytes drawn for an equal model
    before, or ``draw(path)`` (``None`` when it drew nothing)."""
    audited = _audited(model)
    drawn = audited.charts.get(path.name)
    if drawn is not None:
        return atomic_write(path, drawn).name
    if not draw(path):
        return None
    audited.charts[path.name] = path.read_bytes()
    return path.name


def audit_section(tokenizer: BPETokenizer, directory: Path | None = None) -> str:
    """The card's summary of :func:`hf_bpe.audit` on the model (its vocabulary alone: seconds, the
    reachability search bounded per token, :attr:`hf_bpe.audit.AuditReport.search_bounds`) and,
    when the card records it (``card["training"]["usage"]``, from
    :func:`hf_bpe.audit.training_usage`), of the training corpus; with ``directory``, its charts are
    drawn there when matplotlib is installed."""
    from hf_bpe.audit import _plots

    report = _audited(tokenizer.model).report
    summary = report.summary()
    kinds = summary["partial_utf8_by_kind"]
    examples = ", ".join(f"`{_escape(report.show(id))}`" for id in report.unreachable[:4])
    rows = [
        "| finding | tokens |",
        "|---|---|",
        f"| unreachable: no text encodes to them | {summary['unreachable']:,}{f' (e.g. {examples})' if examples else ''} |",
        f"| of those, formed only on the way to other tokens | {summary['intermediate_only']:,} |",
        f"| undecided within the reachability search's bounds | {summary['undecided']:,} |",
        (f"| partial UTF-8: lead / continuation / mixed / invalid | {kinds['lead']:,} / {kinds['continuation']:,} / "
        f"{kinds['mixed']:,} / {kinds['invalid']:,} |"),
        f"| ids spent on variants (case, leading space, trailing punctuation) | {summary['ids_spent_on_variants']:,} |",
        (f"| special tokens that are also one ordinary token / overlapping ones | {summary['specials_also_ordinary']:,} / "
        f"{summary['special_overlaps']:,} |"),
    ]
    parts = [
        ("What `hf_bpe.audit` finds in the vocabulary alone (`hf-bpe audit` on this folder prints the full report, "
        "`--corpus FILES` adds usage and compression on your text):"),
        "\n".join(rows),
        report.search_bounds,
    ]
    usage = (tokenizer._card.get("training") or {}).get("usage")
    images: dict[str, str] = {}
    if directory is not None:
        try:
            findings = _chart(tokenizer.model, directory / _plots.FILES["findings"],
                              lambda path: report.plots(path.parent, ["findings"]))
            images = {"findings": findings} if findings else {}
            if usage:
                title = "Reachable tokens by times produced on the training corpus"
                path = _plots.usage_histogram(usage["histogram"], directory / _plots.FILES["training_usage"], title)
                images["training_usage"] = path.name
        except ImportError:
            pass
    if "findings" in images:
        parts.append(f"![Audit findings]({images['findings']})")
    if usage:
        magikarps = ", ".join(f"`{_escape(shown)}` ({count:,})" for _, shown, _, count in usage["magikarps"][:10])
        parts.append(
            f"On the training corpus ({usage['tokens']:,} tokens, counted from its pieces): {usage['never']:,} "
            f"reachable tokens were never produced and {usage['rare']:,} fewer than {usage['rare_below']} times; a "
            "model trained on this corpus barely trains their embeddings. Merged early but rare there (highest "
            f"magikarp scores, with counts): {magikarps or 'none'}."
        )
        if "training_usage" in images:
            parts.append(f"![Reachable tokens by times produced on the training corpus]({images['training_usage']})")
    else:
        parts.append("The training corpus is not recorded in this folder, so usage on it is not shown.")
    return "\n\n".join(parts)


def _bos_eos(tokenizer: BPETokenizer) -> str:
    parts = []
    if tokenizer.add_bos_token:
        parts.append(f"BOS `{tokenizer.bos_token}` first")
    if tokenizer.add_eos_token:
        parts.append(f"EOS `{tokenizer.eos_token}` last")
    return ", ".join(parts) if parts else "none"


def _special_tokens(tokenizer: BPETokenizer) -> str:
    roles: dict[str, list[str]] = {}
    for role, token in tokenizer.special_tokens_map.items():
        roles.setdefault(str(token), []).append(role.removesuffix("_token"))
    rows = ["| id | token | role | special |", "|---|---|---|---|"]
    for token_id, added in tokenizer.added_tokens_decoder.items():
        role = ", ".join(roles.get(added.content, [])) or (
            "model" if added.content in tokenizer.model.special_tokens else "added"
        )
        rows.append(
            f"| {token_id} | `{_escape(added.content)}` | {role} | {'yes' if added.special else 'no'} |"
        )
    return "\n".join(rows) if len(rows) > 2 else "None."


def _training(training: dict[str, Any] | None) -> str:
    if not training:
        return "Not recorded (the tokenizer was built from an existing model, not trained by hf_bpe here)."
    lines = []
    if training.get("corpus"):
        lines.append(f"Corpus: {training['corpus']}.")
    if training.get("texts") is not None:
        lines.append(f"{training['texts']:,} texts, {training.get('bytes', 0):,} bytes of UTF-8.")
    elif training.get("files") is not None:
        lines.append(f"{training['files']:,} files, {training.get('bytes', 0):,} bytes of UTF-8.")
    if training.get("pattern"):
        lines.append(f"Split pattern: {training['pattern']}.")
    if training.get("vocab_size"):
        lines.append(f"Trained to a vocabulary of {training['vocab_size']:,}.")
    if training.get("special_tokens"):
        lines.append("Special tokens: " + ", ".join(f"`{token}`" for token in training["special_tokens"]) + ".")
    return " ".join(lines) or "Not recorded."


def _compression(tokenizer: BPETokenizer, training: dict[str, Any] | None) -> str:
    rows = ["| sample | bytes | tokens | bytes per token |", "|---|---|---|---|"]
    if training and training.get("sample_tokens"):
        n_bytes, n_tokens = training["sample_bytes"], training["sample_tokens"]
        rows.append(f"| start of the training data | {n_bytes:,} | {n_tokens:,} | {n_bytes / n_tokens:.2f} |")
    sample = template_path("sample.txt").read_text(encoding="utf-8")
    try:
        n_bytes, n_tokens = bytes_per_token(tokenizer, sample)
    except NotImplementedError:  # added tokens it refuses to encode (named when it encodes)
        n_bytes, n_tokens = 0, 0
    if n_tokens:
        rows.append(
            f"| mixed text (English, code, numbers, German, French, Japanese, Chinese, Russian, Greek, emoji; "
            f"hf_bpe's `model_cards/sample.txt`) | {n_bytes:,} | {n_tokens:,} | {n_bytes / n_tokens:.2f} |"
        )
    return "Measured by encoding each sample without BOS/EOS; higher is better compression.\n\n" + "\n".join(
        rows
    )


def _lengths(counts: Counter[int], histogram: str | None) -> str:
    rows = ["| bytes | tokens |", "|---|---|"]
    longest = max(counts, default=0)
    for length in range(1, min(longest, 16) + 1):
        rows.append(f"| {length} | {counts.get(length, 0):,} |")
    if longest > 16:
        rows.append(f"| 17 to {longest} | {sum(n for size, n in counts.items() if size > 16):,} |")
    image = f"![Histogram of token lengths in bytes]({histogram})\n\n" if histogram else ""
    return f"{image}Length in bytes of the ordinary tokens:\n\n" + "\n".join(rows)


def _draw_histogram(counts: Counter[int], path: Path) -> str | None:
    """Save a bar chart of token lengths; None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    lengths = sorted(counts)
    figure, axes = plt.subplots(figsize=(7, 3.5), dpi=100)
    axes.bar(lengths, [counts[length] for length in lengths], color="#4c72b0")
    axes.set_xlabel("token length (bytes)")
    axes.set_ylabel("tokens")
    axes.set_title("Ordinary tokens by length")
    figure.tight_layout()
    temporary = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(temporary)
    plt.close(figure)
    os.replace(temporary, path)
    return path.name


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", "\\n")
