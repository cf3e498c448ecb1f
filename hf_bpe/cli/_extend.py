"""``hf-bpe extend``: add tokens learned on new text to an existing tokenizer, every existing id kept::

    hf-bpe extend cl100k_base greek/*.txt --add 1000 --out cl100k-greek
    hf-bpe extend llama3-folder/ medical.txt --add 4096 --out llama3-medical
    hf-bpe extend my.tiktoken --pattern cl100k --special '<|endoftext|>=100257' corpus.txt --add 500 --out out
    hf-bpe extend gpt2 code.txt --add 256 --out gpt2-code --move-special-tokens

TOKENIZER is a named encoding or any file or folder ``hf_bpe.load`` reads (format detected, or ``--from``).
The new tokens are learned by :func:`hf_bpe.extend.extend` (the model's own pattern and merges, then the
merge loop continued) and take the ids after the last one; ``--move-special-tokens`` puts them right after
the ordinary tokens instead and moves the special tokens after them, printing each special token's old and
new id. ``--out DIR`` receives a transformers tokenizer folder, as ``hf-bpe train`` writes. The command
prints the bytes per token of each file before and after (the audit's compression measure).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from hf_bpe.audit import _corpus as corpus_module
from hf_bpe.cli._common import (
    UsageError,
    duration,
    force_option,
    format_option,
    input_file,
    missing_folder,
    plural,
    read_source_argument,
    refuse_to_overwrite,
    report_created,
    source_options,
    text_blocks,
)
from hf_bpe.extend import extend
from hf_bpe.model import MODEL_FILE


def register(subparsers: Any) -> None:
    """Add ``extend`` to an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "extend",
        help="add tokens learned on new text to a tokenizer, keeping every existing id",
        description="Extend TOKENIZER by --add N tokens learned on FILES: the files are cut with the tokenizer's "
        "own pattern and encoded with its own merges, then the merge loop continues. Every existing token keeps "
        "its id and bytes; new tokens follow the last id.",
        epilog="examples:\n  hf-bpe extend cl100k_base greek/*.txt --add 1000 --out cl100k-greek\n"
        "  hf-bpe extend gpt2 code.txt --add 256 --out gpt2-code --move-special-tokens",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("tokenizer", metavar="TOKENIZER", help="a named encoding, or a tokenizer file or folder")
    parser.add_argument("files", nargs="+", type=Path, metavar="FILES", help="UTF-8 text files, each a document")
    parser.add_argument("--add", type=int, required=True, metavar="N", help="how many tokens to add")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write the tokenizer to")
    force_option(parser)
    parser.add_argument("--move-special-tokens", action="store_true",
                        help="new tokens right after the ordinary ones; special tokens move after them (ids printed)")
    parser.add_argument("--name", help="the new model's name (default: the folder's name)")
    parser.add_argument("--num-threads", type=int, metavar="N", help="threads (default: every core)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    format_option(parser, "TOKENIZER")
    source_options(parser)
    parser.set_defaults(run=run, parser=parser)


def run(arguments: argparse.Namespace) -> int:
    """Extend, write the folder, print what changed."""
    if arguments.add < 0:
        raise UsageError("--add must be 0 or more")
    if arguments.out.exists() and not arguments.out.is_dir():
        raise UsageError(f"--out {arguments.out} is a file; give a folder")
    refuse_to_overwrite(arguments.out, "--out", arguments.force)
    for path in arguments.files:
        input_file(path, "FILES")
    model, source_format = read_source_argument(arguments, arguments.tokenizer)
    name = arguments.name or arguments.out.resolve().name
    started = time.perf_counter()
    options = {"files": arguments.files, "num_new_tokens": arguments.add, "show_progress": not arguments.quiet,
               "num_threads": arguments.num_threads, "name": name}
    id_map: dict[int, int] = {}
    if arguments.move_special_tokens:
        extended, id_map = extend(model, move_special_tokens=True, **options)
    else:
        extended = extend(model, **options)
    elapsed = time.perf_counter() - started
    stats = corpus_module.measure(model, {path.name: text_blocks(path, "FILES") for path in arguments.files},
                                  {"extended": extended}, num_threads=arguments.num_threads)
    from hf_bpe.transformers import save_tokenizer_folder  # imports transformers: only once extended

    added = extended.n_vocab - model.n_vocab
    described = plural(len(arguments.files), "file")
    eos = "<|endoftext|>" if "<|endoftext|>" in extended.special_tokens else None
    card = {"provenance": f"{arguments.tokenizer} ({source_format}) extended by {added:,} tokens learned on "
                          f"{described} with hf_bpe.extend; every token of {arguments.tokenizer} keeps its id.",
            "training": {"corpus": described, "vocab_size": extended.n_vocab}}
    created = missing_folder(arguments.out)
    save_tokenizer_folder(extended, arguments.out, eos_token=eos, card=card)
    new_ids = sorted(set(extended.mergeable_ranks.values()) - set(model.mergeable_ranks.values()))
    print(f"Wrote {arguments.out} (AutoTokenizer.from_pretrained loads it; model file {MODEL_FILE})")
    span = f"ids {new_ids[0]} to {new_ids[-1]}" if new_ids else "no new ids"
    print(f"  {arguments.tokenizer}: {model.n_vocab:,} ids -> {extended.n_vocab:,}: {added:,} new tokens ({span}), "
          f"learned on {described} in {duration(elapsed)}; every old token keeps its id")
    for old, new in sorted(id_map.items()):
        text = next(text for text, token_id in model.special_tokens.items() if token_id == old)
        print(f"  special token {text!r}: id {old} -> {new}")
    print("  bytes per token (higher is better):")
    for group in stats.groups:
        print(f"    {group.name}: {group.bytes_per_token('model'):.3f} -> {group.bytes_per_token('extended'):.3f} "
              f"({group.tokens['model']:,} -> {group.tokens['extended']:,} tokens)")
    report_created(created)
    return 0
