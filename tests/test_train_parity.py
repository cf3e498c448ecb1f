"""Parity-aware training, ``hf_bpe.train(languages=...)`` (``hf_bpe/_train_parity.py``): its merges are
``tokenizers.trainers.ParityBpeTrainer``'s (``tokenizers`` 0.23.3) on the same texts and options, its model
encodes every text to the tokens the trained ``tokenizers`` tokenizer gives (every text whose bytes that
tokenizer's vocabulary holds: it drops the others), and the full merge sequence
(repeats and the language that chose each included) is the naive reference's
(``tests/support/naive_parity_bpe.py``): on generated multilingual text full of ties with random options
(dev sets, ratios or neither, both variants, global merges, window sizes, alphas, minimum frequencies,
maximum token lengths), on varied generated text, and on the shared wiki corpora."""

from __future__ import annotations

import random
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
    from_byte_level,
    naive_parity_train,
    oracle_parity_train,
    parity_pieces,
    saved_merges,
)
from suite import FULL_SIZE, SHARED_DATA, require_shared, scaled

import hf_bpe
from hf_bpe import patterns

tokenizers = pytest.importorskip("tokenizers")
if not hasattr(tokenizers.trainers, "ParityBpeTrainer"):
    pytest.skip(f"tokenizers {tokenizers.__version__} has no trainers.ParityBpeTrainer (0.23.3 has)",
                allow_module_level=True)

PATTERNS = [GPT2_PATTERN, CL100K_STYLE_PATTERN]
WIKI = ["el", "ja", "uk", "vi"]


def train_all(languages: list[list[str]], num_merges: int, pattern: str, *, dev: list[list[str]] | None = None,
              ratio: Sequence[float] | None = None, check: Sequence[str] = (), naive: bool = True,
              **options: Any) -> hf_bpe.BPE:
    """``hf_bpe.train(languages=...)``, ``ParityBpeTrainer`` and the naive reference on the same texts; fail
    on any difference in the merges, and on any text of ``check`` (and the corpora) encoded differently.
    ``naive=False`` leaves the reference out (it recounts every pair before each merge: slow on larger corpora)."""

    names = [f"lang{i}" for i in range(len(languages))]
    model = hf_bpe.train(vocab_size=256 + num_merges, pattern=patterns.Split(pattern, "isolated"),
                         languages=dict(zip(names, languages)),
                         dev=None if dev is None else dict(zip(names, dev)),
                         ratio=None if ratio is None else dict(zip(names, ratio)), show_progress=False,
                         **options)
    ours = model.merges
    if naive:
        pieces = [parity_pieces(texts, pattern) for texts in languages]
        dev_pieces = None if dev is None else [parity_pieces(texts, pattern) for texts in dev]
        expected = naive_parity_train(pieces, num_merges, dev=dev_pieces, ratio=ratio, **options)
        assert model._training["chosen_by"] == [None if i is None else names[i] for i in expected.languages]
        assert ours == saved_merges(expected.merges)
    tokenizer, saved = oracle_parity_train(languages, num_merges, pattern, dev=dev, ratio=ratio, **options)
    theirs = [(from_byte_level(left), from_byte_level(right)) for left, right in saved["merges"]]
    if ours != theirs:
        first = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        pytest.fail(f"ParityBpeTrainer ({options}, ratio {ratio}, dev {dev is not None}) differs at merge {first} "
                    f"of {len(ours)} (oracle {len(theirs)}): hf_bpe merged {ours[first:first + 2]}, the oracle "
                    f"{theirs[first:first + 2]}")
    alphabet = {from_byte_level(token) for token in saved["vocab"] if len(from_byte_level(token)) == 1}
    for text in [*check, *(text for texts in languages for text in texts)]:
        if not {bytes([byte]) for byte in text.encode()} <= alphabet:
            continue  # a byte no training text holds: tokenizers drops it, the model (every byte a token) keeps it
        want = [from_byte_level(token) for token in tokenizer.encode(text).tokens]
        got = [model.decode_single_token_bytes(i) for i in model.encode(text, disallowed_special=())]
        assert got == want, text
    return model


def tie_language(seed: float, words: int) -> list[str]:
    return textgen.tie_documents(random.Random(seed), words=words, documents=3, excluded=regex_only_code_points())


def clean(documents: list[str]) -> list[str]:
    excluded = regex_only_code_points()
    return ["".join(char for char in document if ord(char) not in excluded) for document in documents]


@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), languages=st.integers(1, 4), mode=st.sampled_from(["dev", "ratio", "none"]),
       variant=st.sampled_from(["base", "window"]), pattern=st.sampled_from(PATTERNS),
       num_merges=st.integers(0, 150))
def test_equals_parity_bpe_trainer_on_text_full_of_ties(
    seed: int, languages: int, mode: str, variant: str, pattern: str, num_merges: int
) -> None:
    rng = random.Random(seed)
    corpora = [tie_language(rng.random(), rng.randint(1, 40)) for _ in range(languages)]
    dev = [tie_language(rng.random(), rng.randint(0, 10)) for _ in range(languages)] if mode == "dev" else None
    ratio = [rng.choice([0.5, 1.0, 1.5, 2.57]) for _ in range(languages)] if mode == "ratio" else None
    options = {"variant": variant, "global_merges": rng.choice([0, 0, 3, 20]), "window_size": rng.choice([1, 3, 10, 100]),
                   "alpha": rng.choice([2.0, 1.0, 3.5, 0.6]), "min_frequency": rng.choice([0, 0, 2, 3]),
                   "max_token_length": rng.choice([None, None, 2, 3, 5])}
    try:
        naive_parity_train([parity_pieces(texts, pattern) for texts in corpora], num_merges,
                           dev=None if dev is None else [parity_pieces(texts, pattern) for texts in dev],
                           ratio=ratio, **options)
    except OracleLoopsForever:
        names = {f"l{i}": texts for i, texts in enumerate(corpora)}
        with pytest.raises(ValueError, match="ParityBpeTrainer never returns"):
            hf_bpe.train(vocab_size=256 + num_merges, pattern=patterns.Split(pattern, "isolated"), languages=names,
                         dev=None if dev is None else dict(zip(names, dev)),
                         ratio=None if ratio is None else dict(zip(names, ratio)), show_progress=False, **options)
        assume(False)  # the oracle would never return: nothing to compare with
    train_all(corpora, num_merges, pattern, dev=dev, ratio=ratio, check=tie_language(rng.random(), 20), **options)


@pytest.mark.parametrize(("mode", "variant"), [("dev", "base"), ("ratio", "window"), ("none", "base"),
                                               ("dev", "window")])
def test_equals_parity_bpe_trainer_on_varied_generated_text(variant: str, mode: str) -> None:
    rng = random.Random(f"parity {variant} {mode}")
    corpora = [clean(textgen.documents(rng, 20_000)) for _ in range(3)]
    dev = [clean(textgen.documents(rng, 800)) for _ in range(3)] if mode == "dev" else None
    train_all(corpora, 600, CL100K_STYLE_PATTERN, dev=dev, ratio=[1.0, 2.0, 0.7] if mode == "ratio" else None,
              variant=variant, window_size=8, global_merges=5, check=clean(textgen.documents(rng, 2_000)), naive=False)


@pytest.mark.slow
@pytest.mark.parametrize("size", [pytest.param(5_000, id="ci"), pytest.param(30_000, id="full", marks=FULL_SIZE)])
def test_equals_parity_bpe_trainer_on_two_to_five_languages(size: int) -> None:
    """Six rounds: each mode with each variant, random options, 2 to 5 languages of ``size`` bytes."""
    rng = random.Random(2508)
    for round_ in range(scaled(6)):
        languages = rng.randint(2, 5)
        corpora = [clean(textgen.documents(rng, size)) for _ in range(languages)]
        mode, variant = ["dev", "ratio", "none"][round_ % 3], ["base", "window"][round_ % 2]
        dev = [clean(textgen.documents(rng, size // 5)) for _ in range(languages)] if mode == "dev" else None
        train_all(corpora, 1_000, rng.choice(PATTERNS), dev=dev,
                  ratio=[rng.uniform(0.5, 2.5) for _ in range(languages)] if mode == "ratio" else None,
                  variant=variant, window_size=rng.choice([5, 50, 100]), global_merges=rng.choice([0, 50]),
                  min_frequency=rng.choice([0, 2]), max_token_length=rng.choice([None, 8]), naive=False)


def wiki_languages(rng: random.Random, size: int) -> tuple[list[list[str]], list[list[str]]]:
    files = [require_shared("corpora", f"wiki_{language}.txt") for language in WIKI]
    train = [documents for _, documents in textgen.corpus_documents(files, rng, limit_bytes=size)]
    dev = [documents for _, documents in textgen.corpus_documents(files, rng, limit_bytes=size // 4)]
    return train, dev


@pytest.mark.parametrize(("mode", "variant"), [("dev", "window"), ("ratio", "base")])
def test_equals_parity_bpe_trainer_on_the_wiki_corpora(variant: str, mode: str) -> None:
    train, dev = wiki_languages(random.Random(f"parity {variant} {mode}"), 40_000)
    model = train_all(train, 1_000, GPT2_PATTERN, dev=dev if mode == "dev" else None,
                      ratio=[1.0, 1.2, 0.9, 1.1] if mode == "ratio" else None, variant=variant, window_size=10,
                      global_merges=5, check=[text for texts in dev for text in texts], naive=False)
    assert set(model._training["chosen_by"]) - {None}, "the parity phase should have made merges"


@pytest.mark.slow
@pytest.mark.parametrize(("size", "merges"), [pytest.param(20_000, 800, id="ci"),
                                              pytest.param(200_000, 2_000, id="full", marks=FULL_SIZE)])
def test_equals_parity_bpe_trainer_on_the_wiki_corpora_with_random_options(size: int, merges: int) -> None:
    """Four rounds on ``size`` bytes of each wiki corpus: each mode, each variant, random options."""
    if not all((SHARED_DATA / "corpora" / f"wiki_{language}.txt").exists() for language in WIKI):
        pytest.skip("the shared wiki corpora are absent")
    rng = random.Random(2508_04796)
    for round_ in range(scaled(4)):
        train, dev = wiki_languages(rng, size)
        variant, mode = ["base", "window"][round_ % 2], ["dev", "ratio", "none"][round_ % 3]
        train_all(train, merges, rng.choice(PATTERNS), dev=dev if mode == "dev" else None,
                  ratio=[rng.uniform(0.5, 2.5) for _ in WIKI] if mode == "ratio" else None, variant=variant,
                  window_size=rng.choice([5, 50, 100]), global_merges=rng.choice([0, 30]),
                  min_frequency=rng.choice([0, 2]), naive=False)


def test_files_and_documents_train_alike(tmp_path: Path) -> None:
    texts = {"en": ["the new lower newest"] * 3, "hi": ["कम कम कम"] * 2}
    paths = {}
    for language, documents in texts.items():
        paths[language] = []
        for i, document in enumerate(documents):
            path = tmp_path / f"{language}{i}.txt"
            path.write_text(document, encoding="utf-8")
            paths[language].append(path)
    from_texts = hf_bpe.train(vocab_size=270, languages=texts, dev={k: v[:1] for k, v in texts.items()},
                              show_progress=False)
    from_files = hf_bpe.train(vocab_size=270, languages=paths, dev={k: v[0] for k, v in paths.items()},
                              show_progress=False)
    assert from_texts.kind == from_files.kind == "merges"
    expected = naive_parity_train([parity_pieces(v) for v in texts.values()], 14,
                                  dev=[parity_pieces(v[:1]) for v in texts.values()])
    assert from_texts.merges == from_files.merges == saved_merges(expected.merges)


@pytest.mark.parametrize(("options", "message"), [
    ({"languages": ["a"]}, "languages must map each language's name"),
    ({"languages": {}}, "languages is empty"),
    ({"languages": {"en": ["a b"]}, "dev": {"hi": ["x"]}}, "dev needs one corpus per language.*missing: \\['en'\\]"),
    ({"languages": {"en": ["a b"]}, "ratio": [1.0, 2.0]}, "ratio needs one value per language"),
    ({"languages": {"en": ["a b"]}, "ratio": {"en": 0}}, "each ratio must be a positive number"),
    ({"languages": {"en": ["a b"]}, "variant": "windowed"}, "variant must be one of"),
    ({"languages": {"en": ["a b"]}, "window_size": 0}, "window_size must be an int of at least 1"),
    ({"languages": {"en": ["a b"]}, "alpha": float("nan")}, "alpha must be a positive number"),
    ({"languages": {"en": []}}, "languages\\['en'\\]: the corpus is empty"),
    ({"languages": {"en": ["a b"]}, "corpus": ["x"]}, "not corpus or files as well"),
    ({"languages": {"en": ["a b"]}, "superword_transition": 260}, "do not combine"),
    ({"languages": {"en": ["a b"]}, "tie_break": "minbpe"}, "does not take tie_break"),
])
def test_bad_options_are_refused_naming_them(options: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        hf_bpe.train(vocab_size=300, show_progress=False, **options)
