"""What the commands share: the usage error, the options that say how to read a tokenizer source, and
reading a ``--dataset``."""

from __future__ import annotations

import argparse
import functools
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hf_bpe._encodings import ENCODINGS, list_encoding_names
from hf_bpe._sources import FORMATS, SourceError, detect_format, load
from hf_bpe.errors import ConversionError
from hf_bpe.model import BPE


class UsageError(Exception):
    """A command line that cannot work as given (argparse reports it: exit status 2)."""


class InputError(Exception):
    """A file the command line names that cannot be read as given: missing, a folder, not a
    tokenizer (printed without the usage: exit status 2). The message names the file and what to type."""


def input_file(path: Path, option: str) -> Path:
    """``path`` (given as ``option``, e.g. ``--file``) if it is a file, or ``-``; else :class:`InputError`
    naming it and what to give instead."""
    if str(path) == "-" or path.is_file():
        return path
    if path.is_dir():
        raise InputError(f"{option} {path}: is a folder, not a file; give the files in it, "
                         f"e.g. {option} {path / 'notes.txt'} (one {option} per file)")
    if not path.exists():
        raise InputError(f"{option} {path}: no such file (check the path: ls {path})")
    return path


SOURCE_OPTIONS = {"pattern": "--pattern", "special_tokens": "--special TOKEN=ID", "format": "--from"}
"""The option of the command line for each argument of :func:`hf_bpe.load` a source may need."""


def for_the_shell(error: BaseException) -> str:
    """``error``'s message as the command line says it: a :class:`~hf_bpe._sources.SourceError` names
    the options to type (``--pattern``, ``--special``, ``--from``) where the library names ``load``'s
    arguments.

    >>> from hf_bpe._sources import SourceError
    >>> for_the_shell(SourceError("x.tiktoken holds no split pattern", {"pattern": "gpt2 or a regex"}))
    'x.tiktoken holds no split pattern; pass --pattern (gpt2 or a regex)'
    """
    if not isinstance(error, SourceError) or not error.fixes:
        return str(error)
    fix = " and ".join(f"{SOURCE_OPTIONS.get(name, name)} ({takes})" for name, takes in error.fixes.items())
    return f"{error.problem}; pass {fix}"


def source_options(parser: argparse.ArgumentParser) -> None:
    """``--pattern`` and ``--special`` for a command that reads a tokenizer (``--from``: :func:`format_option`)."""
    parser.add_argument("--pattern", metavar="P",
                        help="split pattern for a .tiktoken source: gpt2, cl100k, o200k, llama3, qwen2 or a regex")
    parser.add_argument("--special", action="append", default=[], metavar="TOKEN=ID",
                        help="special token of a .tiktoken source (repeat for more)")


def format_option(parser: argparse.ArgumentParser, source: str) -> None:
    """``--from``, the format of the command's ``source`` argument (detected when not given)."""
    parser.add_argument("--from", choices=FORMATS, dest="source_format", help=f"format of {source} (default: detected)")


TEXT_COMMANDS = {"encode": "hf-bpe encode gpt2 --file {0}", "count": "hf-bpe count gpt2 --file {0}",
                 "decode": "hf-bpe decode gpt2 < {0}"}
"""The commands whose TOKENIZER comes before the text, and how to give them a text file."""


def read_source_argument(arguments: argparse.Namespace, path: os.PathLike[str] | str) -> tuple[BPE, str]:
    """:func:`read_source` of ``path`` with the command's ``--from``, ``--pattern`` and ``--special``.
    For ``encode``, ``count`` and ``decode``, a file of no tokenizer format is likely the text given
    first: the error then says that TOKENIZER comes first."""
    try:
        return read_source(os.fspath(path), arguments.source_format, pattern=arguments.pattern,
                           specials=arguments.special)
    except SourceError as error:
        example = TEXT_COMMANDS.get(arguments.command)
        if example is None or arguments.source_format is not None or not os.path.isfile(path) \
                or "cannot tell the format" not in error.problem:
            raise
        raise InputError(f"{path} is not a tokenizer (its format cannot be told). The tokenizer comes first, "
                         f"then the text: {example.format(shlex.quote(os.fspath(path)))}; if {path} is a "
                         f"tokenizer, name its format with --from ({', '.join(FORMATS)})") from None


def read_source(path: str, source_format: str | None, *, pattern: str | None = None,
                specials: Sequence[str] = ()) -> tuple[BPE, str]:
    """The model in ``path`` (see :func:`hf_bpe.load`: a file, a folder or a named encoding) and the
    format it was read as (``"encoding"`` for a named encoding); :class:`~hf_bpe._sources.SourceError`
    naming what a source may be when ``path`` is neither a named encoding nor a file or folder."""
    if not os.path.exists(path):
        if source_format is None and path in ENCODINGS:
            return load(path), "encoding"
        if source_format is not None:
            raise SourceError(f"{path}: no such file or folder (check the path: ls {shlex.quote(path)})")
        raise SourceError(f"unknown tokenizer {path!r}: it is neither a named encoding "
                          f"({', '.join(list_encoding_names())}) nor a file or folder")
    fmt = source_format or detect_format(path)
    return load(path, format=fmt, pattern=pattern, special_tokens=parse_specials(specials)), fmt


def missing_folder(path: Path) -> Path | None:
    """The outermost folder above ``path`` that does not exist yet (writing ``path`` creates it), or None.

    >>> missing_folder(Path("/")) is None
    True
    """
    missing = None
    for folder in path.parents:
        if folder.exists():
            break
        missing = folder
    return missing


def report_created(folder: Path | None) -> None:
    """Say that the command created ``folder`` (from :func:`missing_folder`), as ``train`` and ``convert`` do."""
    if folder is not None and folder.is_dir():
        print(f"  created the folder {folder} (it did not exist)")


def plural(count: int, word: str, words: str | None = None) -> str:
    """``count word``, the plural when count is not 1.

    >>> plural(1, "merge"), plural(0, "merge"), plural(2_000, "special token"), plural(2, "index", "indices")
    ('1 merge', '0 merges', '2,000 special tokens', '2 indices')
    """
    return f"{count:,} {word if count == 1 else words or word + 's'}"


def duration(seconds: float) -> str:
    """A duration as people write it: milliseconds under a second, minutes past two.

    >>> duration(0.0004), duration(0.0312), duration(0.84), duration(8.83), duration(42.4), duration(301)
    ('under 1 ms', '31 ms', '840 ms', '8.8 s', '42 s', '5 min 1 s')
    """
    if seconds < 0.001:
        return "under 1 ms"
    if seconds < 0.1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 1:
        return f"{round(seconds * 100) * 10:.0f} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def refuse_to_overwrite(folder: Path, option: str, force: bool) -> None:
    """An ``--out`` folder that exists and holds files is written over only with ``--force``."""
    if force or not folder.is_dir() or not any(folder.iterdir()):
        return
    raise UsageError(f"{option} {folder}: the folder exists and holds files; to write over them, add --force "
                     f"(or choose another folder, or remove it first: rm -r {shlex.quote(str(folder))})")


def force_option(parser: argparse.ArgumentParser, what: str = "--out") -> None:
    """``--force``: write over an existing folder."""
    parser.add_argument("--force", action="store_true",
                        help=f"write into {what} even when it exists and holds files (default: refuse)")


def parse_specials(specials: Sequence[str]) -> dict[str, int]:
    """``--special TOKEN=ID`` options as a dict."""
    parsed: dict[str, int] = {}
    for item in specials:
        token, separator, token_id = item.rpartition("=")
        if not separator or not token or not token_id.strip().isdigit():
            raise UsageError(f"--special {item!r}: expected TOKEN=ID, e.g. --special '<|endoftext|>=50256'")
        parsed[token] = int(token_id)
    return parsed


def naming_lossy(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` with a refused conversion (:class:`~hf_bpe.errors.ConversionError`) printed with the
    option that accepts it, ``--lossy`` (exit status 1)."""

    @functools.wraps(run)
    def reporting(arguments: argparse.Namespace) -> int:
        try:
            return run(arguments)
        except ConversionError as error:
            print(f"hf-bpe {arguments.command}: error: {error} (on the command line: --lossy)", file=sys.stderr)
            return 1

    return reporting


BLOCK_CHARS = 1 << 20
"""Text files given as a corpus (``hf-bpe audit --corpus``, ``hf-bpe extend``) are read in blocks of whole lines
of about this many characters (each a text)."""


def text_blocks(path: Path, option: str) -> Iterator[str]:
    """The text of ``path`` in blocks of whole lines of about :data:`BLOCK_CHARS` characters; a file that is not
    UTF-8 raises ``ValueError`` naming it after ``option`` (the command line's name for it)."""
    with open(path, encoding="utf-8", newline="") as file:
        block: list[str] = []
        size = 0
        try:
            for line in file:
                block.append(line)
                size += len(line)
                if size >= BLOCK_CHARS:
                    yield "".join(block)
                    block, size = [], 0
        except UnicodeDecodeError as error:
            raise ValueError(f"{option} {path} is not UTF-8 text ({error}); convert it to UTF-8 first") from None
        if block:
            yield "".join(block)


DATA_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text"}
"""The ``datasets`` builder that reads a ``--dataset`` data file, by extension."""


def load_dataset(name_or_path: str, config: str | None, split: str) -> Any:
    """``--dataset NAME_OR_PATH`` (``--dataset-config``, ``--split``) as a ``datasets`` dataset: a folder
    saved with ``save_to_disk``, a data file (:data:`DATA_FILE_BUILDERS`), or a name on the Hub."""
    import datasets  # type: ignore[import-untyped]

    path = Path(name_or_path)
    if path.is_dir() and any((path / marker).exists() for marker in ("state.json", "dataset_dict.json")):
        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise UsageError(f"--split {split}: {path} has splits {sorted(loaded)}")
            return loaded[split]
        return loaded
    if path.is_file():
        builder = DATA_FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise UsageError(
                f"--dataset {path}: cannot read {path.suffix or 'extension-less'} files; "
                f"use one of {sorted(DATA_FILE_BUILDERS)}"
            )
        return datasets.load_dataset(builder, data_files=str(path), split=split)
    return datasets.load_dataset(name_or_path, config, split=split)


DATASET_ON_RAY = ("--ray trains on FILES (text files or quoted glob patterns); for a dataset, call "
                  "hf_bpe.distributed.train(ray.data.read_parquet(...), ...) from Python")
RAY_ADDRESS = re.compile(r"(ray://)?[\w.\-\[\]:]+:\d+|auto|local")
"""What ``--ray ADDRESS`` accepts as an address; anything else after ``--ray`` is the first input."""


def ray_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--ray [ADDRESS]`` (``hf-bpe train``, ``hf-bpe tokenize``): run on Ray; ``what`` starts the help."""
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help=f"{what}: alone, the cluster this machine knows (RAY_ADDRESS, ray start) or a new "
                        "local one; or the cluster at ADDRESS (host:port, ray://host:port)")


def reclaim_files(arguments: argparse.Namespace, name: str) -> None:
    """``--ray data/*.txt``: argparse took the first input for the address; put it back in front of
    ``arguments.<name>`` (the command's inputs). ``--ray`` with ``--dataset`` is refused.

    >>> arguments = argparse.Namespace(ray="a.txt", files=[Path("b.txt")])
    >>> reclaim_files(arguments, "files")
    >>> arguments.ray, arguments.files
    ('', [PosixPath('a.txt'), PosixPath('b.txt')])
    """
    if arguments.ray is not None and getattr(arguments, "dataset", None):
        raise UsageError(DATASET_ON_RAY)
    if arguments.ray and not RAY_ADDRESS.fullmatch(arguments.ray):
        inputs = getattr(arguments, name) or []
        setattr(arguments, name, [Path(arguments.ray) if name == "files" else arguments.ray, *inputs])
        arguments.ray = ""


@contextmanager
def ray_session(option: str | None) -> Iterator[str | None]:
    """The ``ray_address`` for a :mod:`hf_bpe.distributed` call from ``--ray``: None without it; with a
    bare ``--ray``, Ray's own choice (``ray.init()``, shut down afterwards); else the address given."""
    if option != "":
        yield option
        return
    from hf_bpe.distributed import import_ray

    ray = import_ray()
    if ray.is_initialized():  # called from Python that is connected already: use that session
        yield None
        return
    ray.init(log_to_driver=False)
    try:
        yield None
    finally:
        ray.shutdown()


SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``--shard-size``, ``--task-memory-limit``: bytes, with an optional K, M or G (powers of 1024).

    >>> parse_size("128M"), parse_size("4096"), parse_size("1GiB")
    (134217728, 4096, 1073741824)
    """
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, flags=re.IGNORECASE)
    if match is None or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: give bytes, e.g. 134217728, 128M or 1G")
    return int(match.group(1)) * SIZE_UNITS[match.group(2).upper()]
