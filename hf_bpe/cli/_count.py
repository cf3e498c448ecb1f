"""``hf-bpe count``: how many tokens texts take::

    hf-bpe count o200k_base --file corpus.txt          # = len(encode(the file's contents))
    hf-bpe count gpt2 --file notes.txt --lines --each   # one count per line

Texts are what ``hf-bpe encode`` reads (:mod:`hf_bpe.cli._encode`): each TEXT argument, else each
file whole, else standard input whole; with ``--lines``, every line without its newline. The count of
a text is the length of ``hf-bpe encode``'s ids for it; without ``--each`` the total is printed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from hf_bpe.cli._common import read_source_argument
from hf_bpe.cli._encode import TEXTS_HELP, counts, needs_input, text_options


def register(subparsers: Any) -> None:
    """Add ``count`` to ``hf-bpe``'s subcommands."""
    parser = subparsers.add_parser(
        "count", help="count the tokens of texts (the total, or each text's with --each)",
        description="Count the tokens of texts: the total, or one count per text with --each. " + TEXTS_HELP,
        epilog="examples:\n  hf-bpe count o200k_base --file corpus.txt\n  cat notes.txt | hf-bpe count gpt2 --lines --each",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    text_options(parser)
    parser.add_argument("--each", action="store_true", help="print each text's count, one per line")
    parser.set_defaults(run=run, parser=parser)


def run(arguments: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """``hf-bpe count``."""
    out = stdout or sys.stdout
    needs_input(arguments, stdin or sys.stdin)
    model = read_source_argument(arguments, arguments.tokenizer)[0]
    total = 0
    for count in counts(model, arguments, stdin or sys.stdin):
        total += count
        if arguments.each:
            out.write(f"{count}\n")
    if not arguments.each:
        out.write(f"{total}\n")
    return 0
