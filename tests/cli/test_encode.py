"""``hf-bpe encode``, ``count``, ``decode``, ``--version`` and ``python -m hf_bpe``."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import textgen
from suite import scaled

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


def test_with_lines_each_line_is_a_text_encoded_in_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [line for doc in textgen.documents(random.Random(5), 200_000) for line in doc.splitlines()]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
    enc = hf_bpe.get_encoding("o200k_base")
    expected = [len(ids) for ids in enc.encode_ordinary_batch(lines)]
    assert run(capsys, "count", "o200k_base", "--lines", "--file", str(path)) == f"{sum(expected)}\n"
    assert run(capsys, "count", "o200k_base", "--lines", "--each", "--file", str(path)).split() == list(
        map(str, expected))
    ids_lines = run(capsys, "encode", "o200k_base", "--lines", "--file", str(path)).splitlines()
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
    with pytest.raises(SystemExit) as stopped:  # a bad source is bad usage, as for convert, inspect and view
        main(["count", "cl100k", "x"])
    assert stopped.value.code == 2
    assert "unknown tokenizer 'cl100k': it is neither a named encoding (cl100k_base" in capsys.readouterr().err


def test_version_and_python_dash_m() -> None:
    done = subprocess.run([sys.executable, "-m", "hf_bpe", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"hf-bpe {hf_bpe.__version__}"
    for command in ("encode", "count", "decode"):
        help_text = subprocess.run([sys.executable, "-m", "hf_bpe", command, "--help"], capture_output=True, text=True,
                                   check=True).stdout
        assert "examples:" in help_text and f"hf-bpe {command}" in help_text


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_a_whole_file_counts_and_encodes_as_the_tokenizer_encodes_its_contents(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tiktoken_encoding: Callable[[str], Any],
) -> None:
    """Without --lines a file is one text: its count is len(tiktoken's encode of the contents), cut
    into small parts here (CHUNK_BYTES lowered) so that many cuts are crossed, newlines of every kind
    included."""
    from hf_bpe.cli import _encode

    rng = random.Random(17)
    documents = textgen.documents(rng, scaled(300_000))
    text = "".join(doc + rng.choice(["\n", "\n\n", "\r\n", ".\n/", " \n", "\n "]) for doc in documents)
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8", newline="")
    expected = tiktoken_encoding(name).encode_ordinary(text)
    monkeypatch.setattr(_encode, "CHUNK_BYTES", 2_000)
    assert len(list(_encode.chunks(hf_bpe.get_encoding(name), text.encode("utf-8"), False, size=2_000))) > 10
    assert run(capsys, "count", name, "--file", str(path)) == f"{len(expected)}\n"
    assert run(capsys, "encode", name, "--file", str(path)).split() == list(map(str, expected))
    process = subprocess.run([sys.executable, "-m", "hf_bpe", "count", name], input=text.encode(),
                             capture_output=True, check=True)
    assert process.stdout.decode().strip() == str(len(expected))


def test_every_command_has_examples_in_its_help() -> None:
    from hf_bpe.cli import COMMANDS, parser

    subparsers = next(action for action in parser()._actions if action.choices and "train" in action.choices)
    assert sorted(subparsers.choices) == sorted(command.__name__.rsplit(".", 1)[1].removeprefix("_")
                                                 for command in COMMANDS)
    for name, command_parser in subparsers.choices.items():
        assert f"examples:\n  hf-bpe {name} " in command_parser.format_help(), name


def test_lines_end_at_newlines_across_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines end at \\n or \\r\\n (not kept), a lone \\r stays in its line, the last line needs no
    newline; the file is read a few characters at a time here so that reads cut lines and \\r\\n pairs."""
    from hf_bpe.cli import _encode

    lines = ["first line", "", "crlf line", "a\rlone cr", " spaced ", "last without newline"]
    path = tmp_path / "lines.txt"
    path.write_bytes(b"first line\n\ncrlf line\r\na\rlone cr\n spaced \nlast without newline")
    monkeypatch.setattr(_encode, "READ_CHARS", 3)
    out = run(capsys, "encode", "gpt2", "--lines", "--format", "jsonl", "--file", str(path))
    assert [json.loads(row)["text"] for row in out.splitlines()] == lines
    enc = hf_bpe.get_encoding("gpt2")
    assert run(capsys, "count", "gpt2", "--lines", "--each", "--file", str(path)).split() == [
        str(len(enc.encode_ordinary(line))) for line in lines]


def test_a_file_that_is_not_utf8_is_named_with_the_bad_bytes_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The file is read as bytes and decoded a part at a time: the error still names the file and the
    offset in the whole file (here in the third part)."""
    from hf_bpe.cli import _encode

    path = tmp_path / "latin1.txt"
    path.write_bytes(b"a line.\n" * 100 + b"caf\xe9\n" + b"a line.\n" * 10)
    monkeypatch.setattr(_encode, "CHUNK_BYTES", 300)
    assert main(["count", "gpt2", "--file", str(path)]) == 1
    assert f"{path} is not UTF-8 text: byte 803 is b'\\xe9'" in capsys.readouterr().err


def test_a_whole_files_count_with_special_tokens_is_tiktokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tiktoken_encoding: Callable[[str], Any],
) -> None:
    from hf_bpe.cli import _encode

    rng = random.Random(23)
    text = "".join(doc + rng.choice(["\n<|endoftext|>", "<|fim_prefix|>\n", "\n"]) for doc in
                   textgen.documents(rng, scaled(100_000)))
    path = tmp_path / "special.txt"
    path.write_text(text, encoding="utf-8", newline="")
    monkeypatch.setattr(_encode, "CHUNK_BYTES", 2_000)
    theirs = tiktoken_encoding("cl100k_base")
    assert run(capsys, "count", "cl100k_base", "--file", str(path), "--allow-special") == \
        f"{len(theirs.encode(text, allowed_special='all'))}\n"
    assert run(capsys, "count", "cl100k_base", "--file", str(path)) == f"{len(theirs.encode_ordinary(text))}\n"


@pytest.mark.parametrize("read", [3, 20])
def test_a_crlf_split_between_two_reads_still_ends_the_line(
    read: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With 20 characters (bytes) a read, the first read ends with the \\r of "crlf line\\r\\n" and the
    second holds no \\r: the line must still lose it (it did not when only the new read was searched)."""
    from hf_bpe.cli import _encode

    path = tmp_path / "lines.txt"
    path.write_bytes(b"a\rlone cr\ncrlf line\r\nlast")
    monkeypatch.setattr(_encode, "READ_CHARS", read)
    lines = ["a\rlone cr", "crlf line", "last"]
    enc = hf_bpe.get_encoding("gpt2")
    assert run(capsys, "count", "gpt2", "--lines", "--each", "--file", str(path)).split() == [
        str(len(enc.encode_ordinary(line))) for line in lines]
    out = run(capsys, "encode", "gpt2", "--lines", "--format", "jsonl", "--file", str(path))
    assert [json.loads(row)["text"] for row in out.splitlines()] == lines


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"ok\n" * 9000 + b"caf\xe9\nok\n")
    assert main(["count", "gpt2", "--lines", "--file", str(path)]) == 1
    assert "line 9,001 of the input is not UTF-8 text: byte 3 is b'\\xe9'" in capsys.readouterr().err
