"""``BPETokenizer`` with SentencePiece models against `tokenizers` and transformers'
``TokenizersBackend`` on the folder it saves: ``offset_mapping`` (the dummy prefix, spaces as ``▁``,
byte pieces, fused ``<unk>``, ``remove_extra_whitespaces``, ``Metaspace``), and tokens added beyond
the model's pieces with every flag (encode, offsets, decode, save and reload).

Models: Mistral's v1 ``.model`` (Llama 2's layout: byte fallback, the dummy prefix as a ``Prepend``
normalizer), one trained here without byte fallback and with ``remove_extra_whitespaces`` (``<unk>``
for rare characters), and the model of the ``tokenizer.json`` transformers' ``LlamaTokenizer``
writes (``Metaspace`` with ``prepend_scheme="first"``).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conversion_support import mistral_file, training_corpus, varied_texts
from suite import FULL_SIZE, scaled
from textgen import LATIN, WHITESPACE, WORDS, fragment, random_letters
from transformers.tokenization_utils_base import AddedToken

import conversion.hf
import conversion.sentencepiece
import hf_bpe
from hf_bpe import BPETokenizer
from hf_bpe.train_sentencepiece import LLAMA2_OPTIONS

pytest.importorskip("google.protobuf", reason="reading .model files needs protobuf; pip install protobuf")
pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

# Runs in a fresh process where hf_bpe cannot be imported: TokenizersBackend on each saved folder.
PROBE = r"""
import json, sys
sys.modules["hf_bpe"] = None
sys.modules["conversion"] = None
from transformers import AutoTokenizer

results = []
for folder, texts in json.load(open(sys.argv[1], encoding="utf-8")):
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoded = tokenizer(texts, return_offsets_mapping=True)
    pairs = tokenizer(texts[:20], texts[20:40], return_offsets_mapping=True)
    results.append({"class": type(tokenizer).__name__, "input_ids": encoded["input_ids"],
                    "offset_mapping": [[list(span) for span in row] for row in encoded["offset_mapping"]],
                    "pair_ids": pairs["input_ids"],
                    "pair_offsets": [[list(span) for span in row] for row in pairs["offset_mapping"]],
                    "decoded": [tokenizer.decode(ids) for ids in encoded["input_ids"]],
                    "skipped": [tokenizer.decode(ids, skip_special_tokens=True) for ids in encoded["input_ids"]]})
print("RESULT " + json.dumps(results))
"""

ADDED = [AddedToken("<x>"), AddedToken("<|user|>", special=True, normalized=False),
         AddedToken("<l>", lstrip=True, normalized=False), AddedToken("<r>", rstrip=True, normalized=True),
         AddedToken("<w>", single_word=True), AddedToken("<lr>", lstrip=True, rstrip=True, special=True),
         AddedToken("▁hi"), AddedToken("a b", normalized=True), AddedToken("x<x", normalized=False)]
"""Tokens of every kind: normalized or not, special or not, stripping, single words, spelled with a
space or ▁, overlapping one another."""

AROUND = [" ", "  ", "\n", "\t", " \n ", "a", "é", "word", "中", "😀", "\u00a0", "<", "x", "▁", "hi", "b"]


def texts_around(rng: random.Random, tokens: list[str], count: int) -> list[str]:
    """Texts with the ``tokens`` among whitespace, word characters and generated text, at either end
    and side by side."""
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 7)):
            roll = rng.random()
            parts.append(rng.choice(tokens) if roll < 0.35 else rng.choice(AROUND) if roll < 0.7
                         else rng.choice(WHITESPACE) if roll < 0.8 else fragment(rng)[:15])
        out.append("".join(parts))
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, hf_bpe.BPE]:
    from transformers import LlamaTokenizer

    source = tmp_path_factory.mktemp("llama")
    (source / "tokenizer.model").write_bytes(mistral_file("tokenizer.model.v1").read_bytes())
    LlamaTokenizer.from_pretrained(os.fspath(source)).save_pretrained(os.fspath(source / "saved"))
    trained = hf_bpe.train_sentencepiece(training_corpus(), 1_500, show_progress=False, num_threads=1,
                                         **{**LLAMA2_OPTIONS, "byte_fallback": False, "character_coverage": 0.98,
                                            "remove_extra_whitespaces": True})
    return {"mistral": conversion.sentencepiece.load(mistral_file("tokenizer.model.v1")),
            "unk-trimmed": trained,
            "llama-metaspace": conversion.hf.load(source / "saved" / "tokenizer.json")}


def run_probe(cases: list[tuple[str, list[str]]], tmp_path: Path) -> list[dict[str, Any]]:
    (tmp_path / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    done = subprocess.run([sys.executable, os.fspath(tmp_path / "probe.py"), os.fspath(tmp_path / "cases.json")],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path, stdin=subprocess.DEVNULL,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.split("RESULT ", 1)[1])  # type: ignore[no-any-return]


def first_difference(texts: list[str], ours: list[Any], theirs: list[Any]) -> str:
    for text, mine, other in zip(texts, ours, theirs):
        if mine != other:
            return f"{text!r}: {mine} here, {other} in TokenizersBackend"
    return ""


def assert_like_backend(tokenizer: BPETokenizer, folder: Path, texts: list[str], result: dict[str, Any]) -> None:
    """``tokenizer`` and the folder it saved, reloaded with hf_bpe, encode ``texts`` as
    ``TokenizersBackend`` did on that folder (``result``): ids, offsets, pairs, decoding."""
    from transformers import AutoTokenizer

    assert result["class"] == "TokenizersBackend"
    reloaded = AutoTokenizer.from_pretrained(os.fspath(folder))
    assert type(reloaded) is BPETokenizer
    for ours in (tokenizer, reloaded):
        encoded = ours(texts, return_offsets_mapping=True)
        assert encoded["input_ids"] == result["input_ids"], first_difference(texts, encoded["input_ids"],
                                                                            result["input_ids"])
        offsets = [[list(span) for span in row] for row in encoded["offset_mapping"]]
        assert offsets == result["offset_mapping"], first_difference(texts, offsets, result["offset_mapping"])
        pairs = ours(texts[:20], texts[20:40], return_offsets_mapping=True)
        assert pairs["input_ids"] == result["pair_ids"]
        assert [[list(span) for span in row] for row in pairs["offset_mapping"]] == result["pair_offsets"]
        decoded = [ours.decode(ids) for ids in encoded["input_ids"]]
        assert decoded == result["decoded"], first_difference(texts, decoded, result["decoded"])
        skipped = [ours.decode(ids, skip_special_tokens=True) for ids in encoded["input_ids"]]
        assert skipped == result["skipped"], first_difference(texts, skipped, result["skipped"])


@pytest.mark.parametrize("size", [pytest.param(scaled(400, 150), id="ci"),
                                  pytest.param(scaled(3_000, 1_000), id="full", marks=FULL_SIZE)])
def test_offsets_and_added_tokens_are_those_of_tokenizers_backend_on_the_saved_folder(
    models: dict[str, hf_bpe.BPE], size: int, tmp_path: Path
) -> None:
    """Each model plain and with :data:`ADDED`: the folder it saves, loaded without hf_bpe, gives the
    same ids, offsets (single texts and pairs, BOS included) and decoded texts as the tokenizer and as
    the folder loaded with hf_bpe."""
    cases: list[tuple[BPETokenizer, Path, list[str]]] = []
    for index, (name, model) in enumerate(models.items()):
        for added in (False, True):
            tokenizer = BPETokenizer.from_model(model, add_eos_token=True)
            rng = random.Random(index * 2 + added)
            texts = [*varied_texts(size // 2, index), "", " ", "  a  b  ", "\n", "é", "😀x", "<s>a</s>"]
            if added:
                tokenizer.add_tokens(ADDED)
                texts += texts_around(rng, [token.content for token in ADDED] + ["<s>", "</s>"], size)
            folder = tmp_path / f"{name}-{added}"
            tokenizer.save_pretrained(os.fspath(folder))
            file = tokenizers.Tokenizer.from_file(os.fspath(folder / "tokenizer.json"))
            spans = [encoding.offsets for encoding in file.encode_batch(texts)]
            ours = [list(row) for row in tokenizer(texts, return_offsets_mapping=True)["offset_mapping"]]
            assert ours == spans, first_difference(texts, ours, spans)
            cases.append((tokenizer, folder, texts))
    results = run_probe([(os.fspath(folder), texts) for _, folder, texts in cases], tmp_path)
    for (tokenizer, folder, texts), result in zip(cases, results):
        assert_like_backend(tokenizer, folder, texts, result)


def test_split_special_tokens_leaves_special_pieces_to_the_model(models: dict[str, hf_bpe.BPE]) -> None:
    """With ``split_special_tokens=True`` the special tokens are text, as ``encode_special_tokens``
    makes them in `tokenizers`; added tokens that are not special are still cut out."""
    tokenizer = BPETokenizer.from_model(models["mistral"])
    tokenizer.add_tokens(ADDED)
    file = conversion.hf.build_tokenizer(models["mistral"], added_tokens=tokenizer.added_tokens_decoder)
    file.encode_special_tokens = True
    texts = texts_around(random.Random(9), [token.content for token in ADDED] + ["<s>"], scaled(300, 100))
    encoded = tokenizer(texts, split_special_tokens=True, add_special_tokens=False, return_offsets_mapping=True)
    theirs = file.encode_batch(texts, add_special_tokens=False)
    assert encoded["input_ids"] == [encoding.ids for encoding in theirs]
    assert [list(row) for row in encoded["offset_mapping"]] == [encoding.offsets for encoding in theirs]


def test_added_tokens_are_ids_after_the_pieces_and_normalized_ones_match_as_normalized(
    models: dict[str, hf_bpe.BPE],
) -> None:
    """`tokenizers` looks for ``<x>`` (``normalized=True``) as ``▁<x>`` in the normalized text of a
    model with the dummy prefix: after a space or at the start of a stretch, not inside a word."""
    tokenizer = BPETokenizer.from_model(models["mistral"], add_bos_token=False)
    assert tokenizer.add_tokens([AddedToken("<x>"), AddedToken("<y>", normalized=False)]) == 2
    x, y = tokenizer.convert_tokens_to_ids(["<x>", "<y>"])
    assert (x, y) == (models["mistral"].n_vocab, models["mistral"].n_vocab + 1)
    assert tokenizer.encode("<x>") == [x]
    assert tokenizer("a <x>", return_offsets_mapping=True)["offset_mapping"][-1] == (1, 5)
    assert x not in tokenizer.encode("a<x>")
    assert tokenizer.encode("a<y>b") == [*tokenizer.encode("a"), y, *tokenizer.encode("b")]


def test_train_new_from_iterator_retrains_a_sentencepiece_model_with_its_own_settings(
    models: dict[str, hf_bpe.BPE], tmp_path: Path
) -> None:
    """The new model has the pieces ``SentencePieceTrainer`` learns on the same text with the options
    the model was made with (normalizer, byte fallback, special pieces, the .model file's training
    options), plus the new special tokens as control pieces; it keeps a tokenizer.json's Metaspace
    rule, and its saved folder encodes as `tokenizers` does."""
    spm = pytest.importorskip("sentencepiece")
    from hf_bpe.transformers._training import sentencepiece_options

    rng = random.Random(43)  # few characters: Mistral's coverage keeps nearly all of them
    corpus = [" ".join(rng.choice([rng.choice(WORDS), random_letters(rng, LATIN, rng.randint(2, 7))])
                       + rng.choice(["", "", ",", ".", "'s", " 42"]) for _ in range(rng.randint(1, 15)))
              for _ in range(scaled(3_000, 1_000))]
    texts = [*varied_texts(scaled(200, 60), 44), "a <tool> b"]
    for name in ("mistral", "llama-metaspace"):
        model = models[name]
        tokenizer = BPETokenizer.from_model(model)
        new = tokenizer.train_new_from_iterator(iter(corpus), 1_200, new_special_tokens=["<tool>"], num_threads=1)
        assert new.model.kind == "sentencepiece" and new.model.sentencepiece is not None
        spec = model.sentencepiece
        assert spec is not None
        options = sentencepiece_options(spec)
        options["control_symbols"] = [*options["control_symbols"], "<tool>"]
        written = tmp_path / f"{name}.model"
        with written.open("wb") as sink:
            spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=sink, model_type="bpe",
                                           vocab_size=1_200, num_threads=1, minloglevel=2, **options)
        processor = spm.SentencePieceProcessor(model_file=os.fspath(written))
        assert [piece.text for piece in new.model.sentencepiece.pieces] == \
            [processor.id_to_piece(index) for index in range(processor.get_piece_size())]
        assert new.model.sentencepiece.metaspace == spec.metaspace
        assert new.convert_tokens_to_ids("<tool>") == processor.piece_to_id("<tool>")
        assert (new.bos_token, new.eos_token, new.add_bos_token) == (tokenizer.bos_token, tokenizer.eos_token,
                                                                     tokenizer.add_bos_token)
        if spec.metaspace is None:  # SentencePiece's own rule for the dummy prefix
            assert new(texts, split_special_tokens=True)["input_ids"] == \
                [[processor.bos_id(), *ids] for ids in processor.encode(texts)]
        new.save_pretrained(os.fspath(tmp_path / name))
        file = tokenizers.Tokenizer.from_file(os.fspath(tmp_path / name / "tokenizer.json"))
        assert new(texts)["input_ids"] == [encoding.ids for encoding in file.encode_batch(texts)]
