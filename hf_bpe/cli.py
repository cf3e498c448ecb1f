"""The ``hf-bpe`` command line.

``hf-bpe train`` learns a tokenizer from text files, a ``datasets`` dataset, or (with no input) an
embedded default corpus: Python's own documentation (``pydoc_data.topics``, shipped with CPython);
``hf-bpe convert`` and ``hf-bpe inspect`` come from :mod:`hf_bpe.cli_convert`::

    hf-bpe train --vocab-size 4096 --out my-tokenizer
    hf-bpe train data/*.txt --vocab-size 32768 --special-token '<|endoftext|>' --out my-tokenizer
    hf-bpe train --dataset wikitext --dataset-config wikitext-2-raw-v1 --split train \\
        --vocab-size 8192 --out my-tokenizer

``--out DIR`` receives a transformers tokenizer folder (``AutoTokenizer.from_pretrained(DIR)``): our
model file ``DIR/hf_bpe.json`` (``hf_bpe.BPE.load`` reads it), an equivalent ``tokenizer.json``,
``tokenizer_config.json`` and a model card ``README.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hf_bpe.model import MODEL_FILE

DATA_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet", ".txt": "text"}


class UsageError(Exception):
    """A command line that cannot work as given (exit status 2)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 failed, 2 bad usage)."""
    parser = _parser()
    arguments = parser.parse_args(argv)
    if arguments.command != "train":
        from hf_bpe import cli_convert

        return cli_convert.run(arguments)
    try:
        return int(arguments.run(arguments))
    except UsageError as error:
        arguments.parser.error(str(error))
    except KeyboardInterrupt:
        print("hf-bpe: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError) as error:
        print(f"hf-bpe {arguments.command}: error: {error}", file=sys.stderr)
        return 1
    return 0  # unreachable: parser.error exits


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hf-bpe", description="Exact, fast byte-level BPE tokenizers.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser(
        "train",
        help="learn a tokenizer from text files, a dataset, or the default corpus",
        description="Learn a byte-level BPE tokenizer. With neither FILES nor --dataset, trains on an "
        "embedded default corpus: Python's own documentation (pydoc_data.topics).",
    )
    source = train.add_argument_group("input (at most one of FILES and --dataset)")
    source.add_argument(
        "files", nargs="*", type=Path, metavar="FILES", help="UTF-8 text files, each a document"
    )
    source.add_argument(
        "--dataset",
        metavar="NAME_OR_PATH",
        help="a datasets name, a folder saved with "
        "save_to_disk, or a .json/.jsonl/.csv/.parquet/.txt data file",
    )
    source.add_argument("--dataset-config", metavar="NAME", help="the dataset's configuration name")
    source.add_argument("--split", default="train", help="the dataset split (default: train)")
    source.add_argument(
        "--text-column", default="text", metavar="C", help="the column with the text (default: text)"
    )
    train.add_argument(
        "--vocab-size",
        type=int,
        required=True,
        metavar="N",
        help="tokens in all: 256 bytes + merges + special tokens",
    )
    train.add_argument(
        "--pattern",
        default="gpt2",
        metavar="P",
        help="split pattern: gpt2, cl100k, o200k or a regex (default: gpt2)",
    )
    train.add_argument(
        "--special-token",
        action="append",
        default=[],
        metavar="T",
        dest="special_tokens",
        help="a special token (repeat for more); ids follow the merges",
    )
    train.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="folder to write the tokenizer to"
    )
    train.add_argument("--name", help="the model's name (default: the folder's name)")
    train.add_argument("--num-threads", type=int, metavar="N", help="threads (default: every core)")
    train.add_argument("--quiet", action="store_true", help="no progress bars")
    train.set_defaults(run=_train, parser=train)

    from hf_bpe import cli_convert, cli_distributed

    cli_distributed.add_train_options(train)
    cli_convert.register(commands)
    cli_distributed.register(commands)
    return parser


def _train(arguments: argparse.Namespace) -> int:
    import hf_bpe
    from hf_bpe import cli_distributed

    cli_distributed.reclaim_files(arguments, "files")

    if arguments.files and arguments.dataset:
        raise UsageError("give FILES or --dataset, not both")
    if arguments.out.exists() and not arguments.out.is_dir():
        raise UsageError(f"--out {arguments.out} is a file; give a folder")
    corpus: Any = None
    files: list[Path] | None = None
    if arguments.files:
        files = list(arguments.files)
        described = f"{len(files)} file{'s' if len(files) != 1 else ''}"
    elif arguments.dataset:
        corpus = _load_dataset(arguments.dataset, arguments.dataset_config, arguments.split)
        described = f"dataset {arguments.dataset} ({arguments.split})"
    else:
        corpus = _default_corpus()
        described = "the default corpus (Python's documentation, pydoc_data.topics)"

    started = time.perf_counter()
    train = hf_bpe.train if arguments.ray is None else cli_distributed.train_on_ray(arguments)
    model = train(
        corpus,
        arguments.vocab_size,
        files=files,
        pattern=arguments.pattern,
        special_tokens=arguments.special_tokens,
        show_progress=not arguments.quiet,
        num_threads=arguments.num_threads,
        text_column=arguments.text_column,
        name=arguments.name or arguments.out.resolve().name,
    )
    elapsed = time.perf_counter() - started
    from hf_bpe.hf import save_tokenizer_folder

    eos = "<|endoftext|>" if "<|endoftext|>" in model.special_tokens else None
    training = {"corpus": described, "vocab_size": arguments.vocab_size}
    save_tokenizer_folder(model, arguments.out, eos_token=eos, card={"training": training})
    path = arguments.out / MODEL_FILE

    specials = len(model.special_tokens_set)
    merges = len(model.mergeable_ranks) - 256
    pattern = hf_bpe.patterns.name_of(model.pattern) or "custom regex"
    print(f"Wrote {arguments.out} (AutoTokenizer.from_pretrained loads it; model file {path.name})")
    print(
        f"  {model.n_vocab} tokens: 256 bytes + {merges} merges + {specials} special token{'s' if specials != 1 else ''}; "
        f"pattern {pattern}; trained on {described} in {elapsed:.1f} s"
    )
    return 0


def _default_corpus() -> list[str]:
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions ship CPython without it
        raise UsageError(
            "no input given and the default corpus (pydoc_data.topics) is not in this Python; "
            "pass FILES or --dataset"
        ) from None
    return [topics[name] for name in sorted(topics)]


def _load_dataset(name_or_path: str, config: str | None, split: str) -> Any:
    import datasets  # type: ignore[import-untyped]

    path = Path(name_or_path)
    if path.is_dir() and any((path / marker).exists() for marker in ("state.json", "dataset_dict.json")):
        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise UsageError(f"--split {split}: {path} has splits {sorted(loaded)}")
            return loaded[split]
        return loaded
    if path.is_file():
        builder = DATA_FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise UsageError(
                f"--dataset {path}: cannot read {path.suffix or 'extension-less'} files; "
                f"use one of {sorted(DATA_FILE_BUILDERS)}"
            )
        return datasets.load_dataset(builder, data_files=str(path), split=split)
    return datasets.load_dataset(name_or_path, config, split=split)


if __name__ == "__main__":
    sys.exit(main())
