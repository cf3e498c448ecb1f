"""``hf_bpe.patch_transformers()`` / ``unpatch_transformers()`` (``hf_bpe.transformers._patch``).

The oracle is transformers' own ``TokenizersBackend`` on the same folder, loaded before patching: a
patched tokenizer must give the same ``input_ids``, masks, type ids, offsets, padding, truncation,
tensors and decodes. The backend's counters (``answered``, ``passed``) prove which side answered, so
that a test cannot pass with no patch at all. Folders are written by hf_bpe (``conversion.hf.save`` of
a model ``hf_bpe.train`` made); the refused one is a WordPiece ``tokenizer.json``.
"""

from __future__ import annotations

import copy
import json
import logging
import pickle
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import textgen
from conversion_support import trained_model, training_corpus

import conversion.hf
import hf_bpe
from hf_bpe.transformers._patch import Backend

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

TokenizersBackend = transformers.TokenizersBackend


# ------------------------------------------------------------------------------------ folders


def write_folder(folder: Path, *, template: bool) -> Path:
    """A transformers folder (``tokenizer.json`` by hf_bpe, a minimal ``tokenizer_config.json``) that
    ``AutoTokenizer`` loads as ``TokenizersBackend``. ``template``: BOS and EOS around each sequence and
    a non-special added token; either way transformers adds ``<|pad|>`` itself (not in the file)."""
    model = trained_model()
    added = {model.n_vocab: tokenizers.AddedToken("<|note|>", special=False, normalized=False)} if template else None
    folder.mkdir()
    conversion.hf.save(model, folder / "tokenizer.json", added_tokens=added, bos_token="<|endoftext|>",
                       eos_token="<|endoftext|>", add_bos_token=template, add_eos_token=template)
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<|pad|>", "model_max_length": 1 << 20}))
    return folder


def write_normalizing_folder(folder: Path) -> Path:
    """A model that normalizes text (NFKC) before its Split step."""
    model = trained_model()
    pattern = (hf_bpe.patterns.Normalize("nfkc"), hf_bpe.patterns.Split(r"\s+|\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+"))
    folder.mkdir()
    conversion.hf.save(hf_bpe.BPE(model.mergeable_ranks, pattern, model.special_tokens), folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                              "pad_token": "<|endoftext|>"}))
    return folder


def write_sentencepiece_folder(folder: Path) -> Path:
    """A SentencePiece-style ``tokenizer.json`` (byte fallback, Metaspace), ``<s>`` before each sequence."""
    model = hf_bpe.train_sentencepiece(training_corpus(), vocab_size=1500, normalization_rule_name="identity",
                                       byte_fallback=True, split_digits=True, remove_extra_whitespaces=False,
                                       allow_whitespace_only_pieces=True, character_coverage=0.98,
                                       show_progress=False)
    folder.mkdir()
    conversion.hf.save(model, folder / "tokenizer.json", bos_token="<s>", add_bos_token=True)
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                              "pad_token": "<unk>"}))
    return folder


def write_roberta_folder(folder: Path) -> Path:
    """A RoBERTa-style file by `tokenizers`: RobertaProcessing trimming the offsets (the spaces at a
    token's ends); hf_bpe encodes it, the trimmed offsets are tokenizers' to give."""
    folder.mkdir()
    conversion.hf.save(trained_model(), folder / "tokenizer.json")
    tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.add_special_tokens(["<s>", "</s>"])
    start, end = tokenizer.token_to_id("<s>"), tokenizer.token_to_id("</s>")
    tokenizer.post_processor = tokenizers.processors.RobertaProcessing(("</s>", end), ("<s>", start),
                                                                       trim_offsets=True, add_prefix_space=False)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                              "pad_token": "</s>"}))
    return folder


def write_wordpiece_folder(folder: Path) -> Path:
    """A WordPiece ``tokenizer.json``, which hf_bpe refuses (not a BPE model)."""
    vocab = {"[UNK]": 0, "[PAD]": 1, "hello": 2, "world": 3, "##s": 4}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    folder.mkdir()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                              "pad_token": "[PAD]"}))
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("patch")
    return {"template": write_folder(root / "template", template=True),
            "plain": write_folder(root / "plain", template=False),
            "normalizing": write_normalizing_folder(root / "normalizing"),
            "sentencepiece": write_sentencepiece_folder(root / "sentencepiece"),
            "roberta": write_roberta_folder(root / "roberta"),
            "wordpiece": write_wordpiece_folder(root / "wordpiece")}


@pytest.fixture
def patched() -> Iterator[None]:
    hf_bpe.patch_transformers()
    try:
        yield
    finally:
        hf_bpe.unpatch_transformers()


def pair(folder: Path) -> tuple[Any, Any]:
    """(transformers' own tokenizer, the patched one) of ``folder``; patches for the second."""
    hf_bpe.unpatch_transformers()
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    hf_bpe.patch_transformers()
    ours = transformers.AutoTokenizer.from_pretrained(folder)
    assert type(ours) is type(theirs) and isinstance(ours, TokenizersBackend)
    return theirs, ours


def texts() -> list[str]:
    """Text of every code point class (``split_probe_texts``, sampled), generated fragments, and the
    added tokens between them."""
    rng = random.Random(3)
    sample = list(conversion.hf.split_probe_texts()[::12])
    fragments = [textgen.fragment(rng) for _ in range(60)]
    tokens = ["<|endoftext|>", "<|note|>", "<|pad|>"]
    mixed = [f"{rng.choice(fragments)}{rng.choice(tokens)}{rng.choice(fragments)}" for _ in range(30)]
    return sample + fragments + mixed + ["", " ", "🦀 crab", "naïve café"]


def assert_same_output(theirs: Any, ours: Any, what: str) -> None:
    assert list(ours.keys()) == list(theirs.keys()), what
    for key in theirs:
        expected, got = theirs[key], ours[key]
        if isinstance(expected, np.ndarray):
            assert isinstance(got, np.ndarray) and got.dtype == expected.dtype, (what, key)
            assert np.array_equal(got, expected), (what, key)
        else:
            assert got == expected, (what, key)


CALLS = [
    {},
    {"add_special_tokens": False},
    {"padding": True},
    {"padding": True, "padding_side": "left", "return_tensors": "np"},
    {"padding": "max_length", "max_length": 48, "truncation": True, "return_tensors": "np"},
    {"padding": True, "pad_to_multiple_of": 8, "return_special_tokens_mask": True, "return_token_type_ids": True},
    {"truncation": True, "max_length": 6, "return_offsets_mapping": True, "return_special_tokens_mask": True},
    {"return_offsets_mapping": True, "return_length": True, "padding": True, "padding_side": "left"},
    {"add_special_tokens": False, "truncation": True, "max_length": 3, "padding": "max_length"},
    {"split_special_tokens": True},
]


# --------------------------------------------------------------------------------- encoding


@pytest.mark.parametrize("kind", ["template", "plain"])
def test_patched_tokenizers_encode_on_hf_bpe_as_tokenizers_does(folders: dict[str, Path], patched: None,
                                                                 kind: str) -> None:
    theirs, ours = pair(folders[kind])
    backend = ours.backend_tokenizer
    assert isinstance(backend, Backend) and isinstance(theirs.backend_tokenizer, tokenizers.Tokenizer)
    batch = texts()
    singles = batch[::40]
    for call in CALLS:
        answered, passed = backend.answered, backend.passed
        assert_same_output(theirs(batch, **call), ours(batch, **call), f"batch {call}")
        for text in singles:
            assert_same_output(theirs(text, **call), ours(text, **call), f"{text!r} {call}")
        # split_special_tokens with a non-special added token is tokenizers' own (it matches one kind only)
        by_hf_bpe = kind == "plain" or not call.get("split_special_tokens")
        assert (backend.answered - answered, backend.passed - passed) == \
            ((1 + len(singles), 0) if by_hf_bpe else (0, 1 + len(singles))), call
    answered = backend.answered
    assert ours.encode(batch[5]) == theirs.encode(batch[5])
    assert ours.tokenize(batch[7]) == theirs.tokenize(batch[7])
    assert backend.answered == answered + 2


def test_truncation_from_the_left_and_overflowing_tokens(folders: dict[str, Path], patched: None) -> None:
    theirs, ours = pair(folders["template"])
    batch = texts()[:40]
    for tokenizer in (theirs, ours):
        tokenizer.truncation_side = "left"
    call = {"truncation": True, "max_length": 7, "return_offsets_mapping": True, "padding": True}
    answered = ours.backend_tokenizer.answered
    assert_same_output(theirs(batch, **call), ours(batch, **call), "left truncation")
    assert ours.backend_tokenizer.answered == answered + 1
    # overflowing windows (with a stride) come from tokenizers' encoding of the same call
    call = {"truncation": True, "max_length": 6, "stride": 2, "return_overflowing_tokens": True, "padding": True}
    assert_same_output(theirs(batch, **call), ours(batch, **call), "overflowing")


def test_encodings_give_tokenizers_attributes(folders: dict[str, Path], patched: None) -> None:
    """Attributes hf_bpe does not compute (tokens, word ids, char_to_token...) come from tokenizers."""
    theirs, ours = pair(folders["template"])
    batch = texts()[100:120]
    expected, got = theirs(batch, padding=True), ours(batch, padding=True)
    for index in range(len(batch)):
        assert got.tokens(index) == expected.tokens(index)
        assert got.word_ids(index) == expected.word_ids(index)
        assert got.sequence_ids(index) == expected.sequence_ids(index)
        if batch[index]:
            assert got.char_to_token(index, 0) == expected.char_to_token(index, 0)
    assert got.n_sequences == expected.n_sequences
    assert repr(got.encodings[0]) == repr(expected.encodings[0])


def test_a_model_that_normalizes_encodes_on_hf_bpe_with_its_offsets(folders: dict[str, Path], patched: None) -> None:
    theirs, ours = pair(folders["normalizing"])
    batch = texts() + ["\ufb01x \u2460 caf\u00e9 \u216b", "\ufdfa e\u0301 \u1100\u1161"]
    backend = ours.backend_tokenizer
    for call in ({"padding": True}, {"return_offsets_mapping": True, "truncation": True, "max_length": 9}):
        expected, got = theirs(batch, **call), ours(batch, **call)
        assert_same_output(expected, got, str(call))
    assert (backend.answered, backend.passed) == (2, 0)
    assert got.encodings[0]._real is None  # the offsets are hf_bpe's, not from tokenizers' encoding


def test_a_roberta_style_file_encodes_on_hf_bpe_and_takes_its_trimmed_offsets_from_tokenizers(
        folders: dict[str, Path], patched: None) -> None:
    theirs, ours = pair(folders["roberta"])
    batch = texts() + ["  two spaces", "\ttab", "<s>x</s>", "x </s> y"]
    backend = ours.backend_tokenizer
    for call in ({"padding": True, "return_special_tokens_mask": True},
                 {"return_offsets_mapping": True, "truncation": True, "max_length": 9}):
        assert_same_output(theirs(batch, **call), ours(batch, **call), str(call))
    assert (backend.answered, backend.passed) == (2, 0)


def test_a_sentencepiece_style_file_encodes_on_hf_bpe_and_decodes_on_tokenizers(
        folders: dict[str, Path], patched: None) -> None:
    """hf_bpe's SentencePiece models encode as the file does; their decode and offsets, and
    ``split_special_tokens``, are tokenizers' (conversion.hf reads only the encode as exact)."""
    theirs, ours = pair(folders["sentencepiece"])
    batch = texts()
    backend = ours.backend_tokenizer
    for call in ({}, {"padding": True, "return_special_tokens_mask": True, "return_tensors": "np"},
                 {"return_offsets_mapping": True}):
        assert_same_output(theirs(batch, **call), ours(batch, **call), str(call))
    assert (backend.answered, backend.passed) == (3, 0)
    assert_same_output(theirs(batch, split_special_tokens=True), ours(batch, split_special_tokens=True), "split")
    ids = theirs(batch)["input_ids"]
    assert ours.batch_decode(ids) == theirs.batch_decode(ids)
    assert (backend.answered, backend.passed) == (3, 1 + len(ids))


def test_pairs_and_pretokenized_input_pass_through(folders: dict[str, Path], patched: None) -> None:
    theirs, ours = pair(folders["template"])
    backend = ours.backend_tokenizer
    passed = backend.passed
    first, second = texts()[150:160], texts()[160:170]
    assert_same_output(theirs(first, second, padding=True), ours(first, second, padding=True), "pairs")
    words = [text.split() for text in first]
    assert_same_output(theirs(words, is_split_into_words=True), ours(words, is_split_into_words=True), "words")
    assert backend.passed == passed + 2


def test_decode_and_batch_decode_on_hf_bpe(folders: dict[str, Path], patched: None) -> None:
    theirs, ours = pair(folders["template"])
    rng = random.Random(8)
    sequences = [ids for ids in theirs(texts())["input_ids"]]
    sequences += [[rng.randrange(len(theirs)) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    backend = ours.backend_tokenizer
    answered = backend.answered
    for skip in (False, True):
        assert ours.batch_decode(sequences, skip_special_tokens=skip) == \
            theirs.batch_decode(sequences, skip_special_tokens=skip)
        assert backend.decode_batch(sequences[:20], skip) == theirs.backend_tokenizer.decode_batch(sequences[:20], skip)
    assert ours.decode(sequences[0]) == theirs.decode(sequences[0])
    assert backend.answered >= answered + 2 * len(sequences)
    # an id the model lacks (out of the vocabulary) is tokenizers' to decode
    passed = backend.passed
    assert ours.decode([5, len(theirs) + 10]) == theirs.decode([5, len(theirs) + 10])
    assert backend.passed == passed + 1


def test_added_tokens_and_a_changed_post_processor_reload(folders: dict[str, Path], patched: None) -> None:
    theirs, ours = pair(folders["plain"])
    batch = texts()[:60] + ["x<|new|>y <|new|>"]
    for tokenizer in (theirs, ours):
        tokenizer.add_tokens(["<|new|>"], special_tokens=True)
        tokenizer.add_bos_token = True  # transformers writes a new post-processor
    answered = ours.backend_tokenizer.answered
    assert_same_output(theirs(batch, padding=True, return_special_tokens_mask=True),
                       ours(batch, padding=True, return_special_tokens_mask=True), "after changes")
    assert ours.backend_tokenizer.answered == answered + 1
    assert ours.decode(ours("<|new|>a")["input_ids"], skip_special_tokens=True) == \
        theirs.decode(theirs("<|new|>a")["input_ids"], skip_special_tokens=True)


def test_copies_and_pickles_keep_encoding_on_hf_bpe(folders: dict[str, Path], patched: None) -> None:
    theirs, ours = pair(folders["template"])
    batch = texts()[:30]
    for twin in (copy.deepcopy(ours), pickle.loads(pickle.dumps(ours))):
        assert isinstance(twin.backend_tokenizer, Backend)
        assert_same_output(theirs(batch, padding=True), twin(batch, padding=True), "copy")
        assert twin.backend_tokenizer.answered == 1
    encoded = ours(batch, return_offsets_mapping=True)
    again = pickle.loads(pickle.dumps(encoded))
    assert again["input_ids"] == encoded["input_ids"] and again.tokens(3) == encoded.tokens(3)


# ------------------------------------------------------------------------------------ threads


def test_threads_calling_one_tokenizer_each_get_their_own_settings(folders: dict[str, Path], patched: None) -> None:
    """transformers sets truncation and padding on the backend before each call: threads with different
    settings must neither fail nor get each other's (each thread's output equals its own call's)."""
    theirs, ours = pair(folders["template"])
    batch = [text * 40 for text in texts()[:16]]
    calls = [{"padding": True}, {"truncation": True, "max_length": 9}, {},
             {"padding": "max_length", "max_length": 4096, "truncation": True, "padding_side": "left"}]
    expected = [theirs(batch, **call) for call in calls]
    errors: list[BaseException] = []
    wrong: list[int] = []
    start = threading.Barrier(8)

    def work(which: int) -> None:
        try:
            start.wait()
            for _ in range(15):
                got = ours(batch, **calls[which % 4])
                if got["input_ids"] != expected[which % 4]["input_ids"] or \
                        got["attention_mask"] != expected[which % 4]["attention_mask"]:
                    wrong.append(which)
        except BaseException as error:  # noqa: BLE001 - every failure of a thread is reported
            errors.append(error)

    backend = ours.backend_tokenizer
    done = threading.Event()
    ids = expected[0]["input_ids"][:4]

    def meddle() -> None:
        """tokenizers' own scenario: the state set and decodes run on the backend itself meanwhile."""
        try:
            while not done.is_set():
                backend.enable_truncation(max_length=8)
                backend.enable_padding(pad_id=0, length=50)
                assert backend.decode_batch(ids, False) == theirs.batch_decode(ids)
                backend.no_truncation()
                backend.no_padding()
        except BaseException as error:  # noqa: BLE001 - every failure of a thread is reported
            errors.append(error)

    threads = [threading.Thread(target=work, args=(which,)) for which in range(8)]
    meddler = threading.Thread(target=meddle)
    meddler.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    meddler.join()
    assert not errors, errors[0]
    assert not wrong
    assert backend.passed == 0 and backend.answered >= 8 * 15 + len(ids)


# ---------------------------------------------------------------------------- refusal, unpatch


def test_a_refused_file_stays_on_tokenizers_with_one_log_line(folders: dict[str, Path], patched: None,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hf_bpe"):
        tokenizer = transformers.AutoTokenizer.from_pretrained(folders["wordpiece"])
    assert isinstance(tokenizer.backend_tokenizer, tokenizers.Tokenizer)
    lines = [record for record in caplog.records if record.name == "hf_bpe"]
    assert len(lines) == 1
    message = lines[0].getMessage()
    assert str(folders["wordpiece"] / "tokenizer.json") in message and "WordPiece" in message
    assert tokenizer("hello worlds")["input_ids"] == [2, 3, 4]


def test_unpatch_restores_the_classes_and_the_tokenizers(folders: dict[str, Path]) -> None:
    before = dict(vars(TokenizersBackend))
    stream = tokenizers.decoders.DecodeStream
    hf_bpe.patch_transformers()
    hf_bpe.patch_transformers()  # twice: harmless
    try:
        assert tokenizers.decoders.DecodeStream is hf_bpe.DecodeStream
        tokenizer = transformers.AutoTokenizer.from_pretrained(folders["template"])
        backend = tokenizer.backend_tokenizer
        assert isinstance(backend, Backend)
        original = backend._original
        twin = copy.deepcopy(tokenizer)
        expected = tokenizer(texts()[:20], padding=True, truncation=True, max_length=30)
    finally:
        hf_bpe.unpatch_transformers()
    hf_bpe.unpatch_transformers()  # twice: harmless
    assert dict(vars(TokenizersBackend)) == before
    assert all(vars(TokenizersBackend)[name] is value for name, value in before.items())
    assert tokenizers.decoders.DecodeStream is stream
    assert tokenizer.backend_tokenizer is original
    assert tokenizer.backend_tokenizer.truncation is not None  # the state last set is kept
    assert_same_output(expected, tokenizer(texts()[:20], padding=True, truncation=True, max_length=30), "restored")
    assert isinstance(transformers.AutoTokenizer.from_pretrained(folders["template"]).backend_tokenizer,
                      tokenizers.Tokenizer)
    # a copy made while patched now passes every call through to tokenizers
    passed = twin.backend_tokenizer.passed
    assert_same_output(expected, twin(texts()[:20], padding=True, truncation=True, max_length=30), "copy")
    assert twin.backend_tokenizer.passed == passed + 1
