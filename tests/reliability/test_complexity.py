"""Encoding cost grows linearly (or nearly) with the input, even on adversarial input.

The naive merge loop (rescan every pair after each merge) is quadratic in the length of a piece, and a
piece can be a whole megabyte: one repeated letter, or letters without any whitespace. These tests
compare the cost of encoding 100 KB and 1 MB of such text and require the ratio to stay near 10 (at
most 20; a quadratic loop gives about 100). Costs are CPU time of this process, runs of the two sizes
alternate, and each size is the median of its runs (``tests/support/cost.py``), so other processes on the
machine do not change the ratio. Every run encodes a fresh text, never one encoded before in the
process (so a cache of whole pieces cannot hide the cost). A 300 KB step runs first so that a
quadratic implementation fails in seconds rather than minutes. Special tokens are held to the same
rule: building a model with one token of a megabyte (or 100,000 tokens) and encoding a text holding it.
"""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Callable
from typing import Any

import cost
import pytest
import textgen

from hf_bpe import BPE

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


# Every text is made from a seed used once in the process: a text met again (the small one of an earlier
# step or attempt, which is also the start of the large text of its seed) is answered by the piece
# caches, so the small side would cost less than its size says.
SEEDS = itertools.count()


def cost_ratio(encode: Callable[[str], Any], make: Callable[[int, int], str], size: int, runs: int) -> float:
    """The median cost of encoding ``size`` bytes over that of :data:`SMALL_BYTES`, runs alternating."""
    encode(make(next(SEEDS), size))  # warm up (page faults, lazily built tables) on a text not counted
    small, large = [], []
    for _ in range(runs):
        small_text, large_text = make(next(SEEDS), SMALL_BYTES), make(next(SEEDS), size)
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


BYTES = {bytes([byte]): byte for byte in range(256)}


def special_token_of(size: int, unit: str) -> Callable[[], object]:
    """Building a model with one special token of ``size`` bytes and encoding a text holding it."""
    token = unit * (size // len(unit.encode()))
    text = f"ab{token}c"

    def build_and_use() -> None:
        model = BPE(BYTES, "gpt2", special_tokens={token: 256})
        assert model.encode(text, allowed_special="all") == [97, 98, 256, 99]

    return build_and_use


def special_tokens_of(count: int) -> Callable[[], object]:
    """Building a model with ``count`` special tokens and encoding a text holding the last."""
    specials = {f"<|special_{index}|>": 256 + index for index in range(count)}

    def build_and_use() -> None:
        model = BPE(BYTES, "gpt2", special_tokens=specials)
        assert model.encode(f"a<|special_{count - 1}|>b", allowed_special="all") == [97, 255 + count, 98]

    return build_and_use


@pytest.mark.parametrize("unit", ["x", "\u65e5"])
def test_one_special_token_of_a_megabyte_builds_and_matches_in_linear_time(unit: str) -> None:
    # The Aho-Corasick DFA was quadratic to build in a token's length (40,000 characters: 6 s); the
    # small step fails such a cost in a second, before the megabyte would take an hour.
    for small, large in ((10_000, 30_000), (100_000, 1_000_000)):
        linear, report = cost.cost_grows_linearly(lambda size: special_token_of(size, unit), small, large)
        assert linear, report


def test_a_hundred_thousand_special_tokens_build_and_match_in_linear_time() -> None:
    linear, report = cost.cost_grows_linearly(special_tokens_of, 10_000, 100_000)
    assert linear, report
