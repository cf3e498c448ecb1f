"""SentencePiece .model files: import and export exactness against SentencePieceProcessor, the
models we refuse, and corrupt files."""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path

import pytest
from conversion_support import (
    PARITY_STRINGS,
    assert_same,
    assert_same_ids,
    mistral_file,
    shared,
    train_model,
    varied_texts,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import conversion.sentencepiece
import hf_bpe
from hf_bpe import BPE
from hf_bpe.errors import ConversionError, TokenizerFileError
from hf_bpe.sentencepiece_bpe import CONTROL, Piece

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is the oracle; pip install -e '.[test]'")
pytest.importorskip("google.protobuf", reason="reading .model files needs protobuf; pip install protobuf")

MODELS = {
    "mistral-v1": lambda: mistral_file("tokenizer.model.v1"),
    "mistral-v3": lambda: mistral_file("mistral_instruct_tokenizer_240323.model.v3"),
    "mistral-v7": lambda: mistral_file("mistral_instruct_tokenizer_241114.model.v7"),
    "botchan-nmt-nfkc": lambda: shared("sentencepiece", "botchan_en_bpe_1000.model"),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def pair(request: pytest.FixtureRequest) -> tuple[BPE, object, Path]:
    path = MODELS[request.param]()
    return conversion.sentencepiece.load(path), spm.SentencePieceProcessor(model_file=os.fspath(path)), path


@pytest.mark.slow
def test_encoding_matches_sentencepiece_on_varied_strings(pair: tuple[BPE, object, Path]) -> None:
    ours, theirs, path = pair
    texts = varied_texts(PARITY_STRINGS)
    assert_same(f"{path.name}: encode_ordinary vs SentencePieceProcessor.encode", texts,
                ours.encode_ordinary_batch(list(texts)), theirs.encode(list(texts)))


@pytest.mark.slow
def test_decoding_matches_sentencepiece(pair: tuple[BPE, object, Path]) -> None:
    """Encoded ids, and random ids (control pieces, <unk>, lone byte pieces, pieces with ▁)."""
    ours, theirs, path = pair
    texts = varied_texts(PARITY_STRINGS)[: PARITY_STRINGS // 4]
    encoded = theirs.encode(list(texts))
    assert_same(f"{path.name}: decode of encoded ids", texts, [ours.decode(ids) for ids in encoded],
                [theirs.decode(ids) for ids in encoded])
    rng = random.Random(7)
    size = theirs.get_piece_size()
    noise = [[rng.randrange(size) for _ in range(rng.randint(0, 12))] + ids[:3] for ids in encoded]
    assert_same(f"{path.name}: decode of random ids", [str(ids) for ids in noise],
                [ours.decode(ids) for ids in noise], [theirs.decode(ids) for ids in noise])


def test_byte_fallback_and_unknown_runs() -> None:
    v1 = conversion.sentencepiece.load(mistral_file("tokenizer.model.v1"))
    v1_sp = spm.SentencePieceProcessor(model_file=os.fspath(mistral_file("tokenizer.model.v1")))
    text = "x\u0378y \U0002a6d6 ok"  # an unassigned and a rare code point: byte pieces
    assert v1.encode_ordinary(text) == v1_sp.encode(text)
    assert any(piece.startswith("<0x") for piece in v1_sp.encode(text, out_type=str))
    botchan_path = shared("sentencepiece", "botchan_en_bpe_1000.model")
    botchan = conversion.sentencepiece.load(botchan_path)
    botchan_sp = spm.SentencePieceProcessor(model_file=os.fspath(botchan_path))
    text = "日本語 ok 한국어"  # runs of unknown characters become one <unk> each
    assert botchan.encode_ordinary(text) == botchan_sp.encode(text)
    assert botchan.encode_ordinary(text).count(botchan_sp.unk_id()) == 2
    assert botchan.decode(botchan.encode_ordinary(text)) == botchan_sp.decode(botchan_sp.encode(text))


def test_control_pieces_are_special_tokens_and_user_defined_pieces_match_in_text() -> None:
    path = mistral_file("mistral_instruct_tokenizer_241114.model.v7")
    ours, theirs = conversion.sentencepiece.load(path), spm.SentencePieceProcessor(model_file=os.fspath(path))
    text = "[INST] see [REF] and [REFERENCE_DOC_3]<s>[/INST]"
    # SentencePiece never matches control pieces in text; user-defined ones always.
    assert ours.encode_ordinary(text) == theirs.encode(text)
    assert theirs.piece_to_id("[REF]") in ours.encode_ordinary(text)
    with pytest.raises(hf_bpe.DisallowedSpecialTokenError):
        ours.encode(text)
    allowed = ours.encode(text, allowed_special="all")
    assert theirs.piece_to_id("[INST]") == allowed[0] and theirs.piece_to_id("[/INST]") == allowed[-1]
    assert ours.special_tokens["<s>"] == theirs.bos_id()


def test_offsets_point_into_the_original_text() -> None:
    ours = conversion.sentencepiece.load(mistral_file("tokenizer.model.v1"))
    text = "Hello  wörld 日本"
    ids, starts = ours.encode_with_offsets(text)
    assert len(ids) == len(starts) and starts == sorted(starts) and starts[0] == 0
    assert all(0 <= start < len(text) for start in starts)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_save_writes_a_file_sentencepiece_reads_identically(name: str, tmp_path: Path) -> None:
    path = MODELS[name]()
    model = conversion.sentencepiece.load(path)
    written = conversion.sentencepiece.save(model, tmp_path / "copy.model")
    theirs = spm.SentencePieceProcessor(model_file=os.fspath(written))
    texts = varied_texts(2_000, seed=3)
    assert_same_ids(f"{name} saved", texts, model.encode_ordinary, theirs.encode)
    assert conversion.sentencepiece.load(written) == model


def test_own_format_and_pickle_keep_sentencepiece_models(tmp_path: Path) -> None:
    model = conversion.sentencepiece.load(shared("sentencepiece", "botchan_en_bpe_1000.model"))
    reloaded = BPE.load(model.save(tmp_path / "model.json"))
    unpickled = pickle.loads(pickle.dumps(model))
    texts = varied_texts(1_000, seed=5)
    for copy in (reloaded, unpickled):
        assert copy == model and copy.kind == "sentencepiece"
        assert_same_ids("copy", texts, copy.encode_ordinary, model.encode_ordinary)
    with pytest.raises(ConversionError, match="SentencePiece"):
        model.mergeable_ranks  # noqa: B018 - the property raises
    assert model.pattern is None


def test_unigram_models_are_refused_with_a_clear_error() -> None:
    path = shared("sentencepiece", "botchan_en_unigram_1000.model")
    with pytest.raises(TokenizerFileError, match="unigram SentencePiece model; hf_bpe reads BPE models only") as raised:
        conversion.sentencepiece.load(path)
    assert raised.value.path == os.fspath(path)


def test_byte_level_models_are_refused_unless_lossy(tmp_path: Path) -> None:
    model = train_model("the cat sat on the mat; the end. " * 20, 15, "gpt2", ["<|endoftext|>"])
    target = tmp_path / "out.model"
    with pytest.raises(ConversionError, match="no split pattern"):
        conversion.sentencepiece.save(model, target)
    assert not target.exists()
    conversion.sentencepiece.save(model, target, lossy=True)
    theirs = spm.SentencePieceProcessor(model_file=os.fspath(target))
    # The lossy file keeps every id and decodes every text back.
    texts = varied_texts(500, seed=11)
    assert_same("lossy decode", texts, [theirs.decode(theirs.encode(text)) for text in texts], list(texts))
    assert theirs.encode("the cat") == model.encode("the cat")
    assert theirs.id_to_piece(model.special_tokens["<|endoftext|>"]) == "<|endoftext|>"


@pytest.mark.parametrize(
    ("mangle", "problem"),
    [
        (lambda data: data[: len(data) // 2], "protobuf does not parse|not a complete SentencePiece model"),
        (lambda data: b"\xff\xfe garbage" + data[:100], "protobuf does not parse|not a complete"),
        (lambda data: b"", "not a complete SentencePiece model"),
        (lambda data: b'{"not": "protobuf"}', "protobuf does not parse|not a complete"),
    ],
)
def test_corrupt_files_raise_errors_naming_the_file(tmp_path: Path, mangle, problem: str) -> None:
    original = mistral_file("tokenizer.model.v1").read_bytes()
    path = tmp_path / "broken.model"
    path.write_bytes(mangle(original))
    with pytest.raises(TokenizerFileError, match=problem) as raised:
        conversion.sentencepiece.load(path)
    assert "broken.model" in str(raised.value) and isinstance(raised.value, ValueError)


def test_invalid_pieces_raise_errors_naming_the_file(tmp_path: Path) -> None:
    proto = conversion.sentencepiece.read_proto(shared("sentencepiece", "botchan_en_bpe_1000.model"))
    proto.pieces[5].piece = proto.pieces[6].piece  # a piece defined twice
    path = tmp_path / "twice.model"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(TokenizerFileError, match="twice.model: piece .* is defined twice"):
        conversion.sentencepiece.load(path)
    proto = conversion.sentencepiece.read_proto(shared("sentencepiece", "botchan_en_bpe_1000.model"))
    proto.pieces[0].type = CONTROL  # no <unk> left
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(TokenizerFileError, match="no unknown piece"):
        conversion.sentencepiece.load(path)


def test_save_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = conversion.sentencepiece.load(shared("sentencepiece", "botchan_en_bpe_1000.model"))
    target = tmp_path / "model.model"
    target.write_bytes(b"previous")

    def fail(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        conversion.sentencepiece.save(model, target)
    assert target.read_bytes() == b"previous"
    assert [path.name for path in tmp_path.iterdir()] == ["model.model"]


def test_spec_built_by_hand_encodes_like_sentencepiece(tmp_path: Path) -> None:
    """Ties between equal scores go to the leftmost pair, as in SentencePiece."""
    from hf_bpe.sentencepiece_bpe import NORMAL, UNKNOWN, SentencePieceSpec

    pieces = [Piece("<unk>", 0.0, UNKNOWN)] + [Piece(text, -1.0, NORMAL) for text in
                                               ["▁", "a", "b", "aa", "ab", "ba", "▁a", "aaa", "bab"]]
    model = BPE.from_sentencepiece(SentencePieceSpec(tuple(pieces)))
    path = conversion.sentencepiece.save(model, tmp_path / "ties.model")
    theirs = spm.SentencePieceProcessor(model_file=os.fspath(path))
    rng = random.Random(1)
    texts = ["".join(rng.choice("ab ") for _ in range(rng.randint(0, 14))) for _ in range(3_000)]
    assert_same_ids("ties", texts, model.encode_ordinary, theirs.encode)


@pytest.mark.parametrize("charsmap_from", ["identity", "botchan_en_bpe_1000.model", "botchan_en_unigram_1000.model"])
@pytest.mark.parametrize("add_dummy_prefix", [True, False])
@pytest.mark.parametrize("remove_extra_whitespaces", [True, False])
@pytest.mark.parametrize("escape_whitespaces", [True, False])
def test_every_normalizer_setting_matches_sentencepiece(charsmap_from: str, add_dummy_prefix: bool,
                                                        remove_extra_whitespaces: bool, escape_whitespaces: bool,
                                                        tmp_path: Path) -> None:
    """Botchan's BPE pieces under each normalizer (identity, nmt_nfkc's and nfkc's character maps) and
    whitespace setting, written as a .model and read by SentencePiece."""
    import dataclasses

    base = conversion.sentencepiece.load(shared("sentencepiece", "botchan_en_bpe_1000.model")).sentencepiece
    assert base is not None
    if charsmap_from == "identity":
        name, charsmap = "identity", b""
    else:
        normalizer = conversion.sentencepiece.read_proto(shared("sentencepiece", charsmap_from)).normalizer_spec
        name, charsmap = normalizer.name, normalizer.precompiled_charsmap
    spec = dataclasses.replace(base, normalizer_name=name, charsmap=charsmap, add_dummy_prefix=add_dummy_prefix,
                               remove_extra_whitespaces=remove_extra_whitespaces,
                               escape_whitespaces=escape_whitespaces)
    model = BPE.from_sentencepiece(spec)
    path = conversion.sentencepiece.save(model, tmp_path / "variant.model")
    theirs = spm.SentencePieceProcessor(model_file=os.fspath(path))
    texts = list(varied_texts(600, seed=13)) + ["  ", " a  b ", "ｆｕｌｌ　ｗｉｄｔｈ", "①②", "ﬁ", "\u3000x\u3000"]
    assert_same("normalized text", texts, [model.encode_ordinary(text) for text in texts], theirs.encode(texts))
    encoded = theirs.encode(texts)
    assert_same("decoded", texts, [model.decode(ids) for ids in encoded], [theirs.decode(ids) for ids in encoded])


@pytest.fixture(scope="module")
def v1_pair() -> tuple[BPE, object]:
    path = mistral_file("tokenizer.model.v1")
    return conversion.sentencepiece.load(path), spm.SentencePieceProcessor(model_file=os.fspath(path))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(st.text(st.characters(codec="utf-8")) | st.sampled_from([" ", "  ", "▁", "\n", "<s>", "[INST]"]))
       .map("".join))
def test_any_text_encodes_and_decodes_like_sentencepiece(v1_pair: tuple[BPE, object], text: str) -> None:
    ours, theirs = v1_pair
    ids = theirs.encode(text)
    assert ours.encode_ordinary(text) == ids
    assert ours.decode(ids) == theirs.decode(ids)
