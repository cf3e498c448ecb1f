"""A Rust panic never reaches Python as PyO3's ``PanicException`` (a ``BaseException`` that escapes
``except Exception``) nor aborts the interpreter: every binding turns it into
:class:`hf_bpe.InternalError`, a ``RuntimeError`` carrying the panic's message.

``hf_bpe._core._panic_for_tests(site)`` is a testing-only hook that panics on purpose, on each path a
panic can take: the calling thread, with the GIL released, a thread-pool worker (through the same
helper ``encode_batch`` uses) and the helper thread training and file counting run on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

import hf_bpe
from hf_bpe import _core
from hf_bpe.train import count_pieces

SITES = ("call", "detached", "pool", "lists", "watched")


@pytest.mark.parametrize("site", SITES)
def test_a_panic_is_an_internal_error_that_except_exception_catches(site: str) -> None:
    caught: BaseException | None = None
    try:
        _core._panic_for_tests(site)
    except Exception as error:  # noqa: BLE001 - the point: a plain `except Exception` catches it
        caught = error
    assert isinstance(caught, hf_bpe.InternalError)
    assert isinstance(caught, RuntimeError)
    assert "internal error in hf_bpe core" in str(caught)
    assert f"deliberate panic for tests ({site})" in str(caught)


def test_a_panic_while_filling_a_batch_releases_no_int_it_did_not_own() -> None:
    """The "lists" site fills 100 lists of 1,000 sevens on two workers until the one filling row 37
    panics on purpose at its 500th id; the half-filled lists hold sevens whose references are not
    taken yet, so releasing them as usual would drop 7's reference count by tens of thousands (and
    free it, in time)."""
    before = sys.getrefcount(7)
    with pytest.raises(hf_bpe.InternalError, match=r"deliberate panic for tests \(lists\)"):
        _core._panic_for_tests("lists")
    assert abs(sys.getrefcount(7) - before) < 100


def test_models_keep_working_after_a_panic() -> None:
    model = hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, "gpt2", {"<|end|>": 257})
    before = model.encode_batch(["abc ab", "x<|end|>"], allowed_special="all", num_threads=2)
    for site in SITES:
        with pytest.raises(hf_bpe.InternalError):
            _core._panic_for_tests(site)
        assert model.encode_batch(["abc ab", "x<|end|>"], allowed_special="all", num_threads=2) == before
        assert model.decode(before[0]) == "abc ab"
    counts = count_pieces(["the cat sat on the mat"] * 3, show_progress=False)
    assert counts[" the"] == 3


def test_unknown_site_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown site"):
        _core._panic_for_tests("nowhere")


def test_concurrent_panics_in_pool_workers_leave_the_process_healthy() -> None:
    """Threads panicking in pool workers while others encode: every panic is an InternalError, every
    encode is right, and the process exits normally (run in a fresh interpreter to see its exit)."""
    script = textwrap.dedent(
        """
        import threading, hf_bpe
        from hf_bpe import _core
        model = hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, "gpt2")
        expected = model.encode_ordinary_batch(["ab" * 50] * 8)
        errors, results = [], []
        def panicking():
            for _ in range(20):
                try:
                    _core._panic_for_tests("pool")
                except hf_bpe.InternalError as error:
                    errors.append(error)
        def encoding():
            for _ in range(20):
                results.append(model.encode_ordinary_batch(["ab" * 50] * 8, num_threads=2) == expected)
        threads = [threading.Thread(target=f) for f in (panicking, encoding, panicking, encoding)]
        for thread in threads: thread.start()
        for thread in threads: thread.join()
        assert len(errors) == 40 and len(results) == 40 and all(results), (len(errors), results)
        print("healthy")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "RUST_BACKTRACE": "0"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "healthy"


def test_panics_in_many_python_threads_at_once() -> None:
    failures: list[BaseException] = []

    def panic_repeatedly(site: str) -> None:
        for _ in range(10):
            try:
                _core._panic_for_tests(site)
            except hf_bpe.InternalError:
                continue
            except BaseException as error:  # noqa: BLE001 - recorded and reported below
                failures.append(error)

    threads = [threading.Thread(target=panic_repeatedly, args=(site,)) for site in SITES * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
