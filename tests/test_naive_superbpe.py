"""The SuperBPE reference (``tests/support/naive_superbpe.py``): its stage one is the naive trainer; its stage-two cut
is ``tokenizers``' ``Digits`` + ``Split(r"(?=(\\d{3})+(?!\\d))")`` + ``ByteLevel`` pre-tokenizer; what it learns
keeps its limits and crosses spaces; and the trained model, written as a ``tokenizer.json`` (that
pre-tokenizer, a BPE model with the merges list, the special tokens as added tokens), encodes every text
in ``tokenizers`` exactly as :func:`superbpe_encode` does: on generated text full of ties and varied text
(numbers in many systems, whitespace of every kind, special tokens) and on slices of the shared corpora."""

from __future__ import annotations

import random
from typing import Any

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_bpe import naive_train, regex_only_code_points
from naive_parity_bpe import BYTE_LEVEL, from_byte_level
from naive_superbpe import (
    NUMBERS,
    SuperBPE,
    naive_superbpe_train,
    stage_two_cut,
    stage_two_pieces,
    superbpe_encode,
    within_limits,
)
from suite import FULL_SIZE, SHARED_DATA, require_shared, scaled

from hf_bpe import patterns

tokenizers = pytest.importorskip("tokenizers")

PATTERNS = [patterns.GPT2, patterns.CL100K, patterns.O200K]
SPECIAL_TOKENS = [[], ["<|endoftext|>"], ["<|endoftext|>", "<|im_start|>"]]


def stage_two_pre_tokenizer() -> Any:
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Split(Regex(r"(?=(\d{3})+(?!\d))"), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


def as_tokenizer(model: SuperBPE) -> tuple[Any, dict[bytes, int]]:
    """The model as ``tokenizers`` holds a SuperBPE ``tokenizer.json``, and our token -> id map."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    ids = {bytes([byte]): byte for byte in range(256)}
    for token in model.stage_one + model.stage_two:
        ids[token] = len(ids)
    spell = {token: "".join(BYTE_LEVEL[byte] for byte in token) for token in ids}
    tokenizer = Tokenizer(models.BPE(vocab={spell[token]: i for token, i in ids.items()},
                                     merges=[(spell[left], spell[right]) for left, right in model.merges]))
    tokenizer.pre_tokenizer = stage_two_pre_tokenizer()
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in model.special_tokens])
    for token, i in model.special_tokens.items():
        assert tokenizer.token_to_id(token) == i
        ids[token.encode()] = i
    return tokenizer, ids


def assert_encodes_as_tokenizers(model: SuperBPE, texts: list[str]) -> None:
    tokenizer, ids = as_tokenizer(model)
    for text in texts:
        ours = [ids[token] for token in superbpe_encode(text, model.merges, list(model.special_tokens))]
        theirs = tokenizer.encode(text, add_special_tokens=False).ids
        assert ours == theirs, f"{text!r}: {ours} != {theirs}"
        assert tokenizer.decode(theirs, skip_special_tokens=False) == text


def clean(documents: list[str]) -> list[str]:
    excluded = regex_only_code_points()
    return ["".join(char for char in document if ord(char) not in excluded) for document in documents]


# ------------------------------------------------------------------------------------ the parts


@settings(max_examples=scaled(10), deadline=None)
@given(seed=st.integers(0, 2**32), words=st.integers(1, 40), pattern=st.sampled_from(PATTERNS),
       special_tokens=st.sampled_from(SPECIAL_TOKENS), merges=st.integers(0, 60), more=st.integers(0, 30))
def test_stage_one_is_the_naive_trainer(seed: int, words: int, pattern: str, special_tokens: list[str],
                                        merges: int, more: int) -> None:
    documents = textgen.tie_documents(random.Random(seed), words=words, special_tokens=special_tokens,
                                      excluded=regex_only_code_points())
    transition = 256 + len(special_tokens) + merges
    result = naive_superbpe_train(documents, transition + more, transition, pattern, special_tokens)
    assert result.stage_one == naive_train(documents, transition, pattern, special_tokens)
    assert not set(result.stage_one) & set(result.stage_two)


def test_the_stage_two_cut_is_tokenizers_pre_tokenizer() -> None:
    splitter = stage_two_pre_tokenizer()
    rng = random.Random(2503)
    texts = clean(textgen.documents(rng, 60_000) + [textgen.digits_fragment(rng) for _ in range(300)])
    texts += ["1234567", "a 1234 b", "١٢٣٤٥", "12²345", "x１２３４", "Ⅻ1234", "000", "a\n\nb  c", "٣4567"]
    for text in texts:
        theirs = [from_byte_level(piece) for piece, _ in splitter.pre_tokenize_str(text)]
        assert theirs == [piece.encode() for piece in stage_two_cut(text)], text
    assert stage_two_cut("ab 1234567 cd") == ["ab ", "1", "234", "567", " cd"]


def test_stage_two_keeps_its_limits_and_learns_superwords() -> None:
    documents = [textgen.prose_fragment(random.Random(seed % 20)) for seed in range(200)]
    result = naive_superbpe_train(documents, 256 + 330, 256 + 150, patterns.GPT2)
    assert len(result.stage_two) == 180
    assert all(within_limits(token) for token in result.stage_two)
    inner_spaces = [token for token in result.stage_two if b" " in token.strip(b" ")]
    assert len(inner_spaces) > 40, "stage two should learn tokens that bridge spaces"
    assert max(len(token.split()) for token in result.stage_two) == 4
    assert not any(b" " in token.strip(b" ") for token in result.stage_one)


def test_the_limits() -> None:
    assert within_limits(b" by the way of") and not within_limits(b" by the way of it")
    assert not within_limits(b"note: this") and within_limits(b"note:this")
    assert within_limits(b" a b c d e", max_words=None, forbidden=())
    assert stage_two_pieces(["a1234<|e|>b 12"], ["<|e|>"]) == {b"a": 1, b"1": 1, b"234": 1, b"b ": 1, b"12": 1}
    assert NUMBERS.pattern == r"\p{N}+"


# ---------------------------------------------------------------------- encoding is tokenizers'


@settings(max_examples=scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), words=st.integers(1, 40), pattern=st.sampled_from(PATTERNS),
       special_tokens=st.sampled_from(SPECIAL_TOKENS), merges=st.integers(0, 60), more=st.integers(0, 60))
def test_the_model_encodes_as_tokenizers_on_text_full_of_ties(
    seed: int, words: int, pattern: str, special_tokens: list[str], merges: int, more: int
) -> None:
    rng = random.Random(seed)
    documents = textgen.tie_documents(rng, words=words, special_tokens=special_tokens,
                                      excluded=regex_only_code_points())
    transition = 256 + len(special_tokens) + merges
    model = naive_superbpe_train(documents, transition + more, transition, pattern, special_tokens)
    others = textgen.tie_documents(rng, words=words, special_tokens=special_tokens,
                                   excluded=regex_only_code_points())
    assert_encodes_as_tokenizers(model, documents + others + clean([textgen.document(rng, 300)]))


def test_the_model_encodes_as_tokenizers_on_generated_varied_text() -> None:
    rng = random.Random(13423)
    documents = clean([textgen.document(rng, rng.randint(0, 500)) for _ in range(6)])
    model = naive_superbpe_train(documents, 256 + 1 + 200, 256 + 1 + 120, patterns.CL100K, ["<|endoftext|>"])
    assert model.stage_two
    assert_encodes_as_tokenizers(model, documents + clean([textgen.document(rng, 300) for _ in range(12)]))


@pytest.mark.parametrize("path", ["corpora/wiki_vi.txt"])
def test_the_model_encodes_as_tokenizers_on_the_shared_corpora(path: str) -> None:
    file = require_shared(*path.split("/"))
    [(_, documents)] = textgen.corpus_documents([file], random.Random(path), limit_bytes=scaled(4_000),
                                                min_bytes=200, max_bytes=1_000)
    model = naive_superbpe_train(documents, 256 + 1 + 200, 256 + 1 + 100, patterns.GPT2, ["<|endoftext|>"])
    assert_encodes_as_tokenizers(model, documents)


@pytest.mark.slow
@pytest.mark.parametrize(("corpus_bytes", "merges"), [pytest.param(scaled(3_000), 250, id="ci"),
                                                      pytest.param(scaled(8_000), 500, id="full", marks=FULL_SIZE)])
def test_the_model_encodes_as_tokenizers_on_four_shared_corpora(corpus_bytes: int, merges: int) -> None:
    """Half the merges in stage one, half in stage two."""
    rng = random.Random(2025)
    for path in ["corpora/taylorswift.txt", "corpora/wiki_el.txt", "corpora/wiki_ja.txt", "cs336/corpus.en"]:
        if (SHARED_DATA / path).exists():
            [(_, documents)] = textgen.corpus_documents([SHARED_DATA / path], rng, limit_bytes=corpus_bytes,
                                                        min_bytes=300, max_bytes=2_000)
            model = naive_superbpe_train(documents, 256 + 1 + merges, 256 + 1 + merges // 2, rng.choice(PATTERNS),
                                         ["<|endoftext|>"])
            assert_encodes_as_tokenizers(model, documents)


def test_the_reference_s_examples_run() -> None:
    import doctest

    import naive_superbpe

    result = doctest.testmod(naive_superbpe)
    assert result.failed == 0 and result.attempted > 0
