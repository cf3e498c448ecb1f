"""``tokenizer(batch)`` throughput: BPETokenizer vs the raw model vs transformers' TokenizersBackend.

Usage (from the repository root, with hf_bpe built in release mode)::

    python benchmarks/hf.py                          # ../shared/data/corpora, 5 MB, cl100k_base
    python benchmarks/hf.py --limit-mb 2 --repeat 3 --encoding gpt2

Three ways to get the ids of the same texts, all on ``--threads`` threads (default 2):

- ``raw``: ``BPE.encode_batch(texts, allowed_special="all")``, the Rust core with nothing around it;
- ``BPETokenizer``: ``tokenizer(texts)``, ids and attention masks as a ``BatchEncoding``;
- ``TokenizersBackend``: ``tokenizer(texts)`` of transformers' tokenizers-backed class, loaded from the
  ``tokenizer.json`` that ``BPETokenizer.save_pretrained`` wrote (what ``AutoTokenizer`` gives where
  hf_bpe is not installed).

Texts are fed in batches of ``--batch-size``, in two shapes: documents of 1-10 KB, and the lines of
the same text (short inputs, where per-text Python work shows). Throughput is MB of UTF-8 input per
second, the best of ``--repeat`` runs. All three must give the same ids; this is checked first.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import (  # first: sets RAYON_NUM_THREADS
    MB,
    SHARED_CORPORA,
    THREADS_DEFAULT,
    best_seconds,
    best_seconds_interleaved,
    load_documents,
    textgen,
)


def batches(texts: list[str], size: int) -> list[list[str]]:
    return [texts[start : start + size] for start in range(0, len(texts), size)]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, nargs="*", default=[SHARED_CORPORA])
    parser.add_argument("--limit-mb", type=float, default=5.0)
    parser.add_argument("--encoding", default="cl100k_base")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=THREADS_DEFAULT)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--padded-batch", type=int, default=10_000,
                        help="documents in the one padded call (default 10,000; 0 skips it)")
    args = parser.parse_args(argv)
    if os.environ["RAYON_NUM_THREADS"] != str(args.threads):
        print(f"note: RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']} (set it to match --threads)")

    from transformers import TokenizersBackend

    import hf_bpe

    description, documents = load_documents(args.corpus, args.limit_mb, args.seed, by_size=False)
    lines = [line for doc in documents for line in doc.splitlines(keepends=True) if line.strip()]
    model = hf_bpe.get_encoding(args.encoding)
    ours = hf_bpe.BPETokenizer.from_model(model)
    ours.pad_token = "<|endoftext|>"  # for the padded call; saved, so TokenizersBackend has it too
    with tempfile.TemporaryDirectory() as folder:
        ours.save_pretrained(folder, model_card=False)
        theirs = TokenizersBackend.from_pretrained(folder)

    print(f"input: {description}; encoding {args.encoding}; batches of {args.batch_size}; "
          f"{args.threads} threads; best of {args.repeat}")  # fmt: skip
    rows = []
    for shape, texts in (("documents, 1-10 KB", documents), ("lines", lines)):
        chunks = batches(texts, args.batch_size)
        size = textgen.utf8_size(texts) / MB
        runs: dict[str, Callable[[], Any]] = {
            "raw": lambda chunks=chunks: [
                model.encode_batch(chunk, allowed_special="all", num_threads=args.threads) for chunk in chunks
            ],
            "BPETokenizer": lambda chunks=chunks: [ours(chunk) for chunk in chunks],
            "TokenizersBackend": lambda chunks=chunks: [theirs(chunk) for chunk in chunks],
        }
        ids = {name: [ids for chunk in run() for ids in (chunk if name == "raw" else chunk["input_ids"])]
               for name, run in runs.items()}  # fmt: skip
        for name in ("BPETokenizer", "TokenizersBackend"):
            same = sum(a == b for a, b in zip(ids[name], ids["raw"]))
            print(f"{shape}: {name} ids equal to raw on {same} of {len(texts)} texts")
        speed = {name: size / best_seconds(run, args.repeat) for name, run in runs.items()}
        rows.append((shape, len(texts), size, speed))

    if args.padded_batch:
        # One call on many documents, padded to the longest and returned as NumPy arrays: what a data
        # pipeline does. The documents repeat when the input has fewer.
        texts = [documents[i % len(documents)] for i in range(args.padded_batch)]
        size = textgen.utf8_size(texts) / MB
        padded: dict[str, Callable[[], Any]] = {
            "raw": lambda: model.encode_batch(texts, allowed_special="all", num_threads=args.threads),
            "BPETokenizer": lambda: ours(texts, padding=True, return_tensors="np"),
            "TokenizersBackend": lambda: theirs(texts, padding=True, return_tensors="np"),
        }
        arrays = {name: padded[name]() for name in ("BPETokenizer", "TokenizersBackend")}
        same = all((arrays["BPETokenizer"][key] == arrays["TokenizersBackend"][key]).all()
                   for key in ("input_ids", "attention_mask"))
        print(f"{len(texts):,} documents, padded, np: BPETokenizer arrays equal TokenizersBackend's: {same}")
        del arrays
        seconds = best_seconds_interleaved(padded, args.repeat)
        rows.append((f"{len(texts):,} documents in one call, padding=True, return_tensors='np'", len(texts), size,
                     {name: size / value for name, value in seconds.items()}))

    print()
    print("| input | texts | MB | raw encode_batch MB/s | BPETokenizer MB/s | TokenizersBackend MB/s "
          "| BPETokenizer / raw | BPETokenizer / TokenizersBackend |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape, count, size, speed in rows:
        print(
            f"| {shape} | {count:,} | {size:.1f} | {speed['raw']:.1f} | {speed['BPETokenizer']:.1f} "
            f"| {speed['TokenizersBackend']:.1f} | {speed['BPETokenizer'] / speed['raw']:.2f}x "
            f"| {speed['BPETokenizer'] / speed['TokenizersBackend']:.1f}x |"
        )


if __name__ == "__main__":
    main()
