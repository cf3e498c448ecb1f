"""The parity-aware BPE reference (``tests/support/naive_parity_bpe.py``) learns exactly the merges and vocabulary of
``tokenizers.trainers.ParityBpeTrainer``, trained through ``ParityBpeTrainer.train_from_iterator(tokenizer,
train_iterators, dev_iterators=..., ratio=...)`` on a ``Tokenizer(BPE())`` whose pre-tokenizer is
``ByteLevel(add_prefix_space=False)`` or ``Split(cl100k-style regex, "isolated")`` + ``ByteLevel(use_regex=
False)``: on generated multilingual text full of ties (1-4 languages, each in its own scripts) with random
options (dev sets, ratios or neither, both variants, global merges, window sizes, alphas, minimum
frequencies, maximum token lengths, ``total_symbols``, special tokens, an initial alphabet), and on slices of
the shared wiki corpora (Greek, Japanese, Ukrainian, Vietnamese as four languages).

Inputs where the reference says the oracle never returns (:class:`OracleLoopsForever`) are not given to the
oracle; ``test_the_oracle_loops_forever_where_the_reference_says_so`` pins the two smallest such inputs on
the reference only (running the oracle there would hang the suite).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import textgen
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from naive_bpe import regex_only_code_points
from naive_parity_bpe import (
    CL100K_STYLE_PATTERN,
    GPT2_PATTERN,
    OracleLoopsForever,
    ParityResult,
    from_byte_level,
    naive_parity_train,
    oracle_parity_train,
    parity_pieces,
    saved_merges,
    tokenizers_pre_tokenizer,
)
from suite import FULL_SIZE, SHARED_DATA, require_shared, scaled

tokenizers = pytest.importorskip("tokenizers")
if not hasattr(tokenizers.trainers, "ParityBpeTrainer"):
    pytest.skip(f"tokenizers {tokenizers.__version__} has no trainers.ParityBpeTrainer (0.23.3 has)",
                allow_module_level=True)

PATTERNS = [GPT2_PATTERN, CL100K_STYLE_PATTERN]
WIKI = ["el", "ja", "uk", "vi"]


def oracle_pieces(texts: list[str], pattern: str) -> Counter[bytes]:
    splitter = tokenizers_pre_tokenizer(pattern)
    return Counter(from_byte_level(piece) for text in texts for piece, _ in splitter.pre_tokenize_str(text))


def train_both(languages: list[list[str]], num_merges: int, pattern: str, *, dev: list[list[str]] | None = None,
               ratio: Sequence[float] | None = None, initial_alphabet: Sequence[int] = (),
               **options: Any) -> ParityResult:
    """Train the reference and (unless it says the oracle never returns) ``ParityBpeTrainer`` on the same
    texts; fail on any difference; return the reference's result."""

    pieces = [parity_pieces(texts, pattern) for texts in languages]
    dev_pieces = None if dev is None else [parity_pieces(texts, pattern) for texts in dev]
    for texts, ours in zip([*languages, *(dev or [])], [*pieces, *(dev_pieces or [])]):
        assert oracle_pieces(texts, pattern) == ours, "the pre-tokenizers cut the text differently"
    expected = naive_parity_train(pieces, num_merges, dev=dev_pieces, ratio=ratio,
                                  initial_alphabet=initial_alphabet, **options)
    _, saved = oracle_parity_train(languages, num_merges, pattern, dev=dev, ratio=ratio,
                                   initial_alphabet=initial_alphabet, **options)
    merges = [(from_byte_level(left), from_byte_level(right)) for left, right in saved["merges"]]
    ours = saved_merges(expected.merges)
    if merges != ours:
        first = next((i for i, (a, b) in enumerate(zip(merges, ours)) if a != b), min(len(merges), len(ours)))
        pytest.fail(f"ParityBpeTrainer ({options}, ratio {ratio}, dev {dev is not None}) differs from the "
                    f"reference at merge {first} of {len(ours)} (oracle {len(merges)}): it merged "
                    f"{merges[first:first + 2]}, the reference {ours[first:first + 2]} (chosen by language "
                    f"{expected.languages[first:first + 2]})")
    assert saved["vocab"] == expected.vocab
    return expected


def tie_language(seed: float, words: int) -> list[str]:
    return textgen.tie_documents(random.Random(seed), words=words, documents=3, excluded=regex_only_code_points())


# ------------------------------------------------------------------------------ generated text


@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), languages=st.integers(1, 4), mode=st.sampled_from(["dev", "ratio", "none"]),
       variant=st.sampled_from(["base", "window"]), pattern=st.sampled_from(PATTERNS),
       num_merges=st.integers(0, 150))
def test_the_reference_is_parity_bpe_trainer_on_text_full_of_ties(
    seed: int, languages: int, mode: str, variant: str, pattern: str, num_merges: int
) -> None:
    rng = random.Random(seed)
    corpora = [tie_language(rng.random(), rng.randint(1, 40)) for _ in range(languages)]
    dev = [tie_language(rng.random(), rng.randint(0, 10)) for _ in range(languages)] if mode == "dev" else None
    ratio = [rng.choice([0.5, 1.0, 1.5, 2.57]) for _ in range(languages)] if mode == "ratio" else None
    try:
        train_both(corpora, num_merges, pattern, dev=dev, ratio=ratio, variant=variant,
                   global_merges=rng.choice([0, 0, 3, 20]), window_size=rng.choice([1, 3, 10, 100]),
                   alpha=rng.choice([2.0, 1.0, 3.5, 0.6]), min_frequency=rng.choice([0, 0, 2, 3]),
                   max_token_length=rng.choice([None, None, 2, 3, 5]), total_symbols=rng.random() < 0.2,
                   special_tokens=rng.choice([[], ["<s>"], ["<|endoftext|>", "a"]]),
                   initial_alphabet=rng.choice([(), (), range(256), (0x20, 0xFF)]))
    except OracleLoopsForever:
        assume(False)  # the oracle would never return: draw another input


@pytest.mark.parametrize(("mode", "variant"), [("dev", "base"), ("ratio", "window"), ("none", "base")])
def test_the_reference_is_parity_bpe_trainer_on_generated_varied_text(variant: str, mode: str) -> None:
    rng = random.Random(f"{variant} {mode}")
    excluded = regex_only_code_points()
    corpora = [["".join(char for char in document if ord(char) not in excluded)
                for document in textgen.documents(rng, 3_000)] for _ in range(3)]
    dev = [textgen.documents(rng, 800) for _ in range(3)] if mode == "dev" else None
    dev = None if dev is None else [["".join(c for c in d if ord(c) not in excluded) for d in texts] for texts in dev]
    train_both(corpora, 120, CL100K_STYLE_PATTERN, dev=dev, ratio=[1.0, 2.0, 0.7] if mode == "ratio" else None,
               variant=variant, window_size=8, global_merges=5)


def test_ties_go_to_the_greatest_byte_level_characters_not_bytes() -> None:
    """b"\\x01" is "ā" (U+0101) in the ByteLevel alphabet, above "b": the tie goes to ("a", "\\x01"),
    where hf_bpe's rule (raw bytes) would take ("a", "b")."""
    result = train_both([["ab", "a\x01"]], 1, r"[\s\S]+")
    assert result.merges == [(b"a", b"\x01")]


def test_languages_take_turns_by_their_lengths() -> None:
    """The Rust unit test's example: equal lengths select the lower index; ties of pairs go to the greater
    strings."""
    result = train_both([["aabb"] * 10, ["ccdd"] * 10], 6, GPT2_PATTERN, min_frequency=1)
    assert [left + b" " + right for left, right in result.merges] == [
        b"b b", b"d d", b"a bb", b"c dd", b"a abb", b"c cdd"]
    assert result.languages == [0, 1, 0, 1, 0, 1]


def test_a_dev_set_takes_precedence_over_ratios() -> None:
    corpora = [tie_language(1, 30), tie_language(2, 30), tie_language(3, 30)]
    dev = [tie_language(4, 8), tie_language(5, 8), tie_language(6, 8)]
    with_ratio = train_both(corpora, 60, GPT2_PATTERN, dev=dev, ratio=[3.0, 0.2, 1.0], variant="window",
                            window_size=5)
    assert with_ratio == naive_parity_train([parity_pieces(texts) for texts in corpora], 60,
                                            dev=[parity_pieces(texts) for texts in dev], variant="window",
                                            window_size=5)


def test_the_oracle_loops_forever_where_the_reference_says_so() -> None:
    """Checked by hand (each run of ParityBpeTrainer on these inputs was stopped after minutes): the window
    variant once language 0 is over the threshold and the other language is exhausted, and ratios with a
    language that has no training text."""
    window = [Counter({b"abcdefgh": 1}), Counter({b"xy": 1})]
    with pytest.raises(OracleLoopsForever, match="language 0 is over the threshold"):
        naive_parity_train(window, 10, variant="window", window_size=3, alpha=0.6)
    assert len(naive_parity_train(window, 10, variant="window", window_size=3, alpha=2.0).merges) == 8
    with pytest.raises(OracleLoopsForever, match="no training pieces"):
        naive_parity_train([Counter({b"abcd": 1}), Counter()], 10, ratio=[1.0, 1.0])


# --------------------------------------------------------------------------- the shared corpora


def wiki_languages(rng: random.Random, size: int) -> tuple[list[list[str]], list[list[str]]]:
    files = [require_shared("corpora", f"wiki_{language}.txt") for language in WIKI]
    train = [documents for _, documents in textgen.corpus_documents(files, rng, limit_bytes=size)]
    dev = [documents for _, documents in textgen.corpus_documents(files, rng, limit_bytes=size // 4)]
    return train, dev


@pytest.mark.parametrize(("mode", "variant"), [("dev", "window"), ("ratio", "base")])
def test_the_reference_is_parity_bpe_trainer_on_the_wiki_corpora(variant: str, mode: str) -> None:
    train, dev = wiki_languages(random.Random(f"{variant} {mode}"), 2_500)
    result = train_both(train, 100, GPT2_PATTERN, dev=dev if mode == "dev" else None,
                        ratio=[1.0, 1.2, 0.9, 1.1] if mode == "ratio" else None, variant=variant, window_size=10,
                        global_merges=5)
    assert set(result.languages) - {None}, "the parity phase should have made merges"


@pytest.mark.slow
@pytest.mark.parametrize(("size", "merges"), [pytest.param(3_000, 120, id="ci"),
                                              pytest.param(10_000, 250, id="full", marks=FULL_SIZE)])
def test_the_reference_is_parity_bpe_trainer_on_the_wiki_corpora_with_random_options(size: int, merges: int) -> None:
    """Four rounds on ``size`` bytes of each wiki corpus: each mode, each variant, random options."""
    if not all((SHARED_DATA / "corpora" / f"wiki_{language}.txt").exists() for language in WIKI):
        pytest.skip("the shared wiki corpora are absent")
    rng = random.Random(2508)
    for round_ in range(scaled(4)):
        train, dev = wiki_languages(rng, size)
        variant, mode = ["base", "window"][round_ % 2], ["dev", "ratio", "none"][round_ % 3]
        train_both(train, merges, rng.choice(PATTERNS), dev=dev if mode == "dev" else None,
                   ratio=[rng.uniform(0.5, 2.5) for _ in WIKI] if mode == "ratio" else None, variant=variant,
                   window_size=rng.choice([5, 50, 100]), global_merges=rng.choice([0, 30]),
                   min_frequency=rng.choice([0, 2]))


def test_the_wiki_corpora_are_where_the_tests_look() -> None:
    """Keeps the corpus paths honest: a renamed file would turn the wiki tests into silent skips."""
    if not SHARED_DATA.exists():
        pytest.skip("../shared/data is absent")
    assert all(Path(SHARED_DATA, "corpora", f"wiki_{language}.txt").exists() for language in WIKI)


def test_the_reference_s_examples_run() -> None:
    import doctest

    import naive_parity_bpe

    result = doctest.testmod(naive_parity_bpe)
    assert result.failed == 0 and result.attempted > 0
