"""Merges-list models (``BPE.from_merges``) against HF `tokenizers`' BPE on random merges lists, and
the rule comparisons that conversions rely on: when ``rank_rule_difference()`` is ``None`` tiktoken's
rank rule encodes exactly as the list, when ``merge_rule_difference()`` is ``None`` the recovered
list encodes exactly as the rank model."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest
from conversion_support import scaled

from hf_bpe import BPE, _rules, patterns
from hf_bpe._byte_level import token_to_str
from hf_bpe.errors import InvalidVocabularyError

tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is an oracle; pip install -e '.[test]'")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is an oracle; pip install -e '.[test]'")

BYTES = {bytes([byte]): byte for byte in range(256)}
ALPHABET = b"abcde "


def random_merges(rng: random.Random, count: int, *, proper: bool) -> tuple[dict[bytes, int], list[tuple[bytes, bytes]]]:
    """A vocabulary over a small alphabet and a merges list making its tokens. ``proper`` lists only
    join tokens made earlier, like a trainer; otherwise lines come in any order, some pairs twice,
    and some tokens get no line."""
    vocab = dict(BYTES)
    pool = [bytes([byte]) for byte in ALPHABET]
    merges: list[tuple[bytes, bytes]] = []
    while len(merges) < count:
        left, right = rng.choice(pool), rng.choice(pool)
        token = left + right
        if len(token) > 8:
            continue
        if token not in vocab:
            vocab[token] = len(vocab)
            pool.append(token)
        elif proper:
            continue
        merges.append((left, right))
    if not proper:
        rng.shuffle(merges)
        for _ in range(count // 10):  # tokens that no line makes
            token = bytes(rng.choice(ALPHABET) for _ in range(rng.randint(2, 5)))
            vocab.setdefault(token, len(vocab))
    return vocab, merges


def renumbered_merges(rng: random.Random, count: int) -> tuple[dict[bytes, int], list[tuple[bytes, bytes]]]:
    """Lines in any order (a line may join tokens that only later lines make), ids in line order,
    so merge order and id order agree; plus tokens that no line makes."""
    _, merges = random_merges(rng, count, proper=False)
    vocab = dict(BYTES)
    unique: list[tuple[bytes, bytes]] = []
    for left, right in merges:
        if left + right not in vocab:
            vocab[left + right] = len(vocab)
            unique.append((left, right))
    for left, right in unique:  # every token a line names must exist
        for part in (left, right):
            vocab.setdefault(part, len(vocab) + 1000)
    for _ in range(count // 10):
        vocab.setdefault(bytes(rng.choice(ALPHABET) for _ in range(rng.randint(2, 5))), len(vocab) + 2000)
    return vocab, unique


def hf_tokenizer(vocab: dict[bytes, int], merges: list[tuple[bytes, bytes]], ignore_merges: bool):
    spelled = {token_to_str(token): token_id for token, token_id in vocab.items()}
    model = tokenizers.models.BPE(vocab=spelled, merges=[(token_to_str(a), token_to_str(b)) for a, b in merges],
                                  ignore_merges=ignore_merges)
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    return tokenizer


def random_texts(rng: random.Random, count: int) -> list[str]:
    return ["".join(rng.choice("abcde abcde.\n") for _ in range(rng.randint(0, 40))) for _ in range(count)]


CASES = scaled(60, minimum=10)


@pytest.mark.slow
@pytest.mark.parametrize("proper", [True, False], ids=["trained-like", "any-order"])
@pytest.mark.parametrize("ignore_merges", [False, True])
def test_merges_lists_encode_like_tokenizers(proper: bool, ignore_merges: bool) -> None:
    rng = random.Random(hash((proper, ignore_merges)) & 0xFFFF)
    for case in range(CASES):
        vocab, merges = random_merges(rng, rng.randint(5, 60), proper=proper)
        ours = BPE.from_merges(vocab, merges, "gpt2", ignore_merges=ignore_merges)
        theirs = hf_tokenizer(vocab, merges, ignore_merges)
        texts = random_texts(rng, 100)
        got = ours.encode_ordinary_batch(texts)
        expected = [encoding.ids for encoding in theirs.encode_batch(texts, add_special_tokens=False)]
        assert got == expected, f"case {case}: {merges}"


@pytest.mark.slow
@pytest.mark.parametrize("proper", [True, False], ids=["trained-like", "renumbered"])
@pytest.mark.parametrize("ignore_merges", [False, True])
def test_lists_without_a_rank_rule_difference_encode_like_tiktoken(proper: bool, ignore_merges: bool) -> None:
    """The proof in ``Model::rank_rule_difference``, checked on random lists."""
    rng = random.Random(17 + proper + 2 * ignore_merges)
    equivalent = 0
    for case in range(CASES * 3):
        count = rng.randint(5, 60)
        vocab, merges = random_merges(rng, count, proper=True) if proper else renumbered_merges(rng, count)
        ours = BPE.from_merges(vocab, merges, "gpt2", ignore_merges=ignore_merges)
        if _rules.rank_rule_difference(ours) is not None:
            continue
        equivalent += 1
        theirs = tiktoken.Encoding("random", pat_str=patterns.GPT2, mergeable_ranks=vocab, special_tokens={})
        texts = random_texts(rng, 100)
        assert ours.encode_ordinary_batch(texts) == theirs.encode_ordinary_batch(texts), f"case {case}: {merges}"
    assert equivalent >= CASES // 10, "too few random lists were rank-equivalent to test anything"


@pytest.mark.slow
def test_recovered_merges_encode_like_the_rank_model_when_no_difference_is_reported() -> None:
    rng = random.Random(5)
    checked = 0
    for case in range(CASES * 2):
        vocab, _ = random_merges(rng, rng.randint(5, 60), proper=False)
        ranks = BPE(vocab, "gpt2")
        for ignore_merges in (False, True):
            if _rules.merge_rule_difference(ranks, ignore_merges) is not None:
                continue
            checked += 1
            theirs = hf_tokenizer(vocab, ranks.merges, ignore_merges)
            texts = random_texts(rng, 100)
            expected = [encoding.ids for encoding in theirs.encode_batch(texts, add_special_tokens=False)]
            assert ranks.encode_ordinary_batch(texts) == expected, f"case {case}, ignore_merges={ignore_merges}"
    assert checked >= CASES // 2


def test_a_list_that_tiktoken_would_apply_differently_is_reported() -> None:
    """pq + bc spell the token pqbc, but no line joins them: tiktoken's rule would."""
    vocab = BYTES | {b"bc": 256, b"pq": 257, b"pqb": 258, b"pqbc": 259}
    merges = [(b"b", b"c"), (b"p", b"q"), (b"pq", b"b"), (b"pqb", b"c")]
    model = BPE.from_merges(vocab, merges, "gpt2")
    assert "merge to b'pq' + b'bc'" in _rules.rank_rule_difference(model)
    assert model.encode_ordinary("pqbc") == [257, 256]
    assert BPE(vocab, "gpt2").encode_ordinary("pqbc") == [259]


def test_merges_models_persist_and_compare(tmp_path: Path) -> None:
    vocab = BYTES | {b"ab": 256, b"bc": 257, b"abc": 258}
    model = BPE.from_merges(vocab, [(b"a", b"b"), (b"ab", b"c")], "cl100k", {"<|end|>": 300}, ignore_merges=True,
                            name="m")
    assert model.kind == "merges" and _rules.ignore_merges(model) is True
    assert model.merges == [(b"a", b"b"), (b"ab", b"c")]
    assert model.mergeable_ranks == vocab
    for copy in (BPE.load(model.save(tmp_path / "m.json")), pickle.loads(pickle.dumps(model))):
        assert copy == model and copy.kind == "merges" and copy.name == "m"
        assert copy.encode("bc abc<|end|>", allowed_special="all") == [257, 32, 258, 300]
    assert model != BPE.from_merges(vocab, [(b"a", b"b"), (b"ab", b"c")], "cl100k", {"<|end|>": 300})
    assert "merges" in repr(model)


def test_bad_merges_are_rejected() -> None:
    vocab = BYTES | {b"ab": 256}
    with pytest.raises(InvalidVocabularyError, match="must be a pair of tokens of the vocabulary"):
        BPE.from_merges(vocab, [(b"a", b"zz")], "gpt2")
    with pytest.raises(InvalidVocabularyError, match="makes b'xy', which is not a token"):
        BPE.from_merges(vocab, [(b"x", b"y")], "gpt2")
