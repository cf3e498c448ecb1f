"""What a call costs, measured so that a busy machine does not change the answer.

Tests that guard complexity compare costs, never durations: the cost of the same work at two sizes,
or of two jobs, as a ratio. Each cost is the CPU time of this process (:func:`time.process_time`,
every thread of it, the Rust core's workers included), not wall time: other processes competing for
the cores delay a call but do not add to its CPU time. Runs of the two sides alternate, so that
whatever does change over a run (caches, frequency) falls on both, and each side is the median of
its runs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

LINEAR_SLACK = 2.0
"""A cost ratio may be this many times the size ratio (a quadratic cost gives the size ratio again)."""


def cpu_seconds(action: Callable[[], object]) -> float:
    """The CPU time of this process while ``action()`` runs."""
    started = time.process_time()
    action()
    return time.process_time() - started


def median_cost_ratio(numerator: Callable[[], object], denominator: Callable[[], object], runs: int = 3) -> float:
    """The median CPU time of ``numerator()`` over that of ``denominator()``, their runs alternating."""
    top, bottom = [], []
    for _ in range(runs):
        top.append(cpu_seconds(numerator))
        bottom.append(cpu_seconds(denominator))
    return statistics.median(top) / max(statistics.median(bottom), 1e-9)


def cost_grows_linearly(prepare: Callable[[int], Callable[[], object]], small: int, large: int,
                        slack: float = LINEAR_SLACK, runs: int = 3) -> tuple[bool, str]:
    """Whether ``prepare(size)()`` costs at most ``slack`` times ``large / small`` more at ``large``
    than at ``small`` (``prepare`` does the set-up that is not counted, such as writing a file), and a
    report of the ratio. Two attempts: a real super-linear cost fails both."""
    allowed = slack * large / small
    reports = []
    for _attempt in range(2):
        ratio = median_cost_ratio(prepare(large), prepare(small), runs)
        reports.append(f"{large:,} over {small:,}: {ratio:.1f}x the CPU time, at most {allowed:.0f}x allowed")
        if ratio <= allowed:
            return True, reports[-1]
    return False, "; ".join(reports)


def cost_grows_linearly_in_steps(prepare: Callable[[int], Callable[[], object]], small: int,
                                 steps: tuple[int, ...], slack: float = LINEAR_SLACK,
                                 runs: int = 3) -> tuple[bool, str]:
    """:func:`cost_grows_linearly` from ``small`` to each size of ``steps`` in turn, stopping at the
    first over its bound, so that a quadratic cost fails at a small step rather than after minutes at
    a large one."""
    reports = []
    for large in steps:
        linear, report = cost_grows_linearly(prepare, small, large, slack, runs)
        reports.append(report)
        if not linear:
            return False, "; ".join(reports)
    return True, "; ".join(reports)
