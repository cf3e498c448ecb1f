"""tiktoken's rank files (``.tiktoken``): one ``base64(token) rank`` line per mergeable token.

The reader sits below both the model layer (:mod:`hf_bpe.encodings` reads OpenAI's files with it) and
:mod:`conversion.tiktoken` (which re-exports it and writes the format), so that neither imports the
other.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
from collections.abc import Iterable, Iterator

from hf_bpe._io import read_file
from hf_bpe.errors import TokenizerFileError

__all__ = ["read_ranks"]


def read_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """Parse a rank file into ``{token bytes: rank}`` exactly as tiktoken's ``load_tiktoken_bpe``
    reads it, so that a model loaded from it encodes as ``tiktoken.Encoding`` built from the same
    file:

    - lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (``bytes.splitlines``); empty lines are skipped;
    - each other line is two fields separated by ASCII whitespace (``bytes.split``; whitespace
      around them is ignored): a base64 token, decoded by ``base64.b64decode`` as tiktoken decodes
      it (characters outside the base64 alphabet are dropped, so ``=`` alone is the empty token
      ``b""``, which Whisper's ``multilingual.tiktoken`` holds), and a rank, read by ``int``;
    - a token given twice takes the rank of its last line (tiktoken fills a dict);
    - gzip-compressed files are decompressed first (tiktoken reads only plain files).

    A line tiktoken refuses (a line of only whitespace, one field or three, base64 with the wrong
    length, a rank that is not an integer) raises :class:`~hf_bpe.errors.TokenizerFileError` naming
    the file and line, and so do what ``tiktoken.Encoding`` refuses after reading (two tokens with
    one rank, a negative rank) and ranks of 2**31 and more (hf_bpe's largest id is 2**31 - 1), and
    files over :data:`hf_bpe._io.MAX_FILE_BYTES`.

    >>> import hf_bpe.rank_file, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "ranks.tiktoken")
    >>> _ = open(path, "wb").write(b"YQ== 0\\n\\nYg==  1 \\r\\n= 2\\n")
    >>> hf_bpe.rank_file.read_ranks(path)
    {b'a': 0, b'b': 1, b'': 2}
    """
    data = read_file(path)
    ranks: dict[bytes, int] = {}
    for _, token, rank in _rank_lines(path, data):
        ranks[token] = rank
    if not ranks:
        raise TokenizerFileError(path, "no ranks in file")
    if len(set(ranks.values())) != len(ranks):  # rare: find the lines again to say where
        last_line = {token: number for number, token, _ in _rank_lines(path, data)}
        line_of_rank: dict[int, tuple[int, bytes]] = {}
        for token, number in sorted(last_line.items(), key=lambda item: item[1]):
            rank = ranks[token]
            if rank in line_of_rank:
                first_line, first = line_of_rank[rank]
                raise TokenizerFileError(
                    path,
                    f"rank {rank} is given to two tokens, {first!r:.80} (line {first_line}) and {token!r:.80}; "
                    f"every token needs its own rank (tiktoken.Encoding refuses this file too)",
                    line=number,
                )
            line_of_rank[rank] = (number, token)
    return ranks


def _rank_lines(path: str | os.PathLike[str], data: bytes) -> Iterator[tuple[int, bytes, int]]:
    """``(line number, token, rank)`` for each non-empty line of a rank file, read as tiktoken's
    ``load_tiktoken_bpe`` reads it (see :func:`read_ranks`)."""
    # Lines end as bytes.splitlines() ends them; without a \r, found lazily (the same lines).
    lines: Iterable[bytes] = data.splitlines() if b"\r" in data else _lines_ending_in_newline(data)
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            raise TokenizerFileError(path, f"expected '<base64 token> <rank>', got {line[:80]!r}", line=number)
        encoded, rank_text = fields
        try:
            token = base64.b64decode(encoded)  # not validate=True: tiktoken drops non-base64 characters
        except (binascii.Error, ValueError) as error:
            raise TokenizerFileError(path, f"invalid base64 token {encoded[:80]!r} ({error})", line=number) from None
        try:
            rank = int(rank_text)
        except ValueError:
            raise TokenizerFileError(path, f"rank {rank_text[:40]!r} is not an integer", line=number) from None
        if not 0 <= rank < 2**31:
            raise TokenizerFileError(path, f"rank {rank_text[:40].decode('ascii', 'replace')} is out of range "
                                           f"(0 to 2**31 - 1)", line=number)
        yield number, token, rank


def _lines_ending_in_newline(data: bytes) -> Iterator[bytes]:
    """The lines of ``data`` (which holds no ``\\r``) without their ``\\n``, as ``data.splitlines()``."""
    for line in io.BytesIO(data):
        yield line[:-1] if line.endswith(b"\n") else line
