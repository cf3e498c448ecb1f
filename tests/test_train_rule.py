"""Training follows the documented rule (docs/training.md, "The rule") on every input: ``hf_bpe.train``, and ``count_pieces`` followed by
``train_from_counts``, learn exactly the tokens, in order, of a naive trainer that recounts every pair
before each merge (``tests/support/naive_bpe.py``, independent of hf_bpe), with the special tokens after them.

Inputs: generated multilingual text where ties decide most merges (small alphabets, words repeated equally
often: Hangul, Devanagari digits, emoji ZWJ families, Latin, other scripts, any code point, compounds), at
vocabularies up to 2,000, with and without special tokens, with every named pattern and a custom one; and
a slice of each shared corpus. The naive trainer pre-tokenizes with the ``regex`` module, whose Unicode
tables are newer than tiktoken's (and ours): the generated text leaves out the code points only it knows,
and ``test_counting_follows_tiktoken_where_the_regex_module_knows_newer_characters`` pins what training does
with them (it cuts text as tiktoken and the trained model's own encoder do).
"""

from __future__ import annotations

import random
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_bpe import naive_pieces, naive_train, recount_train, regex_only_code_points
from suite import FULL_SIZE, SHARED_DATA, require_shared, scaled

import hf_bpe
from hf_bpe import patterns
from hf_bpe.train import PieceCounts, count_pieces, train_from_counts

NAMED = ["gpt2", "cl100k", "o200k"]
CUSTOM = r"'[a-z]+|[\p{L}\p{M}]+|\p{N}{1,2}|[^\s\p{L}\p{M}\p{N}]+|\s+(?!\S)|\s+"
PATTERNS = NAMED + [CUSTOM]
SPECIAL_TOKENS = [[], ["<|endoftext|>"], ["<|endoftext|>", "<|im_start|>user\n"]]

CORPUS_FILES = ["corpora/shakespeare_milton.txt", "corpora/taylorswift.txt", "corpora/wiki_el.txt",
                "corpora/wiki_ja.txt", "corpora/wiki_uk.txt", "corpora/wiki_vi.txt", "cs336/corpus.en"]


def learned_tokens(model: hf_bpe.BPE, special_tokens: list[str]) -> list[bytes]:
    return [model.decode_single_token_bytes(i) for i in range(256, model.n_vocab - len(special_tokens))]


def assert_trains_by_the_rule(documents: list[str], vocab_size: int, pattern: str,
                              special_tokens: list[str]) -> Any:
    """Train both ways and compare with the naive trainer; returns the naive trainer's result."""
    pieces = naive_pieces(documents, patterns.resolve(pattern), special_tokens)
    expected = recount_train(pieces, vocab_size - 256 - len(special_tokens))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "the corpus allows only")
        trained = hf_bpe.train(documents, vocab_size, pattern=pattern, special_tokens=special_tokens,
                               show_progress=False)
        counts = count_pieces(documents, pattern=pattern, special_tokens=special_tokens,
                                     show_progress=False)
        from_counts = train_from_counts(counts, vocab_size, show_progress=False)
    assert counts.to_dict() == dict(pieces), "the pieces differ from the regex module's"
    for name, model in (("train", trained), ("count_pieces + train_from_counts", from_counts)):
        tokens = learned_tokens(model, special_tokens)
        if tokens != expected.tokens:
            first = next((i for i, (a, b) in enumerate(zip(tokens, expected.tokens)) if a != b),
                         min(len(tokens), len(expected.tokens)))
            pytest.fail(f"{name} (pattern {pattern!r}, vocab {vocab_size}, special tokens {special_tokens}) "
                        f"differs from the naive trainer at merge {first} of {len(expected.tokens)}: "
                        f"learned {tokens[first:first + 3]}, the rule gives {expected.tokens[first:first + 3]}")
        assert [model.encode_single_token(token) for token in special_tokens] == list(
            range(256 + len(tokens), 256 + len(tokens) + len(special_tokens)))
    assert trained.mergeable_ranks == from_counts.mergeable_ranks
    return expected


def tie_corpus(seed: int, words: int, special_tokens: list[str]) -> list[str]:
    return textgen.tie_documents(random.Random(seed), words=words, special_tokens=special_tokens,
                                 excluded=regex_only_code_points())


# ------------------------------------------------------------------------------------ the oracle


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), words=st.integers(1, 25), pattern=st.sampled_from(PATTERNS),
       special_tokens=st.sampled_from(SPECIAL_TOKENS), merges=st.integers(0, 60))
def test_the_recount_trainer_is_the_readable_naive_trainer(
    seed: int, words: int, pattern: str, special_tokens: list[str], merges: int
) -> None:
    documents = tie_corpus(seed, words, special_tokens)
    vocab_size = 256 + len(special_tokens) + merges
    readable = naive_train(documents, vocab_size, patterns.resolve(pattern), special_tokens)
    pieces = naive_pieces(documents, patterns.resolve(pattern), special_tokens)
    assert recount_train(pieces, merges).tokens == readable


def test_the_generated_corpora_are_full_of_ties() -> None:
    merges = ties = 0
    for seed in range(4):
        result = recount_train(naive_pieces(tie_corpus(seed, 150, []), patterns.GPT2, []), 800)
        merges, ties = merges + result.merges, ties + result.ties
    assert merges > 1000 and ties > merges / 2, f"only {ties} of {merges} merges were chosen among ties"


# ------------------------------------------------------------------------ training vs the rule


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), words=st.sampled_from([20, 80, 300, 1000, 2000]),
       vocab_size=st.integers(260, 2000),
       pattern=st.sampled_from(PATTERNS), special_tokens=st.sampled_from(SPECIAL_TOKENS))
def test_training_follows_the_rule_on_text_full_of_ties(
    seed: int, words: int, vocab_size: int, pattern: str, special_tokens: list[str]
) -> None:
    assert_trains_by_the_rule(tie_corpus(seed, words, special_tokens), vocab_size, pattern, special_tokens)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_training_follows_the_rule_on_generated_varied_text(pattern: str) -> None:
    rng = random.Random(15)
    excluded = regex_only_code_points()
    documents = ["".join(char for char in document if ord(char) not in excluded)
                 for document in textgen.documents(rng, 40_000)]
    assert_trains_by_the_rule(documents, 1200, pattern, ["<|endoftext|>"])


@pytest.mark.parametrize("path", CORPUS_FILES)
def test_training_follows_the_rule_on_the_shared_corpora(path: str) -> None:
    file = require_shared(*path.split("/"))
    [(_, documents)] = textgen.corpus_documents([file], random.Random(path), limit_bytes=30_000)
    pattern = PATTERNS[CORPUS_FILES.index(path) % len(PATTERNS)]
    assert_trains_by_the_rule(documents, 1500, pattern, ["<|endoftext|>"])


@pytest.mark.slow
@pytest.mark.parametrize(("words", "corpus_bytes"), [pytest.param(600, scaled(10_000), id="ci"),
                                                     pytest.param(3_000, scaled(60_000), id="full", marks=FULL_SIZE)])
def test_training_follows_the_rule_on_large_tie_corpora_and_the_shared_corpora(words: int, corpus_bytes: int) -> None:
    rng = random.Random(2015)
    for _ in range(scaled(2)):  # 2 tie-heavy corpora by default, 2 N at HF_BPE_TEST_SCALE=N
        seed, special_tokens = rng.randrange(2**32), rng.choice(SPECIAL_TOKENS)
        documents = tie_corpus(seed, words, special_tokens)
        assert_trains_by_the_rule(documents, 2000, rng.choice(PATTERNS), special_tokens)
    for path in CORPUS_FILES:
        if (SHARED_DATA / path).exists():
            [(_, documents)] = textgen.corpus_documents([SHARED_DATA / path], rng, limit_bytes=corpus_bytes)
            assert_trains_by_the_rule(documents, 2000, rng.choice(PATTERNS), ["<|endoftext|>"])


# ------------------------------------------------------------------------------------ threads


def test_one_thread_and_two_threads_learn_the_same_model(tmp_path: Path) -> None:
    documents = tie_corpus(7, 2000, ["<|endoftext|>"]) * 3
    path = tmp_path / "corpus.txt"
    path.write_text("".join(documents * 25), encoding="utf-8", newline="")  # files are cut into chunks
    for corpus in (documents, path):
        one, two = (hf_bpe.train(corpus, 1500, special_tokens=["<|endoftext|>"], num_threads=threads,
                                 show_progress=False) for threads in (1, 2))
        assert one.mergeable_ranks == two.mergeable_ranks and one.special_tokens == two.special_tokens


PARALLEL_MERGE_WORDS = 1024
"""crates/core/src/tuning.rs: a merge whose pair is in at least this many pieces runs on several threads."""


def pieces_per_byte_pair(counts: PieceCounts) -> Counter[bytes]:
    """How many distinct pieces hold each pair of adjacent bytes (what the first merges' word lists hold)."""
    held: Counter[bytes] = Counter()
    for piece in counts.to_dict():
        data = piece if isinstance(piece, bytes) else piece.encode("utf-8")
        held.update({data[i:i + 2] for i in range(len(data) - 1)})
    return held


@pytest.mark.slow
def test_merges_on_several_threads_are_the_merges_of_one_thread() -> None:
    """The merges of pairs found in many pieces run on ``num_threads`` threads; the merges, in order, are
    those of one thread: on tie-heavy text with pairs in thousands of pieces (checked, so that the threaded
    merges really run), and on the shared corpora at a large vocabulary."""
    tables = []  # (table, vocabulary size, numbers of threads)
    documents = textgen.tie_documents(random.Random(22), words=scaled(12_000), documents=16,
                                      special_tokens=["<|endoftext|>"])
    tables.append((count_pieces(documents, pattern="cl100k", special_tokens=["<|endoftext|>"],
                                       show_progress=False), 256 + 4000, (1, 2, 3)))
    corpora = sorted(path for path in require_shared("corpora").glob("*.txt") if "COPYING" not in path.name)
    tables.append((count_pieces(files=corpora, pattern="cl100k", show_progress=False),
                   min(131_072, 256 + scaled(20_000)), (1, 2)))
    for counts, vocab_size, threads in tables:
        assert pieces_per_byte_pair(counts).most_common(1)[0][1] >= PARALLEL_MERGE_WORDS
        one, *others = (train_from_counts(counts, vocab_size, show_progress=False, num_threads=number)
                        for number in threads)
        assert len(one.merges) == vocab_size - 256 - len(counts.special_tokens)
        for number, other in zip(threads[1:], others):
            assert other.merges == one.merges, f"{number} threads"


# --------------------------------------------------------------------- newer Unicode than tiktoken's


@pytest.mark.parametrize("pattern", NAMED)
def test_counting_follows_tiktoken_where_the_regex_module_knows_newer_characters(
    tiktoken_offline: Any, pattern: str
) -> None:
    """On the characters only the ``regex`` module knows (Unicode after 16.0), training cuts text as
    tiktoken and the trained model's own encoder do: "a" + char + "a" is one piece exactly when tiktoken,
    given it as a token, encodes it as one."""
    chars = sorted(regex_only_code_points())
    probes = ["a" + chr(code) + "a" for code in chars]
    ranks = {bytes([byte]): byte for byte in range(256)}
    ranks.update((probe.encode("utf-8"), 256 + i) for i, probe in enumerate(probes))
    theirs = tiktoken_offline.Encoding(name="probe", pat_str=patterns.resolve(pattern), mergeable_ranks=ranks,
                                       special_tokens={})
    whole_in_tiktoken = [len(ids) == 1 for ids in theirs.encode_ordinary_batch(probes)]
    counts = count_pieces(probes, pattern=pattern, show_progress=False)
    whole_here = [counts[probe] == 1 for probe in probes]
    differ = [hex(code) for code, a, b in zip(chars, whole_in_tiktoken, whole_here) if a != b]
    assert not differ, f"{len(differ)} characters are cut unlike tiktoken: {differ[:10]}"
    whole_in_regex = naive_pieces(probes, patterns.resolve(pattern), [])
    assert sum(whole_in_regex[probe.encode()] == 1 for probe in probes) > sum(whole_here), (
        "the regex module no longer reads newer characters as letters: the exclusion may be dropped")
