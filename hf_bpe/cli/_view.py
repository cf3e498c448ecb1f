"""``hf-bpe view``: see how tokenizers cut text, on a live page, in the terminal, or in one HTML file::

    hf-bpe view gpt2 cl100k_base my-tokenizer/           # a page at 127.0.0.1, opened in the browser
    hf-bpe view gpt2 --text "Hello world"                # the tokens in the terminal
    echo "Hello world" | hf-bpe view gpt2 --text -       # ... of standard input
    hf-bpe view gpt2 cl100k_base --html tokens.html      # one self-contained file to share

A TOKENIZER is a named encoding (gpt2, r50k_base, cl100k_base, o200k_base) or any file or folder
``hf-bpe convert`` reads: a trained or transformers folder, ``tokenizer.json``, a SentencePiece
``.model``, a ``.tiktoken`` file (``--pattern``, ``--special`` for files not OpenAI's), tekken JSON,
GPT-2's files, all read by :func:`hf_bpe.load`. Every tokenizer is loaded before anything starts, so a
bad one stops the command with its loader's error (exit status 2 for a missing one or one of unknown
format, 1 for one that cannot be read). As ``hf-bpe encode`` does, special-token text is ordinary text
unless ``--allow-special`` is given: both give the same ids for the same text.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import threading
import webbrowser
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hf_bpe.cli._common import InputError, read_source, source_options

if TYPE_CHECKING:
    from hf_bpe.model import BPE


def register(subparsers: Any) -> None:
    """Add ``view`` to an ``argparse`` subparsers object (sets ``run=`` and ``parser=``)."""
    view = subparsers.add_parser(
        "view",
        help="see how tokenizers cut text: a live page, the terminal (--text) or an HTML file (--html)",
        description="Show how each TOKENIZER cuts text into tokens. Without --text or --html, serve a page "
        "on 127.0.0.1 (a free port) where the tokens update as you type, and open it in the browser; "
        "Ctrl-C stops it.",
        epilog="examples:\n  hf-bpe view gpt2 cl100k_base my-tokenizer/\n  hf-bpe view gpt2 --text 'Hello world'\n"
        "  echo 'Hello world' | hf-bpe view o200k_base --text -\n  hf-bpe view gpt2 cl100k_base --html tokens.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    view.add_argument("tokenizers", nargs="+", metavar="TOKENIZER",
                      help="a named encoding (gpt2, r50k_base, cl100k_base, o200k_base) or a tokenizer "
                      "file or folder: a trained or transformers folder, tokenizer.json, .model, .tiktoken, "
                      "tekken JSON, GPT-2's vocab.json + merges.txt")
    view.add_argument("--text", metavar="TEXT",
                      help="print the tokens of TEXT in the terminal instead of serving the page ('-': read "
                      "standard input); with --html, the text the file shows")
    view.add_argument("--html", type=Path, metavar="OUT",
                      help="write one self-contained HTML file (no server, no network) showing the tokens of "
                      "--text (default: the page's opening examples)")
    view.add_argument("--allow-special", action="store_true",
                      help="show special tokens found in the text as their ids, as hf-bpe encode --allow-special "
                      "does (default: as text)")
    view.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                      help="ANSI colors in the terminal: auto (on a terminal, unless NO_COLOR is set), "
                      "always, never")
    view.add_argument("--host", default="127.0.0.1",
                      help="address to serve the page on (default 127.0.0.1: this machine only)")
    view.add_argument("--port", type=int, default=0, help="port to serve on (default: a free one)")
    view.add_argument("--no-browser", action="store_true", help="do not open the page in a browser")
    source_options(view)
    view.set_defaults(run=run, parser=view)


def run(arguments: argparse.Namespace) -> int:
    """Run a parsed ``view`` command line; returns the exit status (errors: :func:`hf_bpe.cli.main`)."""
    tokenizers = [(source, read_source(source, None, pattern=arguments.pattern, specials=arguments.special)[0])
                  for source in arguments.tokenizers]
    text = _text(arguments.text)
    if arguments.html is not None:
        return _export(tokenizers, text, arguments)
    if text is not None:
        return _print(tokenizers, text, arguments.color, arguments.allow_special)
    return _serve(tokenizers, arguments)


def _text(given: str | None) -> str | None:
    if given != "-":
        if given is not None:
            try:
                given.encode("utf-8")
            except UnicodeEncodeError:
                raise InputError("--text is not valid UTF-8 (the command line held bytes that are not)"
                                 ) from None
        return given
    data = sys.stdin.buffer.read()  # bytes, so "\r\n" reaches the tokenizer as it is
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"standard input is not UTF-8 (byte {error.start}: "
                         f"{data[error.start:error.start + 1]!r}); give UTF-8 text") from None


def _print(tokenizers: list[tuple[str, BPE]], text: str, color: str, allow_special: bool) -> int:
    from hf_bpe._token_view import color_terminal, view_text

    colored = color == "always" or (color == "auto" and color_terminal())
    allowed: Literal["all"] | set[str] = "all" if allow_special else set()
    views = [view_text(model, text, name=source, allowed_special=allowed) for source, model in tokenizers]
    print("\n\n".join(view.ansi() if colored else view.plain() for view in views))
    return 0


def _export(tokenizers: list[tuple[str, BPE]], text: str | None, arguments: argparse.Namespace) -> int:
    from hf_bpe.view import DEFAULT_TEXT, TokenPage

    page = TokenPage(tokenizers, command=_command(arguments), allow_special=arguments.allow_special)
    try:
        written = page.export(DEFAULT_TEXT if text is None else text, arguments.html)
    except OSError as error:
        print(f"hf-bpe view: error: cannot write {arguments.html}: {error}", file=sys.stderr)
        return 1
    finally:
        page.close()
    print(f"Wrote {written}: {len(tokenizers)} tokenizer{'s' if len(tokenizers) != 1 else ''} on "
          f"{len(DEFAULT_TEXT if text is None else text):,} characters, one self-contained file "
          "(open it in a browser)")
    return 0


def _serve(tokenizers: list[tuple[str, BPE]], arguments: argparse.Namespace) -> int:
    from hf_bpe.view import TokenPage, make_server
    from hf_bpe.view._server import url_of

    page = TokenPage(tokenizers, command=_command(arguments), allow_special=arguments.allow_special)
    try:
        server = make_server(page, arguments.host, arguments.port)
    except OSError as error:
        page.close()
        print(f"hf-bpe view: error: cannot serve on {arguments.host}:{arguments.port}: {error}",
              file=sys.stderr)
        return 1
    url = url_of(server)
    print(f"Serving the token page of {', '.join(page.labels)} at {url}  (Ctrl-C stops it)", flush=True)
    if not arguments.no_browser:
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("hf-bpe view: stopped", file=sys.stderr)
    finally:
        server.server_close()
        page.close()
    return 0


def _command(arguments: argparse.Namespace) -> str:
    return shlex.join(["hf-bpe", "view", *arguments.tokenizers] + (["--allow-special"] if arguments.allow_special
                                                                    else []))
