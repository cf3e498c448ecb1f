"""Encoding cost grows linearly (or nearly) with the input, even on adversarial input.

The naive merge loop (rescan every pair after each merge) is quadratic in the length of a piece, and a
piece can be a whole megabyte: one repeated letter, or letters without any whitespace. These tests
compare the cost of encoding 100 KB and 1 MB of such text and require the ratio to stay near 10 (at
most 20; a quadratic loop gives about 100). Costs are CPU time of this process, runs of the two sizes
alternate, and each size is the median of its runs (``tests/support/cost.py``), so other processes on the
machine do not change the ratio. Every run encodes a fresh text (so a cache of whole pieces cannot
hide the cost). A 300 KB step runs first so that a quadratic implementation fails in seconds rather
than minutes.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from typing import Any

import cost
import pytest
import textgen

SMALL_BYTES = 100_000
STEPS = (300_000, 1_000_000)
SLACK = 2.0  # allowed cost ratio = SLACK * size ratio
RUNS = 3

TEXTS: dict[str, Callable[[int, int], str]] = {
    "one repeated letter": textgen.repeated_letter,
    "random non-whitespace characters": textgen.random_non_whitespace,
    "random Latin-1 letters, no spaces": textgen.random_latin1_letters,
    "random ASCII letters, no spaces": textgen.random_ascii_letters,
}


def cost_ratio(encode: Callable[[str], Any], make: Callable[[int, int], str], size: int, runs: int) -> float:
    """The median cost of encoding ``size`` bytes over that of :data:`SMALL_BYTES`, runs alternating."""
    encode(make(runs, size))  # warm up (page faults, lazily built tables) on a text not counted
    small, large = [], []
    for run in range(runs):
        small_text, large_text = make(run, SMALL_BYTES), make(run, size)
        small.append(cost.cpu_seconds(functools.partial(encode, small_text)))
        large.append(cost.cpu_seconds(functools.partial(encode, large_text)))
    return statistics.median(large) / max(statistics.median(small), 1e-9)


def cost_ratios(encode: Callable[[str], Any], make: Callable[[int, int], str]) -> tuple[list[float], str]:
    """Cost of each step relative to the small size, stopping at the first step over its bound."""
    ratios, report = [], []
    for size in STEPS:
        ratios.append(cost_ratio(encode, make, size, RUNS))
        report.append(f"{size // 1000} KB: {ratios[-1]:.1f}x the cost of {SMALL_BYTES // 1000} KB")
        if ratios[-1] > SLACK * size / SMALL_BYTES:
            break
    return ratios, ", ".join(report)


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["cl100k_base", "gpt2"])
@pytest.mark.parametrize("kind", list(TEXTS))
def test_encode_cost_grows_linearly(encoding_pair: Callable[[str], tuple[Any, Any]], encoding: str,
                                    kind: str) -> None:
    ours, _ = encoding_pair(encoding)
    reports = []
    # A shared machine can stall one measurement; a real super-linear cost fails both attempts.
    for _attempt in range(2):
        ratios, report = cost_ratios(ours.encode_ordinary, TEXTS[kind])
        reports.append(report)
        if all(ratio <= SLACK * size / SMALL_BYTES for ratio, size in zip(ratios, STEPS)) and len(ratios) == len(STEPS):
            return
    pytest.fail(f"{encoding}, {kind}: the cost grows faster than the input (allowed: {SLACK:.0f}x the size "
                f"ratio, e.g. {SLACK * STEPS[-1] / SMALL_BYTES:.0f}x for {STEPS[-1] // SMALL_BYTES}x the bytes):\n  "
                + "\n  ".join(reports))
