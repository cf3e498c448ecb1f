"""What a training corpus can be, and how it is read: text files (streamed by the core) or documents
(``str`` items of any iterable, or a column of a ``datasets`` dataset) handed over in batches.

Every check that needs no counting happens here, before any work: missing files, empty corpora, a
dataset without the text column, items that are not text.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from hf_bpe import _core

#: A batch of documents is handed to the core when it holds this many characters or documents.
BATCH_CHARS = 4 << 20
BATCH_DOCUMENTS = 8192


@dataclass
class Files:
    """UTF-8 text files; each file is one document. ``size`` is their total size in bytes."""

    paths: list[Path]
    size: int


@dataclass
class Documents:
    """Documents (``str``) in batches; ``count`` is how many there are, when known."""

    batches: Iterator[list[str]]
    count: int | None


Corpus = Union[str, "os.PathLike[str]", Iterable[str], Iterable["os.PathLike[str]"], Any]
"""One path, a list of paths, an iterable of ``str`` documents, or a ``datasets`` dataset."""


def open_corpus(corpus: Corpus, *, text_column: str = "text") -> Files | Documents:
    """Classify ``corpus`` and check it without reading it through.

    >>> open_corpus(["a document", "another"]).count
    2
    """
    if isinstance(corpus, (str, os.PathLike)):
        return _files([corpus])
    if isinstance(corpus, (bytes, bytearray, memoryview)):
        raise TypeError(
            "corpus is bytes: pass a path, a list of paths, an iterable of str documents or a "
            "datasets Dataset (decode bytes to str first)"
        )
    dataset = _as_dataset(corpus, text_column)
    if dataset is not None:
        return dataset
    if isinstance(corpus, Mapping):
        raise TypeError(
            f"corpus is a {type(corpus).__name__}: pass an iterable of str documents, a list of paths "
            "or a datasets Dataset"
        )
    try:
        items = iter(corpus)
    except TypeError:
        raise TypeError(
            f"corpus must be a path, a list of paths, an iterable of str documents or a datasets "
            f"Dataset, got {type(corpus).__name__}"
        ) from None
    first = next(items, None)
    if first is None:
        raise ValueError("the corpus is empty: it yielded no documents")
    rest = itertools.chain([first], items)
    if isinstance(first, os.PathLike):
        return _files(list(rest))
    if not isinstance(first, str):
        raise TypeError(
            f"the corpus must yield str documents (or be a list of paths), got {type(first).__name__}"
        )
    count = len(corpus) if hasattr(corpus, "__len__") else None  # type: ignore[arg-type]
    return Documents(_batches(rest), count)


def _files(paths: list[Any]) -> Files:
    for path in paths:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"a list of paths may hold only paths, got {type(path).__name__}: {path!r}")
    resolved = [Path(path) for path in paths]
    for path in resolved:
        if path.is_dir():
            raise IsADirectoryError(
                f"{path}: is a folder; pass the text files in it (e.g. sorted(folder.glob('*.txt')))"
            )
        if not path.exists():
            hint = ""
            if len(paths) == 1 and isinstance(paths[0], str) and (len(paths[0]) > 200 or "\n" in paths[0]):
                hint = " (a str corpus is a path; to train on the text itself, pass [text])"
            raise FileNotFoundError(f"{str(path)[:100]}: no such corpus file{hint}")
    size = _core.check_utf8_files([os.fspath(path) for path in resolved])
    if size == 0:
        names = ", ".join(str(path) for path in resolved[:3]) + (", ..." if len(resolved) > 3 else "")
        raise ValueError(f"the corpus is empty: {names} hold no text")
    return Files(resolved, size)


def _batches(documents: Iterable[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    chars = 0
    for document in documents:
        batch.append(document)
        chars += len(document) if isinstance(document, str) else 0
        if chars >= BATCH_CHARS or len(batch) >= BATCH_DOCUMENTS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def _as_dataset(corpus: Any, text_column: str) -> Documents | None:
    """A ``datasets`` ``Dataset``/``IterableDataset`` as batches of its text column; None for others."""
    datasets = sys.modules.get("datasets")
    if datasets is None:
        return None
    if isinstance(corpus, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        raise TypeError(
            f"corpus is a {type(corpus).__name__} with splits {sorted(corpus)}: pick one, "
            f"e.g. corpus[{min(corpus)!r}]"
        )
    if not isinstance(corpus, (datasets.Dataset, datasets.IterableDataset)):
        return None
    columns = corpus.column_names
    if columns is None:  # an IterableDataset whose features are unknown: look at one example
        first = next(iter(corpus), None)
        if first is None:
            raise ValueError("the dataset is empty")
        columns = list(first)
    if text_column not in columns:
        raise ValueError(
            f"the dataset has no column {text_column!r}; its columns are {columns}: "
            f"pass text_column=<the column that holds the text>"
        )
    if isinstance(corpus, datasets.Dataset) and len(corpus) == 0:
        raise ValueError("the dataset is empty (0 rows)")
    selected = corpus.select_columns([text_column])
    count = len(corpus) if isinstance(corpus, datasets.Dataset) else None

    def batches() -> Iterator[list[str]]:
        for batch in selected.iter(batch_size=1000):
            yield batch[text_column]

    return Documents(_rebatch(batches()), count)


def _rebatch(batches: Iterable[list[str]]) -> Iterator[list[str]]:
    return _batches(itertools.chain.from_iterable(batches))
