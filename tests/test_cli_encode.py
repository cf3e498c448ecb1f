"""``hf-bpe encode``, ``count``, ``decode``, ``--version`` and ``python -m hf_bpe``."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import textgen

import hf_bpe
from hf_bpe.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_encode_arguments_give_the_models_ids(capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "encode", "cl100k_base", "hello world", "<|endoftext|> hi")
    enc = hf_bpe.get_encoding("cl100k_base")
    assert out.splitlines() == [" ".join(map(str, enc.encode_ordinary(t))) for t in ("hello world", "<|endoftext|> hi")]
    special = run(capsys, "encode", "cl100k_base", "--allow-special", "--format", "jsonl", "<|endoftext|> hi")
    assert json.loads(special) == {"text": "<|endoftext|> hi", "ids": [100257, 15960], "tokens": ["<|endoftext|>", " hi"],
                                   "count": 2}


def test_files_are_read_line_by_line_and_counted_in_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [line for doc in textgen.documents(random.Random(5), 200_000) for line in doc.splitlines()]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
    enc = hf_bpe.get_encoding("o200k_base")
    expected = [len(ids) for ids in enc.encode_ordinary_batch(lines)]
    assert run(capsys, "count", "o200k_base", "--file", str(path)) == f"{sum(expected)}\n"
    assert run(capsys, "count", "o200k_base", "--each", "--file", str(path)).split() == list(map(str, expected))
    ids_lines = run(capsys, "encode", "o200k_base", "--file", str(path)).splitlines()
    assert len(ids_lines) == len(lines)
    decoded = tmp_path / "ids.txt"
    decoded.write_text("\n".join(ids_lines) + "\n")
    process = subprocess.run([sys.executable, "-m", "hf_bpe", "decode", "o200k_base"], input="\n".join(ids_lines[:50]),
                             capture_output=True, text=True, check=True)
    assert process.stdout.split("\n")[:50] == [enc.decode(enc.encode_ordinary(line)) for line in lines[:50]]


def test_decode_takes_ids_as_arguments_or_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "decode", "gpt2", "31373", "995") == "hello world\n"
    assert run(capsys, "decode", "gpt2", "[31373,", "995]") == "hello world\n"
    assert main(["decode", "gpt2", "hello"]) == 1
    assert "is not a list of integer ids" in capsys.readouterr().err


def test_an_unknown_tokenizer_says_what_it_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["count", "cl100k", "x"]) == 1
    assert "neither a named encoding (cl100k_base" in capsys.readouterr().err


def test_version_and_python_dash_m() -> None:
    done = subprocess.run([sys.executable, "-m", "hf_bpe", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"hf-bpe {hf_bpe.__version__}"
    for command in ("encode", "count", "decode"):
        help_text = subprocess.run([sys.executable, "-m", "hf_bpe", command, "--help"], capture_output=True, text=True,
                                   check=True).stdout
        assert "examples:" in help_text and f"hf-bpe {command}" in help_text
