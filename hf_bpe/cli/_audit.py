"""``hf-bpe audit``: the vocabulary audit (:func:`hf_bpe.audit.audit`) on the command line::

    hf-bpe audit cl100k_base
    hf-bpe audit my-tokenizer/ --corpus data/*.txt --compare gpt2 o200k_base --out audit/
    hf-bpe audit tokenizer.model --dataset wikitext --dataset-config wikitext-2-raw-v1 --split test --json

TOKENIZER is a named encoding (``gpt2``, ``r50k_base``, ``cl100k_base``, ``o200k_base``) or any file or
folder :func:`hf_bpe.load` reads (format detected, or ``--from``); so is each ``--compare`` (format
detected). Without
``--out`` the report goes to standard output as Markdown (``--json``: JSON); with ``--out DIR`` the
folder gets ``audit.md``, ``audit.json`` and the charts (PNG, when matplotlib is installed).
Each corpus file is a group of the compression table, read in blocks of lines. With a corpus the report also
lists the merge residue (``--residue-below``; :mod:`hf_bpe.audit._residue`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hf_bpe._io import atomic_write
from hf_bpe.audit import audit
from hf_bpe.audit._residue import RESIDUE_BELOW
from hf_bpe.cli._common import (
    UsageError,
    force_option,
    format_option,
    input_file,
    load_dataset,
    read_source,
    read_source_argument,
    refuse_to_overwrite,
    source_options,
    text_blocks,
)
from hf_bpe.model import BPE


def register(subparsers: Any) -> None:
    """Add ``audit`` to an ``argparse`` subparsers object (sets ``run`` and ``parser``)."""
    parser = subparsers.add_parser(
        "audit",
        help="find unreachable, partial, unused and duplicate tokens in a vocabulary",
        description="Audit a tokenizer's vocabulary: unreachable and partial UTF-8 tokens, near duplicates, "
        "special tokens, token lengths; with a corpus also unused and rare tokens, magikarp scores and "
        "compression against --compare tokenizers.",
        epilog="examples:\n  hf-bpe audit cl100k_base\n"
        "  hf-bpe audit my-tokenizer/ --corpus data/*.txt --compare gpt2 o200k_base --out audit/\n"
        "  hf-bpe audit tokenizer.model --dataset wikitext --dataset-config wikitext-2-raw-v1 --split test --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("tokenizer", metavar="TOKENIZER", help="a named encoding, or a tokenizer file or folder")
    format_option(parser, "TOKENIZER")
    source = parser.add_argument_group("corpus (at most one of --corpus and --dataset)")
    source.add_argument("--corpus", nargs="+", type=Path, metavar="FILE", help="UTF-8 text files, each a group")
    source.add_argument("--dataset", metavar="NAME_OR_PATH",
                        help="a datasets name, a folder saved with save_to_disk, or a data file")
    source.add_argument("--dataset-config", metavar="NAME", help="the dataset's configuration name")
    source.add_argument("--split", default="train", help="the dataset split (default: train)")
    source.add_argument("--text-column", default="text", metavar="C", help="the column with the text (default: text)")
    parser.add_argument("--compare", nargs="+", default=[], metavar="TOKENIZER",
                        help="tokenizers to compare compression with (names, files or folders)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of Markdown")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write audit.md, audit.json and the charts here")
    force_option(parser)
    parser.add_argument("--rare", type=int, default=10, metavar="N",
                        help="tokens produced fewer than N times are rare (default: 10)")
    parser.add_argument("--residue-below", type=float, default=RESIDUE_BELOW, metavar="SHARE",
                        help="with a corpus: merge steps that make up less than SHARE of its tokens, while the tokens "
                        f"made from them are emitted more often, are merge residue (default: {RESIDUE_BELOW:g})")
    parser.add_argument("--top", type=int, default=50, metavar="N", help="length of the ranked lists (default: 50)")
    parser.add_argument("--num-threads", type=int, metavar="N", help="threads (default: every core)")
    source_options(parser)
    parser.set_defaults(run=run, parser=parser)


def run(arguments: argparse.Namespace) -> int:
    """Audit, then print the report or write it (``--out``); returns the exit status."""
    if arguments.corpus and arguments.dataset:
        raise UsageError("give --corpus or --dataset, not both")
    if arguments.rare < 1 or arguments.top < 1:
        raise UsageError("--rare and --top must be at least 1")
    if not 0 < arguments.residue_below <= 1:
        raise UsageError("--residue-below must be a share in (0, 1], e.g. 1e-5")
    if arguments.out is not None and arguments.out.exists() and not arguments.out.is_dir():
        raise UsageError(f"--out {arguments.out} is a file; give a folder")
    if arguments.out is not None:
        refuse_to_overwrite(arguments.out, "--out", arguments.force)
    model = _load(arguments.tokenizer, arguments)
    if len(set(arguments.compare)) < len(arguments.compare):
        raise UsageError("--compare names a tokenizer twice")
    compare = {}
    for other in arguments.compare:
        label = Path(other).name if Path(other).exists() else other  # a file's name, not its whole path
        compare[label if label not in compare else other] = _load(other, arguments, compared=True)
    corpus: Any = None
    corpus_name = None
    if arguments.corpus:
        for path in arguments.corpus:
            input_file(path, "--corpus")
        corpus = {path.stem: text_blocks(path, "--corpus") for path in arguments.corpus}
        corpus_name = ", ".join(path.name for path in arguments.corpus)
    elif arguments.dataset:
        dataset = load_dataset(arguments.dataset, arguments.dataset_config, arguments.split)
        corpus = (row[arguments.text_column] for row in dataset)
        corpus_name = f"dataset {arguments.dataset} ({arguments.split})"
    report = audit(model, corpus, compare, corpus_name=corpus_name, rare_below=arguments.rare,
                   residue_below=arguments.residue_below, top=arguments.top, num_threads=arguments.num_threads)
    if arguments.out is None:
        sys.stdout.write(report.to_json() + "\n" if arguments.json else report.to_markdown())
        return 0
    arguments.out.mkdir(parents=True, exist_ok=True)
    images: dict[str, str] = {}
    try:
        images = {name: path.name for name, path in report.plots(arguments.out).items()}
    except ImportError as error:
        print(f"hf-bpe audit: no charts: {error}", file=sys.stderr)
    atomic_write(arguments.out / "audit.md", report.to_markdown(images=images))
    atomic_write(arguments.out / "audit.json", report.to_json())
    written = ", ".join(["audit.md", "audit.json", *images.values()])
    print(f"Wrote {arguments.out}: {written}")
    summary = report.summary()
    print(f"  {summary['unreachable']:,} unreachable, {summary['partial_utf8']:,} partial UTF-8, "
          f"{summary['ids_spent_on_variants']:,} ids on variants" + (
              f", {summary['unused']:,} never produced on the corpus, {summary['merge_residue']:,} merge residue "
              f"({summary['merge_residue_share']:.1%})" if "unused" in summary else ""))
    return 0


def _load(source: str, arguments: argparse.Namespace, *, compared: bool = False) -> BPE:
    """TOKENIZER (with ``--from``, ``--pattern``, ``--special``) or a ``--compare`` tokenizer (format
    detected): a named encoding, or a tokenizer file or folder (``read_source`` says what a source may be)."""
    model = read_source(source, None)[0] if compared else read_source_argument(arguments, source)[0]
    if model.name is None:
        model.name = Path(source).name
    return model
