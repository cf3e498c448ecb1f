"""A readers-writer lock: calls that read a tokenizer run together; a call that changes it waits
for them and runs alone, so every call sees the tokenizer wholly before or wholly after a change.

Readers may nest (a read inside a read never waits), and the writing thread may read. A waiting
writer stops new readers, so a steady stream of encode calls cannot starve ``add_tokens``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ReadWriteLock:
    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer: int | None = None
        self._writer_depth = 0
        self._writers_waiting = 0
        self._reads = threading.local()

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
