"""Set-up shared by the benchmark programs, and the tests' helpers they use (``oracles``: offline
tiktoken; ``textgen``: generated text). Import it before anything imports ``tokenizers``: the
tokenizers thread pool reads ``RAYON_NUM_THREADS`` when it starts."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

THREADS_DEFAULT = 2
os.environ.setdefault("RAYON_NUM_THREADS", str(THREADS_DEFAULT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import oracles  # tests/oracles.py
import textgen  # tests/textgen.py

__all__ = ["MB", "REPO", "SHARED_CORPORA", "THREADS_DEFAULT", "best_seconds", "best_seconds_interleaved", "oracles",
           "textgen"]

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


def best_seconds_interleaved(runs: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """The fastest of ``repeat`` timed calls of each of ``runs``, taken in turns (one call of each per
    round), so that a busy spell on the machine slows every contender alike rather than one."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best
