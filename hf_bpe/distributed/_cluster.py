"""Where the work runs: a Ray cluster (the one this process is connected to, or one reached at an
address) or this machine's cores, behind one small interface the training and tokenizing code share.

Ray is optional (``pip install 'hf_bpe[ray]'``); it is imported only when asked for.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import (
    FIRST_COMPLETED,
    Executor,
    Future,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

RAY_MISSING = (
    "Ray is not installed: pip install 'hf_bpe[ray]' (or 'ray[data]>=2.47'), or run on this machine's "
    "cores without ray_address (the CLI without --ray)"
)


def import_ray() -> Any:
    """The ``ray`` module, or ``ImportError`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ImportError(RAY_MISSING) from None
    return ray


def ray_in_use() -> bool:
    """Whether this process is connected to Ray already (``ray.init`` was called)."""
    try:
        import ray
    except ImportError:
        return False
    return bool(ray.is_initialized())


@dataclass
class Cluster:
    """The Ray connection of one call (``ray`` is None on local cores) and how many tasks to run
    at once."""

    ray: Any
    workers: int


@contextmanager
def connect(ray_address: str | None, num_workers: int | None) -> Iterator[Cluster]:
    """Ray when this process is connected to it or ``ray_address`` is given (passed to
    ``ray.init(address=...)``: ``"auto"``, ``"local"``, ``"host:port"``, ``"ray://host:port"``);
    otherwise this machine's cores. A Ray session this call started is shut down when it ends.
    """
    if num_workers is not None and (
        isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1
    ):
        raise ValueError(f"num_workers must be a positive int or None (every core), got {num_workers!r}")
    if ray_address is None and not ray_in_use():
        yield Cluster(None, num_workers or os.cpu_count() or 1)
        return
    ray = import_ray()
    started = False
    if not ray.is_initialized():
        options: dict[str, Any] = {"address": ray_address, "include_dashboard": False, "log_to_driver": False}
        if ray_address == "local" and num_workers is not None:
            options["num_cpus"] = num_workers
        ray.init(**options)
        started = True
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        yield Cluster(ray, min(num_workers, cpus) if num_workers else max(cpus, 1))
    finally:
        if started:
            ray.shutdown()


def run_local(
    work: Callable[[Any], Any],
    items: list[Any],
    workers: int,
    on_done: Callable[[int, Any], None],
    *,
    processes: tuple[Callable[[Any], Any], Callable[..., None], tuple[Any, ...]] | None = None,
) -> None:
    """Run ``work(item)`` for every item on ``workers`` threads (the core releases the GIL), calling
    ``on_done(index, result)`` in this thread as each finishes; the first failure cancels what has
    not started and is raised (the running ones finish first). With ``processes=(process_work,
    initializer, arguments)`` and more than one item and worker, ``process_work(item)`` (a module-level
    function) runs instead in fresh processes, each set up once by ``initializer(*arguments)``: for
    work whose Python part (parsing, conversions) would otherwise hold the GIL."""
    pool: Executor
    if processes is not None and workers > 1 and len(items) > 1:
        work, initializer, arguments = processes
        pool = ProcessPoolExecutor(min(workers, len(items)), mp_context=multiprocessing.get_context("spawn"),
                                   initializer=initializer, initargs=arguments)
    else:
        pool = ThreadPoolExecutor(workers)
    with pool:
        pending: dict[Future[Any], int] = {pool.submit(work, item): index for index, item in enumerate(items)}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    on_done(index, future.result())
        finally:
            for future in pending:
                future.cancel()


@contextmanager
def memory_capped(limit: int | None) -> Iterator[None]:
    """Within the block, this process may map at most ``limit`` more bytes of address space
    (``RLIMIT_AS``'s soft limit, restored afterwards): an allocation past it raises ``MemoryError``
    (numpy, pyarrow) or ends the process (Rust), instead of the machine running out of memory."""
    if limit is None:
        yield
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    capped = address_space() + limit
    if hard != resource.RLIM_INFINITY:
        capped = min(capped, hard)
    resource.setrlimit(resource.RLIMIT_AS, (capped, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def address_space() -> int:
    """This process's mapped bytes now (``VmSize``; Linux, else 0 so the limit counts from zero)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
