"""`tokenizer.json` components beyond Split + ByteLevel, each proven against `tokenizers` itself.

- The character tables of Digits, Punctuation and WhitespaceSplit (``conversion._hf_tables``) and the
  normalizers (NFC, NFD, NFKC, NFKD, Lowercase) at every code point.
- Generated configurations (normalizer Sequences, pre-tokenizer Sequences of every supported step,
  vocabularies trained by `tokenizers` on generated text, some lacking byte symbols, added tokens
  stripping whitespace, post-processors trimming offsets) loaded with :func:`conversion.hf.load` and
  compared with ``tokenizers.Tokenizer`` on generated text of every code point class and text that
  normalizers lengthen or shorten: ids, offsets (start and end) and decoded text; ``BPETokenizer``'s
  ``offset_mapping`` against `tokenizers`' offsets and against transformers' ``TokenizersBackend`` on
  the folder it saves.
- The normalizer and pre-tokenizer fragments of real families (Qwen 2, MPT, Command-R, Claude v1,
  DeepSeek, StarCoder, Refact, Falcon) over a generated vocabulary.
- ``ByteLevel`` in every position of a Sequence, with and without ``add_prefix_space`` and
  ``use_regex``, steps after it splitting its byte-level spelling: ids, whole offsets, decoded text
  and the file ``save`` writes back; Falcon's pre-tokenizer over llama.cpp's Falcon vocabulary
  against llama.cpp's expected ids (skipped without the ``llama-cpp-python`` sdist).

Sizes follow ``HF_BPE_TEST_SCALE``; the full-size runs are marked ``slow``.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest
from conversion_support import assert_loads_like_tokenizers, assert_offsets_in_transformers
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from suite import FULL_SIZE, scaled
from textgen import documents
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

import conversion.hf
from conversion import _hf_tables, _unicode_probe
from hf_bpe._byte_level import BYTE_TO_UNICODE
from hf_bpe.errors import MissingBytesWarning, TokenizerFileError
from hf_bpe.model import missing_bytes, normalized_text

CODE_POINTS = [code for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]


def _ranges(codes: set[int]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for code in sorted(codes):
        if out and out[-1][1] == code - 1:
            out[-1][1] = code
        else:
            out.append([code, code])
    return tuple((low, high) for low, high in out)


def _isolated_by(pre_tokenizer: Any, codes: list[int]) -> set[int]:
    """The code points ``pre_tokenizer`` makes a piece of their own when each follows U+0001."""
    found = set()
    for start in range(0, len(codes), 65536):
        text = "".join("\x01" + chr(code) for code in codes[start : start + 65536])
        found |= {ord(piece) for piece, _ in pre_tokenizer.pre_tokenize_str(text) if len(piece) == 1 and piece != "\x01"}
    return found


def _stride() -> int:
    """Every code point at full scale, every n-th one at a reduced scale."""
    return max(1, round(1 / min(1.0, scaled(1.0, 0) or 0.01)))


@pytest.mark.slow
@pytest.mark.parametrize(("table", "pre_tokenizer"), [
    ("NUMERIC", pre_tokenizers.Digits(individual_digits=True)),
    ("PUNCTUATION", pre_tokenizers.Punctuation("isolated")),
])
def test_character_tables_are_those_of_tokenizers_at_every_code_point(table: str, pre_tokenizer: Any) -> None:
    codes = CODE_POINTS[:: _stride()]
    expected = {code for low, high in getattr(_hf_tables, table) for code in range(low, high + 1)} & set(codes)
    assert _isolated_by(pre_tokenizer, codes) == expected


def test_whitespace_table_is_that_of_tokenizers_at_every_code_point() -> None:
    expected = {code for low, high in _hf_tables.WHITESPACE for code in range(low, high + 1)}
    found = set()
    for start in range(0, len(CODE_POINTS), 65536):
        chunk = CODE_POINTS[start : start + 65536]
        text = "".join("x" + chr(code) for code in chunk)
        covered = {at for _, (begin, end) in pre_tokenizers.WhitespaceSplit().pre_tokenize_str(text)
                   for at in range(begin, end)}
        found |= {code for index, code in enumerate(chunk) if 2 * index + 1 not in covered}
    assert found == expected


def test_word_table_is_that_of_tokenizers_whitespace_at_every_code_point() -> None:
    word = {code for low, high in _hf_tables.WORD for code in range(low, high + 1)}
    found = set()
    for start in range(0, len(CODE_POINTS), 65536):
        chunk = CODE_POINTS[start : start + 65536]
        # "a" and the code point, separated by spaces: one piece when the code point is \w.
        text = " ".join("a" + chr(code) for code in chunk)
        ends = {begin: end for _, (begin, end) in pre_tokenizers.Whitespace().pre_tokenize_str(text)}
        found |= {code for index, code in enumerate(chunk) if ends[3 * index] == 3 * index + 2}
    assert found == word


def _byte_model(steps: tuple[Any, ...]) -> Any:
    import hf_bpe
    from hf_bpe.patterns import Split

    return hf_bpe.BPE({bytes([byte]): byte for byte in range(256)}, (*steps, Split(" ", "removed")))


@pytest.mark.parametrize("kind", ["nfc", "nfd", "nfkc", "nfkd", "lowercase"])
def test_normalizers_match_tokenizers_at_every_code_point(kind: str) -> None:
    from hf_bpe.patterns import Normalize

    model = _byte_model((Normalize(kind),))
    theirs = {"nfc": normalizers.NFC(), "nfd": normalizers.NFD(), "nfkc": normalizers.NFKC(),
              "nfkd": normalizers.NFKD(), "lowercase": normalizers.Lowercase()}[kind]
    for start in range(0, len(CODE_POINTS), 8192):
        # Each code point alone (after a space) and after a letter it may compose with.
        text = "".join(" " + chr(code) + "e" + chr(code) for code in CODE_POINTS[start : start + 8192])
        assert normalized_text(model, text) == theirs.normalize_str(text), hex(CODE_POINTS[start])


# --------------------------------------------------------------------------------- configurations

_REGEXES = [r"\p{L}+|\p{N}+|[^\p{L}\p{N}]+", r" ?\w+", r"\s+", r"[aeiou]", r"\d{1,3}", r"(?i:'s|'t)", r".{1,4}",
            r"[\p{P}\p{S}]+", r"\X"]
_BEHAVIORS = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]


@st.composite
def _normalizer(draw: Any) -> Any:
    def step() -> Any:
        kind = draw(st.sampled_from(["NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip", "Replace", "Prepend"]))
        if kind == "Strip":
            return {"type": "Strip", "strip_left": draw(st.booleans()), "strip_right": draw(st.booleans())}
        if kind == "Replace":
            pattern = draw(st.sampled_from([{"String": " "}, {"String": "a"}, {"Regex": r"\s+"}, {"Regex": r"\p{N}"},
                                            {"Regex": r"\A +"}, {"String": "é"}, {"String": "\ufb01"},
                                            {"Regex": r"\p{Mn}+"}]))
            content = draw(st.sampled_from(["", "\u2581", "  ", "X", "\u00e9\u00e9\u00e9"]))
            return {"type": "Replace", "pattern": pattern, "content": content}
        if kind == "Prepend":
            return {"type": "Prepend", "prepend": draw(st.sampled_from(["\u2581", " ", "ab"]))}
        return {"type": kind}

    count = draw(st.integers(0, 3))
    steps = [step() for _ in range(count)]
    if count == 1 and draw(st.booleans()):
        return steps[0]
    return {"type": "Sequence", "normalizers": steps}


_STEP_KINDS = ["Split", "Digits", "Punctuation", "Whitespace", "WhitespaceSplit", "CharDelimiterSplit"]


def _split_step(draw: Any, kinds: list[str], regexes: list[str], delimiters: list[str]) -> Any:
    """A pre-tokenizer step of one of ``kinds``, its Split regex one of ``regexes``."""
    kind = draw(st.sampled_from(kinds))
    if kind == "Split":
        return {"type": "Split", "pattern": {"Regex": draw(st.sampled_from(regexes))},
                "behavior": draw(st.sampled_from(_BEHAVIORS)), "invert": draw(st.booleans())}
    if kind == "Digits":
        return {"type": "Digits", "individual_digits": draw(st.booleans())}
    if kind == "Punctuation":
        return {"type": "Punctuation", "behavior": draw(st.sampled_from(_BEHAVIORS))}
    if kind == "CharDelimiterSplit":
        return {"type": "CharDelimiterSplit", "delimiter": draw(st.sampled_from(delimiters))}
    return {"type": kind}


@st.composite
def _pre_tokenizer(draw: Any) -> Any:
    def step() -> Any:
        return _split_step(draw, _STEP_KINDS, _REGEXES, [" ", "a", "\u3000", "\u00e9"])

    steps = [step() for _ in range(draw(st.integers(0, 3)))]
    use_regex = draw(st.booleans()) or not steps
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": use_regex}
    if not steps and draw(st.booleans()):
        return dict(byte_level, add_prefix_space=draw(st.booleans()))  # with steps before it, it is refused
    return {"type": "Sequence", "pretokenizers": [*steps, byte_level]}


_CORPUS_CHARS = _unicode_probe.run_ends()


def _texts(rng: random.Random, count: int) -> list[str]:
    """Generated documents cut short, and strings of characters of every code point class."""
    texts = [document[: rng.randint(1, 200)] for document in documents(rng, 300 * count)][:count // 2]
    while len(texts) < count:
        texts.append("".join(rng.choice(_CORPUS_CHARS) if rng.random() < 0.4 else rng.choice(" aé1\n,.ab")
                             for _ in range(rng.randint(1, 30))))
    return texts


def _trained(normalizer: Any, pre_tokenizer: Any, seed: int, *, drop: bytes = b"", vocab_size: int = 500) -> dict:
    """A tokenizer.json whose vocabulary `tokenizers` trained on generated text through the given
    normalizer and pre-tokenizer (with ``drop`` byte symbols left out of it)."""
    tokenizer = Tokenizer(models.BPE())
    document = json.loads(tokenizer.to_str())
    document["normalizer"] = normalizer
    document["pre_tokenizer"] = pre_tokenizer
    document["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    tokenizer = Tokenizer.from_str(json.dumps(document))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    tokenizer.train_from_iterator(_texts(random.Random(seed), 200), trainer=trainer)
    trained = json.loads(tokenizer.to_str())
    if drop:
        gone = {BYTE_TO_UNICODE[byte] for byte in drop}
        vocab = trained["model"]["vocab"]
        kept = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])
                if not any(char in gone for char in token)]
        trained["model"]["vocab"] = {token: index for index, token in enumerate(kept)}
        trained["model"]["merges"] = [merge for merge in trained["model"]["merges"]
                                      if all(part in trained["model"]["vocab"] for part in merge)
                                      and "".join(merge) in trained["model"]["vocab"]]
        trained["added_tokens"] = [dict(entry, id=trained["model"]["vocab"].get(entry["content"], len(kept)))
                                   for entry in trained["added_tokens"]]
    return trained


NORMALIZED_EDGES = ["\ufb01 ab\ufb03", "\u2460\u2461 \u2473", "e\u0301\u0327 o\u0308\u0301x", "\u1100\u1161\u11a8 \uac01",
                    "\ufdfa \ufdfb", "\u0130stanbul \u0130\u0130", "  a b  ", "\u3000x \u3000", " \u00e9 ", "\u00c5\u212b",
                    "\u1e9b\u0323", "\u00bd \u33ff", "a<|endoftext|>b", " <|endoftext|> ", "\u0130<|endoftext|>\ufb01"]
"""Text that normalizers lengthen or shorten: ligatures, enclosed numbers, combining marks, Hangul
jamo, NFKD expansions (U+FDFA: 18 characters), the Lowercase of U+0130 (two characters), whitespace
at the ends (Strip), and these next to an added token."""


@st.composite
def _post_processor(draw: Any) -> Any:
    """None, or a post-processor trimming offsets: ByteLevel's, or RobertaProcessing's (with the added
    token as both of its tokens)."""
    kind = draw(st.sampled_from(["none", "none", "byte_level", "roberta"]))
    prefix_space = draw(st.booleans())
    if kind == "byte_level":
        return {"type": "ByteLevel", "add_prefix_space": prefix_space, "trim_offsets": True, "use_regex": False}
    if kind == "roberta":
        return {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 0], "cls": ["<|endoftext|>", 0],
                "trim_offsets": True, "add_prefix_space": prefix_space}
    return None


@pytest.mark.parametrize("size", [pytest.param(scaled(30, 3), id="ci"),
                                  pytest.param(scaled(300, 10), id="full", marks=FULL_SIZE)])
def test_generated_configurations_encode_as_tokenizers(size: int, tmp_path: Path) -> None:
    """Ids, offsets and decoded text of the loaded model, then ``BPETokenizer``'s offsets (single texts
    with and without special tokens, batches of pairs, truncated batches) with the post-processor's
    trimming and the added token's stripping rules."""
    @settings(max_examples=size, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(normalizer=_normalizer(), pre_tokenizer=_pre_tokenizer(), post_processor=_post_processor(),
           strips=st.sampled_from([(False, False), (True, False), (False, True), (True, True)]),
           seed=st.integers(0, 2**16))
    def check(normalizer: Any, pre_tokenizer: Any, post_processor: Any, strips: tuple[bool, bool], seed: int) -> None:
        document = _trained(normalizer, pre_tokenizer, seed, vocab_size=400)
        document["added_tokens"] = [dict(entry, lstrip=strips[0], rstrip=strips[1]) for entry in document["added_tokens"]]
        texts = _texts(random.Random(seed + 1), 40) + NORMALIZED_EDGES
        assert_loads_like_tokenizers(document, tmp_path / "tokenizer.json", texts)
        if post_processor is not None and post_processor["type"] == "RobertaProcessing":
            token_id = document["added_tokens"][0]["id"]
            post_processor = dict(post_processor, sep=["<|endoftext|>", token_id], cls=["<|endoftext|>", token_id])
        document["post_processor"] = post_processor
        assert_offsets_in_transformers(document, Path(tempfile.mkdtemp(dir=tmp_path)), texts)

    check()


# ---------------------------------------------------------------------------------- missing bytes

def test_vocabulary_lacking_bytes_utf8_never_uses_encodes_every_text(tmp_path: Path) -> None:
    unused = bytes([0xC0, 0xC1, *range(0xF5, 0x100)])
    document = _trained(None, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                               "use_regex": True}, 3, drop=unused)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingBytesWarning)  # nothing to warn about: no str needs them
        model = conversion.hf.load(path)
    assert missing_bytes(model) == unused
    assert_loads_like_tokenizers(document, path, _texts(random.Random(4), scaled(400, 50)))


def test_vocabulary_lacking_bytes_text_uses_drops_them_as_tokenizers(tmp_path: Path) -> None:
    document = _trained(None, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                               "use_regex": True}, 5, drop=bytes([0xF1, 0x0B, 0x80]))
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.warns(MissingBytesWarning, match="0x0B, 0x80, 0xF1"):
        model = conversion.hf.load(path)
    texts = _texts(random.Random(6), scaled(400, 50)) + ["\U00040000", "a\U00040000b", "\x0b\x0b", "\u0400"]
    assert_loads_like_tokenizers(document, path, texts)
    theirs = Tokenizer.from_file(str(path))
    # U+41041 is F1 81 81 81: three ids for four bytes, as in tokenizers.
    assert theirs.encode("\U00041041").ids == model.encode("\U00041041")
    assert len(model.encode("\U00041041")) == 3
    assert set(missing_bytes(model)) == {0x0B, 0x80, 0xF1}
    with pytest.raises(ValueError, match="0xF1"):  # raw bytes (tiktoken's encode_bytes merges them as one piece)
        model._core.encode_single_piece(b"a\xf1", True)


def test_missing_bytes_with_an_unknown_token_are_refused_by_name(tmp_path: Path) -> None:
    document = _trained(None, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                               "use_regex": True}, 5, drop=b"\xf1")
    document["model"]["unk_token"] = "<|endoftext|>"
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match="unk_token"):
        conversion.hf.load(path)


# ------------------------------------------------------------------------------------ the families

_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
          r"\s+(?!\S)|\s+")
_DEEPSEEK = [r"[\r\n]", r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-Ֆ]+", r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
             r"\s+$", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}+"]


def _byte_level(use_regex: bool) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def _split(regex: str, behavior: str = "Isolated") -> dict:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": behavior, "invert": False}


FAMILIES: dict[str, tuple[Any, Any, bytes]] = {
    "qwen2": ({"type": "NFC"}, {"type": "Sequence", "pretokenizers": [_split(_QWEN2), _byte_level(False)]}, b""),
    "mpt": ({"type": "NFC"}, _byte_level(True), bytes([0xC0, 0xC1, *range(0xF5, 0x100)])),
    "command-r": ({"type": "NFC"}, {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, _byte_level(True)]}, b""),
    "claude-v1": ({"type": "NFKC"}, _byte_level(True), b""),
    "deepseek": ({"type": "Sequence", "normalizers": []}, {"type": "Sequence", "pretokenizers": [
        *(_split(regex) for regex in _DEEPSEEK), _byte_level(False)]}, bytes([0xC0, 0xC1, *range(0xF5, 0x100)])),
    "starcoder": (None, {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, _byte_level(True)]}, bytes([0xC0, 0xC1, *range(0xF5, 0x100)])),
    "refact": (None, {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, _byte_level(True)]}, b"\xf1"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_real_families_load_and_encode_as_tokenizers(family: str, tmp_path: Path) -> None:
    normalizer, pre_tokenizer, drop = FAMILIES[family]
    document = _trained(normalizer, pre_tokenizer, 11, drop=drop, vocab_size=800)
    assert_loads_like_tokenizers(document, tmp_path / "tokenizer.json", _texts(random.Random(12), scaled(300, 40)))


FALCON = {"type": "Sequence", "pretokenizers": [
    {"type": "Punctuation", "behavior": "Contiguous"}, _byte_level(True),
    {"type": "Digits", "individual_digits": False}, _split("[0-9][0-9][0-9]")]}
"""Falcon's pre-tokenizer, as its ``tokenizer.json`` spells it: Digits and the Split after ByteLevel
cut the byte-level spelling (``²``, the spelling of byte 0xB2, is a digit to them)."""


def assert_whole_offsets_and_written_file_as_tokenizers(document: dict, path: Path, texts: list[str]) -> None:
    """``BPETokenizer`` spans (start and end) of the loaded file are `tokenizers`' offsets (a Split after
    ByteLevel that drops text included, which may drop bytes inside a character), and the file
    ``conversion.hf.save`` writes for the model gives `tokenizers`' ids and offsets."""
    from hf_bpe.transformers import BPETokenizer

    path.write_text(json.dumps(document), encoding="utf-8")
    theirs = Tokenizer.from_file(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingBytesWarning)
        model = conversion.hf.load(path)
    written = Tokenizer.from_file(str(conversion.hf.save(model, path.with_name("written.json"))))
    tokenizer = BPETokenizer.from_model(model)
    for text, encoding, again in zip(texts, theirs.encode_batch(texts, add_special_tokens=False),
                                     written.encode_batch(texts, add_special_tokens=False)):
        assert (again.ids, again.offsets) == (encoding.ids, encoding.offsets), text
        spans = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        assert [tuple(span) for span in spans] == encoding.offsets, (text, encoding.ids)


def test_falcon_pre_tokenizer_encodes_as_tokenizers(tmp_path: Path) -> None:
    document = _trained(None, FALCON, 13)
    texts = _texts(random.Random(14), scaled(300, 40)) + ["x\u00b2\u00b3 1234567 \u00f2\u00f2", "a.,!?b 2023"]
    assert_loads_like_tokenizers(document, tmp_path / "tokenizer.json", texts)
    assert_whole_offsets_and_written_file_as_tokenizers(document, tmp_path / "tokenizer.json", texts)


def test_falcon_pre_tokenizer_over_llama_cpp_falcon_vocabulary_gives_its_expected_ids(
        llama_cpp_vocab_files: Path, tmp_path: Path) -> None:
    """A ``tokenizer.json`` rebuilt from llama.cpp's ``ggml-vocab-falcon.gguf`` (its tokens, merges and
    control tokens, with Falcon's pre-tokenizer) encodes llama.cpp's test texts to the ids its ``.out``
    file expects (those of Falcon's own tokenizer)."""
    import oracles

    from conversion import _gguf_file

    path = llama_cpp_vocab_files / "ggml-vocab-falcon.gguf"
    metadata = _gguf_file.read_metadata(path)
    tokens = [token.decode() for token in metadata["tokenizer.ggml.tokens"].value]
    kinds = metadata["tokenizer.ggml.token_type"].value
    added = [{"id": index, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for index, (token, kind) in enumerate(zip(tokens, kinds)) if kind == 3]
    document = json.loads(Tokenizer(models.BPE()).to_str())
    document.update(added_tokens=added, pre_tokenizer=FALCON, decoder=_byte_level(True))
    document["model"].update(vocab={token: index for index, token in enumerate(tokens)},
                             merges=[merge.decode() for merge in metadata["tokenizer.ggml.merges"].value])
    cases = oracles.llama_cpp_vocab_cases(path)
    assert len(cases) > 30
    target = tmp_path / "tokenizer.json"
    target.write_text(json.dumps(document), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingBytesWarning)  # the vocabulary lacks some byte symbols
        model = conversion.hf.load(target)
    assert [(text, model.encode(text)) for text, _ in cases] == cases
    assert_loads_like_tokenizers(document, target, [text for text, _ in cases])


# ------------------------------------------------------------------- ByteLevel anywhere in a Sequence

_SPELLING_REGEXES = [r"[0-9][0-9][0-9]", r"\p{N}", r"\x{120}", r"[\x{100}-\x{143}]+", r"[\x{80}-\x{FF}]", r"\p{L}+",
                     r"Ġ?\w+", r".{1,3}", r"\X"]
"""Regexes for Split steps after ByteLevel: digits, the spelling of the space (U+0120), the spellings
of unprintable bytes (U+0100-U+0143) and of high bytes, and regexes that cut characters apart."""


@st.composite
def _around_byte_level(draw: Any) -> Any:
    def step(regexes: list[str]) -> Any:  # Splits twice as likely
        return _split_step(draw, ["Split", *_STEP_KINDS], regexes, [" ", "a", "\u0120", "\u00c3"])

    before = [step(_REGEXES) for _ in range(draw(st.integers(0, 2)))]
    after = [step(_SPELLING_REGEXES) for _ in range(draw(st.integers(0, 2)))]
    byte_level = dict(_byte_level(draw(st.booleans())), add_prefix_space=draw(st.booleans()))
    return {"type": "Sequence", "pretokenizers": [*before, byte_level, *after]}


@pytest.mark.parametrize("size", [pytest.param(scaled(20, 3), id="ci"),
                                  pytest.param(scaled(200, 10), id="full", marks=FULL_SIZE)])
def test_byte_level_anywhere_in_a_sequence_encodes_as_tokenizers(size: int, tmp_path: Path) -> None:
    """ByteLevel first, last or between steps, with and without add_prefix_space and use_regex, over
    vocabularies `tokenizers` trained through that pre-tokenizer: ids, starts, decoded text, whole
    offsets and the file ``save`` writes back, on text of every code point class."""
    @settings(max_examples=size, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(pre_tokenizer=_around_byte_level(), seed=st.integers(0, 2**16))
    def check(pre_tokenizer: Any, seed: int) -> None:
        document = _trained(None, pre_tokenizer, seed, vocab_size=400)
        texts = _prefix_space_texts(random.Random(seed + 1), 40)
        assert_loads_like_tokenizers(document, tmp_path / "tokenizer.json", texts)
        assert_whole_offsets_and_written_file_as_tokenizers(document, tmp_path / "tokenizer.json", texts)

    check()


@pytest.mark.parametrize(("pre_tokenizer", "message"), [
    ({"type": "Sequence", "pretokenizers": [_byte_level(True), {"type": "Digits"}, _byte_level(False)]},
     "a second ByteLevel pre-tokenizer step is not supported"),
    ({"type": "Sequence", "pretokenizers": [_byte_level(True), {"type": "UnicodeScripts"}]},
     "the pre-tokenizer step 'UnicodeScripts' is not supported"),
    ({"type": "Sequence", "pretokenizers": [{"type": "Digits"}, dict(_byte_level(True), add_prefix_space="yes")]},
     "the ByteLevel pre-tokenizer has add_prefix_space = 'yes'; expected true or false"),
    ({"type": "Sequence", "pretokenizers": [{"type": "Digits"}, {"type": "BertPreTokenizer"}]},
     "the pre-tokenizer step 'BertPreTokenizer' is not supported"),
    ({"type": "Sequence", "pretokenizers": [{"type": "Digits"}]},
     "the pre-tokenizer 'Sequence' is not supported; byte-level BPE needs a ByteLevel step"),
])
def test_pre_tokenizers_around_byte_level_hf_bpe_cannot_run_are_refused_by_name(pre_tokenizer: Any, message: str,
                                                                                tmp_path: Path) -> None:
    document = _trained(None, _byte_level(True), 13, vocab_size=300)
    document["pre_tokenizer"] = pre_tokenizer
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=re.escape(message)):
        conversion.hf.load(path)


# ------------------------------------------------------------------------- ByteLevel's prefix space

_EDGES = ["", "", " ", "  ", "\t", "\n", "\r\n", "\u3000", "\xa0", "\u2028", "\x85", "\x0b", "<|endoftext|>",
          "<m>", " <m> ", "\u0120", "a", "\u00e9", "\u4e2d"]


def _prefix_space_texts(rng: random.Random, count: int) -> list[str]:
    """Texts whose edges are whitespace of every kind, nothing, added tokens or a letter, around
    generated text of every code point class; empty texts and texts of spaces only among them."""
    out = ["", " ", "   ", "\t", "\n", "<m>", "<m>x", " <m>", "<|endoftext|>\u00e9"]
    middles = _texts(rng, count)
    while len(out) < count:
        out.append(rng.choice(_EDGES) + rng.choice(middles)[:40] + rng.choice(_EDGES) + rng.choice(_EDGES))
    return out


@pytest.mark.parametrize("normalizer", [None, {"type": "NFKC"}, {"type": "Lowercase"}])
@pytest.mark.parametrize("in_sequence", [False, True], ids=["alone", "in a Sequence"])
def test_byte_level_prefix_space_gives_tokenizers_ids_and_offsets(normalizer: Any, in_sequence: bool,
                                                                  tmp_path: Path) -> None:
    """A space before each stretch of text between added tokens that does not start with U+0020 (a
    tab, a newline or another space get one), covering the stretch's first character: ids and starts
    of the model, whole spans of ``BPETokenizer`` (no normalizer), and the file ``save`` writes back."""
    from tokenizers import AddedToken

    from hf_bpe.transformers import BPETokenizer

    byte_level = dict(_byte_level(True), add_prefix_space=True)
    pre_tokenizer = {"type": "Sequence", "pretokenizers": [byte_level]} if in_sequence else byte_level
    document = _trained(normalizer, pre_tokenizer, 17, vocab_size=400)
    path = tmp_path / "tokenizer.json"
    theirs = Tokenizer.from_str(json.dumps(document))
    theirs.add_tokens([AddedToken("<m>", special=False, normalized=False)])
    theirs.save(str(path))
    model = conversion.hf.load(path)
    written = Tokenizer.from_file(str(conversion.hf.save(model, tmp_path / "written.json")))
    tokenizer = BPETokenizer.from_model(model)
    texts = _prefix_space_texts(random.Random(18), scaled(300, 60))
    for text, encoding, again in zip(texts, theirs.encode_batch(texts, add_special_tokens=False),
                                     written.encode_batch(texts, add_special_tokens=False)):
        ids, starts = model.encode_with_offsets(text, allowed_special="all")
        assert ids == encoding.ids == again.ids, text
        assert starts == [start for start, _ in encoding.offsets], (text, ids)
        if normalizer is None:
            assert again.offsets == encoding.offsets, text
            spans = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
            assert [tuple(span) for span in spans] == encoding.offsets, text


@pytest.mark.parametrize("pre_tokenizer", [
    [{"type": "Digits", "individual_digits": True}, dict(_byte_level(True), add_prefix_space=True)],
    [_split(r"\p{N}"), dict(_byte_level(False), add_prefix_space=True)],
    [{"type": "WhitespaceSplit"}, dict(_byte_level(False), add_prefix_space=True)],
    [dict(_byte_level(False), add_prefix_space=True), _split(r"\x{120}")],
], ids=["digits", "split without regex", "whitespace split", "space split off after"])
def test_byte_level_prefix_space_after_other_steps_goes_before_each_of_their_pieces(pre_tokenizer: Any,
                                                                                     tmp_path: Path) -> None:
    document = _trained(None, {"type": "Sequence", "pretokenizers": pre_tokenizer}, 19, vocab_size=300)
    texts = _prefix_space_texts(random.Random(20), scaled(200, 40))
    assert_loads_like_tokenizers(document, tmp_path / "tokenizer.json", texts)
    assert_whole_offsets_and_written_file_as_tokenizers(document, tmp_path / "tokenizer.json", texts)


@pytest.mark.parametrize(("normalizer", "name"), [
    ({"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
      "lowercase": True}, "BertNormalizer"),
    ({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "StripAccents"}]}, "StripAccents"),
    ({"type": "Nmt"}, "Nmt"),
])
def test_other_normalizers_are_refused_by_name(normalizer: Any, name: str, tmp_path: Path) -> None:
    document = _trained(None, _byte_level(True), 1, vocab_size=300)
    document["normalizer"] = normalizer
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=f"normalizer '{name}' is not supported"):
        conversion.hf.load(path)


# ---------------------------------------------------------------------------------- ignore_merges

@pytest.mark.parametrize("size", [pytest.param(scaled(10, 3), id="ci"),
                                  pytest.param(scaled(100, 10), id="full", marks=FULL_SIZE)])
def test_ignore_merges_and_unreachable_tokens_encode_as_tokenizers(size: int, tmp_path: Path) -> None:
    """Vocabularies holding words no merge forms (some merges dropped, pieces of the text added whole),
    with and without ``ignore_merges`` (Llama 3 sets it: a piece that is a token is emitted whole)."""
    @settings(max_examples=size, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(pre_tokenizer=_pre_tokenizer(), ignore_merges=st.booleans(), dropped=st.sampled_from([0.0, 0.1, 0.5]),
           extra=st.integers(0, 300), seed=st.integers(0, 2**16))
    def check(pre_tokenizer: Any, ignore_merges: bool, dropped: float, extra: int, seed: int) -> None:
        document = _trained(None, pre_tokenizer, seed, vocab_size=400)
        rng = random.Random(seed)
        model = document["model"]
        model["merges"] = [merge for merge in model["merges"] if rng.random() >= dropped]
        model["ignore_merges"] = ignore_merges
        splitter = Tokenizer.from_str(json.dumps(document)).pre_tokenizer
        texts = _texts(random.Random(seed + 1), 40)
        pieces = sorted({piece for text in texts[::2] for piece, _ in splitter.pre_tokenize_str(text)} - set(model["vocab"]))
        next_id = max(model["vocab"].values()) + 1
        for piece in rng.sample(pieces, min(extra, len(pieces))):
            model["vocab"][piece] = next_id
            next_id += 1
        assert_loads_like_tokenizers(document, tmp_path / "tokenizer.json", texts)

    check()


# ------------------------------------------------------------------------- offsets in transformers

@pytest.mark.parametrize(("normalizer", "pre_tokenizer"), [
    (None, None), ({"type": "NFKC"}, None), ({"type": "NFKD"}, None),
    ({"type": "Strip", "strip_left": True, "strip_right": True}, None), ({"type": "Lowercase"}, None),
    ({"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
                                          {"type": "Prepend", "prepend": "\u2581"}]}, None),
    (None, {"type": "Sequence", "pretokenizers": [_split(r"\s|\p{P}", "Removed"), _byte_level(False)]}),
    (None, {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, _byte_level(True)]}),
], ids=["gpt2", "nfkc", "nfkd", "strip", "lowercase", "replace and prepend", "removed", "whitespace split"])
def test_transformers_offsets_are_tokenizers_where_normalizers_move_ends(normalizer: Any, pre_tokenizer: Any,
                                                                        tmp_path: Path) -> None:
    """``BPETokenizer`` spans (start, end) equal `tokenizers`' offsets for a loaded file, also where a
    split drops text between tokens and where a normalizer changes the text (a span then covers the
    characters of the original the token's normalized bytes come from)."""
    from hf_bpe.transformers import BPETokenizer

    document = _trained(normalizer, _pre_tokenizer_of_gpt2() if pre_tokenizer is None else pre_tokenizer, 7,
                        vocab_size=400)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    theirs = Tokenizer.from_file(str(path))
    tokenizer = BPETokenizer.from_model(conversion.hf.load(path))
    texts = _texts(random.Random(8), scaled(200, 30)) + ["a b  ", "  x y ", "\ufb01 ab"] + NORMALIZED_EDGES
    for text, encoding in zip(texts, theirs.encode_batch(texts, add_special_tokens=False)):
        assert tokenizer.view(text).ids == encoding.ids, text
        ours = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        assert [tuple(span) for span in ours] == encoding.offsets, text
    batch = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    assert [list(map(tuple, row)) for row in batch] == [encoding.offsets for encoding in
                                                         theirs.encode_batch(texts, add_special_tokens=False)]


def _pre_tokenizer_of_gpt2() -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def test_writers_that_cannot_run_a_byte_level_step_refuse_it_by_name(tmp_path: Path) -> None:
    """tiktoken, tekken, GPT-2 and GGUF files cannot hold Falcon's pre-tokenizer: each writer refuses,
    naming the step; ``tokenizer.json`` and the model file hold it."""
    import conversion.gguf
    import conversion.gpt2
    import conversion.tiktoken
    from hf_bpe import BPE
    from hf_bpe.errors import ConversionError

    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_trained(None, FALCON, 13, vocab_size=300)), encoding="utf-8")
    model = conversion.hf.load(path)
    ranks = BPE(model.mergeable_ranks, model.pattern)
    for write in (lambda: conversion.tiktoken.save(ranks, tmp_path / "x.tiktoken"),
                  lambda: conversion.tiktoken.save_tekken(ranks, tmp_path / "tekken.json"),
                  lambda: conversion.gpt2.save(model, tmp_path / "gpt2"),
                  lambda: conversion.gguf.save(model, tmp_path / "x.gguf")):
        with pytest.raises(ConversionError, match="ByteLevel"):
            write()
    assert BPE.load(model.save(tmp_path / "model.json")) == model
