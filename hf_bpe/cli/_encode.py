"""``hf-bpe encode``: texts to token ids (``hf-bpe count`` and ``hf-bpe decode`` share its input rules)::

    hf-bpe encode cl100k_base "hello world"                  # 15339 1917
    hf-bpe encode gpt2 --file notes.txt                      # the ids of the whole file
    hf-bpe encode gpt2 --file notes.txt --lines --format jsonl   # {"text": ..., "ids": [...], ...} per line

The tokenizer is any source ``hf_bpe.load`` reads: a named encoding (``gpt2``, ``cl100k_base``, ...
every one tiktoken ships), a tokenizer folder, ``tokenizer.json``, a SentencePiece ``.model``, a
``.tiktoken`` file (with ``--pattern``).

What a text is, the same for ``encode`` and ``count``: each TEXT argument; else each ``--file`` whole
(newlines included: its ids are ``encode`` of the file's contents); else standard input whole. With
``--lines`` every line of the files (or standard input) is a text, without its newline. A whole file is
read as bytes and cut into pieces of about :data:`CHUNK_BYTES` where the split pattern provably starts a
new piece; each piece is decoded and the pieces are encoded in parallel: the ids are exactly those of the
whole text; ``count`` counts the parts from their bytes (:meth:`hf_bpe.BPE.count_utf8_batch`), without
a ``str`` or the ids. (Decoding the whole file as one ``str``, slicing it and encoding the parts back to
UTF-8 took a fifth of the CPU time, all of it on the calling thread while the encoder's threads waited.) Lines are encoded in
batches of :data:`BATCH_LINES`, in parallel. A progress bar shows on a terminal for inputs that take
over a second.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from hf_bpe import patterns
from hf_bpe._progress import progress_bar
from hf_bpe.cli._common import UsageError, format_option, input_file, read_source_argument, source_options
from hf_bpe.counting import count_utf8_batch
from hf_bpe.model import BPE, AllowedSpecial
from hf_bpe.train import progress_delay, watched

BATCH_LINES = 8192
"""Lines encoded per call of the batch encoder."""

CHUNK_BYTES = 1 << 16
"""About how many bytes of a whole file one parallel task encodes."""

BATCH_CHUNKS = 128
"""Chunks of a whole text encoded per call of the batch encoder (bounds the ids held at once)."""

READ_CHARS = 1 << 22
"""Characters read at a time when every line is a text."""

SAFE_CUT = re.compile(rb"(?<=[!-~])\n(?=[!-.0-~])")
"""Where the named split patterns (gpt2, cl100k, o200k) always end a piece: after a newline that follows
a printable ASCII character and precedes one other than ``/``. (A piece ending in punctuation may take
the newlines after it, and in o200k also slashes; nothing takes a newline and the character after it.
The trainer's cutter, ``safe_cut`` in crates/core/src/train/count.rs, uses this rule for any
non-whitespace character.) It reads UTF-8 bytes: an ASCII byte there is always that character, so a cut
never splits one."""

CUTTABLE_PATTERNS = ("gpt2", "cl100k", "o200k")


def register(subparsers: Any) -> None:
    """Add ``encode`` to ``hf-bpe``'s subcommands."""
    parser = subparsers.add_parser(
        "encode", help="texts to token ids (or tokens, counts, JSON Lines), one line of output per text",
        description="Texts to token ids, one line of output per text. " + TEXTS_HELP,
        epilog="examples:\n  hf-bpe encode cl100k_base 'hello world'\n  hf-bpe encode gpt2 --file notes.txt\n"
        "  hf-bpe encode gpt2 --file notes.txt --lines --format jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    text_options(parser)
    parser.add_argument("--format", choices=("ids", "tokens", "count", "jsonl"), default="ids",
                        help="ids separated by spaces (default); tokens as a JSON array of their texts; the "
                        "count; or a JSON object per text")
    parser.set_defaults(run=run, parser=parser)


TEXTS_HELP = ("Texts: each TEXT argument, else each --file whole, else standard input whole (when piped in: "
              "echo 'hi' | hf-bpe encode gpt2); with --lines, every line (without its newline).")


def text_options(parser: argparse.ArgumentParser) -> None:
    """The tokenizer and the text options ``encode`` and ``count`` share."""
    tokenizer_options(parser)
    parser.add_argument("texts", nargs="*", metavar="TEXT",
                        help="texts (default: each --file, else what is piped to standard input)")
    parser.add_argument("--file", action="append", type=Path, default=[], metavar="PATH",
                        help="a UTF-8 text file (repeatable; '-' for standard input)")
    parser.add_argument("--lines", action="store_true",
                        help="each line of the files or standard input is a text (default: each file whole)")
    parser.add_argument("--allow-special", action="store_true",
                        help="encode special tokens found in the text as their ids (default: as text)")
    parser.add_argument("--num-threads", type=int, metavar="N", help="threads (default: every core)")


def tokenizer_options(parser: argparse.ArgumentParser) -> None:
    """TOKENIZER and how to read it (``--from``, ``--pattern``, ``--special``), as every command reads a source."""
    parser.add_argument("tokenizer", metavar="TOKENIZER",
                        help="a named encoding (gpt2, cl100k_base, o200k_base...), a tokenizer folder, tokenizer.json, "
                        "a SentencePiece .model, or a .tiktoken file (with --pattern)")
    format_option(parser, "TOKENIZER")
    source_options(parser)


def take_leftovers(arguments: argparse.Namespace, extra: list[str]) -> None:
    """Add the TEXT (or IDS) arguments argparse left over because they came after options; any
    other leftover is a usage error (exit status 2), as ``parse_args`` would say."""
    field = {"encode": "texts", "count": "texts", "decode": "ids"}.get(arguments.command)
    if field is None or any(item.startswith("-") and item != "-" for item in extra):
        arguments.parser.error(f"unrecognized arguments: {' '.join(extra)}")
        return  # not reached: error() exits
    getattr(arguments, field).extend(extra)


def chunks(model: BPE, data: bytes, allow_special: bool, size: int | None = None) -> Iterator[bytes]:
    """``data`` (UTF-8) in parts of about ``size`` bytes whose ids, concatenated, are the whole text's:
    cut only at :data:`SAFE_CUT` for the named patterns, never inside an allowed special token; other
    models (a custom pattern, SentencePiece) get the text whole.

    >>> import hf_bpe
    >>> list(chunks(hf_bpe.get_encoding("gpt2"), b"one.\\ntwo\\n three\\nfour", False, size=2))
    [b'one.\\n', b'two\\n three\\n', b'four']
    """
    size = size or CHUNK_BYTES
    cuttable = patterns.name_of(model.pattern) in CUTTABLE_PATTERNS and not (
        allow_special and any("\n" in token for token in model.special_tokens)
    )
    start = 0
    while cuttable and len(data) - start > size + size // 2:
        found = SAFE_CUT.search(data, start + size)
        if found is None:
            break
        yield data[start:found.end()]
        start = found.end()
    yield data[start:]


def _encode_batch(model: BPE, texts: list[str], arguments: argparse.Namespace) -> list[list[int]]:
    if arguments.allow_special:
        return model.encode_batch(texts, num_threads=arguments.num_threads, allowed_special="all")
    return model.encode_ordinary_batch(texts, num_threads=arguments.num_threads)


def _progress(total: int | None, unit: str) -> Any:
    """A progress bar on a terminal (after a second of work), else None."""
    if not watched(sys.stderr):
        return None
    return progress_bar(total=total, unit=unit, unit_scale=True, delay=progress_delay(), leave=False)


def _read(path: Path, stdin: TextIO) -> bytes:
    """A file's bytes (standard input's when ``path`` is ``-``)."""
    if str(path) == "-":
        raw = getattr(stdin, "buffer", None)
        return raw.read() if raw is not None else stdin.read().encode("utf-8")
    return input_file(path, "--file").read_bytes()


def _utf8(part: bytes, path: Path, offset: int) -> str:
    """``part`` of ``path``, which starts at byte ``offset``, decoded; a clear error when it is not UTF-8."""
    try:
        return part.decode("utf-8")
    except UnicodeDecodeError as error:
        where = "standard input" if str(path) == "-" else str(path)
        convert = "iconv -f LATIN1 -t UTF-8 < FILE > FILE.utf8.txt" if str(path) == "-" or " " in str(path) \
            else f"iconv -f LATIN1 -t UTF-8 < {path} > {path.stem}.utf8{path.suffix}"
        raise ValueError(f"{where} is not UTF-8 text: byte {offset + error.start:,} is {part[error.start:error.end]!r} "
                         f"({error.reason}); hf-bpe reads UTF-8: convert it first, e.g. (if it is Latin-1) "
                         f"{convert}") from None


def _line_blocks(path: Path, stdin: TextIO, raw: bool = False) -> Iterator[list[Any]]:
    """The file's lines (``str``, or ``bytes`` when ``raw``), without their ``\n`` or ``\r\n``, a
    block of lines at a time (a loop per line is slow). Read as bytes: a part that is not UTF-8 is
    named with its file and byte offset."""
    if str(path) == "-":
        stream: Any = getattr(stdin, "buffer", None)
        if stream is None:  # a text stream with no bytes under it
            for block in _text_line_blocks(stdin):
                yield [line.encode("utf-8") for line in block] if raw else block
            return
    else:
        stream = input_file(path, "--file").open("rb")
    try:
        rest, offset = b"", 0  # offset: where rest starts in the file
        while block := stream.read(READ_CHARS):
            joined = rest + block
            cut = joined.rfind(b"\n") + 1
            if cut == 0:
                rest = joined
                continue
            complete, rest = joined[:cut], joined[cut:]
            text: Any = complete if raw else _utf8(complete, path, offset)
            offset += cut
            newline, carriage_return = (b"\n", b"\r") if raw else ("\n", "\r")
            lines = text.split(newline)
            lines.pop()  # empty: after the last newline
            yield [line.removesuffix(carriage_return) for line in lines] if carriage_return in text else lines
        if rest:
            yield [rest if raw else _utf8(rest, path, offset)]
    finally:
        if str(path) != "-":
            stream.close()


def _text_line_blocks(stream: TextIO) -> Iterator[list[str]]:
    """The lines of a text stream (standard input replaced in Python), as :func:`_line_blocks`."""
    rest = ""
    while block := stream.read(READ_CHARS):
        lines = (rest + block).split("\n")
        rest = lines.pop()
        yield [line.removesuffix("\r") for line in lines]
    if rest:
        yield [rest]


def needs_input(arguments: argparse.Namespace, stdin: TextIO, what: str = "text") -> None:
    """With no TEXT and no ``--file`` the command reads standard input; when that is a terminal
    (nothing piped in), a usage error says what to give instead of waiting for typing."""
    given = getattr(arguments, "texts", None) or getattr(arguments, "ids", None) or getattr(arguments, "file", None)
    isatty = getattr(stdin, "isatty", None)
    if given or isatty is None or not isatty():
        return
    command = f"hf-bpe {arguments.command} {shlex.quote(arguments.tokenizer)}"
    if what == "ids":
        raise UsageError(f"no ids given: give IDS ({command} 15339 1917) or pipe them in "
                         f"(hf-bpe encode gpt2 'hello' | {command})")
    raise UsageError(f"no text given: give TEXT ({command} 'hello world'), a file ({command} --file notes.txt), "
                     f"or pipe text in (echo 'hello world' | {command})")


def line_batches(arguments: argparse.Namespace, stdin: TextIO, raw: bool = False) -> Iterator[list[Any]]:
    """The lines of every input (``--lines``), in batches of at most :data:`BATCH_LINES` (``bytes``
    when ``raw``)."""
    bar = _progress(None, " lines")
    pending: list[Any] = []
    for path in arguments.file or [Path("-")]:
        for block in _line_blocks(path, stdin, raw):
            pending += block
            while len(pending) >= BATCH_LINES:
                batch, pending = pending[:BATCH_LINES], pending[BATCH_LINES:]
                yield batch
                if bar is not None:
                    bar.update(len(batch))
    if pending:
        yield pending
    if bar is not None:
        bar.close()


def counts(model: BPE, arguments: argparse.Namespace, stdin: TextIO) -> Iterator[int]:
    """The number of ids of every input text (``hf-bpe count``), without holding them all: lines and
    whole files are counted from their bytes (:meth:`hf_bpe.BPE.count_utf8_batch`)."""
    if arguments.lines and not arguments.texts:
        allowed: AllowedSpecial = "all" if arguments.allow_special else set()
        number = 0
        for batch in line_batches(arguments, stdin, raw=True):
            try:
                counted = count_utf8_batch(model, batch, allowed_special=allowed, num_threads=arguments.num_threads)
            except ValueError:  # a line that is not UTF-8: say which
                for offset, line in enumerate(batch, start=number + 1):
                    _utf8(line, Path(f"line {offset:,} of the input"), 0)
                raise
            yield from counted
            number += len(batch)
        return
    if arguments.texts:
        for pieces in encoded(model, arguments, stdin):
            yield sum(len(ids) for _, ids in pieces)
        return
    for path in arguments.file or [Path("-")]:
        yield _count_whole(model, _read(path, stdin), path, arguments)


def _count_whole(model: BPE, data: bytes, path: Path, arguments: argparse.Namespace) -> int:
    """The number of ids of a whole file, its parts counted from their bytes (no ``str``, no ids)."""
    allowed: AllowedSpecial = "all" if arguments.allow_special else set()
    bar = _progress(len(data), "B") if len(data) > CHUNK_BYTES else None
    parts = chunks(model, data, arguments.allow_special)
    total = offset = 0
    while batch := list(itertools.islice(parts, BATCH_CHUNKS)):
        try:
            total += sum(count_utf8_batch(model, batch, allowed_special=allowed, num_threads=arguments.num_threads))
        except ValueError:  # a part that is not UTF-8: say which byte of the file, as encode does
            for part in batch:
                _utf8(part, path, offset)
                offset += len(part)
            raise
        offset += sum(map(len, batch))
        if bar is not None:
            bar.update(sum(map(len, batch)))
    if bar is not None:
        bar.close()
    return total


def encoded(model: BPE, arguments: argparse.Namespace, stdin: TextIO) -> Iterator[Iterator[tuple[str, list[int]]]]:
    """For every input text (see the module's docstring for what a text is), its pieces in order, each
    ``(the piece of text, its ids)``: one piece, or a whole file's parts."""
    if arguments.texts:
        for text in arguments.texts:
            yield zip([text], _encode_batch(model, [text], arguments))
        return
    if arguments.lines:
        for batch in line_batches(arguments, stdin):
            yield from (iter([piece]) for piece in zip(batch, _encode_batch(model, batch, arguments)))
        return
    for path in arguments.file or [Path("-")]:
        yield _encode_whole(model, _read(path, stdin), path, arguments)


def _encode_whole(model: BPE, data: bytes, path: Path, arguments: argparse.Namespace) -> Iterator[tuple[str, list[int]]]:
    bar = _progress(len(data), "B") if len(data) > CHUNK_BYTES else None
    parts = chunks(model, data, arguments.allow_special)
    offset = 0
    while batch := list(itertools.islice(parts, BATCH_CHUNKS)):
        texts = []
        for part in batch:
            texts.append(_utf8(part, path, offset))
            offset += len(part)
        yield from zip(texts, _encode_batch(model, texts, arguments))
        if bar is not None:
            bar.update(sum(map(len, batch)))
    if bar is not None:
        bar.close()


def run(arguments: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """``hf-bpe encode``: one line per text."""
    out = stdout or sys.stdout
    needs_input(arguments, stdin or sys.stdin)
    model = read_source_argument(arguments, arguments.tokenizer)[0]
    for parts in encoded(model, arguments, stdin or sys.stdin):
        pieces = list(parts)
        ids = [token for _, part in pieces for token in part]
        if arguments.format == "ids":
            out.write(" ".join(map(str, ids)) + "\n")
        elif arguments.format == "count":
            out.write(f"{len(ids)}\n")
        else:
            tokens = [token.decode("utf-8", "backslashreplace") for token in model.decode_tokens_bytes(ids)]
            if arguments.format == "tokens":
                out.write(json.dumps(tokens, ensure_ascii=False) + "\n")
            else:
                text = "".join(piece for piece, _ in pieces)
                out.write(json.dumps({"text": text, "ids": ids, "tokens": tokens, "count": len(ids)},
                                     ensure_ascii=False) + "\n")
    return 0
