"""SuperBPE training, ``hf_bpe.train(..., superword_transition=T)`` (``hf_bpe/_train_superbpe.py``): it learns
the naive reference's tokens and merges list (``tests/support/naive_superbpe.py``), encodes every text as the
reference does, and the folder it saves encodes alike in ``tokenizers``: on generated text full of ties and
varied text (numbers in many systems, whitespace of every kind, special tokens), files and documents, and
the shared corpora."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_bpe import regex_only_code_points
from naive_superbpe import naive_superbpe_train, superbpe_encode, within_limits
from suite import FULL_SIZE, SHARED_DATA, require_shared, scaled

import hf_bpe
from hf_bpe import patterns

PATTERNS = [patterns.GPT2, patterns.CL100K, patterns.O200K]
SPECIAL_TOKENS = [[], ["<|endoftext|>"], ["<|endoftext|>", "<|im_start|>"]]


def clean(documents: list[str]) -> list[str]:
    excluded = regex_only_code_points()
    return ["".join(char for char in document if ord(char) not in excluded) for document in documents]


def train_both(documents: list[str], vocab_size: int, transition: int, pattern: str, special_tokens: list[str],
               check: list[str], *, encode_documents: bool = True) -> hf_bpe.BPE:
    """hf_bpe's SuperBPE and the reference on ``documents``: the same tokens in the same order, the same
    merges list, the same tokens for every text of ``check`` and (unless not ``encode_documents``: the
    reference's encoder takes time quadratic in a piece's length, and a piece can be a whole document) of
    ``documents``."""
    expected = naive_superbpe_train(documents, vocab_size, transition, pattern, special_tokens)
    model = hf_bpe.train(documents, vocab_size, pattern=pattern, special_tokens=special_tokens,
                         superword_transition=transition, show_progress=False)
    learned = [model.decode_single_token_bytes(i) for i in range(256, 256 + len(expected.stage_one)
                                                                 + len(expected.stage_two))]
    assert learned == expected.stage_one + expected.stage_two
    assert model.n_vocab == 256 + len(learned) + len(special_tokens)
    assert model.special_tokens == expected.special_tokens
    assert model.merges == expected.merges
    ids = {token: i for i, token in enumerate(learned, 256)} | {bytes([b]): b for b in range(256)}
    ids |= {token.encode(): i for token, i in expected.special_tokens.items()}
    for text in [*(documents if encode_documents else []), *check]:
        want = [ids[token] for token in superbpe_encode(text, expected.merges, special_tokens)]
        assert model.encode(text, allowed_special="all") == want, text
    return model


def assert_tokenizers_encodes_alike(model: hf_bpe.BPE, folder: Path, texts: list[str]) -> None:
    from tokenizers import Tokenizer

    from hf_bpe.transformers import save_tokenizer_folder

    save_tokenizer_folder(model, folder)
    document = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    assert document["model"]["ignore_merges"] is False
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for text in texts:
        assert tokenizer.encode(text, add_special_tokens=False).ids == model.encode(text, allowed_special="all"), text


@settings(max_examples=scaled(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), words=st.integers(1, 40), pattern=st.sampled_from(PATTERNS),
       special_tokens=st.sampled_from(SPECIAL_TOKENS), merges=st.integers(0, 60), more=st.integers(0, 60))
def test_equals_the_reference_on_text_full_of_ties(seed: int, words: int, pattern: str, special_tokens: list[str],
                                                   merges: int, more: int) -> None:
    rng = random.Random(seed)
    documents = textgen.tie_documents(rng, words=words, special_tokens=special_tokens, excluded=regex_only_code_points())
    transition = 256 + len(special_tokens) + merges
    others = textgen.tie_documents(rng, words=words, special_tokens=special_tokens, excluded=regex_only_code_points())
    train_both(documents, transition + more, transition, pattern, special_tokens,
               others + clean([textgen.document(rng, 300)]))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_equals_the_reference_on_varied_generated_text(pattern: str, tmp_path: Path) -> None:
    rng = random.Random(f"superbpe {pattern}")
    documents = clean([textgen.document(rng, rng.randint(0, 600)) for _ in range(8)])
    documents += [textgen.digits_fragment(rng) + " " + textgen.prose_fragment(rng) for _ in range(20)]
    checks = clean([textgen.document(rng, 300) for _ in range(10)])
    model = train_both(documents, 256 + 1 + 300, 256 + 1 + 150, pattern, ["<|endoftext|>"], checks)
    stage_two = [model.decode_single_token_bytes(i) for i in range(256 + 150, 256 + 300)]
    assert all(within_limits(token) for token in stage_two)
    assert_tokenizers_encodes_alike(model, tmp_path / "folder", documents + checks)


@FULL_SIZE
def test_equals_the_reference_at_full_size(tmp_path: Path) -> None:
    rng = random.Random(2503_13423)
    for round_ in range(scaled(3)):
        documents = clean([textgen.document(rng, rng.randint(0, 2_000)) for _ in range(20)])
        documents += [textgen.prose_fragment(rng) for _ in range(200)]
        specials = SPECIAL_TOKENS[round_ % 3]
        model = train_both(documents, 256 + len(specials) + 800, 256 + len(specials) + 400, rng.choice(PATTERNS),
                           specials, clean([textgen.document(rng, 300) for _ in range(10)]), encode_documents=False)
        assert_tokenizers_encodes_alike(model, tmp_path / str(round_), documents)


@pytest.mark.parametrize("path", ["corpora/wiki_vi.txt"])
def test_equals_the_reference_on_the_shared_corpora(path: str, tmp_path: Path) -> None:
    file = require_shared(*path.split("/"))
    [(_, documents)] = textgen.corpus_documents([file], random.Random(path), limit_bytes=scaled(6_000),
                                                min_bytes=200, max_bytes=1_000)
    model = train_both(documents, 256 + 1 + 250, 256 + 1 + 120, patterns.GPT2, ["<|endoftext|>"], [])
    assert_tokenizers_encodes_alike(model, tmp_path / "folder", documents)


@FULL_SIZE
def test_equals_the_reference_on_the_shared_corpora_at_full_size(tmp_path: Path) -> None:
    rng = random.Random(2025)
    for path in ["corpora/taylorswift.txt", "corpora/wiki_el.txt", "corpora/wiki_ja.txt"]:
        if (SHARED_DATA / path).exists():
            [(_, documents)] = textgen.corpus_documents([SHARED_DATA / path], rng, limit_bytes=scaled(20_000),
                                                        min_bytes=300, max_bytes=2_000)
            model = train_both(documents, 256 + 1 + 700, 256 + 1 + 350, rng.choice(PATTERNS), ["<|endoftext|>"],
                               documents[:5], encode_documents=False)
            assert_tokenizers_encodes_alike(model, tmp_path / path.replace("/", "_"), documents)


def test_files_train_as_documents(tmp_path: Path) -> None:
    documents = ["the cat sat. the cat ran. 1234567 the cat sat.", "by the way, the cat: 42"]
    paths = []
    for i, document in enumerate(documents):
        paths.append(tmp_path / f"{i}.txt")
        paths[-1].write_text(document, encoding="utf-8")
    from_files = hf_bpe.train(files=paths, vocab_size=290, superword_transition=270, show_progress=False)
    from_texts = hf_bpe.train(iter(documents), 290, superword_transition=270, show_progress=False)
    assert from_files.merges == from_texts.merges and from_files.kind == "merges"
    assert b"the cat" in from_texts.decode_single_token_bytes(from_texts.encode("the cat sat.")[0])  # a superword


@pytest.mark.parametrize(("options", "message"), [
    ({"superword_transition": 255}, "superword_transition must be between 256"),
    ({"superword_transition": 301}, "and vocab_size \\(300\\)"),
    ({"superword_transition": 260, "special_tokens": ["<a>", "<b>", "<c>", "<d>", "<e>"]}, "between 261"),
    ({"superword_transition": "260"}, "superword_transition must be an int"),
    ({"superword_transition": 260, "max_pieces": 10}, "does not take tie_break or max_pieces"),
])
def test_bad_options_are_refused_naming_them(options: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        hf_bpe.train(["the cat sat"], 300, show_progress=False, **options)


def test_gguf_refuses_it_naming_the_split(tmp_path: Path) -> None:
    """hf_bpe does not map llama.cpp's ``superbpe`` pre-tokenizer (not checked against llama.cpp itself), so
    a GGUF file of the model is refused, naming the split, not written to tokenize differently."""
    from conversion import gguf
    from hf_bpe.errors import ConversionError

    model = hf_bpe.train(["the cat sat. the cat ran. 12345 the cat sat."], 280, superword_transition=270,
                         show_progress=False)
    with pytest.raises(ConversionError, match=r"no llama.cpp pre-tokenizer splits as the pattern Split\('\\\\p\{N\}\+'"):
        gguf.save(model, tmp_path / "superbpe.gguf")
    assert not (tmp_path / "superbpe.gguf").exists()
