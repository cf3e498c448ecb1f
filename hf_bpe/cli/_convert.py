"""``hf-bpe convert``: a tokenizer from one format to another::

    hf-bpe convert gpt2-folder/ --to tiktoken gpt2.tiktoken
    hf-bpe convert cl100k_base.tiktoken --to hf tokenizer.json
    hf-bpe convert tokenizer.model --to folder my-tokenizer/     # a BPETokenizer folder
    hf-bpe convert my-tokenizer/ --to sentencepiece out.model --lossy

The formats are :data:`hf_bpe._sources.FORMATS` (the source's is detected when ``--from`` is not
given). A target that cannot hold the model exactly makes ``convert`` fail with the reason; ``--lossy``
writes the documented approximation where the format has one (for ``hf``, with a warning that says
how often the file differed from the model on its probe texts).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import conversion.gguf
import conversion.gpt2
import conversion.hf
import conversion.sentencepiece
import conversion.tiktoken
from hf_bpe._sources import FORMATS
from hf_bpe.cli._common import (
    UsageError,
    force_option,
    format_option,
    missing_folder,
    naming_lossy,
    read_source_argument,
    refuse_to_overwrite,
    report_created,
    source_options,
)
from hf_bpe.cli._inspect import pattern_name
from hf_bpe.errors import LossyConversionWarning, TokenizerFileError
from hf_bpe.model import BPE


def register(subparsers: Any) -> None:
    """Add ``convert`` to an ``argparse`` subparsers object."""
    convert = subparsers.add_parser(
        "convert",
        help="convert a tokenizer between formats",
        description="Read SRC (format detected, or --from) and write it as --to FORMAT at OUT. "
        f"Formats: {', '.join(FORMATS)}.",
        epilog="examples:\n  hf-bpe convert gpt2-folder/ --to tiktoken gpt2.tiktoken\n"
        "  hf-bpe convert cl100k_base --to hf tokenizer.json\n"
        "  hf-bpe convert tokenizer.model --to folder my-tokenizer/\n"
        "  hf-bpe convert my.tiktoken --pattern cl100k --special '<|endoftext|>=100257' --to hf tokenizer.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    convert.add_argument("source", type=Path, metavar="SRC", help="file, folder or named encoding to read")
    convert.add_argument("out", type=Path, metavar="OUT", help="file or folder to write")
    convert.add_argument("--to", required=True, choices=FORMATS, dest="target", help="format to write")
    format_option(convert, "SRC")
    convert.add_argument("--lossy", action="store_true",
                         help="write an approximation where the target cannot hold the model exactly")
    force_option(convert, "OUT (with --to folder)")
    source_options(convert)
    convert.set_defaults(run=run, parser=convert)


@naming_lossy
def run(arguments: argparse.Namespace) -> int:
    """Convert; a refused conversion prints the reason and names ``--lossy`` (exit status 1)."""
    if arguments.target == "folder":
        refuse_to_overwrite(arguments.out, "OUT", arguments.force)
    model, source_format = read_source_argument(arguments, arguments.source)
    policy = bos_eos_of(arguments.source) if arguments.target == "folder" and source_format == "hf" else {}
    created = missing_folder(arguments.out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LossyConversionWarning)
        written = write_model(model, arguments.target, arguments.out, lossy=arguments.lossy, **policy)
    print(f"{arguments.source} ({source_format}) -> {written} ({arguments.target}): {describe_briefly(model)}")
    report_created(created)
    for warning in caught:
        if issubclass(warning.category, LossyConversionWarning):
            print(f"hf-bpe convert: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    if arguments.target == "tiktoken":
        print(f"  the file holds no pattern or special tokens: pattern {pattern_name(model)!r}, "
              f"special tokens {model.special_tokens}")
    return 0


def bos_eos_of(source: Path) -> dict[str, Any]:
    """The BOS/EOS settings of a ``tokenizer.json`` (a file or a folder holding one) for a
    ``BPETokenizer`` folder (:func:`conversion.hf.special_token_settings`); a post-processor it
    cannot carry over is named in a warning, and the folder written without BOS/EOS tokens."""
    path = source / "tokenizer.json" if source.is_dir() else source
    try:
        return conversion.hf.special_token_settings(path)
    except TokenizerFileError as error:
        print(f"hf-bpe convert: warning: {error.problem}; the folder adds no BOS/EOS tokens and its offsets are "
              "not trimmed", file=sys.stderr)
        return {}


def write_model(model: BPE, target: str, out: Path, *, lossy: bool = False, **policy: Any) -> Path:
    """Write ``model`` as ``target`` (one of :data:`~hf_bpe._sources.FORMATS`) at ``out``; returns what
    was written. ``policy`` (BOS/EOS settings) is for ``"folder"``."""
    if target == "tiktoken":
        return conversion.tiktoken.save(model, out, lossy=lossy)
    if target == "tekken":
        return conversion.tiktoken.save_tekken(model, out, lossy=lossy)
    if target == "gpt2":
        return conversion.gpt2.save(model, out, lossy=lossy)
    if target == "sentencepiece":
        return conversion.sentencepiece.save(model, out, lossy=lossy)
    if target == "gguf":
        return conversion.gguf.save(model, out, lossy=lossy)
    if target == "hf":
        path = out / "tokenizer.json" if out.is_dir() else out
        saved: Path = conversion.hf.save(model, path, lossy=lossy)
        return saved
    if target == "hf_bpe":
        return model.save(out)
    if target == "folder":
        from hf_bpe.transformers import save_tokenizer_folder  # imports transformers: only when asked

        save_tokenizer_folder(model, out, **policy)
        return out
    raise UsageError(f"unknown format {target!r}; formats: {', '.join(FORMATS)}")


def describe_briefly(model: BPE) -> str:
    specials = len(model.special_tokens)
    return f"{model.kind} model, {model.n_vocab} ids, {specials} special token{'s' if specials != 1 else ''}"
