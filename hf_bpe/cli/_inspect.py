"""``hf-bpe inspect``: a tokenizer's format, vocabulary, special tokens, pattern and a sample encoding::

    hf-bpe inspect tokenizer.model
    hf-bpe inspect cl100k_base --text "hello world" --json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hf_bpe import _rules, patterns
from hf_bpe.cli._common import format_option, naming_lossy, read_source_argument, source_options
from hf_bpe.model import BPE, n_ordinary

SAMPLE = "Hello world! It's 2024: naïve café, 日本語, 🦙 <|endoftext|>"


def register(subparsers: Any) -> None:
    """Add ``inspect`` to an ``argparse`` subparsers object."""
    inspect = subparsers.add_parser(
        "inspect",
        help="show a tokenizer's format, vocabulary, special tokens, pattern and a sample encoding",
        description="Read PATH (format detected, or --from) and describe it.",
        epilog="examples:\n  hf-bpe inspect tokenizer.model\n  hf-bpe inspect cl100k_base --text 'hello world' --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inspect.add_argument("path", type=Path, metavar="PATH", help="file, folder or named encoding to read")
    format_option(inspect, "PATH")
    inspect.add_argument("--text", default=SAMPLE, help="text for the sample encoding")
    inspect.add_argument("--json", action="store_true", help="print the description as JSON")
    source_options(inspect)
    inspect.set_defaults(run=run, parser=inspect)


@naming_lossy
def run(arguments: argparse.Namespace) -> int:
    """Describe the tokenizer, as a table or (``--json``) JSON."""
    model, source_format = read_source_argument(arguments, arguments.path)
    description = describe(model, source_format, arguments.text)
    if arguments.json:
        print(json.dumps(description, ensure_ascii=False, indent=2))
        return 0
    width = max(len(key) for key in description)
    for key, value in description.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        print(f"{key.replace('_', ' '):<{width}}  {shown}")
    return 0


def pattern_name(model: BPE) -> str | None:
    """The pattern's name (gpt2, cl100k, o200k), else the regex or a description of Split steps."""
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
        "ordinary_tokens": n_ordinary(model),
        "special_tokens": len(specials),
        "special_token_list": dict(specials[:20]) | ({"...": len(specials) - 20} if len(specials) > 20 else {}),
        "pattern": pattern_name(model),
    }
    if model.kind == "merges":
        description["ignore_merges"] = _rules.ignore_merges(model)
    spec = model.sentencepiece
    if spec is not None:
        description["normalizer"] = (spec.normalizer_name if not spec.tokenizers_normalizer else
                                     "tokenizers: " + ", ".join(step.kind for step in spec.tokenizers_normalizer))
        description["byte_fallback"] = spec.byte_fallback
        description["add_dummy_prefix"] = spec.add_dummy_prefix
    description["sample_text"] = text
    description["sample_ids"] = ids
    description["sample_tokens"] = pieces
    return description

