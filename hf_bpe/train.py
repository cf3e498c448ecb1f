"""Training: learn a byte-level BPE model from a corpus.

Two stages, each usable alone:

1. :func:`count_pieces` splits every document on the special tokens, pre-tokenizes each part with the
   split pattern and counts the distinct pieces, in parallel in the Rust core (files are streamed,
   so memory grows with the number of distinct pieces, not with the corpus). The result, a
   :class:`PieceCounts`, adds with ``+`` and pickles, so counting can run anywhere (e.g.
   ``datasets.Dataset.map(num_proc=...)``) and the tables be summed.
2. :func:`train_from_counts` runs the merge loop on a table: the most frequent adjacent pair is
   merged first, ties go to the lexicographically greatest ``(bytes of left, bytes of right)``.

:func:`train` does both. Ids: 0-255 are the single bytes, merges follow in order, the special tokens
come last; so the model is also a valid tiktoken rank table.

The corpus is either documents (``corpus``: an iterable of ``str``, or a ``datasets`` dataset) or
text files (``files=[...]``, as in ``tokenizers``; ``pathlib.Path`` objects given as the corpus are
files too). A list of ``str`` that all name existing files is refused, not trained on as text.

>>> import hf_bpe
>>> model = hf_bpe.train(["low lower lowest", "newer newest"], 260, show_progress=False)
>>> [model.decode_single_token_bytes(i) for i in range(256, 260)]
[b'we', b'lo', b'wes', b'west']
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeAlias

from hf_bpe import _core, patterns
from hf_bpe._corpus import Corpus, Documents, Files, Paths, open_source
from hf_bpe.model import BPE

PieceCounts: TypeAlias = _core.PieceCounts

__all__ = ["PieceCounts", "count_pieces", "train", "train_from_counts"]

BYTE_TOKENS = 256


def train(
    corpus: Corpus | None = None,
    vocab_size: int | None = None,
    *,
    files: Paths | None = None,
    pattern: str | patterns.Split | Sequence[patterns.Split] = "gpt2",
    special_tokens: Iterable[str] = (),
    show_progress: bool = True,
    num_threads: int | None = None,
    text_column: str = "text",
    name: str | None = None,
) -> BPE:
    """Learn a byte-level BPE model with ``vocab_size`` tokens (bytes, merges and special tokens).

    Give the corpus one way:

    - ``files=``: one path or a list of paths to UTF-8 text files, each file a document
      (``hf_bpe.train(files=["a.txt", "b.txt"], vocab_size=8192)``, as ``tokenizers`` takes them);
    - ``corpus``: any iterable of ``str``, each item the text of a document, or a ``datasets``
      ``Dataset``/``IterableDataset`` (its ``text_column``). ``pathlib.Path`` objects (one, or a
      list of them) and a single ``str`` are paths to files. A list of ``str`` whose items all name
      existing files raises ``ValueError`` (it would train on the names): pass ``files=`` instead,
      or ``iter(names)`` to really train on those strings as text.

    ``pattern`` is the split regex or a name from :mod:`hf_bpe.patterns`, or `tokenizers`' Split
    pre-tokenizer(s) (:class:`hf_bpe.patterns.Split`). Documents are split on ``special_tokens``
    before pre-tokenization; the special tokens get the ids after the merges. ``num_threads``
    defaults to every core.

    >>> import hf_bpe
    >>> model = hf_bpe.train(["aaabdaaabac"], 259, pattern=r"\\w+", special_tokens=["<|end|>"],
    ...                      show_progress=False)
    >>> model.decode_single_token_bytes(256), model.decode_single_token_bytes(257)
    (b'aa', b'aaa')
    >>> model.encode("aaab<|end|>", allowed_special="all")
    [257, 98, 258]
    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = path.write_text("aaabdaaabac", encoding="utf-8")
    >>> hf_bpe.train(files=[path], vocab_size=258, show_progress=False).decode_single_token_bytes(257)
    b'aaa'
    """
    specials = _special_tokens(special_tokens)
    _num_merges(vocab_size, len(specials))
    counts = count_pieces(
        corpus,
        files=files,
        pattern=pattern,
        special_tokens=specials,
        show_progress=show_progress,
        num_threads=num_threads,
        text_column=text_column,
    )
    # The table is ours alone: let the merge loop free it as soon as it has its own copy.
    return _merge(counts, vocab_size, show_progress, name, consume=True, warn_stacklevel=3)


def count_pieces(
    corpus: Corpus | None = None,
    *,
    files: Paths | None = None,
    pattern: str | patterns.Split | Sequence[patterns.Split] = "gpt2",
    special_tokens: Iterable[str] = (),
    show_progress: bool = True,
    num_threads: int | None = None,
    text_column: str = "text",
    allow_empty: bool = False,
) -> PieceCounts:
    """Count the distinct pieces of a corpus (``corpus`` or ``files=``, as for :func:`train`).

    Tables add up: counting shards separately and summing gives the table of the whole corpus.
    An empty corpus raises ``ValueError``; ``allow_empty=True`` (for one shard of a larger corpus,
    whose sum is checked instead) gives an empty table.
    Files are read as raw UTF-8 (no newline translation) and, with the named patterns (``gpt2``,
    ``cl100k``, ``o200k``), streamed in chunks cut where the pieces provably do not change; a custom
    regex gives no such guarantee, so then each file is read whole.

    >>> import hf_bpe, pickle
    >>> shards = [["the cat sat"], ["the hat"]]
    >>> tables = [hf_bpe.count_pieces(shard, show_progress=False) for shard in shards]
    >>> total = sum(pickle.loads(pickle.dumps(table)) for table in tables)
    >>> total == hf_bpe.count_pieces(["the cat sat", "the hat"], show_progress=False)
    True
    >>> total.most_common(2)
    [(b'the', 2), (b' cat', 1)]
    >>> len(hf_bpe.count_pieces(["<|end|>"], special_tokens=["<|end|>"], allow_empty=True))
    0
    """
    specials = _special_tokens(special_tokens)
    if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
        raise ValueError(f"num_threads must be a positive int or None (every core), got {num_threads!r}")
    counter = _core.PieceCounter(patterns.to_core(patterns.resolve(pattern)), specials, num_threads)
    source = open_source(corpus, files, text_column=text_column, allow_empty=allow_empty)
    if isinstance(source, Files):
        with _progress(show_progress, total=source.size, unit="B", unit_scale=True, unit_divisor=1024) as bar:
            counter.add_files([os.fspath(path) for path in source.paths], bar.update if bar is not None else None)
    else:
        _count_documents(counter, source, show_progress)
    counts = counter.take()
    if counts.total == 0 and not allow_empty:
        raise ValueError("the corpus is empty: its documents hold no text between the special tokens")
    return counts


def train_from_counts(
    counts: PieceCounts,
    vocab_size: int,
    *,
    show_progress: bool = True,
    name: str | None = None,
    consume: bool = False,
) -> BPE:
    """Run the merge loop on a count table (from :func:`count_pieces`, possibly summed over shards).

    The model's pattern and special tokens are the ones the table was counted with. ``consume=True``
    empties the table as soon as the merge loop has its own copy, so the two never share the memory
    (what :func:`train` does); the table is empty afterwards (``pickle.dumps`` it first to keep it:
    its serialized form is compact).

    >>> import hf_bpe
    >>> counts = hf_bpe.PieceCounts({"hug": 10, "pug": 5, "pun": 12, "bun": 4}, pattern=r"\\w+")
    >>> model = hf_bpe.train_from_counts(counts, 259, show_progress=False)
    >>> [model.decode_single_token_bytes(i) for i in (256, 257, 258)]
    [b'pu', b'pun', b'ug']
    """
    if not isinstance(counts, PieceCounts):
        raise TypeError(
            f"counts must be a PieceCounts (from hf_bpe.count_pieces), got {type(counts).__name__}"
        )
    return _merge(counts, vocab_size, show_progress, name, consume=consume, warn_stacklevel=3)


def _merge(
    counts: PieceCounts,
    vocab_size: int | None,
    show_progress: bool,
    name: str | None,
    *,
    consume: bool,
    warn_stacklevel: int,
) -> BPE:
    specials = list(counts.special_tokens)
    num_merges = _num_merges(vocab_size, len(specials))
    if counts.total == 0:
        raise ValueError("the piece counts are empty: there is nothing to learn merges from")
    pattern = counts.pattern
    with _progress(show_progress, total=num_merges, unit=" merges", desc="Merging") as bar:
        tokens = counts._learn_merges(num_merges, bar.update if bar is not None else None, consume)
    if len(tokens) < num_merges:
        warnings.warn(
            f"the corpus allows only {len(tokens)} merges (every piece became a single token), so the "
            f"vocabulary has {BYTE_TOKENS + len(tokens) + len(specials)} tokens instead of {vocab_size}",
            stacklevel=warn_stacklevel,
        )
    ranks = {bytes([byte]): byte for byte in range(BYTE_TOKENS)}
    for token in tokens:
        ranks[token] = len(ranks)
    special_ids = {token: len(ranks) + i for i, token in enumerate(specials)}
    return BPE(ranks, pattern, special_ids, name=name)


def _special_tokens(special_tokens: Iterable[str]) -> list[str]:
    if isinstance(special_tokens, str):
        return [special_tokens]
    tokens = list(special_tokens)
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"special tokens must be str, got {type(token).__name__}: {token!r}")
        if not token:
            raise ValueError("a special token cannot be the empty string")
    duplicates = sorted({token for token in tokens if tokens.count(token) > 1})
    if duplicates:
        raise ValueError(f"special tokens given more than once: {duplicates}")
    return tokens


def _num_merges(vocab_size: int | None, num_special: int) -> int:
    if vocab_size is None:
        raise TypeError("vocab_size is required: the number of tokens to learn, bytes and special tokens included "
                        "(e.g. vocab_size=32000)")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    smallest = BYTE_TOKENS + num_special
    if vocab_size < smallest:
        specials = f" and the {num_special} special tokens" if num_special else ""
        raise ValueError(
            f"vocab_size {vocab_size} is too small: the 256 byte tokens{specials} alone take {smallest}; "
            f"ask for more than {smallest} to learn merges"
        )
    return vocab_size - smallest


def _count_documents(counter: _core.PieceCounter, source: Documents, show_progress: bool) -> None:
    """Count batches on a worker thread (the core releases the GIL) while the next batch is read."""
    with _progress(show_progress, total=source.count, unit=" docs") as bar, ThreadPoolExecutor(1) as worker:
        pending: Future[None] | None = None
        pending_size = 0
        for batch in source.batches:
            if pending is not None:
                pending.result()
                if bar is not None:
                    bar.update(pending_size)
            pending, pending_size = worker.submit(counter.add_texts, batch), len(batch)
        if pending is not None:
            pending.result()
            if bar is not None:
                bar.update(pending_size)


def _progress(show: bool, *, desc: str = "Counting pieces", **options: Any) -> AbstractContextManager[Any]:
    """A tqdm bar, or ``None`` when progress is off."""
    if not show:
        return nullcontext(None)
    from tqdm.auto import tqdm  # type: ignore[import-untyped]

    return tqdm(desc=desc, **options)  # type: ignore[no-any-return]
