"""GGUF files (``conversion.gguf``): llama.cpp's own vocabulary tests, save round trips, what is refused,
corrupt files, the command line, and rank files recognised by their content (Meta's ``tokenizer.model``).

The oracle is llama.cpp: its ``ggml-vocab-*.gguf`` files with the ids its tokenizer test expects
(``.inp``/``.out``, from the ``llama-cpp-python`` sdist), and, when a llama.cpp tokenizer is at hand
(``LLAMA_CPP_TEST_TOKENIZER`` names llama.cpp's ``test-tokenizer-0`` binary, or the ``llama_cpp``
package is installed), llama.cpp itself on generated text.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import struct
import warnings
from pathlib import Path
from typing import Any

import oracles
import pytest
from conversion_support import generated_text, varied_texts
from suite import scaled

import conversion.gguf
import hf_bpe
from conversion import _gguf_file
from conversion._gguf_file import ARRAY, FLOAT32, INT32, STRING, UINT32, Value
from conversion._llama_pre import PRE_NAMES
from hf_bpe import _rules, patterns
from hf_bpe._known_rank_files import LLAMA3, LLAMA4, QWEN
from hf_bpe._sources import SourceError, detect_format
from hf_bpe.cli import main
from hf_bpe.errors import ConversionError, LossyConversionWarning, MissingBytesWarning, TokenizerFileError
from hf_bpe.patterns import pieces

VOCAB_FILES = ("aquila", "baichuan", "bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4",
               "gpt-2", "gpt-neox", "llama-bpe", "llama-spm", "mpt", "nomic-bert-moe", "phi-3", "qwen2", "qwen35",
               "refact", "starcoder")
"""Every vocabulary of the pinned sdist (``oracles.LLAMA_CPP_SDIST``)."""

REFUSED_MODELS = {"bert-bge": "bert", "nomic-bert-moe": "t5", "gemma-4": "gemma4"}
"""Files whose ``tokenizer.ggml.model`` is no BPE hf_bpe runs, by the model they name."""

LACKING_BYTES = {"falcon": bytes([0x03, 0x04, 0x05, 0x0B, 0x11, 0x13, 0x14, 0x15, 0x16, 0x17, 0x19, 0x1C, 0x1D, 0x1E,
                                    0xF2]),
                 "refact": b"\xf1", "starcoder": b"\xf1"}
"""Files whose vocabulary lacks single-byte tokens for bytes UTF-8 text uses, which llama.cpp drops after
merging (a symbol no merge joins), with those bytes."""

LOADED = tuple(name for name in VOCAB_FILES if name not in REFUSED_MODELS)

def vocab_path(folder: Path, name: str) -> Path:
    return folder / f"ggml-vocab-{name}.gguf"


@functools.cache
def _read(path: Path) -> conversion.gguf.GGUFVocab:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingBytesWarning)  # test_vocabularies_lacking_bytes_... checks it
        return conversion.gguf.read(path)


def read_vocab(folder: Path, name: str) -> conversion.gguf.GGUFVocab:
    """The file's vocabulary, read once per test run."""
    return _read(vocab_path(folder, name))


def texts_for(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [generated_text(rng) for _ in range(count)]


def _char_holding(byte: int, rng: random.Random) -> str:
    """A random character whose UTF-8 holds ``byte`` (one UTF-8 text uses)."""
    if byte < 0x80:
        return chr(byte)
    if byte < 0xC0:  # a continuation byte: the second byte of U+0080..U+00FF
        return chr(0x80 + (byte & 0x3F))
    if byte < 0xE0:
        return chr(((byte & 0x1F) << 6) | rng.randrange(0x40))
    if byte < 0xF0:
        code_point = ((byte & 0x0F) << 12) | rng.randrange(0x1000)
        return chr(code_point) if code_point >= 0x800 and not 0xD800 <= code_point < 0xE000 else chr(0x800)
    return chr(max(0x10000, ((byte & 0x07) << 18) | rng.randrange(0x40000)))


def _with_missing_bytes(text: str, missing: bytes, seed: int) -> str:
    """``text`` with characters holding the ``missing`` bytes put in at random places, alone, in runs and
    between letters, digits, spaces and punctuation (where merges would join their neighbours)."""
    rng = random.Random(seed)
    parts = []
    for chunk in [text[start:start + 7] for start in range(0, len(text), 7)]:
        parts.append(chunk)
        if rng.random() < 0.4:
            holding = "".join(_char_holding(rng.choice(missing), rng) for _ in range(rng.choice((1, 1, 2, 3))))
            parts.append(rng.choice(("", " ", "a", "é", "1", "!", "\n")) + holding + rng.choice(("", "b", " x", "é", ".")))
    return "".join(parts)


# ------------------------------------------------------------------------- llama.cpp's own tests


@pytest.mark.parametrize("name", VOCAB_FILES)
def test_llama_cpp_vocabulary_tests_pass_or_the_file_is_refused_naming_its_model(
    llama_cpp_vocab_files: Path, name: str
) -> None:
    path = vocab_path(llama_cpp_vocab_files, name)
    if name in REFUSED_MODELS:
        with pytest.raises(ConversionError) as refused:
            conversion.gguf.read(path)
        model = REFUSED_MODELS[name]
        assert f"tokenizer.ggml.model is {model!r}, {conversion.gguf.REFUSED_MODELS[model]}" in str(refused.value)
        return
    vocab = read_vocab(llama_cpp_vocab_files, name)
    cases = oracles.llama_cpp_vocab_cases(path)
    wrong = [(text, expected, vocab.encode(text)) for text, expected in cases if vocab.encode(text) != expected]
    assert not wrong, f"{name}: {len(wrong)} of {len(cases)} differ, first {wrong[0]}"
    if not cases:  # no expected ids: the file loads and every text survives encode and decode
        for text in texts_for(50):
            if vocab.model.kind == "sentencepiece":
                text = text.replace("\u2581", "_")  # SentencePiece decodes its ▁ as a space
            assert vocab.model.decode(vocab.encode(text)) == text


@pytest.mark.parametrize("name", sorted(LACKING_BYTES))
def test_vocabularies_lacking_bytes_drop_them_after_merging_as_llama_cpp_does(
    llama_cpp_vocab_files: Path, tmp_path: Path, name: str
) -> None:
    """Falcon lacks control bytes and F2, StarCoder and Refact F1: llama.cpp keeps such a byte as a symbol
    no merge joins and drops it after merging. The file loads with a warning naming the bytes; raw bytes
    needing one are refused naming it; each id starts where its bytes do. llama.cpp itself, when at hand,
    gives the ids of generated text holding the bytes."""
    path = vocab_path(llama_cpp_vocab_files, name)
    missing = LACKING_BYTES[name]
    shown = ", ".join(f"0x{byte:02X}" for byte in missing[:12])
    with pytest.warns(MissingBytesWarning, match=f"lacks the byte symbols {shown}.*drops it after merging"):
        vocab = conversion.gguf.read(path)
    model = vocab.model
    assert hf_bpe.model.missing_bytes_rule(model) == "after merging"
    assert {byte for byte in hf_bpe.model.missing_bytes(model) if byte not in hf_bpe.model.NEVER_IN_UTF8} == set(missing)
    text = _with_missing_bytes(" ".join(texts_for(scaled(60, 10), seed=3)), missing, seed=4)
    ids, offsets = model.encode_with_offsets(text)
    assert ids == model.encode_ordinary(text)
    data = text.encode("utf-8")
    char_at = [index for index, char in enumerate(text) for _ in char.encode("utf-8")]  # byte -> character
    at = 0
    for token, offset in zip(ids, offsets):  # each id's bytes come next, past the missing ones, where it starts
        while data[at] in missing:
            at += 1
        token_bytes = model.decode_single_token_bytes(token)
        assert (data[at:at + len(token_bytes)], char_at[at]) == (token_bytes, offset)
        at += len(token_bytes)
    assert all(byte in missing for byte in data[at:])
    holding = _char_holding(missing[0], random.Random(0)).encode("utf-8")
    with pytest.raises(ValueError, match=f"the byte 0x{missing[0]:02X}, which the vocabulary lacks.*llama.cpp"):
        model._core.encode_single_piece(b"a" + holding, True)  # raw bytes (tiktoken's encode_bytes)
    if LLAMA_CPP is not None:
        original = shutil.copy(path, tmp_path / "original.gguf")
        assert LLAMA_CPP(Path(original), text) == vocab.encode(text)


@pytest.mark.parametrize("name", [name for name in LOADED if name not in ("aquila", "baichuan", "gpt-neox")])
def test_the_model_alone_gives_llama_cpps_ids_where_no_token_is_cut_out(llama_cpp_vocab_files: Path, name: str) -> None:
    """``load(path)`` is the tokenizer: ``GGUFVocab.encode`` only adds llama.cpp's cutting of user-defined
    tokens (and the dummy prefix it puts after them)."""
    vocab = read_vocab(llama_cpp_vocab_files, name)
    checked = 0
    for text, expected in oracles.llama_cpp_vocab_cases(vocab_path(llama_cpp_vocab_files, name)):
        if not any(token in text for token in vocab.user_defined):
            assert vocab.model.encode_ordinary(text) == expected, text
            checked += 1
    assert checked >= 30


def test_llama_cpp_settings_are_read(llama_cpp_vocab_files: Path) -> None:
    llama3 = read_vocab(llama_cpp_vocab_files, "llama-bpe")
    assert (llama3.tokenizer_model, llama3.pre, llama3.bos_id, llama3.eos_id) == ("gpt2", "llama-bpe", 128000, 128001)
    assert llama3.add_bos and not llama3.add_eos  # llama.cpp's default for llama-bpe
    assert _rules.ignore_merges(llama3.model) and llama3.model.pattern == PRE_NAMES["llama-bpe"].steps
    assert llama3.encode("Hi", add_special=True) == [128000, *llama3.encode("Hi")]
    assert llama3.encode("<|eot_id|>", parse_special=True) == [128009]
    assert llama3.encode("<|eot_id|>") == llama3.model.encode_ordinary("<|eot_id|>")
    spm = read_vocab(llama_cpp_vocab_files, "llama-spm")
    assert (spm.tokenizer_model, spm.model.kind, spm.bos_id, spm.add_bos) == ("llama", "sentencepiece", 1, True)
    assert spm.encode("Hi", add_special=True, parse_special=True) == [1, *spm.encode("Hi")]
    deepseek = read_vocab(llama_cpp_vocab_files, "deepseek-coder")
    assert "<|EOT|>" in deepseek.user_defined  # cut out of any text, as llama.cpp does
    assert deepseek.encode("a<|EOT|>b") == [*deepseek.encode("a"), deepseek.model.special_tokens["<|EOT|>"],
                                            *deepseek.encode("b")]
    phi3 = read_vocab(llama_cpp_vocab_files, "phi-3")  # llama.cpp strips spaces after Phi-3's special tokens
    assert phi3.encode("<|user|>  hi", parse_special=True) == [32010, *phi3.encode("hi")]


# ------------------------------------------------------------------------------------ round trips


@pytest.mark.slow
@pytest.mark.parametrize("name", LOADED)
def test_save_round_trips_every_vocabulary(llama_cpp_vocab_files: Path, tmp_path: Path, name: str) -> None:
    vocab = read_vocab(llama_cpp_vocab_files, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingBytesWarning)  # as when the original was read
        saved = conversion.gguf.read(conversion.gguf.save(vocab, tmp_path / f"{name}.gguf"))
    settings = ("tokenizer_model", "pre", "bos_id", "eos_id", "unknown_id", "padding_id", "add_bos", "add_eos",
                "user_defined")
    assert [getattr(saved, key) for key in settings] == [getattr(vocab, key) for key in settings] or (
        vocab.pre is None and saved.pre == "default")  # llama.cpp reads a missing pre as "default"
    texts = [*texts_for(scaled(200, 20)), *(text for text, _ in oracles.llama_cpp_vocab_cases(vocab_path(llama_cpp_vocab_files, name))),
             *(_with_missing_bytes(text, LACKING_BYTES[name], seed) for seed, text in enumerate(texts_for(20, 1))
               if name in LACKING_BYTES)]
    for text in texts:
        assert saved.encode(text) == vocab.encode(text), text
        assert saved.encode(text, add_special=True, parse_special=True) == \
            vocab.encode(text, add_special=True, parse_special=True), text


def test_save_writes_gpt2_exactly(tmp_path: Path) -> None:
    model = hf_bpe.get_encoding("gpt2")
    vocab = conversion.gguf.read(conversion.gguf.save(model, tmp_path / "gpt2.gguf", eos_token="<|endoftext|>"))
    assert (vocab.pre, vocab.eos_id, vocab.add_bos, vocab.model.special_tokens) == ("gpt-2", 50256, False,
                                                                                     model.special_tokens)
    for text in varied_texts(scaled(500, 50)):
        assert vocab.encode(text) == model.encode_ordinary(text), text


def test_a_refusal_shows_where_the_two_splits_part() -> None:
    """A long probe text whose first pieces agree is shown from two pieces before the first that
    differs, so the two lists of the message differ."""
    from conversion.gguf import _difference

    same = ["¨©", "ª", "«¬", "²", "³", "´µ", "¶·¸", "¹"]
    text = "".join([*same, "abcd"])
    message = _difference(text, [*same, "ab", "cd"], [*same, "abc", "d"])
    assert message == "'¶·¸¹abcd' (from character 9) into [..., '¶·¸', '¹', 'ab', 'cd'] rather than " \
                      "[..., '¶·¸', '¹', 'abc', 'd']"
    assert _difference("x'ſt", ["x", "'ſ", "t"], ["x", "'ſt"]) == "\"x'ſt\" into ['x', \"'ſ\", 't'] rather than ['x', \"'ſt\"]"


def test_save_refuses_cl100k_whose_split_no_pre_tokenizer_runs_and_writes_it_when_lossy(tmp_path: Path) -> None:
    """The closest is Llama 3's, as llama.cpp spells it: cl100k also cuts whitespace at the end of the text
    whole (``\\s++$``), and its ``(?i:...)`` contractions take ``'ſ`` (long s folds to s), llama.cpp's
    ``'[sS]`` do not. Wherever the two splits agree, the ids do."""
    model = hf_bpe.get_encoding("cl100k_base")
    path = tmp_path / "cl100k.gguf"
    with pytest.raises(ConversionError, match="the closest, 'llama-bpe', cuts .* probe text.*ſ"):
        conversion.gguf.save(model, path)
    with pytest.warns(LossyConversionWarning, match="ſ"):
        conversion.gguf.save(model, path, lossy=True)
    vocab = conversion.gguf.read(path)
    assert vocab.pre == "llama-bpe"
    assert pieces(vocab.model, "x'ſt \n ") == ["x", "'ſt", " \n", " "] and pieces(model, "x'ſt \n ") == [
        "x", "'ſ", "t", " \n "]
    agreeing = 0
    for text in varied_texts(scaled(500, 50)):
        if pieces(vocab.model, text) == pieces(model, text):
            assert vocab.encode(text) == model.encode_ordinary(text), text
            agreeing += 1
    assert agreeing >= scaled(500, 50) * 0.9


def test_save_refuses_what_llama_cpp_cannot_run(tmp_path: Path) -> None:
    ranks = {bytes([byte]): byte for byte in range(256)}
    with pytest.raises(ConversionError, match=r"no llama.cpp pre-tokenizer splits as the pattern '\\\\w\+\|\\\\s\+'"):
        conversion.gguf.save(hf_bpe.BPE(ranks, r"\w+|\s+"), tmp_path / "words.gguf")
    with pytest.raises(ConversionError, match="pre 'kimi-k2' is not a llama.cpp pre-tokenizer hf_bpe reproduces"):
        conversion.gguf.save(hf_bpe.BPE(ranks, "gpt2"), tmp_path / "gpt2.gguf", pre="kimi-k2")
    from hf_bpe.sentencepiece_bpe import BYTE, CONTROL, UNKNOWN, USER_DEFINED, Piece, SentencePieceSpec

    pieces = (Piece("<unk>", 0, UNKNOWN), Piece("<s>", 0, CONTROL), Piece("<u>", 0, USER_DEFINED),
              Piece("▁", -1), Piece("a", -2))
    with pytest.raises(ConversionError, match="byte fallback.*user-defined pieces \\['<u>'\\]"):
        conversion.gguf.save(hf_bpe.BPE.from_sentencepiece(SentencePieceSpec(pieces)), tmp_path / "sp.gguf")
    byte_pieces = tuple(Piece(f"<0x{byte:02X}>", 0, BYTE) for byte in range(256))
    metaspace = SentencePieceSpec((*pieces[:2], *byte_pieces, *pieces[3:]), byte_fallback=True, metaspace="first")
    with pytest.raises(ConversionError, match="Metaspace pre-tokenizer \\(prepend_scheme 'first'\\), which a GGUF"):
        conversion.gguf.save(hf_bpe.BPE.from_sentencepiece(metaspace), tmp_path / "metaspace.gguf")
    assert not (tmp_path / "metaspace.gguf").exists()


def _lacking_f1(rule: str, crossing: bool = True) -> hf_bpe.BPE:
    """A vocabulary without the byte F1; with ``crossing``, a merge (``80`` + ``80``) that can join
    the bytes on either side of it (``⁀`` ends in 80, ``U+40000`` is F1 80 80 80)."""
    vocab = {bytes([byte]): byte for byte in range(256) if byte != 0xF1} | {b"ab": 256, b"\x80\x80": 257}
    merges = [(b"a", b"b"), (b"\x80", b"\x80")] if crossing else [(b"a", b"b")]
    return hf_bpe.BPE.from_merges(vocab, merges, "gpt2", drop_missing_bytes=rule)  # type: ignore[arg-type]


MISSING_F1_TEXTS = ["\u2040\U00040000", "ab\U00040000ab", " \U00047fff\u2040\U00040080!", "\U00040000" * 3,
                    "x \u2040\U00041040\u2040 y"]


def test_every_writer_keeps_the_rule_for_missing_bytes_or_refuses_it(tmp_path: Path) -> None:
    """GGUF files hold dropping after merging (llama.cpp), tokenizer.json files dropping before (tokenizers),
    each the other rule only where no listed merge can cross a missing byte; tiktoken and GPT-2 files
    neither; model files both. llama.cpp and tokenizers, when at hand, are the oracles."""
    from tokenizers import Tokenizer

    import conversion.gpt2
    import conversion.hf
    import conversion.tiktoken

    after, before = _lacking_f1("after merging"), _lacking_f1("before merging")
    assert after.encode_ordinary("\u2040\U00040000") != before.encode_ordinary("\u2040\U00040000")
    path = conversion.gguf.save(after, tmp_path / "after.gguf")
    with pytest.warns(MissingBytesWarning, match="0xF1"):
        read = conversion.gguf.read(path)
    assert hf_bpe.model.missing_bytes_rule(read.model) == "after merging"
    for text in MISSING_F1_TEXTS:
        assert read.encode(text) == after.encode_ordinary(text), text
        if LLAMA_CPP is not None:
            assert LLAMA_CPP(path, text) == after.encode_ordinary(text), text
    with pytest.raises(ConversionError, match=r"drops it before merging: the merge b'\\x80' \+ b'\\x80'"):
        conversion.gguf.save(before, tmp_path / "before.gguf")
    with pytest.warns(LossyConversionWarning, match="0xF1"):
        conversion.gguf.save(before, tmp_path / "before.gguf", lossy=True)
    with pytest.raises(ConversionError, match="tokenizers drops a byte the vocabulary lacks before merging"):
        conversion.hf.save(after, tmp_path / "after.json")
    for rule in ("before merging", "after merging"):  # no merge crosses F1: both files hold either rule
        exact = _lacking_f1(rule, crossing=False)
        tokenizer = Tokenizer.from_file(str(conversion.hf.save(exact, tmp_path / "exact.json")))
        gguf_path = conversion.gguf.save(exact, tmp_path / "exact.gguf")
        with pytest.warns(MissingBytesWarning):
            gguf = conversion.gguf.read(gguf_path)
        for text in MISSING_F1_TEXTS:
            assert tokenizer.encode(text, add_special_tokens=False).ids == exact.encode_ordinary(text), text
            assert gguf.encode(text) == exact.encode_ordinary(text), text
            if LLAMA_CPP is not None:
                assert LLAMA_CPP(gguf_path, text) == exact.encode_ordinary(text), text
    for model in (after, before):
        with pytest.raises(ConversionError, match="tiktoken file cannot hold .* lacks the single bytes 0xF1"):
            conversion.tiktoken.save(model, tmp_path / "x.tiktoken", lossy=True)
        with pytest.raises(ConversionError, match="GPT-2 files cannot hold .* lacks the single bytes 0xF1"):
            conversion.gpt2.save(model, tmp_path / "gpt2", lossy=True)
        loaded = hf_bpe.BPE.load(model.save(tmp_path / "model.json"))
        assert loaded == model and hf_bpe.model.missing_bytes_rule(loaded) == hf_bpe.model.missing_bytes_rule(model)
        assert json.loads((tmp_path / "model.json").read_text())["version"] == (3 if model is after else 1)
    assert after != before
    vocab = {**after.mergeable_ranks}
    ruled = hf_bpe.model.with_special_token_rules(
        hf_bpe.BPE.from_merges(vocab, after.merges, "gpt2", {"<s>": 300}, drop_missing_bytes="after merging"),
        {"<s>": ["lstrip"]})
    loaded = hf_bpe.BPE.load(ruled.save(tmp_path / "ruled.json"))  # version 3 holds the rules too
    assert loaded == ruled and hf_bpe.model.special_token_rules(loaded) == {"<s>": {"lstrip"}}


# ----------------------------------------------------------------------------------- corrupt files


def _header(version: int = 3, tensors: int = 0, entries: int = 1) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensors, entries)


def _entry(key: bytes, kind: int, payload: bytes) -> bytes:
    return struct.pack("<Q", len(key)) + key + struct.pack("<I", kind) + payload


MALFORMED = {
    "wrong magic": b"GGUX" + _header()[4:] + b"\0" * 16,
    "empty": b"",
    "version 1": _header(version=1) + b"\0" * 32,
    "big-endian": b"GGUF" + struct.pack(">IQQ", 3, 0, 1) + b"\0" * 32,
    "huge entry count": _header(entries=2**62) + b"\0" * 32,
    "huge key length": _header() + struct.pack("<Q", 2**61) + b"\0" * 32,
    "huge string": _header() + _entry(b"general.name", STRING, struct.pack("<Q", 2**60) + b"abc"),
    "huge string array": _header() + _entry(b"tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, 2**60)),
    "huge float array": _header() + _entry(b"tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", FLOAT32, 2**40)),
    "nested array": _header() + _entry(b"x", ARRAY, struct.pack("<IQ", ARRAY, 1) + b"\0" * 16),
    "unknown type": _header() + _entry(b"x", 99, b"\0" * 8),
    "empty key": _header() + _entry(b"", UINT32, b"\0" * 4),
    "repeated key": _header(entries=2) + _entry(b"x", UINT32, b"\0" * 4) * 2,
    "key not UTF-8": _header() + _entry(b"\xff\xfe", UINT32, b"\0" * 4),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files_raise_tokenizer_file_error_naming_the_file(tmp_path: Path, case: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(MALFORMED[case])
    with pytest.raises(TokenizerFileError, match="bad.gguf"):
        conversion.gguf.read(path)


def test_every_truncation_of_a_file_is_refused(tmp_path: Path) -> None:
    ranks = {bytes([byte]): byte for byte in range(256)} | {b"ab": 256}
    data = conversion.gguf.save(hf_bpe.BPE(ranks, "gpt2", {"<|end|>": 257}), tmp_path / "whole.gguf").read_bytes()
    assert conversion.gguf.read(tmp_path / "whole.gguf").encode("abc") == [256, 99]
    inside_metadata = len(data) - _gguf_file.ALIGNMENT  # the padding after the metadata is shorter
    cut = tmp_path / "cut.gguf"
    for size in sorted({*range(64), *range(64, inside_metadata, 97), inside_metadata - 1}):
        cut.write_bytes(data[:size])
        with pytest.raises(TokenizerFileError, match="cut.gguf"):
            conversion.gguf.read(cut)


def test_tokenizer_metadata_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    def write(*entries: tuple[str, Value]) -> Path:
        return _gguf_file.write(tmp_path / "shape.gguf", entries)

    tokens = ("tokenizer.ggml.tokens", Value(ARRAY, [b"a", b"b"], STRING))
    model = ("tokenizer.ggml.model", Value(STRING, b"llama"))
    for entries, problem in [
        ((tokens,), "no tokenizer"),
        ((model,), "no tokens"),
        ((model, ("tokenizer.ggml.tokens", Value(ARRAY, [1, 2], INT32))), "array of STRING"),
        ((model, tokens, ("tokenizer.ggml.token_type", Value(ARRAY, [1], INT32))), "1 entries for 2 tokens"),
        ((model, ("tokenizer.ggml.tokens", Value(ARRAY, [b"a", b"a"], STRING))), "tokens 0 and 1 are both 'a'"),
        ((model, ("tokenizer.ggml.tokens", Value(ARRAY, [b"\xff"], STRING))), "token 0 is not UTF-8"),
        ((("tokenizer.ggml.model", Value(UINT32, 1)), tokens), "not a string"),
        ((("tokenizer.ggml.model", Value(STRING, b"gpt2")), tokens), "needs tokenizer.ggml.merges"),
    ]:
        with pytest.raises(TokenizerFileError, match=problem):
            conversion.gguf.read(write(*entries))
    with pytest.raises(ConversionError, match="tokenizer.ggml.pre is 'kimi-k2', a split hf_bpe does not reproduce"):
        conversion.gguf.read(write(("tokenizer.ggml.model", Value(STRING, b"gpt2")),
                                   ("tokenizer.ggml.pre", Value(STRING, b"kimi-k2")), tokens))


def test_a_model_file_is_read_up_to_its_metadata_only(tmp_path: Path) -> None:
    """A 4 GiB file (sparse: its tensor data is never written, and never read) costs its header only."""
    path = conversion.gguf.save(hf_bpe.get_encoding("gpt2"), tmp_path / "model.gguf")
    data = bytearray(path.read_bytes())
    data[8:16] = struct.pack("<Q", 3)  # it now claims three tensors, whose descriptions are never read
    path.write_bytes(bytes(data))
    os.truncate(path, 4 * 2**30)
    assert conversion.gguf.read(path).encode("hello world") == [31373, 995]


# ----------------------------------------------------------------------------------- the command line


def run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    status = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("name", ["gpt-2", "deepseek-coder", "llama-spm"])
def test_cli_inspects_gguf_and_converts_it_to_a_tokenizer_json_that_tokenizers_runs_alike(
    capsys: pytest.CaptureFixture[str], llama_cpp_vocab_files: Path, tmp_path: Path, name: str
) -> None:
    from tokenizers import Tokenizer

    path = vocab_path(llama_cpp_vocab_files, name)
    assert detect_format(path) == "gguf"
    status, out, _ = run(capsys, "inspect", path, "--json", "--text", "hello world")
    described = json.loads(out)
    assert status == 0 and described["format"] == "gguf"
    assert described["sample_ids"] == read_vocab(llama_cpp_vocab_files, name).encode("hello world")
    status, out, _ = run(capsys, "convert", path, "--to", "hf", tmp_path / "tokenizer.json")
    assert status == 0 and "(gguf) ->" in out
    tokenizer = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text, expected in oracles.llama_cpp_vocab_cases(path):
        assert tokenizer.encode(text, add_special_tokens=False).ids == expected, text


def test_cli_converts_to_gguf(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, _ = run(capsys, "convert", "gpt2", "--to", "gguf", tmp_path / "gpt2.gguf")
    assert status == 0 and "(gguf)" in out
    assert conversion.gguf.read(tmp_path / "gpt2.gguf").encode("hello world") == [31373, 995]
    status, _, err = run(capsys, "convert", "cl100k_base", "--to", "gguf", tmp_path / "cl100k.gguf")
    assert status == 1 and "--lossy" in err


# ------------------------------------------------------------------- rank files known by their content


def _llama_encoding(files: Path, version: str) -> Any:
    module = oracles.import_package_module(files, f"llama_models.{version}.tokenizer")
    return module.Tokenizer(files / "llama_models" / version / "tokenizer.model").model


@pytest.mark.parametrize("version", ["llama3", "llama4"])
def test_metas_rank_files_named_tokenizer_model_load_as_metas_tokenizer_encodes(
    llama_models_files: Path, version: str
) -> None:
    pytest.importorskip("tiktoken", reason="Meta's tokenizer code builds a tiktoken encoding; pip install tiktoken")
    path = llama_models_files / "llama_models" / version / "tokenizer.model"
    assert detect_format(path) == "tiktoken"
    ours = hf_bpe.load(path)
    theirs = _llama_encoding(llama_models_files, version)
    assert ours.special_tokens == theirs._special_tokens and ours.n_vocab == theirs.n_vocab
    assert ours.pattern == (patterns.LLAMA3 if version == "llama3" else patterns.O200K) == theirs._pat_str
    for text in [*varied_texts(scaled(300, 30)), "<|begin_of_text|>Hi<|eot_id|><|eot|>"]:
        assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all"), text


def test_qwens_rank_file_loads_as_qwens_tokenizer_encodes(dashscope_files: Path) -> None:
    """Qwen's tokenizer normalizes text to NFC first; the rank file's model is its tiktoken encoding."""
    pytest.importorskip("tiktoken", reason="Qwen's tokenizer code builds a tiktoken encoding; pip install tiktoken")
    path = dashscope_files / "dashscope" / "resources" / "qwen.tiktoken"
    ours = hf_bpe.load(path)
    module = oracles.import_package_module(dashscope_files, "dashscope.tokenizers.qwen_tokenizer")
    theirs = module.QwenTokenizer(str(path))._tokenizer
    assert ours.pattern == patterns.QWEN2 == theirs._pat_str and ours.special_tokens == theirs._special_tokens
    for text in [*varied_texts(scaled(300, 30)), "<|im_start|>user<|im_end|>"]:
        assert ours.encode(text, allowed_special="all") == theirs.encode(text, allowed_special="all"), text


def test_known_rank_files_are_the_packaged_ones(llama_models_files: Path, dashscope_files: Path) -> None:
    for known, path in [(LLAMA3, llama_models_files / "llama_models/llama3/tokenizer.model"),
                        (LLAMA4, llama_models_files / "llama_models/llama4/tokenizer.model"),
                        (QWEN, dashscope_files / "dashscope/resources/qwen.tiktoken")]:
        assert hf_bpe._known_rank_files.identify(path.read_bytes()) is known
        assert len(path.read_text().splitlines()) == known.ranks


def test_cli_converts_metas_tokenizer_model_and_takes_pattern_llama3(
    capsys: pytest.CaptureFixture[str], llama_models_files: Path, tmp_path: Path
) -> None:
    from tokenizers import Tokenizer

    pytest.importorskip("tiktoken", reason="Meta's tokenizer code builds a tiktoken encoding; pip install tiktoken")
    path = llama_models_files / "llama_models" / "llama3" / "tokenizer.model"
    status, out, _ = run(capsys, "convert", path, "--to", "hf", tmp_path / "tokenizer.json")
    assert status == 0 and "(tiktoken) ->" in out
    theirs = _llama_encoding(llama_models_files, "llama3")
    tokenizer = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in varied_texts(scaled(100, 20), seed=1):
        assert tokenizer.encode(text, add_special_tokens=False).ids == theirs.encode(text, disallowed_special=())
    copy = tmp_path / "tokenizer.model"  # a rank file hf_bpe does not know: one line less
    copy.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(SourceError, match="llama3"):
        hf_bpe.load(copy)
    status, _, _ = run(capsys, "convert", copy, "--to", "hf_bpe", tmp_path / "copy.json", "--pattern", "llama3",
                       "--special", "<|begin_of_text|>=128000")
    assert status == 0
    loaded = hf_bpe.load(tmp_path / "copy.json")
    assert loaded.pattern == patterns.LLAMA3 and loaded.special_tokens == {"<|begin_of_text|>": 128000}


# ------------------------------------------------------------------------------- llama.cpp itself


LLAMA_CPP = oracles.llama_cpp_tokenizer()
needs_llama_cpp = pytest.mark.skipif(
    LLAMA_CPP is None, reason="llama.cpp is not at hand: set LLAMA_CPP_TEST_TOKENIZER to its test-tokenizer-0 binary "
    "(cmake --build . --target test-tokenizer-0) or pip install llama-cpp-python")


def _document(seed: int) -> str:
    rng = random.Random(seed)
    return "".join(generated_text(rng) for _ in range(scaled(400, 40)))


@pytest.mark.slow
@needs_llama_cpp
@pytest.mark.parametrize("name", LOADED)
def test_llama_cpp_tokenizes_generated_text_and_our_saved_files_as_we_do(
    llama_cpp_vocab_files: Path, tmp_path: Path, name: str
) -> None:
    assert LLAMA_CPP is not None
    vocab = read_vocab(llama_cpp_vocab_files, name)
    text = _document(VOCAB_FILES.index(name))
    if name in LACKING_BYTES:  # with the bytes the vocabulary lacks, which llama.cpp drops after merging
        text = _with_missing_bytes(text, LACKING_BYTES[name], VOCAB_FILES.index(name))
    original = shutil.copy(vocab_path(llama_cpp_vocab_files, name), tmp_path / "original.gguf")
    assert LLAMA_CPP(Path(original), text) == vocab.encode(text)
    saved = conversion.gguf.save(vocab, tmp_path / "saved.gguf")
    assert LLAMA_CPP(saved, text) == vocab.encode(text)


@pytest.mark.slow
@needs_llama_cpp
@pytest.mark.parametrize("pre", sorted(PRE_NAMES))
def test_llama_cpp_splits_as_each_pre_tokenizer_hf_bpe_reads(tmp_path: Path, pre: str) -> None:
    """GPT-2's vocabulary under every ``pre`` name: llama.cpp and hf_bpe cut and merge generated text alike."""
    gpt2 = hf_bpe.get_encoding("gpt2")
    model = hf_bpe.BPE.from_merges(gpt2.mergeable_ranks, gpt2.merges, PRE_NAMES[pre].steps, gpt2.special_tokens,
                                   ignore_merges=PRE_NAMES[pre].ignore_merges)
    path = conversion.gguf.save(model, tmp_path / f"{pre}.gguf", pre=pre)
    text = _document(len(pre))
    assert LLAMA_CPP is not None and LLAMA_CPP(path, text) == conversion.gguf.read(path).encode(text)


@pytest.mark.slow
@needs_llama_cpp
def test_llama_cpp_tokenizes_our_gpt2_and_cl100k_files_as_the_models_do(tmp_path: Path) -> None:
    text = _document(7)
    gpt2 = hf_bpe.get_encoding("gpt2")
    assert LLAMA_CPP is not None
    assert LLAMA_CPP(conversion.gguf.save(gpt2, tmp_path / "gpt2.gguf"), text) == gpt2.encode_ordinary(text)
    cl100k = hf_bpe.get_encoding("cl100k_base")
    with pytest.warns(LossyConversionWarning):
        path = conversion.gguf.save(cl100k, tmp_path / "cl100k.gguf", lossy=True)
    vocab = conversion.gguf.read(path)
    rng = random.Random(8)  # fragments the two splits cut alike (see the cl100k test above)
    fragments = [fragment for fragment in (generated_text(rng) for _ in range(scaled(600, 60)))
                 if pieces(vocab.model, fragment + "x") == pieces(cl100k, fragment + "x")]
    text = "x".join(fragments) + "x"
    assert pieces(vocab.model, text) == pieces(cl100k, text)
    assert LLAMA_CPP(path, text) == vocab.encode(text) == cl100k.encode_ordinary(text)
