"""SentencePiece models written as tokenizer.json (``conversion.hf.save``): exact against
``SentencePieceProcessor`` through `tokenizers` and transformers wherever `tokenizers` can be, refused
with the reason where it cannot, and written closest with a measured mismatch rate by ``lossy=True``.

The oracle is always SentencePiece itself: the shipped Mistral models and botchan, models trained here
with ``SentencePieceTrainer`` under varied options, and random hand-made specs written as ``.model``
files (ties, runs of one character, pieces no text forms, characters that are no pieces).
"""

from __future__ import annotations

import functools
import io
import os
import random
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conversion_support import (
    NORMALIZER_REFUSAL,
    PARITY_STRINGS,
    TRAINED,
    USER_DEFINED_REFUSAL,
    assert_same,
    corpus_lines,
    mistral_file,
    shared,
    training_corpus,
    varied_texts,
)
from suite import require_shared, scale_factor, scaled
from tokenizers import AddedToken

import conversion.hf
import conversion.sentencepiece
from hf_bpe import BPE, LossyConversionWarning
from hf_bpe.errors import ConversionError
from hf_bpe.sentencepiece_bpe import (
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    USER_DEFINED,
    Piece,
    SentencePieceSpec,
    merge_list,
)

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is the oracle; pip install -e '.[test]'")
pytest.importorskip("google.protobuf", reason="reading .model files needs protobuf; pip install protobuf")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers reads the written files; pip install -e '.[test]'")

SHIPPED = {
    "mistral-v1": (lambda: mistral_file("tokenizer.model.v1"), None),
    "mistral-v3": (lambda: mistral_file("mistral_instruct_tokenizer_240323.model.v3"), USER_DEFINED_REFUSAL),
    "mistral-v7": (lambda: mistral_file("mistral_instruct_tokenizer_241114.model.v7"), USER_DEFINED_REFUSAL),
    "botchan-nmt-nfkc": (lambda: shared("sentencepiece", "botchan_en_bpe_1000.model"), NORMALIZER_REFUSAL),
}
"""The SentencePiece BPE models the test dependencies ship: (path, why tokenizer.json is refused)."""

# ------------------------------------------------------------------------------------------ training


@functools.cache
def trained_file(name: str, folder: str) -> Path:
    options = {"model_type": "bpe", "vocab_size": 1_500, "character_coverage": 0.98, "hard_vocab_limit": False,
               "minloglevel": 2, "num_threads": 1, **TRAINED[name][0]}
    stream = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(training_corpus()), model_writer=stream, **options)
    path = Path(folder) / f"{name}.model"
    path.write_bytes(stream.getvalue())
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("sentencepiece-to-hf"))


# ----------------------------------------------------------------------------------------- comparing


def write(model: BPE, path: Path) -> LossyConversionWarning | None:
    """Save ``model`` as tokenizer.json: exactly, or (when refused) with ``lossy=True``, returning the
    warning that reports the lossy file's mismatch rate."""
    try:
        conversion.hf.save(model, path)
        return None
    except ConversionError:
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        conversion.hf.save(model, path, lossy=True)
    reports = [warning.message for warning in caught if isinstance(warning.message, LossyConversionWarning)]
    assert len(reports) == 1, [str(warning.message) for warning in caught]
    return reports[0]


def assert_matches_sentencepiece(what: str, model: BPE, processor: Any, written: Path, texts: Sequence[str],
                                 transformers_texts: int = 2_000, allowed_texts: int | None = None) -> None:
    """`tokenizers` and transformers, loading ``written``, encode ``texts`` as SentencePieceProcessor
    (special pieces as text) and decode SentencePiece's ids as it does; with special tokens matched,
    `tokenizers` encodes the first ``allowed_texts`` as ``model`` with ``allowed_special="all"``;
    transformers takes the first ``transformers_texts``."""
    texts = list(texts)
    expected = processor.encode(texts)
    tokenizer = tokenizers.Tokenizer.from_file(os.fspath(written))
    tokenizer.encode_special_tokens = True
    assert_same(f"{what}: tokenizers (encode_special_tokens) vs SentencePieceProcessor.encode", texts,
                [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)], expected)
    tokenizer.encode_special_tokens = False
    allowed = texts[:allowed_texts]
    assert_same(f"{what}: tokenizers vs encode(allowed_special='all')", allowed,
                [encoding.ids for encoding in tokenizer.encode_batch(allowed, add_special_tokens=False)],
                model.encode_batch(allowed, allowed_special="all"))
    assert_same(f"{what}: tokenizers decode vs SentencePieceProcessor.decode", texts,
                tokenizer.decode_batch(expected, skip_special_tokens=False), [processor.decode(ids) for ids in expected])

    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_file=os.fspath(written))
    sample, sample_ids = texts[:transformers_texts], expected[:transformers_texts]
    assert_same(f"{what}: transformers (split_special_tokens) vs SentencePieceProcessor.encode", sample,
                fast(sample, add_special_tokens=False, split_special_tokens=True)["input_ids"], sample_ids)
    assert_same(f"{what}: transformers decode vs SentencePieceProcessor.decode", sample,
                fast.batch_decode(sample_ids), [processor.decode(ids) for ids in sample_ids])


def assert_autotokenizer_loads(model: BPE, written: Path, tmp_path: Path) -> None:
    """A folder holding only the tokenizer.json loads with AutoTokenizer (TokenizersBackend) and encodes
    as the model, control pieces matched as special tokens."""
    from transformers import AutoTokenizer

    folder = tmp_path / "auto"
    folder.mkdir()
    shutil.copy(written, folder / "tokenizer.json")
    loaded = AutoTokenizer.from_pretrained(os.fspath(folder))
    texts = list(varied_texts(300, seed=9)) + ["<s>hello</s>", "[INST] hi [/INST]", " ", ""]
    assert_same("AutoTokenizer", texts, [loaded.encode(text, add_special_tokens=False) for text in texts],
                model.encode_batch(texts, allowed_special="all"))


# ------------------------------------------------------------------------------------- shipped models


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_models_are_written_exactly_or_refused_with_the_reason(name: str, tmp_path: Path) -> None:
    path, refusal = SHIPPED[name][0](), SHIPPED[name][1]
    model = conversion.sentencepiece.load(path)
    target = tmp_path / "tokenizer.json"
    if refusal is None:
        conversion.hf.save(model, target)
    else:
        with pytest.raises(ConversionError, match=refusal):
            conversion.hf.save(model, target)
        assert not target.exists()
        report = write(model, target)
        assert report is not None and report.probes == 4_000
        assert f"differs on {report.mismatches} of 4000 probe texts" in str(report)
    processor = spm.SentencePieceProcessor(model_file=os.fspath(path))
    if refusal is None:
        assert_matches_sentencepiece(name, model, processor, target, varied_texts(scaled(2_000, 200)), 500)
        assert_autotokenizer_loads(model, target, tmp_path)


@pytest.mark.slow
def test_mistral_v1_matches_sentencepiece_on_the_full_corpora_and_varied_text(tmp_path: Path) -> None:
    """Every line of the shared corpora and botchan.txt (27 MB) at HF_BPE_TEST_SCALE=10, a share of each
    file below (CI: the first 5,000 lines of each), and the varied strings, through tokenizers (transformers: a sample)."""
    require_shared("corpora")
    path = mistral_file("tokenizer.model.v1")
    model = conversion.sentencepiece.load(path)
    target = conversion.hf.save(model, tmp_path / "tokenizer.json")
    processor = spm.SentencePieceProcessor(model_file=os.fspath(path))
    texts = list(varied_texts(PARITY_STRINGS)) + corpus_lines(None if scale_factor() >= 10 else scaled(5_000, 100))
    assert_matches_sentencepiece("mistral v1", model, processor, target, texts,
                                 transformers_texts=scaled(20_000, 500), allowed_texts=PARITY_STRINGS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mistral-v3", "mistral-v7", "botchan-nmt-nfkc"])
def test_lossy_files_report_how_often_they_differ(name: str, tmp_path: Path) -> None:
    """The lossy file's reported rate counts what SentencePiece itself finds on the probe texts; on
    natural text the file is close."""
    path = SHIPPED[name][0]()
    model = conversion.sentencepiece.load(path)
    target = tmp_path / "tokenizer.json"
    report = write(model, target)
    assert report is not None
    processor = spm.SentencePieceProcessor(model_file=os.fspath(path))
    tokenizer = tokenizers.Tokenizer.from_file(os.fspath(target))
    tokenizer.encode_special_tokens = True
    probes = conversion.hf.probe_texts() + conversion.hf.sentencepiece_probe_texts(model)
    assert len(probes) == report.probes
    differ = sum(encoding.ids != ids for encoding, ids in
                 zip(tokenizer.encode_batch(probes, add_special_tokens=False), processor.encode(probes)))
    assert 0 < differ <= report.mismatches, "the report must count at least what SentencePiece finds"
    texts = list(varied_texts(scaled(5_000, 500)))
    natural = sum(encoding.ids != ids for encoding, ids in
                  zip(tokenizer.encode_batch(texts, add_special_tokens=False), processor.encode(texts)))
    assert natural <= len(texts) // 100


# -------------------------------------------------------------------------------------- trained models


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TRAINED))
def test_trained_models_are_written_exactly_or_refused_with_the_reason(name: str, folder: str,
                                                                       tmp_path: Path) -> None:
    path, refusal = trained_file(name, folder), TRAINED[name][1]
    model = conversion.sentencepiece.load(path)
    target = tmp_path / "tokenizer.json"
    processor = spm.SentencePieceProcessor(model_file=os.fspath(path))
    if refusal is not None:
        with pytest.raises(ConversionError, match=refusal):
            conversion.hf.save(model, target)
        report = write(model, target)
        assert report is not None and report.mismatches < report.probes
        return
    conversion.hf.save(model, target)
    texts = (list(varied_texts(scaled(2_000, 200), seed=5)) + conversion.hf.sentencepiece_probe_texts(model, 1_000, 8)
             + corpus_lines(scaled(300, 30)))
    assert_matches_sentencepiece(name, model, processor, target, texts, 500)


def test_trained_model_with_user_defined_pieces_loads_in_autotokenizer(folder: str, tmp_path: Path) -> None:
    path = trained_file("identity-user-defined-no-dummy-prefix", folder)
    model = conversion.sentencepiece.load(path)
    target = conversion.hf.save(model, tmp_path / "tokenizer.json")
    assert_autotokenizer_loads(model, target, tmp_path)
    tokenizer = tokenizers.Tokenizer.from_file(os.fspath(target))
    tokenizer.encode_special_tokens = True  # control pieces as text; user-defined ones are still matched
    processor = spm.SentencePieceProcessor(model_file=os.fspath(path))
    for text in ["<sep>", "[REF]x<sep>", "a@@@b", "x", " the▁the", "<sep><s></s>"]:
        assert tokenizer.encode(text, add_special_tokens=False).ids == processor.encode(text), text


# ------------------------------------------------------------------------------------------ decoding


@pytest.mark.slow
@pytest.mark.parametrize("name", ["identity", "identity-byte-fallback", "identity-keep-whitespace",
                                  "identity-no-dummy-prefix", "llama-like"])
def test_any_ids_decode_as_sentencepiece_unless_byte_pieces_are_not_utf8(name: str, folder: str,
                                                                          tmp_path: Path) -> None:
    """Random id sequences (control pieces, <unk>, pieces with ▁ first, byte pieces) decode as
    SentencePiece does; the one exception is a run of byte pieces that is not UTF-8, where
    tokenizers' ByteFallback shows every byte of the run as U+FFFD (SentencePiece: each bad byte)."""
    path = trained_file(name, folder)
    model = conversion.sentencepiece.load(path)
    target = conversion.hf.save(model, tmp_path / "tokenizer.json")
    tokenizer = tokenizers.Tokenizer.from_file(os.fspath(target))
    processor = spm.SentencePieceProcessor(model_file=os.fspath(path))
    spec = model.sentencepiece
    assert spec is not None
    byte_of = {index: int(piece.text[3:5], 16) for index, piece in enumerate(spec.pieces) if piece.type == BYTE}

    def byte_runs_are_utf8(ids: list[int]) -> bool:
        run: list[int] = []
        for token in [*ids, -1]:
            if token in byte_of:
                run.append(byte_of[token])
                continue
            try:
                bytes(run).decode("utf-8")
            except UnicodeDecodeError:
                return False
            run = []
        return True

    rng = random.Random(3)
    size = len(spec.pieces)
    sequences = [[rng.randrange(size) for _ in range(rng.randint(0, 8))] for _ in range(scaled(5_000, 500))]
    sequences += [[rng.randrange(size)] + processor.encode(chr(rng.choice([0x2581, 0x20, 0x10FFFD, 0x4E2D, 0xE9])))
                  + [rng.randrange(size)] for _ in range(scaled(2_000, 200))]
    valid = [ids for ids in sequences if byte_runs_are_utf8(ids)]
    assert_same(f"{name}: decode of random ids", [str(ids) for ids in valid],
                tokenizer.decode_batch(valid, skip_special_tokens=False), [processor.decode(ids) for ids in valid])


# ------------------------------------------------------------------------------------ the merge rule


def spec_of(pieces: Sequence[tuple[str, float]], **settings: Any) -> SentencePieceSpec:
    return SentencePieceSpec((Piece("<unk>", 0.0, UNKNOWN), Piece("<s>", 0.0, CONTROL),
                              *(Piece(text, score, NORMAL) for text, score in pieces)), **settings)


def test_a_piece_reachable_by_several_pairs_keeps_the_pair_that_forms_it() -> None:
    spec = spec_of([("a", -1), ("b", -1), ("c", -1), ("ab", -3), ("bc", -2), ("abc", -4)])
    listed = merge_list(spec)
    assert listed.conflicts == () and listed.unreachable == ()
    assert listed.merges == (("b", "c"), ("a", "b"), ("a", "bc"))  # 'abc' forms from a + bc, never ab + c


def test_pieces_no_text_forms_are_left_out() -> None:
    listed = merge_list(spec_of([("a", -1), ("b", -1), ("c", -1), ("d", -1), ("bc", -2), ("abcd", -3)]))
    assert listed.unreachable == ("abcd",) and listed.merges == (("b", "c"),) and listed.conflicts == ()


def test_pieces_formed_from_characters_that_are_no_pieces_are_a_conflict() -> None:
    listed = merge_list(spec_of([("a", -1), ("ax", -2)]))
    assert listed.merges == (("a", "x"),)
    assert "'ax'" in str(listed.conflicts[0]) and "not pieces themselves" in str(listed.conflicts[0])
    model = BPE.from_sentencepiece(spec_of([("▁", 0), ("a", -1), ("ax", -2)]))
    with pytest.raises(ConversionError, match="'ax': SentencePiece forms these pieces from characters"):
        conversion.hf.build_tokenizer(model)


def test_equal_scores_of_different_pieces_are_a_conflict_naming_them() -> None:
    model = BPE.from_sentencepiece(spec_of([("▁", 0), ("a", -1), ("b", -1), ("ab", -5), ("ba", -5)]))
    with pytest.raises(ConversionError, match=r"'ab', 'ba': these pieces share the score -5") as raised:
        conversion.hf.build_tokenizer(model)
    assert "(1 reason)" in str(raised.value)


def test_runs_of_one_character_with_one_score_are_ordered_as_sentencepiece_joins_them() -> None:
    """Mistral's whitespace pieces: ▁ runs of 2-14 and 16 characters, all scored -1e9."""
    runs = [("▁" * length, -1e9) for length in [*range(2, 15), 16]]
    listed = merge_list(spec_of([("▁", -1e9), ("a", -1), ("▁a", -2), *runs]))
    assert listed.conflicts == ()
    assert listed.merges[-14:] == (("▁" * 14, "▁▁"), *(("▁" * left, "▁") for left in range(13, 0, -1)))
    intruder = merge_list(spec_of([("▁", -1e9), ("a", -1), ("▁▁a", -2), ("▁a", -3), *runs]))
    assert "also holds '▁▁'" in str(intruder.conflicts[0])


def test_a_long_piece_is_followed_in_linear_time() -> None:
    pieces = [("a", -1.0), ("b", -1.0), *[("ab" * (2**level), -2.0 - level) for level in range(12)]]
    listed = merge_list(spec_of(pieces))
    assert listed.merges[-1] == ("ab" * 1024, "ab" * 1024) and listed.conflicts == ()


def random_spec(rng: random.Random) -> SentencePieceSpec:
    """Pieces over a small alphabet with scores that often tie, sometimes a family of ▁ runs sharing a
    score, user-defined pieces or byte pieces, and any whitespace setting."""
    alphabet = ["▁", "a", "b", "c", " "]
    pieces: dict[str, float] = {char: -float(rng.randint(0, 3)) for char in alphabet if rng.random() < 0.9}
    for _ in range(rng.randint(3, 25)):
        text = "".join(rng.choices(alphabet if rng.random() < 0.8 else ["▁", "a"], k=rng.randint(2, 5)))
        pieces.setdefault(text, -float(rng.randint(1, 8)) if rng.random() < 0.3 else -rng.random() * 10)
    if rng.random() < 0.4:
        score = -float(rng.randint(0, 9))
        for length in rng.sample(range(2, 12), rng.randint(1, 6)):
            pieces.setdefault("▁" * length, score)
    entries = [Piece(text, score, NORMAL) for text, score in pieces.items()]
    if rng.random() < 0.3:
        entries += [Piece(text, 0.0, USER_DEFINED) for text in rng.sample(["<x>", "bc", "c", "ab▁", "<s"], 2)
                    if text not in pieces]
    byte_fallback = rng.random() < 0.3
    if byte_fallback:
        entries += [Piece(f"<0x{byte:02X}>", 0.0, BYTE) for byte in range(256)]
    return SentencePieceSpec((Piece("<unk>", 0.0, UNKNOWN), Piece("<s>", 0.0, CONTROL), *entries),
                             byte_fallback=byte_fallback, add_dummy_prefix=rng.random() < 0.6,
                             remove_extra_whitespaces=rng.random() < 0.5, escape_whitespaces=rng.random() < 0.8)


@pytest.mark.slow
def test_whenever_a_file_is_written_exactly_sentencepiece_agrees(tmp_path: Path) -> None:
    """Random specs, written as .model (SentencePiece is the oracle) and as tokenizer.json: every file
    written without lossy encodes and decodes random text as SentencePiece does."""
    rng = random.Random(1)
    written = refused = 0
    for trial in range(scaled(600, 60)):
        spec = random_spec(rng)
        model = BPE.from_sentencepiece(spec)
        processor = spm.SentencePieceProcessor(
            model_file=os.fspath(conversion.sentencepiece.save(model, tmp_path / "random.model")))
        try:
            tokenizer = conversion.hf.build_tokenizer(model, check=False)
        except ConversionError:
            refused += 1
            continue
        written += 1
        texts = ["".join(rng.choices(["a", "b", "c", " ", " " * rng.randint(2, 30), "▁", "x", "é", "<s>", "<x>"],
                                     k=rng.randint(0, 20))) for _ in range(200)]
        expected = processor.encode(texts)
        tokenizer.encode_special_tokens = True
        assert_same(f"trial {trial}: {spec}", texts,
                    [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)], expected)
        assert_same(f"trial {trial}: decode", texts, tokenizer.decode_batch(expected, skip_special_tokens=False),
                    [processor.decode(ids) for ids in expected])
    assert written > scaled(600, 60) // 5 and refused > 0


@pytest.mark.slow
def test_runs_of_one_character_sharing_a_score_match_sentencepiece_on_long_runs(tmp_path: Path) -> None:
    rng = random.Random(2)
    checked = 0
    for trial in range(scaled(300, 30)):
        lengths = rng.sample(range(2, 14), rng.randint(1, 8))
        pieces = [("▁", 0.0), ("a", -1.0), ("b", -0.5), ("▁a", -2.0), ("a▁", -2.5)]
        pieces += [("▁" * length, -3.0) for length in lengths]
        model = BPE.from_sentencepiece(spec_of(pieces, add_dummy_prefix=rng.random() < 0.5,
                                               remove_extra_whitespaces=False))
        assert conversion.hf.sentencepiece_differences(model) == [], sorted(lengths)
        tokenizer = conversion.hf.build_tokenizer(model, check=False)
        processor = spm.SentencePieceProcessor(
            model_file=os.fspath(conversion.sentencepiece.save(model, tmp_path / "runs.model")))
        texts = ["".join(rng.choice(["a", "b", " ", " " * rng.randint(1, 60), "▁"]) for _ in range(rng.randint(0, 9)))
                 for _ in range(150)]
        tokenizer.encode_special_tokens = True
        assert_same(f"▁ runs {sorted(lengths)}", texts,
                    [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)],
                    processor.encode(texts))
        checked += 1
    assert checked == scaled(300, 30)


# ------------------------------------------------------------------------------- settings and errors


def test_user_defined_pieces_that_change_under_the_normalizer_are_refused() -> None:
    pieces = (Piece("<unk>", 0.0, UNKNOWN), Piece("a", -1.0), Piece("a b", 0.0, USER_DEFINED))
    model = BPE.from_sentencepiece(SentencePieceSpec(pieces, add_dummy_prefix=False))
    with pytest.raises(ConversionError, match="user-defined pieces 'a b' contain spaces"):
        conversion.hf.build_tokenizer(model)


def test_decoding_corner_cases_are_refused() -> None:
    pieces = (Piece("<unk>", 0.0, UNKNOWN), Piece("a", -1.0), *(Piece(f"<0x{byte:02X}>", 0.0, BYTE) for byte in range(256)))
    model = BPE.from_sentencepiece(SentencePieceSpec(pieces, byte_fallback=True))
    with pytest.raises(ConversionError, match="'▁' is not a piece, so it decodes from byte pieces"):
        conversion.hf.build_tokenizer(model)
    surface = BPE.from_sentencepiece(SentencePieceSpec((Piece("<unk>", 0.0, UNKNOWN), Piece("▁", -1.0)),
                                                       unk_surface="▁?▁"))
    with pytest.raises(ConversionError, match="surface '▁\\?▁' holds '▁'"):
        conversion.hf.build_tokenizer(surface)


def test_added_tokens_follow_the_pieces_and_merges_are_not_taken_for_sentencepiece_models() -> None:
    model = conversion.sentencepiece.load(mistral_file("tokenizer.model.v1"))
    written = conversion.hf.build_tokenizer(model, added_tokens={32000: "<extra>", 32001: AddedToken("<y>", special=True)})
    assert (written.token_to_id("<extra>"), written.token_to_id("<y>")) == (32000, 32001)
    with pytest.raises(ConversionError, match="tokenizer.json would give it id 32000"):
        conversion.hf.build_tokenizer(model, added_tokens={32001: "<gap>"})
    with pytest.raises(ConversionError, match="merges are not taken for SentencePiece models"):
        conversion.hf.build_tokenizer(model, merges=[])


def test_bos_and_eos_are_added_by_the_post_processor(tmp_path: Path) -> None:
    model = conversion.sentencepiece.load(mistral_file("tokenizer.model.v1"))
    path = conversion.hf.save(model, tmp_path / "tokenizer.json", bos_token="<s>", add_bos_token=True)
    tokenizer = tokenizers.Tokenizer.from_file(os.fspath(path))
    assert tokenizer.encode("Hello").ids == [1, *model.encode_ordinary("Hello")]
    assert tokenizer.decode(tokenizer.encode("Hello").ids, skip_special_tokens=False) == "Hello"


def test_a_refused_save_writes_nothing_and_a_lossy_one_leaves_the_reason(tmp_path: Path) -> None:
    model = conversion.sentencepiece.load(mistral_file("mistral_instruct_tokenizer_241114.model.v7"))
    target = tmp_path / "tokenizer.json"
    target.write_text("previous", encoding="utf-8")
    with pytest.raises(ConversionError, match="Pass lossy=True") as raised:
        conversion.hf.save(model, target)
    assert "'[/REF]', '[REF]'" in str(raised.value) and "and 17 more" in str(raised.value)
    assert target.read_text(encoding="utf-8") == "previous"
    with pytest.warns(LossyConversionWarning, match=r"differs on \d+ of 4000 probe texts .*Why: the user-defined"):
        conversion.hf.save(model, target, lossy=True)
    assert tokenizers.Tokenizer.from_file(os.fspath(target)).encode("[REF] hi").ids == \
        model.encode_ordinary("[REF] hi")


def test_command_line_refuses_and_writes_with_lossy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from hf_bpe.cli import main

    assert main(["convert", os.fspath(mistral_file("tokenizer.model.v1")), "--to", "hf",
                 os.fspath(tmp_path / "v1.json")]) == 0
    assert "(hf)" in capsys.readouterr().out
    source = os.fspath(mistral_file("mistral_instruct_tokenizer_240323.model.v3"))
    assert main(["convert", source, "--to", "hf", os.fspath(tmp_path / "v3.json")]) == 1
    error = capsys.readouterr().err
    assert "user-defined pieces" in error and "--lossy" in error and not (tmp_path / "v3.json").exists()
    assert main(["convert", source, "--to", "hf", os.fspath(tmp_path / "v3.json"), "--lossy"]) == 0
    captured = capsys.readouterr()
    assert "(hf)" in captured.out and "warning: lossy tokenizer.json" in captured.err
    assert "probe texts" in captured.err and (tmp_path / "v3.json").is_file()
