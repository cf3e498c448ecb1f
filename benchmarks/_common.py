"""Set-up shared by the benchmark programs, and the tests' helpers they use (``oracles``: offline
tiktoken; ``textgen``: generated text). Import it before anything imports ``tokenizers``: the
tokenizers thread pool reads ``RAYON_NUM_THREADS`` when it starts."""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

THREADS_DEFAULT = 2
os.environ.setdefault("RAYON_NUM_THREADS", str(THREADS_DEFAULT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))

import oracles  # tests/support/oracles.py
import textgen  # tests/support/textgen.py

__all__ = ["MB", "REPO", "SHARED_CORPORA", "THREADS_DEFAULT", "best_seconds", "best_seconds_interleaved",
           "load_documents", "oracles", "seconds_interleaved", "textgen"]

SHARED_CORPORA = REPO.parent / "shared" / "data" / "corpora"
MB = 1_000_000


def best_seconds(run: Callable[[], Any], repeat: int) -> float:
    """The fastest of ``repeat`` timed calls of ``run``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def seconds_interleaved(runs: dict[Any, Callable[[], Any]], repeat: int,
                        setups: dict[Any, Callable[[], Any]] | None = None, *,
                        rotate: bool = False) -> dict[Any, list[float]]:
    """The seconds of each of ``repeat`` timed calls of each of ``runs``, taken in turns (one call of
    each per round), so that a busy spell on the machine slows every contender alike rather than one.
    With ``rotate`` each round starts one contender later than the last, so that none is always first
    (or always runs right after the same neighbour). A run's entry in ``setups``, if any, is called
    (untimed) before each of its timed calls."""
    seconds: dict[Any, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for round_index in range(repeat):
        shift = round_index % len(names) if rotate and names else 0
        for name in names[shift:] + names[:shift]:
            if setups and name in setups:
                setups[name]()
            start = time.perf_counter()
            runs[name]()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def best_seconds_interleaved(runs: dict[Any, Callable[[], Any]], repeat: int,
                             setups: dict[Any, Callable[[], Any]] | None = None) -> dict[Any, float]:
    """The fastest of ``repeat`` timed calls of each of ``runs``, taken in turns (see
    :func:`seconds_interleaved`)."""
    return {name: min(times) for name, times in seconds_interleaved(runs, repeat, setups).items()}


def load_documents(corpus: Sequence[Path], limit_mb: float, seed: int, *, by_size: bool = True) -> tuple[str, list[str]]:
    """A description of the input and its documents of 1-10 KB, up to ``limit_mb`` in total, from the
    corpus files (``*.txt`` of folders; generated text when no file is given or found). With ``by_size``
    each file contributes in proportion to its size and the documents are shuffled; otherwise each file
    gets an equal share and the documents stay in file order."""
    rng = random.Random(seed)
    files = [path for item in corpus for path in (sorted(item.glob("*.txt")) if item.is_dir() else [item])]
    files = [path for path in files if path.is_file() and "COPYING" not in path.name]
    if not files:
        docs = textgen.documents(rng, int(limit_mb * MB), specials=False)
        return f"generated text (textgen, seed {seed}), {textgen.utf8_size(docs) / MB:.1f} MB", docs
    if by_size:
        sizes = {path: path.stat().st_size for path in files}
        share = min(1.0, limit_mb * MB / sum(sizes.values()))
        corpora = [entry for path in files
                   for entry in textgen.corpus_documents([path], rng, limit_bytes=None if share >= 1.0
                                                         else int(sizes[path] * share))]
    else:
        corpora = textgen.corpus_documents(files, rng, limit_bytes=int(limit_mb * MB / len(files)))
    docs = [doc for _, file_docs in corpora for doc in file_docs]
    if by_size:
        rng.shuffle(docs)
    parts = ", ".join(f"{name} {textgen.utf8_size(file_docs) / MB:.1f} MB" for name, file_docs in corpora)
    return f"{textgen.utf8_size(docs) / MB:.1f} MB: {parts}", docs
