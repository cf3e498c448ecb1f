"""The command line of :mod:`hf_bpe.distributed`: ``hf-bpe tokenize`` and ``hf-bpe train --ray``::

    hf-bpe train --ray data/*.txt --vocab-size 32768 --special-token '<|endoftext|>' --out my-tokenizer
    hf-bpe train --ray 10.0.0.1:6379 'data/**/*.txt' --vocab-size 32768 --out my-tokenizer
    hf-bpe tokenize 'data/*.jsonl' --tokenizer my-tokenizer --eot '<|endoftext|>' --out tokens
    hf-bpe tokenize 'data/*.parquet' --tokenizer gpt2 --ray --out tokens

``--ray`` alone connects to the Ray cluster this machine knows (``RAY_ADDRESS``, or one started with
``ray start``) or starts one here; ``--ray ADDRESS`` connects to that cluster. ``tokenize`` without
``--ray`` runs on this machine's cores.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
DATASET_ON_RAY = ("--ray trains on FILES (text files or quoted glob patterns); for a dataset, call "
                  "hf_bpe.distributed.train(ray.data.read_parquet(...), ...) from Python")


def register(subparsers: Any) -> None:
    """Add ``tokenize`` to an ``argparse`` subparsers object (``run=``, ``parser=`` set)."""
    from hf_bpe.distributed import tokenizing

    tokenize = subparsers.add_parser(
        "tokenize",
        help="tokenize a corpus into shards of ids (.bin/.idx and Parquet), on local cores or Ray",
        description="Tokenize text files (.txt: one document each), JSON Lines (.jsonl) and Parquet files into "
        "shards of ids under --out, with a manifest.json; rerun the same command to resume after a failure.",
    )
    tokenize.add_argument("inputs", nargs="+", metavar="FILES_OR_GLOBS",
                          help="input files or quoted glob patterns ('data/*.jsonl'), read in this order")
    tokenize.add_argument("--tokenizer", required=True, metavar="T",
                          help="a tokenizer folder, an hf_bpe.json or tokenizer.json file, or a named encoding (gpt2)")
    tokenize.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the shards")
    tokenize.add_argument("--eot", metavar="TOKEN_OR_ID",
                          help="a special token (or id) appended after every document, e.g. '<|endoftext|>'")
    tokenize.add_argument("--shard-size", type=_size, default=tokenizing.SHARD_BYTES, metavar="BYTES",
                          help="input bytes per shard, e.g. 256M (default: 128M)")
    tokenize.add_argument("--format", action="append", dest="formats", choices=tokenizing.FORMATS,
                          help="output formats (repeat; default: bin and parquet)")
    tokenize.add_argument("--text-column", default="text", metavar="C",
                          help="the JSON key or Parquet column with the text (default: text)")
    tokenize.add_argument("--num-workers", type=int, metavar="N", help="shards at once (default: every CPU)")
    tokenize.add_argument("--max-retries", type=int, default=3, metavar="N",
                          help="on Ray, how often a shard whose worker died is retried (default: 3)")
    _add_ray(tokenize)
    tokenize.set_defaults(run=_tokenize, parser=tokenize)


def add_train_options(train: argparse.ArgumentParser) -> None:
    """Add ``--ray [ADDRESS]``, ``--num-workers`` and ``--prune-below`` to ``hf-bpe train``."""
    _add_ray(train)
    train.add_argument("--num-workers", type=int, metavar="N", help="with --ray: tasks at once (default: every CPU)")
    train.add_argument("--prune-below", type=int, metavar="C",
                       help="with --ray: drop pieces seen fewer than C times per group of files (bounded memory, "
                       "no longer exact; see docs/scale.md)")


def train_on_ray(arguments: argparse.Namespace) -> Callable[..., Any]:
    """``hf-bpe train --ray``: a stand-in for :func:`hf_bpe.train` (same call) that runs
    :func:`hf_bpe.distributed.train` on FILES (text files or glob patterns)."""
    from hf_bpe import distributed
    from hf_bpe.cli import UsageError

    def train(corpus: Any, vocab_size: int, *, files: list[Path] | None, pattern: str,
              special_tokens: list[str], text_column: str, name: str, **_: Any) -> Any:
        if not files:
            raise UsageError(DATASET_ON_RAY)
        try:
            with _ray(arguments.ray) as address:
                return distributed.train([str(path) for path in files], vocab_size, pattern=pattern,
                                         special_tokens=special_tokens, text_column=text_column,
                                         num_workers=arguments.num_workers, ray_address=address,
                                         prune_below=arguments.prune_below, name=name)
        except ImportError as error:  # Ray is missing: say how to install it
            raise UsageError(str(error)) from None

    return train


def _tokenize(arguments: argparse.Namespace) -> int:
    from hf_bpe import distributed
    from hf_bpe.distributed import tokenizing

    eot: int | str | None = arguments.eot
    if isinstance(eot, str) and eot.isdigit():
        eot = int(eot)
    reclaim_files(arguments, "inputs")
    started = time.perf_counter()
    try:
        with _ray(arguments.ray) as address:
            manifest = distributed.tokenize(
                arguments.inputs,
                arguments.tokenizer,
                arguments.out,
                eot=eot,
                shard_size=arguments.shard_size,
                formats=tuple(arguments.formats or tokenizing.FORMATS),
                text_column=arguments.text_column,
                num_workers=arguments.num_workers,
                ray_address=address,
                max_retries=arguments.max_retries,
            )
    except distributed.ShardError as error:
        print(f"hf-bpe tokenize: error: {error}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    shards = len(manifest["shards"])
    print(f"Wrote {arguments.out}: {shards} shard{'s' if shards != 1 else ''}, {manifest['num_documents']:,} "
          f"documents, {manifest['num_tokens']:,} tokens ({manifest['dtype']}) in {elapsed:.1f} s; "
          f"{arguments.out / 'manifest.json'} lists them")
    return 0


def _add_ray(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="run on Ray: alone, the cluster this machine knows (RAY_ADDRESS, ray start) or a new "
                        "local one; or the cluster at ADDRESS (host:port, ray://host:port)")


ADDRESS = re.compile(r"(ray://)?[\w.\-\[\]:]+:\d+|auto|local")


def reclaim_files(arguments: argparse.Namespace, name: str) -> None:
    """``--ray data/*.txt``: argparse took the first file for the address; put it back in front of
    the files (``arguments.<name>``). ``--ray`` with ``--dataset`` is refused."""
    if arguments.ray is not None and getattr(arguments, "dataset", None):
        from hf_bpe.cli import UsageError

        raise UsageError(DATASET_ON_RAY)
    if arguments.ray and not ADDRESS.fullmatch(arguments.ray):
        files = getattr(arguments, name) or []
        setattr(arguments, name, [Path(arguments.ray) if name == "files" else arguments.ray, *files])
        arguments.ray = ""


@contextmanager
def _ray(option: str | None) -> Iterator[str | None]:
    """The ``ray_address`` for an API call: None without ``--ray``; with a bare ``--ray``, Ray's own
    choice (``ray.init()``), shut down afterwards; else the address given."""
    if option != "":
        yield option
        return
    from hf_bpe.distributed import _cluster

    ray = _cluster.import_ray()
    if ray.is_initialized():  # called from Python that is connected already: use that session
        yield None
        return
    ray.init(log_to_driver=False)
    try:
        yield None
    finally:
        ray.shutdown()


def _size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, flags=re.IGNORECASE)
    if match is None or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: give bytes, e.g. 134217728, 128M or 1G")
    return int(match.group(1)) * SIZE_UNITS[match.group(2).upper()]
