"""Deterministic generators of varied text for parity tests and benchmarks.

Every generator takes a seeded :class:`random.Random`, so a failing input can be rebuilt from its seed.
The text aims at the places where a split pattern or a merge loop can go wrong: many scripts and
combining marks, emoji sequences (ZWJ, skin tones, VS16, flags, keycaps), whitespace runs of every kind
(``\\r\\n``, NBSP, ideographic space, trailing whitespace), digit runs in several number systems, code,
contractions in mixed case (including ``ſ``, which folds to ``s``), text that looks like special tokens,
and very long words.

>>> docs = documents(random.Random(0), 20_000)
>>> sum(len(doc.encode()) for doc in docs) >= 20_000
True
>>> documents(random.Random(0), 20_000) == docs
True
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Container, Iterable, Iterator
from pathlib import Path


def _span(first: int, last: int) -> list[str]:
    return [chr(code) for code in range(first, last + 1)]


LATIN = (
    _span(0x61, 0x7A) * 4 + _span(0x41, 0x5A) + _span(0xC0, 0xD6) + _span(0xD8, 0xF6) + _span(0xF8, 0xFF)
    + _span(0x100, 0x17F)  # Latin Extended-A, with U+017F LATIN SMALL LETTER LONG S
)
GREEK = _span(0x391, 0x3A1) + _span(0x3A3, 0x3A9) + _span(0x3AC, 0x3CE) * 3 + ["\u0301", "\u0308"]
CYRILLIC = _span(0x410, 0x44F) * 3 + list("ёЁіІїЇєЄґҐў")
CJK = _span(0x4E00, 0x9FFF) + list("。、「」・！？")
KANA = _span(0x3041, 0x3096) + _span(0x30A1, 0x30FA) + list("ー゛゜")
ARABIC = _span(0x621, 0x64A) * 3 + _span(0x64B, 0x652) + ["\u0640", "\u060C", "\u061F"]
HEBREW = _span(0x5D0, 0x5EA) * 3 + _span(0x5B0, 0x5BC)
DEVANAGARI = _span(0x905, 0x939) * 2 + _span(0x93E, 0x94C) + ["\u094D", "\u0902", "\u0903", "\u093C", "\u0964"]
THAI = _span(0xE01, 0xE2E) * 2 + ["\u0E31"] + _span(0xE34, 0xE3A) + _span(0xE47, 0xE4E)
KHMER = _span(0x1780, 0x17A2) * 2 + _span(0x17B6, 0x17D3)
HANGUL = _span(0xAC00, 0xD7A3)

SCRIPTS: dict[str, list[str]] = {
    "latin": LATIN, "greek": GREEK, "cyrillic": CYRILLIC, "cjk": CJK, "kana": KANA, "arabic": ARABIC,
    "hebrew": HEBREW, "devanagari": DEVANAGARI, "thai": THAI, "khmer": KHMER, "hangul": HANGUL,
}
# Scripts written without spaces between words.
UNSPACED = {"cjk", "kana", "thai", "khmer"}

PUNCTUATION = list(".,;:!?-—–…()[]{}\"'«»“”‘’/\\@#$%^&*_+=<>|~`¡¿§¶•·")
WHITESPACE = [" ", " ", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u202f",
              "\x0b", "\x0c", "\u0085", "\u2028", "\u2029", " \n", "\t\n", "\n ", " \r\n "]
DIGIT_SETS = ["0123456789"] * 4 + [
    "".join(_span(0xFF10, 0xFF19)),  # fullwidth
    "".join(_span(0x660, 0x669)),  # Arabic-Indic
    "".join(_span(0x6F0, 0x6F9)),  # Extended Arabic-Indic
    "".join(_span(0x966, 0x96F)),  # Devanagari
    "".join(_span(0xE50, 0xE59)),  # Thai
    "²³¹¼½¾",  # \p{No}
    "ⅠⅡⅢⅣⅤⅫ",  # \p{Nl}
]

EMOJI_BASES = _span(0x1F600, 0x1F64F) + _span(0x1F300, 0x1F5FF) + _span(0x1F900, 0x1F9FF)
PEOPLE = ["\U0001F468", "\U0001F469", "\U0001F467", "\U0001F466", "\U0001F9D1", "\U0001F44D", "\U0001F44B"]
SKIN_TONES = _span(0x1F3FB, 0x1F3FF)
ZWJ, VS16 = "\u200d", "\ufe0f"
REGIONAL = _span(0x1F1E6, 0x1F1FF)

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Re", "'rE", "'VE", "'vE",
                "'M", "'LL", "'Ll", "'lL", "'D", "'\u017f", "'\u017fT", "\u2019s", "''s", "'", "'''ll", "'x"]
CONTRACTION_HOSTS = ["it", "IT", "It", "you", "YOU", "they", "we", "I", "she", "don", "can", "Mary", "o", ""]

SPECIAL_LOOKALIKES = [
    "<|endoftext|>", "<|endof", "<|endoftext", "endoftext|>", "<|endoftext|", "|endoftext|>", "<|endofprompt|>",
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|im_start|>", "<||>", "<|", "|>", "<|<|endoftext|>|>",
    "<|endoftext|><|endoftext|>", "< |endoftext|>", "<|ENDOFTEXT|>", "<|endoftext|>\n", " <|endoftext|> ",
]

WORDS = ["the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "his", "her", "it", "an", "were", "are", "which", "this", "be", "or", "has", "had", "not", "but", "first", "one", "their", "its", "new", "after", "who", "they", "have", "two", "been", "year", "also", "other", "into", "more", "only", "time", "can", "would", "over", "such", "when", "most", "some", "like", "then", "them", "these", "than", "there", "what", "about", "out", "up", "naïve", "café", "façade", "résumé", "Straße", "Ärger", "Öl", "über", "señor", "niño", "garçon", "smörgåsbord"]

PYTHON = '''def {name}({arg}, *args, **kwargs):
    """{doc}"""
    if {arg} is None:
        return {{"{key}": [{n}, {m}.5, -{n}e-3], 'x': None}}
\tfor i in range(len(args)):  # tab-indented
        {arg} += args[i] ** 2 // {n}
    return f"{{{arg}!r}} -> {{kwargs.get('{key}', {m})}}"

'''
JSON = '{{"{key}": {n}, "{name}": [{m}, {n}.25, true, null, "{doc}"], "nested": {{"a\\u00e9": "\\n\\t"}}}}\n'
C_CODE = '''#include <stdio.h>
static int {name}(const char *{arg}, size_t n) {{
\tfor (size_t i = 0; i < n; ++i) {{ if ({arg}[i] == '\\n') return {n}; }}
\treturn -{m}; /* {doc} */
}}
'''
HTML = '<div class="{key}"><a href="https://example.com/{name}?q={n}&amp;r={m}">{doc}</a></div>\r\n'


def random_letters(rng: random.Random, alphabet: list[str], length: int) -> str:
    return "".join(rng.choices(alphabet, k=length))


def identifier(rng: random.Random) -> str:
    return rng.choice(["get", "set", "parse", "to", "from", "_", "__"]) + rng.choice(
        ["_value", "Json", "_x", "Name", "", "ID", "_utf8"]) + str(rng.randrange(100))


def words_fragment(rng: random.Random) -> str:
    """Words of one script with spaces (or none, for scripts written without them) and punctuation."""
    script = rng.choice(list(SCRIPTS))
    alphabet = SCRIPTS[script]
    parts = []
    for _ in range(rng.randint(1, 30)):
        if script == "latin" and rng.random() < 0.5:
            word = rng.choice(WORDS)
            word = word.upper() if rng.random() < 0.1 else word.capitalize() if rng.random() < 0.2 else word
        else:
            word = random_letters(rng, alphabet, max(1, int(rng.expovariate(1 / 6))))
        parts.append(word)
        roll = rng.random()
        if roll < 0.1:
            parts.append(rng.choice(PUNCTUATION))
        if script in UNSPACED and rng.random() < 0.7:
            continue
        parts.append(" " if rng.random() < 0.9 else rng.choice(WHITESPACE))
    return "".join(parts)


def unicode_fragment(rng: random.Random) -> str:
    """Arbitrary code points (no surrogates): unassigned, private use, controls, combining marks, astral."""
    chars = []
    for _ in range(rng.randint(1, 40)):
        roll = rng.random()
        if roll < 0.5:
            code = rng.randrange(0x20, 0x3000)
        elif roll < 0.8:
            code = rng.randrange(0, 0x10000)
        else:
            code = rng.randrange(0x10000, 0x110000)
        if 0xD800 <= code <= 0xDFFF:
            code = 0xFFFD
        chars.append(chr(code))
    return "".join(chars)


def emoji_fragment(rng: random.Random) -> str:
    """Emoji: plain, with skin tones, ZWJ families, VS16, flags and keycaps, glued or spaced."""
    out = []
    for _ in range(rng.randint(1, 8)):
        roll = rng.random()
        if roll < 0.3:
            out.append(rng.choice(EMOJI_BASES))
        elif roll < 0.5:
            out.append(rng.choice(PEOPLE) + rng.choice(SKIN_TONES))
        elif roll < 0.7:
            members = [rng.choice(PEOPLE) + (rng.choice(SKIN_TONES) if rng.random() < 0.3 else "")
                       for _ in range(rng.randint(2, 4))]
            out.append(ZWJ.join(members))
        elif roll < 0.8:
            out.append(rng.choice(["\u2764", "\u263a", "\u2600", "\u270c", "\u2b50"]) + VS16)
        elif roll < 0.9:
            out.append(rng.choice(REGIONAL) + rng.choice(REGIONAL))
        else:
            out.append(rng.choice("0123456789#*") + VS16 + "\u20e3")
        out.append(rng.choice(["", "", " ", "!", "\n", "a"]))
    return "".join(out)


def whitespace_fragment(rng: random.Random) -> str:
    """Runs of mixed whitespace between short words, with trailing whitespace."""
    out = []
    for _ in range(rng.randint(1, 6)):
        out.append("".join(rng.choices(WHITESPACE, k=rng.randint(1, 6))))
        out.append(rng.choice(["a", "word", "Ab", "1", "!", ".", "x y", "中", "é"]))
    out.append("".join(rng.choices(WHITESPACE, k=rng.randint(0, 4))))
    return "".join(out)


def digits_fragment(rng: random.Random) -> str:
    """Digit runs of every length in several number systems, numbers with separators, dates."""
    out = []
    for _ in range(rng.randint(1, 6)):
        digits = rng.choice(DIGIT_SETS)
        run = "".join(rng.choices(digits, k=max(1, int(rng.expovariate(1 / 5)))))
        roll = rng.random()
        if roll < 0.15:
            run = f"{rng.randrange(10**6):,}.{rng.randrange(100):02d}"
        elif roll < 0.25:
            run = f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
        elif roll < 0.3:
            run = "$" + run + rng.choice(["%", "k", "px", "th", "ms"])
        out.append(run)
        out.append(rng.choice([" ", "", "\n", ", ", "x", " + ", "/"]))
    return "".join(out)


def code_fragment(rng: random.Random) -> str:
    """A Python, JSON, C or HTML snippet with random names and numbers."""
    template = rng.choice([PYTHON, PYTHON, JSON, C_CODE, HTML])
    return template.format(name=identifier(rng), arg=identifier(rng), key=identifier(rng), n=rng.randrange(10**4),
                           m=rng.randrange(100), doc=words_fragment(rng).replace('"', "").replace("\\", "")[:80])


def contractions_fragment(rng: random.Random) -> str:
    """Contractions in mixed case (and look-alikes: ``ſ``, U+2019, doubled quotes) after various hosts."""
    out = []
    for _ in range(rng.randint(1, 10)):
        out.append(rng.choice(CONTRACTION_HOSTS) + rng.choice(CONTRACTIONS))
        out.append(rng.choice([" ", " ", "", "\n", ". ", "  "]))
    return "".join(out)


def special_lookalike_fragment(rng: random.Random) -> str:
    """Text that is, contains, or almost is a special token's spelling."""
    out = []
    for _ in range(rng.randint(1, 4)):
        out.append(rng.choice(SPECIAL_LOOKALIKES))
        out.append(rng.choice(["", " ", "\n", "hello", "a", "|", "<"]))
    return "".join(out)


def long_word_fragment(rng: random.Random) -> str:
    """One long piece: a repeated letter, random letters, a URL, base64, hex, a punctuation rule, a whitespace
    run, a compound."""
    length = int(math.exp(rng.uniform(math.log(20), math.log(3000))))
    roll = rng.random()
    if roll < 0.15:
        word = rng.choice("aezZé中あ") * length
    elif roll < 0.35:
        word = random_letters(rng, SCRIPTS[rng.choice(list(SCRIPTS))], length)
    elif roll < 0.45:
        word = "https://example.org/" + "/".join(rng.choice(WORDS) for _ in range(length // 8)) + "?id=42"
    elif roll < 0.6:
        word = random_letters(rng, list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"), length)
    elif roll < 0.7:
        word = random_letters(rng, list("0123456789abcdef"), length)
    elif roll < 0.8:
        word = rng.choice(["=", "-", ".", "*", "#", "~", "_", "!?"]) * (length // 4 + 1)
    elif roll < 0.9:
        word = rng.choice(WHITESPACE) * (length // 4 + 1) + rng.choice(["", "x", "1", "!"])
    else:
        word = "".join(rng.choice(WORDS).capitalize() for _ in range(length // 6 + 1))
    return rng.choice(["", " ", "\n"]) + word + rng.choice(["", " ", "\n", "."])


def prose_fragment(rng: random.Random) -> str:
    """English-like sentences (the common case should be well represented too)."""
    sentences = []
    for _ in range(rng.randint(1, 5)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 18))]
        words[0] = words[0].capitalize()
        sentences.append(" ".join(words) + rng.choice([".", ".", "!", "?", ":", "..."]))
    return " ".join(sentences) + rng.choice([" ", "\n", "\n\n", ""])


FRAGMENTS: list[tuple[Callable[[random.Random], str], float]] = [
    (prose_fragment, 3.0),
    (words_fragment, 4.0),
    (unicode_fragment, 1.0),
    (emoji_fragment, 1.0),
    (whitespace_fragment, 1.5),
    (digits_fragment, 1.5),
    (code_fragment, 1.5),
    (contractions_fragment, 1.0),
    (long_word_fragment, 0.3),
]
_GENERATORS = [generator for generator, _ in FRAGMENTS]
_WEIGHTS = [weight for _, weight in FRAGMENTS]


# Tables for cluster_text: combining marks, jamo, full-width and compatibility forms.
COMBINING = [chr(code) for code in range(0x300, 0x370)] + ["\u0e31", "\u093c", "\u094d", "\u20e3", "\ufe0f",
                                                           "\u3099", "\u309a", "\u1ab0", "\U0001d165"]
JAMO = [chr(code) for code in range(0x1100, 0x1200)] + [chr(code) for code in range(0x3131, 0x318F)]
FULL_WIDTH = [chr(code) for code in range(0xFF01, 0xFFEF)]
COMPATIBILITY = ["ﬁ", "①", "㍿", "ｶﾞ", "ﾊﾟ", "Å", "Ω", "ℌ", "㈱", "…", "\u00a0", "\u3000", "\u200b", "\u2028",
                 "\ufeff", "\x00", "\x0c", "\x08", "\x1e", "™", "\u00ad", "İ", "ß", "ẞ", "ǅ", "Σ", "ﬀ", "\u0340", "\u0f73", "\u2126"]


def cluster_text(rng: random.Random) -> str:
    """Characters where grapheme clusters and normalization rules meet (`tokenizers`' ``Precompiled``
    maps whole clusters): marks on letters and on mapped characters, Hangul syllables and jamo runs,
    emoji ZWJ sequences, full-width and compatibility forms."""
    out = [rng.choice(["", "", "\x08", "\x1e\x1e", "\u200b"])]  # removed at the very start: offsets lag there
    for _ in range(rng.randint(1, 12)):
        roll = rng.random()
        if roll < 0.2:
            out.append(rng.choice("aeAE" + "".join(FULL_WIDTH[:94]) + "".join(COMPATIBILITY))
                       + "".join(rng.choices(COMBINING, k=rng.randint(1, 3))))
        elif roll < 0.35:
            out.append("".join(rng.choice(HANGUL) if rng.random() < 0.5 else rng.choice(JAMO)
                               for _ in range(rng.randint(1, 4))))
        elif roll < 0.5:
            members = [rng.choice(PEOPLE) + (rng.choice(SKIN_TONES) if rng.random() < 0.3 else "")
                       for _ in range(rng.randint(1, 4))]
            out.append(ZWJ.join(members) if rng.random() < 0.8 else rng.choice(EMOJI_BASES) + "\ufe0f")
        elif roll < 0.7:
            out.append("".join(rng.choices(FULL_WIDTH, k=rng.randint(1, 5))))
        elif roll < 0.85:
            out.append("".join(rng.choices(COMPATIBILITY, k=rng.randint(1, 3))))
        else:
            out.append(rng.choice(["a", "The", "  ", "\t", "\r\n", "1"]))
        out.append(rng.choice(["", "", " ", "\n"]))
    return "".join(out)


def fragment(rng: random.Random, *, specials: bool = True) -> str:
    """One fragment of a randomly chosen kind (special-token look-alikes only when ``specials``)."""
    if specials and rng.random() < 0.02:
        return special_lookalike_fragment(rng)
    return rng.choices(_GENERATORS, _WEIGHTS)[0](rng)


def document(rng: random.Random, size_bytes: int, *, specials: bool = True) -> str:
    """A document of about ``size_bytes`` UTF-8 bytes (at least, unless ``size_bytes`` is 0)."""
    parts: list[str] = []
    produced = 0
    while produced < size_bytes:
        part = fragment(rng, specials=specials)
        parts.append(part)
        produced += len(part.encode("utf-8"))
    # Trailing whitespace at the very end of a document exercises `\s++$`.
    if rng.random() < 0.1:
        parts.append(rng.choice(WHITESPACE))
    return "".join(parts)


def document_sizes(rng: random.Random, total_bytes: int, *, small: int = 1, large: int = 20_000,
                   huge: tuple[int, ...] = ()) -> Iterator[int]:
    """Document sizes (log-uniform between ``small`` and ``large``, then the ``huge`` ones), summing to
    at least ``total_bytes``. A few sizes are 0 (empty documents)."""
    produced = 0
    for size in huge:
        produced += size
        yield size
    while produced < total_bytes:
        size = 0 if rng.random() < 0.01 else int(math.exp(rng.uniform(math.log(small), math.log(large))))
        produced += size
        yield size


def showcase(rng: random.Random, *, specials: bool = True) -> list[str]:
    """A few documents that hold every listed case at least once (each script, whitespace, digit set,
    contraction, emoji kind, code template and, when ``specials``, special-token look-alike), and an
    empty document: the generated corpus covers them all however small it is."""
    docs = [""]
    docs.append(" ".join(random_letters(rng, alphabet, 12) for alphabet in SCRIPTS.values()))
    docs.append("x".join(WHITESPACE) + " \n\t ")
    docs.append(" ".join(digits + digits[::-1] for digits in DIGIT_SETS))
    docs.append(" ".join(host + contraction for host in CONTRACTION_HOSTS[:3] for contraction in CONTRACTIONS))
    docs.append(emoji_fragment(rng) + "".join(rng.choice(PEOPLE) + tone + ZWJ for tone in SKIN_TONES)
                + "\u2764" + VS16 + "1" + VS16 + "\u20e3" + REGIONAL[0] + REGIONAL[1])
    docs.extend(template.format(name="f", arg="x", key="k", n=1234, m=7, doc="doc") for template in
                (PYTHON, JSON, C_CODE, HTML))
    docs.append(" ".join(rng.choice(WORDS) for _ in range(200)) + ".")
    if specials:
        docs.append("|".join(SPECIAL_LOOKALIKES))
    return docs


def documents(rng: random.Random, total_bytes: int, *, huge: tuple[int, ...] = (),
              specials: bool = True) -> list[str]:
    """Generated documents of varied lengths (empty to ``large``, plus ``huge`` ones) totalling at least
    ``total_bytes`` UTF-8 bytes, starting with the :func:`showcase` documents."""
    docs = showcase(rng, specials=specials)
    sizes = document_sizes(rng, total_bytes - utf8_size(docs), huge=huge)
    docs.extend(document(rng, size, specials=specials) for size in sizes)
    rng.shuffle(docs)
    return docs


TIE_SEPARATORS = [" ", " ", "  ", "\n", ", ", ". ", "", "", "\t", " \n", "\u3000", "\u00a0", "'s ", "\r\n"]


def tie_documents(rng: random.Random, *, words: int = 60, repeats: tuple[int, ...] = (1, 2, 3),
                  documents: int = 8, special_tokens: Iterable[str] = (),
                  excluded: Container[int] = frozenset()) -> list[str]:
    """Multilingual documents full of equal pair counts, where a trainer's tie rule decides most merges.

    ``words`` distinct words, each repeated a number of times drawn from ``repeats`` (few distinct counts),
    shuffled, glued by a few separators (some empty) into ``documents`` documents, with the special tokens
    now and then between words. Every word is written in a small alphabet drawn once per corpus: a few
    Hangul syllables, Devanagari digits, emoji ZWJ families (skin tones, VS16), two or three Latin
    letters, letters and marks of another script, any code points at all (controls, unassigned, private
    use, astral), or a compound of two of these. Code points in ``excluded`` are never produced.

    >>> docs = tie_documents(random.Random(1), words=10, documents=2)
    >>> len(docs), tie_documents(random.Random(1), words=10, documents=2) == docs
    (2, True)
    """
    def any_code_point() -> str:
        while True:
            code = rng.choice([rng.randrange(0x80), rng.randrange(0x3000), rng.randrange(0x10000),
                               rng.randrange(0x110000)])
            if not 0xD800 <= code <= 0xDFFF and code not in excluded:
                return chr(code)

    script = SCRIPTS[rng.choice([name for name in SCRIPTS if name != "hangul"])]
    families = [ZWJ.join(rng.sample(PEOPLE, rng.randint(2, 4))) for _ in range(3)]
    alphabets: dict[str, list[str]] = {
        "hangul": rng.sample(HANGUL, rng.randint(2, 5)),
        "devanagari digits": rng.sample(_span(0x966, 0x96F), rng.randint(2, 4)),
        "emoji": families + [family + rng.choice(SKIN_TONES) for family in families] + ["\u2764" + VS16],
        "latin": rng.sample("abcdefghij", rng.randint(2, 3)),
        "script": rng.sample(script, rng.randint(3, 5)),
        "any": [any_code_point() for _ in range(rng.randint(3, 8))],
    }

    def word(kind: str) -> str:
        if kind == "compound":
            first, second = rng.sample(list(alphabets), 2)
            return word(first) + word(second)
        return "".join(rng.choices(alphabets[kind], k=rng.randint(1, 6)))

    kinds = list(alphabets) + ["compound"]
    vocabulary = {word(rng.choice(kinds)) for _ in range(words)}
    occurrences = [w for w in sorted(vocabulary) for _ in range(rng.choice(repeats))]
    rng.shuffle(occurrences)
    separators = rng.sample(TIE_SEPARATORS, 3)
    specials = list(special_tokens)
    docs: list[list[str]] = [[] for _ in range(documents)]
    for occurrence in occurrences:
        doc = rng.choice(docs)
        doc.append(occurrence)
        doc.append(rng.choice(specials) if specials and rng.random() < 0.05 else rng.choice(separators))
    return ["".join(doc) for doc in docs]


def split_documents(text: str, rng: random.Random, *, min_bytes: int = 1000,
                    max_bytes: int = 10_000) -> list[str]:
    """Cut a corpus into documents at blank lines (or at line ends inside long paragraphs), each about
    ``min_bytes``..``max_bytes`` long (log-uniform). The documents concatenate back to ``text``."""
    docs: list[str] = []
    start = 0
    while start < len(text):
        # Characters are at least one byte: aim by characters, then step back to a boundary.
        target = int(math.exp(rng.uniform(math.log(min_bytes), math.log(max_bytes))))
        end = min(len(text), start + _chars_for_bytes(text, start, target))
        if end < len(text):
            cut = text.rfind("\n\n", start + 1, end)
            if cut == -1:
                cut = text.rfind("\n", start + 1, end)
            if cut != -1:
                end = cut + 1
        docs.append(text[start:end])
        start = end
    return docs


def _chars_for_bytes(text: str, start: int, size_bytes: int) -> int:
    """How many characters from ``start`` make about ``size_bytes`` UTF-8 bytes."""
    window = text[start:start + size_bytes]
    ratio = len(window.encode()) / max(1, len(window))
    return max(1, int(size_bytes / ratio))


def corpus_documents(paths: Iterable[Path], rng: random.Random, *, limit_bytes: int | None = None,
                     min_bytes: int = 1000, max_bytes: int = 10_000) -> list[tuple[str, list[str]]]:
    """``[(file name, documents)]`` for each corpus file, taking at most ``limit_bytes`` of each from a
    random line start (the whole file when ``limit_bytes`` is None)."""
    result = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if limit_bytes is not None:
            chars = _chars_for_bytes(text, 0, limit_bytes) if text else 0
            if chars < len(text):
                start = rng.randrange(0, len(text) - chars)
                line_start = text.rfind("\n", 0, start) + 1
                text = text[line_start:line_start + chars]
        result.append((path.name, split_documents(text, rng, min_bytes=min_bytes, max_bytes=max_bytes)))
    return result


def utf8_size(texts: Iterable[str]) -> int:
    return sum(len(text.encode("utf-8")) for text in texts)


# ------------------------------------------------- one long piece (the cost guard, the benchmark)

LATIN1_LETTERS = [chr(code) for code in range(0xC0, 0x100) if chr(code).isalpha()]


def repeated_letter(run: int, size: int) -> str:
    """One letter repeated (one piece under every pattern), behind a run-specific prefix of letters
    (the run's octal digits, each as one of eight letters)."""
    prefix = "".join("xyzqwvkj"[int(digit)] for digit in f"{run:o}")
    return prefix + "a" * (size - len(prefix))


def random_non_whitespace(run: int, size: int) -> str:
    """Random letters, marks, digits and punctuation from several scripts, never whitespace."""
    rng = random.Random(1000 + run)
    pool = ([chr(code) for code in range(0x21, 0x7F)] + LATIN1_LETTERS + [chr(code) for code in range(0x3B1, 0x3CA)]
            + [chr(code) for code in range(0x430, 0x450)] + [chr(code) for code in range(0x4E00, 0x4E80)]
            + ["\u0301", "\u0915", "\u094d", "\u0661", "\uff11", "\U0001F600"])
    return _sized(rng, pool, size)


def random_latin1_letters(run: int, size: int) -> str:
    """Random bytes 0xC0-0xFF read as Latin-1 letters, with ASCII letters: one piece of 2-byte characters."""
    rng = random.Random(2000 + run)
    return _sized(rng, LATIN1_LETTERS + [chr(code) for code in range(0x61, 0x7B)], size)


def random_ascii_letters(run: int, size: int) -> str:
    """Random lowercase ASCII letters without spaces: one piece with merges everywhere."""
    rng = random.Random(3000 + run)
    return _sized(rng, [chr(code) for code in range(0x61, 0x7B)], size)


def _sized(rng: random.Random, pool: list[str], size: int) -> str:
    """Characters from ``pool`` making about ``size`` UTF-8 bytes."""
    average = sum(len(ch.encode()) for ch in pool) / len(pool)
    return "".join(rng.choices(pool, k=int(size / average)))
