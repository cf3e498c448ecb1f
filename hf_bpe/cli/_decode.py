"""``hf-bpe decode``: token ids to text, one line of output per line of ids::

    hf-bpe decode cl100k_base 15339 1917              # hello world
    hf-bpe encode gpt2 'hi' | hf-bpe decode gpt2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from hf_bpe.cli._common import read_source_argument
from hf_bpe.cli._encode import needs_input, tokenizer_options


def register(subparsers: Any) -> None:
    """Add ``decode`` to ``hf-bpe``'s subcommands."""
    parser = subparsers.add_parser(
        "decode", help="token ids to text, one line of output per line of ids",
        description="Token ids to text. Ids: the IDS arguments, else each line of standard input (ids separated "
        "by spaces or commas, a JSON array too).",
        epilog="examples:\n  hf-bpe decode cl100k_base 15339 1917\n  hf-bpe encode gpt2 'hi' | hf-bpe decode gpt2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tokenizer_options(parser)
    parser.add_argument("ids", nargs="*", metavar="IDS", help="token ids (default: read lines)")
    parser.set_defaults(run=run, parser=parser)


def _id_lines(arguments: argparse.Namespace, stdin: TextIO) -> Iterable[str]:
    return [" ".join(arguments.ids)] if arguments.ids else stdin


def run(arguments: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """``hf-bpe decode``."""
    out = stdout or sys.stdout
    needs_input(arguments, stdin or sys.stdin, "ids")
    model = read_source_argument(arguments, arguments.tokenizer)[0]
    for number, line in enumerate(_id_lines(arguments, stdin or sys.stdin), start=1):
        fields = line.replace(",", " ").replace("[", " ").replace("]", " ").split()
        try:
            ids = [int(field) for field in fields]
        except ValueError:
            raise ValueError(f"line {number}: {line.strip()[:80]!r} is not a list of integer ids") from None
        out.write(model.decode(ids) + "\n")
    return 0
