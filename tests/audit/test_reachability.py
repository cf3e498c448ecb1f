"""Reachability (``hf_bpe.audit._reachability``): hand-built vocabularies whose unreachable tokens are known
(each with the reason), and the derived verdicts against brute force: every string up to a few characters
over the vocabulary's alphabet, encoded, must produce no token the audit calls unreachable.

Soundness of the other direction needs no enumeration: every reachable verdict carries a witness text,
and the tests encode each witness (with hf_bpe and, for real vocabularies, with the library that owns
the format) to check that it produces the token."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable

import pytest
from audit_vocabularies import (
    ALPHABET,
    BYTES,
    NEVER_UTF8,
    hand_built_ranks,
    hand_built_sentencepiece,
    random_rank_model,
    random_tokens,
)
from conversion_support import mistral_file
from suite import scaled

from hf_bpe import BPE, patterns
from hf_bpe.audit import _reachability as reach
from hf_bpe.audit import _utf8
from hf_bpe.sentencepiece_bpe import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED, Piece, SentencePieceSpec


def ids_produced(model: BPE, alphabet: Iterable[str], longest: int) -> set[int]:
    """Every id in the encoding of every string of 1 to ``longest`` characters over ``alphabet``."""
    alphabet = list(alphabet)
    seen: set[int] = set()
    for length in range(1, longest + 1):
        texts = ["".join(chars) for chars in itertools.product(alphabet, repeat=length)]
        for start in range(0, len(texts), 50_000):
            for ids in model.encode_ordinary_batch(texts[start : start + 50_000]):
                seen.update(ids)
    return seen


def check_witnesses(model: BPE, found: reach.Reachability) -> None:
    reachable = [verdict for verdict in found.verdicts.values() if verdict.reachable]
    encoded = model.encode_ordinary_batch([verdict.witness or "" for verdict in reachable])
    wrong = [verdict for verdict, ids in zip(reachable, encoded) if verdict.id not in ids]
    assert not wrong, f"witnesses that do not produce their token: {wrong[:5]}"


def assert_agrees_with_brute_force(model: BPE, alphabet: list[str], longest: int) -> reach.Reachability:
    found = reach.reachability(model)
    check_witnesses(model, found)
    produced = ids_produced(model, alphabet, longest)
    wrong = sorted(id for id in produced if id in found.verdicts and not found.verdicts[id].reachable)
    assert not wrong, [(id, model.decode_single_token_bytes(id), found.verdicts[id]) for id in wrong]
    # Unreachable tokens are unreachable for every text, so within the bound too. (The converse,
    # that brute force sees every reachable token, holds only for witnesses within the bound: a
    # witness may be longer, or use characters outside the alphabet; each was encoded above.)
    return found


# ------------------------------------------------------------------------------------- hand built

def test_hand_built_rank_vocabulary_has_exactly_the_known_unreachable_tokens() -> None:
    ranks, expected = hand_built_ranks()
    model = BPE(ranks, "gpt2")
    found = reach.reachability(model)
    check_witnesses(model, found)
    by_bytes = {model.decode_single_token_bytes(id): found.verdicts[id].reason for id in found.unreachable}
    assert by_bytes == expected
    assert found.intermediate == {ranks[b" \xd0"]}
    assert found.verdicts[ranks[b"abcd"]].witness == "abcd"  # the whole-piece rule
    assert found.verdicts[ranks[b"\xb1!"]].reachable and found.verdicts[ranks[b"\xa9\xd0"]].reachable
    # The same pattern spelled so that no scanner runs it: no split check, so the bounded neighbour
    # search looks for "a b" with neighbours, finds no witness within its bounds, and says so.
    respelled = BPE(ranks, patterns.GPT2 + "|(?!)")
    assert respelled._core.split_engine == "fancy-regex"
    found = reach.reachability(respelled)
    by_bytes = {model.decode_single_token_bytes(id): found.verdicts[id].reason for id in found.unreachable}
    assert by_bytes == {token: reason for token, reason in expected.items() if token != b"a b"}
    assert found.undecided == [ranks[b"a b"]] and found.verdicts[ranks[b"a b"]].searched > reach.DEFAULT_SEARCH_LIMIT


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_a_merges_list_forms_no_token_whose_bytes_merge_elsewhere_unless_it_ignores_merges(ignore_merges: bool) -> None:
    ranks, expected = hand_built_ranks()
    rank_model = BPE(ranks, "gpt2")
    model = BPE.from_merges(ranks, rank_model.merges, "gpt2", ignore_merges=ignore_merges)
    found = reach.reachability(model)
    check_witnesses(model, found)
    if not ignore_merges:
        expected = expected | {b"abcd": "merges_apart"}  # no whole-piece rule: "abcd" becomes ab + c + d
    assert {model.decode_single_token_bytes(id): found.verdicts[id].reason for id in found.unreachable} == expected


def test_partial_utf8_kinds_follow_the_utf8_definition() -> None:
    ranks, _ = hand_built_ranks()
    kinds = {token: _utf8.kind(token) for token in ranks}
    expected = {bytes([byte]): "continuation" for byte in range(0x80, 0xC0)}
    expected |= {bytes([byte]): "lead" for byte in range(0xC2, 0xF5)}
    expected |= dict.fromkeys(NEVER_UTF8, "invalid")
    expected |= {bytes([lead, 0x90]): "lead" for lead in range(0xF0, 0xF4)}
    expected |= {b" \xd0": "lead", b"\x90\x80": "continuation", b"\x90\x80\x80": "continuation",
                 b"\xb1!": "continuation", b"\xa9\xd0": "mixed", b"\xed\xa0": "invalid"}
    assert {token: kind for token, kind in kinds.items() if kind is not None} == expected


def test_hand_built_sentencepiece_model_has_exactly_the_known_unreachable_pieces() -> None:
    model, expected = hand_built_sentencepiece()
    found = reach.reachability(model)
    check_witnesses(model, found)
    spec = model.sentencepiece
    assert spec is not None
    assert {spec.pieces[id].text: found.verdicts[id].reason for id in found.unreachable} == expected
    assert_agrees_with_brute_force(model, ["a", "b", "c", "d", " ", "é", "x", "<"], 4)


# ------------------------------------------------------------------------------------ brute force

PATTERNS = ["gpt2", "cl100k", "o200k", r"\S+|\s+", r"[a-z]+| ?[^a-z\s]+|\s+(?!\S)|\s"]

LONGEST = 5
"""Brute force encodes every string of 1 to LONGEST characters over the alphabet (11**5 = 161,051 of
length 5 over ALPHABET)."""

# At the default scale (CI) each kind runs one random vocabulary per pattern (three at
# HF_BPE_TEST_SCALE=3), four random SentencePiece models (twelve at 3) and the trained vocabularies of
# two patterns (all five from 3). The real vocabularies (gpt2, cl100k, o200k, Mistral's model) run at
# every scale.


def random_merges_model(rng: random.Random, pattern: str) -> BPE:
    """Tokens each listed with one random split of two earlier tokens, lines sometimes shuffled."""
    vocab = dict(BYTES)
    merges = []
    for token in random_tokens(rng, 120):
        splits = [at for at in range(1, len(token)) if token[:at] in vocab and token[at:] in vocab]
        if token in vocab or not splits:
            continue
        at = rng.choice(splits)
        vocab[token] = len(vocab)
        merges.append((token[:at], token[at:]))
        if len(merges) == 40:
            break
    if rng.random() < 0.3:
        rng.shuffle(merges)
    return BPE.from_merges(vocab, merges, pattern, ignore_merges=rng.random() < 0.5)


SENTENCEPIECE_ALPHABET = ["a", "b", " ", "é", "あ", "1", ".", "ã", "ぃ"]


def random_sentencepiece_model(rng: random.Random) -> BPE:
    """Random pieces and scores over a few characters (some characters not pieces), with or without
    byte fallback, dummy prefix and removal of extra spaces, now and then a user-defined piece."""
    alphabet = ["a", "b", "▁", "é", "あ", "1", "."]
    text = "".join(rng.choice(alphabet) for _ in range(300))
    byte_fallback = rng.random() < 0.5
    pieces = [Piece("<unk>", 0, UNKNOWN), Piece("<s>", 0, CONTROL)]
    if byte_fallback:
        pieces += [Piece(f"<0x{byte:02X}>", 0, BYTE) for byte in range(256)]
    seen = {char for char in alphabet if rng.random() < 0.85}
    pieces += [Piece(char, -rng.random() * 10) for char in sorted(seen)]
    while len(pieces) < 40 + (256 if byte_fallback else 0):
        start = rng.randrange(len(text) - 3)
        piece = text[start : start + rng.randint(2, 3)]
        if piece not in seen:
            seen.add(piece)
            pieces.append(Piece(piece, -rng.random() * 10, USER_DEFINED if rng.random() < 0.03 else NORMAL))
    spec = SentencePieceSpec(tuple(pieces), byte_fallback=byte_fallback, add_dummy_prefix=rng.random() < 0.7,
                             remove_extra_whitespaces=rng.random() < 0.3)
    return BPE.from_sentencepiece(spec)


@pytest.mark.slow
@pytest.mark.parametrize("pattern", PATTERNS)
def test_rank_models_reachability_agrees_with_brute_force(pattern: str) -> None:
    rng = random.Random(f"ranks {pattern}")
    for _ in range(scaled(1)):
        assert_agrees_with_brute_force(random_rank_model(rng, pattern), ALPHABET, LONGEST)


@pytest.mark.slow
@pytest.mark.parametrize("pattern", PATTERNS)
def test_merges_list_models_reachability_agrees_with_brute_force(pattern: str) -> None:
    rng = random.Random(f"merges {pattern}")
    for _ in range(scaled(1)):
        assert_agrees_with_brute_force(random_merges_model(rng, pattern), ALPHABET, LONGEST)


@pytest.mark.slow
def test_sentencepiece_models_reachability_agrees_with_brute_force() -> None:
    rng = random.Random("sentencepiece")
    for _ in range(scaled(4)):
        assert_agrees_with_brute_force(random_sentencepiece_model(rng), SENTENCEPIECE_ALPHABET, LONGEST)


@pytest.mark.slow
def test_trained_vocabularies_reachability_agrees_with_brute_force() -> None:
    """Vocabularies as a trainer makes them (merges of frequent pairs of a random text's pieces)."""
    import hf_bpe

    rng = random.Random("trained")
    for pattern in PATTERNS[: scaled(2)]:
        corpus = ["".join(rng.choice(ALPHABET) for _ in range(60)) for _ in range(50)]
        model = hf_bpe.train(corpus, 256 + 60, pattern=pattern, show_progress=False)
        assert_agrees_with_brute_force(model, ALPHABET, LONGEST)


# ----------------------------------------------------------------------------- real vocabularies


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_real_rank_vocabularies_witnesses_hold_in_tiktoken(name: str, encoding_pair) -> None:  # type: ignore[no-untyped-def]
    ours, theirs = encoding_pair(name)
    found = reach.reachability(ours)
    verdicts = [verdict for verdict in found.verdicts.values() if verdict.reachable]
    # One call per witness: tiktoken's batch call is a thread pool's map, whose task per text cost more than the encoding.
    encoded = [theirs.encode_ordinary(verdict.witness) for verdict in verdicts]
    assert all(verdict.id in ids for verdict, ids in zip(verdicts, encoded))
    # The 13 bytes no UTF-8 text contains are unreachable in all three; so is o200k's "о" + 0xD0.
    unreachable = {ours.decode_single_token_bytes(id) for id in found.unreachable}
    assert set(NEVER_UTF8) <= unreachable
    assert unreachable - set(NEVER_UTF8) == ({b"\xd0\xbe\xd0"} if name == "o200k_base" else set())


@pytest.mark.slow
def test_mistral_sentencepiece_witnesses_hold_in_sentencepiece() -> None:
    sentencepiece = pytest.importorskip("sentencepiece", reason="sentencepiece is the oracle for .model files")
    import conversion.sentencepiece

    path = mistral_file("tokenizer.model.v1")
    ours = conversion.sentencepiece.load(path)
    theirs = sentencepiece.SentencePieceProcessor(model_file=str(path))
    found = reach.reachability(ours)
    verdicts = [verdict for verdict in found.verdicts.values() if verdict.reachable]
    encoded = theirs.encode([verdict.witness for verdict in verdicts])
    assert all(verdict.id in ids for verdict, ids in zip(verdicts, encoded))
    # Byte pieces of characters that are pieces (124 ASCII characters, space, U+0080-U+00FF's
    # leads 0xC2 and 0xC3) and of bytes no UTF-8 text contains are never needed.
    assert {found.verdicts[id].reason for id in found.unreachable} == {"byte_never_needed"}
    assert len(found.unreachable) == 140
