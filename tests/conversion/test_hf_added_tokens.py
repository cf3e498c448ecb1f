"""Added tokens of a byte-level ``tokenizer.json`` with `tokenizers`' flags (``lstrip``, ``rstrip``,
``single_word``, ``normalized``, ``special``), loaded with :func:`conversion.hf.load` and proven
against ``tokenizers.Tokenizer`` itself: generated flag combinations on a vocabulary `tokenizers`
trained, with and without normalizers (NFC, NFD, NFKC, Lowercase, Replace, Prepend, Strip and
sequences of them, which `tokenizers` matches ``normalized`` tokens after, spelled as normalized:
tokens the normalizer rewrites, and whose normalized spelling overlaps other tokens, among them) and
ByteLevel's prefix space, on generated text full of the tokens, whitespace of every kind, word
characters and text of every code point class: ids, start offsets and spans. What cannot be exact is
refused by name.

Sizes follow ``HF_BPE_TEST_SCALE``; the full-size run is marked ``slow``.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from suite import FULL_SIZE, scaled
from textgen import fragment
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers

import conversion.hf
from conversion import _unicode_probe
from hf_bpe import BPE
from hf_bpe.errors import ConversionError, TokenizerFileError
from hf_bpe.model import encode_with_spans, special_token_rules, with_special_token_rules

CONTENTS = ["<s>", "</s>", "[M]", "<|e|>", "_x_", "é!中", "中文字", "99x", "ab_c", "<s>x", "x<s", "a b", "\u0301q",
            "AB_C", "ﬁ<s", "Ｍ]", "É Q", "Zz\u3000"]
"""Added-token texts: punctuation-only and word-character edges, overlapping ones, a space inside, a
combining mark (a word character) first, and texts normalizers rewrite (case, a ligature, a
full-width letter, a precomposed letter, a trailing space) into others' overlaps."""

_CONTEXT = [" ", "  ", "\n", "\t", "\r\n", "\u3000", "\xa0", "\u2028", "\x1c", "a", "Z", "é", "1", "_", "\u0301",
            "中", ".", "-", "<", ">", "s", "x", "\u200d", "\u0660"]
_CHARS = _unicode_probe.run_ends()


def _texts(rng: random.Random, count: int) -> list[str]:
    texts = []
    for _ in range(count):
        parts: list[str] = []
        for _ in range(rng.randint(1, 8)):
            roll = rng.random()
            parts.append(rng.choice(CONTENTS) if roll < 0.35 else rng.choice(_CONTEXT) if roll < 0.75
                         else rng.choice(_CHARS) if roll < 0.85 else fragment(rng)[:30])
        texts.append("".join(parts))
    return texts


@pytest.fixture(scope="module")
def trained() -> dict[str, Any]:
    """A byte-level tokenizer.json `tokenizers` trained on generated text (no added tokens)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_texts(random.Random(1), 300), trainer=trainer)
    document = json.loads(tokenizer.to_str())
    document["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    return document


def _with_tokens(document: dict[str, Any], tokens: list[AddedToken], *, normalizer: Any = None,
                 prefix_space: bool = False) -> Tokenizer:
    """``document`` with these added tokens (added through `tokenizers` itself, in order)."""
    document = dict(document, normalizer=normalizer)
    if prefix_space:
        document["pre_tokenizer"] = dict(document["pre_tokenizer"], add_prefix_space=True)
    tokenizer = Tokenizer.from_str(json.dumps(document))
    for token in tokens:
        (tokenizer.add_special_tokens if token.special else tokenizer.add_tokens)([token])
    return tokenizer


def _compare(tokenizer: Tokenizer, path: Path, texts: list[str]) -> BPE:
    tokenizer.save(str(path))
    model = conversion.hf.load(path)
    for text, encoding in zip(texts, tokenizer.encode_batch(texts, add_special_tokens=False)):
        ids, starts = model.encode_with_offsets(text, allowed_special="all")
        assert ids == encoding.ids, (text, special_token_rules(model))
        assert starts == [start for start, _ in encoding.offsets], (text, ids, special_token_rules(model))
        assert encode_with_spans(model, text, allowed_special="all") == (ids, encoding.offsets), text
        assert model.encode(text, allowed_special="all") == ids
        assert model.decode(ids) == tokenizer.decode(ids, skip_special_tokens=False), text
    return model


@st.composite
def _added_tokens(draw: Any) -> list[AddedToken]:
    contents = draw(st.lists(st.sampled_from(CONTENTS), min_size=1, max_size=6, unique=True))
    return [AddedToken(content, special=draw(st.booleans()), normalized=draw(st.booleans()),
                       lstrip=draw(st.booleans()), rstrip=draw(st.booleans()), single_word=draw(st.booleans()))
            for content in contents]


_NORMALIZERS = [None, {"type": "NFKC"}, {"type": "NFC"}, {"type": "Lowercase"}, {"type": "Prepend", "prepend": "_"},
                {"type": "Sequence", "normalizers": [{"type": "Lowercase"}, {
                    "type": "Replace", "pattern": {"String": " "}, "content": "_"}]},
                {"type": "Sequence", "normalizers": [{"type": "NFD"}, {
                    "type": "Strip", "strip_left": True, "strip_right": True}]},
                {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {
                    "type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "Prepend", "prepend": "▁"}]}]
"""Normalizers that rewrite the text `tokenizers` looks for ``normalized`` tokens in, and the tokens."""


def _distinct_spellings(tokens: list[AddedToken], normalizer: Any) -> list[AddedToken]:
    """``tokens`` but those whose spelling in the text they are looked for in (normalized by
    ``normalizer``, for ``normalized`` ones) another has already, or is empty: `tokenizers` picks
    among tokens spelled alike in an order of its own."""
    normalize = Tokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": normalizer,
        "pre_tokenizer": None, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "vocab": {}, "merges": []}})).normalizer
    spelled: set[tuple[bool, str]] = set()
    kept = []
    for token in tokens:
        spelling = (token.normalized, normalize.normalize_str(token.content)
                    if token.normalized and normalize is not None else token.content)
        if spelling[1] and spelling not in spelled:
            spelled.add(spelling)
            kept.append(token)
    return kept


@pytest.mark.parametrize("size", [pytest.param(scaled(15, 3), id="ci"),
                                  pytest.param(scaled(400, 20), id="full", marks=FULL_SIZE)])
def test_generated_flag_combinations_encode_as_tokenizers(trained: dict[str, Any], size: int,
                                                          tmp_path: Path) -> None:
    @settings(max_examples=size, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(tokens=_added_tokens(), normalizer=st.sampled_from(_NORMALIZERS), prefix_space=st.booleans(),
           seed=st.integers(0, 2**16))
    def check(tokens: list[AddedToken], normalizer: Any, prefix_space: bool, seed: int) -> None:
        tokens = _distinct_spellings(tokens, normalizer)
        tokenizer = _with_tokens(trained, tokens, normalizer=normalizer, prefix_space=prefix_space)
        respelled = [token for token in tokens if tokenizer.decode([tokenizer.token_to_id(token.content)],
                                                                   skip_special_tokens=False) != token.content]
        if respelled:  # decoded as normalized: refused by name, and the others compared
            tokenizer.save(str(tmp_path / "tokenizer.json"))
            with pytest.raises(TokenizerFileError, match=f"{re.escape(repr(respelled[0].content))} has normalized = "
                                                         "true and the normalizer spells it"):
                conversion.hf.load(tmp_path / "tokenizer.json")
            tokens = [token for token in tokens if token not in respelled]
            tokenizer = _with_tokens(trained, tokens, normalizer=normalizer, prefix_space=prefix_space)
        _compare(tokenizer, tmp_path / "tokenizer.json", _texts(random.Random(seed), 60))

    check()


def test_stripping_and_single_words_at_the_edges(trained: dict[str, Any], tmp_path: Path) -> None:
    tokens = [AddedToken("<s>", special=True, normalized=False, lstrip=True, rstrip=True),
              AddedToken("ab_c", special=False, normalized=True, single_word=True, rstrip=True),
              AddedToken("[M]", special=True, normalized=False, lstrip=True)]
    texts = ["a  <s>  b", "<s>", "  <s>", "<s>\u3000\n", "[M] [M]  [M]", "x ab_c y", "xab_c", "ab_cx", "ab_c",
             "\u0301ab_c", "ab_c\u0301", "ab_c\u200d", "\u200dab_c", "ab_c.ab_c", "_ab_c", " ab_c <s> [M]", "<s> [M]"]
    model = _compare(_with_tokens(trained, tokens), tmp_path / "tokenizer.json", texts)
    assert special_token_rules(model) == {"<s>": {"lstrip", "rstrip"}, "ab_c": {"single_word", "rstrip", "normalized"},
                                         "[M]": {"lstrip"}}
    assert model.encode_with_offsets("a  <s>  b", allowed_special="all")[1][1] == 1  # the spaces are the token's


def test_normalized_tokens_are_looked_for_between_the_others(trained: dict[str, Any], tmp_path: Path) -> None:
    # "x<s" (normalized) starts before "<s>x" (not): tokenizers cuts the latter out first.
    tokens = [AddedToken("x<s", special=False, normalized=True), AddedToken("<s>x", special=True, normalized=False)]
    model = _compare(_with_tokens(trained, tokens), tmp_path / "tokenizer.json", ["x<s>x", "ax<s>xx<s", "x<sx<s>x"])
    theirs = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert model.encode("x<s>x", allowed_special="all") == theirs.encode("x<s>x").ids
    assert theirs.token_to_id("<s>x") in model.encode("x<s>x", allowed_special="all")


def test_what_load_reads_saves_and_loads_back_with_its_rules(trained: dict[str, Any], tmp_path: Path) -> None:
    tokens = [AddedToken("<s>", special=True, normalized=False, lstrip=True, single_word=True),
              AddedToken("[M]", special=False, normalized=True, rstrip=True)]
    path = tmp_path / "tokenizer.json"
    _with_tokens(trained, tokens).save(str(path))
    model = conversion.hf.load(path)
    saved = model.save(tmp_path / "hf_bpe.json")
    assert json.loads(saved.read_text(encoding="utf-8"))["version"] == 2  # readers of version 1 refuse it
    assert BPE.load(saved) == model
    assert special_token_rules(BPE.load(saved)) == special_token_rules(model)
    written = conversion.hf.save(model, tmp_path / "again.json")
    again = Tokenizer.from_file(str(written))
    texts = _texts(random.Random(3), 200)
    for text, encoding in zip(texts, again.encode_batch(texts, add_special_tokens=False)):
        assert encoding.ids == model.encode(text, allowed_special="all"), text


def test_rules_cannot_be_streamed(trained: dict[str, Any], tmp_path: Path) -> None:
    tokenizer = _with_tokens(trained, [AddedToken("<s>", special=True, normalized=False, rstrip=True)])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    model = conversion.hf.load(tmp_path / "tokenizer.json")
    with pytest.raises(ValueError, match="text given in parts"):
        list(model.encode_iterable(["a <s>", " b"], allowed_special="all"))
    streamed = list(model.encode_iterable(["a <s>", " b"], disallowed_special=()))
    assert streamed == model.encode_ordinary("a <s> b")  # no token allowed: no rules apply


def test_an_rstrip_token_beside_one_starting_with_whitespace_is_refused(trained: dict[str, Any],
                                                                        tmp_path: Path) -> None:
    tokens = [AddedToken("<s>", special=True, normalized=False, rstrip=True),
              AddedToken("\nq", special=True, normalized=False)]
    _with_tokens(trained, tokens).save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(TokenizerFileError, match="'<s>' has rstrip and added token '\\\\nq' starts with whitespace"):
        conversion.hf.load(tmp_path / "tokenizer.json")


def test_tokens_the_byte_level_decoder_decodes_as_other_bytes_are_refused(trained: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    # Every character of "é!é" is in the byte-level alphabet: tokenizers decodes it as b"\xe9!\xe9".
    tokenizer = _with_tokens(trained, [AddedToken("é!é", special=True, normalized=False)])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    assert tokenizer.decode([tokenizer.token_to_id("é!é")], skip_special_tokens=False) == "\ufffd!\ufffd"
    with pytest.raises(TokenizerFileError, match="'é!é' is spelled in the byte-level alphabet"):
        conversion.hf.load(tmp_path / "tokenizer.json")


def test_normalized_tokens_are_looked_for_in_normalized_text(trained: dict[str, Any], tmp_path: Path) -> None:
    """As `tokenizers` does: after the tokens with ``normalized=False``, in the normalized text (where
    ``ﬁ<S`` reads ``fi<s``), each span the characters its normalized text stands for."""
    tokens = [AddedToken("fi<s", special=False, normalized=True, lstrip=True), AddedToken("ab_c", normalized=True),
              AddedToken("<s>x", special=True, normalized=False)]
    normalizer = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
    texts = ["FI<s", "a  ﬁ<S", "ab_c", "Ab_C", "ﬁ<s>x", "A\u0301B_C", "ＡB_C ﬁ<S"]
    model = _compare(_with_tokens(trained, tokens, normalizer=normalizer, prefix_space=True),
                     tmp_path / "tokenizer.json", texts)
    fi, abc = (model.special_tokens[text] for text in ("fi<s", "ab_c"))
    assert model.encode("FI<s", allowed_special="all") == [fi]
    assert encode_with_spans(model, "a  ﬁ<S", allowed_special="all")[1][-1] == (1, 6)  # the spaces are the token's
    assert model.encode("ＡB_C", allowed_special="all") == [abc]
    assert fi not in model.encode("ﬁ<s>x", allowed_special="all")  # "<s>x" is cut out first
    assert special_token_rules(model) == {"fi<s": {"lstrip", "normalized"}, "ab_c": {"normalized"}}


def test_normalized_tokens_the_normalizer_respells_are_refused_by_name(trained: dict[str, Any],
                                                                       tmp_path: Path) -> None:
    """`tokenizers` matches them spelled as normalized and decodes them so, not as their text."""
    _with_tokens(trained, [AddedToken("[M]", normalized=False), AddedToken("AB", normalized=True)],
                 normalizer={"type": "Lowercase"}).save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(TokenizerFileError, match="'AB' has normalized = true and the normalizer spells it 'ab'"):
        conversion.hf.load(tmp_path / "tokenizer.json")


def test_rules_are_checked_when_given() -> None:
    model = BPE({bytes([b]): b for b in range(256)}, "gpt2", special_tokens={"<m>": 256})
    with pytest.raises(ValueError, match="unknown rules \\['strip'\\]"):
        with_special_token_rules(model, {"<m>": ["strip"]})
    with pytest.raises(ValueError, match="'<n>' is not a special token"):
        with_special_token_rules(model, {"<n>": ["lstrip"]})
    with pytest.raises(TypeError, match="collection of rule names"):
        with_special_token_rules(model, {"<m>": "lstrip"})
    assert with_special_token_rules(model, {}) == model
    assert with_special_token_rules(model, {"<m>": ["lstrip"]}) != model


def test_formats_without_rules_refuse_a_model_that_has_them(tmp_path: Path) -> None:
    import conversion.gguf
    import conversion.gpt2
    import conversion.tiktoken

    model = with_special_token_rules(BPE({bytes([b]): b for b in range(256)}, "gpt2", special_tokens={"<m>": 256}),
                                     {"<m>": ["rstrip"]})
    for save, target in [(conversion.gpt2.save, tmp_path / "gpt2"), (conversion.tiktoken.save_tekken,
                          tmp_path / "tekken.json"), (conversion.gguf.save, tmp_path / "vocab.gguf")]:
        with pytest.raises(ConversionError, match="cannot hold the special-token rules of .*'<m>'"):
            save(model, target)
    conversion.gpt2.save(model, tmp_path / "lossy", lossy=True)  # written without them, as asked


def test_the_load_time_probe_refuses_tokens_matched_differently(trained: dict[str, Any], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _with_tokens(trained, [AddedToken("<s>", special=True, normalized=False, lstrip=True)]).save(
        str(tmp_path / "tokenizer.json"))
    monkeypatch.setattr(conversion.hf, "with_special_token_rules", lambda model, rules: model)  # rules lost
    with pytest.raises(TokenizerFileError, match="cannot load the added tokens of this file exactly"):
        conversion.hf.load(tmp_path / "tokenizer.json")


def test_added_tokens_get_the_ids_tokenizers_gives_whatever_the_file_says(trained: dict[str, Any],
                                                                        tmp_path: Path) -> None:
    """`tokenizers` numbers an added token its vocabulary lacks after the vocabulary (or after the added
    tokens before it), not by the file's ``"id"``, and one the vocabulary holds by its vocabulary id: files
    whose ids say otherwise (edited by hand, or cut down) load with the ids `tokenizers` and transformers use."""
    rng = random.Random(9)
    vocabulary = [token for token in trained["model"]["vocab"] if token.isascii() and token.isprintable()]
    texts = _texts(random.Random(10), scaled(150, 30))
    for number in range(scaled(20, 5)):
        contents = list(dict.fromkeys(rng.sample(CONTENTS, rng.randint(1, 4)) + rng.sample(vocabulary, rng.randint(0, 2))))
        file_ids: list[int] = []  # distinct (a file giving two added tokens one id is refused as corrupt)
        for index, content in enumerate(contents):
            file_ids.append(next(candidate for candidate in (
                rng.choice([rng.randrange(10_000), len(trained["model"]["vocab"]) + index,
                            trained["model"]["vocab"].get(content, 0)]) for _ in iter(int, 1))
                if candidate not in file_ids))
        document = dict(trained, added_tokens=[
            {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for token_id, content in zip(file_ids, contents)])
        path = tmp_path / f"ids-{number}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        theirs = Tokenizer.from_file(str(path))
        model = conversion.hf.load(path)
        assert model.special_tokens == {entry["content"]: theirs.token_to_id(entry["content"])
                                        for entry in document["added_tokens"]}
        for text, encoding in zip(texts, theirs.encode_batch(texts, add_special_tokens=False)):
            assert model.encode(text, allowed_special="all") == encoding.ids, text
