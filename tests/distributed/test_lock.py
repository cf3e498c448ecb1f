"""One tokenize_files run at a time in an output folder: two runs started together, a live holder and
a stale lock (hf_bpe/distributed/_lock.py)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed_inputs import SPECIAL, write_corpus

import hf_bpe
import hf_bpe.distributed
from hf_bpe.distributed._lock import LOCK_NAME, FolderInUseError

RUN = """
import json, sys, time, pathlib
import hf_bpe.distributed
go, out, eot = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3] or None
inputs, model = json.loads(sys.argv[4]), hf_bpe.BPE.load(sys.argv[5])
go.with_name(f"ready-{eot}").touch()
while not go.exists():
    time.sleep(0.0002)
try:
    hf_bpe.distributed.tokenize_files(inputs, model, out, eot=eot, shard_size=20_000, num_workers=1)
except Exception as error:
    print(f"{type(error).__name__}: {error}")
    sys.exit(3)
"""


def test_two_runs_started_together_in_one_folder_one_refused(tmp_path: Path) -> None:
    """Two runs with different options start into one empty folder at the same moment: exactly one
    succeeds, and the folder holds its plan, its manifest and its shards only."""
    paths = write_corpus(tmp_path / "corpus", 5, 6, 200_000)
    out = tmp_path / "out"
    go = tmp_path / "go"
    inputs = json.dumps([str(path) for path in paths])
    model = hf_bpe.train(files=paths, vocab_size=300, special_tokens=[SPECIAL], show_progress=False)
    model_file = model.save(tmp_path / "model.json")  # small: little to do between the start and the claim
    runs = [subprocess.Popen([sys.executable, "-c", RUN, str(go), str(out), eot, inputs, str(model_file)],
                             stdout=subprocess.PIPE, text=True) for eot in (SPECIAL, "")]
    while len(list(tmp_path.glob("ready-*"))) < len(runs) and all(run.poll() is None for run in runs):
        time.sleep(0.01)  # both have imported hf_bpe and wait for the file below
    go.touch()
    results = [(run.wait(timeout=300), run.stdout.read()) for run in runs]  # type: ignore[union-attr]
    assert sorted(code for code, _ in results) == [0, 3], results
    winner = [code for code, _ in results].index(0)
    loser_message = results[1 - winner][1]
    if loser_message.startswith("FolderInUseError"):  # refused while the winner held the folder
        assert f"{out} is in use by another run (process {runs[winner].pid} on {socket.gethostname()}" in loser_message
    else:  # started after the winner finished: refused as another run's folder
        assert loser_message.startswith("ValueError") and "holds shards of another run" in loser_message
    plan = json.loads((out / "plan.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    eot = model.special_tokens[SPECIAL] if winner == 0 else None
    assert plan["eot"] == manifest["eot"] == eot
    recorded = {name for shard in manifest["shards"] for name in shard["files"]}
    recorded |= {f"{shard['name']}.json" for shard in manifest["shards"]}
    assert {path.name for path in out.iterdir()} == recorded | {"plan.json", "manifest.json", "hf_bpe.json"}
    for shard in manifest["shards"]:
        for name, entry in shard["files"].items():
            assert hashlib.sha256((out / name).read_bytes()).hexdigest() == entry["sha256"], name


def test_a_live_holder_refuses_the_run_and_a_stale_lock_is_taken_over(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello world", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (out / LOCK_NAME).write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(), "token": "x"}))
        with pytest.raises(FolderInUseError, match=rf"{out} is in use by another run \(process {holder.pid} on "):
            hf_bpe.distributed.tokenize_files([tmp_path / "a.txt"], "gpt2", out)
        assert sorted(path.name for path in out.iterdir()) == [LOCK_NAME]  # nothing written
    finally:
        holder.kill()
        holder.wait()
    with pytest.warns(UserWarning, match=rf"took over the lock of process {holder.pid} .* no longer running"):
        manifest = hf_bpe.distributed.tokenize_files([tmp_path / "a.txt"], "gpt2", out)
    assert manifest["num_tokens"] == 2
    assert not (out / LOCK_NAME).exists()


def test_a_lock_of_another_host_or_unreadable_is_never_taken_over(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello world", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    for content, holder in [(json.dumps({"pid": os.getpid(), "host": "elsewhere"}), "process .* on elsewhere"),
                            ("garbage", "process unknown on unknown")]:
        (out / LOCK_NAME).write_text(content)
        with pytest.raises(FolderInUseError, match=f"is in use by another run \\({holder}.*delete .*{LOCK_NAME}"):
            hf_bpe.distributed.tokenize_files([tmp_path / "a.txt"], "gpt2", out)
        assert (out / LOCK_NAME).read_text() == content
