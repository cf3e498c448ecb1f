"""What the suite's modules share besides fixtures (``tests/conftest.py`` holds those): the test scale,
the shared reference data, and peak-memory probes. Test modules import these from here, never from
``conftest`` (pytest imports conftest itself; importing it again would make a second copy).

- ``HF_BPE_TEST_SCALE`` (float, default 1.0) sizes the large checks (:func:`scaled`); CI runs the suite
  at a reduced scale. The large checks carry the ``slow`` marker.
- :func:`require_shared` gives ``../shared/data`` (next to the repository), skipping with a clear reason
  when it is absent (a fresh clone has no ``../shared``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
"""Reference data written by others (``../shared/data`` from the repository root); may be absent."""

FULL_SIZE = pytest.mark.full_size
"""Marks the full-size twin of a check the suite also runs at a reduced size (also ``slow``): it runs when
``HF_BPE_TEST_SCALE`` is set (``HF_BPE_TEST_SCALE=1 python -m pytest -m slow``) and is skipped, saying
so, otherwise, which keeps the default run short on 2 cores (``tests/conftest.py``)."""

PARITY_ENCODINGS = ("gpt2", "cl100k_base", "o200k_base")


def scale_factor() -> float:
    """``HF_BPE_TEST_SCALE`` as a positive float (1.0 when unset)."""
    raw = os.environ.get("HF_BPE_TEST_SCALE", "1.0")
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"HF_BPE_TEST_SCALE must be a number, got {raw!r}") from None
    if value <= 0:
        raise pytest.UsageError(f"HF_BPE_TEST_SCALE must be positive, got {raw!r}")
    return value


def scaled(amount: float, minimum: int = 1) -> int:
    """``amount`` times the test scale, as an int of at least ``minimum``."""
    return max(minimum, int(amount * scale_factor()))


PEAK_RSS_KB = (
    "next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:'))"
)
"""A Python expression for this process's own peak resident size in kB (Linux), for scripts run in a
child process. Not ``ru_maxrss``: Linux carries the parent's peak across ``fork`` and ``exec`` into a
child's ``ru_maxrss``, so a child of a large test process would report the parent's size."""


def restart_peak_rss_mb() -> float:
    """Restart this process's peak-resident-size counter and return the resident size it restarts
    from, in MB; skip where Linux's ``/proc/self/clear_refs`` is missing. A test process's own
    ``ru_maxrss`` remembers every earlier test's peak, so a growth measured from it would read zero."""
    clear_refs = Path("/proc/self/clear_refs")
    if not clear_refs.exists():
        pytest.skip("measuring a peak resident size needs Linux's /proc/self/clear_refs")
    clear_refs.write_text("5")
    return peak_rss_mb()


def peak_rss_mb() -> float:
    """This process's peak resident size in MB since the last :func:`restart_peak_rss_mb` (``VmHWM``)."""
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def require_shared(*parts: str) -> Path:
    """The path ``../shared/data/<parts>``, or skip the test saying that it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference data {path} is absent (it lives next to the repository, in ../shared/data, "
                    f"which a fresh clone does not have)")
    return path


def forked_child_result(target: Callable[..., None], *args: Any, what: str, timeout: float = 60) -> Any:
    """What ``target(queue, *args)`` puts on its queue when run in a forked child process; the test
    fails, naming ``what``, when the child is still running after ``timeout`` seconds (a hang)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=target, args=(queue, *args))
    child.start()
    child.join(timeout=timeout)
    if child.is_alive():
        child.kill()
        pytest.fail(f"{what} hung in a forked child")
    return queue.get(timeout=5)
