"""Vocabulary audit: find the tokens a model will never learn, before it is trained.

A token that no text encodes to (*unreachable*), or that the training corpus never or rarely produces,
keeps the embedding it was initialized with: the "SolidGoldMagikarp" tokens that make trained
models misbehave (Land & Bartolo 2024, "Fishing for Magikarp"). :func:`audit` finds them from the
tokenizer alone, for every kind of model hf_bpe loads (tiktoken ranks, merges lists, SentencePiece):

- unreachable tokens, derived from the merge rule and the split pattern
  (:mod:`hf_bpe.audit._reachability`), and those only formed on the way to others;
- partial UTF-8 tokens by kind (:mod:`hf_bpe.audit._utf8`);
- with a corpus: tokens never or rarely produced, the *magikarp score* (merged early, rare on the
  corpus), *merge residue* (steps of other tokens' merges that encoding almost never emits,
  :mod:`hf_bpe.audit._residue`); compression per language or script against other tokenizers;
- near duplicates, special tokens that collide, token lengths.

>>> import hf_bpe, hf_bpe.audit
>>> report = hf_bpe.audit.audit(hf_bpe.get_encoding("gpt2"), corpus=["The quick brown fox."])
>>> len(report.unreachable), len(report.partial_utf8), report.show(report.unreachable[0])
(13, 344, "b'\\\\xc0'")
>>> report.summary()["unused"] > 50_000 - 10
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hf_bpe.audit import _corpus as corpus_module
from hf_bpe.audit import _reachability as reachability_module
from hf_bpe.audit import _residue as residue_module
from hf_bpe.audit import _specials as specials_module
from hf_bpe.audit import _vocabulary
from hf_bpe.audit._reachability import DEFAULT_NEIGHBOUR_LIMIT, DEFAULT_SEARCH_LIMIT
from hf_bpe.audit._report import AuditReport
from hf_bpe.audit._residue import RESIDUE_BELOW
from hf_bpe.counting import piece_token_counts

if TYPE_CHECKING:
    from hf_bpe.model import BPE
    from hf_bpe.train import PieceCounts

__all__ = ["AuditReport", "audit", "training_usage"]


def audit(
    model: BPE,
    corpus: Iterable[str] | Mapping[str, Iterable[str]] | None = None,
    compare: Sequence[BPE | str] | Mapping[str, BPE] = (),
    *,
    corpus_name: str | None = None,
    rare_below: int = 10,
    residue_below: float = RESIDUE_BELOW,
    top: int = 50,
    search_limit: int = DEFAULT_SEARCH_LIMIT,
    neighbour_limit: int = DEFAULT_NEIGHBOUR_LIMIT,
    num_threads: int | None = None,
) -> AuditReport:
    """Audit the vocabulary of ``model``; see :mod:`hf_bpe.audit` for what is found.

    ``corpus`` is an iterable of texts (grouped by script for the compression table) or a mapping of
    group names (languages, files) to iterables of texts; it is read once, in batches. ``compare``
    lists other tokenizers for the compression table: models, names of encodings
    (``hf_bpe.get_encoding``), or a mapping of labels to models. ``rare_below`` is the count under
    which a produced token is *rare*; ``residue_below`` the share of the corpus's tokens under which a
    merge step is *merge residue* (:mod:`hf_bpe.audit._residue`); ``top`` the length of the magikarp and variant lists in the
    JSON; ``search_limit`` bounds the texts tried per token and round where reachability rests on a
    search, ``neighbour_limit`` the neighbours checked per token and side (tokens the bounds stop are
    :attr:`AuditReport.undecided`, never guessed).
    """
    from hf_bpe.model import as_model

    model = as_model(model)
    if not isinstance(rare_below, int) or rare_below < 1:
        raise ValueError(f"rare_below must be a positive int, got {rare_below!r}")
    if isinstance(residue_below, bool) or not isinstance(residue_below, (int, float)) or not 0 < residue_below <= 1:
        raise ValueError(f"residue_below must be a share in (0, 1], got {residue_below!r}")
    others = _compared(compare)
    # The corpus first: a problem with it shows before the vocabulary's analysis.
    stats = None if corpus is None else corpus_module.measure(model, corpus, others, num_threads=num_threads)
    table = _vocabulary.tokens_of(model)
    found = reachability_module.reachability(model, search_limit=search_limit, neighbour_limit=neighbour_limit,
                                             num_threads=num_threads)
    pattern = model.pattern
    from hf_bpe import patterns

    pattern_name = "none (SentencePiece)" if pattern is None else (patterns.name_of(pattern) or f"custom `{pattern}`")
    report = AuditReport(
        name=model.name or "unnamed",
        kind=model.kind,
        pattern=pattern_name,
        n_vocab=model.n_vocab,
        tokens=table,
        reachability=found,
        round_trip_failures=_vocabulary.round_trip_failures(model, table),
        partial_by_kind=_vocabulary.partial_utf8(model, table),
        near_duplicates=_vocabulary.near_duplicates(table),
        specials=specials_module.special_tokens(model),
        special_overlaps=specials_module.overlaps(model),
        length_counts=_vocabulary.length_counts(table),
        longest=_vocabulary.longest(table, top),
        rare_below=rare_below,
        top=top,
    )
    if stats is not None:
        report.corpus = stats
        report.corpus_name = corpus_name or "the corpus"
        report.magikarps = corpus_module.magikarps(stats.counts, table.merge_position, found.reachable, top)
        report.residue_below = residue_below
        report.residue = residue_module.merge_residue(model, stats.counts, residue_below=residue_below, table=table)
    return report


def training_usage(model: BPE, counts: PieceCounts, *, rare_below: int = 10, top: int = 10) -> dict[str, Any]:
    """How often ``model`` produces each token on its training corpus, from the corpus's count table
    (:func:`hf_bpe.train.count_pieces`): every distinct piece encoded once, as encoding emits a piece, and
    weighted by its count; exact and much cheaper than encoding the corpus again. Returns the compact,
    JSON-ready summary the model card shows (``card={"training": {"usage": ...}}``): total tokens,
    reachable tokens never produced and produced fewer than ``rare_below`` times, the ``top``
    magikarp scores and a histogram of tokens by count (buckets ``0``, ``1``, ``2-3``, ``4-7``...).

    >>> import hf_bpe
    >>> from hf_bpe.train import count_pieces
    >>> texts = ["the cat sat on the mat"] * 3
    >>> model = hf_bpe.train(texts, 262, show_progress=False)
    >>> usage = training_usage(model, count_pieces(texts, show_progress=False))
    >>> usage["tokens"], usage["histogram"]["0"] > 200
    (36, True)
    """
    produced = produced_on(model, counts)
    table = _vocabulary.tokens_of(model)
    found = reachability_module.reachability(model)
    reachable = found.reachable
    histogram: dict[str, int] = {}
    for id in reachable:
        count = int(produced[id])
        label = "0" if count == 0 else _bucket(count)
        histogram[label] = histogram.get(label, 0) + 1
    return {
        "tokens": int(produced.sum()),
        "never": sum(1 for id in reachable if produced[id] == 0),
        "rare": sum(1 for id in reachable if 0 < produced[id] < rare_below),
        "rare_below": rare_below,
        "unreachable": len(found.unreachable),
        "undecided": len(found.undecided),
        "magikarps": [[found_item.id, _shown(table, found_item.id), round(found_item.score, 3), found_item.count]
                      for found_item in corpus_module.magikarps(produced, table.merge_position, reachable, top)],
        "histogram": dict(sorted(histogram.items(), key=lambda item: _bucket_start(item[0]))),
    }


def produced_on(model: BPE, counts: PieceCounts) -> Any:
    """How often encoding the counted corpus produces each id (a NumPy array indexed by id):
    :meth:`hf_bpe.BPE.piece_token_counts`, each distinct piece encoded once in the core."""
    return piece_token_counts(model, counts)


def _bucket(count: int) -> str:
    low = 1 << (count.bit_length() - 1)
    return str(low) if low == 1 else f"{low}-{2 * low - 1}"


def _bucket_start(label: str) -> int:
    return int(label.split("-")[0])


def _shown(table: _vocabulary.TokenTable, id: int) -> str:
    text = table.text(id)
    return repr(text) if text is not None else repr(table.bytes_of.get(id, b""))


def _compared(compare: Sequence[BPE | str] | Mapping[str, BPE]) -> dict[str, BPE]:
    """The comparison tokenizers by label."""
    from hf_bpe._encodings import get_encoding
    from hf_bpe.model import BPE, as_model

    if isinstance(compare, Mapping):
        items = list(compare.items())
    elif isinstance(compare, (str, BPE)):
        raise TypeError("compare must be a list of models or encoding names, got a single one; wrap it in a list")
    else:
        items = []
        for other in compare:
            if isinstance(other, str):
                items.append((other, get_encoding(other)))
            else:
                try:
                    model = as_model(other)
                except TypeError:
                    raise TypeError(f"compare holds {type(other).__name__}; give hf_bpe.BPE models or encoding "
                                    "names") from None
                items.append((model.name or f"tokenizer {len(items) + 1}", model))
    labels = [label for label, _ in items]
    duplicates = {label for label in labels if labels.count(label) > 1 or label == "model"}
    if duplicates:
        raise ValueError(f"compare has more than one tokenizer labelled {sorted(duplicates)!r}; pass a mapping "
                         "of distinct labels to models")
    return dict(items)
