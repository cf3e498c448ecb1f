"""How much faster hf_bpe's 2-thread batch is than its own single-thread loop, round after round: the
spread of the ratio, not only its best, and what dropping a batch's result costs the calling thread.

Usage (from the repository root, with hf_bpe built in release mode)::

    python benchmarks/batch_scaling.py                  # ../shared/data/corpora, 20 MB timed, 10 rounds
    python benchmarks/batch_scaling.py --encodings gpt2 --rounds 20

Each round times the single-thread loop (``encode_ordinary`` per document) and one
``encode_ordinary_batch(num_threads=2)`` call, both with the result dropped inside the timing, as in
``encode.py``, and each after the same untimed warm-up as there (caches emptied, then warmed on other
documents of the corpora). Then one more batch is timed with its result kept, and dropping it timed apart.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from _common import (  # first: sets RAYON_NUM_THREADS
    MB,
    SHARED_CORPORA,
    THREADS_DEFAULT,
    load_documents,
    textgen,
)
from encode import ENCODINGS, WARM_UP_SHARE, split_warm_up


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-mb", type=float, default=20.0, help="MB timed (default 20)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of single and batch (default 10)")
    parser.add_argument("--threads", type=int, default=THREADS_DEFAULT, help="threads for the batch (default 2)")
    parser.add_argument("--encodings", default=",".join(ENCODINGS), help="comma-separated (default: all three)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import hf_bpe

    description, docs = load_documents([SHARED_CORPORA], args.limit_mb * (1 + WARM_UP_SHARE), args.seed)
    warm_up, docs = split_warm_up(docs, WARM_UP_SHARE / (1 + WARM_UP_SHARE))
    total_mb = textgen.utf8_size(docs) / MB
    print(f"input: {description}; timed: {total_mb:.1f} MB in {len(docs)} documents; {args.rounds} rounds; "
          f"batch on {args.threads} threads")
    print()
    print("| encoding | best single MB/s | best batch MB/s | best / best | per-round ratio: min | median | max "
          "| dropping a batch's result |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.encodings.split(","):
        ours = hf_bpe.get_encoding(name)
        gc.collect()
        gc.freeze()

        def warmed_single(ours: Any = ours) -> float:
            ours.clear_cache()
            for doc in warm_up:
                ours.encode_ordinary(doc)
            start = time.perf_counter()
            for doc in docs:
                ours.encode_ordinary(doc)
            return time.perf_counter() - start

        def warmed_batch(ours: Any = ours) -> float:
            ours.clear_cache()
            ours.encode_ordinary_batch(warm_up, num_threads=args.threads)
            start = time.perf_counter()
            ours.encode_ordinary_batch(docs, num_threads=args.threads)
            return time.perf_counter() - start

        rounds = [(warmed_single(), warmed_batch()) for _ in range(args.rounds)]
        ours.clear_cache()
        ours.encode_ordinary_batch(warm_up, num_threads=args.threads)
        result = ours.encode_ordinary_batch(docs, num_threads=args.threads)
        start = time.perf_counter()
        del result
        drop = time.perf_counter() - start
        gc.unfreeze()
        ratios = [single / batch for single, batch in rounds]
        single, batch = min(s for s, _ in rounds), min(b for _, b in rounds)
        print(f"| {name} | {total_mb / single:.2f} | {total_mb / batch:.2f} | {single / batch:.2f}x | "
              f"{min(ratios):.2f}x | {statistics.median(ratios):.2f}x | {max(ratios):.2f}x | "
              f"{drop * 1000:.0f} ms of {batch * 1000:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
