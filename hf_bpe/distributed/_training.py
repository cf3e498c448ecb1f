"""Training on many cores or machines, with the same result as :func:`hf_bpe.train`.

Counting is the part that grows with the corpus, and count tables add (:class:`hf_bpe.train.PieceCounts`),
so the work splits by whole documents: groups of files (each file one document, counted streaming by
the Rust counter as ``hf_bpe.train.count_pieces(files=...)`` does) or blocks of a Ray Dataset's rows (each
row one document, as ``hf_bpe.train(dataset)`` takes a ``datasets`` dataset). Splitting a document
would change the counts (GPT-2's ``\\s+(?!\\S)`` joins spaces across line breaks, so even lines are
not safe to cut at). On Ray, one counting actor per worker slot takes groups of files as it frees up
and adds each group's table into its own (a table costs time to serialize and add: sending one per
group cost more than the counting it spread); then the workers' tables are added in a tree of actors,
:data:`FAN_IN` at a time, and the merge loop runs in the actor that holds the sum, so the combined
table never travels (only the model, a few MB, comes back). A Ray Dataset's blocks are counted by Ray
Data and their tables added in a tree of tasks. On local cores the counter spreads the files over
the cores itself, as ``hf_bpe.train(files=...)`` does.

``prune_below=c`` bounds memory for corpora whose table does not fit one node: each group's table
drops the pieces seen fewer than ``c`` times in that group before it is sent. A piece's total is
then never overestimated and underestimated by at most ``(c - 1)`` per group it was dropped from,
and never below zero: ``0 <= exact - pruned <= min(exact, groups * (c - 1))``; the combined table
holds at most ``total pieces / c`` distinct pieces. A merge can change only where the lead of the
most frequent pair over the next is within what pruning removed from it (see ``docs/scale.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hf_bpe import patterns
from hf_bpe.distributed import _cluster, _inputs
from hf_bpe.model import BPE
from hf_bpe.train import FileCounter, PieceCounts, count_pieces, train_from_counts

FAN_IN = 4
"""How many count tables one combine task adds."""

GROUP_BYTES = 64 << 20
"""Files are counted in groups of about this many bytes (64 MiB): one task each."""

COUNTS_COLUMN = "piece_counts"


def train(
    inputs: Any,
    vocab_size: int,
    *,
    pattern: str | patterns.Split | Sequence[patterns.Step] = "gpt2",
    special_tokens: Iterable[str] = (),
    text_column: str = "text",
    num_workers: int | None = None,
    ray_address: str | None = None,
    prune_below: int | None = None,
    group_bytes: int = GROUP_BYTES,
    name: str | None = None,
    task_memory_limit: int | None = None,
    max_retries: int = 3,
) -> BPE:
    """Learn a model from ``inputs`` on Ray (or this machine's cores), identical to :func:`hf_bpe.train`.

    ``inputs``: text files (a path, a glob pattern or a list of them; each file one document, as
    ``hf_bpe.train(files=...)``) or a ``ray.data.Dataset`` (each row of ``text_column`` one
    document, as ``hf_bpe.train(dataset)``). Runs on Ray when this process is connected to it
    (``ray.init``) or ``ray_address`` is given (``"auto"``, ``"local"``, ``"host:port"``...),
    otherwise on local threads; ``num_workers`` caps the tasks running at once (default: every
    CPU). ``prune_below``: see the module's documentation (the result is then no longer exact).
    ``task_memory_limit``: on Ray, the bytes of address space a group's count task may map beyond
    what its worker holds (``RLIMIT_AS``); a group past it fails with an error naming its files.
    A worker that dies (killed, out of memory) loses the groups it had counted: they are counted again
    by a new worker, each group at most ``max_retries`` more times, then an error names the group's
    files.

    >>> import pathlib, tempfile, hf_bpe, hf_bpe.distributed
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> for number, text in enumerate(["low lower lowest", "newer newest"]):
    ...     _ = (folder / f"{number}.txt").write_text(text)
    >>> model = hf_bpe.distributed.train(str(folder / "*.txt"), 260)
    >>> model == hf_bpe.train(files=sorted(folder.glob("*.txt")), vocab_size=260, show_progress=False)
    True
    """
    if prune_below is not None and (isinstance(prune_below, bool) or not isinstance(prune_below, int)
                                    or prune_below < 1):
        raise ValueError(f"prune_below must be a positive int or None (exact), got {prune_below!r}")
    if isinstance(group_bytes, bool) or not isinstance(group_bytes, int) or group_bytes < 1:
        raise ValueError(f"group_bytes must be a positive int, got {group_bytes!r}")
    if task_memory_limit is not None and (isinstance(task_memory_limit, bool) or not isinstance(task_memory_limit, int)
                                          or task_memory_limit < 1):
        raise ValueError(f"task_memory_limit must be a positive int (bytes) or None, got {task_memory_limit!r}")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
    split = patterns.resolve(pattern)
    specials = list(special_tokens) if not isinstance(special_tokens, str) else [special_tokens]
    # Check the options the way hf_bpe.train does, before any task starts.
    count_pieces(iter(["x"]), pattern=split, special_tokens=specials, show_progress=False, num_threads=1)
    _check_vocab_size(vocab_size, specials)
    dataset = _ray_dataset(inputs)
    with _cluster.connect(ray_address, num_workers) as cluster:
        if dataset is not None:
            if cluster.ray is None:  # pragma: no cover - a Dataset means Ray is connected
                raise RuntimeError("a ray.data.Dataset needs a Ray connection")
            return _train_dataset(cluster, dataset, vocab_size, split, specials, text_column, prune_below, name)
        paths = _inputs.expand(inputs)
        if cluster.ray is None:
            if task_memory_limit is not None:
                raise ValueError("task_memory_limit caps a Ray task's memory; on local cores the groups are counted "
                                 "in this process's threads: pass ray_address, or leave it None")
            if prune_below is None:
                # On one machine the counter spreads the files over the cores itself: no tables to add.
                counts = count_pieces(files=paths, pattern=split, special_tokens=specials, show_progress=False,
                                      num_threads=cluster.workers, allow_empty=True)
                return _learn(vocab_size, name, counts)
            groups = _inputs.group_by_size(paths, group_bytes)
            total: list[Any] = []  # each table is added in place as it comes, then dropped

            def add(_index: int, table: PieceCounts) -> None:
                if total:
                    total[0] += table
                else:
                    total.append(table)

            _cluster.run_local(lambda group: count_files(group, split, specials, prune_below), groups,
                               cluster.workers, add)
            return _learn(vocab_size, name, *total)
        groups = _inputs.group_by_size(paths, group_bytes)
        return _train_groups(cluster, groups, (split, specials, prune_below), vocab_size, name, task_memory_limit,
                             max_retries)


class GroupCounter:
    """A Ray actor (one per worker slot): counts the groups of files it is handed and adds each
    group's table into its own, so a table travels only once per worker, not once per group; at the
    end the workers' tables are added in a tree of actors and the merge loop runs in the actor that
    holds the sum."""

    def __init__(self, split: Any, specials: list[str], prune_below: int | None) -> None:
        self.job = (split, specials, prune_below)
        self.total = PieceCounts(pattern=split, special_tokens=specials)
        # Exact counting goes straight into one table; pruning needs each group's table apart.
        self.counter = None if prune_below else FileCounter(split, specials, num_threads=1)

    def count(self, paths: list[Path], memory_limit: int | None) -> None:
        """Count one group (pruned if asked) into this worker's table."""
        if self.counter is not None:
            with _cluster.memory_capped(memory_limit):
                self.counter.add_files(paths)
            return
        table = count_files(paths, *self.job, memory_limit)
        if len(self.total):
            self.total += table
        else:
            self.total = table

    def table(self) -> PieceCounts:
        if self.counter is not None:
            counted = self.counter.take()
            if len(self.total):
                self.total += counted
            else:
                self.total = counted
        return self.total

    def absorb(self, *tables: PieceCounts) -> int:
        """Add other workers' tables (a step of the combine tree)."""
        total = self.table()
        for table in tables:
            total += table
        return len(total)

    def learn(self, vocab_size: int, name: str | None) -> BPE:
        table, self.total = self.table(), PieceCounts(pattern=self.job[0], special_tokens=self.job[1])
        return _learn(vocab_size, name, table)


def _train_groups(cluster: _cluster.Cluster, groups: list[list[Path]], job: tuple[Any, list[str], int | None],
                  vocab_size: int, name: str | None, memory_limit: int | None, max_retries: int) -> BPE:
    """Groups of files counted by one :class:`GroupCounter` per worker, handed out as workers free
    up; a worker that dies loses its table, so its groups are counted again by a new one (each group
    at most ``max_retries`` times more). Then the tables are added :data:`FAN_IN` at a time, and the
    merge loop runs in the worker holding the sum."""
    ray = cluster.ray
    actor = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(GroupCounter)
    # The live workers, each with the groups it has counted so far.
    counted: dict[Any, list[int]] = {actor.remote(*job): [] for _ in range(min(cluster.workers, len(groups)))}
    failures = [0] * len(groups)
    waiting = list(range(len(groups)))
    running: dict[Any, tuple[Any, int]] = {}

    def hand_out(worker: Any) -> None:
        if waiting:
            index = waiting.pop(0)
            running[worker.count.remote(groups[index], memory_limit)] = (worker, index)

    try:
        for worker in list(counted):
            hand_out(worker)
        while running:
            [done], _ = ray.wait(list(running), num_returns=1)
            worker, index = running.pop(done)
            try:
                ray.get(done)
            except (ray.exceptions.RayActorError, ray.exceptions.OutOfMemoryError) as error:
                failures[index] += 1
                if failures[index] > max_retries:
                    raise _group_failure(ray, groups[index], error, memory_limit) from None
                waiting[:0] = [index, *counted.pop(worker)]  # counted again, first, by a new worker
                worker = actor.remote(*job)
                counted[worker] = []
                hand_out(worker)
                continue
            except ray.exceptions.RayTaskError as error:
                cause = getattr(error, "cause", None)
                if isinstance(cause, MemoryError):
                    raise _group_failure(ray, groups[index], cause, memory_limit) from None
                if isinstance(cause, (ValueError, OSError)):
                    raise cause from None  # bad input: the counter's message names the file
                raise
            counted[worker].append(index)
            hand_out(worker)
        busy = [worker for worker, done in counted.items() if done]
        while len(busy) > 1:  # each step adds FAN_IN - 1 workers' tables into one, all steps in parallel
            steps = [busy[start:start + FAN_IN] for start in range(0, len(busy), FAN_IN)]
            ray.get([first.absorb.remote(*(other.table.remote() for other in rest)) for first, *rest in steps])
            busy = [first for first, *_ in steps]
        return ray.get(busy[0].learn.remote(vocab_size, name))  # type: ignore[no-any-return]
    finally:
        for worker in counted:
            ray.kill(worker)


def count_files(paths: list[Path], split: Any, specials: list[str], prune_below: int | None,
                memory_limit: int | None = None) -> PieceCounts:
    """One group's table (a task): the files counted streaming, pruned if asked; with
    ``memory_limit``, under that cap (:func:`hf_bpe.distributed._cluster.memory_capped`)."""
    with _cluster.memory_capped(memory_limit):
        counts = count_pieces(files=paths, pattern=split, special_tokens=specials, show_progress=False,
                              num_threads=1, allow_empty=True)
    return prune(counts, prune_below) if prune_below else counts


def count_documents(batch: Any, split: Any, specials: list[str], text_column: str,
                    prune_below: int | None) -> dict[str, list[PieceCounts]]:
    """One block of a Ray Dataset (a pyarrow table) as its table, in a one-row block (Ray Data keeps
    the object in a column of Python objects, serialized by Ray)."""
    texts = batch.column(text_column).to_pylist()
    counts = count_pieces(iter(texts), pattern=split, special_tokens=specials, show_progress=False,
                          num_threads=1, allow_empty=True) if texts else PieceCounts(
                              pattern=split, special_tokens=specials)
    if prune_below:
        counts = prune(counts, prune_below)
    return {COUNTS_COLUMN: [counts]}


def prune(counts: PieceCounts, min_count: int) -> PieceCounts:
    """The table without the pieces counted fewer than ``min_count`` times.

    >>> from hf_bpe.train import PieceCounts
    >>> counts = PieceCounts({"the": 5, " cat": 1}, pattern="gpt2")
    >>> prune(counts, 2).most_common()
    [(b'the', 5)]
    """
    kept = {piece: number for piece, number in counts.to_dict().items() if number >= min_count}
    return PieceCounts(kept, pattern=counts.pattern, special_tokens=counts.special_tokens)


def combine(*tables: PieceCounts) -> PieceCounts:
    """The sum of count tables (a combine task of the tree)."""
    first: Any = tables[0]
    if len(tables) == 1:
        return first  # type: ignore[no-any-return]
    total = first + tables[1]  # a new table (the inputs stay as they are), then added to in place
    for table in tables[2:]:
        total += table
    return total  # type: ignore[no-any-return]


def _unpack_blocks(*blocks: Any) -> PieceCounts:
    """The sum of the tables in Ray Data output blocks (pyarrow tables with a column of tables)."""
    tables = [table for block in blocks for table in block.column(COUNTS_COLUMN).to_pylist()]
    return combine(*tables)


def _group_failure(ray: Any, group: list[Path], error: BaseException, memory_limit: int | None) -> Exception:
    """The error of a group of files whose counting worker died or ran out of memory."""
    if isinstance(error, (ray.exceptions.OutOfMemoryError, MemoryError)):
        what = f"its worker ran out of memory ({type(error).__name__})"
    else:
        what = f"its worker process died ({type(error).__name__}: killed, or out of memory)"
    if memory_limit is not None:
        what += f"; with task_memory_limit={memory_limit:,} bytes, most likely an allocation past it"
    files = ", ".join(map(str, group[:3])) + (f" and {len(group) - 3} more" if len(group) > 3 else "")
    return RuntimeError(f"counting the group of {files} failed: {what}. Nothing was trained: give the "
                        "tasks more memory, use a smaller group_bytes or prune_below, and run again")


def _learn(vocab_size: int, name: str | None, *tables: PieceCounts) -> BPE:
    """The last task: add the last tables and run the merge loop where they are."""
    return train_from_counts(combine(*tables), vocab_size, show_progress=False, name=name)


def _combine_tree(ray: Any, pending: list[Any], vocab_size: int, name: str | None) -> BPE:
    """Add tables :data:`FAN_IN` at a time as they finish, then learn in the task that adds the last."""
    add = ray.remote(num_cpus=1)(combine)
    ready: list[Any] = []
    while len(pending) + len(ready) > FAN_IN:
        if len(ready) >= FAN_IN:
            group, ready = ready[:FAN_IN], ready[FAN_IN:]
            pending.append(add.remote(*group))
            continue
        done, pending = ray.wait(pending, num_returns=1)
        ready.extend(done)
    learn = ray.remote(num_cpus=1)(_learn)
    return ray.get(learn.remote(vocab_size, name, *pending, *ready))  # type: ignore[no-any-return]


def _train_dataset(cluster: _cluster.Cluster, dataset: Any, vocab_size: int, split: Any, specials: list[str],
                   text_column: str, prune_below: int | None, name: str | None) -> BPE:
    columns = dataset.columns()
    if columns is not None and text_column not in columns:
        raise ValueError(f"the dataset has no column {text_column!r}; its columns are {columns}: "
                         "pass text_column=<the column that holds the text>")
    counted = dataset.select_columns([text_column]).map_batches(
        count_documents,
        batch_format="pyarrow",
        batch_size=None,
        fn_kwargs={"split": split, "specials": specials, "text_column": text_column,
                   "prune_below": prune_below},
        concurrency=cluster.workers,
        num_cpus=1,
    )
    unpack = cluster.ray.remote(num_cpus=1)(_unpack_blocks)
    blocks = counted.to_arrow_refs()
    tables = [unpack.remote(*blocks[start:start + FAN_IN]) for start in range(0, len(blocks), FAN_IN)]
    if not tables:
        raise ValueError("the dataset is empty (0 rows)")
    return _combine_tree(cluster.ray, tables, vocab_size, name)


def _ray_dataset(inputs: Any) -> Any:
    """``inputs`` if it is a ``ray.data.Dataset`` (Ray already imported by the caller), else None."""
    import sys

    data = sys.modules.get("ray.data")
    if data is not None and isinstance(inputs, data.Dataset):
        return inputs
    return None


def _check_vocab_size(vocab_size: Any, specials: list[str]) -> None:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    smallest = 256 + len(specials)
    if vocab_size <= smallest - 1:
        raise ValueError(f"vocab_size {vocab_size} is too small: the 256 byte tokens and the {len(specials)} "
                         f"special tokens alone take {smallest}; ask for more than {smallest} to learn merges")
