"""``hf-bpe encode``, ``hf-bpe count`` and ``hf-bpe decode``: tokenize from the command line.

The tokenizer is any source ``hf-bpe convert`` reads: a named encoding (``gpt2``, ``cl100k_base``,
... every one tiktoken ships), a tokenizer folder, ``tokenizer.json``, a SentencePiece ``.model``,
a ``.tiktoken`` file (with ``--pattern``). Texts come from the arguments, else from ``--file``
(repeatable) or standard input, one text per line (the line's newline is not part of it). Lines
are encoded in batches on every core.

    hf-bpe encode cl100k_base "hello world"            # 15339 1917
    hf-bpe encode gpt2 --file notes.txt --format jsonl  # {"ids": [...], "count": n} per line
    hf-bpe count o200k_base --file corpus.txt           # total tokens of every line
    hf-bpe decode cl100k_base "15339 1917"              # hello world
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

BATCH_LINES = 8192
"""Lines encoded per call of the batch encoder."""


def register(subparsers: Any) -> None:
    """Add ``encode``, ``count`` and ``decode`` to ``hf-bpe``'s subcommands."""
    for command, summary, example in (
        ("encode", "text to token ids (or tokens), one line of output per input text",
         "hf-bpe encode cl100k_base 'hello world'\n  hf-bpe encode gpt2 --file notes.txt --format jsonl"),
        ("count", "count the tokens of texts (the total, or each text's with --each)",
         "hf-bpe count o200k_base --file corpus.txt\n  cat notes.txt | hf-bpe count gpt2 --each"),
    ):
        parser = subparsers.add_parser(
            command, help=summary, description=f"{summary[0].upper()}{summary[1:]}. Texts: the TEXT arguments, "
            "else each line of --file or standard input.", epilog=f"examples:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _tokenizer_argument(parser)
        parser.add_argument("texts", nargs="*", metavar="TEXT", help="texts to encode (default: read lines)")
        parser.add_argument("--file", action="append", type=Path, default=[], metavar="PATH",
                            help="a UTF-8 text file, one text per line (repeatable; '-' for standard input)")
        parser.add_argument("--allow-special", action="store_true",
                            help="encode special tokens found in the text as their ids (default: as text)")
        parser.add_argument("--num-threads", type=int, metavar="N", help="threads (default: every core)")
        if command == "encode":
            parser.add_argument("--format", choices=("ids", "tokens", "count", "jsonl"), default="ids",
                                help="ids separated by spaces (default); tokens as a JSON array of their "
                                "texts; the count; or a JSON object per line")
            parser.set_defaults(run=run_encode, parser=parser)
        else:
            parser.add_argument("--each", action="store_true", help="print each text's count, one per line")
            parser.set_defaults(run=run_count, parser=parser)
    decode = subparsers.add_parser(
        "decode", help="token ids to text, one line of output per line of ids",
        description="Token ids to text. Ids: the IDS arguments, else each line of standard input (ids separated "
        "by spaces or commas, a JSON array too).",
        epilog="examples:\n  hf-bpe decode cl100k_base 15339 1917\n  hf-bpe encode gpt2 'hi' | hf-bpe decode gpt2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _tokenizer_argument(decode)
    decode.add_argument("ids", nargs="*", metavar="IDS", help="token ids (default: read lines)")
    decode.set_defaults(run=run_decode, parser=decode)


def take_leftovers(arguments: argparse.Namespace, extra: list[str]) -> None:
    """Add the TEXT (or IDS) arguments argparse left over because they came after options; any
    other leftover is a usage error (exit status 2), as ``parse_args`` would say."""
    field = {"encode": "texts", "count": "texts", "decode": "ids"}.get(arguments.command)
    if field is None or any(item.startswith("-") and item != "-" for item in extra):
        arguments.parser.error(f"unrecognized arguments: {' '.join(extra)}")
    getattr(arguments, field).extend(extra)


def _tokenizer_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tokenizer", metavar="TOKENIZER",
                        help="a named encoding (gpt2, cl100k_base, o200k_base...), a tokenizer folder, tokenizer.json, "
                        "a SentencePiece .model, or a .tiktoken file (with --pattern)")
    parser.add_argument("--pattern", metavar="P", help="split pattern for a .tiktoken file (gpt2, cl100k, o200k, a regex)")


def load_tokenizer(source: str, pattern: str | None = None) -> Any:
    """The model a TOKENIZER argument names: a named encoding, else a file or folder."""
    import hf_bpe

    if source in hf_bpe.list_encoding_names() and not Path(source).exists():
        return hf_bpe.get_encoding(source)
    path = Path(source)
    if not path.exists():
        raise ValueError(f"{source!r} is neither a named encoding ({', '.join(hf_bpe.list_encoding_names())}) "
                         "nor an existing file or folder")
    from hf_bpe.cli.common import read_source

    return read_source(source, None, pattern=pattern)[0]


def _texts(arguments: argparse.Namespace, stdin: TextIO) -> Iterator[str]:
    if arguments.texts:
        yield from arguments.texts
        return
    for path in arguments.file or [Path("-")]:
        stream = stdin if str(path) == "-" else path.open(encoding="utf-8", newline="")
        try:
            for line in stream:
                yield line.rstrip("\r\n") if line.endswith("\n") else line
        finally:
            if stream is not stdin:
                stream.close()


def _encoded(arguments: argparse.Namespace, stdin: TextIO) -> Iterator[tuple[str, list[int]]]:
    """``(text, ids)`` for every input text, encoded a batch at a time."""
    model = load_tokenizer(arguments.tokenizer, arguments.pattern)
    texts = _texts(arguments, stdin)
    while batch := list(itertools.islice(texts, BATCH_LINES)):
        if arguments.allow_special:
            rows = model.encode_batch(batch, num_threads=arguments.num_threads, allowed_special="all")
        else:
            rows = model.encode_ordinary_batch(batch, num_threads=arguments.num_threads)
        yield from zip(batch, rows)


def run_encode(arguments: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """``hf-bpe encode``."""
    out = stdout or sys.stdout
    model = None
    for text, ids in _encoded(arguments, stdin or sys.stdin):
        if arguments.format == "ids":
            out.write(" ".join(map(str, ids)) + "\n")
        elif arguments.format == "count":
            out.write(f"{len(ids)}\n")
        else:
            if arguments.format == "tokens" or arguments.format == "jsonl":
                model = model or load_tokenizer(arguments.tokenizer, arguments.pattern)
                tokens = [token.decode("utf-8", "backslashreplace") for token in model.decode_tokens_bytes(ids)]
            if arguments.format == "tokens":
                out.write(json.dumps(tokens, ensure_ascii=False) + "\n")
            else:
                out.write(json.dumps({"text": text, "ids": ids, "tokens": tokens, "count": len(ids)},
                                     ensure_ascii=False) + "\n")
    return 0


def run_count(arguments: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """``hf-bpe count``."""
    out = stdout or sys.stdout
    total = 0
    for _, ids in _encoded(arguments, stdin or sys.stdin):
        total += len(ids)
        if arguments.each:
            out.write(f"{len(ids)}\n")
    if not arguments.each:
        out.write(f"{total}\n")
    return 0


def _id_lines(arguments: argparse.Namespace, stdin: TextIO) -> Iterable[str]:
    return [" ".join(arguments.ids)] if arguments.ids else stdin


def run_decode(arguments: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """``hf-bpe decode``."""
    out = stdout or sys.stdout
    model = load_tokenizer(arguments.tokenizer, arguments.pattern)
    for number, line in enumerate(_id_lines(arguments, stdin or sys.stdin), start=1):
        fields = line.replace(",", " ").replace("[", " ").replace("]", " ").split()
        try:
            ids = [int(field) for field in fields]
        except ValueError:
            raise ValueError(f"line {number}: {line.strip()[:80]!r} is not a list of integer ids") from None
        out.write(model.decode(ids) + "\n")
    return 0
