"""hf_bpe.distributed on a two-node Ray cluster started as a user would: ``ray start --head`` and a
worker node ``ray start --address=...`` (one CPU each, on this machine), with the driver in another
process reaching it by address. Models and token files equal the single-process ones byte for byte.

The cluster's processes are found by the temporary folder they were started with and stopped by
their pids afterwards (``ray stop`` would stop every Ray on the machine, not only this one).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from distributed_inputs import SPECIAL, file_bytes, write_corpus
from suite import scaled

import hf_bpe
import hf_bpe.distributed

pytestmark = pytest.mark.ray


def cluster_processes(folder: str) -> list[int]:
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(folder in part for part in process.info["cmdline"] or []):
                found.append(process.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def stop_cluster(folder: str) -> None:
    """Stop this cluster's processes (TERM, then KILL what is left after 3 s)."""
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        for pid in cluster_processes(folder):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while cluster_processes(folder) and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, dict[str, str]]]:
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'hf_bpe[ray]')")
    pytest.importorskip("psutil", reason="psutil (a dependency of Ray) finds the cluster's processes")
    ray_command = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    if ray_command is None:
        pytest.skip("the ray command is not on PATH")
    folder = tempfile.mkdtemp(prefix="rc", dir=tempfile.gettempdir())  # short: Ray's socket paths
    token = Path(folder) / "token"
    token.write_text(secrets.token_hex(32))
    # Ray 2.60 refuses a node joining without the cluster's token once ~/.ray/auth_token exists; one of our own.
    environment = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    try:
        head = subprocess.run(
            [ray_command, "start", "--head", "--port=0", "--node-ip-address=127.0.0.1", "--num-cpus=1",
             f"--temp-dir={folder}", "--include-dashboard=false", "--disable-usage-stats"],
            env=environment, capture_output=True, text=True, timeout=180, check=True,
        )
        port = re.search(r"--address='[^':]+:(\d+)'", head.stdout + head.stderr)
        assert port is not None, head.stdout + head.stderr
        address = f"127.0.0.1:{port.group(1)}"
        subprocess.run(
            [ray_command, "start", f"--address={address}", "--num-cpus=1", "--disable-usage-stats"],
            env=environment, capture_output=True, text=True, timeout=180, check=True,
        )
        yield address, environment
    finally:
        stop_cluster(folder)
        shutil.rmtree(folder, ignore_errors=True)


DRIVER = textwrap.dedent("""
    import sys, pathlib, ray, hf_bpe.distributed
    address, out, *paths = sys.argv[1:]
    out = pathlib.Path(out)
    ray.init(address=address)  # one connection for both calls (they use the session this process has)
    print("nodes", len([node for node in ray.nodes() if node["Alive"]]), "cpus", ray.cluster_resources()["CPU"])
    model = hf_bpe.distributed.train(paths, 600, special_tokens=["<|endoftext|>"], group_bytes=1,
                                     ray_address=address)
    model.save(out / "model.json")
    hf_bpe.distributed.tokenize_files(paths, model, out / "tokens", eot="<|endoftext|>", shard_size=1)
    ray.shutdown()
""")


def test_a_two_node_cluster_trains_and_tokenizes_like_one_process(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    address, environment = cluster
    paths = write_corpus(tmp_path / "corpus", 9, 6, scaled(60_000))
    out = tmp_path / "out"
    out.mkdir()
    run = subprocess.run([sys.executable, "-c", DRIVER, address, str(out), *map(str, paths)], env=environment,
                         check=False,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "nodes 2 cpus 2.0" in run.stdout
    reference = hf_bpe.train(files=paths, vocab_size=600, special_tokens=[SPECIAL], show_progress=False)
    assert hf_bpe.BPE.load(out / "model.json") == reference
    local = tmp_path / "local"
    hf_bpe.distributed.tokenize_files(paths, reference, local, eot=SPECIAL, shard_size=1, num_workers=1)
    assert file_bytes(out / "tokens") == file_bytes(local)
