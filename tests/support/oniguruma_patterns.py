"""Random Oniguruma (Ruby syntax) split regexes, for parity tests against `tokenizers` itself.

A pattern is an alternation of sequences of atoms: shorthand classes (``\\w \\W \\d \\D \\s \\S \\h \\H``),
POSIX brackets (``[[:alpha:]]``, negated and inside other classes), Unicode properties and scripts,
literals (ASCII, escaped punctuation, non-ASCII, code point escapes), bracket classes (negated,
nested, ranges, ``&&`` intersections), groups (capturing, atomic, case-insensitive, ``m``),
look-ahead and look-behind, anchors and word boundaries; quantified greedily, lazily or
possessively, with quantifiers that can match the empty string. Every pattern says which
construct classes it uses, so mismatches can be counted per class.

No pytest here: the benchmarks import this module too.

>>> first = patterns(random.Random(0), 5)
>>> first == patterns(random.Random(0), 5), all(isinstance(p.regex, str) for p in first)
(True, True)
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

import textgen

CLASSES = ("empty", "posix", "word", "other")
"""Construct classes, in the order a pattern is counted under one: can match the empty string;
POSIX brackets; ``\\w \\W \\b \\B`` (Oniguruma's word characters); anything else."""

POSIX = ["alpha", "digit", "punct", "space", "upper", "lower", "alnum", "word", "xdigit", "cntrl", "graph",
         "print", "blank"]
SHORTHANDS = {r"\w": "word", r"\W": "word", r"\d": "other", r"\D": "other", r"\s": "other", r"\S": "other",
              r"\h": "other", r"\H": "other"}
PROPERTIES = ["L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "N", "Nd", "Nl", "No", "P", "Pd", "Ps", "S", "Sm",
              "Z", "Zs", "C", "Cc", "Cf", "Han", "Hiragana", "Katakana", "Greek", "Cyrillic", "Latin", "Arabic",
              "Hangul", "Thai", "Alpha", "White_Space", "Emoji", "Any", "Assigned"]
LITERALS = ["a", "b", "e", "s", "t", "z", "A", "S", "Z", "0", "1", "9", " ", "'", ",", r"\.", r"\-", r"\?",
            r"\(", r"\n", r"\r", r"\t", "é", "É", "ß", "ſ", "K", "中", "あ", "²", "½", "٣", "😀",
            r"\x{2028}", r"\x{a0}", r"\u200d", r"\x{85}", "\u0301"]
CLASS_ITEMS = ["a-z", "A-Z", "0-9", "a-fA-F", "à-ÿ", "А-я", "一-龥", "぀-ゟ", "_", "'", " ", r"\n", r"\-",
               ".", ",", "!", "é", "²", "\u0301", r"\x{2000}-\x{200f}"]
QUANTIFIERS = ["*", "+", "?", "{0,2}", "{1,3}", "{2}", "{2,}", "*?", "+?", "??", "{1,2}?", "*+", "++", "?+",
               "{1,3}+"]
"""Greedy, lazy and possessive; Ruby reads ``X{1,3}+`` as ``(?:X{1,3})+``, not as possessive (given to
literals only: on a broad class it backtracks exponentially)."""
ANCHORS = {r"\b": "word", r"\B": "word", "^": "other", "$": "other", r"\A": "other", r"\z": "other",
           r"\Z": "other", r"\G": "other"}


@dataclass(frozen=True)
class Pattern:
    regex: str
    constructs: frozenset[str]
    """Construct classes used (from :data:`CLASSES`; ``empty`` when the whole regex can match ``""``)."""

    @property
    def construct_class(self) -> str:
        """The first class of :data:`CLASSES` the pattern uses: what it is counted under."""
        return next(name for name in CLASSES if name in self.constructs)


@dataclass
class _Part:
    text: str
    nullable: bool
    constructs: set[str]


def _class_item(rng: random.Random, constructs: set[str]) -> str:
    roll = rng.random()
    if roll < 0.2:
        constructs.add("posix")
        return f"[:{'^' if rng.random() < 0.2 else ''}{rng.choice(POSIX)}:]"
    if roll < 0.35:
        shorthand = rng.choice(list(SHORTHANDS))
        constructs.add(SHORTHANDS[shorthand])
        return shorthand
    if roll < 0.45:
        return rf"\p{{{rng.choice(PROPERTIES)}}}"
    return rng.choice(CLASS_ITEMS)


def _bracket(rng: random.Random, constructs: set[str], depth: int = 0) -> str:
    items = [_class_item(rng, constructs) for _ in range(rng.randint(1, 3))]
    if depth == 0 and rng.random() < 0.15:
        items.append(_bracket(rng, constructs, depth + 1))  # a nested class: a union
    body = "".join(items)
    if depth == 0 and rng.random() < 0.1:
        body += "&&" + _bracket(rng, constructs, depth + 1)  # an intersection
    return f"[{'^' if rng.random() < 0.3 else ''}{body}]"


def _atom(rng: random.Random, depth: int) -> _Part:
    constructs: set[str] = {"other"}
    roll = rng.random()
    if roll < 0.2:
        shorthand = rng.choice(list(SHORTHANDS))
        return _Part(shorthand, False, {SHORTHANDS[shorthand]})
    if roll < 0.3:
        negated = "^" if rng.random() < 0.2 else ""
        return _Part(f"[[:{negated}{rng.choice(POSIX)}:]]", False, {"posix"})
    if roll < 0.4:
        name = rng.choice(PROPERTIES)
        spelled = rng.choice([rf"\p{{{name}}}", rf"\P{{{name}}}", rf"\p{{^{name}}}"]) if rng.random() < 0.2 \
            else rf"\p{{{name}}}"
        return _Part(spelled, False, constructs)
    if roll < 0.55:
        return _Part(rng.choice(LITERALS), False, constructs)
    if roll < 0.6:
        return _Part(".", False, constructs)
    if roll < 0.75:
        text = _bracket(rng, constructs)
        return _Part(text, False, constructs)
    if roll < 0.8:
        anchor = rng.choice(list(ANCHORS))
        return _Part(anchor, True, {ANCHORS[anchor]})
    if depth >= 2:
        return _Part(rng.choice(LITERALS), False, constructs)
    inner = _alternation(rng, depth + 1, max_alternatives=2)
    if roll < 0.9:
        opener = rng.choice(["(?:", "(", "(?>", "(?i:", "(?m:"])
        return _Part(f"{opener}{inner.text})", inner.nullable, inner.constructs)
    opener = rng.choice(["(?=", "(?!", "(?<=", "(?<!"])
    return _Part(f"{opener}{inner.text})", True, inner.constructs | {"other"})


def _quantified(rng: random.Random, depth: int) -> _Part:
    part = _atom(rng, depth)
    if rng.random() < 0.45 or part.text in ANCHORS or part.text.startswith(("(?=", "(?!", "(?<")):
        return part
    quantifier = rng.choice(QUANTIFIERS)
    if quantifier == "{1,3}+" and part.text not in LITERALS:
        # (?:X{1,3})+ backtracks exponentially on a broad class X: tokenizers takes seconds on a line.
        quantifier = "{1,3}"
    can_be_empty = quantifier[0] in "*?" or quantifier.startswith(("{0", "{0,"))
    return _Part(part.text + quantifier, part.nullable or can_be_empty, part.constructs)


def _sequence(rng: random.Random, depth: int) -> _Part:
    parts = [_quantified(rng, depth) for _ in range(rng.randint(1, 3))]
    return _Part("".join(part.text for part in parts), all(part.nullable for part in parts),
                 set().union(*(part.constructs for part in parts)))


def _alternation(rng: random.Random, depth: int, max_alternatives: int = 4) -> _Part:
    parts = [_sequence(rng, depth) for _ in range(rng.randint(1, max_alternatives))]
    return _Part("|".join(part.text for part in parts), any(part.nullable for part in parts),
                 set().union(*(part.constructs for part in parts)))


def pattern(rng: random.Random) -> Pattern:
    """One random Oniguruma regex with the construct classes it uses."""
    part = _alternation(rng, 0, max_alternatives=3)
    constructs = set(part.constructs) | ({"empty"} if part.nullable else set())
    return Pattern(part.text, frozenset(constructs))


def patterns(rng: random.Random, count: int) -> list[Pattern]:
    """``count`` random patterns (some of which Oniguruma itself refuses to compile)."""
    return [pattern(rng) for _ in range(count)]


BEHAVIORS = ("removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous")
"""`tokenizers`' ``SplitDelimiterBehavior`` values, as its Python API spells them."""

EDGE_TEXT = ("AB cd", " ", "", "a²b", "a\u200cb c", "Bạn x", "x\r\ny", "日本語 テキスト", "١٢٣ 123", "\ufeffa",
             "a\u0301b", "\U0010ffff!", "e\u0085f\u2028g\u2029h", "'s 'LL", "  \t\n ")


def texts(rng: random.Random, count: int) -> list[str]:
    """Short texts for split parity: generated fragments (every script, whitespace, digits, emoji)
    and random ASCII-heavy strings built from the patterns' own literals."""
    out = list(EDGE_TEXT)
    ascii_heavy = list("abcestzASZ019 ',.-?()\n\r\t_") + ["é", "É", "ß", "ſ", "\u212a", "中", "あ", "²", "½",
                                                           "٣", "😀", "\u2028", "\xa0", "\u200d", "\x85",
                                                           "\u0301", "\u200c", "\ufeff"]
    while len(out) < count:
        if rng.random() < 0.5:
            out.append(textgen.fragment(rng, specials=False))
        else:
            out.append("".join(rng.choices(ascii_heavy, k=rng.randint(1, 24))))
    return out


@contextlib.contextmanager
def quiet_stderr() -> Iterator[None]:
    """Silence the messages `tokenizers` prints (a Rust panic) when Oniguruma gives up on a text.

    The process's file descriptor 2 is pointed at /dev/null and restored after, so Rust's writes go too.
    """
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
