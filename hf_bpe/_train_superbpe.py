r"""SuperBPE training (Liu et al., "SuperBPE: Space Travel for Language Models", arXiv 2503.13423):
:func:`hf_bpe.train` with ``superword_transition=T``.

Stage one is ordinary training (the same pieces, the same loop, ties to the greatest bytes) until the
vocabulary holds ``T`` tokens (bytes, learned tokens and special tokens). Stage two goes on with the
paper's pre-tokenization, which no longer splits on whitespace: each document is split on the special
tokens, then cut only around numbers (:data:`STAGE_TWO`: every run of ``\p{N}`` characters is a piece,
cut again into groups of three ``\d`` digits from its end), so pieces span words, spaces and
punctuation. Each stage-two piece starts as stage one's encoding of it (stage one's merges in order), and
the loop goes on, ties again to the greatest bytes, never learning a token of more than
:data:`MAX_WORDS` words (runs of bytes other than the space) or one holding ``": "``, until the
vocabulary holds ``vocab_size`` tokens.

The model is a merges-list model (stage one's merges, then stage two's, a pair listed once, at its first
merge) whose pattern is :data:`STAGE_TWO`: text is encoded as stage two saw it. Its ``tokenizer.json``
(``Split`` pre-tokenizers, then ``ByteLevel``) encodes alike in ``tokenizers``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from hf_bpe import _core, patterns
from hf_bpe._corpus import Corpus, Files, Paths, open_source
from hf_bpe.model import BPE

STAGE_TWO: tuple[patterns.Split, ...] = (
    patterns.Split(r"\p{N}+", "isolated"),
    patterns.Split(r"(?=(\d{3})+(?!\d))", "isolated"),
)
r"""Stage two's pre-tokenization: `tokenizers`' ``Digits(individual_digits=False)`` (the same as the first
Split) and ``Split(Regex(r"(?=(\d{3})+(?!\d))"), "isolated")``, as the authors' tokenizer and llama.cpp's
``superbpe`` pre-tokenizer cut text."""

MAX_WORDS = 4
"""The most words (runs of bytes other than the space) a stage-two token may hold (the authors' limit)."""

BYTE_TOKENS = 256


def train_superbpe(
    corpus: Corpus | None,
    files: Paths | None,
    vocab_size: int,
    transition: int,
    *,
    pattern: str | patterns.Split | Sequence[patterns.Step],
    specials: list[str],
    num_threads: int | None,
    text_column: str,
    progress: Any,
    show_progress: bool,
    name: str | None,
) -> BPE:
    """:func:`hf_bpe.train` with ``superword_transition=transition`` (``vocab_size`` already checked)."""
    smallest = BYTE_TOKENS + len(specials)
    if isinstance(transition, bool) or not isinstance(transition, int):
        raise TypeError(f"superword_transition must be an int (a vocabulary size), got {type(transition).__name__}")
    if not smallest <= transition <= vocab_size:
        raise ValueError(f"superword_transition must be between {smallest} (the bytes and special tokens) and "
                         f"vocab_size ({vocab_size}), got {transition}")
    first, second = _count_both(corpus, files, pattern, specials, num_threads, text_column)
    split = first.pattern
    with progress(show_progress, total=vocab_size - smallest, unit=" tokens", desc="Merging") as bar:
        update = bar.update if bar is not None else None
        tokens: list[bytes] = first._learn_merges(transition - smallest, update, True, num_threads)
        ranks = {bytes([byte]): byte for byte in range(BYTE_TOKENS)}
        for token in tokens:
            ranks[token] = len(ranks)
        stage_one = BPE(ranks, split).merges
        stage_one_ids = [(ranks[left], ranks[right]) for left, right in stage_one]
        merges, _, new_tokens = _core.learn_superword_merges(second, tokens, stage_one_ids, vocab_size - transition,
                                                             progress=update, num_threads=num_threads)
    spelled = [bytes([byte]) for byte in range(BYTE_TOKENS)] + tokens + list(new_tokens)
    vocab = {token: i for i, token in enumerate(spelled)}
    listed: dict[tuple[bytes, bytes], None] = dict.fromkeys(stage_one)
    for left, right in merges:
        listed.setdefault((spelled[left], spelled[right]), None)
    special_ids = {token: len(vocab) + i for i, token in enumerate(specials)}
    model = BPE.from_merges(vocab, list(listed), STAGE_TWO, special_ids, name=name)
    model._training = {"superword_transition": transition, "stage_one_pattern": patterns.name_of(split) or
                       "custom regex", "stage_one_tokens": len(tokens), "stage_two_tokens": len(new_tokens)}
    return model


def _count_both(corpus: Corpus | None, files: Paths | None, pattern: Any, specials: list[str],
                num_threads: int | None, text_column: str) -> tuple[Any, Any]:
    """The corpus counted with ``pattern`` (stage one) and with :data:`STAGE_TWO`, in one pass over documents."""
    counters = [_core.PieceCounter(patterns.to_core(patterns.resolve(split)), specials, num_threads)
                for split in (pattern, STAGE_TWO)]
    source = open_source(corpus, files, text_column=text_column)
    if isinstance(source, Files):
        paths = [os.fspath(path) for path in source.paths]
        for counter in counters:
            counter.add_files(paths, None)
    else:
        for batch in source.batches:
            for counter in counters:
                counter.add_texts(batch)
    first, second = (counter.take() for counter in counters)
    if first.total == 0:
        raise ValueError("the corpus is empty: its documents hold no text between the special tokens")
    return first, second
