"""How much faster hf_bpe's 2-thread batch is than its own single-thread loop, round after round: the
spread of the ratio, not only its best, and what dropping a batch's result costs the calling thread.

Usage (from the repository root, with hf_bpe built in release mode)::

    python benchmarks/batch_scaling.py                  # ../shared/data/corpora, 20 MB timed, 20 rounds
    python benchmarks/batch_scaling.py --encodings gpt2 --rounds 40

Each round times the single-thread loop (``encode_ordinary`` per document) and one
``encode_ordinary_batch(num_threads=2)`` call, both with the result dropped inside the timing, as in
``encode.py``, and each after the same untimed warm-up as there (caches emptied, then warmed on other
documents of the corpora); the page faults of each timed batch are counted. Then one more batch is timed
with its result kept, and dropping it timed apart.

The single-thread loop drops each document's list at once, so every document's ids and list slots pass
through the same few kilobytes, which stay in the core's cache. A batch holds all its ids (4 bytes each
while encoding) and all its list slots (8 bytes each) at once: for gpt2 on 20 MB, 36 MB and 73 MB, far
more than a core's cache. (The allocator mostly keeps that memory from one batch to the next, so a batch
seldom asks the kernel for new pages, which cost about 2 microseconds each on a virtual machine: the
page faults column gives the median per batch.)
A second table therefore times, best of ``--rounds-same-output``, the same output made on one thread: the
batch on one thread (tiktoken's own benchmark compares its batch with itself on one thread) and a loop
keeping its lists (``[encode_ordinary(d) for d in docs]``, which also pays the cycle collector looking
through the lists kept so far), each with its result dropped inside the timing.

Each round also times the machine itself, right after the batch: a pure-Python loop (no memory traffic,
no shared state) in one process alone and in as many processes at once as the batch has threads (two by
default), best of two each (``--no-host`` skips it). Two processes do 2.00x the work of one on a machine
with two free cores, every round; the last column shows how far this machine is from that, and how much
its timings move from round to round, which bounds what the batch's ratio can show here.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import resource
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

from hf_bpe.model import clear_cache


def spin(iterations: int) -> tuple[float, float]:
    """Pure computation (an integer loop in the interpreter): its start and end on the system-wide clock."""
    start = time.perf_counter()
    total = 0
    for index in range(iterations):
        total += index & 7
    return start, time.perf_counter()


def minor_faults() -> int:
    """The page faults this process has taken so far that the kernel served without reading a file."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def host_round(pool: Any, processes: int, iterations: int = 3_000_000) -> tuple[float, float]:
    """Pure computation in one process of ``pool`` alone, then in its ``processes`` processes at once: the
    best of two runs of each, in seconds (all at once: from the first start to the last end)."""
    alone = together = float("inf")
    for _ in range(2):
        start, end = pool.apply(spin, (iterations,))
        alone = min(alone, end - start)
        spans = pool.map(spin, [iterations] * processes, chunksize=1)
        together = min(together, max(end for _, end in spans) - min(start for start, _ in spans))
    return alone, together


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit-mb", type=float, default=20.0, help="MB timed (default 20)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of single and batch (default 20)")
    parser.add_argument("--threads", type=int, default=THREADS_DEFAULT, help="threads for the batch (default 2)")
    parser.add_argument("--encodings", default=",".join(ENCODINGS), help="comma-separated (default: all three)")
    parser.add_argument("--rounds-same-output", type=int, default=3,
                        help="rounds of the single-thread runs that keep every list (default 3)")
    parser.add_argument("--no-host", action="store_true",
                        help="skip timing pure computation in one process and in two each round")
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
          "| dropping a batch's result | page faults per batch: median "
          f"| machine, {args.threads} processes / one: best / best, per-round median (min-max) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    host = None if args.no_host else multiprocessing.get_context("spawn").Pool(args.threads)
    if host is not None:
        host.map(spin, [100_000] * args.threads, chunksize=1)  # every process started
    same_output = []
    for name in args.encodings.split(","):
        ours = hf_bpe.get_encoding(name)
        gc.collect()
        gc.freeze()

        def warmed_single(keep: bool = False, ours: Any = ours) -> float:
            clear_cache(ours)
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

        batch_faults: list[int] = []

        def warmed_batch(threads: int = args.threads, ours: Any = ours,
                         faults_seen: list[int] = batch_faults) -> float:
            clear_cache(ours)
            ours.encode_ordinary_batch(warm_up, num_threads=threads)
            faults = minor_faults()
            start = time.perf_counter()
            ours.encode_ordinary_batch(docs, num_threads=threads)
            seconds = time.perf_counter() - start
            faults_seen.append(minor_faults() - faults)
            return seconds

        rounds, machine = [], []
        for _ in range(args.rounds):
            rounds.append((warmed_single(), warmed_batch()))
            if host is not None:
                machine.append(host_round(host, args.threads))
        faults = statistics.median(batch_faults)
        kept = [(warmed_single(keep=True), warmed_batch(threads=1)) for _ in range(args.rounds_same_output)]
        clear_cache(ours)
        ours.encode_ordinary_batch(warm_up, num_threads=args.threads)
        result = ours.encode_ordinary_batch(docs, num_threads=args.threads)
        start = time.perf_counter()
        del result
        drop = time.perf_counter() - start
        gc.unfreeze()
        ratios = [single / batch for single, batch in rounds]
        host_ratios = [args.threads * alone / together for alone, together in machine]
        single, batch = min(s for s, _ in rounds), min(b for _, b in rounds)
        machine_cell = "-"
        if machine:
            best = args.threads * min(alone for alone, _ in machine) / min(together for _, together in machine)
            machine_cell = (f"{best:.2f}x, {statistics.median(host_ratios):.2f}x "
                            f"({min(host_ratios):.2f}-{max(host_ratios):.2f})")
        print(f"| {name} | {total_mb / single:.2f} | {total_mb / batch:.2f} | {single / batch:.2f}x | "
              f"{min(ratios):.2f}x | {statistics.median(ratios):.2f}x | {max(ratios):.2f}x | "
              f"{drop * 1000:.0f} ms of {batch * 1000:.0f} | {faults:,.0f} | {machine_cell} |", flush=True)
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
    if host is not None:
        host.close()
        host.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
