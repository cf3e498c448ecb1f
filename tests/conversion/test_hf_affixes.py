"""Byte-level ``tokenizer.json`` BPE models with ``continuing_subword_prefix`` / ``end_of_word_suffix``
(``conversion._hf_affixes``): vocabularies `tokenizers`' ``BpeTrainer`` learns with them (with unknown
tokens, fused or not, ``ignore_merges``, ``byte_fallback`` over some of the ``<0xXX>`` tokens,
``add_prefix_space``, post-processors trimming offsets), and CLIP's file as transformers builds it from
CLIP's own merges, encode as `tokenizers` does: ids, offsets (start and end) and decoded text, and
``BPETokenizer``'s ``offset_mapping`` against `tokenizers` and transformers' ``TokenizersBackend`` on the
folder it saves; the model writes back to ``tokenizer.json`` and to hf_bpe's model file, and other formats
refuse it."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest
from conversion_support import assert_loads_like_tokenizers, assert_offsets_in_transformers
from suite import FULL_SIZE, scaled
from textgen import documents
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

import conversion.gguf
import conversion.gpt2
import conversion.hf
import conversion.sentencepiece
import conversion.tiktoken
from conversion import _unicode_probe
from hf_bpe.errors import ConversionError, TokenizerFileError
from hf_bpe.model import BPE

_CHARS = _unicode_probe.run_ends()
_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
_CLIP_SPLIT = {"type": "Split", "pattern": {"Regex": r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""},
               "behavior": "Removed", "invert": True}
_CLIP_NORMALIZER = {"type": "Sequence", "normalizers": [
    {"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "}, {"type": "Lowercase"}]}


def _texts(rng: random.Random, count: int) -> list[str]:
    """Generated documents cut short, and strings of characters of every code point class."""
    texts = [document[: rng.randint(1, 200)] for document in documents(rng, 300 * count)][:count // 2]
    while len(texts) < count:
        texts.append("".join(rng.choice(_CHARS) if rng.random() < 0.4 else rng.choice(" aé1\n,.abAB")
                             for _ in range(rng.randint(1, 30))))
    return texts


def _trained(prefix: str | None, suffix: str | None, seed: int, *, unk: bool = False, fuse: bool = False,
             ignore_merges: bool = False, byte_fallback: bool = False, clip_steps: bool = False,
             prefix_space: bool = False, vocab_size: int = 1400) -> dict[str, Any]:
    """A tokenizer.json whose vocabulary `tokenizers`' BpeTrainer learned with these affixes on generated
    text (its byte symbols only those the text has at each place, so many symbols are unknown); with
    ``byte_fallback``, the vocabulary also has the ``<0xXX>`` tokens of about four bytes in five (so
    that some symbols fall back and others stay unknown); ``prefix_space``: ByteLevel's
    ``add_prefix_space`` (before each piece after CLIP's steps)."""
    document = json.loads(Tokenizer(models.BPE()).to_str())
    document["normalizer"] = _CLIP_NORMALIZER if clip_steps else None
    byte_level = dict(_BYTE_LEVEL, add_prefix_space=prefix_space)
    document["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [_CLIP_SPLIT, dict(byte_level, use_regex=False)]} \
        if clip_steps else byte_level
    document["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    tokenizer = Tokenizer.from_str(json.dumps(document))
    options = {key: value for key, value in (("continuing_subword_prefix", prefix), ("end_of_word_suffix", suffix))
               if value is not None}
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, special_tokens=["<|endoftext|>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()[::3], **options)
    tokenizer.train_from_iterator(_texts(random.Random(seed), 200), trainer=trainer)
    trained = json.loads(tokenizer.to_str())
    trained["model"].update(continuing_subword_prefix=prefix, end_of_word_suffix=suffix,
                            unk_token="<unk>" if unk else None, fuse_unk=fuse, ignore_merges=ignore_merges,
                            byte_fallback=byte_fallback)
    if byte_fallback:
        rng, vocab = random.Random(seed + 100), trained["model"]["vocab"]
        for byte in range(256):
            if rng.random() < 0.8:
                vocab[f"<0x{byte:02X}>"] = len(vocab)
    return trained


_POST_PROCESSORS = [
    None,
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": False},
    {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 0], "cls": ["<|endoftext|>", 0], "trim_offsets": True,
     "add_prefix_space": False},
]
"""Post-processors for the transformers checks: none, and two trimming offsets (by the tokens' texts,
which hold the affixes)."""

# prefix, suffix, unk_token, fuse_unk, ignore_merges, byte_fallback
_CONFIGURATIONS = [
    ("##", None, False, False, False, False), ("##", None, True, False, False, False),
    ("##", None, True, True, True, False), (None, "</w>", False, False, False, False),
    (None, "</w>", True, True, False, False), ("", "</w>", True, False, True, False),
    ("##", "</w>", False, False, True, False), ("##", "</w>", True, False, False, False),
    ("\u0120", "@@", True, True, False, False), ("##", None, True, False, False, True),
    (None, "</w>", False, False, False, True), ("##", "</w>", True, True, False, True),
    ("##", "</w>", True, False, True, True), ("\u0120", "\u0120", False, False, False, True),
    (None, None, True, False, False, True), (None, None, False, False, True, True),
]
"""Affixes, unknown token, fuse_unk, ignore_merges, byte_fallback; the last two without affixes: a
byte-level file with byte fallback alone takes tokenizers' rule too."""


@pytest.mark.parametrize("size", [pytest.param(scaled(40, 8), id="ci"),
                                  pytest.param(scaled(400, 40), id="full", marks=FULL_SIZE)])
@pytest.mark.parametrize(("prefix", "suffix", "unk", "fuse", "ignore_merges", "byte_fallback"), _CONFIGURATIONS)
def test_trained_affixed_vocabularies_encode_and_decode_as_tokenizers(prefix: str | None, suffix: str | None,
                                                                      unk: bool, fuse: bool, ignore_merges: bool,
                                                                      byte_fallback: bool, size: int,
                                                                      tmp_path: Path) -> None:
    """Ids, starts, offsets and decoded text of the loaded file; then ``BPETokenizer``'s offsets under a
    post-processor (ByteLevel's or RobertaProcessing's trimming, or none), and transformers' on the folder."""
    number = _CONFIGURATIONS.index((prefix, suffix, unk, fuse, ignore_merges, byte_fallback))
    for seed in range(2):
        document = _trained(prefix, suffix, seed, unk=unk, fuse=fuse, ignore_merges=ignore_merges,
                            byte_fallback=byte_fallback, clip_steps=seed == 1, prefix_space=(number + seed) % 3 == 0)
        texts = _texts(random.Random(seed + 10), size) + ["", " ", "a", "ab ab", "\u00e9\u00e9 x", "a<unk>b",
                                                          "a<0x41>b <0x23>"]
        assert_loads_like_tokenizers(document, tmp_path / "tokenizer.json", texts)
        document["post_processor"] = _POST_PROCESSORS[(number + seed) % len(_POST_PROCESSORS)]
        folder = tmp_path / f"transformers-{seed}"
        folder.mkdir()
        assert_offsets_in_transformers(document, folder, texts[-size // 2:])


def test_offsets_between_added_tokens_matched_first_are_tokenizers_backend(tmp_path: Path) -> None:
    """Added tokens raw and normalized that overlap, which ``BPETokenizer`` matches in two phases (the
    model encodes the text between raw tokens): a model whose byte fallback spells affixes past their
    piece, where `tokenizers` reads the positions in the whole text, gives ``TokenizersBackend``'s ids
    and offsets on the saved folder."""
    import transformers
    from tokenizers import AddedToken

    from hf_bpe.transformers import BPETokenizer

    document = _trained("##", "</w>", 1, unk=True, byte_fallback=True, clip_steps=True)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    ours = BPETokenizer.from_model(conversion.hf.load(path), **conversion.hf.special_token_settings(path))
    ours.add_tokens([AddedToken("<r>", normalized=False), AddedToken("Q<r", normalized=True)])
    ours.save_pretrained(tmp_path / "saved")
    backend = transformers.TokenizersBackend.from_pretrained(str(tmp_path / "saved"))
    rng = random.Random(7)
    texts = [rng.choice(["<r>", "q<r>", "Q<r", " <r> "]).join(_texts(rng, 4)[::-1]) for _ in range(scaled(60, 20))]
    for text in texts:
        got, expected = (each(text, return_offsets_mapping=True) for each in (ours, backend))
        assert got["input_ids"] == expected["input_ids"], text
        assert list(map(tuple, got["offset_mapping"])) == list(map(tuple, expected["offset_mapping"])), text


@pytest.mark.parametrize("byte_fallback", [False, True])
def test_affixed_models_write_back_to_tokenizer_json_and_the_model_file(byte_fallback: bool, tmp_path: Path) -> None:
    document = _trained("##", "</w>", 3, unk=True, fuse=True, ignore_merges=True, byte_fallback=byte_fallback,
                        clip_steps=True)
    (tmp_path / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
    model = conversion.hf.load(tmp_path / "tokenizer.json")
    written = json.loads(conversion.hf.build_tokenizer(model).to_str())["model"]
    for key in ("continuing_subword_prefix", "end_of_word_suffix", "unk_token", "fuse_unk", "ignore_merges", "merges",
                "byte_fallback"):
        assert written[key] == document["model"][key], key
    theirs = Tokenizer.from_str(json.dumps(dict(document, model=written)))
    again = BPE.load(model.save(tmp_path / "model.json"))
    assert again == model and json.loads((tmp_path / "model.json").read_text())["version"] == 4
    for text in _texts(random.Random(4), scaled(100, 20)):
        ids = theirs.encode(text, add_special_tokens=False).ids
        assert model.encode(text, allowed_special="all") == ids == again.encode(text, allowed_special="all"), text


def test_other_formats_refuse_affixed_models_by_name(tmp_path: Path) -> None:
    document = _trained(None, "</w>", 5)
    (tmp_path / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
    model = conversion.hf.load(tmp_path / "tokenizer.json")
    for write in (lambda: conversion.tiktoken.save(model, tmp_path / "x.tiktoken", lossy=True),
                  lambda: conversion.gpt2.save(model, tmp_path / "gpt2", lossy=True),
                  lambda: conversion.tiktoken.save_tekken(model, tmp_path / "tekken.json", lossy=True),
                  lambda: conversion.gguf.save(model, tmp_path / "x.gguf", lossy=True),
                  lambda: conversion.sentencepiece.save(model, tmp_path / "x.model", lossy=True)):
        with pytest.raises(ConversionError, match="word affixes"):
            write()


@pytest.mark.parametrize(("change", "message"), [
    ({"dropout": 0.1}, "dropout"),
    ({"continuing_subword_prefix": "\u2581"}, "outside the byte-level alphabet"),
    ({"unk_token": "<nothing>"}, "unk_token"),
])
def test_what_cannot_be_exact_is_refused_by_name(change: dict[str, Any], message: str, tmp_path: Path) -> None:
    document = _trained("##", None, 6)
    document["model"].update(change)
    if "\u2581" in str(change):  # a vocabulary spelled with that prefix
        document["model"]["vocab"] = {token.replace("##", "\u2581"): token_id
                                      for token, token_id in document["model"]["vocab"].items()}
        document["model"]["merges"] = [[part.replace("##", "\u2581") for part in merge]
                                       for merge in document["model"]["merges"]]
    (tmp_path / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=message):
        conversion.hf.load(tmp_path / "tokenizer.json")


def test_byte_fallback_with_affixes_outside_byte_level_files_is_refused_by_name(tmp_path: Path) -> None:
    """A file with byte fallback and no ByteLevel step is SentencePiece-style, which has no affixes."""
    document = _trained("##", None, 6, byte_fallback=True)
    document["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    (tmp_path / "tokenizer.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match="continuing_subword_prefix"):
        conversion.hf.load(tmp_path / "tokenizer.json")


CLIP_WHEEL = "open_clip_torch==3.3.0"
"""OpenCLIP, whose wheel ships CLIP's own merges (``bpe_simple_vocab_16e6.txt.gz``, OpenAI's file)."""


@pytest.fixture(scope="module")
def clip_document(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """CLIP's tokenizer.json as transformers' ``CLIPTokenizer`` builds it from CLIP's merges (the vocabulary
    as OpenAI's ``SimpleTokenizer`` numbers it); skips saying why when the wheel cannot be fetched."""
    import oracles

    transformers = pytest.importorskip("transformers")
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    wanted = ("open_clip/bpe_simple_vocab_16e6.txt.gz",)
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("pypi-open-clip") if cache is not None else tmp_path_factory.mktemp("pypi-open-clip")
    try:
        root = oracles.fetch_package_files(CLIP_WHEEL, wanted, folder)
    except (RuntimeError, OSError) as error:
        pytest.skip(f"CLIP's merges come from {CLIP_WHEEL} on PyPI, which could not be fetched: {error}")
    lines = gzip.decompress((root / wanted[0]).read_bytes()).decode().split("\n")
    merges = [tuple(line.split()) for line in lines[1:49152 - 256 - 2 + 1]]
    alphabet = list(bytes_to_unicode().values())
    tokens = [*alphabet, *(char + "</w>" for char in alphabet), *("".join(merge) for merge in merges),
              "<|startoftext|>", "<|endoftext|>"]
    tokenizer = transformers.CLIPTokenizer(vocab={token: index for index, token in enumerate(tokens)}, merges=merges)
    return json.loads(tokenizer.backend_tokenizer.to_str())


@pytest.mark.parametrize("use_regex", [True, False], ids=["converter", "byte_level_without_regex"])
def test_clip_encodes_and_decodes_as_tokenizers(clip_document: dict[str, Any], use_regex: bool,
                                                tmp_path: Path) -> None:
    document = json.loads(json.dumps(clip_document))
    document["pre_tokenizer"]["pretokenizers"][-1]["use_regex"] = use_regex
    assert document["model"]["end_of_word_suffix"] == "</w>"
    texts = _texts(random.Random(21), scaled(300, 60)) + [
        "a photo of a cat.", "A Photo OF   two\tdogs!!", "<|startoftext|>hi<|endoftext|>", "don't stop", "\u00e9t\u00e9 2024"]
    assert_loads_like_tokenizers(document, tmp_path / "tokenizer.json", texts)
    (tmp_path / "transformers").mkdir()
    assert_offsets_in_transformers(document, tmp_path / "transformers", texts[-scaled(60, 20):])
