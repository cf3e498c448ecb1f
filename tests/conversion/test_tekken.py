"""Mistral's tekken JSON (``conversion.tiktoken.load_tekken`` / ``save_tekken``) against
``mistral_common``'s own ``Tekkenizer``, and tiktoken-file refusals for models its rule cannot hold."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conversion_support import (
    CL100K_SPECIALS,
    PARITY_STRINGS,
    assert_same,
    assert_same_ids,
    cl100k_file,
    mistral_file,
    train_model,
    varied_texts,
)

import conversion.tiktoken
from hf_bpe import BPE
from hf_bpe.errors import ConversionError, TokenizerFileError

tekken_module = pytest.importorskip("mistral_common.tokens.tokenizers.tekken",
                                    reason="mistral-common is the oracle; pip install -e '.[test]'")
Tekkenizer = tekken_module.Tekkenizer

FILES = ["tekken_240718.json", "tekken_240911.json"]


@pytest.fixture(scope="module", params=FILES)
def pair(request: pytest.FixtureRequest) -> tuple[BPE, object]:
    path = mistral_file(request.param)
    return conversion.tiktoken.load_tekken(path), Tekkenizer.from_file(path)


@pytest.mark.slow
def test_tekken_encodes_and_decodes_like_tekkenizer(pair: tuple[BPE, object]) -> None:
    ours, theirs = pair
    texts = list(varied_texts(PARITY_STRINGS))
    their_ids = [theirs.encode(text, bos=False, eos=False) for text in texts]
    assert_same(f"{ours.name} vs Tekkenizer", texts, ours.encode_ordinary_batch(texts), their_ids)
    assert_same(f"{ours.name} decode vs Tekkenizer", texts, [ours.decode(ids) for ids in their_ids],
                [theirs.decode(ids) for ids in their_ids])


def test_special_tokens_take_the_first_ids(pair: tuple[BPE, object]) -> None:
    ours, theirs = pair
    assert ours.special_tokens["<s>"] == theirs.bos_id == 1
    assert ours.special_tokens["</s>"] == theirs.eos_id
    assert len(ours.special_tokens) == theirs.num_special_tokens
    assert ours.special_tokens["<SPECIAL_999>"] == 999
    # Tekkenizer never matches special tokens in text; ours does only when allowed.
    assert ours.encode("[INST] hi", allowed_special="all")[0] == theirs.get_special_token("[INST]")
    assert ours.encode_ordinary("[INST] hi") == theirs.encode("[INST] hi", bos=False, eos=False)


def test_save_round_trips_and_tekkenizer_reads_it(tmp_path: Path) -> None:
    source = mistral_file("tekken_240911.json")
    model = conversion.tiktoken.load_tekken(source)
    path = conversion.tiktoken.save_tekken(model, tmp_path / "tekken.json", version="v3")
    assert conversion.tiktoken.load_tekken(path) == model
    theirs = Tekkenizer.from_file(path)
    texts = list(varied_texts(3_000, seed=4))
    assert_same_ids("saved tekken", texts, model.encode_ordinary, lambda text: theirs.encode(text, False, False))
    original = json.loads(source.read_text(encoding="utf-8"))
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["vocab"] == original["vocab"][: len(written["vocab"])]


def test_models_laid_out_otherwise_are_renumbered_only_when_lossy(tmp_path: Path) -> None:
    model = train_model(varied_texts(500, seed=1), 60, "o200k", ["<|endoftext|>", "<|pad|>"])
    with pytest.raises(ConversionError, match="renumber"):
        conversion.tiktoken.save_tekken(model, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
    path = conversion.tiktoken.save_tekken(model, tmp_path / "t.json", lossy=True)
    theirs = Tekkenizer.from_file(path)
    reloaded = conversion.tiktoken.load_tekken(path)
    assert reloaded.special_tokens == {"<|endoftext|>": 0, "<|pad|>": 1}
    texts = list(varied_texts(2_000, seed=6))
    # Same tokens, ids shifted by the two special tokens now in front.
    assert_same_ids("renumbered", texts, lambda text: [2 + token for token in model.encode_ordinary(text)],
                    lambda text: theirs.encode(text, False, False))


@pytest.mark.parametrize(
    ("mangle", "problem"),
    [
        (lambda doc: "{broken", "not valid JSON"),
        (lambda doc: json.dumps({"vocab": doc["vocab"]}), "not a tekken file"),
        (lambda doc: json.dumps(doc | {"vocab": [dict(doc["vocab"][0], token_bytes="@@@")] + doc["vocab"][1:]}),
         "vocab entry 0 lacks a rank or valid base64"),
        (lambda doc: json.dumps(doc | {"vocab": doc["vocab"][1:]}), "vocab entry 0 has rank 1"),
        (lambda doc: json.dumps(doc | {"vocab": doc["vocab"][:300]}), "needs 130072 vocab entries"),
    ],
)
def test_corrupt_tekken_files_name_file_and_problem(tmp_path: Path, mangle, problem: str) -> None:
    document = json.loads(mistral_file("tekken_240718.json").read_text(encoding="utf-8"))
    path = tmp_path / "broken.json"
    path.write_text(mangle(document), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=problem) as raised:
        conversion.tiktoken.load_tekken(path)
    assert "broken.json" in str(raised.value)


def test_tiktoken_files_of_imported_and_trained_models_read_back_by_tiktoken(tmp_path: Path) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    cl100k = conversion.tiktoken.load(cl100k_file(), pattern="cl100k", special_tokens=CL100K_SPECIALS)
    trained = train_model(varied_texts(2_000, seed=8), 200, "cl100k", ["<|endoftext|>"])
    texts = list(varied_texts(3_000, seed=12))
    for model in (cl100k, trained):
        path = conversion.tiktoken.save(model, tmp_path / f"{model.name}.tiktoken")
        theirs = tiktoken.Encoding(model.name, pat_str=model.pattern, mergeable_ranks=load_tiktoken_bpe(os.fspath(path)),
                                   special_tokens=model.special_tokens)
        assert_same_ids(f"{model.name} as a tiktoken file", texts, model.encode_ordinary, theirs.encode_ordinary)
