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
from pathlib import Path

import pytest
from audit_vocabularies import (
    ALPHABET,
    BYTES,
    NEVER_UTF8,
    QWEN_SIZE,
    hand_built_ranks,
    hand_built_sentencepiece,
    qwen_shaped_ranks,
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


# ------------------------------------------------------------------------------------- bounds


@pytest.mark.slow
def test_verdicts_within_tight_bounds_agree_with_the_default_search_and_brute_force() -> None:
    """A search bounded to 2 neighbours per side and 16 texts per round decides fewer tokens, and
    every token it decides it decides as the search with the default bounds does (and brute force
    never produces one it calls unreachable)."""
    rng = random.Random("bounds")
    undecided = 0
    for pattern in PATTERNS:
        for _ in range(scaled(2)):
            model = random_rank_model(rng, pattern)
            wide = assert_agrees_with_brute_force(model, ALPHABET, LONGEST)
            tight = reach.reachability(model, neighbour_limit=2, search_limit=16)
            check_witnesses(model, tight)
            assert tight.work.neighbours_per_side == 2 and tight.work.texts_per_round == 16
            for id, verdict in tight.verdicts.items():
                if verdict.reason is not None:
                    assert wide.verdicts[id].reason == verdict.reason, (model.decode_single_token_bytes(id), verdict)
                elif verdict.reachable:
                    assert wide.verdicts[id].reason is None
            assert set(wide.undecided) <= set(tight.undecided)
            undecided += len(tight.undecided) - len(wide.undecided)
    assert undecided > 0  # the bounds bind, so the comparison compares something


def test_a_vocabulary_of_qwens_shape_is_decided_with_work_bounded_by_its_size() -> None:
    """Qwen's 151,643 tokens hold about 1,700 words of a letter and combining marks that its pattern
    always cuts apart; the unbounded search checked every token of the vocabulary as a neighbour of
    each (3e5 pieces merged per token, 5e8 in all). The split check decides them, and the work stays
    a small multiple of the vocabulary's size (counted, not timed)."""
    ranks, marked = qwen_shaped_ranks(random.Random("qwen"))
    assert len(ranks) == QWEN_SIZE and len(marked) > 1_400
    model = BPE(ranks, "qwen2")
    found = reach.reachability(model)
    assert {found.verdicts[ranks[token]].reason for token in marked} == {"never_one_piece"}
    assert found.undecided == [] and set(found.unreachable) == {ranks[token] for token in [*marked, *NEVER_UTF8]}
    work = found.work
    assert work.pieces_merged <= 2 * QWEN_SIZE and work.texts_encoded <= 4 * QWEN_SIZE
    assert work.texts_split <= (1 + len(reach.PROBES)) ** 2 * len(marked) <= 16 * QWEN_SIZE


@pytest.mark.slow
def test_a_vocabulary_of_qwens_shape_without_the_split_check_stays_within_the_budget() -> None:
    """Spelled so that no scanner runs its pattern, the same vocabulary sends every letter-and-mark
    word to the neighbour search: the budget bounds it, and those it cannot decide are undecided."""
    ranks, marked = qwen_shaped_ranks(random.Random("qwen"))
    model = BPE(ranks, patterns.QWEN2 + "|(?!)")
    found = reach.reachability(model)
    work = found.work
    assert work.budget == 8 * QWEN_SIZE and work.texts_split == 0
    share = work.budget // (4 * len(marked))
    assert work.neighbours_per_side == work.texts_per_round == share
    # The passes before the neighbour search: a piece per token, a text per token and its probes.
    assert work.pieces_merged <= QWEN_SIZE + 2 * share * len(marked)
    assert work.texts_encoded <= 2 * QWEN_SIZE + 2 * len(reach.PROBES) * len(marked) + 2 * share * len(marked)
    assert set(found.undecided) == {ranks[token] for token in marked}
    assert set(found.unreachable) == {ranks[token] for token in NEVER_UTF8}


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


@pytest.mark.slow
def test_qwens_and_llama_4s_rank_files_are_decided_with_work_bounded_by_their_size(
        dashscope_files: Path, llama_models_files: Path) -> None:
    import hf_bpe

    qwen = hf_bpe.load(dashscope_files / "dashscope" / "resources" / "qwen.tiktoken")
    llama4 = hf_bpe.load(llama_models_files / "llama_models" / "llama4" / "tokenizer.model")
    never_one_piece = []
    for model in (qwen, llama4):
        found = reach.reachability(model)
        never_one_piece.append(sum(found.verdicts[id].reason == "never_one_piece" for id in found.unreachable))
        check_witnesses(model, found)
        size = len(model.mergeable_ranks)
        work = found.work
        assert work.pieces_merged <= 2 * size and work.texts_encoded <= 4 * size and work.texts_split <= 20 * size
        assert len(found.undecided) <= 2
    assert never_one_piece[0] > 1_600  # Qwen's Thai and Arabic words of letters and marks
