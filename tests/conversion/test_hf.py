"""Reading HF ``tokenizer.json`` (byte-level BPE) against `tokenizers` itself: with and without
``ignore_merges``, tiktoken patterns spelled for Oniguruma, patterns that leave gaps, merges lists
trained by `tokenizers`, Split pre-tokenizers (generated regexes, every behavior and invert,
sequences, plain strings) and their load-time check, and the files we refuse."""

from __future__ import annotations

import json
import random
from pathlib import Path

import oniguruma_patterns
import pytest
from conversion_support import PARITY_STRINGS, assert_same, gpt2_files, varied_texts
from suite import scaled

import conversion._hf_pretokenizers as hf_pretokenizers
import conversion.hf as hf_load
from hf_bpe import BPE, patterns
from hf_bpe._byte_level import token_to_str
from hf_bpe.errors import TokenizerFileError
from hf_bpe.model import special_token_rules

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


def test_an_added_token_with_lstrip_loads_with_its_rule(gpt2: BPE, tmp_path: Path) -> None:
    tokenizer = byte_level_tokenizer(gpt2, ignore_merges=False)
    tokenizer.add_special_tokens([tokenizers.AddedToken("<mask>", lstrip=True)])
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    model = hf_load.load(path)
    assert model.special_tokens["<mask>"] == tokenizer.token_to_id("<mask>")
    assert special_token_rules(model) == {"<mask>": {"lstrip"}}
    for text in ["a <mask>", "a  <mask> b", "<mask>", " <mask><mask>", "\n\t<mask>"]:
        encoding = tokenizer.encode(text, add_special_tokens=False)
        assert model.encode_with_offsets(text, allowed_special="all") == \
            (encoding.ids, [start for start, _ in encoding.offsets]), text


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
        (lambda doc: doc["model"].update(dropout=0.1), "dropout"),
        (lambda doc: doc["model"].update(continuing_subword_prefix="##"),
         r"merge 0 \('a' 'b'\): cutting the 2 bytes of continuing_subword_prefix off its right token leaves no text"),
        (lambda doc: doc.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            {"type": "Digits", "individual_digits": True}, {"type": "ByteLevel", "use_regex": False}]}),
         "a second ByteLevel pre-tokenizer step is not supported"),
        (lambda doc: doc.update(decoder={"type": "Sequence", "decoders": [{"type": "ByteLevel"}, {"type": "Strip",
                                                                                                  "content": " ", "start": 1, "stop": 0}]}),
         "the decoder 'Sequence' is not supported"),
        (lambda doc: doc.update(normalizer={"type": "Nmt"}), "the normalizer 'Nmt' is not supported"),
        (lambda doc: doc.update(pre_tokenizer={"type": "Whitespace"}), "pre-tokenizer 'Whitespace' is not supported"),
        (lambda doc: doc.update(decoder={"type": "WordPiece"}), "the decoder 'WordPiece' is not supported"),
        (lambda doc: doc["model"].update(merges=[["a", "zz"]]), "merge 0 .* names 'zz', which the vocab lacks"),
        (lambda doc: doc["model"].update(merges=[["a", "c"]]), "makes 'ac', which the vocab lacks"),
        (lambda doc: doc.pop("model"), "not a tokenizer.json: missing or malformed 'model'"),
        (lambda doc: doc["model"]["vocab"].update(ab=256.0), "vocab entry 'ab' has the id 256.0, not an integer"),
        (lambda doc: doc["model"].update(merges=["ab"]), r"merge 0 is 'ab'; expected \"left right\" or \[left, right\]"),
        (lambda doc: doc["model"].update(merges=[["a", "b", "c"]]), r"merge 0 is \['a', 'b', 'c'\]"),
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


def test_a_token_written_twice_in_the_vocabulary_loads_as_tokenizers_reads_it(tmp_path: Path) -> None:
    """JSON objects keep a repeated key's last value: the core leaves such a file to the whole document's
    reading, which reads it as tokenizers does."""
    text = json.dumps(minimal_document())
    path = tmp_path / "tokenizer.json"
    path.write_text(text.replace('"ab": 256', '"ab": 300, "ab": 256'), encoding="utf-8")
    assert '"ab": 300, "ab": 256' in path.read_text("utf-8")
    theirs = Tokenizer.from_file(str(path))
    ours = hf_load.load(path)
    assert ours.encode("abab c", allowed_special="all") == theirs.encode("abab c", add_special_tokens=False).ids == \
        [256, 256, 32, 99]


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
# ------------------------------------------------------------------------ Split pre-tokenizers


BYTE_LEVEL_NO_REGEX = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def split_json(split: patterns.Split) -> dict:
    return {"type": "Split", "pattern": {"String" if split.literal else "Regex": split.pattern},
            "behavior": "".join(word.capitalize() for word in split.behavior.split("_")), "invert": split.invert}


def with_pre_tokenizer(document: dict, pre_tokenizer: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(document, pre_tokenizer=pre_tokenizer)), encoding="utf-8")
    return path


def splits_then_byte_level(*splits: patterns.Split, use_regex: bool = False) -> dict:
    return {"type": "Sequence", "pretokenizers": [*map(split_json, splits),
                                                   dict(BYTE_LEVEL_NO_REGEX, use_regex=use_regex)]}


def trained_with_split(split: patterns.Split, seed: int) -> dict:
    """A tokenizer.json trained by tokenizers' BpeTrainer on generated text, pre-tokenized by ``split``."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(split.pattern if split.literal else Regex(split.pattern), split.behavior, split.invert),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(oniguruma_patterns.texts(random.Random(seed), 1500), trainer=trainer)
    return json.loads(tokenizer.to_str())


def check_split_parity(path: Path, texts: list[str]) -> BPE:
    """conversion.hf.load(path) encodes and decodes ``texts`` as tokenizers does, or fails where it
    fails; a text refused as too slow (a clear error, whatever tokenizers does) is rare."""
    ours, theirs = hf_load.load(path), Tokenizer.from_file(str(path))
    too_slow = 0
    for text in texts:
        try:
            got = ours.encode(text, allowed_special="all")
        except ValueError as error:
            if "is too slow on this text" in str(error):
                too_slow += 1
                continue
            assert "Oniguruma gave up" in str(error), error
            with pytest.raises(BaseException, match="retry-limit-in-match over"):  # PanicException
                theirs.encode(text, add_special_tokens=False)
            continue
        expected = theirs.encode(text, add_special_tokens=False).ids
        assert got == expected, f"{ours.pattern!r} on {text!r:.300}: ours {got}, tokenizers {expected}"
        assert ours.decode(got) == theirs.decode(expected, skip_special_tokens=False)
    assert too_slow <= max(2, len(texts) // 100), f"{too_slow} of {len(texts)} texts were refused as too slow"
    return ours


def compiled_generated_splits(seed: int, count: int) -> list[patterns.Split]:
    rng = random.Random(seed)
    splits = []
    while len(splits) < count:
        pattern = oniguruma_patterns.pattern(rng)
        try:
            Regex(pattern.regex)
        except Exception:  # noqa: BLE001, S112 - not Oniguruma: covered by the refusal tests
            continue
        splits.append(patterns.Split(pattern.regex, rng.choice(patterns.BEHAVIORS), rng.random() < 0.5))
    return splits


def check_generated_split_files(tmp_path: Path, seed: int, trained: int, swapped: int, text_count: int) -> None:
    texts = [*oniguruma_patterns.texts(random.Random(seed + 1), text_count), "<|endoftext|>a<|endoftext|>"]
    splits = compiled_generated_splits(seed, trained * (1 + swapped))
    for index in range(trained):
        own, *others = splits[index * (1 + swapped) : (index + 1) * (1 + swapped)]
        document = trained_with_split(own, seed + index)
        for number, split in enumerate([own, *others]):
            path = with_pre_tokenizer(document, splits_then_byte_level(split), tmp_path / f"{index}-{number}" / "t.json")
            with oniguruma_patterns.quiet_stderr():
                model = check_split_parity(path, texts)
            assert model.pattern == split


def test_generated_split_files_encode_as_tokenizers(tmp_path: Path) -> None:
    """Vocabularies trained by tokenizers with a generated Split, read with that Split and with others."""
    check_generated_split_files(tmp_path, seed=31, trained=scaled(2, 1), swapped=scaled(4, 1), text_count=scaled(300, 80))


@pytest.mark.slow
def test_generated_split_files_encode_as_tokenizers_at_full_size(tmp_path: Path) -> None:
    # 8 vocabularies, each read with 9 Splits, on 2,000 texts at HF_BPE_TEST_SCALE=10.
    check_generated_split_files(tmp_path, seed=310, trained=scaled(0.8, 1), swapped=scaled(0.9, 1),
                                text_count=scaled(200, 200))


@pytest.mark.parametrize("use_regex", [False, True])
def test_a_sequence_of_splits_and_byte_level_encode_as_tokenizers(use_regex: bool, tmp_path: Path) -> None:
    """DeepSeek-V3's three Isolated Splits; ByteLevel with its regex splits once more."""
    steps = [patterns.Split(r"\p{N}{1,3}"), patterns.Split("[一-龥\u3040-ゟ゠-ヿ]+"),
             patterns.Split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
                            "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")]
    document = trained_with_split(steps[0], seed=4)
    path = with_pre_tokenizer(document, splits_then_byte_level(*steps, use_regex=use_regex), tmp_path / "t.json")
    texts = [*varied_texts(scaled(1500, 200), seed=8), *oniguruma_patterns.texts(random.Random(8), 300)]
    model = check_split_parity(path, texts)
    assert model.pattern == (*steps, hf_pretokenizers._BYTE_LEVEL_STEP)[: 3 + use_regex]


def test_a_plain_string_split_encodes_as_tokenizers(tmp_path: Path) -> None:
    split = patterns.Split(" ", "merged_with_next", literal=True)
    document = trained_with_split(split, seed=5)
    assert document["pre_tokenizer"]["pretokenizers"][0]["pattern"] == {"String": " "}
    path = with_pre_tokenizer(document, document["pre_tokenizer"], tmp_path / "t.json")
    assert check_split_parity(path, [*varied_texts(scaled(1000, 200), seed=9)]).pattern == split


def test_empty_matches_posix_brackets_and_word_boundaries_encode_as_tokenizers(tmp_path: Path) -> None:
    """Where regex engines differ, a file's Split is read as Oniguruma reads it: [A-Z]* matches the
    empty string and the gaps between matches are kept (' ' is not encoded to []); POSIX brackets are
    Unicode, not ASCII; \\w and \\b are Oniguruma's, not regex-syntax's."""
    document = trained_with_split(patterns.Split("[A-Z]*"), seed=2)
    for number, regex in enumerate(["[A-Z]*", "[[:alpha:]]+|[[:digit:]]+|[[:punct:]]+", r"\w+|\W", r"\b"]):
        path = with_pre_tokenizer(document, splits_then_byte_level(patterns.Split(regex)), tmp_path / str(number) / "t.json")
        model = check_split_parity(path, [" ", "AB cd", "Bạn ²x", "a\u200cb c", *varied_texts(500, seed=3)])
        assert model.decode(model.encode(" ")) == " " and model.decode(model.encode("AB cd")) == "AB cd"


def test_what_save_writes_for_a_split_model_is_that_split(tmp_path: Path) -> None:
    steps = (patterns.Split(r"[[:alpha:]]+", "merged_with_previous", invert=True), patterns.Split("-", literal=True))
    document = trained_with_split(steps[0], seed=6)
    path = with_pre_tokenizer(document, splits_then_byte_level(*steps), tmp_path / "t.json")
    model = hf_load.load(path)
    saved = hf_load.save(model, tmp_path / "saved" / "tokenizer.json")
    assert hf_load.load(saved) == model
    written = json.loads(saved.read_text())["pre_tokenizer"]["pretokenizers"]
    assert written[:2] == [split_json(step) for step in steps]
    texts = varied_texts(scaled(1000, 200), seed=12)
    original, rewritten = Tokenizer.from_file(str(path)), Tokenizer.from_file(str(saved))
    assert [encoding.ids for encoding in rewritten.encode_batch(list(texts), add_special_tokens=False)] == \
        [encoding.ids for encoding in original.encode_batch(list(texts), add_special_tokens=False)]


@pytest.mark.parametrize(
    ("split", "problem"),
    [
        ({"type": "Split", "pattern": {"Regex": "[b-a]"}, "behavior": "Isolated", "invert": False},
         "tokenizers cannot read the pre-tokenizer: .*empty range in char class"),
        ({"type": "Split", "pattern": {"Regex": r"\p{Foo}"}, "behavior": "Isolated", "invert": False},
         "invalid character property name"),
        ({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Merged", "invert": False},
         "a Split has the behavior 'Merged'; expected one of Removed, Isolated, MergedWithPrevious"),
        ({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated", "invert": "no"},
         "a Split has invert = 'no'; expected true or false"),
        ({"type": "Split", "pattern": {"Glob": "a"}, "behavior": "Isolated", "invert": False},
         "a Split has the pattern .*Glob.*; expected"),
    ],
)
def test_splits_that_cannot_be_read_are_refused(split: dict, problem: str, tmp_path: Path) -> None:
    path = with_pre_tokenizer(minimal_document(), {"type": "Sequence", "pretokenizers": [split, BYTE_LEVEL_NO_REGEX]},
                              tmp_path / "tokenizer.json")
    with pytest.raises(TokenizerFileError, match=problem) as raised:
        hf_load.load(path)
    assert str(path) in str(raised.value)


def test_the_probe_tells_a_splitter_that_cuts_differently(gpt2: BPE) -> None:
    """fancy-regex's \\w (regex-syntax's tables) against Oniguruma's: they differ on U+00B2."""
    pre_tokenizer = splits_then_byte_level(patterns.Split(r"\w+|\W+", "isolated"))
    assert hf_load.pre_tokenizer_difference(BPE(gpt2.mergeable_ranks, patterns.Split(r"\w+|\W+")), pre_tokenizer) is None
    difference = hf_load.pre_tokenizer_difference(BPE(gpt2.mergeable_ranks, r"\w+|\W+"), pre_tokenizer)
    assert difference is not None and "by tokenizers; the first difference is at character" in difference
    assert hf_load.pre_tokenizer_difference(BPE(gpt2.mergeable_ranks, r"\w+|\W+"), pre_tokenizer,
                                            ["a\u00b2b"]) is not None


def test_load_refuses_a_split_it_would_cut_differently(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The load check on a real splitter that disagrees (a fancy-regex reading of the Split):
    refused, naming the text and both piece lists. A named pattern that disagreed falls back to the
    file's own Split."""
    path = with_pre_tokenizer(minimal_document(), splits_then_byte_level(patterns.Split("[[:punct:]]+|[^[:punct:]]+")),
                              tmp_path / "tokenizer.json")
    fancy = "[[:punct:]]+|[^[:punct:]]+"  # POSIX brackets are ASCII in fancy-regex
    monkeypatch.setattr(hf_pretokenizers, "_split_rules", lambda pre_tokenizer, refuse: [fancy])
    with pytest.raises(TokenizerFileError, match=r"hf_bpe cannot load this pre-tokenizer .* exactly: .* is cut "
                                                 r"into \[.*\] here but into \[.*\] by tokenizers; the first "
                                                 r"difference is at character \d+, at U\+"):
        hf_load.load(path)
    # The split is refused before what is read after it (the model is built while the split is checked).
    document = minimal_document()
    document["added_tokens"] = [{"id": 300, "content": "<s>", "special": True}] * 2
    twice = with_pre_tokenizer(document, splits_then_byte_level(patterns.Split("[[:punct:]]+|[^[:punct:]]+")),
                               tmp_path / "twice" / "tokenizer.json")
    with pytest.raises(TokenizerFileError, match=r"hf_bpe cannot load this pre-tokenizer .* exactly"):
        hf_load.load(twice)
    exact = patterns.Split("[[:punct:]]+|[^[:punct:]]+")
    monkeypatch.setattr(hf_pretokenizers, "_split_rules", lambda pre_tokenizer, refuse: [fancy, exact])
    assert hf_load.load(path).pattern == exact
    with pytest.raises(TokenizerFileError, match="added token '<s>' appears twice"):
        hf_load.load(twice)


def test_a_split_that_backtracks_catastrophically_on_short_text_is_refused_at_load(tmp_path: Path) -> None:
    """Exponential on every word: Oniguruma gives up on each (tokenizers panics), so the load check
    would take minutes; it stops and refuses the file instead."""
    split = patterns.Split(r"(?:\p{L}|\p{L}\p{L})+!|.")
    path = with_pre_tokenizer(minimal_document(), splits_then_byte_level(split), tmp_path / "tokenizer.json")
    with oniguruma_patterns.quiet_stderr(), pytest.raises(TokenizerFileError, match="splitting the probe texts takes too long"):
        hf_load.load(path)


def test_files_that_spell_a_named_pattern_load_it_checked(tmp_path: Path) -> None:
    for name in ("gpt2", "cl100k", "o200k"):
        regex = patterns.resolve(name)
        for behavior, invert in (("removed", True), ("isolated", False)):
            split = patterns.Split(hf_load.translate_pattern(regex), behavior, invert)
            path = with_pre_tokenizer(minimal_document(), splits_then_byte_level(split), tmp_path / f"{name}.json")
            assert hf_load.load(path).pattern == regex
        # A spelling the shortcut does not know still loads exactly, as Oniguruma steps.
        other = patterns.Split(hf_load.translate_pattern(regex), "contiguous")
        path = with_pre_tokenizer(minimal_document(), splits_then_byte_level(other), tmp_path / f"{name}-c.json")
        assert hf_load.load(path).pattern == other


def test_formats_that_hold_a_tiktoken_regex_refuse_a_split_model(tmp_path: Path) -> None:
    import conversion.gpt2
    import conversion.tiktoken
    from hf_bpe.errors import ConversionError

    model = BPE({bytes([byte]): byte for byte in range(256)} | {b"ab": 256}, patterns.Split("[A-Z]*"))
    for lossy in (False, True):
        with pytest.raises(ConversionError, match="a tekken file cannot hold the split pattern .* Split pre-tokenizer"):
            conversion.tiktoken.save_tekken(model, tmp_path / "tekken.json", lossy=lossy)
    with pytest.raises(ConversionError, match="GPT-2 files cannot hold the split pattern"):
        conversion.gpt2.save(model, tmp_path)
    assert not (tmp_path / "tekken.json").exists()


def _generated_document(rng: random.Random, hf_trained: Path) -> dict:
    """tokenizer.json ``hf_trained`` with generated irregularities the core's reading must agree on with
    the entry-by-entry one: merges as pairs or lines, tokens spelled outside the byte-level alphabet, merges
    naming them or an added token, added tokens in the vocabulary, merges listed twice, ignore_merges."""
    document = json.loads(hf_trained.read_text("utf-8"))
    model = document["model"]
    vocab, merges = model["vocab"], model["merges"]
    next_id = max(vocab.values()) + 1
    for _ in range(rng.randrange(4)):
        foreign = rng.choice(["’s", "日本", "é", "x y"]) + str(next_id)
        vocab[foreign] = next_id
        next_id += 1
        if rng.random() < 0.5:
            right = rng.choice(list(vocab))
            vocab[foreign + right] = next_id
            next_id += 1
            merges.insert(rng.randrange(len(merges) + 1), [foreign, right])
    if rng.random() < 0.5:
        vocab["<pad>a"] = next_id
        merges.insert(rng.randrange(len(merges) + 1), ["<pad>", "a"])
    if rng.random() < 0.5:
        duplicate = rng.choice(merges)
        merges.insert(rng.randrange(len(merges) + 1), duplicate)
    if rng.random() < 0.5:
        model["merges"] = [" ".join(merge) if isinstance(merge, list) and " " not in "".join(merge) else merge
                           for merge in merges]
    model["ignore_merges"] = rng.random() < 0.5
    return document


def test_the_cores_reading_equals_the_entry_by_entry_reading(hf_trained: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The core reads regular files at once, from the file's text (``from_tokenizer_json``) or, for a file
    it leaves, from Python's parsed document (``from_spelled_merges``); the Python reading (taken when both
    leave a file) must make the same model of every file all three read."""
    import hf_bpe._rules

    rng = random.Random(5)
    texts = list(varied_texts(scaled(300, 60), seed=3))
    read_by_core = []
    file_reading, document_reading = hf_bpe._rules.from_tokenizer_json, hf_bpe._rules.from_spelled_merges
    for number in range(scaled(12, 4)):
        path = tmp_path / f"generated-{number}" / "tokenizer.json"
        path.parent.mkdir()
        path.write_text(json.dumps(_generated_document(rng, hf_trained)), "utf-8")
        with monkeypatch.context() as patch:
            patch.setattr(hf_bpe._rules, "from_tokenizer_json",
                          lambda *args, **kwargs: read_by_core.append(file_reading(*args, **kwargs)) or read_by_core[-1])
            fast = hf_load.load(path)
        assert read_by_core[-1] is not None, f"{path}: the core left a regular file's text"
        with monkeypatch.context() as patch:
            patch.setattr(hf_bpe._rules, "from_tokenizer_json", lambda *args, **kwargs: None)
            patch.setattr(hf_bpe._rules, "from_spelled_merges",
                          lambda *args, **kwargs: read_by_core.append(document_reading(*args, **kwargs)) or read_by_core[-1])
            from_document = hf_load.load(path)
        assert read_by_core[-1] is not None, f"{path}: the core left a regular file's document"
        with monkeypatch.context() as patch:
            patch.setattr(hf_bpe._rules, "from_tokenizer_json", lambda *args, **kwargs: None)
            patch.setattr(hf_bpe._rules, "from_spelled_merges", lambda *args, **kwargs: None)
            slow = hf_load.load(path)
        for read in (fast, from_document):
            assert (read.kind, read.mergeable_ranks, read.merges, read.special_tokens) == \
                (slow.kind, slow.mergeable_ranks, slow.merges, slow.special_tokens), path
        theirs = Tokenizer.from_file(str(path))
        assert_same(f"{path.parent.name}: encode vs tokenizers", texts,
                    [fast.encode(text, allowed_special="all") for text in texts],
                    [encoding.ids for encoding in theirs.encode_batch(texts, add_special_tokens=False)])
