"""``BPETokenizer`` holding SentencePiece BPE models, proven against SentencePiece and transformers.

Models: Mistral's v1 ``.model`` (Llama 2's layout: byte fallback, ``<s>``/``</s>``), one trained
here by ``hf_bpe.train_sentencepiece`` with Llama 2's options, and the model read from the
``tokenizer.json`` transformers' own ``LlamaTokenizer`` writes for Mistral's ``.model``. Each
encodes as ``SentencePieceProcessor`` with ``<s>`` in front (or as ``LlamaTokenizer``, for the
last), decodes as it, and its saved folder loads with ``AutoTokenizer`` with hf_bpe and, in a fresh
process where hf_bpe cannot be imported, without it, to the same ids.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conversion_support import assert_same, mistral_file, training_corpus, varied_texts
from suite import scaled
from textgen import cluster_text
from transformers.tokenization_utils_base import AddedToken

import conversion.hf
import conversion.sentencepiece
import hf_bpe
from hf_bpe import BPE, BPETokenizer
from hf_bpe.errors import ConversionError
from hf_bpe.train_sentencepiece import LLAMA2_OPTIONS

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is the oracle; pip install -e '.[test]'")
pytest.importorskip("google.protobuf", reason="reading .model files needs protobuf; pip install protobuf")
pytest.importorskip("transformers")

# Runs in a fresh process that cannot import hf_bpe; prints the ids of the texts in argv[2].
WITHOUT_HF_BPE = r"""
import importlib.abc, json, sys


class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "hf_bpe" or name.startswith("hf_bpe.") or name == "conversion":
            raise ImportError(f"{name} is blocked here")
        return None


sys.meta_path.insert(0, Blocked())
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
texts = json.load(open(sys.argv[2], encoding="utf-8"))
ids = [tokenizer.encode(text) for text in texts]
print("RESULT " + json.dumps({"class": type(tokenizer).__name__, "ids": ids,
                              "decoded": tokenizer.batch_decode(ids, skip_special_tokens=True),
                              "hf_bpe": any(name.startswith("hf_bpe") for name in sys.modules)}))
"""


def sample(count: int, seed: int) -> list[str]:
    return [text for text in varied_texts(count, seed)]


def assert_folder_loads_everywhere(tokenizer: BPETokenizer, folder: Path, texts: list[str]) -> None:
    """The saved folder: AutoTokenizer with hf_bpe gives BPETokenizer, without it (hf_bpe not
    importable) TokenizersBackend; both encode ``texts`` (BOS included) and decode as ``tokenizer``."""
    from transformers import AutoTokenizer

    tokenizer.save_pretrained(os.fspath(folder))
    expected = [tokenizer.encode(text) for text in texts]
    loaded = AutoTokenizer.from_pretrained(os.fspath(folder))
    assert type(loaded) is BPETokenizer
    assert_same("AutoTokenizer with hf_bpe", texts, [loaded.encode(text) for text in texts], expected)
    inputs = folder.parent / f"{folder.name}-texts.json"
    inputs.write_text(json.dumps(texts), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", WITHOUT_HF_BPE, os.fspath(folder), os.fspath(inputs)],
                          capture_output=True, text=True, timeout=600, cwd=folder.parent, stdin=subprocess.DEVNULL,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["class"] == "TokenizersBackend" and not result["hf_bpe"]
    assert_same("AutoTokenizer without hf_bpe", texts, result["ids"], expected)
    assert_same("AutoTokenizer without hf_bpe: decode", texts, result["decoded"],
                tokenizer.batch_decode(expected, skip_special_tokens=True))


def assert_matches_sentencepiece(what: str, tokenizer: BPETokenizer, processor: Any, texts: list[str]) -> None:
    """With ``<s>`` text left to the model (``split_special_tokens``), ids are SentencePiece's with
    ``<s>`` in front, and they decode as SentencePiece decodes them."""
    ours = tokenizer(texts, split_special_tokens=True)["input_ids"]
    expected = [[processor.bos_id(), *ids] for ids in processor.encode(texts)]
    assert_same(f"{what}: ids", texts, ours, expected)
    assert_same(f"{what}: decode", texts, tokenizer.batch_decode(ours, skip_special_tokens=True),
                [processor.decode(ids) for ids in expected])
    assert [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text, split_special_tokens=True))
            for text in texts[:200]] == [ids[1:] for ids in expected[:200]]


def test_mistral_v1_model_in_bpe_tokenizer_is_sentencepiece_and_loads_everywhere(tmp_path: Path) -> None:
    path = mistral_file("tokenizer.model.v1")
    tokenizer = BPETokenizer.from_model(conversion.sentencepiece.load(path))
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.unk_token) == ("<s>", "</s>", "<unk>")
    assert tokenizer.add_bos_token and not tokenizer.add_eos_token
    assert tokenizer.tokenize("Hello\n") == ["▁Hello", "<0x0A>"]
    processor = spm.SentencePieceProcessor(model_file=os.fspath(path))
    texts = sample(scaled(2_000, 200), 21)
    assert_matches_sentencepiece("mistral v1", tokenizer, processor, texts)
    assert_folder_loads_everywhere(tokenizer, tmp_path / "mistral", texts[: scaled(500, 100)] + ["a<s>b</s>", " "])


def test_a_model_trained_with_llama2_options_is_sentencepiece_and_loads_everywhere(tmp_path: Path) -> None:
    model = hf_bpe.train_sentencepiece(training_corpus(), 1_500, show_progress=False, num_threads=1,
                                       **{**LLAMA2_OPTIONS, "character_coverage": 0.98})
    path = conversion.sentencepiece.save(model, tmp_path / "trained.model")
    processor = spm.SentencePieceProcessor(model_file=os.fspath(path))
    tokenizer = BPETokenizer.from_model(model)
    texts = sample(scaled(1_000, 200), 22)
    assert_matches_sentencepiece("trained", tokenizer, processor, texts)
    assert_folder_loads_everywhere(tokenizer, tmp_path / "trained", texts[: scaled(300, 60)])


def test_the_model_of_llama_tokenizers_file_encodes_as_llama_tokenizer(tmp_path: Path) -> None:
    """transformers' LlamaTokenizer (Metaspace 'first': no ▁ before a text starting with a space, unlike
    SentencePiece) read through its tokenizer.json: the same ids, with its BOS policy."""
    from transformers import LlamaTokenizer

    source = tmp_path / "source"
    source.mkdir()
    (source / "tokenizer.model").write_bytes(mistral_file("tokenizer.model.v1").read_bytes())
    llama = LlamaTokenizer.from_pretrained(os.fspath(source))
    llama.save_pretrained(os.fspath(tmp_path / "llama"))
    adds_bos = llama.encode("") == [llama.bos_token_id]  # its post-processor decides
    tokenizer = BPETokenizer.from_model(conversion.hf.load(tmp_path / "llama" / "tokenizer.json"),
                                        add_bos_token=adds_bos)
    texts = sample(scaled(1_000, 200), 23) + [" leading space", "  two", "a<s> b"]
    assert_same("LlamaTokenizer", texts, [tokenizer.encode(text) for text in texts],
                [llama.encode(text) for text in texts])
    assert_same("LlamaTokenizer decode", texts, [tokenizer.decode(tokenizer.encode(text), skip_special_tokens=True)
                                                 for text in texts],
                [llama.decode(llama.encode(text), skip_special_tokens=True) for text in texts])
    assert_folder_loads_everywhere(tokenizer, tmp_path / "saved", texts[: scaled(300, 60)])
    tokenizer.add_tokens([AddedToken("<x>", rstrip=True)])
    assert_folder_loads_everywhere(tokenizer, tmp_path / "added", ["a <x> b", "<x>  b<x>", *texts[:20]])


def test_what_tokenizer_json_cannot_hold_is_refused_at_save(tmp_path: Path) -> None:
    """SentencePiece's default nmt_nfkc map has no exact tokenizer.json: the save refuses by name and
    leaves no folder; so do added tokens whose ids tokenizer.json cannot give them."""
    mistral = BPETokenizer.from_model(conversion.sentencepiece.load(mistral_file("tokenizer.model.v1")))
    mistral.add_tokens(["<extra>"])
    mistral._added_tokens_decoder = {**mistral._added_tokens_decoder, 32005: AddedToken("<gap>")}
    with pytest.raises(ConversionError, match=r"added token '<gap>' has id 32005, but tokenizer.json would give it id 32001"):
        mistral.save_pretrained(os.fspath(tmp_path / "added"))
    assert not (tmp_path / "added").exists()
    from conversion_support import shared

    botchan = BPETokenizer.from_model(conversion.sentencepiece.load(shared("sentencepiece", "botchan_en_bpe_1000.model")))
    with pytest.raises(ConversionError, match="the normalizer 'nmt_nfkc'"):
        botchan.save_pretrained(os.fspath(tmp_path / "nfkc"))


def test_a_tiny_model_round_trips_through_its_folder(tmp_path: Path) -> None:
    from hf_bpe.sentencepiece_bpe import CONTROL, NORMAL, UNKNOWN, Piece, SentencePieceSpec

    spec = SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("<s>", 0, CONTROL), Piece("</s>", 0, CONTROL),
                              Piece("▁", -1, NORMAL), Piece("a", -2, NORMAL), Piece("▁a", -3, NORMAL)))
    tokenizer = BPETokenizer.from_model(BPE.from_sentencepiece(spec), add_eos_token=True)
    assert tokenizer.encode("a aa") == [1, 5, 5, 4, 2]
    assert tokenizer.convert_ids_to_tokens([5, 0]) == ["▁a", "<unk>"]
    tokenizer.save_pretrained(os.fspath(tmp_path))
    loaded = BPETokenizer.from_pretrained(os.fspath(tmp_path))
    assert loaded.model == tokenizer.model and loaded.encode("a aa") == [1, 5, 5, 4, 2]
    written = conversion.hf.build_tokenizer(loaded.model, add_bos_token=True, bos_token="<s>")
    assert loaded("a aa", return_offsets_mapping=True)["offset_mapping"][:-1] == written.encode("a aa").offsets


def test_a_model_read_from_a_file_with_precompiled_loads_everywhere(tmp_path: Path) -> None:
    """A .model SentencePiece trains with its default nmt_nfkc rule, converted by transformers'
    build_tokenizer_from_spm_proto (Precompiled, applied per grapheme cluster): the folder BPETokenizer
    saves loads with and without hf_bpe to tokenizers' ids."""
    from tokenizers import Tokenizer
    from transformers.convert_slow_tokenizer import SpmConverter

    stream = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(training_corpus()), model_writer=stream, model_type="bpe",
                                   vocab_size=1_500, character_coverage=0.98, hard_vocab_limit=False, minloglevel=2,
                                   num_threads=1, byte_fallback=True)
    (tmp_path / "trained.model").write_bytes(stream.getvalue())
    proto = conversion.sentencepiece.read_proto(tmp_path / "trained.model")
    written = SpmConverter.build_tokenizer_from_spm_proto(proto=proto, vocab={piece.piece: index for index, piece
                                                                              in enumerate(proto.pieces)})
    written.add_special_tokens([AddedToken(piece.piece, special=True, normalized=False)
                                for piece in proto.pieces if piece.type in (2, 3)])
    written.save(os.fspath(tmp_path / "tokenizer.json"))
    tokenizer = BPETokenizer.from_model(conversion.hf.load(tmp_path / "tokenizer.json"))
    rng = random.Random(24)
    texts = sample(scaled(300, 60), 24) + [cluster_text(rng) for _ in range(scaled(300, 60))]
    theirs = Tokenizer.from_file(os.fspath(tmp_path / "tokenizer.json"))
    assert_same("tokenizers", texts, [tokenizer.encode(text, add_special_tokens=False) for text in texts],
                [encoding.ids for encoding in theirs.encode_batch(texts, add_special_tokens=False)])
    assert_folder_loads_everywhere(tokenizer, tmp_path / "saved", texts)
