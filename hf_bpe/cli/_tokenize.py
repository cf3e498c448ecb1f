"""``hf-bpe tokenize``: a corpus to shards of token ids with a manifest (:func:`hf_bpe.distributed.tokenize_files`),
on this machine's cores or, with ``--ray``, on a Ray cluster::

    hf-bpe tokenize 'data/*.jsonl' --tokenizer my-tokenizer --eot '<|endoftext|>' --out tokens
    hf-bpe tokenize 'data/*.parquet' --tokenizer gpt2 --ray --out tokens
    hf-bpe tokenize 'data/*.txt' --tokenizer tok.tiktoken --pattern cl100k --ray 10.0.0.1:6379 --out tokens

``--ray`` alone connects to the Ray cluster this machine knows (``RAY_ADDRESS``, or one started with
``ray start``) or starts one here; ``--ray ADDRESS`` connects to that cluster. Rerunning the same
command resumes: only shards whose files are missing or do not match the manifest are redone.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from hf_bpe.cli._common import (
    duration,
    format_option,
    parse_size,
    plural,
    ray_option,
    ray_session,
    read_source_argument,
    reclaim_files,
    source_options,
)


def register(subparsers: Any) -> None:
    """Add ``tokenize`` to an ``argparse`` subparsers object."""
    from hf_bpe.distributed import _tokenizing

    tokenize = subparsers.add_parser(
        "tokenize",
        help="tokenize a corpus into shards of ids (.bin/.idx and Parquet), on local cores or Ray",
        description="Tokenize text files (.txt: one document each), JSON Lines (.jsonl) and Parquet files into "
        "shards of ids under --out, with a manifest.json; rerun the same command to resume after a failure.",
        epilog="examples:\n  hf-bpe tokenize 'data/*.jsonl' --tokenizer my-tokenizer/ --eot '<|endoftext|>' --out tokens\n"
        "  hf-bpe tokenize 'data/*.txt' --tokenizer gpt2 --out tokens --ray",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tokenize.add_argument("inputs", nargs="+", metavar="FILES_OR_GLOBS",
                          help="input files or quoted glob patterns ('data/*.jsonl'), read in this order")
    tokenize.add_argument("--tokenizer", required=True, metavar="T",
                          help="a named encoding (gpt2) or anything hf-bpe convert reads: a tokenizer folder, "
                          "tokenizer.json, a .tiktoken file, a SentencePiece .model, ...")
    format_option(tokenize, "--tokenizer")
    source_options(tokenize)
    tokenize.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the shards")
    tokenize.add_argument("--eot", metavar="TOKEN_OR_ID",
                          help="a special token (or id) appended after every document, e.g. '<|endoftext|>'")
    tokenize.add_argument("--shard-size", type=parse_size, default=_tokenizing.SHARD_BYTES, metavar="BYTES",
                          help="input bytes per shard, e.g. 256M (default: 128M)")
    tokenize.add_argument("--format", action="append", dest="formats", choices=_tokenizing.FORMATS,
                          help="output formats (repeat; default: bin and parquet)")
    tokenize.add_argument("--text-column", default="text", metavar="C",
                          help="the JSON key or Parquet column with the text (default: text)")
    tokenize.add_argument("--num-workers", type=int, metavar="N", help="shards at once (default: every CPU)")
    tokenize.add_argument("--max-retries", type=int, default=3, metavar="N",
                          help="on Ray, how often a shard whose worker died is retried (default: 3)")
    tokenize.add_argument("--task-memory-limit", type=parse_size, metavar="BYTES",
                          help="with --ray: the memory a shard task may map beyond its worker's, e.g. 4G; a shard "
                          "past it fails naming it and writes nothing (default: no limit)")
    ray_option(tokenize, "tokenize on Ray")
    tokenize.set_defaults(run=run, parser=tokenize)


def run(arguments: argparse.Namespace) -> int:
    """Tokenize, print the manifest's totals (exit status 1 with the shard's error when one fails)."""
    from hf_bpe import distributed
    from hf_bpe.distributed import _tokenizing

    eot: int | str | None = arguments.eot
    if isinstance(eot, str) and eot.isdigit():
        eot = int(eot)
    reclaim_files(arguments, "inputs")
    model, _ = read_source_argument(arguments, arguments.tokenizer)
    started = time.perf_counter()
    try:
        with ray_session(arguments.ray) as address:
            manifest = distributed.tokenize_files(
                arguments.inputs,
                model,
                arguments.out,
                eot=eot,
                shard_size=arguments.shard_size,
                formats=tuple(arguments.formats or _tokenizing.FORMATS),
                text_column=arguments.text_column,
                num_workers=arguments.num_workers,
                ray_address=address,
                max_retries=arguments.max_retries,
                task_memory_limit=arguments.task_memory_limit,
            )
    except distributed.ShardError as error:
        print(f"hf-bpe tokenize: error: {error}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    shards = len(manifest["shards"])
    print(f"Wrote {arguments.out}: {plural(shards, 'shard')}, {plural(manifest['num_documents'], 'document')}, "
          f"{plural(manifest['num_tokens'], 'token')} ({manifest['dtype']}) in {duration(elapsed)}; "
          f"{arguments.out / 'manifest.json'} lists them")
    return 0
