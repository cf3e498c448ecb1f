"""The conversion matrix: every (source format, target format) pair either round-trips exactly (the
target's own library loads what ``save`` wrote and encodes as our model does) or is refused with a
:class:`~hf_bpe.errors.ConversionError` saying why, with or without a documented lossy mode.

The ``gguf`` column's own library is llama.cpp: its tokenizer runs on the written file when
``LLAMA_CPP_TEST_TOKENIZER`` names its ``test-tokenizer-0`` binary (or the ``llama_cpp`` package is
installed); without it the file is read back by ``conversion.gguf``, whose reading
``tests/conversion/test_gguf.py`` proves against llama.cpp's own vocabulary tests.

``EXPECTED`` is the table; docs/formats.md carries it (checked by ``test_docs_carry_the_matrix``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import oracles
import pytest
from conversion_support import (
    CL100K_SPECIALS,
    assert_same,
    cl100k_file,
    gpt2_files,
    mistral_file,
    scaled,
    shared,
    trained_model,
    varied_texts,
)

import conversion.gguf
import conversion.gpt2
import conversion.hf
import conversion.sentencepiece
import conversion.tiktoken
from hf_bpe import BPE, patterns
from hf_bpe.errors import ConversionError, LossyConversionWarning

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is an oracle; pip install -e '.[test]'")

TEXTS = scaled(500, minimum=100)
FORMATS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "formats.md"

# ------------------------------------------------------------------------------------------- sources


@functools.cache
def hf_trained_file(folder: str) -> Path:
    """A tokenizer.json trained by `tokenizers`' BpeTrainer (byte-level, full alphabet)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(varied_texts(4_000, seed=21), trainer=trainer)
    path = Path(folder) / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def hf_merges_file(folder: str) -> Path:
    """The trained tokenizer.json plus a token no merge makes: a merges list that tiktoken's rank rule
    would apply differently (it would emit the token for a piece spelling it)."""
    document = json.loads(hf_trained_file(folder).read_text(encoding="utf-8"))
    vocab = document["model"]["vocab"]
    vocab["ĠzzzqÃ©"] = max(vocab.values()) + 1
    path = Path(folder) / "merges" / "tokenizer.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def hf_split_file(folder: str) -> Path:
    """A tokenizer.json trained by `tokenizers` with DeepSeek-V3's Split steps (Oniguruma regexes)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated"),
        pre_tokenizers.Split(Regex("[一-龥\u3040-ゟ゠-ヿ]+"), "isolated"),
        pre_tokenizers.Split(Regex("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
                                   "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(varied_texts(4_000, seed=22), trainer=trainer)
    path = Path(folder) / "split" / "tokenizer.json"
    path.parent.mkdir(exist_ok=True)
    tokenizer.save(str(path))
    return path


def hf_normalizer_file(folder: str) -> Path:
    """The trained tokenizer.json with Qwen 2's normalizer and pre-tokenizer: NFC, then Qwen 2's regex
    as a Split, then ByteLevel without its own regex."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

    tokenizer = Tokenizer.from_file(os.fspath(hf_trained_file(folder)))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(patterns.QWEN2), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    path = Path(folder) / "nfc" / "tokenizer.json"
    path.parent.mkdir(exist_ok=True)
    tokenizer.save(os.fspath(path))
    return path


def hf_digits_file(folder: str) -> Path:
    """The trained tokenizer.json splitting digits one by one and punctuation apart (`tokenizers`'
    Digits and Punctuation pre-tokenizers) before ByteLevel's own regex."""
    from tokenizers import Tokenizer, pre_tokenizers

    tokenizer = Tokenizer.from_file(os.fspath(hf_trained_file(folder)))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Punctuation("isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    path = Path(folder) / "digits" / "tokenizer.json"
    path.parent.mkdir(exist_ok=True)
    tokenizer.save(os.fspath(path))
    return path


def hf_metaspace_file(folder: str) -> Path:
    """The tokenizer.json transformers' ``LlamaTokenizer`` writes for Mistral's v1 ``.model``: a
    SentencePiece-style BPE (Metaspace pre-tokenizer, byte fallback)."""
    transformers = pytest.importorskip("transformers", reason="transformers writes the file; pip install -e '.[test]'")
    source = Path(folder) / "mistral-v1"
    source.mkdir(exist_ok=True)
    (source / "tokenizer.model").write_bytes(mistral_file("tokenizer.model.v1").read_bytes())
    out = Path(folder) / "mistral-v1-llama"
    transformers.LlamaTokenizer.from_pretrained(os.fspath(source)).save_pretrained(os.fspath(out))
    return out / "tokenizer.json"


GGUF_SOURCE = "ggml-vocab-qwen2.gguf"
"""The GGUF source: llama.cpp's Qwen 2 vocabulary test file (``llama_cpp_vocab_files``)."""


SOURCES: dict[str, tuple[str, Callable[[str], BPE]]] = {
    "tiktoken": ("cl100k_base.tiktoken", lambda folder: conversion.tiktoken.load(
        cl100k_file(), pattern="cl100k", special_tokens=CL100K_SPECIALS)),
    "tekken": ("Mistral tekken_240911.json", lambda folder: conversion.tiktoken.load_tekken(
        mistral_file("tekken_240911.json"))),
    "gpt2": ("GPT-2 encoder.json + vocab.bpe", lambda folder: conversion.gpt2.load(*gpt2_files())),
    "sentencepiece": ("Mistral .model v1 (byte fallback)", lambda folder: conversion.sentencepiece.load(
        mistral_file("tokenizer.model.v1"))),
    "sentencepiece-ud": ("Mistral .model v3 (user-defined pieces)", lambda folder: conversion.sentencepiece.load(
        mistral_file("mistral_instruct_tokenizer_240323.model.v3"))),
    "sentencepiece-nfkc": ("botchan .model (nmt_nfkc normalizer)", lambda folder: conversion.sentencepiece.load(
        shared("sentencepiece", "botchan_en_bpe_1000.model"))),
    "hf": ("tokenizer.json trained by `tokenizers`", lambda folder: conversion.hf.load(hf_trained_file(folder))),
    "hf-merges": ("tokenizer.json, a merges list unlike the rank rule",
                  lambda folder: conversion.hf.load(hf_merges_file(folder))),
    "hf-split": ("tokenizer.json with Split pre-tokenizers (DeepSeek-V3's)",
                 lambda folder: conversion.hf.load(hf_split_file(folder))),
    "hf-metaspace": ("tokenizer.json by transformers from Mistral .model v1 (Metaspace, byte fallback)",
                     lambda folder: conversion.hf.load(hf_metaspace_file(folder))),
    "hf-nfc": ("tokenizer.json with Qwen 2's NFC normalizer and Split",
               lambda folder: conversion.hf.load(hf_normalizer_file(folder))),
    "hf-digits": ("tokenizer.json with Digits and Punctuation pre-tokenizers",
                  lambda folder: conversion.hf.load(hf_digits_file(folder))),
    "gguf": (f"llama.cpp's {GGUF_SOURCE}", lambda folder: conversion.gguf.load(Path(folder) / GGUF_SOURCE)),
    "trained": ("trained by us (rank model)", lambda folder: trained_model()),
}
"""Each source from the folder it writes its files in (the ``gguf`` source: where llama.cpp's
vocabulary files are)."""

# ------------------------------------------------------------------------------------------- targets

TARGETS = ["tiktoken", "tekken", "gpt2", "sentencepiece", "hf", "hf_bpe", "gguf"]

EXACT = "exact"
# Refusals: (error message must match, lossy mode available)
PATTERN = ("split pattern", True)
IDS = ("renumber", True)
RANK_RULE = ("rank rule", True)
NO_PATTERN_IN_SP = ("no split pattern", True)
SENTENCEPIECE = ("SentencePiece model", False)
SP_USER_DEFINED = ("user-defined pieces .* with the dummy prefix", True)
SP_NORMALIZER = ("precompiled character map", True)
SPLIT = ("split pattern", False)  # tekken holds a tiktoken regex; lossy only renumbers
SPLIT_LOSSY = ("Split pre-tokenizer", True)  # a .tiktoken file holds no pattern; tiktoken runs fancy-regex only
METASPACE = ("Metaspace pre-tokenizer .* cannot say", False)  # a .model's (llama.cpp's) dummy prefix: every text
LLAMA_PRE = ("no llama.cpp pre-tokenizer splits as the pattern", True)
LLAMA_USER_DEFINED = ("user-defined pieces .*llama.cpp puts a ▁", True)
LLAMA_SP_NORMALIZER = ("llama.cpp cannot run .* the normalizer 'nmt_nfkc'", False)

EXPECTED: dict[tuple[str, str], Any] = {
    ("tiktoken", "tiktoken"): EXACT, ("tiktoken", "tekken"): IDS, ("tiktoken", "gpt2"): PATTERN,
    ("tiktoken", "sentencepiece"): NO_PATTERN_IN_SP, ("tiktoken", "hf"): EXACT, ("tiktoken", "hf_bpe"): EXACT,
    ("tekken", "tiktoken"): EXACT, ("tekken", "tekken"): EXACT, ("tekken", "gpt2"): PATTERN,
    ("tekken", "sentencepiece"): NO_PATTERN_IN_SP, ("tekken", "hf"): EXACT, ("tekken", "hf_bpe"): EXACT,
    ("gpt2", "tiktoken"): EXACT, ("gpt2", "tekken"): IDS, ("gpt2", "gpt2"): EXACT,
    ("gpt2", "sentencepiece"): NO_PATTERN_IN_SP, ("gpt2", "hf"): EXACT, ("gpt2", "hf_bpe"): EXACT,
    ("sentencepiece", "tiktoken"): SENTENCEPIECE, ("sentencepiece", "tekken"): SENTENCEPIECE,
    ("sentencepiece", "gpt2"): SENTENCEPIECE, ("sentencepiece", "sentencepiece"): EXACT,
    ("sentencepiece", "hf"): EXACT, ("sentencepiece", "hf_bpe"): EXACT,
    ("sentencepiece-ud", "tiktoken"): SENTENCEPIECE, ("sentencepiece-ud", "tekken"): SENTENCEPIECE,
    ("sentencepiece-ud", "gpt2"): SENTENCEPIECE, ("sentencepiece-ud", "sentencepiece"): EXACT,
    ("sentencepiece-ud", "hf"): SP_USER_DEFINED, ("sentencepiece-ud", "hf_bpe"): EXACT,
    ("sentencepiece-nfkc", "tiktoken"): SENTENCEPIECE, ("sentencepiece-nfkc", "tekken"): SENTENCEPIECE,
    ("sentencepiece-nfkc", "gpt2"): SENTENCEPIECE, ("sentencepiece-nfkc", "sentencepiece"): EXACT,
    ("sentencepiece-nfkc", "hf"): SP_NORMALIZER, ("sentencepiece-nfkc", "hf_bpe"): EXACT,
    ("hf", "tiktoken"): EXACT, ("hf", "tekken"): IDS, ("hf", "gpt2"): EXACT,
    ("hf", "sentencepiece"): NO_PATTERN_IN_SP, ("hf", "hf"): EXACT, ("hf", "hf_bpe"): EXACT,
    ("hf-merges", "tiktoken"): RANK_RULE, ("hf-merges", "tekken"): RANK_RULE, ("hf-merges", "gpt2"): EXACT,
    ("hf-merges", "sentencepiece"): NO_PATTERN_IN_SP, ("hf-merges", "hf"): EXACT, ("hf-merges", "hf_bpe"): EXACT,
    ("hf-split", "tiktoken"): SPLIT_LOSSY, ("hf-split", "tekken"): SPLIT, ("hf-split", "gpt2"): PATTERN,
    ("hf-split", "sentencepiece"): NO_PATTERN_IN_SP, ("hf-split", "hf"): EXACT, ("hf-split", "hf_bpe"): EXACT,
    ("hf-metaspace", "tiktoken"): SENTENCEPIECE, ("hf-metaspace", "tekken"): SENTENCEPIECE,
    ("hf-metaspace", "gpt2"): SENTENCEPIECE, ("hf-metaspace", "sentencepiece"): METASPACE,
    ("hf-metaspace", "hf"): EXACT, ("hf-metaspace", "hf_bpe"): EXACT,
    ("hf-nfc", "tiktoken"): SPLIT_LOSSY, ("hf-nfc", "tekken"): SPLIT, ("hf-nfc", "gpt2"): PATTERN,
    ("hf-nfc", "sentencepiece"): NO_PATTERN_IN_SP, ("hf-nfc", "hf"): EXACT, ("hf-nfc", "hf_bpe"): EXACT,
    ("hf-digits", "tiktoken"): SPLIT_LOSSY, ("hf-digits", "tekken"): SPLIT, ("hf-digits", "gpt2"): PATTERN,
    ("hf-digits", "sentencepiece"): NO_PATTERN_IN_SP, ("hf-digits", "hf"): EXACT, ("hf-digits", "hf_bpe"): EXACT,
    ("gguf", "tiktoken"): EXACT, ("gguf", "tekken"): IDS, ("gguf", "gpt2"): PATTERN,
    ("gguf", "sentencepiece"): NO_PATTERN_IN_SP, ("gguf", "hf"): EXACT, ("gguf", "hf_bpe"): EXACT,
    ("trained", "tiktoken"): EXACT, ("trained", "tekken"): IDS, ("trained", "gpt2"): EXACT,
    ("trained", "sentencepiece"): NO_PATTERN_IN_SP, ("trained", "hf"): EXACT, ("trained", "hf_bpe"): EXACT,
} | {
    ("tiktoken", "gguf"): LLAMA_PRE, ("tekken", "gguf"): LLAMA_PRE, ("gpt2", "gguf"): EXACT,
    ("sentencepiece", "gguf"): EXACT, ("sentencepiece-ud", "gguf"): LLAMA_USER_DEFINED,
    ("sentencepiece-nfkc", "gguf"): LLAMA_SP_NORMALIZER, ("hf", "gguf"): EXACT, ("hf-merges", "gguf"): EXACT,
    ("hf-split", "gguf"): LLAMA_PRE, ("hf-metaspace", "gguf"): METASPACE, ("hf-nfc", "gguf"): LLAMA_PRE,
    ("hf-digits", "gguf"): LLAMA_PRE, ("gguf", "gguf"): EXACT, ("trained", "gguf"): EXACT,
}


def save(model: BPE, target: str, out: Path, lossy: bool) -> Path:
    if target == "tiktoken":
        return conversion.tiktoken.save(model, out / "model.tiktoken", lossy=lossy)
    if target == "tekken":
        return conversion.tiktoken.save_tekken(model, out / "tekken.json", lossy=lossy)
    if target == "gpt2":
        return conversion.gpt2.save(model, out / "gpt2", lossy=lossy)
    if target == "sentencepiece":
        return conversion.sentencepiece.save(model, out / "model.model", lossy=lossy)
    if target == "hf":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LossyConversionWarning)  # the rate is tested with SentencePiece
            return conversion.hf.save(model, out / "tokenizer.json", lossy=lossy)
    if target == "hf_bpe":
        return model.save(out / "model.json")
    if target == "gguf":
        return conversion.gguf.save(model, out / "vocab.gguf", lossy=lossy)
    raise AssertionError(target)


def owner_encoder(target: str, path: Path, model: BPE) -> tuple[Callable[[str], list[int]], Callable[[str], list[int]],
                                                                 Callable[[list[int]], str] | None]:
    """(how the target's own library encodes, how we compare, how it decodes) for a written file."""
    with_specials: Callable[[str], list[int]] = lambda text: model.encode(text, allowed_special="all")
    if target == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        # A model split by tokenizers' Splits has no tiktoken pattern: tiktoken reads its ranks with GPT-2's.
        pattern = model.pattern if isinstance(model.pattern, str) else patterns.GPT2
        theirs = tiktoken.Encoding("matrix", pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(os.fspath(path)),
                                   special_tokens=model.special_tokens)
        return (lambda text: theirs.encode(text, allowed_special="all")), with_specials, theirs.decode
    if target == "tekken":
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        theirs = Tekkenizer.from_file(path)
        return (lambda text: theirs.encode(text, bos=False, eos=False)), model.encode_ordinary, theirs.decode
    if target == "gpt2":
        import transformers

        theirs = transformers.GPT2Tokenizer.from_pretrained(os.fspath(path))
        return (lambda text: theirs.encode(text, add_special_tokens=False)), with_specials, theirs.decode
    if target == "sentencepiece":
        import sentencepiece

        theirs = sentencepiece.SentencePieceProcessor(model_file=os.fspath(path))
        return theirs.encode, model.encode_ordinary, theirs.decode
    if target == "hf":
        theirs = tokenizers.Tokenizer.from_file(os.fspath(path))
        return ((lambda text: theirs.encode(text, add_special_tokens=False).ids), with_specials,
                lambda ids: theirs.decode(ids, skip_special_tokens=False))
    if target == "hf_bpe":
        loaded = BPE.load(path)
        assert loaded == model
        return (lambda text: loaded.encode(text, allowed_special="all")), with_specials, loaded.decode
    if target == "gguf":  # llama.cpp itself runs in test_matrix when at hand (LLAMA_CPP)
        vocab = conversion.gguf.read(path)
        return vocab.encode, model.encode_ordinary, vocab.model.decode
    raise AssertionError(target)


LLAMA_CPP = oracles.llama_cpp_tokenizer()
"""llama.cpp's tokenizer (``tokenize(file, text)``), or ``None`` when it is not at hand."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("matrix-sources"))


@functools.cache
def source_model(name: str, folder: str) -> BPE:
    return SOURCES[name][1](folder)


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", list(SOURCES))
def test_matrix(source: str, target: str, folder: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if source == "gguf":
        folder = os.fspath(request.getfixturevalue("llama_cpp_vocab_files"))
    model = source_model(source, folder)
    expected = EXPECTED[(source, target)]
    if expected != EXACT:
        problem, lossy_available = expected
        with pytest.raises(ConversionError, match=problem):
            save(model, target, tmp_path, lossy=False)
        assert not any(tmp_path.iterdir()), "a refused save left files behind"
        if lossy_available:
            written = save(model, target, tmp_path, lossy=True)
            owner_encoder(target, written, model)  # the owning library reads the approximation
        else:
            with pytest.raises(ConversionError):
                save(model, target, tmp_path, lossy=True)
        return
    written = save(model, target, tmp_path, lossy=False)
    theirs, ours, their_decode = owner_encoder(target, written, model)
    texts = list(varied_texts(TEXTS, seed=31))
    their_ids = [theirs(text) for text in texts]
    assert_same(f"{source} -> {target}", texts, [ours(text) for text in texts], their_ids)
    if their_decode is not None:
        assert_same(f"{source} -> {target} decode", texts, [model.decode(ids) for ids in their_ids],
                    [their_decode(ids) for ids in their_ids])
    if target == "gguf" and LLAMA_CPP is not None:  # llama.cpp itself, once on all the texts joined
        document = "\n".join(texts)
        assert LLAMA_CPP(written, document) == model.encode_ordinary(document), f"{source} -> gguf: llama.cpp differs"


# ----------------------------------------------------------------------------------------------- docs

LEGEND = {
    EXACT: "exact",
    PATTERN: "refused: pattern (lossy)",
    IDS: "refused: ids (lossy renumbers)",
    RANK_RULE: "refused: rank rule (lossy)",
    NO_PATTERN_IN_SP: "refused: no pattern (lossy)",
    SENTENCEPIECE: "refused",
    SP_USER_DEFINED: "refused: user-defined pieces (lossy)",
    SP_NORMALIZER: "refused: normalizer (lossy)",
    SPLIT: "refused: pattern",
    SPLIT_LOSSY: "refused: pattern (lossy writes ranks)",
    METASPACE: "refused: Metaspace",
    LLAMA_PRE: "refused: no llama.cpp pre-tokenizer (lossy)",
    LLAMA_USER_DEFINED: "refused: user-defined pieces (lossy)",
    LLAMA_SP_NORMALIZER: "refused: normalizer, no byte fallback",
}


def markdown_matrix() -> str:
    header = "| from \\ to | " + " | ".join(f"`{target}`" for target in TARGETS) + " |"
    rule = "|---|" + "---|" * len(TARGETS)
    rows = [f"| `{source}`: {SOURCES[source][0]} | "
            + " | ".join(LEGEND[EXPECTED[(source, target)]] for target in TARGETS) + " |" for source in SOURCES]
    return "\n".join([header, rule, *rows])


def test_docs_carry_the_matrix() -> None:
    text = FORMATS_PAGE.read_text(encoding="utf-8")
    found = re.search(r"<!-- conversion-matrix -->\n(.*?)\n<!-- /conversion-matrix -->", text, re.DOTALL)
    assert found, "docs/formats.md lacks the <!-- conversion-matrix --> section"
    assert found.group(1).strip() == markdown_matrix(), (
        "docs/formats.md's conversion matrix is out of date; replace it with:\n" + markdown_matrix())


def test_every_pair_has_an_expected_outcome() -> None:
    assert set(EXPECTED) == {(source, target) for source in SOURCES for target in TARGETS}
