"""How much faster hf_bpe's 2-thread batch is than its own single-thread loop, round after round: the
spread of the ratio, not only its best, and what dropping a batch's result costs the calling thread.

Usage (from the repository root, with hf_bpe built in release mode)::

    python benchmarks/batch_scaling.py                  # ../shared/data/corpora, 20 MB timed, 10 rounds
    python benchmarks/batch_scaling.py --encodings gpt2 --rounds 20

Each round times the single-thread loop (``encode_ordinary`` per document) and one
``encode_ordinary_batch(num_threads=2)`` call, both with the result dropped inside the timing, as in
``encode.py``, and each after the same untimed warm-up as there (caches emptied, then warmed on other
documents of the corpora). Then one more batch is timed with its result kept, and dropping it timed apart.

The single-thread loop drops each document's list at once, so it writes every document's ids into the
same few pages of memory; a batch returns all its lists, so it writes them into memory the process has
not touched before (the lists of the last batch were released, and the allocator gave their pages back).
A second table therefore times, best of ``--rounds-same-output``, the same output made on one thread: the
batch on one thread (tiktoken's own benchmark compares its batch with itself on one thread) and a loop
keeping its lists (``[encode_ordinary(d) for d in docs]``, which also pays the cycle collector looking
through the lists kept so far), each with its result dropped inside the timing.
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
    parser.add_argument("--rounds-same-output", type=int, default=3,
                        help="rounds of the single-thread runs that keep every list (default 3)")
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
    same_output = []
    for name in args.encodings.split(","):
        ours = hf_bpe.get_encoding(name)
        gc.collect()
        gc.freeze()

        def warmed_single(keep: bool = False, ours: Any = ours) -> float:
            ours.clear_cache()
            for doc in warm_up:
                ours.encode_ordinary(doc)
            start = time.perf_counter()
            if keep:
                lists = [ours.encode_ordinary(doc) for doc in docs]
                del lists
            else:
                for doc in docs:
                    ours.encode_ordinary(doc)
            return time.perf_counter() - start

        def warmed_batch(threads: int = args.threads, ours: Any = ours) -> float:
            ours.clear_cache()
            ours.encode_ordinary_batch(warm_up, num_threads=threads)
            start = time.perf_counter()
            ours.encode_ordinary_batch(docs, num_threads=threads)
            return time.perf_counter() - start

        rounds = [(warmed_single(), warmed_batch()) for _ in range(args.rounds)]
        kept = [(warmed_single(keep=True), warmed_batch(threads=1)) for _ in range(args.rounds_same_output)]
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
        single_kept, batch_one = min(k for k, _ in kept), min(b for _, b in kept)
        same_output.append(f"| {name} | {total_mb / single:.2f} | {total_mb / single_kept:.2f} | "
                           f"{total_mb / batch_one:.2f} | {total_mb / batch:.2f} | {single_kept / batch:.2f}x | "
                           f"{batch_one / batch:.2f}x |")
    print()
    print("The same output on one thread (best of each; the first and fourth columns are the table's above):")
    print()
    print("| encoding | single, each list dropped MB/s | single, lists kept MB/s | batch, 1 thread MB/s "
          "| batch, 2 threads MB/s | 2 threads / lists kept | 2 threads / 1 thread |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in same_output:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
