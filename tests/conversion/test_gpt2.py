"""GPT-2 files (encoder.json + vocab.bpe): import and export exactness against tiktoken and
transformers' GPT2Tokenizer, merges-list semantics, refusals, corrupt files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conversion_support import (
    CL100K_SPECIALS,
    PARITY_STRINGS,
    assert_same,
    assert_same_ids,
    cl100k_file,
    gpt2_files,
    llamacpp_cases,
    trained_model,
    varied_texts,
)

import conversion.gpt2
import conversion.tiktoken
from hf_bpe import BPE, _rules, patterns
from hf_bpe._byte_level import token_to_str
from hf_bpe.errors import ConversionError, TokenizerFileError

tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is an oracle; pip install -e '.[test]'")
transformers = pytest.importorskip("transformers", reason="transformers is an oracle")


def tiktoken_from_files(vocab_bpe: Path, encoder_json: Path, pattern: str, specials: dict[str, int]):
    """tiktoken's own reading of GPT-2 files (``data_gym_to_mergeable_bpe_ranks``; single bytes take
    the encoder's ids, as files other than GPT-2's need)."""
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    ranks = data_gym_to_mergeable_bpe_ranks(os.fspath(vocab_bpe), os.fspath(encoder_json),
                                            clobber_one_byte_tokens=True)
    return tiktoken.Encoding("files", pat_str=patterns.resolve(pattern), mergeable_ranks=ranks,
                             special_tokens=specials)


def gpt2_tokenizer(folder: Path):
    """transformers' GPT2Tokenizer from a folder with vocab.json + merges.txt (the constructor's
    file arguments build an empty tokenizer in transformers 5)."""
    return transformers.GPT2Tokenizer.from_pretrained(os.fspath(folder))


@pytest.fixture(scope="module")
def gpt2() -> BPE:
    return conversion.gpt2.load(*gpt2_files())


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    encoder, merges = gpt2_files()
    folder = tmp_path_factory.mktemp("gpt2")
    shutil.copy(encoder, folder / "vocab.json")
    shutil.copy(merges, folder / "merges.txt")
    return folder


@pytest.mark.slow
def test_gpt2_files_encode_like_tiktoken(gpt2: BPE) -> None:
    encoder, merges = gpt2_files()
    theirs = tiktoken_from_files(merges, encoder, "gpt2", {"<|endoftext|>": 50256})
    texts = list(varied_texts(PARITY_STRINGS))
    assert_same("GPT-2 files vs tiktoken", texts, gpt2.encode_ordinary_batch(texts), theirs.encode_ordinary_batch(texts))
    assert_same_ids("GPT-2 files vs tiktoken (special tokens allowed)", texts[:2000],
                    lambda text: gpt2.encode(text, allowed_special="all"),
                    lambda text: theirs.encode(text, allowed_special="all"))


@pytest.mark.slow
def test_gpt2_files_encode_and_decode_like_gpt2_tokenizer(gpt2: BPE, gpt2_folder: Path) -> None:
    theirs = gpt2_tokenizer(gpt2_folder)
    texts = list(varied_texts(PARITY_STRINGS))
    their_ids = [encoding for encoding in theirs(texts, add_special_tokens=False)["input_ids"]]
    assert_same("GPT-2 files vs GPT2Tokenizer", texts, [gpt2.encode(text, allowed_special="all") for text in texts],
                their_ids)
    assert_same("decode vs GPT2Tokenizer", texts, [gpt2.decode(ids) for ids in their_ids],
                theirs.batch_decode(their_ids))


def test_llamacpp_vectors(gpt2: BPE, gpt2_folder: Path) -> None:
    cases = llamacpp_cases()
    assert len(cases) == 46
    texts = [text for text, _ in cases]
    assert_same("llama.cpp GPT-2 vectors", texts, [gpt2.encode_ordinary(text) for text in texts],
                [ids for _, ids in cases])
    theirs = gpt2_tokenizer(gpt2_folder)
    assert_same("llama.cpp vectors, GPT2Tokenizer", texts, [gpt2.decode(ids) for _, ids in cases],
                [theirs.decode(ids) for _, ids in cases])


def test_gpt2_loads_as_a_rank_model_whose_merges_are_the_file(gpt2: BPE) -> None:
    """GPT-2's merges list provably encodes like tiktoken's rank rule, so it loads as ranks; the
    merges recovered from the ranks are the file's, line for line."""
    assert gpt2.kind == "ranks" and gpt2.special_tokens == {"<|endoftext|>": 50256}
    _, merges = gpt2_files()
    lines = [tuple(line.split()) for line in merges.read_text(encoding="utf-8").split("\n")[1:] if line.strip()]
    assert [(token_to_str(left), token_to_str(right)) for left, right in gpt2.merges] == lines


def test_save_round_trips_gpt2_byte_for_byte(gpt2: BPE, tmp_path: Path) -> None:
    folder = conversion.gpt2.save(gpt2, tmp_path / "out")
    encoder, merges = gpt2_files()
    assert json.loads((folder / "vocab.json").read_text(encoding="utf-8")) == json.loads(encoder.read_text(encoding="utf-8"))
    assert (folder / "merges.txt").read_text(encoding="utf-8").split("\n")[1:] == \
        merges.read_text(encoding="utf-8").split("\n")[1:]
    assert conversion.gpt2.load(folder / "vocab.json", folder / "merges.txt") == gpt2


@pytest.mark.parametrize("source", ["trained", "gpt2"])
def test_saved_files_are_read_identically_by_gpt2_tokenizer_and_tiktoken(source: str, gpt2: BPE,
                                                                          tmp_path: Path) -> None:
    if source == "gpt2":
        model = gpt2
    else:
        model = trained_model()
    folder = conversion.gpt2.save(model, tmp_path / source)
    texts = list(varied_texts(3_000, seed=9))
    theirs = gpt2_tokenizer(folder)
    assert_same(f"{source} saved, GPT2Tokenizer", texts, [model.encode(text, allowed_special="all") for text in texts],
                theirs(texts, add_special_tokens=False)["input_ids"])
    by_tiktoken = tiktoken_from_files(folder / "merges.txt", folder / "vocab.json", "gpt2", {})
    assert_same_ids(f"{source} saved, tiktoken", texts, model.encode_ordinary, by_tiktoken.encode_ordinary)
    reloaded = conversion.gpt2.load(folder / "vocab.json", folder / "merges.txt")
    assert reloaded == model


def test_merges_lists_apply_only_listed_merges(tmp_path: Path) -> None:
    """A vocabulary token that no merge makes ("bc") is never produced; tiktoken's rule would."""
    vocab = {token_to_str(bytes([byte])): byte for byte in range(256)} | {"ab": 256, "bc": 257, "abc": 258}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\nab c\n", encoding="utf-8")
    model = conversion.gpt2.load(tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert model.kind == "merges"
    assert "merge to b'b' + b'c'" in _rules.rank_rule_difference(model)
    theirs = gpt2_tokenizer(tmp_path)
    for text in ["abc bc", "bcab", "xbc abcabc", "bc"]:
        assert model.encode_ordinary(text) == theirs.encode(text, add_special_tokens=False), text
    assert model.encode_ordinary("bc") == [98, 99]
    with pytest.raises(ConversionError, match="tiktoken's rank rule would encode some text differently"):
        conversion.tiktoken.save(model, tmp_path / "x.tiktoken")


def test_non_gpt2_patterns_are_refused_unless_lossy(tmp_path: Path) -> None:
    cl100k = conversion.tiktoken.load(cl100k_file(), pattern="cl100k", special_tokens=CL100K_SPECIALS)
    with pytest.raises(ConversionError, match="split pattern"):
        conversion.gpt2.save(cl100k, tmp_path / "cl100k")
    assert not (tmp_path / "cl100k").exists()
    folder = conversion.gpt2.save(cl100k, tmp_path / "cl100k", lossy=True)
    reloaded = conversion.gpt2.load(folder / "vocab.json", folder / "merges.txt", pattern="cl100k")
    assert reloaded == cl100k  # every cl100k token is reachable by its merges: only the pattern was lost


def test_tokens_only_the_whole_piece_rule_makes_are_refused_unless_lossy(tmp_path: Path) -> None:
    """"xyzw" is a token no merge makes (its bytes merge to xy, z, w): tiktoken emits it for the piece
    "xyzw", GPT-2's merges cannot."""
    model = BPE({bytes([byte]): byte for byte in range(256)} | {b"xy": 256, b"xyzw": 257}, "gpt2")
    assert model.encode_ordinary("xyzw") == [257]
    with pytest.raises(ConversionError, match="whole-piece rule"):
        conversion.gpt2.save(model, tmp_path / "out")
    folder = conversion.gpt2.save(model, tmp_path / "out", lossy=True)
    lossy = gpt2_tokenizer(folder)
    assert lossy.encode("xyzw", add_special_tokens=False) == [256, ord("z"), ord("w")]


def test_a_token_ranked_before_its_parts_still_gets_its_merge(tmp_path: Path) -> None:
    """"xyzw" (257) merges from "xyz", which ranks after it (300): its merge line comes before the
    line of its part, yet every token merges back to itself, so GPT-2 files hold the model exactly."""
    model = BPE({bytes([byte]): byte for byte in range(256)} | {b"xy": 256, b"xyzw": 257, b"xyz": 300}, "gpt2")
    folder = conversion.gpt2.save(model, tmp_path / "out")
    theirs = gpt2_tokenizer(folder)
    for text in ["xyzw", "xyz", "axyzwxyz xyzw", "xyzxyzw"]:
        assert theirs.encode(text, add_special_tokens=False) == model.encode_ordinary(text), text


def test_sentencepiece_models_are_refused(tmp_path: Path) -> None:
    from conversion_support import mistral_file

    import conversion.sentencepiece

    pytest.importorskip("google.protobuf")
    model = conversion.sentencepiece.load(mistral_file("tokenizer.model.v1"))
    with pytest.raises(ConversionError, match="SentencePiece model"):
        conversion.gpt2.save(model, tmp_path, lossy=True)


BYTES = {token_to_str(bytes([byte])): byte for byte in range(256)}


@pytest.mark.parametrize(
    ("encoder", "merges", "bad_file", "problem"),
    [
        ('{"a": 1, ', "#version: 0.2\n", "vocab.json", "not valid JSON"),
        ('["a", "b"]', "#version: 0.2\n", "vocab.json", "expected a JSON object"),
        (json.dumps(BYTES | {"a b": 256}), "#version: 0.2\n", "vocab.json", "not spelled in GPT-2's byte-to-unicode"),
        (json.dumps(BYTES | {"ab": 256}), "#version: 0.2\na q z\n", "merges.txt, line 2", "two tokens per merge line"),
        (json.dumps(BYTES | {"ab": 256}), "#version: 0.2\na ĉĉ\n", "merges.txt, line 2", "names 'ĉĉ', which is not a token"),
        (json.dumps(BYTES | {"ab": 256}), "#version: 0.2\na b\nb c\n", "merges.txt, line 3",
         "makes 'bc', which .* lacks \\(encoder and merges do not match\\)"),
        (json.dumps({"a": 0}), "#version: 0.2\n", "vocab.json", "lack the single byte"),
    ],
)
def test_corrupt_files_raise_errors_naming_file_and_problem(tmp_path: Path, encoder: str, merges: str,
                                                            bad_file: str, problem: str) -> None:
    (tmp_path / "vocab.json").write_text(encoder, encoding="utf-8")
    (tmp_path / "merges.txt").write_text(merges, encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=problem) as raised:
        conversion.gpt2.load(tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert bad_file in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_refused_save_writes_nothing(tmp_path: Path) -> None:
    model = BPE({bytes([byte]): byte for byte in range(256)}, "cl100k")
    with pytest.raises(ConversionError):
        conversion.gpt2.save(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()
