"""The split step of a ``tokenizer.json`` (`tokenizers`' pre-tokenizers), both ways, and the probes
that prove a split means the same in `tokenizers` as here; :mod:`conversion.hf` reads and writes the
rest of the file.

- **Writing.** tiktoken's split regexes are fancy-regex's; `tokenizers` runs Oniguruma (Ruby syntax),
  which reads them differently. :func:`translate_pattern` rewrites them keeping their meaning, and
  :func:`split_steps` gives the Split pre-tokenizers for a model's pattern (a model whose pattern is
  `tokenizers`' own Split steps, :class:`hf_bpe.patterns.Split`, gets them back as they are).
- **Reading.** :func:`checked_pattern` turns a file's pre-tokenizer (Split steps and a ``ByteLevel``)
  into our split pattern: a named pattern when the file spells one, else its Split steps, run on
  Oniguruma as `tokenizers` runs them.
- **Probing.** :func:`probe_texts` (short texts where regex engines disagree) and
  :func:`split_probe_texts` (every code point class of Unicode, edge characters, digits of every
  script); :func:`pre_tokenizer_difference` cuts them with both and names the first difference.

About 590 lines: writing and reading a split belong together (each direction is checked by the
other), and the probes are what prove both, so they stay in one module.
"""

from __future__ import annotations

import functools
import json
import random
import re
import time
import unicodedata
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from tokenizers import Regex, Tokenizer, pre_tokenizers

from conversion import _hf_tables, _unicode_probe
from hf_bpe import patterns
from hf_bpe._byte_level import str_to_token, token_to_str
from hf_bpe.model import BPE, recognized_split

__all__ = [
    "BYTE_LEVEL_REGEX",
    "PROBE_SECONDS",
    "SPLIT_PROBE_EDGES",
    "checked_pattern",
    "describe",
    "first_passing",
    "is_byte_level",
    "pre_tokenizer_difference",
    "probe_texts",
    "split_candidates",
    "split_probe_texts",
    "split_steps",
    "translate_pattern",
]

# ----------------------------------------------------------------------------- writing a pattern

_QUANTIFIER = re.compile(r"\*|\+|\?|\{\d+(?:,\d*)?\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


def translate_pattern(pattern: str) -> str:
    r"""Rewrite a split regex for Oniguruma, the engine of `tokenizers`, keeping its meaning.

    tiktoken's regexes are fancy-regex's; `tokenizers` compiles them with Oniguruma's Ruby syntax.
    Possessive quantifiers become atomic groups (Ruby reads ``X{1,3}+`` as ``(?:X{1,3})+``); ``^`` and
    ``$`` become ``\A`` and ``\z`` (Ruby anchors them at every line) unless the ``m`` flag asks for
    that; and flags are renamed (Ruby's ``m`` is fancy-regex's ``s``, "dot matches newline").

    >>> translate_pattern(r"\p{N}{1,3}+|\s++$|[$^]|(?s:.)")
    '(?>\\p{N}{1,3})|(?>\\s+)\\z|[$^]|(?m:.)'
    """
    out: list[str] = []
    groups: list[tuple[int, bool]] = []  # where each open group starts in `out`, and the m flag outside it
    multiline = False
    atom: int | None = None  # where the last quantifiable item starts in `out`
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            end = _escape_end(pattern, i)
            atom = len(out)
            out.append(pattern[i:end])
            i = end
        elif char == "[":
            end = _class_end(pattern, i)
            atom = len(out)
            out.append(pattern[i:end])
            i = end
        elif char == "(" and (flags := _FLAGS.match(pattern, i)):
            on, off, kind = flags.group(1), flags.group(2) or "", flags.group(3)
            inner = (multiline or "m" in on) and "m" not in off
            ruby_on, ruby_off = _ruby_flags(on), _ruby_flags(off)
            written = f"(?{ruby_on}{'-' + ruby_off if ruby_off else ''}"
            if kind == ":":
                groups.append((len(out), multiline))
                out.append(written + ":")
            elif written != "(?":
                out.append(written + ")")
            multiline = inner
            atom = None
            i = flags.end()
        elif char == "(":
            groups.append((len(out), multiline))
            out.append(char)
            atom = None
            i += 1
        elif char == ")":
            atom, multiline = groups.pop() if groups else (None, multiline)
            out.append(char)
            i += 1
        elif char == "|":
            out.append(char)
            atom = None
            i += 1
        elif char in "$^":
            out.append(char if multiline else r"\z" if char == "$" else r"\A")
            atom = len(out) - 1
            i += 1
        elif (match := _QUANTIFIER.match(pattern, i)) and atom is not None:
            end = match.end()
            if end < len(pattern) and pattern[end] == "+":  # possessive: X{..}+ -> (?>X{..})
                quantified = "".join(out[atom:]) + match.group()
                del out[atom:]
                out.append(f"(?>{quantified})")
                end += 1
            else:
                out.append(match.group())
                if end < len(pattern) and pattern[end] == "?":  # lazy
                    out.append("?")
                    end += 1
            i = end
        else:
            atom = len(out)
            out.append(char)
            i += 1
    return "".join(out)


def _ruby_flags(flags: str) -> str:
    """fancy-regex inline flags as Ruby's: ``s`` is Ruby's ``m``; ``m`` is how Ruby always is."""
    return "".join("m" if flag == "s" else flag for flag in flags if flag != "m")


def _escape_end(pattern: str, start: int) -> int:
    """Index just past the escape sequence starting at ``pattern[start] == '\\'``."""
    if start + 1 >= len(pattern):
        return len(pattern)
    kind = pattern[start + 1]
    if kind in "pPx" and start + 2 < len(pattern) and pattern[start + 2] == "{":
        close = pattern.find("}", start + 3)
        return len(pattern) if close < 0 else close + 1
    if kind in "pP" and start + 2 < len(pattern):  # \pL
        return start + 3
    return start + 2


def _class_end(pattern: str, start: int) -> int:
    """Index just past the character class opening at ``pattern[start] == '['`` (classes nest)."""
    depth = 0
    i = start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i = _escape_end(pattern, i)
            continue
        if char == "[":
            depth += 1
            i += 1
            if i < len(pattern) and pattern[i] == "^":
                i += 1
            if i < len(pattern) and pattern[i] == "]":  # a leading ']' is literal
                i += 1
            continue
        if char == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(pattern)


def split_steps(pattern: patterns.Pattern) -> list[pre_tokenizers.PreTokenizer]:
    """`tokenizers`' pre-tokenizers for a pattern: a Split on a tiktoken regex translated for
    Oniguruma (its matches kept, the rest dropped), or the model's own Split steps as they are, with
    its :class:`hf_bpe.patterns.ByteLevel` step among them as a ``ByteLevel`` (normalizers left out)."""
    if isinstance(pattern, str):
        return [pre_tokenizers.Split(Regex(translate_pattern(pattern)), behavior="removed", invert=True)]
    steps = (pattern,) if isinstance(pattern, patterns.Split) else pattern
    return [
        pre_tokenizers.Split(step.pattern if step.literal else Regex(step.pattern), behavior=step.behavior,
                             invert=step.invert) if isinstance(step, patterns.Split) else
        pre_tokenizers.ByteLevel(add_prefix_space=step.add_prefix_space, trim_offsets=False, use_regex=step.use_regex)
        for step in steps if not isinstance(step, patterns.Normalize)
    ]



# ------------------------------------------------------------------------------------- probe texts

_PROBE_ALPHABET = [
    *"aZéßſKİıǅʰ中文あア한ΩωдДاעก\u093c\u0301ⅷ٣５70²½",
    *[" ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\xa0", "\u2003", "\u3000", "\u2028"],
    *["\u200b", "'", "'s", "'S", "'ll", "'LL", "'ve", "'re", "'d", "'m", "'t", "\u2019", "!", "?", ".", ","],
    *[
        "-",
        "_",
        "/",
        "\\",
        "(",
        "<|",
        "|>",
        "😀",
        "👍🏽",
        "🇺🇸",
        "\u200d",
        "$",
        "€",
        "#",
        "@",
        "\x00",
        "\ufeff",
    ],
    *["abc", "ABC", "Hello", "123", "12345", "   \n", " \n ", "\n\n\n", " the", " The", "ing", "2023"],
]


def probe_texts(count: int = 2000, seed: int = 0) -> list[str]:
    """Short random texts mixing scripts, digits, every kind of space, contractions, emoji and
    control characters: the places where regex engines disagree.

    >>> len(probe_texts(10)), probe_texts(3) == probe_texts(3)
    (10, True)
    """
    rng = random.Random(seed)
    return ["".join(rng.choices(_PROBE_ALPHABET, k=rng.randint(1, 40))) for _ in range(count)]


# ----------------------------------------------------------------------- reading a file's pre-tokenizer

BYTE_LEVEL_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""The regex of `tokenizers`' ``ByteLevel`` pre-tokenizer; it splits as GPT-2's pattern does."""

_BYTES_ONLY = {bytes([byte]): byte for byte in range(256)}


_PATTERN_BYTES_LIMIT = 1 << 16
"""Our core refuses split regexes longer than this (``MAX_PATTERN_BYTES`` in ``pretokenize.rs``)."""


def _may_be_too_long(pattern: patterns.Pattern) -> bool:
    """Whether a regex of ``pattern`` is over :data:`_PATTERN_BYTES_LIMIT` (then our core refuses it)."""
    steps = (pattern,) if isinstance(pattern, (str, patterns.Split)) else pattern
    regexes = [step if isinstance(step, str) else step.pattern for step in steps
               if isinstance(step, (str, patterns.Split))]
    return any(len(regex.encode("utf-8")) > _PATTERN_BYTES_LIMIT for regex in regexes)


def checked_pattern(pre_tokenizer: Any, refuse: Any, *, named: bool = True) -> patterns.Pattern:
    """Our split pattern for the file's pre-tokenizer, checked to cut :func:`split_probe_texts` into
    the same pieces as `tokenizers` running that pre-tokenizer: a named pattern the file spells
    (faster) when it passes (unless ``named`` is false), else the file's own Split steps on
    Oniguruma; refused when neither does."""
    return first_passing(split_candidates(pre_tokenizer, refuse, named=named), pre_tokenizer, refuse)


def split_candidates(pre_tokenizer: Any, refuse: Any, *, named: bool = True) -> list[patterns.Pattern]:
    """The split patterns :func:`checked_pattern` tries for the file's pre-tokenizer, in order, before any is
    checked; refused at once when one cannot be used or `tokenizers` cannot read the pre-tokenizer."""
    candidates = _split_rules(pre_tokenizer, refuse)
    if not named:
        candidates = [pattern for pattern in candidates if not isinstance(pattern, str)]
    for pattern in candidates:
        if _may_be_too_long(pattern):  # refused by our core at once; Oniguruma would spend a second compiling it
            try:
                BPE(_BYTES_ONLY, pattern)
            except ValueError as error:
                raise refuse(f"the split pattern cannot be used: {error}") from None
    try:
        _TheirSplitter(pre_tokenizer)
    except Exception as error:  # noqa: BLE001 - whatever tokenizers raises, the file is refused with it
        raise refuse(f"tokenizers cannot read the pre-tokenizer: {error}") from None
    return list(candidates)


def first_passing(candidates: list[patterns.Pattern], pre_tokenizer: Any, refuse: Any) -> patterns.Pattern:
    """The first of ``candidates`` (:func:`split_candidates`) that cuts :func:`split_probe_texts` as
    `tokenizers` runs ``pre_tokenizer``; refused when none does."""
    difference = None
    for pattern in candidates:
        try:
            splitter = BPE(_BYTES_ONLY, pattern)
        except ValueError as error:
            raise refuse(f"the split pattern cannot be used: {error}") from None
        difference = pre_tokenizer_difference(splitter, pre_tokenizer)
        if difference is None:
            return pattern
    raise refuse(f"hf_bpe cannot load this pre-tokenizer ({patterns.describe(pattern)}) exactly: {difference}")


def describe(component: Any) -> str:
    """A file's component (its JSON) as named in error messages: its type.

    >>> describe({"type": "Whitespace"}), describe(None)
    ("'Whitespace'", 'None')
    """
    if isinstance(component, dict):
        return repr(component.get("type"))
    return repr(component)


def is_byte_level(component: Any) -> bool:
    """Whether a file's pre-tokenizer or decoder (its JSON) is ``ByteLevel``, alone or as the one step
    of a ``Sequence``.

    >>> is_byte_level({"type": "Sequence", "decoders": [{"type": "ByteLevel"}]})
    True
    """
    if not isinstance(component, dict):
        return False
    if component.get("type") == "Sequence":
        parts = component.get("decoders") or component.get("pretokenizers") or []
        return len(parts) == 1 and is_byte_level(parts[0])
    return component.get("type") == "ByteLevel"


_BEHAVIORS = {"".join(word.capitalize() for word in behavior.split("_")): behavior for behavior in patterns.BEHAVIORS}
"""`tokenizers`' JSON names of the Split behaviors ("MergedWithPrevious") -> ours ("merged_with_previous")."""

_BYTE_LEVEL_STEP = patterns.Split(BYTE_LEVEL_REGEX, "isolated")
"""What ``ByteLevel`` with ``use_regex`` does before mapping bytes: an isolated Split on its regex."""


def _split_rules(pre_tokenizer: Any, refuse: Any) -> list[patterns.Pattern]:
    """Our split patterns for a byte-level pre-tokenizer, to try in turn: a named pattern first when
    the file spells one, else a family scanner's rule when the file's split means the same (its
    scanner is faster), then the file's Split steps as they are (which run on a scanner too when they
    spell a family's regex exactly). A ``ByteLevel`` followed by steps, or putting its space after
    steps, is a :class:`hf_bpe.patterns.ByteLevel` step among the Splits."""
    steps = _flat_steps(pre_tokenizer)
    levels = [index for index, step in enumerate(steps) if is_byte_level(step)]
    if not levels:
        for step in steps:
            _splits_of(step, refuse)  # an unsupported step is named first
        raise refuse(f"the pre-tokenizer {describe(pre_tokenizer)} is not supported; byte-level BPE needs a ByteLevel "
                     "step")
    if len(levels) > 1:
        raise refuse("a second ByteLevel pre-tokenizer step is not supported: it would spell the byte-level spelling "
                     "of the text again, in a vocabulary of no real tokenizer")
    at = levels[0]
    byte_level = steps[at]
    flags = {}
    for flag, default in (("add_prefix_space", False), ("use_regex", True)):
        flags[flag] = byte_level.get(flag, default)
        if not isinstance(flags[flag], bool):
            raise refuse(f"the ByteLevel pre-tokenizer has {flag} = {flags[flag]!r:.40}; expected true or false")
    before = [split for step in steps[:at] for split in _splits_of(step, refuse)]
    after = [split for step in steps[at + 1:] for split in _splits_of(step, refuse)]
    if after or flags["add_prefix_space"] or not (before or flags["use_regex"]):
        # (ByteLevel alone without its regex: each stretch of text between added tokens is one piece)
        return [patterns.resolve([*before, patterns.ByteLevel(**flags), *after])]
    splits = before
    if flags["use_regex"]:
        splits.append(_BYTE_LEVEL_STEP)
    exact = patterns.resolve(splits)
    if len(splits) == 1:
        split = splits[0]
        keeps_all = (split.behavior, split.invert) in (("isolated", False), ("removed", True))
        for named in (patterns.GPT2, patterns.CL100K, patterns.O200K):
            # As save writes them, or as ByteLevel's own regex; these match every character, so the
            # text between matches is empty whether kept or dropped.
            spellings = {translate_pattern(named)} | ({BYTE_LEVEL_REGEX} if named == patterns.GPT2 else set())
            if keeps_all and not split.literal and split.pattern in spellings:
                return [named, exact]
    # Another spelling of a family's split (Llama 3, Qwen 2...): its scanner's rule first, kept only
    # when the probe finds the same pieces as tokenizers.
    recognized = recognized_split(exact)
    if recognized is not None and recognized != exact:
        return [recognized, exact]
    return [exact]


def _flat_steps(pre_tokenizer: Any) -> list[Any]:
    """A file's pre-tokenizer as the list of steps it runs in turn (nested Sequences flattened)."""
    if isinstance(pre_tokenizer, dict) and pre_tokenizer.get("type") == "Sequence":
        parts = pre_tokenizer.get("pretokenizers", [])
        return [step for part in parts for step in _flat_steps(part)] if isinstance(parts, list) else [pre_tokenizer]
    return [pre_tokenizer]


def _splits_of(step: Any, refuse: Any) -> list[patterns.Split]:
    """The Split steps that cut text as one step of a file's pre-tokenizer (before its ByteLevel)
    does in `tokenizers`: Split itself; ``Digits``, ``Punctuation`` and ``WhitespaceSplit`` as Splits
    ``Whitespace`` on `tokenizers`' own character tables
    (:mod:`conversion._hf_tables`);
    ``CharDelimiterSplit`` on its character. Other pre-tokenizers are refused by name. (Steps after
    ``ByteLevel`` take the same reading: they run on its spelling, as in `tokenizers`.)"""
    kind = step.get("type") if isinstance(step, dict) else None
    if kind == "Split":
        return [_split_step(step, refuse)]
    if kind == "Digits":
        individual = step.get("individual_digits", False)
        if not isinstance(individual, bool):
            raise refuse(f"a Digits pre-tokenizer has individual_digits = {individual!r:.40}; expected true or false")
        return [patterns.Split(_hf_tables.char_class(_hf_tables.NUMERIC), "isolated" if individual else "contiguous")]
    if kind == "Punctuation":
        behavior = _BEHAVIORS.get(step.get("behavior", "Isolated"))  # type: ignore[arg-type]
        if behavior is None:
            raise refuse(f"a Punctuation pre-tokenizer has the behavior {step.get('behavior')!r:.40}; expected one of "
                         f"{', '.join(_BEHAVIORS)}")
        return [patterns.Split(_hf_tables.char_class(_hf_tables.PUNCTUATION), behavior)]
    if kind == "Whitespace":
        return [patterns.Split(_hf_tables.whitespace_regex(), "removed", invert=True)]
    if kind == "WhitespaceSplit":
        return [patterns.Split(_hf_tables.char_class(_hf_tables.WHITESPACE), "removed")]
    if kind == "CharDelimiterSplit":
        delimiter = step.get("delimiter")
        if not isinstance(delimiter, str) or len(delimiter) != 1:
            raise refuse(f"a CharDelimiterSplit has the delimiter {delimiter!r:.40}; expected one character")
        return [patterns.Split(delimiter, "removed", literal=True)]
    raise refuse(
        f"the pre-tokenizer step {describe(step)} is not supported (hf_bpe runs Split, Digits, Punctuation, "
        "Whitespace, WhitespaceSplit and CharDelimiterSplit steps, before or after one ByteLevel)"
    )


def _split_step(step: Any, refuse: Any) -> patterns.Split:
    """A ``Split`` pre-tokenizer of the file as a :class:`hf_bpe.patterns.Split`."""
    if not isinstance(step, dict) or step.get("type") != "Split":
        raise refuse(
            f"the pre-tokenizer step {describe(step)} is not supported (expected Split steps followed by ByteLevel)"
        )
    pattern = step.get("pattern")
    if not isinstance(pattern, dict) or len(pattern) != 1 or not isinstance(next(iter(pattern.values())), str) \
            or next(iter(pattern)) not in ("Regex", "String"):
        raise refuse(f"a Split has the pattern {pattern!r:.80}; expected {{\"Regex\": ...}} or {{\"String\": ...}}")
    behavior = _BEHAVIORS.get(step.get("behavior"))  # type: ignore[arg-type]
    if behavior is None:
        raise refuse(f"a Split has the behavior {step.get('behavior')!r:.40}; expected one of {', '.join(_BEHAVIORS)}")
    invert = step.get("invert")
    if not isinstance(invert, bool):
        raise refuse(f"a Split has invert = {invert!r:.40}; expected true or false")
    kind, text = next(iter(pattern.items()))
    return patterns.Split(text, behavior, invert, literal=kind == "String")


# ------------------------------------------------------------------------------ checking splits

SPLIT_PROBE_EDGES = (
    "\r\n", "\r\n\r\n", " \r\n", "x\r\ny", "a\rb", "\n\n\n", "   \n", " \n ", "\t\t", "a  ", "  a",
    "'s", "'S", "'ll", "'LL", "'Ve", "\u2019s", "''s", "it's", "IT'S", "don't", "'\u017f",
    "a\u00b2b", "x\u00b2\u00b3\u00b9\u00bc\u00bd\u00be", "a\u200cb c", "a\u200db", "\u200c", "\u200d", "\ufeffa", "a\ufeff",
    "e\u0301", "e\u0301\u0301x", " \u0301", "\u0301", "a\u0308b", "\u093c\u0915", "\ud7ff\ue000", "\U0010ffff",
    "\U0010ffffa", "a\x85b", "\x85", "a\u2028b\u2029c", "\u2028\u2029", "\xa0a", "a\u3000b", "\u2003\u2003x",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f44d\U0001f3fd", "\U0001f1fa\U0001f1f8", "1\ufe0f\u20e3",
    "\u2764\ufe0f", "\u0130i\u0131I", "\u212aK", "\u1e9e\u00df", "\u01c5\u01c4\u01c6", "\u02b0a", "<|endoftext|>",
)
"""Texts where regex engines tend to disagree: CRLF, contractions, U+00B2 and other digit-like
letters, joiners, BOM, combining marks, the last code point, NEL and the line separators, emoji
sequences, case pairs that fold unusually."""


def _digit_runs() -> list[str]:
    """For every decimal digit system: its ten digits in a row, five nines then four digits after a
    space, and two digits between letters."""
    runs = []
    for zero in _decimal_zeros():
        digits = "".join(chr(zero + value) for value in range(10))
        runs += [digits, digits[9] * 5 + " " + digits[:4], "a" + digits[1:3] + "b"]
    return runs


@functools.cache
def _decimal_zeros() -> tuple[int, ...]:
    """The digit zero of every decimal digit system (that Python's Unicode tables know)."""
    zeros = {ord(char) - unicodedata.digit(char) for char in _unicode_probe.run_ends()
             if unicodedata.category(char) == "Nd"}
    return tuple(sorted(zeros))


@functools.cache
def split_probe_texts() -> tuple[str, ...]:
    """The texts a split pattern is checked on against `tokenizers` (:func:`pre_tokenizer_difference`).

    Every code point at either end of a run of same-property code points over all of Unicode
    (``conversion._unicode_probe``: general category, script, East Asian width, grapheme break and
    the binary properties regexes test), in three contexts: among its neighbours, doubled after a
    space, and before a letter and a digit (every fourth one), each cut into texts of 64
    characters at a different offset, so characters also meet the start and the end of a text;
    plus :data:`SPLIT_PROBE_EDGES`, the digits of every decimal system and :func:`probe_texts`.

    >>> texts = split_probe_texts()
    >>> "\u00b2" in "".join(texts) and "\U0010ffff" in "".join(texts)
    True
    """
    characters = _unicode_probe.run_ends()
    contexts = ["".join(characters), "".join(f" {char}{char}" for char in characters),
                "".join(f"{char}a1" for char in characters[::4])]
    texts = [text[start : start + 64] for offset, text in enumerate(contexts)
             for start in range(-16 * offset % 64, len(text), 64)]
    texts += SPLIT_PROBE_EDGES
    texts += _digit_runs()
    texts += probe_texts(300, seed=15)
    return tuple(text for text in texts if text)


PROBE_SECONDS = 5.0
"""How long our side of the load-time check may take in all (the patterns of real tokenizers: 5-30 ms)."""


class _TheirSplitter:
    """`tokenizers`' own pre-tokenizer built from a file's JSON, exactly as ``Tokenizer.from_file``
    builds it. A final ``ByteLevel`` without regex and prefix space only maps bytes to its alphabet
    and splits nothing, so it is left out (its mapping is the same on both sides); else it stays, and
    our pieces are compared in its alphabet (as bytes: a piece may end inside a character)."""

    def __init__(self, pre_tokenizer: Any) -> None:
        steps = pre_tokenizer.get("pretokenizers") if isinstance(pre_tokenizer, dict) and \
            pre_tokenizer.get("type") == "Sequence" else None
        self.spelled = True
        if steps and is_byte_level(steps[-1]) and not steps[-1].get("use_regex", True) and len(steps) > 1 \
                and not steps[-1].get("add_prefix_space", False):
            pre_tokenizer = {"type": "Sequence", "pretokenizers": steps[:-1]}
            self.spelled = False
        document = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                    "normalizer": None, "pre_tokenizer": pre_tokenizer, "post_processor": None, "decoder": None,
                    "model": {"type": "BPE", "vocab": {}, "merges": []}}
        self.pre_tokenizer = Tokenizer.from_str(json.dumps(document)).pre_tokenizer

    def pieces(self, text: str, ours: list[str] | str) -> list[str] | str:
        """The pieces of ``text`` (or the error) as text, ``ours`` when they are the same list."""
        try:
            pieces = list(map(itemgetter(0), self.pre_tokenizer.pre_tokenize_str(text)))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # noqa: BLE001 - Oniguruma giving up is a Rust panic there (PanicException)
            return f"an error ({str(error).splitlines()[0] if str(error) else type(error).__name__})"
        if not self.spelled:
            return pieces
        # Compare in the byte-level alphabet, each list joined by a character the text lacks (two
        # string operations instead of one per piece); translate theirs back only when they differ.
        separator = next((char for char in _SEPARATORS if char not in text), None)
        if isinstance(ours, list) and separator is not None and \
                token_to_str(separator.join(ours).encode("utf-8", "surrogateescape")) == \
                token_to_str(separator.encode()).join(pieces):
            return ours
        return [_unspell(piece) for piece in pieces]


_SEPARATORS = "\x00\x01\x02\x03\x04\x05\x06\x07"


def _our_pieces(model: BPE, text: str) -> list[str] | str:
    try:
        return patterns.pieces(model, text)
    except ValueError as error:
        return f"an error ({error})"


def pre_tokenizer_difference(
    model: BPE, pre_tokenizer: Any, texts: Iterable[str] | None = None
) -> str | None:
    """How ``model``'s split pattern cuts some text differently from `tokenizers` running the
    ``pre_tokenizer`` of a ``tokenizer.json`` (its JSON, ending in ``ByteLevel``), or ``None`` when
    they agree on every text (by default :func:`split_probe_texts`). Failing on a text counts as a
    result: it must fail in both. A pre-tokenizer `tokenizers` cannot build raises its error. A split
    that backtracks catastrophically on the probe (over its time budget on a text, or over
    :data:`PROBE_SECONDS` in all; real patterns take milliseconds) is a difference too: it could
    make every load take minutes.

    >>> import hf_bpe
    >>> from hf_bpe.patterns import Split
    >>> pre_tokenizer = {"type": "Sequence", "pretokenizers": [
    ...     {"type": "Split", "pattern": {"Regex": "[[:alpha:]]+"}, "behavior": "Isolated", "invert": False},
    ...     {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    >>> ranks = {bytes([b]): b for b in range(256)}
    >>> pre_tokenizer_difference(hf_bpe.BPE(ranks, Split("[[:alpha:]]+")), pre_tokenizer) is None
    True
    >>> difference = pre_tokenizer_difference(hf_bpe.BPE(ranks, r"[a-zA-Z]+|[^a-zA-Z]+"), pre_tokenizer)
    >>> "at character 2, at U+00A9 COPYRIGHT SIGN (So); U+00AA FEMININE ORDINAL INDICATOR (Lo)" in difference
    True
    """
    theirs = _TheirSplitter(pre_tokenizer)
    started = time.monotonic()
    for text in split_probe_texts() if texts is None else texts:
        ours = _our_pieces(model, text)
        if isinstance(ours, str) and "is too slow on this text" in ours or \
                time.monotonic() - started > PROBE_SECONDS:
            return (f"splitting the probe texts takes too long ({text!r:.80} and before): the pattern backtracks "
                    "catastrophically on short text; use another pattern")
        their_pieces = theirs.pieces(text, ours)
        if ours != their_pieces and not (isinstance(ours, str) and isinstance(their_pieces, str)):
            return _describe_difference(text, ours, their_pieces)
    return None


def _describe_difference(text: str, ours: list[str] | str, theirs: list[str] | str) -> str:
    if not (isinstance(ours, list) and isinstance(theirs, list)):
        return f"{text!r:.200} gives {ours if isinstance(ours, str) else 'pieces'} here but " \
               f"{theirs if isinstance(theirs, str) else 'pieces'} in tokenizers; please report this"
    shown = [", ".join(repr(piece) for piece in pieces[:12]) + (", ..." if len(pieces) > 12 else "")
             for pieces in (ours, theirs)]
    at = min(_edges(text, ours) ^ _edges(text, theirs), default=0)
    named = "; ".join(f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')} ({unicodedata.category(char)})"
                      for char in text[max(at - 1, 0) : at + 1])
    return (f"{text!r:.200} is cut into [{shown[0]}] here but into [{shown[1]}] by tokenizers; the first "
            f"difference is at character {at}, at {named}. Rather than encode such text differently, hf_bpe "
            "refuses it; please report this")


def _edges(text: str, pieces: list[str]) -> set[int]:
    """Where the pieces of ``text`` start and end (character offsets), found in order."""
    edges, position = set(), 0
    for piece in pieces:
        start = text.find(piece, position)
        if start < 0:
            break
        position = start + len(piece)
        edges |= {start, position}
    return edges


def _unspell(piece: str) -> str:
    """A piece in the byte-level alphabet back as text, as :func:`hf_bpe.patterns.pieces` gives it
    (bytes that are not whole characters as ``surrogateescape`` holds them)."""
    return str_to_token(piece).decode("utf-8", errors="surrogateescape")
