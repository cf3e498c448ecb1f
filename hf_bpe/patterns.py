r"""Split patterns: what cuts text into pieces before merging.

A pattern is one of:

- a regex in tiktoken's dialect (fancy-regex): its matches are the pieces, the text between them
  is dropped. The named ones (``"gpt2"``, ``"cl100k"``, ``"o200k"``; ``"llama3"``, ``"qwen2"``) are
  spelled here as tiktoken (or the model's own tokenizer) spells them;
- a :class:`Split`: `tokenizers`' Split pre-tokenizer (an Oniguruma regex with a behavior and
  ``invert``), run with Oniguruma exactly as in `tokenizers`; or a tuple of them, applied in turn
  (each re-splits every piece of the one before), as a ``tokenizer.json`` Sequence does. Such a tuple
  may start with :class:`Normalize` steps: `tokenizers`' normalizers, which rewrite each stretch of
  ordinary text before it is split (offsets still point into the original text), and may hold one
  :class:`ByteLevel`: `tokenizers`' ``ByteLevel`` pre-tokenizer among the Splits (the Splits after it
  cut each piece's byte-level spelling).

>>> from hf_bpe import patterns
>>> patterns.resolve("cl100k") == patterns.CL100K
True
>>> patterns.Split(r"\p{N}{1,3}", "isolated")
Split('\\p{N}{1,3}', 'isolated')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hf_bpe.model import BPE

__all__ = [
    "BEHAVIORS", "CL100K", "GPT2", "NAMED", "O200K", "ByteLevel", "Pattern", "Split", "describe", "from_core",
    "name_of", "pieces", "resolve", "to_core"
]

GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
"""GPT-2's pattern (tiktoken's ``r50k_pat_str``), also used by ``r50k_base`` and ``p50k_base``."""

CL100K = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
"""GPT-3.5/GPT-4's pattern (``cl100k_base``)."""

O200K = "|".join(  # noqa: FLY002 - one alternative per line, as tiktoken writes it
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

LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
"""Llama 3's (and 3.1-3.3's) pattern, as Meta's ``llama_models`` tokenizer spells it. Llama 4 uses
``o200k``'s."""

QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
"""Qwen's pattern (Qwen 1's ``qwen.tiktoken``, Qwen 2, 2.5 and 3): Llama 3's with single digits."""

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
    "llama3": LLAMA3,
    "llama4": O200K,
    "qwen2": QWEN2,
}
"""Every name :func:`resolve` accepts, with the regex it stands for."""


BEHAVIORS = ("removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous")
"""What a :class:`Split` does with its regex's matches, as `tokenizers`' Python API names it:
drop them; make each match and each stretch between matches a piece; join each match to the piece
before it; or after it; make each run of adjacent matches one piece."""


@dataclass(frozen=True)
class Split:
    r"""`tokenizers`' Split pre-tokenizer: ``tokenizers.pre_tokenizers.Split(Regex(pattern), behavior,
    invert)``, or with ``literal=True`` ``Split(pattern, behavior, invert)`` (a plain string).

    ``pattern`` is an Oniguruma regex (`tokenizers`' engine, default syntax: POSIX brackets, ``\h``,
    ``$`` at every line end...), run with Oniguruma itself, so it cuts text exactly as `tokenizers`
    does. Its matches and the text between them are kept, dropped or merged by ``behavior`` (one of
    :data:`BEHAVIORS`), with their roles swapped when ``invert``; empty pieces are dropped.

    >>> import hf_bpe
    >>> ranks = {bytes([b]): b for b in range(256)}
    >>> pieces(hf_bpe.BPE(ranks, Split("[A-Z]*", "isolated")), "AB cd")
    ['AB', ' ', 'c', 'd']
    >>> two_steps = (Split(r"\p{N}{1,3}"), Split(r"\s+|\S+", "removed", invert=True))
    >>> pieces(hf_bpe.BPE(ranks, two_steps), "ab12345 cd")
    ['ab', '123', '45', ' ', 'cd']
    """

    pattern: str
    behavior: str = "isolated"
    invert: bool = False
    literal: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str):
            raise TypeError(f"Split pattern must be a str (an Oniguruma regex), got {type(self.pattern).__name__}")
        if self.behavior not in BEHAVIORS:
            raise ValueError(f"Split behavior {self.behavior!r} is not one of {', '.join(BEHAVIORS)}")
        for flag in ("invert", "literal"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"Split {flag} must be a bool, got {getattr(self, flag)!r:.40}")

    def __repr__(self) -> str:
        extra = "".join(f", {flag}=True" for flag in ("invert", "literal") if getattr(self, flag))
        return f"Split({self.pattern!r}, {self.behavior!r}{extra})"


@dataclass(frozen=True)
class ByteLevel:
    r"""`tokenizers`' ``ByteLevel`` pre-tokenizer as a step among :class:`Split` steps, run as a
    ``tokenizer.json`` Sequence runs it: on each piece of the Splits before it, it puts a space before
    the piece when it does not start with one (``add_prefix_space``), cuts it with its regex (GPT-2's
    split, ``use_regex``) and spells its bytes in GPT-2's byte alphabet, one character per byte; the
    Splits after it cut that spelling, not the text, so they see ``"²"`` (the spelling of byte 0xB2, a
    byte of many characters) as a digit, and a piece may end inside a character.

    >>> import hf_bpe
    >>> ranks = {bytes([b]): b for b in range(256)}
    >>> pieces(hf_bpe.BPE(ranks, (Split(r"\d"), ByteLevel(add_prefix_space=True))), "ab1 c")
    [' ab', ' 1', ' c']
    >>> [piece.encode("utf-8", "surrogateescape") for piece in
    ...  pieces(hf_bpe.BPE(ranks, (ByteLevel(use_regex=False), Split(r"\p{N}"))), "aò1")]
    [b'a\xc3', b'\xb2', b'1']
    """

    add_prefix_space: bool = False
    use_regex: bool = True

    def __post_init__(self) -> None:
        for flag in ("add_prefix_space", "use_regex"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"ByteLevel {flag} must be a bool, got {getattr(self, flag)!r:.40}")

    def __repr__(self) -> str:
        flags = [f"{flag}={getattr(self, flag)}" for flag, default in (("add_prefix_space", False), ("use_regex", True))
                 if getattr(self, flag) != default]
        return f"ByteLevel({', '.join(flags)})"


NORMALIZERS = ("nfc", "nfd", "nfkc", "nfkd", "lowercase", "strip", "replace", "prepend", "prefix_space",
               "precompiled")
"""The kinds of :class:`Normalize` step."""


@dataclass(frozen=True)
class Normalize:
    r"""One of `tokenizers`' normalizers, run as `tokenizers` runs it (same Unicode tables, same
    offsets): ``"nfc"``, ``"nfd"``, ``"nfkc"``, ``"nfkd"`` (Unicode normalization forms, with the
    Unicode 9 tables of `tokenizers`), ``"lowercase"``, ``"strip"`` (leading whitespace with ``left``,
    trailing with ``right``), ``"replace"`` (each match of the Oniguruma regex ``pattern``, or with
    ``literal`` the plain string, becomes ``content``), ``"prepend"`` (``pattern`` is put before any
    text that is not empty), ``"prefix_space"`` (`tokenizers`' ``ByteLevel`` with
    ``add_prefix_space``: a space before a text that is not empty and does not start with one) or
    ``"precompiled"`` (a SentencePiece ``precompiled_charsmap``, base64 in ``pattern`` as a
    ``tokenizer.json`` holds it, applied as `tokenizers` applies it: per grapheme cluster, by the
    shortest rule matching its start, not as SentencePiece does).

    >>> import hf_bpe
    >>> ranks = {bytes([b]): b for b in range(256)}
    >>> pieces(hf_bpe.BPE(ranks, (Normalize("nfkc"), Split(r"\s+", "removed"))), "ﬁx ①")
    ['fix', '1']
    """

    kind: str
    pattern: str = ""
    content: str = ""
    literal: bool = False
    left: bool = False
    right: bool = False

    def __post_init__(self) -> None:
        if self.kind not in NORMALIZERS:
            raise ValueError(f"Normalize kind {self.kind!r} is not one of {', '.join(NORMALIZERS)}")
        for field in ("pattern", "content"):
            if not isinstance(getattr(self, field), str):
                raise TypeError(f"Normalize {field} must be a str, got {getattr(self, field)!r:.40}")
        for flag in ("literal", "left", "right"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"Normalize {flag} must be a bool, got {getattr(self, flag)!r:.40}")

    def __repr__(self) -> str:
        fields = [repr(self.kind)] + [f"{name}={getattr(self, name)!r}" for name in
                                      ("pattern", "content", "literal", "left", "right")
                                      if getattr(self, name) != Normalize.__dataclass_fields__[name].default]
        return f"Normalize({', '.join(fields)})"


Step = Split | Normalize | ByteLevel
Pattern = str | Split | tuple[Step, ...]
"""A resolved split pattern: a tiktoken regex, one :class:`Split`, or several applied in turn
(:class:`Normalize` steps first, at most one :class:`ByteLevel` among the Splits)."""


def split_steps_of(pattern: Pattern) -> tuple[Split, ...]:
    """The :class:`Split` steps of a pattern of Split steps (its normalizers left out); refused
    (``ValueError``) for one holding a :class:`ByteLevel`, whose Splits do not cut text alone.

    >>> split_steps_of((Normalize("nfc"), Split("a")))
    (Split('a', 'isolated'),)
    """
    if isinstance(pattern, str):
        raise TypeError("a regex pattern has no Split steps")
    if byte_level_of(pattern) is not None:
        raise ValueError(f"the split {describe(pattern)} holds a ByteLevel step: its Splits alone do not split as it does")
    steps = (pattern,) if isinstance(pattern, Split) else pattern
    return tuple(step for step in steps if isinstance(step, Split))


def byte_level_of(pattern: Pattern | None) -> ByteLevel | None:
    """The :class:`ByteLevel` step of a pattern, or ``None``.

    >>> byte_level_of((Split("a"), ByteLevel(add_prefix_space=True)))
    ByteLevel(add_prefix_space=True)
    """
    if not isinstance(pattern, tuple):
        return None
    return next((step for step in pattern if isinstance(step, ByteLevel)), None)


def normalizers_of(pattern: Pattern | None) -> tuple[Normalize, ...]:
    """The :class:`Normalize` steps of a pattern (empty for most).

    >>> normalizers_of("gpt2"), normalizers_of((Normalize("nfc"), Split("a")))
    ((), (Normalize('nfc'),))
    """
    if not isinstance(pattern, tuple):
        return ()
    return tuple(step for step in pattern if isinstance(step, Normalize))


def resolve(pattern: str | Split | Sequence[Step]) -> Pattern:
    """Return the regex for a pattern name, ``pattern`` itself when it is a regex or a :class:`Split`,
    and a tuple for a sequence of Splits (one Split alone for a sequence of one).

    >>> resolve("gpt2") == GPT2
    True
    >>> resolve(r"\\w+|\\s+")
    '\\\\w+|\\\\s+'
    >>> resolve([Split("a"), Split("b", "removed")])
    (Split('a', 'isolated'), Split('b', 'removed'))
    """
    if isinstance(pattern, str):
        return NAMED.get(pattern, pattern)
    if isinstance(pattern, Split):
        return pattern
    if isinstance(pattern, Sequence) and not isinstance(pattern, (bytes, bytearray)):
        normalizers = tuple(step for step in pattern if isinstance(step, Normalize))
        steps = tuple(step for step in pattern if isinstance(step, (Split, ByteLevel)))
        byte_levels = sum(isinstance(step, ByteLevel) for step in steps)
        if steps and len(steps) + len(normalizers) == len(pattern) and tuple(pattern) == normalizers + steps \
                and byte_levels <= 1:
            splits = tuple(step for step in steps if isinstance(step, Split))
            if normalizers or byte_levels:
                return normalizers + steps
            return splits[0] if len(splits) == 1 else splits
    raise TypeError(
        f"pattern must be a regex string, one of {sorted(NAMED)}, a patterns.Split or a sequence of them "
        f"(patterns.Normalize steps first, at most one patterns.ByteLevel among the Splits), got {pattern!r:.80}"
    )


def to_core(pattern: Pattern) -> str | list[tuple[Any, ...]]:
    """A resolved pattern as the Rust core takes it: the regex, or ``(pattern, literal, behavior,
    invert)`` per Split step and ``("byte_level", add_prefix_space, use_regex)`` for a ByteLevel step,
    after ``(kind, pattern, content, literal, left, right)`` per Normalize step."""
    if isinstance(pattern, str):
        return pattern
    steps = (pattern,) if isinstance(pattern, Split) else pattern
    return [_step_to_core(step) for step in steps]


def _step_to_core(step: Step) -> tuple[Any, ...]:
    if isinstance(step, Split):
        return (step.pattern, step.literal, step.behavior, step.invert)
    if isinstance(step, ByteLevel):
        return ("byte_level", step.add_prefix_space, step.use_regex)
    return (step.kind, step.pattern, step.content, step.literal, step.left, step.right)


def from_core(value: Any) -> Pattern:
    """The inverse of :func:`to_core`."""
    if isinstance(value, str):
        return value
    steps: tuple[Step, ...] = tuple(
        Split(item[0], item[2], item[3], item[1]) if len(item) == 4 else ByteLevel(item[1], item[2]) if len(item) == 3
        else Normalize(*item) for item in value)
    if len(steps) == 1 and isinstance(steps[0], Split):
        return steps[0]
    return steps


def name_of(pattern: Pattern | None) -> str | None:
    """The canonical name of a named pattern's regex, or ``None`` for any other pattern."""
    for name, regex in (("gpt2", GPT2), ("cl100k", CL100K), ("o200k", O200K), ("llama3", LLAMA3), ("qwen2", QWEN2)):
        if pattern == regex:
            return name
    return None


def describe(pattern: Pattern | None) -> str:
    r"""A short description for messages and model cards: the name, the regex, or the Split steps.

    >>> describe(GPT2), describe((Split(" ", "removed"), Split("[[:digit:]]")))
    ('gpt2', "Split(' ', 'removed') then Split('[[:digit:]]', 'isolated')")
    """
    if pattern is None:
        return "none"
    if isinstance(pattern, str):
        return name_of(pattern) or repr(pattern)
    steps = (pattern,) if isinstance(pattern, Split) else pattern
    return " then ".join(repr(step) for step in steps)


def pieces(model: BPE, text: str) -> list[str]:
    """The pieces ``model``'s split pattern cuts ``text`` into, in order, as ``encode_ordinary``
    merges them (special tokens are not looked for); like `tokenizers`' ``pre_tokenize_str``
    without offsets. A piece that is not whole characters (a Split after a :class:`ByteLevel` step
    may cut one) holds its bytes as ``surrogateescape`` does. SentencePiece models split nothing and
    raise ``ValueError``.

    >>> import hf_bpe
    >>> pieces(hf_bpe.get_encoding("gpt2"), "Hello world's  end")
    ['Hello', ' world', "'s", ' ', ' end']
    """
    found = model._split(text)
    if found is None:
        raise ValueError(f"{model!r} is a SentencePiece model: it has no split pattern, so no pieces")
    return found
