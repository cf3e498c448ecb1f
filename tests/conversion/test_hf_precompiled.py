"""`tokenizers`' ``Precompiled`` normalizer (a SentencePiece charsmap in a byte-level ``tokenizer.json``),
proven against `tokenizers` itself.

The charsmaps come from SentencePiece models trained here with each normalization rule (``nmt_nfkc``,
``nfkc``, ``nmt_nfkc_cf``, ``nfkc_cf``). Checked: the normalized text at every code point (alone, after
a letter, before a combining mark), and generated configurations (``Precompiled`` alone or in a
``Sequence`` with the other normalizers, vocabularies `tokenizers` trained through it) encoding
generated text of every code point class, combining marks, Hangul syllables and jamo, emoji ZWJ
sequences and full-width forms: ids, start offsets and decoded text.

Sizes follow ``HF_BPE_TEST_SCALE``; the full-size runs are marked ``slow``.
"""

from __future__ import annotations

import base64
import functools
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from conversion_support import assert_loads_like_tokenizers
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from suite import FULL_SIZE, scaled
from textgen import cluster_text, documents
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

import conversion.hf
from hf_bpe.errors import TokenizerFileError
from hf_bpe.model import normalized_text
from hf_bpe.patterns import Normalize, Split

RULES = ["nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf"]
CODE_POINTS = [code for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]


@functools.cache
def charsmap(rule: str) -> str:
    """The ``precompiled_charsmap`` (base64, as a tokenizer.json holds it) of a tiny SentencePiece model
    trained with ``rule``."""
    import sentencepiece

    pb2 = pytest.importorskip("sentencepiece.sentencepiece_model_pb2", reason="reading .model files needs protobuf")
    written = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["hello world", "the cat sat on the mat"] * 20), model_writer=written, vocab_size=24,
        model_type="char", normalization_rule_name=rule, minloglevel=2, num_threads=1)
    proto = pb2.ModelProto()
    proto.ParseFromString(written.getvalue())
    assert proto.normalizer_spec.precompiled_charsmap
    return base64.b64encode(proto.normalizer_spec.precompiled_charsmap).decode()


def _theirs(rule: str) -> Any:
    return normalizers.Precompiled(base64.b64decode(charsmap(rule)))


def _byte_model(steps: tuple[Any, ...]) -> Any:
    import hf_bpe

    return hf_bpe.BPE({bytes([byte]): byte for byte in range(256)}, (*steps, Split(" ", "removed")))


@pytest.mark.parametrize("rule", RULES)
def test_normalized_text_is_that_of_tokenizers_at_every_code_point(rule: str) -> None:
    model = _byte_model((Normalize("precompiled", charsmap(rule)),))
    theirs = _theirs(rule)
    stride = max(1, round(1 / min(1.0, scaled(1.0, 0) or 0.01)))
    codes = CODE_POINTS[::stride]
    for start in range(0, len(codes), 8192):
        # Each code point alone (after a space), after a letter, and before a combining mark.
        text = "".join(" " + chr(code) + "e" + chr(code) + "\u0301" for code in codes[start : start + 8192])
        assert normalized_text(model, text) == theirs.normalize_str(text), hex(codes[start])


def _texts(rng: random.Random, count: int) -> list[str]:
    """Generated documents cut short, and hard texts."""
    texts = [document[: rng.randint(1, 200)] for document in documents(rng, 300 * count)][: count // 2]
    while len(texts) < count:
        texts.append(cluster_text(rng))
    return texts


@pytest.mark.parametrize("rule", RULES)
def test_normalized_text_is_that_of_tokenizers_on_hard_text(rule: str) -> None:
    model = _byte_model((Normalize("precompiled", charsmap(rule)),))
    theirs = _theirs(rule)
    for text in _texts(random.Random(RULES.index(rule)), scaled(400, 50)):
        assert normalized_text(model, text) == theirs.normalize_str(text), text


@st.composite
def _normalizer(draw: Any) -> Any:
    """``Precompiled`` alone or in a Sequence with other normalizers, before or after it (its charsmap
    named by its rule, for a short repr: see :func:`_with_charsmaps`)."""
    precompiled = {"type": "Precompiled", "precompiled_charsmap": draw(st.sampled_from(RULES))}
    others = [{"type": "NFC"}, {"type": "NFD"}, {"type": "NFKC"}, {"type": "Lowercase"},
              {"type": "Strip", "strip_left": True, "strip_right": True},
              {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
              {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "},
              {"type": "Prepend", "prepend": "\u2581"}]
    steps = draw(st.lists(st.sampled_from(others), max_size=2))
    steps.insert(draw(st.integers(0, len(steps))), precompiled)
    if len(steps) == 1 and draw(st.booleans()):
        return precompiled
    return {"type": "Sequence", "normalizers": steps}


def _with_charsmaps(normalizer: Any) -> Any:
    """The normalizer with each rule name in ``precompiled_charsmap`` replaced by its charsmap."""
    if normalizer.get("type") == "Sequence":
        return dict(normalizer, normalizers=[_with_charsmaps(step) for step in normalizer["normalizers"]])
    if normalizer.get("type") == "Precompiled":
        return dict(normalizer, precompiled_charsmap=charsmap(normalizer["precompiled_charsmap"]))
    return normalizer


def _trained(normalizer: Any, seed: int) -> dict:
    """A byte-level tokenizer.json whose vocabulary `tokenizers` trained through ``normalizer``."""
    document = json.loads(Tokenizer(models.BPE()).to_str())
    document["normalizer"] = normalizer
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}
    document["pre_tokenizer"] = byte_level
    document["decoder"] = byte_level
    tokenizer = Tokenizer.from_str(json.dumps(document))
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tokenizer.train_from_iterator(_texts(random.Random(seed), 200), trainer=trainer)
    return json.loads(tokenizer.to_str())


@pytest.mark.parametrize("size", [pytest.param(scaled(8, 2), id="ci"),
                                  pytest.param(scaled(100, 10), id="full", marks=FULL_SIZE)])
def test_generated_configurations_encode_as_tokenizers(size: int, tmp_path: Path) -> None:
    @settings(max_examples=size, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(normalizer=_normalizer(), seed=st.integers(0, 2**16))
    def check(normalizer: Any, seed: int) -> None:
        assert_loads_like_tokenizers(_trained(_with_charsmaps(normalizer), seed), tmp_path / "tokenizer.json", _texts(random.Random(seed + 1), 60))

    check()


@pytest.mark.parametrize("charsmap_text", ["not base64!", "", "AAAA", 7])
def test_a_broken_charsmap_is_refused_by_name(charsmap_text: Any, tmp_path: Path) -> None:
    document = _trained(None, 1)
    document["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": charsmap_text}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match="Precompiled"):
        conversion.hf.load(path)


def test_a_loaded_model_saves_and_writes_back_exactly(tmp_path: Path) -> None:
    import hf_bpe

    normalizer = {"type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": "nmt_nfkc_cf"},
                                                      {"type": "NFC"}]}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_trained(_with_charsmaps(normalizer), 3)), encoding="utf-8")
    model = conversion.hf.load(path)
    reloaded = hf_bpe.BPE.load(model.save(tmp_path / "model.bpe"))
    theirs = Tokenizer.from_file(str(conversion.hf.save(model, tmp_path / "written.json")))
    for text in _texts(random.Random(5), 60):
        ids = model.encode(text, allowed_special="all")
        assert reloaded.encode(text, allowed_special="all") == ids, text
        assert theirs.encode(text, add_special_tokens=False).ids == ids, text
