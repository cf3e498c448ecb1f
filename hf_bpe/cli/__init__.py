"""The ``hf-bpe`` command line: one module per command, each with ``register(subparsers)`` (adds its
parser and sets ``run``) and ``run(arguments) -> exit status``. A new command is a new module here, its
import and one line in :data:`COMMANDS`::

    hf-bpe train --vocab-size 4096 --out my-tokenizer
    hf-bpe extend cl100k_base greek.txt --add 1000 --out cl100k-greek
    hf-bpe inspect tokenizer.model
    hf-bpe convert gpt2-folder/ --to tiktoken gpt2.tiktoken
    hf-bpe encode cl100k_base "hello world"
    hf-bpe view gpt2 cl100k_base my-tokenizer/
    hf-bpe tokenize 'data/*.jsonl' --tokenizer my-tokenizer --eot '<|endoftext|>' --out tokens
    hf-bpe audit my-tokenizer/ --corpus data/*.txt --compare gpt2 o200k_base --out audit/

Exit status (:data:`EXIT_STATUS`, printed by ``hf-bpe --help``): 0 done; 1 failed, the error
printed; 2 bad usage or input (an option, or a file or tokenizer that is missing, a folder, or of a
format that cannot be told); 130 interrupted; 141 the reader of the output went away (``| head``),
quietly. Warnings print as one line, ``hf-bpe COMMAND: warning: ...``; transformers' advice that
PyTorch is missing (irrelevant to a tokenizer) is not printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from hf_bpe._sources import SourceError
from hf_bpe.cli import _audit, _convert, _count, _decode, _encode, _extend, _inspect, _tokenize, _train, _view
from hf_bpe.cli._common import InputError, UsageError, for_the_shell
from hf_bpe.model import MODEL_FILE

__all__ = ["COMMANDS", "EXIT_STATUS", "MODEL_FILE", "UsageError", "main"]

COMMANDS = (
    _train,
    _extend,
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


EXIT_STATUS = """exit status:
  0    done
  1    failed: the error is printed (a conversion the target cannot hold, a file that cannot be
       written or is not what it should be, training that cannot reach the vocabulary size)
  2    bad usage or input: an option that cannot work, or a file or tokenizer given that is
       missing, a folder, or of a format that cannot be told (the error names it)
  130  interrupted (Ctrl-C)
  141  the output's reader went away (e.g. | head): the command stops quietly"""
"""The exit statuses, as ``hf-bpe --help`` ends."""

BROKEN_PIPE = 141
"""Exit status when standard output's reader goes away (128 + SIGPIPE, as a shell reports it)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (:data:`EXIT_STATUS`)."""
    arguments, extra = parser().parse_known_args(argv)
    if extra:  # texts (or ids) after options: argparse leaves them over
        _encode.take_leftovers(arguments, extra)
    name = f"hf-bpe {arguments.command}"
    with _quiet_libraries(), warnings.catch_warnings():
        warnings.showwarning = _one_line_warnings(name)
        try:
            status = int(arguments.run(arguments))
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return status
        except BrokenPipeError:
            _discard_stdout()
            return BROKEN_PIPE
        except InputError as error:
            print(f"{name}: error: {error}", file=sys.stderr)
            return 2
        except (UsageError, SourceError) as error:
            arguments.parser.error(for_the_shell(error))
        except KeyboardInterrupt:
            print("hf-bpe: interrupted", file=sys.stderr)
            return 130
        except OSError as error:
            print(f"{name}: error: {describe_os_error(error)}", file=sys.stderr)
            return 2 if isinstance(error, MISSING_PATH) and error.filename is not None else 1
        except (ValueError, TypeError, ImportError) as error:
            print(f"{name}: error: {error}", file=sys.stderr)
            return 1
    return 2  # unreachable: parser.error exits


MISSING_PATH = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


def describe_os_error(error: OSError) -> str:
    """``error`` without Python's ``[Errno N]``: the file it names and the problem.

    >>> describe_os_error(FileNotFoundError(2, "No such file or directory", "notes.txt"))
    'notes.txt: no such file or folder (check the path: ls notes.txt)'
    >>> describe_os_error(OSError("cannot write x.json: disk full"))
    'cannot write x.json: disk full'
    """
    if error.filename is None:
        return str(error)
    problem = {FileNotFoundError: "no such file or folder (check the path: ls {0})",
               IsADirectoryError: "is a folder, not a file (give a file in it)",
               NotADirectoryError: "a part of the path is a file, not a folder",
               PermissionError: "permission denied (check with: ls -l {0})"}.get(type(error))
    if problem is None:
        problem = (error.strerror or str(error)).lower()
    return f"{error.filename}: {problem.format(error.filename)}"


def _one_line_warnings(name: str) -> Any:
    """A ``warnings.showwarning`` that prints ``NAME: warning: message``, one line, no source line."""

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        text = " ".join(str(message).split())
        print(f"{name}: warning: {text}", file=file or sys.stderr)

    return show


@contextmanager
def _quiet_libraries() -> Iterator[None]:
    """While a command runs: transformers prints no advisory warnings (its advice that PyTorch is
    missing is irrelevant to a tokenizer); its errors and our warnings still print."""
    before = os.environ.get("TRANSFORMERS_NO_ADVISORY_WARNINGS")
    os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"]
        else:
            os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = before


def _discard_stdout() -> None:
    """After a closed pipe: point standard output at /dev/null, so that Python's last flush at exit
    does not print an error too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (standard output replaced in Python)
        pass


def parser() -> argparse.ArgumentParser:
    """The parser of every command in :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(prog="hf-bpe", description="Exact, fast byte-level BPE tokenizers.",
                                     epilog=EXIT_STATUS, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return parser


def _version() -> str:
    from hf_bpe import __version__

    return __version__
