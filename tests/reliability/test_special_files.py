"""Paths that are not regular files (a FIFO, a folder, a symlink loop, a missing or unreadable file)
named like tokenizer files: every loader refuses them with :class:`~hf_bpe.errors.TokenizerFileError`
naming the path, before opening them. Opening a FIFO for reading blocks until a writer comes, so each
loader runs in a thread with a bound: a regression fails the test (and the FIFO is then opened for
writing, which releases the blocked reader) instead of hanging the suite."""

from __future__ import annotations

import contextlib
import io
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import conversion.gguf
import conversion.gpt2
import conversion.hf
import conversion.sentencepiece
import conversion.tiktoken
import hf_bpe
from hf_bpe import cli
from hf_bpe._sources import SourceError
from hf_bpe.errors import TokenizerFileError

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")

HANG_BOUND = 120.0
"""Seconds a loader may take before the test calls it blocked (a refusal takes milliseconds; the bound
only turns a hang into a failure)."""


def outcome(call: Callable[[], Any], fifos: list[Path]) -> BaseException | Any:
    """What ``call`` raised (or returned), run in a thread; fails when it is still running after
    :data:`HANG_BOUND`, after releasing it by opening ``fifos`` for writing."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as error:  # noqa: BLE001 - the test inspects it
            result.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_BOUND)
    if thread.is_alive():
        for fifo in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(HANG_BOUND)
        pytest.fail(f"blocked on the FIFO {fifos}")
    return result[0]


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def assert_refused(error: object, path: Path, problem: str) -> None:
    assert isinstance(error, TokenizerFileError), repr(error)
    assert error.path == os.fspath(path)
    assert problem in str(error)


FILE_LOADERS: dict[str, tuple[str, Callable[[Path], Any]]] = {
    "hf.load": ("tokenizer.json", conversion.hf.load),
    "tiktoken.load": ("cl100k_base.tiktoken", lambda path: conversion.tiktoken.load(path, pattern="cl100k")),
    "tiktoken.read_ranks": ("r.tiktoken", conversion.tiktoken.read_ranks),
    "tiktoken.load_tekken": ("tekken.json", conversion.tiktoken.load_tekken),
    "gpt2.read_encoder": ("vocab.json", conversion.gpt2.read_encoder),
    "sentencepiece.load": ("tokenizer.model", conversion.sentencepiece.load),
    "gguf.read": ("model.gguf", conversion.gguf.read),
    "gguf.load": ("model.gguf", conversion.gguf.load),
    "BPE.load": ("hf_bpe.json", hf_bpe.BPE.load),
    "hf_bpe.load": ("tokenizer.json", hf_bpe.load),
    "hf_bpe.load(format=)": ("x.model", lambda path: hf_bpe.load(path, format="sentencepiece")),
}


@pytest.mark.parametrize("loader", FILE_LOADERS)
def test_every_file_loader_refuses_a_fifo_naming_it(tmp_path: Path, loader: str) -> None:
    name, load = FILE_LOADERS[loader]
    path = fifo(tmp_path / name)
    assert_refused(outcome(lambda: load(path), [path]), path, "a FIFO (named pipe), not a regular file")


@pytest.mark.parametrize("loader", FILE_LOADERS)
def test_every_file_loader_refuses_a_folder_naming_it(tmp_path: Path, loader: str) -> None:
    name, load = FILE_LOADERS[loader]
    (tmp_path / name).mkdir()
    error = outcome(lambda: load(tmp_path / name), [])
    if loader == "hf_bpe.load" or loader == "hf_bpe.load(format=)":  # a folder is a source; this one is empty
        assert isinstance(error, SourceError) and str(tmp_path / name) in str(error), repr(error)
        return
    assert_refused(error, tmp_path / name, "a folder, not a file")
    assert isinstance(error, IsADirectoryError)  # and still what callers catching OSError expect


@pytest.mark.parametrize("loader", FILE_LOADERS)
def test_every_file_loader_names_a_symlink_loop_and_a_missing_file(tmp_path: Path, loader: str) -> None:
    name, load = FILE_LOADERS[loader]
    loop, other = tmp_path / name, tmp_path / "other"
    loop.symlink_to(other)
    other.symlink_to(loop)
    assert_refused(outcome(lambda: load(loop), []), loop, "a symlink loop")
    missing = tmp_path / "missing" / name
    error = outcome(lambda: load(missing), [])
    if loader.startswith("hf_bpe.load"):  # a source that does not exist: named by SourceError or the file error
        assert str(missing) in str(error) and isinstance(error, ValueError), repr(error)
        return
    assert_refused(error, missing, "no such file")
    assert isinstance(error, FileNotFoundError)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_named_with_the_fix(tmp_path: Path) -> None:
    path = hf_bpe.get_encoding("gpt2").save(tmp_path / "model.json")
    path.chmod(0)
    error = outcome(lambda: hf_bpe.BPE.load(path), [])
    assert_refused(error, path, "permission denied; make the file readable")
    assert isinstance(error, PermissionError)


@pytest.mark.parametrize("which", ["vocab.json", "merges.txt"])
def test_gpt2_files_refuse_a_fifo(tmp_path: Path, which: str) -> None:
    conversion.gpt2.save(hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, "gpt2"), tmp_path)
    (tmp_path / which).unlink()
    path = fifo(tmp_path / which)
    error = outcome(lambda: conversion.gpt2.load(tmp_path / "vocab.json", tmp_path / "merges.txt"), [path])
    assert_refused(error, path, "a FIFO")


def small_folder(folder: Path) -> Path:
    from hf_bpe.transformers import save_tokenizer_folder

    save_tokenizer_folder(hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, "gpt2",
                                     {"<|endoftext|>": 257}), folder, eos_token="<|endoftext|>")
    return folder


@pytest.mark.parametrize("name", ["hf_bpe.json", "tokenizer_config.json", "special_tokens_map.json",
                                  "added_tokens.json", "tokenizer.json", "chat_template.jinja"])
def test_from_pretrained_refuses_a_fifo_among_the_folder_files(tmp_path: Path, name: str) -> None:
    pytest.importorskip("transformers")
    from hf_bpe import BPETokenizer

    folder = small_folder(tmp_path / "tok")
    (folder / name).unlink(missing_ok=True)
    path = fifo(folder / name)
    assert_refused(outcome(lambda: BPETokenizer.from_pretrained(folder), [path]), path, "a FIFO")


def test_hf_bpe_load_of_a_folder_refuses_a_fifo_model_file(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    folder = small_folder(tmp_path / "tok")
    (folder / "hf_bpe.json").unlink()
    path = fifo(folder / "hf_bpe.json")
    error = outcome(lambda: hf_bpe.load(folder), [path])
    assert isinstance(error, ValueError) and str(path) in str(error) and "FIFO" in str(error), repr(error)


def run_cli(*argv: str | Path, fifos: list[Path]) -> tuple[int, str]:
    """The exit status and standard error of ``hf-bpe ARGV``, run in this process."""
    errors = io.StringIO()

    def call() -> int:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            try:
                return cli.main([os.fspath(argument) for argument in argv])
            except SystemExit as stop:  # argparse's error()
                return int(stop.code or 0)

    status = outcome(call, fifos)
    assert isinstance(status, int), repr(status)
    return status, errors.getvalue()


@pytest.mark.parametrize("command", ["inspect", "convert"])
@pytest.mark.parametrize("source_format", [None, "tiktoken", "hf", "sentencepiece", "gguf", "hf_bpe"])
def test_cli_refuses_a_fifo_source(tmp_path: Path, command: str, source_format: str | None) -> None:
    path = fifo(tmp_path / "tokenizer.json")
    options = ["--from", source_format, "--pattern", "gpt2"] if source_format else []
    argv = [command, path, *(["--to", "hf", tmp_path / "out.json"] if command == "convert" else []), *options]
    status, errors = run_cli(*argv, fifos=[path])
    assert status != 0 and f"{path}: a FIFO (named pipe), not a regular file" in errors, errors
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(("source_format", "says"), [
    ("hf", "has no tokenizer.json"), ("folder", "has no hf_bpe.json"),
    ("tiktoken", "is a folder, and the format tiktoken is read from a file"),
    ("gguf", "is a folder, and the format gguf is read from a file"),
])
def test_cli_convert_of_a_folder_says_what_it_lacks(tmp_path: Path, source_format: str, says: str) -> None:
    (tmp_path / "empty").mkdir()
    status, errors = run_cli("convert", tmp_path / "empty", "--from", source_format, "--pattern", "gpt2",
                             "--to", "hf", tmp_path / "out.json", fifos=[])
    assert status != 0 and says in errors and str(tmp_path / "empty") in errors, errors
    assert "No such file" not in errors


def test_permission_denied_says_how_to_fix_it(tmp_path: Path) -> None:
    """(Root reads any file, so this checks the translation of the operating system's error.)"""
    import errno

    from hf_bpe._io import file_error

    error = file_error(tmp_path / "x.json", PermissionError(errno.EACCES, "Permission denied"))
    assert_refused(error, tmp_path / "x.json", "permission denied; make the file readable")
    assert isinstance(error, PermissionError) and error.errno == errno.EACCES
