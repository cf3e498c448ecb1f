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
import sys
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeAlias

from hf_bpe import _core, patterns
from hf_bpe._corpus import Corpus, Documents, Files, Paths, open_source
from hf_bpe.errors import PrunedCountsWarning
from hf_bpe.model import BPE

PieceCounts: TypeAlias = _core.PieceCounts

__all__ = ["PieceCounts", "count_pieces", "train", "train_from_counts"]

BYTE_TOKENS = 256


def train(
    corpus: Corpus | None = None,
    vocab_size: int | None = None,
    *,
    files: Paths | None = None,
    pattern: str | patterns.Split | Sequence[patterns.Step] = "gpt2",
    special_tokens: Iterable[str] = (),
    show_progress: bool = True,
    num_threads: int | None = None,
    text_column: str = "text",
    name: str | None = None,
    tie_break: str = "cs336",
    max_pieces: int | None = None,
    languages: Mapping[str, Corpus] | None = None,
    dev: Mapping[str, Corpus] | None = None,
    ratio: Mapping[str, float] | Sequence[float] | None = None,
    variant: str = "base",
    global_merges: int = 0,
    window_size: int = 100,
    alpha: float = 2.0,
    min_frequency: int = 0,
    max_token_length: int | None = None,
    superword_transition: int | None = None,
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

    ``tie_break`` decides between pairs of equal count: ``"cs336"`` (the default, in Rust) takes
    the lexicographically greatest ``(bytes of left, bytes of right)``, as CS336's reference;
    ``"minbpe"`` takes the pair seen first in the corpus (pieces in order, pairs left to right), as
    minbpe's ``RegexTokenizer.train``, so a minbpe user gets minbpe's merges (a pure-Python loop,
    for corpora of megabytes; ``num_threads`` does not apply).

    ``show_progress`` shows progress bars on a terminal (or in a notebook), for steps that last over a
    second; never in a pipe, a log file or a quick call.

    ``languages={name: corpus, ...}`` (instead of ``corpus``/``files``; each corpus given as ``corpus``
    is) trains parity-aware BPE (arXiv 2508.04796): the merges ``tokenizers``' ``ParityBpeTrainer``
    learns on the same pieces and options. ``dev={name: corpus}`` (one per language) makes the language
    whose dev text is longest choose each merge; else ``ratio`` (one target compression per language, a
    mapping or a list) the one furthest below it; else the one whose training text is longest.
    ``variant="window"`` skips a language over ``alpha / len(languages)`` of the last ``window_size``
    choices; ``global_merges`` merges are chosen on all languages together first; a pair counts only when
    it occurs ``min_frequency`` times and, with ``max_token_length``, its token is shorter (in bytes).
    Ties follow ``ParityBpeTrainer`` (ByteLevel characters, not bytes); the model is a merges-list model
    (see docs/training.md).

    ``superword_transition=T`` trains SuperBPE (arXiv 2503.13423): ordinary training to ``T`` tokens,
    then training on pieces that cross whitespace (cut only around numbers) to ``vocab_size``; the
    model encodes with that cut and the merges list (see docs/training.md).

    ``max_pieces`` is a memory budget for the count table (``None``: no limit), the part of training
    that grows with the corpus: each distinct piece costs about 50 bytes, and a corpus of ever new
    words grows it until memory runs out. With a budget, the table is pruned whenever it holds
    more than ``max_pieces`` distinct pieces: its rarest pieces are dropped until half remain. The
    result is exact when nothing was pruned; otherwise a :class:`~hf_bpe.errors.PrunedCountsWarning`
    says how many occurrences were dropped, and the merges are those of the pruned counts (see
    ``docs/training.md``).

    >>> import hf_bpe
    >>> hf_bpe.train(["ab cd cd ab"], 258, tie_break="minbpe", show_progress=False).merges
    [(b'a', b'b'), (b' ', b'c')]

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
    if languages is not None or superword_transition is not None:
        return _train_variant(corpus, vocab_size, files, pattern, specials, show_progress, num_threads, text_column,
                              name, tie_break, max_pieces, languages, superword_transition,
                              {"dev": dev, "ratio": ratio, "variant": variant, "global_merges": global_merges,
                                   "window_size": window_size, "alpha": alpha, "min_frequency": min_frequency,
                                   "max_token_length": max_token_length})
    _num_merges(vocab_size, len(specials))
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {list(TIE_BREAKS)}, got {tie_break!r}")
    if tie_break == "minbpe":
        if max_pieces is not None:
            raise ValueError('max_pieces is not taken with tie_break="minbpe" (its pure-Python loop keeps every '
                             'piece in corpus order); use tie_break="cs336" for a memory budget')
        return _train_minbpe(corpus, files, vocab_size, pattern, specials, show_progress, text_column, name)
    seen: dict[str, Any] = {}
    counts = _count(corpus, files, pattern, specials, show_progress, num_threads, text_column, False, seen, max_pieces)
    # The table is ours alone: let the merge loop free it as soon as it has its own copy.
    model = _merge(counts, vocab_size, show_progress, name, consume=True, num_threads=num_threads, warn_stacklevel=3)
    model._training = seen | {"pattern": patterns.name_of(model.pattern) or "custom regex",
                             "vocab_size": vocab_size, "special_tokens": specials}
    return model


def _train_variant(corpus: Corpus | None, vocab_size: int | None, files: Paths | None, pattern: Any,
                   specials: list[str], show_progress: bool, num_threads: int | None, text_column: str,
                   name: str | None, tie_break: str, max_pieces: int | None, languages: Any,
                   superword_transition: int | None, parity: dict[str, Any]) -> BPE:
    """:func:`train` with ``languages`` (parity-aware BPE) or ``superword_transition`` (SuperBPE)."""
    _check_num_threads(num_threads)
    _num_merges(vocab_size, len(specials))
    assert vocab_size is not None
    given = "languages" if languages is not None else "superword_transition"
    if languages is not None and superword_transition is not None:
        raise ValueError("languages (parity-aware BPE) and superword_transition (SuperBPE) do not combine: pass one")
    if tie_break != "cs336" or max_pieces is not None:
        raise ValueError(f"{given} does not take tie_break or max_pieces (its ties follow its own rule; its counts "
                         "are exact)")
    if superword_transition is not None:
        from hf_bpe._train_superbpe import train_superbpe

        return train_superbpe(corpus, files, vocab_size, superword_transition, pattern=pattern, specials=specials,
                              num_threads=num_threads, text_column=text_column, progress=_progress,
                              show_progress=show_progress, name=name)
    from hf_bpe._train_parity import train_parity

    if corpus is not None or files is not None:
        raise TypeError("pass each language's corpus in languages={name: corpus}, not corpus or files as well")

    def count(source: Any, label: str, allow_empty: bool = False) -> PieceCounts:
        """One language's corpus (or dev corpus), errors naming it."""
        try:
            return _count(source, None, pattern, specials, False, num_threads, text_column, allow_empty, {})
        except (TypeError, ValueError) as error:
            raise type(error)(f"{label}: {error}") from None

    return train_parity(languages, vocab_size, count=count, num_merges_of=_num_merges, specials=specials,
                        show_progress=show_progress, progress=_progress, num_threads=num_threads, name=name, **parity)


def count_pieces(
    corpus: Corpus | None = None,
    *,
    files: Paths | None = None,
    pattern: str | patterns.Split | Sequence[patterns.Step] = "gpt2",
    special_tokens: Iterable[str] = (),
    show_progress: bool = True,
    num_threads: int | None = None,
    text_column: str = "text",
    allow_empty: bool = False,
    max_pieces: int | None = None,
) -> PieceCounts:
    """Count the distinct pieces of a corpus (``corpus`` or ``files=``, as for :func:`train`).

    Tables add up: counting shards separately and summing gives the table of the whole corpus.
    An empty corpus raises ``ValueError``; ``allow_empty=True`` (for one shard of a larger corpus,
    whose sum is checked instead) gives an empty table.
    Files are read as raw UTF-8 (no newline translation) and, with the named patterns (``gpt2``,
    ``cl100k``, ``o200k``), streamed in chunks cut where the pieces provably do not change; a custom
    regex gives no such guarantee, so then each file is read whole. ``max_pieces`` is a memory
    budget, as for :func:`train`: the table's ``pruned`` says how many occurrences it dropped.

    >>> import hf_bpe, pickle
    >>> shards = [["the cat sat"], ["the hat"]]
    >>> tables = [count_pieces(shard, show_progress=False) for shard in shards]
    >>> total = sum(pickle.loads(pickle.dumps(table)) for table in tables)
    >>> total == count_pieces(["the cat sat", "the hat"], show_progress=False)
    True
    >>> total.most_common(2)
    [(b'the', 2), (b' cat', 1)]
    >>> len(count_pieces(["<|end|>"], special_tokens=["<|end|>"], allow_empty=True))
    0
    """
    return _count(corpus, files, pattern, _special_tokens(special_tokens), show_progress, num_threads, text_column,
                  allow_empty, {}, max_pieces)


def _count(
    corpus: Corpus | None,
    files: Paths | None,
    pattern: str | patterns.Split | Sequence[patterns.Step],
    specials: list[str],
    show_progress: bool,
    num_threads: int | None,
    text_column: str,
    allow_empty: bool,
    seen: dict[str, Any],
    max_pieces: int | None = None,
) -> PieceCounts:
    """:func:`count_pieces`; fills ``seen`` with what the corpus was: ``corpus`` (a description),
    ``texts`` or ``files``, and ``bytes`` (of UTF-8)."""
    _check_num_threads(num_threads)
    _check_max_pieces(max_pieces)
    counter = _core.PieceCounter(patterns.to_core(patterns.resolve(pattern)), specials, num_threads,
                                 max_pieces=max_pieces)
    source = open_source(corpus, files, text_column=text_column, allow_empty=allow_empty)
    if isinstance(source, Files):
        with _progress(show_progress, total=source.size, unit="B", unit_scale=True, unit_divisor=1024) as bar:
            counter.add_files([os.fspath(path) for path in source.paths], bar.update if bar is not None else None)
        names = ", ".join(path.name for path in source.paths[:3]) + (", ..." if len(source.paths) > 3 else "")
        seen.update(corpus=f"file{'s' if len(source.paths) != 1 else ''} {names}", files=len(source.paths),
                    bytes=source.size)
    else:
        tally = [0, 0]
        _count_documents(counter, Documents(_tallied(source.batches, tally), source.count), show_progress)
        kind = type(corpus).__name__
        seen.update(corpus=f"a {kind} of texts", texts=tally[0], bytes=tally[1])
    counts = counter.take()
    if counts.total == 0 and not allow_empty:
        raise ValueError("the corpus is empty: its documents hold no text between the special tokens")
    return counts


class FileCounter:
    """Counts groups of files into one table, call after call, on ``num_threads`` threads: what a
    worker that counts many groups keeps (on one thread each group is counted straight into the
    table, so nothing is copied or added per group). Each file is one document, as in
    ``count_pieces(files=...)``; a failed call leaves the counter empty.

    >>> import pathlib, tempfile, hf_bpe
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.txt").write_text("low lower"), (folder / "b.txt").write_text("lowest low")
    >>> counter = FileCounter("gpt2", num_threads=1)
    >>> counter.add_files([folder / "a.txt"]); counter.add_files([folder / "b.txt"])
    >>> counter.take() == count_pieces(files=[folder / "a.txt", folder / "b.txt"], show_progress=False)
    True
    """

    def __init__(self, pattern: str | patterns.Split | Sequence[patterns.Step] = "gpt2",
                 special_tokens: Iterable[str] = (), *, num_threads: int | None = None) -> None:
        _check_num_threads(num_threads)
        self._counter = _core.PieceCounter(patterns.to_core(patterns.resolve(pattern)),
                                           _special_tokens(special_tokens), num_threads)

    def add_files(self, paths: Paths) -> None:
        """Count ``paths`` (checked first: missing or not UTF-8 raises naming the file) into the table."""
        source = open_source(None, paths, allow_empty=True)
        assert isinstance(source, Files)
        self._counter.add_files([os.fspath(path) for path in source.paths], None)

    def take(self) -> PieceCounts:
        """The table so far, leaving the counter empty."""
        return self._counter.take()  # type: ignore[no-any-return]


TIE_BREAKS = ("cs336", "minbpe")
"""The tie rules :func:`train` knows (see its ``tie_break``)."""


def _train_minbpe(
    corpus: Corpus | None,
    files: Paths | None,
    vocab_size: int | None,
    pattern: str | patterns.Split | Sequence[patterns.Step],
    specials: list[str],
    show_progress: bool,
    text_column: str,
    name: str | None,
) -> BPE:
    """:func:`train` with ``tie_break="minbpe"``: the pieces in corpus order, then minbpe's loop."""
    import re

    from hf_bpe import _train_minbpe

    num_merges = _num_merges(vocab_size, len(specials))
    splitter = BPE({bytes([byte]): byte for byte in range(BYTE_TOKENS)}, pattern)
    cut = re.compile("|".join(re.escape(token) for token in sorted(specials, key=len, reverse=True))) if specials \
        else None
    source = open_source(corpus, files, text_column=text_column)
    if isinstance(source, Files):
        documents: Iterable[str] = (path.read_bytes().decode("utf-8") for path in source.paths)
    else:
        documents = (document for batch in source.batches for document in batch)
    seen = [0]

    def pieces() -> Iterable[bytes]:
        for document in documents:
            for part in cut.split(document) if cut is not None else (document,):
                for piece in patterns.pieces(splitter, part):
                    seen[0] += 1
                    yield piece.encode("utf-8", "surrogateescape")  # a piece may end inside a character

    with _progress(show_progress, total=num_merges, unit=" merges", desc="Merging") as bar:
        tokens = _train_minbpe.learn_merges(pieces(), num_merges, bar.update if bar is not None else None)
    if seen[0] == 0:
        raise ValueError("the corpus is empty: its documents hold no text between the special tokens")
    return _model(tokens, num_merges, vocab_size, splitter.pattern, specials, name, warn_stacklevel=4)


def train_from_counts(
    counts: PieceCounts,
    vocab_size: int,
    *,
    show_progress: bool = True,
    name: str | None = None,
    consume: bool = False,
    num_threads: int | None = None,
) -> BPE:
    """Run the merge loop on a count table (from :func:`count_pieces`, possibly summed over shards).

    The model's pattern and special tokens are the ones the table was counted with. ``consume=True``
    empties the table as soon as the merge loop has its own copy, so the two never share the memory
    (what :func:`train` does); the table is empty afterwards (``pickle.dumps`` it first to keep it:
    its serialized form is compact). The merges of pairs found in many pieces run on
    ``num_threads`` threads (every core by default); the model is the same for every number.

    >>> import hf_bpe
    >>> counts = PieceCounts({"hug": 10, "pug": 5, "pun": 12, "bun": 4}, pattern=r"\\w+")
    >>> model = train_from_counts(counts, 259, show_progress=False)
    >>> [model.decode_single_token_bytes(i) for i in (256, 257, 258)]
    [b'pu', b'pun', b'ug']
    """
    if not isinstance(counts, PieceCounts):
        raise TypeError(
            f"counts must be a PieceCounts (from hf_bpe.train.count_pieces), got {type(counts).__name__}"
        )
    return _merge(counts, vocab_size, show_progress, name, consume=consume, num_threads=num_threads,
                  warn_stacklevel=3)


def _merge(
    counts: PieceCounts,
    vocab_size: int | None,
    show_progress: bool,
    name: str | None,
    *,
    consume: bool,
    num_threads: int | None,
    warn_stacklevel: int,
) -> BPE:
    _check_num_threads(num_threads)
    specials = list(counts.special_tokens)
    num_merges = _num_merges(vocab_size, len(specials))
    if counts.total == 0:
        raise ValueError("the piece counts are empty: there is nothing to learn merges from")
    if counts.pruned:
        warnings.warn(
            f"the piece counts were pruned to stay within max_pieces: {counts.pruned:,} occurrences of rare "
            f"pieces ({counts.pruned / (counts.pruned + counts.total):.1%} of all) were dropped, so the merges are "
            "learned from the pieces kept and may differ from training on the whole corpus; raise max_pieces "
            "(or pass None) for the exact result",
            PrunedCountsWarning,
            stacklevel=warn_stacklevel,
        )
    pattern = counts.pattern
    with _progress(show_progress, total=num_merges, unit=" merges", desc="Merging") as bar:
        tokens = counts._learn_merges(num_merges, bar.update if bar is not None else None, consume, num_threads)
    return _model(tokens, num_merges, vocab_size, pattern, specials, name, warn_stacklevel=warn_stacklevel + 1)


def _model(
    tokens: Sequence[bytes],
    num_merges: int,
    vocab_size: int | None,
    pattern: Any,
    specials: list[str],
    name: str | None,
    *,
    warn_stacklevel: int,
) -> BPE:
    """The trained model: bytes, then the merged ``tokens``, then the special tokens."""
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


def _check_max_pieces(max_pieces: int | None) -> None:
    if max_pieces is not None and (isinstance(max_pieces, bool) or not isinstance(max_pieces, int) or max_pieces < 2):
        raise ValueError(f"max_pieces must be an int of at least 2 (distinct pieces kept) or None (no limit), "
                         f"got {max_pieces!r}")


def _check_num_threads(num_threads: int | None) -> None:
    if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
        raise ValueError(f"num_threads must be a positive int or None (every core), got {num_threads!r}")


def _special_tokens(special_tokens: Iterable[str]) -> list[str]:
    if isinstance(special_tokens, str):
        return [special_tokens]
    tokens = list(special_tokens)
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(f"special tokens must be str, got {type(token).__name__}: {token!r}")
        if not token:
            raise ValueError("a special token cannot be the empty string")
    duplicates = sorted(token for token, times in Counter(tokens).items() if times > 1)
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
            f"ask for at least {smallest} (exactly {smallest} learns no merges; each token more is one merge)"
        )
    return vocab_size - smallest


def _tallied(batches: Iterable[list[str]], tally: list[int]) -> Iterator[list[str]]:
    """``batches`` as they are, adding up their documents (``tally[0]``) and UTF-8 bytes (``tally[1]``)."""
    for batch in batches:
        tally[0] += len(batch)
        # what is not a str is left to the core, which refuses it naming its type
        tally[1] += sum(len(document.encode("utf-8", "surrogatepass")) for document in batch if isinstance(document, str))
        yield batch


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


PROGRESS_DELAY = 1.0
"""Seconds a step must last before its progress bar appears: a quick call prints none. The environment
variable ``HF_BPE_PROGRESS_DELAY`` replaces it (``0``: every bar at once)."""


def progress_delay() -> float:
    """:data:`PROGRESS_DELAY`, or ``HF_BPE_PROGRESS_DELAY`` when it is set to a number of seconds."""
    try:
        return float(os.environ.get("HF_BPE_PROGRESS_DELAY") or PROGRESS_DELAY)
    except ValueError:
        return PROGRESS_DELAY


def _progress(show: bool, *, desc: str = "Counting pieces", **options: Any) -> AbstractContextManager[Any]:
    """A tqdm bar, or ``None`` when progress is off or nobody watches: standard error is not a terminal
    (a pipe, a log file, a test) and this is not a notebook. The bar appears once the step has lasted
    :func:`progress_delay` seconds."""
    if not show or not watched(sys.stderr):
        return nullcontext(None)
    from hf_bpe._progress import progress_bar

    return progress_bar(desc=desc, delay=progress_delay(), **options)  # type: ignore[no-any-return]


def watched(stream: Any) -> bool:
    """Whether progress written to ``stream`` is seen as it happens: a terminal, or a Jupyter kernel."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty()) or "ipykernel" in sys.modules
