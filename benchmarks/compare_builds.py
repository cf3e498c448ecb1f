"""Two builds of hf_bpe's extension in one process, timed in turns on `encode.py`'s documents: for
measuring a change to the engine on a shared machine, where two separate runs of one build differ by
more than most changes do.

Usage (from the repository root)::

    cp hf_bpe/_core.*.so /tmp/before.so         # the build before the change
    maturin develop -r                          # the build after it
    python benchmarks/compare_builds.py /tmp/before.so hf_bpe/_core.*.so --encoding o200k_base

Each build's model is made through ``hf_bpe.BPE`` from the encoding's ranks and pattern, so the timed
call is the one ``encode.py`` times in its single mode: ``encode_ordinary`` per document, Python's list
of ids included. The documents, the warm-up and its rule are ``encode.py``'s (the same ``--limit-mb``
and ``--seed`` give the same documents): before each timed pass, a build's piece caches are emptied and
warmed on the warm-up documents, untimed (with ``--seen``, each build encodes the timed documents once,
untimed, and its caches are then left as the rounds leave them: text seen before). Each round times both builds (the first build first in even
rounds, second in odd ones) and tiktoken. Before timing, each build's ids are compared with tiktoken's
on every document.

Printed: each build's best and median MB/s, its speed over tiktoken's in the same round (median of the
rounds), and the per-round speed ratio of the second build over the first (median and quartiles).
Timing two copies of one build shows how far identical builds differ on the machine of the day.
``--env-first NAME=VALUE`` sets an environment variable while the first build's model is made and
while its piece caches are emptied and warmed (when the engine allocates them), to compare a switch the
engine reads when it allocates (two copies of one build then differ only in it). ``--cpu-time`` times the
calling thread's CPU time instead of the wall clock: on a busy machine a round then does not count the
time other processes held the core (it still counts what they evict from the shared caches).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from _common import MB, SHARED_CORPORA, load_documents, oracles, textgen
from encode import WARM_UP_SHARE, split_warm_up

from hf_bpe.model import clear_cache


def load_build(path: Path, folder: Path, index: int) -> ModuleType:
    """The extension at ``path``, loaded from a copy of its own (two loads of one file would share one
    module, and PyO3 initialises a module once per process)."""
    copy = folder / f"build{index}_{path.name}"
    shutil.copyfile(path, copy)
    spec = importlib.util.spec_from_file_location("hf_bpe._core", copy)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def engine(module: ModuleType) -> Iterator[None]:
    """``hf_bpe.BPE`` builds its models with ``module`` inside the block."""
    import hf_bpe.model

    saved = hf_bpe.model._core
    hf_bpe.model._core = module  # type: ignore[assignment]
    try:
        yield
    finally:
        hf_bpe.model._core = saved


@contextmanager
def variables(env: dict[str, str]) -> Iterator[None]:
    """The environment variables ``env`` set inside the block."""
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def assignments(items: Sequence[str]) -> dict[str, str]:
    pairs = [item.split("=", 1) for item in items]
    if any(len(pair) != 2 for pair in pairs):
        raise SystemExit("--env-first takes NAME=VALUE")
    return dict(pairs)  # type: ignore[arg-type]


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    count = len(ordered)
    return ordered[count // 4], ordered[count // 2], ordered[(3 * count) // 4]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path, help="the extension module of the first build (a .so file)")
    parser.add_argument("second", type=Path, help="the extension module of the second build")
    parser.add_argument("--encoding", default="o200k_base", help="a tiktoken encoding (default o200k_base)")
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds (default 20)")
    parser.add_argument("--corpus", type=Path, nargs="*", default=[SHARED_CORPORA],
                        help="as encode.py (default: ../shared/data/corpora; generated text when absent)")
    parser.add_argument("--limit-mb", type=float, default=20.0, help="MB of timed text, as encode.py (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seen", action="store_true",
                        help="time text the builds have encoded before: one untimed pass over the timed documents, "
                             "then caches left as each round leaves them (no emptying, no warm-up)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the calling thread's CPU time instead of the wall clock (a busy machine)")
    parser.add_argument("--env-first", action="append", default=[], metavar="NAME=VALUE",
                        help="set while the first build's model is made (repeatable)")
    args = parser.parse_args(argv)
    for path in (args.first, args.second):
        if not path.is_file():
            raise SystemExit(f"{path}: no such file")
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")

    import tiktoken

    import hf_bpe

    description, docs = load_documents(args.corpus, args.limit_mb * (1 + WARM_UP_SHARE), args.seed)
    warm_up, docs = split_warm_up(docs, WARM_UP_SHARE / (1 + WARM_UP_SHARE))
    size_mb = textgen.utf8_size(docs) / MB
    print(f"input: {description}; timed: {size_mb:.1f} MB in {len(docs)} documents; warm-up: "
          f"{textgen.utf8_size(warm_up) / MB:.1f} MB in {len(warm_up)}; {args.encoding}; {args.rounds} rounds")

    reference = hf_bpe.get_encoding(args.encoding)
    ranks, pattern = reference.mergeable_ranks, reference.pattern
    with tempfile.TemporaryDirectory() as folder, oracles.offline_tiktoken(folder):
        missing = oracles.fill_tiktoken_cache(folder)
        if args.encoding in missing:
            raise SystemExit(f"{args.encoding}: {missing[args.encoding]}")
        theirs = tiktoken.get_encoding(args.encoding)
        paths, envs = (args.first, args.second), (assignments(args.env_first), {})
        builds = []
        for index, path in enumerate(paths):
            with engine(load_build(path, Path(folder), index)), variables(envs[index]):
                builds.append(hf_bpe.BPE(ranks, pattern, name=args.encoding))
        expected = theirs.encode_ordinary_batch(docs)
        for index, build in enumerate(builds):
            with variables(envs[index]):
                same = sum(build.encode_ordinary(doc) == ids for doc, ids in zip(docs, expected))
            print(f"build {index} ({paths[index]}): ids equal tiktoken's on {same}/{len(docs)} documents")
        del expected
        gc.collect()
        gc.freeze()

        clock = time.thread_time if args.cpu_time else time.perf_counter

        def timed(encode: Callable[[str], Any]) -> float:
            start = clock()
            for doc in docs:
                encode(doc)
            return clock() - start

        seconds: list[list[float]] = [[], []]
        tiktoken_seconds = []
        if args.seen:
            for index, build in enumerate(builds):
                with variables(envs[index]):
                    clear_cache(build)
                    timed(build.encode_ordinary)
        for round_index in range(args.rounds):
            for index in (0, 1) if round_index % 2 == 0 else (1, 0):
                build = builds[index]
                if not args.seen:
                    with variables(envs[index]):  # the caches are allocated anew after clear_cache()
                        clear_cache(build)
                        for doc in warm_up:
                            build.encode_ordinary(doc)
                seconds[index].append(timed(build.encode_ordinary))
            tiktoken_seconds.append(timed(theirs.encode_ordinary))

    for index, times in enumerate(seconds):
        over_tiktoken = statistics.median(theirs / ours for theirs, ours in zip(tiktoken_seconds, times))
        print(f"build {index}: best {size_mb / min(times):.2f} MB/s, median {size_mb / statistics.median(times):.2f}; "
              f"over tiktoken in the same round: median {over_tiktoken:.2f}x")
    print(f"tiktoken: best {size_mb / min(tiktoken_seconds):.2f} MB/s, median "
          f"{size_mb / statistics.median(tiktoken_seconds):.2f}")
    low, middle, high = quartiles([first / second for first, second in zip(*seconds)])
    print(f"speed of build 1 over build 0, per round: median {middle:.3f}, quartiles {low:.3f} to {high:.3f} "
          f"({args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
