"""``benchmarks/peers.py --quick`` runs end to end with the peers of the test extra (tiktoken,
tokenizers) and prints its table. A smoke test of the program: no timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tiktoken", reason="the benchmark's reference; pip install -e '.[test]'")
pytest.importorskip("tokenizers", reason="a peer of the benchmark; pip install -e '.[test]'")

REPO = Path(__file__).resolve().parents[2]


def test_quick_run_prints_the_table(tmp_path: Path) -> None:
    # A corpus path that does not exist: the benchmark falls back to generated text, so the test
    # needs no shared data.
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "peers.py"), "--quick", "--peers", "tiktoken,tokenizers",
         "--corpus", str(tmp_path / "no-corpus"), "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, timeout=900, check=False, cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    header = "| row | encoding | hf_bpe MB/s | fastest exact peer | peer MB/s | hf_bpe / peer |"
    assert header in out, out[-3000:]
    summary = out.split(header, 1)[1].split("\n\n", 1)[0].splitlines()
    doc = [line for line in summary if line.startswith("| doc | cl100k_base |")]
    assert len(doc) == 1 and "| tiktoken |" in doc[0], out[-3000:]
    detail = [line for line in out.splitlines() if line.startswith("| doc | cl100k_base | tiktoken |")]
    assert len(detail) == 1 and detail[0].endswith("| exact |"), out[-3000:]
    assert "skipping gigatoken" not in out  # peers not asked for are not mentioned
