"""Tokenizing a ``datasets.Dataset`` end to end: the ways a user can do it, side by side in one process.

Usage (from the repository root, with hf_bpe built in release mode)::

    python benchmarks/datasets_tokenize.py                    # ../shared/data/corpora, 8 MB, cl100k_base
    python benchmarks/datasets_tokenize.py --limit-mb 2 --repeat 2 --encoding o200k_base

The input is ``--limit-mb`` of the corpus files (an equal share of each, so every language is in it),
cut into documents of 1-10 KB, as a ``datasets.Dataset`` with a ``text`` column held in memory. Each
path makes a dataset with an ``input_ids`` column, in batches of ``--batch-size`` rows, on
``--threads`` threads where the path has threads:

- ``raw encode_ordinary_batch``: ``BPE.encode_ordinary_batch(texts)`` on the list of texts, no
  dataset: the engine alone, the ceiling;
- ``map + BPETokenizer``: ``ds.map(lambda b: {"input_ids": tokenizer(b["text"])["input_ids"]},
  batched=True)``;
- ``map + encode_ordinary_batch``: the same with ``BPE.encode_ordinary_batch`` inside ``map``;
- ``map + TokenizersBackend``: the first with transformers' ``TokenizersBackend`` loaded from the
  ``tokenizer.json`` that ``BPETokenizer.save_pretrained`` wrote;
- ``tokenize(ds, BPETokenizer)``: ``hf_bpe.datasets.tokenize`` (Arrow in, Arrow out), ids only
  (``attention_mask=False``), like the map paths; and with its default attention masks;
- ``tokenize(ds, BPE)``: the same with the bare model (``encode_ordinary``).

Before timing, every path's ids are compared with ``encode_ordinary_batch``'s. Throughput is MB of
UTF-8 input per second, the best of ``--repeat`` rounds; the paths take turns within each round. Before
each timed run of an hf_bpe path its piece caches are emptied and warmed on held-back documents (every
sixth document of the corpus slice, never timed), as ``encode.py`` does. datasets' caching is off.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from _common import (  # first: sets RAYON_NUM_THREADS
    MB,
    SHARED_CORPORA,
    THREADS_DEFAULT,
    best_seconds_interleaved,
    load_documents,
    textgen,
)

from hf_bpe.model import clear_cache


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", nargs="*", default=[SHARED_CORPORA])
    parser.add_argument("--limit-mb", type=float, default=8.0)
    parser.add_argument("--encoding", default="cl100k_base")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=THREADS_DEFAULT)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if os.environ["RAYON_NUM_THREADS"] != str(args.threads):
        print(f"note: RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']} (set it to match --threads)")

    import datasets
    from transformers import TokenizersBackend

    import hf_bpe
    from hf_bpe.datasets import tokenize

    datasets.disable_caching()
    datasets.disable_progress_bars()
    from pathlib import Path

    description, documents = load_documents([Path(path) for path in args.corpus], args.limit_mb * 1.5, args.seed,
                                            by_size=False)
    warm_up, texts, timed_bytes = documents[::6], [], 0
    for doc in (doc for index, doc in enumerate(documents) if index % 6):
        if timed_bytes >= args.limit_mb * MB:
            break
        texts.append(doc)
        timed_bytes += len(doc.encode("utf-8"))
    size = textgen.utf8_size(texts) / MB
    model = hf_bpe.get_encoding(args.encoding)
    ours = hf_bpe.BPETokenizer.from_model(model)
    with tempfile.TemporaryDirectory() as folder:
        ours.save_pretrained(folder, model_card=False)
        theirs = TokenizersBackend.from_pretrained(folder)
    dataset = datasets.Dataset.from_dict({"text": texts})
    threads, batch = args.threads, args.batch_size

    def mapped(encode: Callable[[list[str]], Any]) -> Callable[[], Any]:
        return lambda: dataset.map(lambda rows: {"input_ids": encode(rows["text"])}, batched=True,
                                   batch_size=batch)

    runs: dict[str, Callable[[], Any]] = {
        "raw encode_ordinary_batch": lambda: model.encode_ordinary_batch(texts, num_threads=threads),
        "map + BPETokenizer": mapped(lambda rows: ours(rows)["input_ids"]),
        "map + encode_ordinary_batch": mapped(lambda rows: model.encode_ordinary_batch(rows, num_threads=threads)),
        "map + TokenizersBackend": mapped(lambda rows: theirs(rows)["input_ids"]),
        "tokenize(ds, BPETokenizer)": lambda: tokenize(dataset, ours, batch_size=batch, num_threads=threads,
                                                       attention_mask=False),
        "tokenize(ds, BPETokenizer), with attention_mask": lambda: tokenize(dataset, ours, batch_size=batch,
                                                                            num_threads=threads),
        "tokenize(ds, BPE)": lambda: tokenize(dataset, model, batch_size=batch, num_threads=threads),
    }
    print(f"input: {description}; timed {size:.1f} MB in {len(texts):,} documents (every sixth held back to "
          f"warm caches); encoding {args.encoding}; batches of {batch}; {threads} threads; best of {args.repeat}")
    expected = model.encode_ordinary_batch(texts, num_threads=threads)
    for name, run in runs.items():
        result = run()
        ids = result if isinstance(result, list) else result["input_ids"]
        same = sum(a == b for a, b in zip(ids, expected)) if len(ids) == len(expected) else 0
        print(f"{name}: ids equal to encode_ordinary_batch on {same:,} of {len(texts):,} documents")
        del result, ids
    del expected
    gc.collect()

    def warm() -> None:
        clear_cache(model)
        model.encode_ordinary_batch(warm_up, num_threads=threads)

    seconds = best_seconds_interleaved(runs, args.repeat, setups={name: warm for name in runs if "Backend" not in name})
    speed = {name: size / value for name, value in seconds.items()}
    print()
    print("| path | MB/s | new path (tokenize(ds, BPETokenizer), ids only) / this |")
    print("|---|---:|---:|")
    new = speed["tokenize(ds, BPETokenizer)"]
    for name, value in speed.items():
        print(f"| {name} | {value:.1f} | {new / value:.2f}x |")


if __name__ == "__main__":
    main()
