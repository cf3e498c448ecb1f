"""``hf-bpe train``: learn a tokenizer from text files, a ``datasets`` dataset, or (with no input) an
embedded default corpus: Python's own documentation (``pydoc_data.topics``, shipped with CPython)::

    hf-bpe train --vocab-size 4096 --out my-tokenizer
    hf-bpe train data/*.txt --vocab-size 32768 --special-token '<|endoftext|>' --out my-tokenizer
    hf-bpe train --dataset wikitext --dataset-config wikitext-2-raw-v1 --split train \\
        --vocab-size 8192 --out my-tokenizer
    hf-bpe train --sentencepiece --llama2 data/*.txt --vocab-size 32000 --out my-llama-tokenizer

``--sentencepiece`` (:mod:`hf_bpe.cli._train_sentencepiece`) learns a SentencePiece BPE model instead.
``--language NAME=FILES`` (repeated, with ``--dev NAME=FILE``) trains parity-aware BPE, and
``--superword-transition T`` SuperBPE (see ``docs/training.md``)::

    hf-bpe train --language en=en.txt --language hi=hi1.txt,hi2.txt --dev en=en_dev.txt --dev hi=hi_dev.txt \\
        --vocab-size 32000 --out parity-tokenizer
    hf-bpe train data/*.txt --vocab-size 32000 --superword-transition 28000 --out superbpe-tokenizer

``--out DIR`` receives a transformers tokenizer folder (``AutoTokenizer.from_pretrained(DIR)``): our
model file ``DIR/hf_bpe.json`` (``hf_bpe.BPE.load`` reads it), an equivalent ``tokenizer.json``,
``tokenizer_config.json`` and a model card ``README.md``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from hf_bpe import patterns
from hf_bpe.cli import _train_sentencepiece
from hf_bpe.cli._common import (
    DATASET_ON_RAY,
    InputError,
    UsageError,
    duration,
    force_option,
    load_dataset,
    missing_folder,
    parse_size,
    plural,
    ray_option,
    ray_session,
    reclaim_files,
    refuse_to_overwrite,
    report_created,
)
from hf_bpe.model import MODEL_FILE
from hf_bpe.train import count_pieces, train_from_counts, watched


def register(subparsers: Any) -> None:
    """Add ``train`` to an ``argparse`` subparsers object."""
    train = subparsers.add_parser(
        "train",
        help="learn a tokenizer from text files, a dataset, or the default corpus",
        description="Learn a byte-level BPE tokenizer. With neither FILES nor --dataset, trains on an "
        "embedded default corpus: Python's own documentation (pydoc_data.topics).",
        epilog="examples:\n  hf-bpe train --vocab-size 4096 --special-token '<|endoftext|>' --out my-tokenizer\n"
        "  hf-bpe train corpus/*.txt --vocab-size 32000 --pattern o200k --out tok\n"
        "  hf-bpe train --dataset wikitext --dataset-config wikitext-2-raw-v1 --vocab-size 8192 --out wiki",
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    force_option(train)
    train.add_argument("--max-pieces", type=int, metavar="N",
                       help="memory budget: whenever the count table holds more than N distinct pieces (about 50 "
                       "bytes each), drop the rarest until half remain; exact when nothing is dropped, else a "
                       "warning says so (see docs/training.md; default: no limit)")
    train.add_argument("--name", help="the model's name (default: the folder's name)")
    train.add_argument("--num-threads", type=int, metavar="N", help="threads (default: every core)")
    train.add_argument("--quiet", action="store_true", help="no progress bars")
    _train_sentencepiece.add_arguments(train)
    _add_variant_arguments(train)
    ray_option(train, "train on Ray")
    train.add_argument("--num-workers", type=int, metavar="N", help="with --ray: tasks at once (default: every CPU)")
    train.add_argument("--prune-below", type=int, metavar="C",
                       help="with --ray: drop pieces seen fewer than C times per group of files (bounded memory, "
                       "no longer exact; see docs/scale.md)")
    train.add_argument("--task-memory-limit", type=parse_size, metavar="BYTES",
                       help="with --ray: the memory a count task may map beyond its worker's, e.g. 4G; a group of "
                       "files past it fails naming them (default: no limit)")
    train.set_defaults(run=run, parser=train)


def run(arguments: argparse.Namespace) -> int:
    """Train, write the folder, print what was written."""
    reclaim_files(arguments, "files")
    if arguments.ray is None:
        given = [option for option, value in (("--num-workers", arguments.num_workers), ("--prune-below",
                 arguments.prune_below), ("--task-memory-limit", arguments.task_memory_limit)) if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)} work with --ray only (hf-bpe train --ray ...)")
    if arguments.files and arguments.dataset:
        raise UsageError("give FILES or --dataset, not both")
    if arguments.out.exists() and not arguments.out.is_dir():
        raise UsageError(f"--out {arguments.out} is a file; give a folder")
    refuse_to_overwrite(arguments.out, "--out", arguments.force)
    corpus: Any = None
    files: list[Path] | None = None
    if arguments.files:
        files = list(arguments.files)
        if arguments.ray is None:
            for path in files:
                _check_file(path)
        count = len(files)
        if arguments.ray is not None:  # FILES may be glob patterns there: count the files they name
            from hf_bpe.distributed import _inputs

            count = len(_inputs.expand([str(path) for path in files]))
        described = plural(count, "file")
    elif arguments.dataset:
        corpus = load_dataset(arguments.dataset, arguments.dataset_config, arguments.split)
        described = f"dataset {arguments.dataset} ({arguments.split})"
    else:
        corpus = _default_corpus()
        described = "the default corpus (Python's documentation, pydoc_data.topics)"
    if arguments.max_pieces is not None and (arguments.sentencepiece or arguments.ray is not None):
        raise UsageError("--max-pieces bounds byte-level BPE training on this machine; with --ray use --prune-below")
    if arguments.sentencepiece:
        if arguments.ray is not None:
            raise UsageError("--sentencepiece trains on this machine only; --ray trains byte-level BPE (drop one)")
        return _train_sentencepiece.run(arguments, corpus, files, described)
    if arguments.llama2 or arguments.sp_options:
        raise UsageError("--llama2 and --sp-option go with --sentencepiece")

    started = time.perf_counter()
    name = arguments.name or arguments.out.resolve().name
    counts = None
    if arguments.languages or arguments.superword_transition is not None:  # the card has no usage section
        model, described = _train_variant(arguments, corpus, files, described, name)
    elif arguments.ray is not None:  # the table stays on the cluster: the card has no usage section
        model = _train_on_ray(arguments, files, name)
    else:
        # Counted and merged in two steps (as hf_bpe.train does) to keep the counts for the card's usage:
        # kept serialized (a fraction of the table's memory) while the merge loop empties the table. The
        # table's own serialization (what pickling it stores), without pickle: no module of hf_bpe imports it.
        counts = count_pieces(
            corpus,
            files=files,
            pattern=arguments.pattern,
            special_tokens=arguments.special_tokens,
            show_progress=not arguments.quiet,
            num_threads=arguments.num_threads,
            text_column=arguments.text_column,
            max_pieces=arguments.max_pieces,
        )
        rebuild, kept = counts.__reduce__()
        model = train_from_counts(counts, arguments.vocab_size, show_progress=not arguments.quiet, name=name,
                                  consume=True, num_threads=arguments.num_threads)
        counts = rebuild(*kept)
        del kept
    elapsed = time.perf_counter() - started
    from hf_bpe.audit import training_usage
    from hf_bpe.transformers import save_tokenizer_folder  # imports transformers: only once trained

    eos = "<|endoftext|>" if "<|endoftext|>" in model.special_tokens else None
    training: dict[str, Any] = {"corpus": described, "vocab_size": arguments.vocab_size}
    if counts is not None:
        training["usage"] = training_usage(model, counts)
    created = missing_folder(arguments.out)
    if not arguments.quiet and watched(sys.stderr):  # the folder takes a while: say what runs
        print(f"Writing {arguments.out}: tokenizer.json, model card with audit and charts...", file=sys.stderr,
              flush=True)
    writing = time.perf_counter()
    save_tokenizer_folder(model, arguments.out, eos_token=eos, card={"training": training})
    written = time.perf_counter() - writing
    path = arguments.out / MODEL_FILE

    merges = len(model.mergeable_ranks) - 256
    pattern = patterns.name_of(model.pattern) or "custom regex"
    print(f"Wrote {arguments.out} (AutoTokenizer.from_pretrained loads it; model file {path.name})")
    print(
        f"  {plural(model.n_vocab, 'token')}: 256 bytes + {plural(merges, 'merge')} + "
        f"{plural(len(model.special_tokens_set), 'special token')}; pattern {pattern}"
    )
    print(f"  trained on {described} in {duration(elapsed)}; wrote the folder (tokenizer.json, model card with "
          f"audit and charts) in {duration(written)}")
    report_created(created)
    return 0


def _add_variant_arguments(train: Any) -> None:
    """Parity-aware BPE's and SuperBPE's options."""
    group = train.add_argument_group("parity-aware BPE (instead of FILES; see docs/training.md)")
    group.add_argument("--language", action="append", default=[], dest="languages", metavar="NAME=FILES",
                       help="a language's training files, comma-separated (repeat per language)")
    group.add_argument("--dev", action="append", default=[], metavar="NAME=FILE",
                       help="a language's dev file(s): the language whose dev text is longest picks each merge")
    group.add_argument("--ratio", action="append", default=[], metavar="NAME=R",
                       help="a language's target compression, without --dev (one per language)")
    group.add_argument("--variant", choices=["base", "window"], default="base",
                       help="base: the worst language picks; window: not over its share of recent picks")
    group.add_argument("--global-merges", type=int, default=0, metavar="N",
                       help="merges picked on all languages together first (default: 0)")
    group.add_argument("--window-size", type=int, default=100, metavar="N", help="the window variant's window")
    group.add_argument("--alpha", type=float, default=2.0, help="the window variant's share (times languages)")
    superbpe = train.add_argument_group("SuperBPE")
    superbpe.add_argument("--superword-transition", type=int, metavar="T",
                          help="ordinary BPE up to T tokens, then tokens across whitespace up to --vocab-size")


def _named(values: list[str], option: str, *, split: bool) -> dict[str, list[str]]:
    """``NAME=VALUE[,VALUE...]`` arguments, grouped by name."""
    found: dict[str, list[str]] = {}
    for value in values:
        language, sep, rest = value.partition("=")
        if not sep or not language or not rest:
            raise UsageError(f"{option} {value!r}: write {option} NAME={'FILES' if split else 'VALUE'}, e.g. "
                             f"{option} en={'en.txt' if option != '--ratio' else '1.5'}")
        found.setdefault(language, []).extend(rest.split(",") if split else [rest])
    return found


def _train_variant(arguments: argparse.Namespace, corpus: Any, files: list[Path] | None, described: str,
                   name: str) -> tuple[Any, str]:
    """``--language`` (parity-aware BPE) or ``--superword-transition`` (SuperBPE)."""
    import hf_bpe

    if arguments.ray is not None or arguments.sentencepiece or arguments.max_pieces is not None:
        raise UsageError("--language and --superword-transition train byte-level BPE on this machine: drop --ray, "
                         "--sentencepiece and --max-pieces")
    options: dict[str, Any] = {"pattern": arguments.pattern, "special_tokens": arguments.special_tokens,
                                   "show_progress": not arguments.quiet, "num_threads": arguments.num_threads, "name": name}
    if arguments.superword_transition is not None:
        if arguments.languages:
            raise UsageError("--language (parity-aware BPE) and --superword-transition (SuperBPE) do not combine")
        model = hf_bpe.train(corpus, arguments.vocab_size, files=files, superword_transition=arguments.
                             superword_transition, text_column=arguments.text_column, **options)
        return model, described
    if files or arguments.dataset:
        raise UsageError("with --language, give each language's files there (--language NAME=FILES), not FILES "
                         "or --dataset")
    languages = {language: [Path(path) for path in paths]
                 for language, paths in _named(arguments.languages, "--language", split=True).items()}
    for paths in languages.values():
        for path in paths:
            _check_file(path)
    dev = {language: [Path(path) for path in paths]
           for language, paths in _named(arguments.dev, "--dev", split=True).items()} or None
    ratio: dict[str, float] | None = None
    if arguments.ratio:
        try:
            ratio = {language: float(value) for language, [value, *_] in
                     _named(arguments.ratio, "--ratio", split=False).items()}
        except ValueError:
            raise UsageError(f"--ratio takes NAME=NUMBER, got {arguments.ratio}") from None
    model = hf_bpe.train(vocab_size=arguments.vocab_size, languages=languages, dev=dev, ratio=ratio,
                         variant=arguments.variant, global_merges=arguments.global_merges,
                         window_size=arguments.window_size, alpha=arguments.alpha, **options)
    return model, f"{plural(len(languages), 'language')} ({', '.join(languages)})"


def _check_file(path: Path) -> None:
    """A FILES argument that is not a file: :class:`InputError` saying what to type."""
    if path.is_dir():
        quoted = shlex.quote(str(path))
        raise InputError(f"FILES {path}: is a folder; pass the text files in it, e.g. "
                         f"hf-bpe train {quoted.rstrip('/')}/*.txt ... (or, for every file under it: "
                         f"hf-bpe train $(find {quoted} -type f) ...)")
    if not path.exists():
        raise InputError(f"FILES {path}: no such file (check the path: ls {shlex.quote(str(path))})")


def _train_on_ray(arguments: argparse.Namespace, files: list[Path] | None, name: str) -> Any:
    """``hf-bpe train --ray``: :func:`hf_bpe.distributed.train` on FILES (text files or glob patterns)."""
    from hf_bpe import distributed

    if not files:
        raise UsageError(DATASET_ON_RAY)
    with ray_session(arguments.ray) as address:
        return distributed.train([str(path) for path in files], arguments.vocab_size, pattern=arguments.pattern,
                                 special_tokens=arguments.special_tokens, text_column=arguments.text_column,
                                 num_workers=arguments.num_workers, ray_address=address,
                                 prune_below=arguments.prune_below, name=name,
                                 task_memory_limit=arguments.task_memory_limit)


def _default_corpus() -> list[str]:
    try:
        from pydoc_data.topics import topics
    except ImportError:  # some distributions ship CPython without it
        raise UsageError(
            "no input given and the default corpus (pydoc_data.topics) is not in this Python; "
            "pass FILES or --dataset"
        ) from None
    return [topics[name] for name in sorted(topics)]
