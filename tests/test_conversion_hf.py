"""Reading HF ``tokenizer.json`` (byte-level BPE) against `tokenizers` itself: with and without
``ignore_merges``, tiktoken patterns spelled for Oniguruma, patterns that leave gaps, merges lists
trained by `tokenizers`, and the files we refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conversion_support import PARITY_STRINGS, assert_same, gpt2_files, varied_texts

import conversion.hf as hf_load
from hf_bpe import BPE, patterns
from hf_bpe.byte_level import token_to_str
from hf_bpe.errors import TokenizerFileError

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is the oracle; pip install -e '.[test]'")
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
"""Llama 3's split regex as its tokenizer.json spells it."""


def byte_level_tokenizer(model: BPE, *, ignore_merges: bool, split_regex: str | None = None) -> Tokenizer:
    vocab = {token_to_str(token): token_id for token, token_id in model.mergeable_ranks.items()}
    merges = [(token_to_str(left), token_to_str(right)) for left, right in model.merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
    if split_regex is None:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split_regex), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tokenizer.decoder = decoders.ByteLevel()
    for text, token_id in sorted(model.special_tokens.items(), key=lambda item: item[1]):
        tokenizer.add_special_tokens([text])
    return tokenizer


@pytest.fixture(scope="module")
def gpt2() -> BPE:
    import conversion.gpt2

    return conversion.gpt2.load(*gpt2_files())


@pytest.fixture(scope="module")
def hf_trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer.json trained by `tokenizers`' own BpeTrainer (byte-level, full alphabet)."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(varied_texts(4_000, seed=21), trainer=trainer)
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def check_parity(path: Path, count: int) -> BPE:
    ours = hf_load.load(path)
    theirs = Tokenizer.from_file(str(path))
    texts = list(varied_texts(count))
    their_ids = [encoding.ids for encoding in theirs.encode_batch(texts, add_special_tokens=False)]
    assert_same(f"{path.parent.name}: encode vs tokenizers", texts,
                [ours.encode(text, allowed_special="all") for text in texts], their_ids)
    assert_same(f"{path.parent.name}: decode vs tokenizers", texts, [ours.decode(ids) for ids in their_ids],
                theirs.decode_batch(their_ids, skip_special_tokens=False))
    return ours


@pytest.mark.slow
@pytest.mark.parametrize("ignore_merges", [False, True])
def test_gpt2_tokenizer_json_matches_tokenizers(gpt2: BPE, ignore_merges: bool, tmp_path: Path) -> None:
    path = tmp_path / f"gpt2-{ignore_merges}" / "tokenizer.json"
    path.parent.mkdir()
    byte_level_tokenizer(gpt2, ignore_merges=ignore_merges).save(str(path))
    ours = check_parity(path, PARITY_STRINGS)
    assert ours.pattern == patterns.GPT2 and ours == gpt2


@pytest.mark.slow
def test_llama3_style_split_regex_matches_tokenizers(tmp_path: Path) -> None:
    import hf_bpe

    cl100k = hf_bpe.get_encoding("cl100k_base")
    path = tmp_path / "cl100k" / "tokenizer.json"
    path.parent.mkdir()
    byte_level_tokenizer(cl100k, ignore_merges=True, split_regex=LLAMA3_REGEX).save(str(path))
    ours = check_parity(path, PARITY_STRINGS)
    assert ours.special_tokens == {name: 100256 + index for index, name in enumerate(cl100k.special_tokens)}


@pytest.mark.slow
def test_merges_trained_by_tokenizers_match(hf_trained: Path) -> None:
    ours = check_parity(hf_trained, PARITY_STRINGS)
    assert ours.special_tokens == {"<|endoftext|>": 0, "<pad>": 1}


@pytest.mark.parametrize(
    "regex",
    [
        r"\p{N}{1,2}+|\p{L}+",  # Oniguruma: (?:\p{N}{1,2})+, not possessive; digits between letters
        r"\p{L}+|\d",  # leaves gaps: tokenizers keeps the text between matches as pieces
        r"^\s+|\w+|\s+$|.",  # ^ and $ match at every line in Oniguruma
        r"(?>\p{L}+)|[^\p{L}]+",  # atomic groups, as conversion.hf.save writes possessive quantifiers
    ],
)
def test_oniguruma_regexes_split_as_in_tokenizers(gpt2: BPE, regex: str, tmp_path: Path) -> None:
    path = tmp_path / "split" / "tokenizer.json"
    path.parent.mkdir()
    byte_level_tokenizer(gpt2, ignore_merges=False, split_regex=regex).save(str(path))
    check_parity(path, 3_000)


def test_lossy_drops_lstrip_and_rstrip(gpt2: BPE, tmp_path: Path) -> None:
    tokenizer = byte_level_tokenizer(gpt2, ignore_merges=False)
    tokenizer.add_special_tokens([tokenizers.AddedToken("<mask>", lstrip=True)])
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    with pytest.raises(TokenizerFileError, match="'<mask>' has lstrip.*pass lossy=True"):
        hf_load.load(path)
    model = hf_load.load(path, lossy=True)
    assert model.special_tokens["<mask>"] == tokenizer.token_to_id("<mask>")


def test_placeholder_vocab_entries_become_id_holes(tmp_path: Path) -> None:
    vocab = {token_to_str(bytes([byte])): byte for byte in range(256)} | {"<unused id 256>": 256, "ab": 257}
    document = json.loads(Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")])).to_str())
    document["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                 "use_regex": True}
    document["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    model = hf_load.load(path)
    assert model.encode("ab") == [257] and 256 not in model.mergeable_ranks.values()


def minimal_document() -> dict:
    vocab = {token_to_str(bytes([byte])): byte for byte in range(256)} | {"ab": 256}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return json.loads(tokenizer.to_str())


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda doc: doc["model"].update(type="WordPiece"), "the model is 'WordPiece'; hf_bpe reads BPE models only"),
        (lambda doc: doc["model"].update(byte_fallback=True), "byte_fallback is on"),
        (lambda doc: doc["model"].update(dropout=0.1), "dropout"),
        (lambda doc: doc.update(normalizer={"type": "NFC"}), "the normalizer 'NFC' is not supported"),
        (lambda doc: doc.update(pre_tokenizer={"type": "Whitespace"}), "pre-tokenizer 'Whitespace' is not supported"),
        (lambda doc: doc["pre_tokenizer"].update(add_prefix_space=True), "add_prefix_space"),
        (lambda doc: doc.update(decoder={"type": "WordPiece"}), "the decoder 'WordPiece' is not supported"),
        (lambda doc: doc["model"].update(merges=[["a", "zz"]]), "merge 0 .* names 'zz', which the vocab lacks"),
        (lambda doc: doc["model"].update(merges=[["a", "c"]]), "makes 'ac', which the vocab lacks"),
        (lambda doc: doc["model"]["vocab"].pop("Ā"), "lack the single byte"),
        (lambda doc: doc.pop("model"), "not a tokenizer.json: missing or malformed 'model'"),
    ],
)
def test_unsupported_or_corrupt_files_name_file_and_problem(tmp_path: Path, change, problem: str) -> None:
    document = minimal_document()
    change(document)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=problem) as raised:
        hf_load.load(path)
    assert str(path) in str(raised.value)


def test_bad_json_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": {"type": "BPE", ', encoding="utf-8")
    with pytest.raises(TokenizerFileError, match="not valid JSON"):
        hf_load.load(path)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_what_save_writes_loads_back_as_the_same_model(name: str, tmp_path: Path) -> None:
    """Named patterns come back by name, id holes (cl100k's specials) come back as holes."""
    import conversion.hf
    import hf_bpe

    model = hf_bpe.get_encoding(name)
    loaded = conversion.hf.load(conversion.hf.save(model, tmp_path / "tokenizer.json"))
    assert loaded == model and loaded.kind == "ranks" and loaded.pattern == model.pattern


def test_merges_lists_round_trip_with_their_own_merges_and_ignore_merges(tmp_path: Path) -> None:
    import conversion.hf

    vocab = {bytes([byte]): byte for byte in range(256)} | {b"ab": 256, b"bc": 257, b"abc": 258}
    for ignore_merges in (False, True):
        model = BPE.from_merges(vocab, [(b"a", b"b"), (b"ab", b"c")], "gpt2", ignore_merges=ignore_merges)
        path = conversion.hf.save(model, tmp_path / f"{ignore_merges}.json")
        assert conversion.hf.load(path) == model
        theirs = Tokenizer.from_file(str(path))
        assert theirs.encode("abc bc", add_special_tokens=False).ids == model.encode("abc bc")


def test_lossy_writes_what_the_check_refuses_and_warns_how_often_it_differs(tmp_path: Path) -> None:
    import conversion.hf
    from hf_bpe import LossyConversionWarning
    from hf_bpe.errors import ConversionError

    model = BPE({bytes([byte]): byte for byte in range(256)} | {b"ab": 256, b"abc": 257}, "gpt2")
    target = tmp_path / "tokenizer.json"
    with pytest.raises(ConversionError, match="tokenizers cannot reproduce this model"):
        conversion.hf.save(model, target, merges=[], check=True)  # no merges: 'ab' never forms
    assert not target.exists()
    with pytest.warns(LossyConversionWarning, match="differs on .* probe texts .*Why: the merges given") as caught:
        conversion.hf.save(model, target, merges=[], lossy=True)
    report = caught[0].message
    assert isinstance(report, LossyConversionWarning) and 0 < report.mismatches < report.probes == 2000
    assert Tokenizer.from_file(str(target)).encode("abcd", add_special_tokens=False).ids == [97, 98, 99, 100]
