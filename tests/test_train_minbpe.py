"""``hf_bpe.train(..., tie_break="minbpe")`` against a minimal reimplementation of minbpe's
training loop (``naive_minbpe.py``) on corpora full of ties, and on minbpe's own test text."""

from __future__ import annotations

import random

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_bpe import regex_only_code_points
from naive_minbpe import naive_minbpe_train
from suite import require_shared, scaled

import hf_bpe
from hf_bpe import patterns

PATTERNS = ("gpt2", "cl100k", "o200k", r"\w+|\W")
SPECIAL_TOKENS = ([], ["<|endoftext|>"], ["<|a|>", "<|ab|>"])


def assert_trains_like_minbpe(documents: list[str], merges: int, pattern: str, special_tokens: list[str]) -> None:
    expected = naive_minbpe_train(documents, merges, patterns.resolve(pattern), special_tokens)
    tokens = [left + right for left, right in expected]
    vocab_size = 256 + merges + len(special_tokens)
    if len(set(tokens)) < len(tokens):  # minbpe made one byte string twice: we must refuse, not guess
        with pytest.raises(ValueError, match="a second time"):
            hf_bpe.train(documents, vocab_size, pattern=pattern, special_tokens=special_tokens,
                         tie_break="minbpe", show_progress=False)
        return
    with pytest.warns(UserWarning, match="allows only") if len(expected) < merges else _nothing():
        model = hf_bpe.train(documents, vocab_size, pattern=pattern, special_tokens=special_tokens,
                             tie_break="minbpe", show_progress=False)
    learned = [model.decode_single_token_bytes(256 + i) for i in range(len(expected))]
    assert learned == tokens, next(f"merge {i}: {a!r} != {b!r}" for i, (a, b) in enumerate(zip(learned, tokens))
                                   if a != b)
    assert model.n_vocab == 256 + len(expected) + len(special_tokens)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: object) -> None:
        return None


@settings(max_examples=scaled(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), words=st.sampled_from([5, 20, 80, 200]), merges=st.integers(0, 150),
       pattern=st.sampled_from(PATTERNS), special_tokens=st.sampled_from(SPECIAL_TOKENS))
def test_minbpe_tie_rule_gives_minbpes_merges_on_text_full_of_ties(
    seed: int, words: int, merges: int, pattern: str, special_tokens: list[str]
) -> None:
    documents = textgen.tie_documents(random.Random(seed), words=words, special_tokens=special_tokens,
                                      excluded=regex_only_code_points())
    assert_trains_like_minbpe(documents, merges, pattern, special_tokens)


@pytest.mark.slow
def test_minbpe_tie_rule_on_minbpes_own_test_text() -> None:
    text = require_shared("corpora", "taylorswift.txt").read_text(encoding="utf-8")[: scaled(15_000)]
    assert_trains_like_minbpe([text], 200, "cl100k", [])


def test_the_rules_differ_and_the_default_is_cs336() -> None:
    documents = ["ab cd cd ab"]
    assert hf_bpe.train(documents, 257, show_progress=False).decode_single_token_bytes(256) == b"cd"  # the greatest pair
    assert hf_bpe.train(documents, 257, tie_break="minbpe", show_progress=False).decode_single_token_bytes(256) == b"ab"
    with pytest.raises(ValueError, match="tie_break must be one of"):
        hf_bpe.train(documents, 257, tie_break="first", show_progress=False)
