"""Parity-aware BPE training (Foroutan, Meister et al., arXiv 2508.04796): :func:`hf_bpe.train` with
``languages=``. The merges are those ``tokenizers.trainers.ParityBpeTrainer`` (``tokenizers`` 0.23.3)
learns on the same pieces with the same options; the merge loop runs in the Rust core
(``hf_bpe_core::train::parity``, whose documentation states the rule).

Each language's corpus (and dev corpus) is counted as :func:`hf_bpe.train` counts one corpus (split on the
special tokens, then the pattern); then every merge is applied to every language, and the language whose
text is longest (its dev text when ``dev`` is given, else its training text; with ``ratio``, the one
furthest below its target compression) chooses the next merge, its own most frequent pair. Ties between
pairs of equal count follow ``ParityBpeTrainer``: the greatest pair by the tokens' ByteLevel strings (GPT-2's
byte-to-character map), not by raw bytes as plain training.

The model is a merges-list model (``kind == "merges"``, as ``tokenizers`` reads the trained tokenizer): ids
0-255 the bytes, the learned tokens in order, then the special tokens. A merge whose bytes are already a
token (another language reached them another way) adds no token, so the vocabulary can be smaller than
``vocab_size``; a pair merged twice keeps its last place in the list, as ``tokenizers`` keeps it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hf_bpe import _core
from hf_bpe._corpus import Corpus
from hf_bpe.model import BPE

VARIANTS = ("base", "window")
"""How the parity phase chooses a language: the worst one, or the worst one not over its share of a
moving window of recent choices."""


def train_parity(
    languages: Mapping[str, Corpus],
    vocab_size: int | None,
    *,
    dev: Mapping[str, Corpus] | None,
    ratio: Mapping[str, float] | Sequence[float] | None,
    variant: str,
    global_merges: int,
    window_size: int,
    alpha: float,
    min_frequency: int,
    max_token_length: int | None,
    count: Any,
    num_merges_of: Any,
    specials: list[str],
    show_progress: bool,
    progress: Any,
    num_threads: int | None,
    name: str | None,
) -> BPE:
    """:func:`hf_bpe.train` with ``languages``: ``count(corpus)`` counts one corpus into a table,
    ``num_merges_of(vocab_size, specials)`` checks ``vocab_size``, ``progress`` makes the bar."""
    names = _language_names(languages)
    num_merges = num_merges_of(vocab_size, len(specials))
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    _check_count("global_merges", global_merges, 0)
    _check_count("window_size", window_size, 1)
    _check_count("min_frequency", min_frequency, 0)
    if max_token_length is not None:
        _check_count("max_token_length", max_token_length, 1)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a positive number (the window's share threshold times the number of "
                         f"languages), got {alpha!r}")
    ratios = _ratios(ratio, names)
    if dev is not None:
        if not isinstance(dev, Mapping):
            raise TypeError(f"dev must map each language's name to its dev corpus, got {type(dev).__name__}")
        if set(dev) != set(names):
            missing, extra = sorted(set(names) - set(dev)), sorted(set(dev) - set(names))
            raise ValueError("dev needs one corpus per language, under the same names"
                             + (f"; missing: {missing}" if missing else "") + (f"; not a language: {extra}" if extra else ""))
    tables = [count(languages[language], f"languages[{language!r}]") for language in names]
    dev_tables = None if dev is None else [count(dev[language], f"dev[{language!r}]", True) for language in names]
    pattern = tables[0].pattern
    with progress(show_progress, total=num_merges, unit=" merges", desc="Merging") as bar:
        try:
            merges, chosen_by, tokens = _core.learn_parity_merges(
                tables, dev_tables, num_merges, global_merges=global_merges, variant=variant,
                window_size=window_size, alpha=float(alpha), ratio=ratios, min_frequency=min_frequency,
                max_token_length=max_token_length, progress=bar.update if bar is not None else None,
                num_threads=num_threads)
        except ValueError as error:
            raise ValueError(f"parity-aware training cannot run on these inputs: {error}") from None
    model = parity_model(merges, tokens, pattern, specials, name)
    model._training = {"languages": names, "chosen_by": [None if i is None else names[i] for i in chosen_by]}
    return model


def parity_model(merges: list[tuple[int, int]], tokens: list[bytes], pattern: Any, specials: list[str],
                 name: str | None) -> BPE:
    """The merges-list model of a merge loop's result: ``merges`` as pairs of ids (0-255 the bytes, then
    ``tokens`` in order)."""
    spelled = [bytes([byte]) for byte in range(256)] + list(tokens)
    vocab = {token: i for i, token in enumerate(spelled)}
    pairs = [(spelled[left], spelled[right]) for left, right in merges]
    special_ids = {token: len(vocab) + i for i, token in enumerate(specials)}
    return BPE.from_merges(vocab, pairs, pattern, special_ids, name=name)


def _language_names(languages: Any) -> list[str]:
    if not isinstance(languages, Mapping):
        raise TypeError(f"languages must map each language's name to its corpus (e.g. {{'en': files, 'hi': "
                        f"texts}}), got {type(languages).__name__}")
    if not languages:
        raise ValueError("languages is empty: give one corpus per language at least")
    for language in languages:
        if not isinstance(language, str) or not language:
            raise TypeError(f"language names must be non-empty str, got {language!r}")
    return list(languages)


def _ratios(ratio: Any, names: list[str]) -> list[float] | None:
    """One target compression per language, in the order of ``names``."""
    if ratio is None:
        return None
    if isinstance(ratio, Mapping):
        if set(ratio) != set(names):
            raise ValueError(f"ratio needs one value per language, under the same names: {names}")
        values = [ratio[language] for language in names]
    elif isinstance(ratio, Sequence) and not isinstance(ratio, str):
        if len(ratio) != len(names):
            raise ValueError(f"ratio needs one value per language ({len(names)}), got {len(ratio)}")
        values = list(ratio)
    else:
        raise TypeError(f"ratio must map each language to a number, or list one per language, got "
                        f"{type(ratio).__name__}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"each ratio must be a positive number (a target compression), got {value!r}")
    return [float(value) for value in values]


def _check_count(option: str, value: Any, smallest: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < smallest:
        raise ValueError(f"{option} must be an int of at least {smallest}, got {value!r}")
