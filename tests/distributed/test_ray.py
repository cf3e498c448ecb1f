"""hf_bpe.distributed on a real local Ray (2 CPUs, one session for the module): the models and files
of the single-process path, byte for byte; a killed worker, a shard past its memory limit, the
command line's --ray. Marked ``ray``; without Ray installed they skip saying so. The tests on local
cores are in ``test_local.py`` (this process is not connected to Ray there), the two-node
cluster in ``test_cluster.py``.
"""

from __future__ import annotations

import base64
import json
import os
import random
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import textgen
from distributed_inputs import (  # the module-scoped inputs and the single-process run, and the helpers
    SPECIAL,
    corpus,
    file_bytes,
    final_names,
    local_tokenized,
    mixed_inputs,
    same_model,
    write_corpus,
)
from suite import require_shared, scaled

import hf_bpe
import hf_bpe.distributed
from hf_bpe.distributed import ShardError

__all__ = ["corpus", "local_tokenized", "mixed_inputs"]  # fixtures: used by name, not by reference

RAY_REASON = "Ray is not installed (pip install 'hf_bpe[ray]'); the distributed tests need a real local Ray"


@pytest.fixture(scope="module")
def ray_session(local_tokenized: Path) -> Iterator[Any]:
    """One real local Ray for the module: 2 CPUs, no dashboard; shut down even when tests fail. The
    local references (``local_tokenized``) are written first: while this process is connected to Ray,
    hf_bpe.distributed runs on Ray."""
    ray = pytest.importorskip("ray", reason=RAY_REASON)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _temp_dir=os.path.join(tempfile.gettempdir(), "ray"))
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.mark.ray
def test_train_on_ray_is_train_on_the_same_files(ray_session: Any, corpus: list[Path]) -> None:
    # Groups of about one file each: 10 groups handed to 2 counting workers, their tables then added.
    size = max(path.stat().st_size for path in corpus)
    ours = hf_bpe.distributed.train([str(corpus[0].parent / "*.txt")], 1000, special_tokens=[SPECIAL],
                                    group_bytes=size)
    reference = hf_bpe.train(files=corpus, vocab_size=1000, special_tokens=[SPECIAL], show_progress=False)
    same_model(ours, reference, [path.read_text(encoding="utf-8") for path in corpus])


@pytest.mark.ray
def test_train_on_a_ray_dataset_is_train_on_its_rows(ray_session: Any) -> None:
    documents = textgen.documents(random.Random(5), scaled(100_000))
    dataset = ray_session.data.from_items([{"text": text, "id": i} for i, text in enumerate(documents)],
                                          override_num_blocks=7)
    ours = hf_bpe.distributed.train(dataset, 800, pattern="cl100k", special_tokens=[SPECIAL, "<|pad|>"])
    reference = hf_bpe.train(documents, 800, pattern="cl100k", special_tokens=[SPECIAL, "<|pad|>"],
                             show_progress=False)
    same_model(ours, reference, documents[:200])


@pytest.mark.ray
@pytest.mark.slow
def test_train_on_ray_is_train_on_the_shared_corpora(ray_session: Any) -> None:
    names = ["cs336/corpus.en", "cs336/tinystories_sample.txt", "corpora/taylorswift.txt"]
    if scaled(1) >= 10:
        names += ["corpora/wiki_el.txt", "corpora/wiki_ja.txt", "corpora/shakespeare_milton.txt"]
    paths = [require_shared(*name.split("/")) for name in names]
    ours = hf_bpe.distributed.train(paths, 2000, special_tokens=[SPECIAL], group_bytes=1)
    reference = hf_bpe.train(files=paths, vocab_size=2000, special_tokens=[SPECIAL], show_progress=False)
    same_model(ours, reference, [path.read_text(encoding="utf-8")[:20_000] for path in paths])


@pytest.mark.ray
def test_train_on_ray_names_a_file_that_is_not_utf8(ray_session: Any, corpus: list[Path], tmp_path: Path) -> None:
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt: not UTF-8 text: invalid byte 0xe9 at byte offset 3"):
        hf_bpe.distributed.train([*corpus[:3], bad], 300, group_bytes=1)


@pytest.mark.ray
def test_tokenize_on_ray_writes_the_same_files(
    ray_session: Any, mixed_inputs: tuple[list[Path], list[str]], local_tokenized: Path, tmp_path: Path
) -> None:
    paths, _ = mixed_inputs
    manifest = hf_bpe.distributed.tokenize_files(paths, "gpt2", tmp_path / "out", eot=SPECIAL, shard_size=scaled(20_000))
    assert file_bytes(tmp_path / "out") == file_bytes(local_tokenized)
    assert manifest == json.loads((local_tokenized / "manifest.json").read_text())


def shard_processes(ray: Any) -> list[int]:
    """The pids of Ray workers running a shard now (Ray titles a busy worker ``ray::write_shard``)."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if command.startswith("ray::write_shard"):
            found.append(process.info["pid"])
    return found


@pytest.mark.ray
def test_a_killed_worker_fails_the_shard_and_the_rerun_finishes_only_the_rest(
    ray_session: Any, tmp_path: Path
) -> None:
    paths = write_corpus(tmp_path / "corpus", 4, 16, scaled(250_000))
    reference = tmp_path / "reference"
    hf_bpe.distributed.tokenize_files(paths, "gpt2", reference, eot=SPECIAL, shard_size=1, num_workers=2)
    out = tmp_path / "out"
    failure: list[BaseException] = []

    def run() -> None:
        try:
            hf_bpe.distributed.tokenize_files(paths, "gpt2", out, eot=SPECIAL, shard_size=1, max_retries=0)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            failure.append(error)

    runner = threading.Thread(target=run)
    runner.start()
    killed = kill_one(runner, lambda: shard_processes(ray_session) if len(list(out.glob("shard-*.json"))) >= 2 else [],
                      seconds=60)
    runner.join(120)
    assert killed is not None, "no shard was running to kill: the corpus is too small for this machine"
    assert len(failure) == 1 and isinstance(failure[0], ShardError), failure
    assert "its worker process died" in str(failure[0]) and "run the same command again" in str(failure[0])
    assert not (out / "manifest.json").exists()
    finished = {path.name: path.stat().st_mtime_ns for path in out.glob("shard-*")}
    assert 2 <= len(finished) // 4 < 16
    hf_bpe.distributed.tokenize_files(paths, "gpt2", out, eot=SPECIAL, shard_size=1)
    assert file_bytes(out) == file_bytes(reference)
    assert all((out / name).stat().st_mtime_ns == mtime for name, mtime in finished.items())


@pytest.mark.ray
def test_a_shard_past_its_memory_limit_fails_naming_it_and_writes_nothing(ray_session: Any, tmp_path: Path) -> None:
    # A real allocation failure: the shard task caps its own address space (RLIMIT_AS) at 20 MB past
    # what its worker maps when the shard starts. One 62 MB document is one encode batch: its bytes, its
    # text and its Arrow copy alone take three times that, more than a worker keeps mapped from earlier
    # tasks, so the shard fails, in Python (MemoryError) or in native code (the worker aborts); either
    # way the error names the shard and the limit.
    resource = pytest.importorskip("resource", reason="task_memory_limit needs RLIMIT_AS (Unix)")
    (tmp_path / "small.txt").write_text("a small document", encoding="utf-8")
    (tmp_path / "big.txt").write_text("The quick brown fox jumps over the lazy dog 12345. " * 1_200_000,
                                      encoding="utf-8")
    inputs = [tmp_path / "small.txt", tmp_path / "big.txt"]
    out = tmp_path / "out"
    with pytest.raises(ShardError, match=r"shard-00001 \(.*big.txt\).*task_memory_limit=20,000,000 bytes"):
        hf_bpe.distributed.tokenize_files(inputs, "gpt2", out, shard_size=10, num_workers=1, max_retries=0,
                                    task_memory_limit=20_000_000)
    assert final_names(out) == {"hf_bpe.json", "plan.json"} | {f"shard-00000.{suffix}"
                                                             for suffix in ("bin", "idx", "parquet", "json")}
    # The limit is lifted when a shard ends: the workers Ray reuses have no cap left.
    limits = ray_session.get([ray_session.remote(lambda: resource.getrlimit(resource.RLIMIT_AS)[0]).remote()
                              for _ in range(4)])
    assert limits == [resource.RLIM_INFINITY] * 4


@pytest.mark.ray
def test_a_killed_counting_worker_loses_nothing(ray_session: Any, tmp_path: Path) -> None:
    # Six small files, then a large one. Two counting workers take the small ones first, so whichever
    # counts the large file has counted small ones before: killing it while it is busy for long (only
    # the large file keeps a worker busy for a tenth of a second) loses its table, and its groups are counted
    # again by a new worker. The model is still the single-process one.
    paths = write_corpus(tmp_path / "corpus", 5, 6, 12_000)
    large = tmp_path / "corpus" / "part-999.txt"
    block = SPECIAL.join(textgen.documents(random.Random(6), 1_000_000))
    large.write_text(SPECIAL.join([block] * scaled(30, 12)), encoding="utf-8", newline="")
    paths.append(large)
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(hf_bpe.distributed.train(paths, 600, special_tokens=[SPECIAL], group_bytes=1, max_retries=1))
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            result.append(error)

    runner = threading.Thread(target=run)
    runner.start()
    busy_since: dict[int, float] = {}

    def busy_for_long() -> list[int]:
        now, busy = time.monotonic(), counting_processes()
        for pid in set(busy_since) - set(busy):  # idle again: its next group starts a new clock
            del busy_since[pid]
        for pid in busy:
            busy_since.setdefault(pid, now)
        return [pid for pid, since in busy_since.items() if now - since > 0.1]

    killed = kill_one(runner, busy_for_long, seconds=120)
    runner.join(300)
    assert killed is not None, "no worker counted the large file for 0.1 s: the file is too small here"
    assert len(result) == 1 and isinstance(result[0], hf_bpe.BPE), result
    reference = hf_bpe.train(files=paths, vocab_size=600, special_tokens=[SPECIAL], show_progress=False)
    same_model(result[0], reference, [path.read_text(encoding="utf-8")[:20_000] for path in paths])


def kill_one(runner: threading.Thread, victims: Any, seconds: float) -> int | None:
    """While ``runner`` runs (at most ``seconds``), poll ``victims()`` (pids) and SIGKILL the first
    one it names; its pid, or None if it named none."""
    deadline = time.monotonic() + seconds
    while runner.is_alive() and time.monotonic() < deadline:
        for pid in victims():
            os.kill(pid, signal.SIGKILL)
            return pid  # type: ignore[no-any-return]
        time.sleep(0.005)
    return None


def counting_processes() -> list[int]:
    """The pids of Ray workers counting a group of files now (titled ``ray::GroupCounter.count``)."""
    import psutil

    return [process.info["pid"] for process in psutil.process_iter(["pid", "cmdline"])
            if " ".join(process.info["cmdline"] or []).startswith("ray::GroupCounter.count")]


@pytest.mark.ray
def test_cli_train_with_ray_saves_the_model_train_saves(ray_session: Any, corpus: list[Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from hf_bpe import cli

    # --ray followed by a glob: argparse takes the glob for the address; it is given back to FILES.
    pattern = str(corpus[0].parent / "*.txt")
    assert cli.main(["train", "--ray", pattern, "--vocab-size", "500", "--special-token", SPECIAL,
                     "--out", str(tmp_path / "ray"), "--quiet"]) == 0
    assert cli.main(["train", *map(str, corpus), "--vocab-size", "500", "--special-token", SPECIAL,
                     "--out", str(tmp_path / "here"), "--quiet"]) == 0
    ours = hf_bpe.BPE.load(tmp_path / "ray" / "hf_bpe.json")
    reference = hf_bpe.BPE.load(tmp_path / "here" / "hf_bpe.json")
    assert ours.mergeable_ranks == reference.mergeable_ranks and ours.special_tokens == reference.special_tokens
    with pytest.raises(SystemExit):
        cli.main(["train", "--ray", "--dataset", "x.jsonl", "--vocab-size", "500", "--out", str(tmp_path / "d")])
    assert "--ray trains on FILES" in capsys.readouterr().err


@pytest.mark.ray
def test_a_count_task_past_its_memory_limit_fails_naming_its_files(ray_session: Any, tmp_path: Path) -> None:
    # A real allocation failure in the Rust counter: 2 million distinct 8-letter words (a table of tens
    # of MB) counted under a cap of 20 MB past what the worker maps. The counter aborts the worker (or
    # Python raises MemoryError); the error names the group's file and the limit.
    pytest.importorskip("resource", reason="task_memory_limit needs RLIMIT_AS (Unix)")
    letters = base64.b32encode(random.Random(7).randbytes(5 * 2_000_000)).lower()  # 8 letters per 5 bytes
    (tmp_path / "small.txt").write_text("a small document", encoding="utf-8")
    (tmp_path / "words.txt").write_bytes(b" ".join(letters[i:i + 8] for i in range(0, len(letters), 8)))
    with pytest.raises(RuntimeError, match=r"counting the group of \S*words.txt failed: .*task_memory_limit="
                                           r"20,000,000 bytes.* Nothing was trained"):
        hf_bpe.distributed.train([tmp_path / "small.txt", tmp_path / "words.txt"], 300, group_bytes=1,
                                 task_memory_limit=20_000_000, max_retries=0)


@pytest.mark.ray
def test_cli_tokenize_with_ray_writes_what_local_cores_write(
    ray_session: Any, mixed_inputs: tuple[list[Path], list[str]], local_tokenized: Path, tmp_path: Path
) -> None:
    from hf_bpe import cli

    paths, _ = mixed_inputs
    # --ray followed by the first input: argparse takes it for the address; it is given back.
    status = cli.main(["tokenize", "--ray", *map(str, paths), "--tokenizer", "gpt2", "--eot", SPECIAL,
                       "--out", str(tmp_path / "out"), "--shard-size", str(scaled(20_000)),
                       "--task-memory-limit", "1G"])
    assert status == 0
    assert file_bytes(tmp_path / "out") == file_bytes(local_tokenized)


@pytest.mark.ray
def test_an_interrupted_driver_ends_its_running_shards_before_passing_the_interruption_on(
    ray_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (here: raised by the driver's first wait for a shard) cancels the running shard tasks
    and waits for them: when tokenize_files raises, none of its tasks still runs, so none writes."""
    paths = write_corpus(tmp_path / "corpus", 6, 8, scaled(100_000))
    real_wait = ray_session.wait
    in_flight: list[Any] = []

    def interrupted_wait(tasks: list[Any], **options: Any) -> Any:
        if not in_flight:
            in_flight.extend(tasks)
            raise KeyboardInterrupt
        return real_wait(tasks, **options)

    monkeypatch.setattr(ray_session, "wait", interrupted_wait)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        hf_bpe.distributed.tokenize_files(paths, "gpt2", out, eot=SPECIAL, shard_size=1, num_workers=2)
    _, still_running = real_wait(in_flight, num_returns=len(in_flight), timeout=0)
    assert len(in_flight) == 2 and still_running == []
    monkeypatch.undo()
    hf_bpe.distributed.tokenize_files(paths, "gpt2", out, eot=SPECIAL, shard_size=1)  # the rerun finishes
    assert not (out / ".hf_bpe.lock").exists() and (out / "manifest.json").exists()
