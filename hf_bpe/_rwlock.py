"""A readers-writer lock: calls that read a tokenizer run together; a call that changes it waits
for them and runs alone, so every call sees the tokenizer wholly before or wholly after a change.

Readers may nest (a read inside a read never waits), and the writing thread may read. A waiting
writer stops new readers, so a steady stream of encode calls cannot starve ``add_tokens``.

A process forked while other threads read or write (a ``datasets.map(num_proc=...)`` worker, say)
gets the lock as the forking thread held it: the other threads do not exist in the child, and
their reads or write would otherwise block it forever.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

_LOCKS: weakref.WeakSet[ReadWriteLock] = weakref.WeakSet()


class ReadWriteLock:
    def __init__(self) -> None:
        self._reads = threading.local()
        self._writer: int | None = None
        self._writer_depth = 0
        self._start_over()
        _LOCKS.add(self)

    def _start_over(self) -> None:
        """Keep only the calling thread's hold (in a forked child, the only thread left)."""
        self._condition = threading.Condition(threading.Lock())
        me = threading.get_ident()
        if self._writer != me:
            self._writer, self._writer_depth = None, 0
        self._readers = 1 if getattr(self._reads, "depth", 0) and self._writer is None else 0
        self._writers_waiting = 0

    def acquire_read(self) -> None:
        depth = getattr(self._reads, "depth", 0)
        if depth or self._writer == threading.get_ident():
            self._reads.depth = depth + 1
            return
        with self._condition:
            while self._writer is not None or self._writers_waiting:
                self._condition.wait()
            self._readers += 1
        self._reads.depth = 1

    def release_read(self) -> None:
        self._reads.depth -= 1
        if self._reads.depth or self._writer == threading.get_ident():
            return
        with self._condition:
            self._readers -= 1
            if not self._readers:
                self._condition.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._writer == me:
            self._writer_depth += 1
        else:
            if getattr(self._reads, "depth", 0):
                raise RuntimeError(
                    "a tokenizer cannot add tokens from inside one of its own encode or decode calls"
                )
            with self._condition:
                self._writers_waiting += 1
                try:
                    while self._writer is not None or self._readers:
                        self._condition.wait()
                finally:
                    self._writers_waiting -= 1
                self._writer, self._writer_depth = me, 1
        try:
            yield
        finally:
            self._writer_depth -= 1
            if not self._writer_depth:
                with self._condition:
                    self._writer = None
                    self._condition.notify_all()


def _after_fork_in_child() -> None:
    for lock in list(_LOCKS):
        lock._start_over()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_Method = TypeVar("_Method", bound=Callable[..., Any])


def reading(method: _Method) -> _Method:
    """Run ``method`` as a reader of its object's ``_lock`` (a :class:`ReadWriteLock`): alongside other
    readers, never while a writer (``add_tokens``, ``add_special_tokens``) changes the object."""

    @functools.wraps(method)
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._lock.acquire_read()
        try:
            return method(self, *args, **kwargs)
        finally:
            self._lock.release_read()

    return cast(_Method, read)
