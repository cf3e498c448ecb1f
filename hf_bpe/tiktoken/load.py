"""tiktoken's ``tiktoken.load``: read and write rank files (``from hf_bpe.tiktoken.load import
load_tiktoken_bpe`` where you had ``from tiktoken.load import load_tiktoken_bpe``).

:func:`load_tiktoken_bpe` reads a local file as tiktoken does (:func:`conversion.tiktoken.read_ranks`,
which also refuses what ``tiktoken.Encoding`` would refuse later), and an address the way
:mod:`hf_bpe._encodings` gets OpenAI's files: tiktoken's cache (same folder, same file name), the
packages of ``hf_bpe[encodings]``, then a download checked by SHA-256. hf_bpe downloads only what it
can check: an address that is not one of OpenAI's files needs ``expected_hash``. tiktoken's other
helpers (``read_file``, ``read_file_cached``, ``data_gym_to_mergeable_bpe_ranks``) are not here:
GPT-2's ``encoder.json`` + ``vocab.bpe`` are read by ``conversion.gpt2.load`` or
``hf_bpe.get_encoding("gpt2")``.

>>> import os, tempfile
>>> from hf_bpe.tiktoken.load import dump_tiktoken_bpe, load_tiktoken_bpe
>>> path = os.path.join(tempfile.mkdtemp(), "tiny.tiktoken")
>>> dump_tiktoken_bpe({b"a": 0, b"b": 1, b"ab": 2}, path)
>>> open(path, "rb").read()
b'YQ== 0\\nYg== 1\\nYWI= 2\\n'
>>> load_tiktoken_bpe(path)
{b'a': 0, b'b': 1, b'ab': 2}
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from conversion.tiktoken import dump_ranks, read_ranks
from hf_bpe import _encodings
from hf_bpe._io import atomic_write, read_file

__all__ = ["dump_tiktoken_bpe", "load_tiktoken_bpe"]

_OPENAI_FILES = (_encodings.R50K, _encodings.P50K, _encodings.CL100K, _encodings.O200K)


def load_tiktoken_bpe(tiktoken_bpe_file: str | os.PathLike[str], expected_hash: str | None = None) -> dict[bytes, int]:
    """``{token bytes: rank}`` from a rank file's path or address; ``ValueError`` when
    ``expected_hash`` (a SHA-256 in hex) is given and the file's differs, as in tiktoken.

    >>> from hf_bpe.tiktoken.load import load_tiktoken_bpe
    >>> load_tiktoken_bpe("s3://bucket/ranks.tiktoken")
    Traceback (most recent call last):
    ...
    ValueError: s3://bucket/ranks.tiktoken: hf_bpe reads rank files from a path or an http(s) address, not s3://; download the file and pass its path
    """
    source = os.fspath(tiktoken_bpe_file)
    if "://" not in source:
        if expected_hash is not None:
            _check_hash(source, read_file(source), expected_hash)
        return read_ranks(source)
    if not source.startswith(("http://", "https://")):
        raise ValueError(f"{source}: hf_bpe reads rank files from a path or an http(s) address, not "
                         f"{source.split('://')[0]}://; download the file and pass its path")
    known = next((remote for remote in _OPENAI_FILES if remote.url == source), None)
    if known is not None and expected_hash not in (None, known.sha256):
        raise ValueError(f"Hash mismatch for {source}: expected_hash {expected_hash} is not the SHA-256 of the "
                         f"official file, {known.sha256}")
    if known is None:
        if expected_hash is None:
            raise ValueError(f"{source}: hf_bpe downloads only files it can check; pass expected_hash= (the file's "
                             "SHA-256), or download the file and pass its path")
        known = _encodings.RemoteFile(source.rsplit("/", 1)[-1] or "ranks.tiktoken", source, expected_hash.lower(), ())
    found, _ = _encodings.find_file(known)
    return read_ranks(found)


def dump_tiktoken_bpe(bpe_ranks: dict[bytes, int], tiktoken_bpe_file: str | os.PathLike[str]) -> None:
    """Write ``bpe_ranks`` as a rank file, byte for byte as tiktoken writes it (atomically; a local
    path, where tiktoken takes any ``blobfile`` address), with :func:`conversion.tiktoken.dump_ranks`
    (which spells the empty token ``=``, so that the file reads back)."""
    atomic_write(Path(tiktoken_bpe_file), dump_ranks(bpe_ranks))


def _check_hash(source: str, data: bytes, expected_hash: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_hash.lower():
        raise ValueError(f"Hash mismatch for {source}: its SHA-256 is {digest}, expected {expected_hash}")
