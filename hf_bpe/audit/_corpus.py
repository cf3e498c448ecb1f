"""What a corpus shows: how often each token is produced, and how well each tokenizer compresses each
language or script of it.

A corpus is an iterable of texts (grouped by their dominant script, :func:`script_of`) or a mapping
from group names (languages, files) to iterables of texts. Texts are encoded in batches of about
``batch_bytes`` by the models' parallel ``token_counts``, so time grows linearly with the corpus
and memory does not grow with it.

>>> import hf_bpe
>>> stats = measure(hf_bpe.get_encoding("gpt2"), {"en": ["hello world"], "el": ["καλημέρα"]})
>>> [(group.name, group.characters, group.tokens["model"]) for group in stats.groups]
[('en', 11, 2), ('el', 8, 10)]
>>> script_of("Привет, мир"), script_of("今日は雨"), script_of("1234")
('Cyrillic', 'Japanese', 'other')
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hf_bpe.counting import token_counts

if TYPE_CHECKING:
    from hf_bpe.model import BPE

Corpus = Iterable[str] | Mapping[str, Iterable[str]]

DEFAULT_BATCH_BYTES = 4 << 20


@dataclass
class Group:
    """One language or script of the corpus: its size, and the tokens each tokenizer made of it
    (``tokens`` by tokenizer name; the audited model is ``"model"``)."""

    name: str
    documents: int = 0
    characters: int = 0
    bytes: int = 0
    tokens: dict[str, int] = field(default_factory=dict)

    def bytes_per_token(self, tokenizer: str = "model") -> float:
        return self.bytes / max(self.tokens.get(tokenizer, 0), 1)

    def characters_per_token(self, tokenizer: str = "model") -> float:
        return self.characters / max(self.tokens.get(tokenizer, 0), 1)


@dataclass
class CorpusStats:
    """Per-group sizes and token totals, and how often the model produced each id (``counts``, a
    NumPy array indexed by id)."""

    groups: list[Group]
    counts: Any
    tokenizers: list[str]


def measure(model: BPE, corpus: Corpus, compare: Mapping[str, BPE] | None = None, *,
            batch_bytes: int = DEFAULT_BATCH_BYTES, num_threads: int | None = None) -> CorpusStats:
    """Encode ``corpus`` with ``model`` (counting every id) and each model of ``compare`` (counting
    tokens), group by group."""
    import numpy as np

    compare = dict(compare or {})
    tokenizers = ["model", *compare]
    counts = np.zeros(model.n_vocab, dtype=np.int64)
    groups: dict[str, Group] = {}
    buffers: dict[str, list[str]] = {}
    sizes: Counter[str] = Counter()

    def flush(name: str) -> None:
        texts = buffers.pop(name, [])
        sizes[name] = 0
        if not texts:
            return
        group = groups[name]
        produced = token_counts(model, texts, num_threads=num_threads)
        counts[: len(produced)] += produced
        group.tokens["model"] = group.tokens.get("model", 0) + int(produced.sum())
        for other_name, other in compare.items():
            total = int(token_counts(other, texts, num_threads=num_threads).sum())
            group.tokens[other_name] = group.tokens.get(other_name, 0) + total

    for name, text in _grouped(corpus):
        if not isinstance(text, str):
            raise TypeError(f"corpus texts must be str, got {type(text).__name__} in group {name!r}")
        group = groups.setdefault(name, Group(name))
        size = len(text.encode("utf-8"))
        group.documents += 1
        group.characters += len(text)
        group.bytes += size
        buffers.setdefault(name, []).append(text)
        sizes[name] += size
        if sizes[name] >= batch_bytes:
            flush(name)
    for name in list(buffers):
        flush(name)
    for group in groups.values():
        for tokenizer in tokenizers:
            group.tokens.setdefault(tokenizer, 0)
    return CorpusStats(list(groups.values()), counts, tokenizers)


def _grouped(corpus: Corpus) -> Iterator[tuple[str, str]]:
    if isinstance(corpus, str):
        raise TypeError("corpus must be an iterable of texts or a mapping of names to texts, got a single str")
    if isinstance(corpus, Mapping):
        for name, texts in corpus.items():
            for text in [texts] if isinstance(texts, str) else texts:
                yield str(name), text
        return
    for text in corpus:
        yield script_of(text) if isinstance(text, str) else "", text


def script_of(text: str, sample: int = 2000) -> str:
    """The script most letters of ``text`` are written in (by Unicode character names: ``Latin``,
    ``Cyrillic``, ``Greek``, ``Han``, ``Hangul``, ``Arabic``...); ``Japanese`` for Han with kana, or
    kana; ``other`` when the first ``sample`` characters hold no letter."""
    scripts: Counter[str] = Counter()
    for char in text[:sample]:
        if not char.isalpha():
            continue
        name = unicodedata.name(char, "")
        first = name.split(" ", 1)[0]
        if first in ("HIRAGANA", "KATAKANA"):
            scripts["kana"] += 1
        elif first == "CJK":
            scripts["Han"] += 1
        elif first:
            scripts[first.capitalize()] += 1
    if not scripts:
        return "other"
    if scripts["kana"]:
        return "Japanese"
    return scripts.most_common(1)[0][0]


# ------------------------------------------------------------------------------------------ usage


@dataclass(frozen=True)
class Magikarp:
    """A token merged early (its tokenizer's training text had it often) but rare in the corpus:
    ``score`` = its rank by corpus frequency minus its merge position, both as fractions of the
    merged tokens (0 = first), so 1 means merged first and never produced."""

    id: int
    score: float
    count: int
    merge_position: int


def magikarps(counts: Any, merge_position: Mapping[int, int], candidates: Iterable[int], top: int) -> list[Magikarp]:
    """The ``top`` tokens among ``candidates`` (merged tokens: those in ``merge_position``) with the
    highest magikarp score; ties in frequency share their average rank."""
    import numpy as np

    ids = [id for id in candidates if id in merge_position]
    if not ids:
        return []
    n = len(ids)
    frequency = np.array([counts[id] if id < len(counts) else 0 for id in ids], dtype=np.int64)
    order = np.argsort(-frequency, kind="stable")
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.arange(n, dtype=np.float64)
    # Equal counts share their average rank, so no order among never-produced tokens is invented.
    for value in np.unique(frequency):
        tied = frequency == value
        ranks[tied] = ranks[tied].mean()
    positions = sorted(merge_position[id] for id in ids)
    rank_of_position = {position: index for index, position in enumerate(positions)}
    scale = max(n - 1, 1)
    scored = [
        Magikarp(id, float(ranks[index] - rank_of_position[merge_position[id]]) / scale, int(frequency[index]),
                 merge_position[id])
        for index, id in enumerate(ids)
    ]
    scored.sort(key=lambda found: (-found.score, found.merge_position))
    return scored[:top]
