"""The static checks, run by the suite so CI keeps them: ``ruff`` on the repository and ``mypy``
on the Python package (``hf_bpe`` and ``conversion``). Both come with the ``test`` extra; each test skips,
naming the package, where it is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(module: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip(module, reason=f"{module} is not installed (it comes with pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", module, *arguments], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_finds_nothing_in_the_package() -> None:
    done = _run("mypy", "hf_bpe", "conversion")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success" in done.stdout, done.stdout
