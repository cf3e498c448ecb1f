"""Named split patterns (the regexes that pre-tokenize text), as tiktoken spells them.

>>> from hf_bpe import patterns
>>> patterns.resolve("cl100k") == patterns.CL100K
True
"""

from __future__ import annotations

GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
"""GPT-2's pattern (tiktoken's ``r50k_pat_str``), also used by ``r50k_base`` and ``p50k_base``."""

CL100K = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
"""GPT-3.5/GPT-4's pattern (``cl100k_base``)."""

O200K = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
"""GPT-4o's pattern (``o200k_base``)."""

NAMED: dict[str, str] = {
    "gpt2": GPT2,
    "r50k": GPT2,
    "r50k_base": GPT2,
    "p50k_base": GPT2,
    "cl100k": CL100K,
    "cl100k_base": CL100K,
    "gpt4": CL100K,
    "o200k": O200K,
    "o200k_base": O200K,
}
"""Every name :func:`resolve` accepts, with the regex it stands for."""


def resolve(pattern: str) -> str:
    """Return the regex for a pattern name, or ``pattern`` itself when it is not a name.

    >>> resolve("gpt2") == GPT2
    True
    >>> resolve(r"\\w+|\\s+")
    '\\\\w+|\\\\s+'
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a regex string or one of {sorted(NAMED)}, got {type(pattern).__name__}")
    return NAMED.get(pattern, pattern)


def name_of(pattern: str) -> str | None:
    """The canonical name of a named pattern's regex, or ``None`` for a custom regex."""
    for name, regex in (("gpt2", GPT2), ("cl100k", CL100K), ("o200k", O200K)):
        if pattern == regex:
            return name
    return None
