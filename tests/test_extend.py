"""``hf_bpe.extend`` equals its references (``tests/support/naive_extend_bpe.py``: recount every pair after each merge,
from the existing model's encoding of each piece; ``tests/support/naive_extend_sentencepiece.py``: SentencePiece's
loop continued) on text full of ties and on the shared corpora, for rank models, merges-list models (ids in any
order, holes, special tokens kept or moved) and SentencePiece BPE models; every old token keeps
its id and bytes and every old merge its place; text without the new tokens' bytes encodes as before; and the
saved folder loads with ``AutoTokenizer`` in a fresh process without hf_bpe and gives our ids."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive_bpe import regex_only_code_points
from naive_extend_bpe import continue_merges, extend_merges_model, extend_rank_model
from naive_extend_sentencepiece import continue_sentencepiece, simple_words, valid_piece
from suite import FULL_SIZE, SHARED_DATA, require_shared, scaled

import hf_bpe
from hf_bpe import patterns
from hf_bpe.extend import extend
from hf_bpe.sentencepiece_bpe import NORMAL

BYTES = {bytes([byte]): byte for byte in range(256)}
PATTERNS = [patterns.GPT2, patterns.CL100K, patterns.O200K]
SPECIAL_TOKENS = [[], ["<|endoftext|>"], ["<|endoftext|>", "<|im_start|>"]]


def tie_corpus(seed: int, words: int, special_tokens: list[str]) -> list[str]:
    return textgen.tie_documents(random.Random(seed), words=words, special_tokens=special_tokens,
                                 excluded=regex_only_code_points())


def base_model(documents: list[str], pattern: str, special_tokens: list[str], merges: int, *, hole: bool = False,
               shuffled: random.Random | None = None) -> tuple[dict[bytes, int], list[tuple[bytes, bytes]],
                                                              dict[str, int]]:
    """A model trained by DESIGN.md §3's rule (vocabulary, merges list, special tokens); with ``hole`` the
    special tokens sit one id after a hole, as cl100k's; with ``shuffled`` the ids are a random
    permutation (as GPT-2's files, whose single bytes are not ids 0-255)."""
    model = hf_bpe.train(documents, 256 + len(special_tokens) + merges, pattern=pattern,
                         special_tokens=special_tokens, show_progress=False)
    ranks = model.mergeable_ranks
    merge_list = model.merges
    if shuffled is not None:
        order = list(ranks)
        shuffled.shuffle(order)
        ranks = {token: i for i, token in enumerate(order)}
    start = len(ranks) + hole
    return ranks, merge_list, {token: start + i for i, token in enumerate(special_tokens)}


def assert_rank_model_equals_reference(ranks: dict[bytes, int], specials: dict[str, int], pattern: str,
                                       documents: list[str], more: int) -> None:
    model = hf_bpe.BPE(ranks, pattern, specials)
    for move in (False, True):
        expected = extend_rank_model(ranks, specials, pattern, documents, more, move_special_tokens=move)
        with _quiet():
            result = extend(model, documents, more, move_special_tokens=move, show_progress=False)
        extended, id_map = result if move else (result, expected.special_id_map)
        assert extended.kind == "ranks"
        assert extended.mergeable_ranks == expected.ranks
        assert extended.special_tokens == expected.special_tokens
        assert id_map == expected.special_id_map


def assert_merges_model_equals_reference(vocab: dict[bytes, int], merges: list[tuple[bytes, bytes]],
                                         specials: dict[str, int], pattern: str, documents: list[str],
                                         more: int) -> None:
    model = hf_bpe.BPE.from_merges(vocab, merges, pattern, specials)
    for move in (False, True):
        expected = extend_merges_model(vocab, merges, specials, pattern, documents, more, move_special_tokens=move)
        with _quiet():
            result = extend(model, documents, more, move_special_tokens=move, show_progress=False)
        extended, id_map = result if move else (result, expected.special_id_map)
        assert extended.kind == "merges"
        assert extended.mergeable_ranks == expected.vocab
        assert extended.merges == expected.merges
        assert extended.special_tokens == expected.special_tokens
        assert id_map == expected.special_id_map


@contextmanager
def _quiet() -> Iterator[None]:
    """Ignore the "fewer tokens than asked" warning of tiny corpora (tested apart)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="the corpus allows only")
        yield


# --------------------------------------------------------------------------- fast == reference


@settings(max_examples=scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), pattern=st.sampled_from(PATTERNS), special_tokens=st.sampled_from(SPECIAL_TOKENS),
       before=st.integers(0, 60), more=st.integers(0, 50), hole=st.booleans(), words=st.integers(1, 50))
def test_a_rank_model_extends_as_the_reference_on_text_full_of_ties(
    seed: int, pattern: str, special_tokens: list[str], before: int, more: int, hole: bool, words: int
) -> None:
    ranks, _, specials = base_model(tie_corpus(seed, 40, special_tokens), pattern, special_tokens, before, hole=hole)
    assert_rank_model_equals_reference(ranks, specials, pattern, tie_corpus(seed + 1, words, special_tokens), more)


@settings(max_examples=scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), pattern=st.sampled_from(PATTERNS), special_tokens=st.sampled_from(SPECIAL_TOKENS),
       before=st.integers(0, 60), more=st.integers(0, 50), hole=st.booleans(), shuffle=st.booleans())
def test_a_merges_list_model_extends_as_the_reference_on_text_full_of_ties(
    seed: int, pattern: str, special_tokens: list[str], before: int, more: int, hole: bool, shuffle: bool
) -> None:
    vocab, merges, specials = base_model(tie_corpus(seed, 40, special_tokens), pattern, special_tokens, before,
                                         hole=hole, shuffled=random.Random(seed) if shuffle else None)
    assert_merges_model_equals_reference(vocab, merges, specials, pattern, tie_corpus(seed + 1, 40, special_tokens),
                                         more)


@settings(max_examples=scaled(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), extra=st.lists(st.text("abcd", min_size=2, max_size=5), max_size=12),
       more=st.integers(0, 30), as_merges=st.booleans())
def test_vocabularies_no_training_makes_extend_as_the_reference(
    seed: int, extra: list[str], more: int, as_merges: bool
) -> None:
    """Tokens added in any order, so that a piece's encoding is not a training state: the rank rule's
    whole pieces and leftmost-lowest merges, and merges lists that reach a token another way."""
    rng = random.Random(seed)
    ranks = dict(BYTES)
    for token in dict.fromkeys(extra):
        ranks.setdefault(token.encode(), len(ranks))
    documents = [" ".join("".join(rng.choices("abcd", k=rng.randint(1, 8))) for _ in range(rng.randint(1, 30)))
                 for _ in range(3)]
    if not as_merges:
        assert_rank_model_equals_reference(ranks, {}, r"\w+| ", documents, more)
        return
    # Each token's merge: a split into two tokens, drawn at random (not always its own training's).
    merges = []
    for token in ranks:
        splits = [(token[:i], token[i:]) for i in range(1, len(token)) if token[:i] in ranks and token[i:] in ranks]
        if splits:
            merges.append(rng.choice(splits))
    rng.shuffle(merges)
    assert_merges_model_equals_reference(ranks, merges, {}, r"\w+| ", documents, more)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
def test_named_encodings_extend_as_the_reference_on_a_shared_corpus(name: str) -> None:
    """gpt2 (a rank model here) and cl100k on a slice of Greek Wikipedia, which their vocabularies split
    into many tokens; also gpt2 as the merges list ``tokenizer.json`` holds."""
    [(_, documents)] = textgen.corpus_documents([require_shared("corpora", "wiki_el.txt")], random.Random(name),
                                                limit_bytes=scaled(4_000))
    model = hf_bpe.get_encoding(name)
    ranks = model.mergeable_ranks
    assert_rank_model_equals_reference(ranks, model.special_tokens, model.pattern, documents, 40)
    if name == "gpt2":
        assert_merges_model_equals_reference(ranks, model.merges, model.special_tokens, model.pattern, documents, 40)


@pytest.mark.slow
@pytest.mark.parametrize(("corpus_bytes", "seeds"), [pytest.param(scaled(5_000), scaled(3), id="ci"),
                                                     pytest.param(scaled(20_000), scaled(20), id="full",
                                                                  marks=FULL_SIZE)])
def test_extending_equals_the_reference_on_the_shared_corpora_and_ties(corpus_bytes: int, seeds: int) -> None:
    """Each shared corpus, then tie-heavy text with each pattern and each set of special tokens (the
    seeds take them in turn)."""
    rng = random.Random(627)
    for path in ["corpora/wiki_ja.txt", "cs336/corpus.en", "corpora/wiki_el.txt", "corpora/taylorswift.txt"]:
        if not (SHARED_DATA / path).exists():
            continue
        [(_, documents)] = textgen.corpus_documents([SHARED_DATA / path], rng, limit_bytes=corpus_bytes)
        pattern = rng.choice(PATTERNS)
        vocab, merges, specials = base_model(documents[: len(documents) // 2 + 1], pattern, ["<|endoftext|>"], 200,
                                             hole=True)
        assert_rank_model_equals_reference(vocab, specials, pattern, documents, 150)
        assert_merges_model_equals_reference(vocab, merges, specials, pattern, documents, 150)
    for seed in range(seeds):
        special_tokens = SPECIAL_TOKENS[seed % 3]
        pattern = PATTERNS[seed % 3]
        vocab, merges, specials = base_model(tie_corpus(seed, 150, special_tokens), pattern, special_tokens, 150,
                                             shuffled=random.Random(seed))
        other = tie_corpus(seed + 1, 150, special_tokens)
        assert_rank_model_equals_reference(vocab, specials, pattern, other, 200)
        assert_merges_model_equals_reference(vocab, merges, specials, pattern, other, 200)


def test_the_reference_from_single_bytes_is_hf_bpe_train() -> None:
    """The loop behind ``extend`` from the 256 bytes is training: ``extend`` of a bytes-only model learns
    ``hf_bpe.train``'s tokens (the reference's own proof is ``tests/test_naive_extend_bpe.py``)."""
    documents = tie_corpus(11, 60, ["<|endoftext|>"])
    bytes_only = hf_bpe.BPE(BYTES, "gpt2", {"<|endoftext|>": 256})
    trained = hf_bpe.train(documents, 257 + 80, special_tokens=["<|endoftext|>"], show_progress=False)
    with _quiet():
        extended, _ = extend(bytes_only, documents, 80, move_special_tokens=True, show_progress=False)
    assert extended.mergeable_ranks == trained.mergeable_ranks
    assert extended.special_tokens == trained.special_tokens


# --------------------------------------------------------------------------------- ids never move


@pytest.fixture(scope="module")
def greek() -> dict[str, Any]:
    """cl100k extended by 150 tokens learned on Greek Wikipedia; held-out Greek and English."""
    text = require_shared("corpora", "wiki_el.txt").read_text(encoding="utf-8")
    cut = len(text) * 3 // 4
    train, held_out = text[cut - scaled(200_000):cut], text[cut:cut + scaled(50_000)]
    english = require_shared("corpora", "taylorswift.txt").read_text(encoding="utf-8")
    model = hf_bpe.get_encoding("cl100k_base")
    return {"model": model, "extended": extend(model, [train], 150, show_progress=False), "held_out": held_out,
            "english": english}


def test_old_tokens_keep_their_ids_and_english_encodes_as_before(greek: dict[str, Any]) -> None:
    model, extended = greek["model"], greek["extended"]
    old, new = model.mergeable_ranks, extended.mergeable_ranks
    assert {token: new[token] for token in old} == old
    assert extended.special_tokens == model.special_tokens
    added = sorted(set(new.values()) - set(old.values()))
    assert added == list(range(100277, 100277 + 150))
    assert all(new_token.decode("utf-8", "ignore") for new_token in new if new[new_token] in added)
    assert extended.encode_ordinary(greek["english"]) == model.encode_ordinary(greek["english"])


def test_held_out_greek_takes_fewer_tokens_and_decodes_back(greek: dict[str, Any]) -> None:
    model, extended, text = greek["model"], greek["extended"], greek["held_out"]
    before, after = model.encode_ordinary(text), extended.encode_ordinary(text)
    assert extended.decode(after) == text
    assert len(after) < len(before) * 0.9, (len(before), len(after))
    assert max(after) > 100276


def test_moving_the_special_tokens_fills_the_holes_and_returns_the_map(greek: dict[str, Any]) -> None:
    model = greek["model"]
    moved, id_map = extend(model, [greek["held_out"]], 30, move_special_tokens=True, show_progress=False)
    assert id_map == {100257: 100286, 100258: 100287, 100259: 100288, 100260: 100289, 100276: 100290}
    assert moved.special_tokens == {text: id_map[old] for text, old in model.special_tokens.items()}
    assert sorted(moved.mergeable_ranks.values())[100256:] == list(range(100256, 100286))
    assert moved.encode("<|endoftext|>x", allowed_special="all")[0] == 100286


# ---------------------------------------------------------------------------------- the folder


PROBE = r"""
import json, sys
sys.modules["hf_bpe"] = None  # import hf_bpe fails: the folder must load without it
from transformers import AutoTokenizer

folder, texts_file = sys.argv[1:3]
tokenizer = AutoTokenizer.from_pretrained(folder)
texts = json.load(open(texts_file, encoding="utf-8"))
print("RESULT " + json.dumps({"class": type(tokenizer).__name__,
                              "ids": [tokenizer.encode(text, add_special_tokens=False) for text in texts]}))
"""


@pytest.mark.parametrize("move", [False, True])
def test_the_saved_folder_loads_without_hf_bpe_and_gives_our_ids(greek: dict[str, Any], tmp_path: Path,
                                                                  move: bool) -> None:
    pytest.importorskip("transformers")
    from hf_bpe.transformers import save_tokenizer_folder

    model = greek["model"]
    extended = extend(model, [greek["held_out"]], 40, move_special_tokens=move, show_progress=False)
    if move:
        extended = extended[0]
    save_tokenizer_folder(extended, tmp_path / "folder", eos_token="<|endoftext|>")
    texts = [greek["held_out"][:3000], greek["english"][:3000], "Ελλάδα <|endoftext|> and more"]
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(tmp_path / "folder"),
                           str(tmp_path / "texts.json")], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.rpartition("RESULT ")[2])
    assert result["class"] == "TokenizersBackend"
    assert result["ids"] == [extended.encode(text, allowed_special="all") for text in texts]
    assert any(token > 100276 for token in result["ids"][0])


# --------------------------------------------------------------------------------- edges


def test_a_corpus_that_runs_out_of_pairs_warns_and_learns_what_it_can() -> None:
    model = hf_bpe.BPE(BYTES, r"\w+| ")
    with pytest.warns(UserWarning, match="the corpus allows only 3 new tokens"):
        extended = extend(model, ["abcd abcd"], 10, show_progress=False)
    assert [extended.decode_single_token_bytes(i) for i in range(256, 259)] == [b"cd", b"bcd", b"abcd"]


def test_zero_new_tokens_gives_the_same_model() -> None:
    model = hf_bpe.get_encoding("gpt2")
    same = extend(model, ["hello world"], 0, show_progress=False)
    assert same.mergeable_ranks == model.mergeable_ranks and same.special_tokens == model.special_tokens


@pytest.mark.parametrize(("value", "error", "match"), [
    (None, TypeError, "num_new_tokens is required"),
    (True, TypeError, "must be an int"),
    (-1, ValueError, "0 or more"),
])
def test_a_bad_number_of_tokens_is_refused_by_name(value: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        extend(hf_bpe.BPE(BYTES, "gpt2"), ["text"], value, show_progress=False)


def test_an_empty_corpus_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        extend(hf_bpe.BPE(BYTES, "gpt2", {"<|e|>": 256}), ["<|e|>"], 5, show_progress=False)


def test_a_byte_the_vocabulary_lacks_is_refused_by_name_and_the_model_keeps_lacking_it() -> None:
    """A merges list without ``z`` (``tokenizer.json`` files drop such bytes from text, as ``tokenizers`` does):
    a corpus holding it cannot be encoded by the model's rule; one without it extends the model as it is."""
    vocab = {token: id for token, id in BYTES.items() if token != b"z"}
    model = hf_bpe.BPE.from_merges(vocab, [], r"\w+| ", drop_missing_bytes=True)
    with pytest.raises(ValueError, match="byte 0x7A .* the vocabulary lacks"):
        extend(model, ["lazy lazy"], 3, show_progress=False)
    extended = extend(model, ["abab abab"], 2, show_progress=False)
    assert [extended.decode_single_token_bytes(id) for id in (256, 257)] == [b"ab", b"abab"]
    assert extended.encode_ordinary("az") == extended.encode_ordinary("a")


def test_the_new_tokens_come_from_the_encoding_not_from_training() -> None:
    """The module's example: the rank rule encodes "abc" whole, a merges list reaching it as ``ab`` + ``c``
    does not (``tests/test_naive_extend_bpe.py``, the two rules)."""
    ranks = BYTES | {b"ab": 256, b"bc": 257, b"abc": 258}
    as_ranks = extend(hf_bpe.BPE(ranks, r"\w+| "), ["abc abc abd"], 1, show_progress=False)
    as_merges = extend(hf_bpe.BPE.from_merges(ranks, [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc")], r"\w+| "),
                       ["abc abc abd"], 1, show_progress=False)
    assert as_ranks.decode_single_token_bytes(259) == as_merges.decode_single_token_bytes(259) == b"abd"
    assert as_merges.merges[3:] == [(b"ab", b"c"), (b"ab", b"d")]
    assert continue_merges({b"abd": 1}, lambda piece: [piece[:2], piece[2:]], ranks, 1).tokens == [b"abd"]


# ------------------------------------------------------------------------------- SentencePiece


SP_OPTIONS = {"normalization_rule_name": "identity", "character_coverage": 1.0, "byte_fallback": False}


def sp_tie_sentences(rng: random.Random, words: int) -> list[str]:
    """Sentences of words over a few Latin letters, each repeated 1 to 3 times (ties decide many merges)."""
    letters = rng.sample("abcdefgh", rng.randint(2, 4))
    vocabulary = sorted({"".join(rng.choices(letters, k=rng.randint(1, 7))) for _ in range(words)})
    occurrences = [word for word in vocabulary for _ in range(rng.choice([1, 2, 3]))]
    rng.shuffle(occurrences)
    sentences, start = [], 0
    while start < len(occurrences):
        size = rng.randint(1, 8)
        sentences.append(" ".join(occurrences[start:start + size]))
        start += size
    return sentences


def assert_sentencepiece_equals_reference(base: hf_bpe.BPE, sentences: list[str], more: int,
                                          max_length: int = 16) -> None:
    spec = base.sentencepiece
    assert spec is not None
    normal = {piece.text: piece.score for piece in spec.pieces if piece.type == NORMAL}
    expected = continue_sentencepiece(simple_words(sentences), normal, more,
                                      lambda text: valid_piece(text, max_length))
    with _quiet():
        extended = extend(base, sentences, more, show_progress=False)
    assert extended.kind == "sentencepiece" and extended.sentencepiece is not None
    pieces = extended.sentencepiece.pieces
    assert pieces[:len(spec.pieces)] == spec.pieces
    assert [(piece.text, piece.score) for piece in pieces[len(spec.pieces):]] == expected
    assert all(piece.type == NORMAL for piece in pieces[len(spec.pieces):])


@settings(max_examples=scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32), words=st.integers(3, 60), before=st.integers(0, 40), more=st.integers(0, 30),
       max_length=st.sampled_from([16, 3, 5]))
def test_a_sentencepiece_model_extends_as_the_reference_on_text_full_of_ties(
    seed: int, words: int, before: int, more: int, max_length: int
) -> None:
    rng = random.Random(seed)
    sentences = sp_tie_sentences(rng, words)
    characters = len(set("".join(sentences)) - {" "}) + 1  # and "▁"
    with _quiet():
        try:
            base = hf_bpe.train_sentencepiece(sentences, 3 + characters + before, show_progress=False,
                                              max_sentencepiece_length=max_length, **SP_OPTIONS)
        except ValueError as error:  # fewer pairs than pieces asked: SentencePiece refuses alike
            assert "Vocabulary size too high" in str(error), error
            return
    assert_sentencepiece_equals_reference(base, sp_tie_sentences(rng, words), more, max_length)


def test_a_sentencepiece_model_extends_as_the_reference_on_a_shared_corpus() -> None:
    """Trained on one slice of Shakespeare reduced to lowercase words, extended on the next."""
    text = require_shared("corpora", "shakespeare_milton.txt").read_text(encoding="utf-8")
    slices = [text[start:start + scaled(8_000)] for start in (200_000, 300_000)]
    first, second = ([" ".join(re.findall("[a-z]+", line.lower())) for line in part.splitlines()] for part in slices)
    base = hf_bpe.train_sentencepiece([line for line in first if line], 200, show_progress=False, **SP_OPTIONS)
    assert_sentencepiece_equals_reference(base, [line for line in second if line], 80)


def test_an_extended_sentencepiece_model_encodes_as_sentencepiece_and_saves_its_vocab_size(tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    pytest.importorskip("sentencepiece.sentencepiece_model_pb2", reason="reading .model files needs protobuf")
    import conversion.sentencepiece
    from hf_bpe.train_sentencepiece import read_trainer_spec

    rng = random.Random(5)
    base = hf_bpe.train_sentencepiece(sp_tie_sentences(rng, 60), 40, show_progress=False, **SP_OPTIONS)
    other = sp_tie_sentences(random.Random(5), 300)  # the same letters, more words
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extended = extend(base, other, 20, show_progress=False)
    assert extended.n_vocab == base.n_vocab + 20
    assert extended.sentencepiece is not None
    assert read_trainer_spec(extended.sentencepiece.trainer_spec)["vocab_size"] == extended.n_vocab
    path = tmp_path / "extended.model"
    conversion.sentencepiece.save(extended, path)
    processor = spm.SentencePieceProcessor(model_file=str(path))
    assert processor.vocab_size() == extended.n_vocab
    for sentence in other:
        assert processor.encode(sentence) == extended.encode(sentence), sentence
    with pytest.raises(ValueError, match="drop move_special_tokens"):
        extend(base, other, 5, move_special_tokens=True, show_progress=False)


@pytest.mark.slow
@pytest.mark.parametrize(("corpus_chars", "seeds"), [pytest.param(scaled(15_000), scaled(5), id="ci"),
                                                     pytest.param(scaled(60_000), scaled(30), id="full",
                                                                  marks=FULL_SIZE)])
def test_sentencepiece_extends_as_the_reference_on_shakespeare_and_ties(corpus_chars: int, seeds: int) -> None:
    """Shakespeare's words with the longest pieces of 16 and of 4 characters, then tie-heavy text."""
    text = require_shared("corpora", "shakespeare_milton.txt").read_text(encoding="utf-8")
    slices = [text[start:start + corpus_chars] for start in (1_000_000, 2_000_000)]
    first, second = ([" ".join(re.findall("[a-z]+", line.lower())) for line in part.splitlines()] for part in slices)
    for max_length in (16, 4):
        base = hf_bpe.train_sentencepiece([line for line in first if line], 600, show_progress=False,
                                          max_sentencepiece_length=max_length, **SP_OPTIONS)
        assert_sentencepiece_equals_reference(base, [line for line in second if line], 300, max_length)
    for seed in range(seeds):
        rng = random.Random(seed)
        sentences = sp_tie_sentences(rng, 150)
        with _quiet():
            try:
                base = hf_bpe.train_sentencepiece(sentences, 60, show_progress=False, **SP_OPTIONS)
            except ValueError as error:  # fewer pairs than pieces asked: SentencePiece refuses alike
                assert "Vocabulary size too high" in str(error), error
                continue
        assert_sentencepiece_equals_reference(base, sp_tie_sentences(rng, 150), 60)
