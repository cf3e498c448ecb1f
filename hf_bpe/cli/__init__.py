"""The ``hf-bpe`` command line: one module per command, each with ``register(subparsers)`` (adds its
parser and sets ``run``) and ``run(arguments) -> exit status``. A new command is a new module here, its
import and one line in :data:`COMMANDS`::

    hf-bpe train --vocab-size 4096 --out my-tokenizer
    hf-bpe inspect tokenizer.model
    hf-bpe convert gpt2-folder/ --to tiktoken gpt2.tiktoken
    hf-bpe encode cl100k_base "hello world"
    hf-bpe view gpt2 cl100k_base my-tokenizer/
    hf-bpe tokenize 'data/*.jsonl' --tokenizer my-tokenizer --eot '<|endoftext|>' --out tokens
    hf-bpe audit my-tokenizer/ --corpus data/*.txt --compare gpt2 o200k_base --out audit/

Exit status: 0 done, 1 failed (the error is printed), 2 bad usage (argparse's message), 130
interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hf_bpe._sources import SourceError
from hf_bpe.cli import _audit, _convert, _count, _decode, _encode, _inspect, _tokenize, _train, _view
from hf_bpe.cli._common import UsageError, for_the_shell
from hf_bpe.model import MODEL_FILE

__all__ = ["COMMANDS", "MODEL_FILE", "UsageError", "main"]

COMMANDS = (
    _train,
    _convert,
    _inspect,
    _encode,
    _count,
    _decode,
    _view,
    _audit,
    _tokenize,
)
"""The command modules, in the order ``--help`` lists them."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed, 2 bad usage)."""
    arguments, extra = parser().parse_known_args(argv)
    if extra:  # texts (or ids) after options: argparse leaves them over
        _encode.take_leftovers(arguments, extra)
    try:
        return int(arguments.run(arguments))
    except (UsageError, SourceError) as error:
        arguments.parser.error(for_the_shell(error))
    except KeyboardInterrupt:
        print("hf-bpe: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, ImportError) as error:
        print(f"hf-bpe {arguments.command}: error: {error}", file=sys.stderr)
        return 1
    return 2  # unreachable: parser.error exits


def parser() -> argparse.ArgumentParser:
    """The parser of every command in :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(prog="hf-bpe", description="Exact, fast byte-level BPE tokenizers.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return parser


def _version() -> str:
    from hf_bpe import __version__

    return __version__
