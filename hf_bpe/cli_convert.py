"""``hf-bpe convert`` and ``hf-bpe inspect``: tokenizer files from one format to another, and a look
inside one. Wired into ``hf_bpe.cli`` by :func:`register`::

    hf-bpe inspect tokenizer.model
    hf-bpe convert gpt2-folder/ --to tiktoken gpt2.tiktoken
    hf-bpe convert cl100k_base.tiktoken --to hf tokenizer.json
    hf-bpe convert tokenizer.model --to folder my-tokenizer/     # a BPETokenizer folder
    hf-bpe convert my-tokenizer/ --to sentencepiece out.model --lossy

Formats (``--to``, ``--from``; the source's is detected when not given):

========== ================================================================================
tiktoken   ``.tiktoken`` rank file (pattern and special tokens are not in the file: for
           OpenAI's files they are known, otherwise pass ``--pattern`` and ``--special``)
tekken     Mistral's tekken JSON
gpt2       ``vocab.json`` + ``merges.txt`` (or ``encoder.json`` + ``vocab.bpe``) in a folder
sentencepiece  a SentencePiece BPE ``.model``
hf         HF ``tokenizer.json`` (a file, or a folder holding one)
hf_bpe     our own one-file JSON (``BPE.save``)
folder     a ``BPETokenizer`` folder (``save_pretrained``; read through its ``hf_bpe.json``)
========== ================================================================================

A target that cannot hold the model exactly makes ``convert`` fail with the reason; ``--lossy``
writes the documented approximation where the format has one (for ``hf``, with a warning that says
how often the file differed from the model on its probe texts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hf_bpe import patterns
from hf_bpe._io import read_file
from hf_bpe.errors import ConversionError, LossyConversionWarning, TokenizerFileError
from hf_bpe.model import BPE, MODEL_FILE

FORMATS = ("tiktoken", "tekken", "gpt2", "sentencepiece", "hf", "hf_bpe", "folder")
SAMPLE = "Hello world! It's 2024: naïve café, 日本語, 🦙 <|endoftext|>"


class ConvertUsageError(Exception):
    """A command line that cannot work as given (argparse reports it, exit status 2)."""


def register(subparsers: Any) -> None:
    """Add ``convert`` and ``inspect`` to an ``argparse`` subparsers object. Each sets
    ``run=function(arguments) -> exit status`` and ``parser=`` its own parser."""
    convert = subparsers.add_parser(
        "convert",
        help="convert a tokenizer between formats",
        description="Read SRC (format detected, or --from) and write it as --to FORMAT at OUT. "
        f"Formats: {', '.join(FORMATS)}.",
    )
    convert.add_argument("source", type=Path, metavar="SRC", help="file or folder to read")
    convert.add_argument("out", type=Path, metavar="OUT", help="file or folder to write")
    convert.add_argument("--to", required=True, choices=FORMATS, dest="target", help="format to write")
    convert.add_argument("--from", choices=FORMATS, dest="source_format", help="format of SRC (default: detected)")
    convert.add_argument("--lossy", action="store_true",
                         help="write an approximation where the target cannot hold the model exactly")
    _source_options(convert)
    convert.set_defaults(run=_reporting(run_convert), parser=convert)

    inspect = subparsers.add_parser(
        "inspect",
        help="show a tokenizer's format, vocabulary, special tokens, pattern and a sample encoding",
        description="Read PATH (format detected, or --from) and describe it.",
    )
    inspect.add_argument("path", type=Path, metavar="PATH", help="file or folder to read")
    inspect.add_argument("--from", choices=FORMATS, dest="source_format", help="format of PATH (default: detected)")
    inspect.add_argument("--text", default=SAMPLE, help="text for the sample encoding")
    inspect.add_argument("--json", action="store_true", help="print the description as JSON")
    _source_options(inspect)
    inspect.set_defaults(run=_reporting(run_inspect), parser=inspect)


def _source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pattern", metavar="P",
                        help="split pattern for a .tiktoken source: gpt2, cl100k, o200k or a regex")
    parser.add_argument("--special", action="append", default=[], metavar="TOKEN=ID",
                        help="special token of a .tiktoken source (repeat for more)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``convert`` or ``inspect`` alone (``python -m hf_bpe.cli_convert``); ``hf-bpe`` runs them
    through ``hf_bpe.cli``."""
    parser = argparse.ArgumentParser(prog="hf-bpe", description="Convert and inspect tokenizer files.")
    register(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return run(parser.parse_args(argv))


def run(arguments: argparse.Namespace) -> int:
    """Run a parsed ``convert`` or ``inspect`` command line: bad usage exits through argparse
    (status 2); a refused or failed conversion prints the error (status 1)."""
    try:
        return int(arguments.run(arguments))
    except (ValueError, TypeError, OSError, ImportError) as error:
        print(f"hf-bpe {arguments.command}: error: {error}", file=sys.stderr)
        return 1


def _reporting(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``command`` with bad usage reported by argparse (exit status 2) and refused conversions by a
    message that names ``--lossy`` (exit status 1); other errors go to the caller."""

    def run(arguments: argparse.Namespace) -> int:
        try:
            return command(arguments)
        except ConvertUsageError as error:
            arguments.parser.error(str(error))
        except ConversionError as error:
            print(f"hf-bpe {arguments.command}: error: {error} (on the command line: --lossy)", file=sys.stderr)
            return 1
        return 2  # unreachable: parser.error exits

    return run


# ------------------------------------------------------------------------------------------ detecting


def detect_format(path: Path) -> str:
    """The format of ``path`` from its name, layout and first bytes."""
    if not path.exists():
        raise ConvertUsageError(f"{path} does not exist")
    if path.is_dir():
        if (path / MODEL_FILE).is_file():
            return "folder"
        if ((path / "vocab.json").is_file() and (path / "merges.txt").is_file()) or (
            (path / "encoder.json").is_file() and (path / "vocab.bpe").is_file()
        ):
            return "gpt2"
        if (path / "tokenizer.json").is_file():
            return "hf"
        raise ConvertUsageError(
            f"cannot tell the format of the folder {path}: it has no {MODEL_FILE}, vocab.json + merges.txt, "
            "encoder.json + vocab.bpe or tokenizer.json; pass --from"
        )
    name = path.name
    if name.endswith((".tiktoken", ".tiktoken.gz")):
        return "tiktoken"
    if name.endswith(".model") or ".model." in name:
        return "sentencepiece"
    with path.open("rb") as file:
        head = file.read(4096)
    if head.lstrip()[:1] == b"{":
        if b'"format"' in head and b'"hf_bpe"' in head:
            return "hf_bpe"
        if b'"config"' in head and b'"vocab"' in head and b'"pattern"' in head:
            return "tekken"
        if b'"model"' in head or b'"added_tokens"' in head or b'"version"' in head:
            return "hf"
        if name in ("vocab.json", "encoder.json"):
            return "gpt2"
    if head[:2] == b"\x1f\x8b" or _looks_like_rank_lines(head):
        return "tiktoken"
    if head[:1] == b"\x0a":  # protobuf field 1 (pieces), length-delimited
        return "sentencepiece"
    raise ConvertUsageError(f"cannot tell the format of {path}; pass --from")


def _looks_like_rank_lines(head: bytes) -> bool:
    lines = [line for line in head.split(b"\n")[:-1] if line.strip()][:8]
    return bool(lines) and all(len(line.split()) == 2 and line.split()[1].isdigit() for line in lines)


# ------------------------------------------------------------------------------------------- reading


def read_model(path: Path, source_format: str | None = None, *, pattern: str | None = None,
               specials: Sequence[str] = ()) -> tuple[BPE, str]:
    """Load ``path`` as an :class:`hf_bpe.BPE` and say which format it was."""
    fmt = source_format or detect_format(path)
    if fmt == "tiktoken":
        import conversion.tiktoken

        named = _named_encoding(path)
        special_tokens = _parse_specials(specials)
        if pattern is None and named is None:
            raise ConvertUsageError(
                f"{path} is a .tiktoken file, which holds no split pattern; pass --pattern (gpt2, cl100k, o200k "
                "or a regex) and any --special TOKEN=ID"
            )
        if named is not None:
            pattern = pattern or named[0]
            special_tokens = special_tokens or named[1]
        return conversion.tiktoken.load(path, pattern=str(pattern), special_tokens=special_tokens), fmt
    if fmt == "tekken":
        import conversion.tiktoken

        return conversion.tiktoken.load_tekken(path), fmt
    if fmt == "gpt2":
        import conversion.gpt2

        folder = path if path.is_dir() else path.parent
        for encoder, merges in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
            if (folder / encoder).is_file() and (folder / merges).is_file():
                return conversion.gpt2.load(folder / encoder, folder / merges, pattern=pattern or "gpt2",
                                            special_tokens=_parse_specials(specials) or None,
                                            name=folder.name or None), fmt
        raise ConvertUsageError(f"{folder} holds neither vocab.json + merges.txt nor encoder.json + vocab.bpe")
    if fmt == "sentencepiece":
        import conversion.sentencepiece

        return conversion.sentencepiece.load(path), fmt
    if fmt == "hf":
        import conversion.hf

        return conversion.hf.load(path / "tokenizer.json" if path.is_dir() else path), fmt
    if fmt == "hf_bpe":
        return BPE.load(path), fmt
    if fmt == "folder":
        return BPE.load(path / MODEL_FILE if path.is_dir() else path), fmt
    raise ConvertUsageError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")


def _named_encoding(path: Path) -> tuple[str, dict[str, int]] | None:
    """(pattern, special tokens) when ``path`` is one of OpenAI's rank files (by SHA-256)."""
    from hf_bpe import encodings

    try:
        data = read_file(path, limit=encodings.KNOWN_FILE_LIMIT)
    except TokenizerFileError:
        return None
    digest = hashlib.sha256(data).hexdigest()
    for name, remote in (("r50k_base", encodings.R50K), ("cl100k_base", encodings.CL100K),
                         ("o200k_base", encodings.O200K)):
        if digest == remote.sha256:
            known = encodings.get_encoding(name)
            return str(known.pattern), known.special_tokens
    return None


def _parse_specials(specials: Sequence[str]) -> dict[str, int]:
    parsed: dict[str, int] = {}
    for item in specials:
        token, separator, token_id = item.rpartition("=")
        if not separator or not token or not token_id.strip().isdigit():
            raise ConvertUsageError(f"--special {item!r}: expected TOKEN=ID, e.g. --special '<|endoftext|>=50256'")
        parsed[token] = int(token_id)
    return parsed


# ------------------------------------------------------------------------------------------- writing


def write_model(model: BPE, target: str, out: Path, *, lossy: bool = False) -> Path:
    """Write ``model`` as ``target`` at ``out``; returns what was written."""
    if target == "tiktoken":
        import conversion.tiktoken

        return conversion.tiktoken.save(model, out, lossy=lossy)
    if target == "tekken":
        import conversion.tiktoken

        return conversion.tiktoken.save_tekken(model, out, lossy=lossy)
    if target == "gpt2":
        import conversion.gpt2

        return conversion.gpt2.save(model, out, lossy=lossy)
    if target == "sentencepiece":
        import conversion.sentencepiece

        return conversion.sentencepiece.save(model, out, lossy=lossy)
    if target == "hf":
        import conversion.hf

        path = out / "tokenizer.json" if out.is_dir() else out
        saved: Path = conversion.hf.save(model, path, lossy=lossy)
        return saved
    if target == "hf_bpe":
        return model.save(out)
    if target == "folder":
        from hf_bpe import hf

        hf.save_tokenizer_folder(model, out)
        return out
    raise ConvertUsageError(f"unknown format {target!r}; formats: {', '.join(FORMATS)}")


# ------------------------------------------------------------------------------------------ commands


def run_convert(arguments: argparse.Namespace) -> int:
    model, source_format = read_model(arguments.source, arguments.source_format, pattern=arguments.pattern,
                                      specials=arguments.special)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LossyConversionWarning)
        written = write_model(model, arguments.target, arguments.out, lossy=arguments.lossy)
    print(f"{arguments.source} ({source_format}) -> {written} ({arguments.target}): {describe_briefly(model)}")
    for warning in caught:
        if issubclass(warning.category, LossyConversionWarning):
            print(f"hf-bpe convert: warning: {warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    if arguments.target == "tiktoken":
        print(f"  the file holds no pattern or special tokens: pattern {_pattern_name(model)!r}, "
              f"special tokens {model.special_tokens}")
    return 0


def run_inspect(arguments: argparse.Namespace) -> int:
    model, source_format = read_model(arguments.path, arguments.source_format, pattern=arguments.pattern,
                                      specials=arguments.special)
    description = describe(model, source_format, arguments.text)
    if arguments.json:
        print(json.dumps(description, ensure_ascii=False, indent=2))
        return 0
    width = max(len(key) for key in description)
    for key, value in description.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        print(f"{key.replace('_', ' '):<{width}}  {shown}")
    return 0


def describe_briefly(model: BPE) -> str:
    return f"{model.kind} model, {model.n_vocab} ids, {len(model.special_tokens)} special tokens"


def _pattern_name(model: BPE) -> str | None:
    pattern = model.pattern
    if pattern is None:
        return None
    return patterns.name_of(pattern) or (pattern if isinstance(pattern, str) else patterns.describe(pattern))


def describe(model: BPE, source_format: str, text: str) -> dict[str, Any]:
    """What ``inspect`` shows, as a dict."""
    specials = sorted(model.special_tokens.items(), key=lambda item: item[1])
    ids = model.encode(text, allowed_special="all")
    pieces = [model.decode_single_token_bytes(token).decode("utf-8", errors="backslashreplace") for token in ids]
    description: dict[str, Any] = {
        "format": source_format,
        "name": model.name,
        "kind": model.kind,
        "vocab_size": model.n_vocab,
        "ordinary_tokens": model.n_vocab - len(specials) - _holes(model),
        "special_tokens": len(specials),
        "special_token_list": dict(specials[:20]) | ({"...": len(specials) - 20} if len(specials) > 20 else {}),
        "pattern": _pattern_name(model),
    }
    if model.kind == "merges":
        description["ignore_merges"] = model.ignore_merges
    spec = model.sentencepiece
    if spec is not None:
        description["normalizer"] = spec.normalizer_name
        description["byte_fallback"] = spec.byte_fallback
        description["add_dummy_prefix"] = spec.add_dummy_prefix
    description["sample_text"] = text
    description["sample_ids"] = ids
    description["sample_tokens"] = pieces
    return description


def _holes(model: BPE) -> int:
    if model.sentencepiece is not None:
        return 0
    return model.n_vocab - len(model.mergeable_ranks) - len(model.special_tokens)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
