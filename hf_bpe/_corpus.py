"""What a training corpus can be, and how it is read: text files (streamed by the core) or documents
(``str`` items of any iterable, or a column of a ``datasets`` dataset) handed over in batches.

Files are named explicitly with ``files=`` (a path or a list of paths, as in ``tokenizers``'
``train(files=[...])``), or by ``pathlib.Path`` objects (or a single ``str``) given as the corpus. A
list of ``str`` is documents; since ``train(["a.txt", "b.txt"])`` is what a user of ``tokenizers``
writes, a list of ``str`` that looks like file names is refused (:func:`refuse_file_names` says when)
rather than trained on as text.

Every check that needs no counting happens here, before any work: missing files, empty corpora, a
dataset without the text column, items that are not text.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping
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

Paths = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]
"""What ``files=`` takes: one path, or any iterable of paths."""

FILE_NAME_CHECKS = 8
""":func:`refuse_file_names` looks up at most this many items on disk."""

MAX_PATH_CHARS = 4096
"""A ``str`` longer than this (Linux's ``PATH_MAX``) is never taken for a file name."""


def open_source(
    corpus: Corpus | None, files: Paths | None, *, text_column: str = "text", allow_empty: bool = False,
    check_utf8: bool = True,
) -> Files | Documents:
    """The corpus of a training call that takes either ``corpus`` or ``files`` (exactly one);
    ``allow_empty`` lets files that hold no text through (one shard of a larger corpus).
    ``check_utf8=False`` leaves the UTF-8 check of files to a reader that makes it as it reads
    (one pass over the files less).

    >>> open_source(None, None)
    Traceback (most recent call last):
    ...
    TypeError: nothing to train on: pass documents as corpus (a list of str, any iterable of str, a datasets Dataset) or text files as files=[...]
    """
    if files is not None and corpus is not None:
        raise TypeError(
            "pass either corpus (documents) or files= (text files), not both; to train on both, "
            "read the files into documents, e.g. corpus=[*texts, *(open(f).read() for f in files)]"
        )
    if files is not None:
        return open_files(files, allow_empty=allow_empty, check_utf8=check_utf8)
    if corpus is None:
        raise TypeError(
            "nothing to train on: pass documents as corpus (a list of str, any iterable of str, a datasets "
            "Dataset) or text files as files=[...]"
        )
    return open_corpus(corpus, text_column=text_column, check_utf8=check_utf8)


def open_files(files: Paths, *, allow_empty: bool = False, check_utf8: bool = True) -> Files:
    """Text files given explicitly (``files=``): one path or an iterable of paths, each a file that
    exists; each file is one document.

    >>> open_files(["no/such/file.txt"])
    Traceback (most recent call last):
    ...
    FileNotFoundError: no/such/file.txt: no such corpus file
    """
    if isinstance(files, (str, os.PathLike)):
        return _files([files], allow_empty=allow_empty, check_utf8=check_utf8)
    if isinstance(files, (bytes, bytearray, memoryview, Mapping)):
        raise TypeError(f"files must be a path or a list of paths, got {type(files).__name__}")
    try:
        paths = list(files)
    except TypeError:
        raise TypeError(f"files must be a path or a list of paths, got {type(files).__name__}") from None
    if not paths:
        raise ValueError("files is empty: pass at least one text file")
    return _files(paths, allow_empty=allow_empty, check_utf8=check_utf8)


def open_corpus(corpus: Corpus, *, text_column: str = "text", check_utf8: bool = True) -> Files | Documents:
    """Classify ``corpus`` and check it without reading it through: a path (``str`` or
    ``os.PathLike``) or a list of ``pathlib.Path`` is files, a ``datasets`` dataset its text column,
    any other iterable of ``str`` documents (unless it looks like file names: :func:`refuse_file_names`).

    >>> open_corpus(["a document", "another"]).count
    2
    """
    if isinstance(corpus, (str, os.PathLike)):
        return _files([corpus], check_utf8=check_utf8)
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
        return _files(list(rest), check_utf8=check_utf8)
    if not isinstance(first, str):
        raise TypeError(
            f"the corpus must yield str documents (or be a list of paths), got {type(first).__name__}"
        )
    if isinstance(corpus, Collection) and not isinstance(corpus, Iterator):
        refuse_file_names(corpus)
    count = len(corpus) if hasattr(corpus, "__len__") else None  # type: ignore[arg-type]
    return Documents(_batches(rest), count)


def refuse_file_names(documents: Collection[Any]) -> None:
    """Refuse a collection of ``str`` documents that are file names (``train(["a.txt", "b.txt"])``).

    The rule is cheap on a corpus of any size. Look at the first :data:`FILE_NAME_CHECKS` items (all
    of them when there are fewer); they are file names when each is a ``str`` of at most
    :data:`MAX_PATH_CHARS` characters without a line break or NUL, at least one names an existing
    file, and any that does not still looks like a path (no whitespace, and a ``/`` or a file
    extension: a mistyped name, a folder). Then, if every other item is also such a short one-line
    ``str``, the corpus is refused. So a real corpus costs at most that many look-ups on disk,
    usually one, and only a list whose first items are files is scanned to its end. Only
    collections that can be iterated again (a list, a tuple...) are checked: a one-shot iterator is
    never consumed to decide, so ``iter(names)`` trains on the names as text.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> _ = open(path, "w").write("text")
    >>> refuse_file_names(["some text", path])  # "some text" is no file name: documents
    >>> refuse_file_names([path, "b.txt"])
    Traceback (most recent call last):
    ...
    ValueError: corpus is a list of str that look like file names, not documents (...a.txt' is a file; 'b.txt' is not)...
    """
    head = list(itertools.islice(documents, FILE_NAME_CHECKS))
    if not head or not all(_could_be_path(item) for item in head):
        return
    files: list[str] = []
    others: list[str] = []
    for item in head:
        if os.path.isfile(item):
            files.append(item)
        elif _looks_like_file_name(item):
            others.append(item)
        else:  # text, as a real corpus's first document: one look-up decided
            return
    if not files:
        return
    if not all(_could_be_path(item) for item in documents):
        return
    found = f"{_names(files)} {'is a file' if len(files) == 1 else 'are files'}"
    if others:
        found += f"; {_names(others)} {'is' if len(others) == 1 else 'are'} not"
    if len(documents) > len(head):
        found += f"; checked the first {len(head)} of {len(documents):,}"
    raise ValueError(
        f"corpus is a list of str that look like file names, not documents ({found}). A list of str is "
        f"read as documents, so this would train on the names. Pass the files as files=[...] (or as "
        f"pathlib.Path objects, e.g. [Path(name) for name in names]); to train on these strings as "
        f"text, pass iter(corpus)"
    )


def _could_be_path(item: Any) -> bool:
    return (
        isinstance(item, str)
        and 0 < len(item) <= MAX_PATH_CHARS
        and "\n" not in item
        and "\r" not in item
        and "\0" not in item
    )


def _looks_like_file_name(name: str) -> bool:
    """No whitespace, and a folder separator or a file extension (``data/a``, ``a.txt``)."""
    if any(character.isspace() for character in name):
        return False
    if "/" in name or os.sep in name:
        return True
    extension = Path(name).suffix[1:]
    return 0 < len(extension) <= 8 and extension.isalnum()


def _names(items: list[str]) -> str:
    return ", ".join(repr(item) for item in items[:3]) + (", ..." if len(items) > 3 else "")


def _files(paths: list[Any], *, allow_empty: bool = False, check_utf8: bool = True) -> Files:
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
    if check_utf8:
        size = _core.check_utf8_files([os.fspath(path) for path in resolved])
    else:
        size = sum(path.stat().st_size for path in resolved)
    if size == 0 and not allow_empty:
        names = ", ".join(str(path) for path in resolved[:3]) + (", ..." if len(resolved) > 3 else "")
        held = "holds" if len(resolved) == 1 else "hold"
        raise ValueError(f"the corpus is empty: {names} {held} no text")
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
            f"pass text_column=<the column that holds the text> (on the command line: --text-column)"
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
