"""The BPE model (``hf_bpe.model``): tiktoken's semantics on random vocabularies, the API contract, bad
input; merges-list models (``BPE.from_merges``) against HF `tokenizers`' BPE on random merges lists,
with the rule comparisons that conversions rely on (when ``rank_rule_difference()`` is ``None``
tiktoken's rank rule encodes exactly as the list, when ``merge_rule_difference()`` is ``None`` the
recovered list encodes exactly as the rank model); and ``BPE.from_vocab`` / ``conversion.gpt2.load``
with a list of special tokens (the shapes minbpe and CS336 hold) and ``model.vocab``: round trips,
CS336's reference merges, and clear errors for inconsistent input."""

from __future__ import annotations

import copy
import json
import pickle
import random
from pathlib import Path

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from suite import forked_child_result, require_shared, scaled

import conversion.gpt2
import hf_bpe
from hf_bpe import BPE, _rules, patterns
from hf_bpe._byte_level import token_to_str
from hf_bpe.errors import (
    DisallowedSpecialTokenError,
    InvalidVocabularyError,
    TokenizerFileError,
    UnknownTokenError,
)
from hf_bpe.model import clear_cache

tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is the oracle; pip install -e '.[test]'")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is an oracle; pip install -e '.[test]'")

BYTES = {bytes([byte]): byte for byte in range(256)}


def random_ranks(seed: int, merges: int, *, holes: bool = False, unreachable: int = 0) -> dict[bytes, int]:
    """Byte-level ranks plus random merges of existing tokens (biased to letters and spaces so they
    fire on text), optionally with id holes and tokens that no merge can reach."""
    rng = random.Random(seed)
    ranks = dict(BYTES)
    tokens = [bytes([byte]) for byte in b" etaoinshrdlucmfwyp\n.,'0123456789"] + [b"\xc3", b"\xa9", b"\xe3"]
    next_id = 256
    while len(ranks) < 256 + merges:
        token = rng.choice(tokens) + rng.choice(tokens)
        if token in ranks or len(token) > 12:
            continue
        ranks[token] = next_id
        tokens.append(token)
        next_id += rng.randint(2, 9) if holes and rng.random() < 0.1 else 1
    for _ in range(unreachable):
        token = bytes(rng.randrange(97, 123) for _ in range(rng.randint(3, 6)))
        if token not in ranks:
            ranks[token] = next_id
            next_id += 1
    return ranks


def pair(ranks: dict[bytes, int], pattern: str, specials: dict[str, int] | None = None):
    specials = specials or {}
    ours = BPE(ranks, pattern, specials, name="random")
    theirs = tiktoken.Encoding("random", pat_str=patterns.resolve(pattern), mergeable_ranks=ranks, special_tokens=specials)
    return ours, theirs


VOCABS = {
    "dense": random_ranks(1, 600),
    "holes": random_ranks(2, 600, holes=True),
    "unreachable": random_ranks(3, 400, unreachable=50),
    "empty token": random_ranks(4, 600, holes=True) | {b"": 2000},  # as Whisper's multilingual.tiktoken
}

text_alphabet = st.characters(codec="utf-8") | st.sampled_from(list(" \n\t\r'etaoinshrdl.0123456789éèー日本"))


@pytest.mark.parametrize("vocab", sorted(VOCABS))
@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet=text_alphabet, max_size=300))
def test_random_vocabularies_encode_like_tiktoken(vocab: str, pattern: str, text: str) -> None:
    ours, theirs = pair(VOCABS[vocab], pattern)
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    assert ours.decode(ours.encode_ordinary(text)) == text


def test_the_empty_token_is_an_id_that_decodes_to_nothing_as_in_tiktoken() -> None:
    """tiktoken takes ``b""`` as a token (Whisper's ``multilingual.tiktoken`` has one): it decodes to
    nothing, ``encode_single_token(b"")`` finds it, and the named patterns never emit it."""
    ours, theirs = pair(VOCABS["empty token"], "gpt2", {"<|end|>": 2001})
    assert (ours.n_vocab, ours.max_token_value) == (theirs.n_vocab, theirs.max_token_value)
    assert ours.token_byte_values() == theirs.token_byte_values() and ours.token_byte_values()[0] == b""
    assert ours.mergeable_ranks == theirs._mergeable_ranks
    for token in (b"", ""):
        assert ours.encode_single_token(token) == theirs.encode_single_token(token) == 2000
    ids = [2000, 104, 2000, 2000, 105, 2001, 2000]
    assert ours.decode_bytes(ids) == theirs.decode_bytes(ids) == b"hi<|end|>"
    assert ours.decode_tokens_bytes(ids) == theirs.decode_tokens_bytes(ids)
    assert ours.decode_single_token_bytes(2000) == theirs.decode_single_token_bytes(2000) == b""
    decoder = ours.stream_decoder()
    assert "".join(decoder.feed(token) for token in ids) + decoder.finish() == "hi<|end|>"
    text = "hello world, 日本語\n\n  the end "
    assert ours.encode(text) == theirs.encode(text) and 2000 not in ours.encode(text)
    assert pickle.loads(pickle.dumps(ours)) == ours


MULTILINGUAL = "ab éñжΩγλ日本語のはがカタ"


def grown_ranks(seed: int, tokens: int, *, shuffled: bool) -> dict[bytes, int]:
    """Byte-level ranks grown from random stretches of multilingual text, as training grows them:
    whole characters, parts of characters and tokens across character edges, each made of two
    earlier tokens; ``shuffled`` deals the merged tokens' ranks out at random."""
    rng = random.Random(seed)
    texts = ["".join(rng.choice(MULTILINGUAL) for _ in range(40)).encode() for _ in range(30)]
    ranks = dict(BYTES)
    grown: list[bytes] = []
    while len(grown) < tokens:
        text = rng.choice(texts)
        length = rng.randint(2, 7)
        start = rng.randrange(len(text) - length)
        candidate, split = text[start:start + length], rng.randint(1, length - 1)
        if candidate[:split] in ranks and candidate[split:] in ranks and candidate not in ranks:
            ranks[candidate] = 256 + len(grown)
            grown.append(candidate)
    if shuffled:
        ids = list(range(256, 256 + len(grown)))
        rng.shuffle(ids)
        ranks.update(zip(grown, ids))
    return ranks


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_characters_merged_up_front_encode_like_tiktoken(seed: int, shuffled: bool) -> None:
    """A character whose bytes provably merge into one token before anything joins them to a
    neighbour starts as that token; vocabularies with and without tokens that cut into characters
    early must still encode exactly as tiktoken does, in short and long pieces."""
    ranks = grown_ranks(seed, 300, shuffled=shuffled)
    rng = random.Random(seed)
    for pattern in ("o200k", r"\S+|\s+"):
        ours, theirs = pair(ranks, pattern)
        for length in (3, 20, 60, 400):
            texts = ["".join(rng.choice(MULTILINGUAL) for _ in range(length)) for _ in range(40)]
            assert ours.encode_ordinary_batch(texts) == theirs.encode_ordinary_batch(texts), (pattern, length)


@pytest.mark.parametrize("length", [2, 127, 128, 129, 1000, 20_000])
def test_long_pieces_merge_like_tiktoken(length: int) -> None:
    """Pieces past the flat-merge threshold take the heap path; both must keep tiktoken's order."""
    ours, theirs = pair(VOCABS["dense"], r"\S+|\s+")
    rng = random.Random(length)
    for alphabet in ("e", "et", "etaoin shrdl", "aé日"):
        text = "".join(rng.choice(alphabet) for _ in range(length))
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), (alphabet, length)


def test_whole_piece_rule_emits_a_token_that_merges_cannot_reach() -> None:
    ranks = dict(BYTES) | {b"ab": 256, b"xyz": 300}
    ours, theirs = pair(ranks, "gpt2")
    assert ours.encode_ordinary("xyz") == [300] == theirs.encode_ordinary("xyz")
    assert ours.encode_ordinary("xyzxyz") == theirs.encode_ordinary("xyzxyz")


@pytest.mark.parametrize("seed", range(4))
def test_whole_pieces_of_every_length_are_looked_up_like_tiktoken(seed: int) -> None:
    """Pieces of up to 15 bytes are looked up whole in one map and longer ones in another: tokens of
    every length around that boundary (some no merge reaches), and pieces one byte off them, must
    encode as tiktoken encodes them."""
    rng = random.Random(seed)
    ranks = dict(VOCABS["dense"])
    next_id = max(ranks.values()) + 1
    words = []
    for length in range(1, 48):
        for _ in range(6):
            word = bytes(rng.choice(b"etaoinshrdl") for _ in range(length))
            words.append(word)
            if word not in ranks and rng.random() < 0.7:
                ranks[word] = next_id
                next_id += 1
    ours, theirs = pair(ranks, r"\S+|\s+")
    texts = [
        " ".join((word + bytes([rng.choice(b"etaoinshrdl")]) * rng.randint(0, 1)).decode() for word in rng.sample(words, 60))
        for _ in range(40)
    ]
    assert ours.encode_ordinary_batch(texts) == theirs.encode_ordinary_batch(texts)


def test_returned_ids_are_ordinary_ints_in_every_block_of_shared_ints() -> None:
    """The ints a list returns are shared, in blocks of 65,536 ids of our own memory (ints.rs): in
    every block (and past the last shared id) each must be an int equal to its id that behaves as
    any int, ids up to 256 must be CPython's own small ints, and lists must own their references to
    those; the blocks' ints are immortal (lists take no reference, and releasing far more lists than
    there are references frees nothing)."""
    import gc
    import sys

    high = {b"ab": 65_535, b"cd": 65_536, b"ef": 140_001, b"gh": (1 << 21) - 1, b"ij": (1 << 21) + 7}
    ours = BPE(BYTES | high, r"\S+|\s+")
    ids = ours.encode_ordinary("ab cd ef gh ij")
    assert ids == [65_535, 32, 65_536, 32, 140_001, 32, (1 << 21) - 1, 32, (1 << 21) + 7]
    for id in ids:
        assert type(id) is int and id == int(str(id)) and hash(id) == hash(int(str(id)))
        assert id + 1 - 1 == id and id.bit_length() == int(str(id)).bit_length()
        assert pickle.loads(pickle.dumps(id)) == id
    space = ours.encode_ordinary(" ")[0]
    assert space is int("32"), "ids up to 256 are CPython's cached small ints"
    again = ours.encode_ordinary("ef ef")
    assert again[0] is again[2] is ours.encode_ordinary("ef")[0], "ids of one value share one int"
    shared = again[0]
    gc.collect()
    gc.disable()  # nothing else may release a reference to the small int meanwhile
    try:
        before, space_before = sys.getrefcount(shared), sys.getrefcount(space)
        held = [ours.encode_ordinary("ef ef ef") for _ in range(100)]
        assert sys.getrefcount(shared) == before, "the blocks' ints are immortal: lists take no reference"
        if sys.version_info < (3, 12):  # CPython's small ints are immortal from 3.12 on
            assert sys.getrefcount(space) - space_before == 200, "lists own their small ints"
        del held
        assert sys.getrefcount(space) == space_before
        assert sys.getrefcount(shared) == (before - 300 if sys.version_info < (3, 12) else before)
    finally:
        gc.enable()
    assert_immortal(ours, "ef", shared)


def assert_immortal(model: BPE, token: str, int_: int) -> None:
    """A million lists holding `int_` (the id of `token`) released, none of whose references were
    taken: the int must still be alive, the same object, with its value, and its count far above
    zero (3.11 counts down from 2**62; 3.12 on, CPython's immortal count stays put)."""
    import sys

    for _ in range(1000):
        model.encode_ordinary(" ".join([token] * 1000))
    assert model.encode_ordinary(token)[0] is int_ and int_ == int(str(int_)) and str(int_) == repr(int_)
    assert sys.getrefcount(int_) > 1 << 31


SPECIALS = {"<|endoftext|>": 1000, "<|fim|>": 1001, "<|a": 1002, "<|a|>": 1003}


@pytest.mark.parametrize(
    ("allowed", "disallowed"),
    [
        (set(), "all"),
        ("all", "all"),
        ({"<|endoftext|>"}, "all"),
        ({"<|endoftext|>"}, ()),
        (set(), ()),
        (set(), {"<|fim|>"}),
        ({"<|fim|>"}, {"hello"}),
    ],
)
@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(["hello", " world", "<|endoftext|>", "<|fim|>", "<|a", "<|a|>", "<|endof", " ", "\n", "é"]),
        max_size=12,
    )
)
def test_special_token_policies_match_tiktoken(allowed, disallowed, parts: list[str]) -> None:
    ranks = random_ranks(4, 300)
    # Overlapping specials ("<|a" / "<|a|>") are only compared where tiktoken's choice is defined.
    specials = {token: id for token, id in SPECIALS.items() if token not in ("<|a", "<|a|>")}
    ours, theirs = pair(ranks, "cl100k", specials)
    text = "".join(parts)
    kwargs = {"allowed_special": allowed, "disallowed_special": disallowed}
    try:
        expected = theirs.encode(text, **kwargs)
    except ValueError:
        with pytest.raises(DisallowedSpecialTokenError):
            ours.encode(text, **kwargs)
        return
    assert ours.encode(text, **kwargs) == expected
    assert ours.encode_batch([text, text], **kwargs) == [expected, expected]


def test_longest_special_token_wins() -> None:
    ours = BPE(BYTES, "gpt2", {"<|a": 300, "<|a|>": 301})
    assert ours.encode("x<|a|>y<|a", allowed_special="all") == [ord("x"), 301, ord("y"), 300]


def test_disallowed_special_token_error_names_the_token() -> None:
    ours = BPE(BYTES, "gpt2", {"<|endoftext|>": 300})
    with pytest.raises(DisallowedSpecialTokenError, match=r"'<\|endoftext\|>'") as raised:
        ours.encode("a <|endoftext|> b")
    assert isinstance(raised.value, ValueError)
    assert "allowed_special" in str(raised.value)
    assert ours.encode_ordinary("<|endoftext|>") == list(b"<|endoftext|>")


def test_unknown_allowed_special_is_rejected() -> None:
    ours = BPE(BYTES, "gpt2", {"<|endoftext|>": 300})
    with pytest.raises(ValueError, match="<|eos|>"):
        ours.encode("x", allowed_special={"<|eos|>"})


@pytest.mark.parametrize(
    "text",
    # ruff's PT014 reads these lone surrogates as duplicates; they are five different strings.
    ["\ud800", "a\udfffb", "\ud83d\ude00", "x\ud83dy", "\udc00\ud800"],  # noqa: PT014
)
def test_lone_surrogates_encode_like_tiktoken(text: str) -> None:
    ours, theirs = pair(VOCABS["dense"], "cl100k")
    assert ours.encode(text) == theirs.encode(text)
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
    assert ours.encode_batch([text]) == [theirs.encode_ordinary(text)]


def test_decode_and_vocabulary_accessors_match_tiktoken() -> None:
    ranks = VOCABS["holes"]
    ours, theirs = pair(ranks, "gpt2", {"<|endoftext|>": max(ranks.values()) + 5})
    ids = ours.encode("the rain in spain <|endoftext|>", allowed_special="all")
    assert ours.decode_bytes(ids) == theirs.decode_bytes(ids)
    assert ours.decode(ids) == theirs.decode(ids)
    assert ours.decode_tokens_bytes(ids) == theirs.decode_tokens_bytes(ids)
    assert ours.token_byte_values() == theirs.token_byte_values()
    assert ours.n_vocab == theirs.n_vocab
    assert ours.max_token_value == theirs.max_token_value
    assert ours.eot_token == theirs.eot_token
    assert ours.special_tokens_set == theirs.special_tokens_set
    assert ours.mergeable_ranks == ranks
    for token in (b"e", b" t", b"<|endoftext|>"):
        if token in ranks or token == b"<|endoftext|>":
            assert ours.encode_single_token(token) == theirs.encode_single_token(token)


def test_decode_with_errors_policy() -> None:
    ours = BPE(BYTES, "gpt2")
    assert ours.decode([0xC3]) == "\ufffd"
    assert ours.decode([0xC3], errors="ignore") == ""
    with pytest.raises(UnicodeDecodeError):
        ours.decode([0xC3], errors="strict")


@pytest.mark.parametrize("bad_id", [5000, -1, 2**40])
def test_unknown_ids_in_decode_name_the_id(bad_id: int) -> None:
    ours = BPE(BYTES | {b"ab": 300}, "gpt2")
    for call in (ours.decode, ours.decode_bytes):
        with pytest.raises(UnknownTokenError, match=str(bad_id)):
            call([97, bad_id])
    with pytest.raises(KeyError):
        ours.decode_single_token_bytes(bad_id)
    # A hole in the ids is unknown too.
    with pytest.raises(UnknownTokenError, match="299"):
        ours.decode([299])


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        ("encode", b"bytes"),
        ("encode", 42),
        ("encode", None),
        ("encode_ordinary", ["a list"]),
        ("encode_batch", "one string"),
        ("encode_batch", ["ok", 3]),
        ("decode", "abc"),
        ("decode", [1.5]),
        ("decode_bytes", None),
        ("encode_single_token", 3),
    ],
)
def test_wrong_types_raise_type_error(call: str, argument: object) -> None:
    ours = BPE(BYTES, "gpt2")
    with pytest.raises(TypeError):
        getattr(ours, call)(argument)


@pytest.mark.parametrize(
    ("ranks", "specials", "message"),
    [
        ({k: v for k, v in BYTES.items() if k != b"q"}, {}, r"single byte b'q'"),
        (BYTES | {b"ab": 97}, {}, "rank 97"),
        (BYTES, {"<s>": 65}, "<s>"),
        (BYTES, {"<s>": 300, "</s>": 300}, "both have id 300"),
        (BYTES, {"": 300}, "empty string"),
        (BYTES | {b"ab": 2**31}, {}, "out of range"),
        (BYTES | {b"ab": -3}, {}, "out of range"),
    ],
)
def test_invalid_vocabularies_are_rejected(ranks, specials, message) -> None:
    with pytest.raises(InvalidVocabularyError, match=message):
        BPE(ranks, "gpt2", specials)


@pytest.mark.parametrize(
    ("ranks", "pattern", "specials"),
    [
        ([(b"a", 1)], "gpt2", None),
        ({"a": 1}, "gpt2", None),
        ({b"a": "1"}, "gpt2", None),
        (BYTES, 3, None),
        (BYTES, "gpt2", ["<s>"]),
        (BYTES, "gpt2", {3: 300}),
    ],
)
def test_wrong_constructor_types_raise_type_error(ranks, pattern, specials) -> None:
    with pytest.raises(TypeError):
        BPE(ranks, pattern, specials)


def test_bad_pattern_is_a_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"\(unclosed"):
        BPE(BYTES, "(unclosed")


def test_catastrophic_pattern_fails_cleanly_instead_of_hanging() -> None:
    ours = BPE(BYTES, r"(?:x?a|a)+(?=\w)!")  # exponential backtracking on "aaa...c"
    with pytest.raises(ValueError, match="split pattern failed"):
        ours.encode_ordinary("a" * 40 + "c")


def test_named_patterns_resolve() -> None:
    assert BPE(BYTES, "cl100k").pattern == patterns.CL100K
    assert BPE(BYTES, "r50k").pattern == patterns.GPT2
    assert BPE(BYTES, "o200k").pattern == patterns.O200K
    assert BPE(BYTES, r"\w+").pattern == r"\w+"


def test_models_survive_pickle_and_deepcopy() -> None:
    ours = BPE(VOCABS["holes"], "cl100k", {"<|endoftext|>": 5000}, name="holes")
    text = "the rain in spain <|endoftext|> falls"
    expected = ours.encode(text, allowed_special="all")
    for clone in (pickle.loads(pickle.dumps(ours)), copy.deepcopy(ours), copy.copy(ours)):
        assert clone == ours
        assert clone.name == "holes"
        assert clone.encode(text, allowed_special="all") == expected


def test_encode_batch_matches_serial_encoding_with_any_thread_count() -> None:
    ours = BPE(VOCABS["dense"], "gpt2")
    rng = random.Random(7)
    texts = ["".join(rng.choice("etaoin shrdlu\n") for _ in range(rng.randint(0, 5000))) for _ in range(64)]
    serial = [ours.encode_ordinary(text) for text in texts]
    assert ours.encode_batch(texts) == serial
    assert ours.encode_ordinary_batch(iter(texts), num_threads=1) == serial
    assert ours.encode_batch(texts, num_threads=3) == serial
    with pytest.raises(ValueError):
        ours.encode_batch(texts, num_threads=0)


def test_encode_with_offsets_gives_character_offsets() -> None:
    ours = BPE(BYTES | {b"\xc3\xa9": 300}, "gpt2", {"<|e|>": 400})
    text = "é日x<|e|> é"
    ids, starts = ours.encode_with_offsets(text, allowed_special="all")
    assert ids == ours.encode(text, allowed_special="all")
    # Each start is the character where the token's first byte lies.
    byte_starts, position = [], 0
    for id in ids:
        byte_starts.append(position)
        position += len(ours.decode_single_token_bytes(id))
    encoded = text.encode()
    assert starts == [len(encoded[:start].decode("utf-8", errors="ignore")) for start in byte_starts]


def test_model_file_round_trip(tmp_path) -> None:
    ours = BPE(VOCABS["holes"], "o200k", {"<|endoftext|>": 5000}, name="holes")
    path = ours.save(tmp_path / "model.json")
    loaded = BPE.load(path)
    assert loaded == ours and loaded.name == "holes"


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"\xff\xfe", b"[]", b'{"format": "other"}', b'{"format": "hf_bpe", "version": 99}',
     b'{"format": "hf_bpe", "version": 1, "pattern": "gpt2", "special_tokens": {}, "ranks": [["!!", 1]]}'],
)
def test_corrupt_model_files_name_the_file(tmp_path, content: bytes) -> None:
    path = tmp_path / "broken.json"
    path.write_bytes(content)
    with pytest.raises(hf_bpe.TokenizerFileError, match="broken.json"):
        BPE.load(path)


FORK_TEXTS = ["ab ab", "cab", "the rain in spain"]


def _encode_batch_in_child(queue) -> None:  # runs in a forked process
    queue.put(BPE(VOCABS["dense"], "gpt2").encode_batch(FORK_TEXTS))


def test_encode_batch_works_in_a_forked_child_after_the_parent_used_threads() -> None:
    """A process forked after the parent ran a batch (a datasets.map(num_proc=...) worker) must
    not wait for the parent's threads, which do not exist in the child."""
    BPE(BYTES, "gpt2").encode_batch(["warm up the parent's pool"] * 8)
    got = forked_child_result(_encode_batch_in_child, what="encode_batch")
    model = BPE(VOCABS["dense"], "gpt2")
    assert got == [model.encode_ordinary(text) for text in FORK_TEXTS]


def _build_in_child(queue, ranks) -> None:  # runs in a forked process
    queue.put(BPE(ranks, "gpt2").encode_ordinary(FORK_TEXTS[2]))


def test_a_model_builds_in_a_forked_child_after_the_parent_built_one() -> None:
    """Building a model finds the tokens' splits on a thread pool; a child forked after the parent
    built one (a datasets.map(num_proc=...) worker loading a tokenizer) must not wait for the
    parent's threads (on rayon's global pool, whose threads a forked child does not have, it would hang)."""
    ranks = hf_bpe.get_encoding("gpt2").mergeable_ranks  # enough tokens to be split among threads
    BPE(ranks, "gpt2")
    got = forked_child_result(_build_in_child, ranks, what="building a model")
    assert got == BPE(ranks, "gpt2").encode_ordinary(FORK_TEXTS[2])


def _merges_model_in_child(queue, vocab, merges) -> None:  # runs in a forked process
    import hf_bpe._rules

    model = BPE.from_merges(vocab, merges, "gpt2")
    queue.put((hf_bpe._rules.rank_rule_difference(model), model.encode_ordinary(FORK_TEXTS[2])))


def test_a_merges_list_model_builds_in_a_forked_child_after_the_parent_built_one() -> None:
    """Building a merges-list model merges every token's bytes to decide its rule; a child forked after the
    parent built one must not wait for threads it does not have (nothing on rayon's global pool)."""
    import hf_bpe._rules

    gpt2 = hf_bpe.get_encoding("gpt2")
    vocab, merges = gpt2.mergeable_ranks, gpt2.merges
    assert hf_bpe._rules.rank_rule_difference(BPE.from_merges(vocab, merges, "gpt2")) is None
    got = forked_child_result(_merges_model_in_child, vocab, merges, what="building a merges-list model", timeout=120)
    assert got == (None, gpt2.encode_ordinary(FORK_TEXTS[2]))


def test_large_batches_return_ordinary_lists_sharing_ints() -> None:
    """A batch this large has its lists filled on the pool's threads, which store shared ints and
    leave the reference counting to the calling thread: the lists must still equal the serial
    encodings, be tracked by the cycle collector like any list, and own one reference per slot
    holding one of CPython's small ints (none for the immortal ints of the blocks)."""
    import gc

    ours = BPE(VOCABS["dense"], "gpt2")
    rng = random.Random(11)
    texts = ["".join(rng.choice("etaoin shrdlu\n") for _ in range(rng.randint(1000, 3000))) for _ in range(200)]
    serial = [ours.encode_ordinary(text) for text in texts]
    assert sum(map(len, serial)) > 1 << 16, "enough ids for the parallel path"
    merged = [id for id in serial[0] if id > 256]  # not one of Python's cached small ints
    shared = next(id for id in serial[0] if id == max(set(merged), key=merged.count))
    small = next(id for id in serial[0] if id <= 256)
    gc.collect()
    gc.disable()  # nothing else may release a reference to the small int meanwhile
    try:
        check_batch_references(ours, texts, serial, shared, small)
    finally:
        gc.enable()


def check_batch_references(ours: BPE, texts: list[str], serial: list[list[int]], shared: int, small: int) -> None:
    import gc
    import sys

    for threads in (2, 3, None):
        before, small_before = sys.getrefcount(shared), sys.getrefcount(small)
        batch = ours.encode_batch(texts, num_threads=threads)
        assert batch == serial
        assert all(type(row) is list and gc.is_tracked(row) for row in batch)
        held = sum(1 for row in batch for id in row if id is shared)
        small_held = sum(1 for row in batch for id in row if id is small)
        assert held > 0 and small_held > 0, "the batch shares the ints the serial encodings hold"
        assert sys.getrefcount(shared) == before, "the blocks' ints are immortal: lists take no reference"
        if sys.version_info < (3, 12):  # CPython's small ints are immortal from 3.12 on
            assert sys.getrefcount(small) - small_before == small_held, "lists own their small ints"
        del batch
        assert sys.getrefcount(small) == small_before
        assert sys.getrefcount(shared) == (before - held if sys.version_info < (3, 12) else before)


def test_clearing_the_cache_changes_no_result_even_while_threads_encode() -> None:
    import threading

    ours = BPE(VOCABS["dense"], "gpt2")
    rng = random.Random(5)
    texts = ["".join(rng.choice("etaoin shrdlu\n") for _ in range(rng.randint(100, 3000))) for _ in range(40)]
    expected = [ours.encode_ordinary(text) for text in texts]
    results: list[bool] = []

    def encode() -> None:
        results.append(all(ours.encode_batch(texts, num_threads=2) == expected for _ in range(5)))

    threads = [threading.Thread(target=encode) for _ in range(3)]
    for thread in threads:
        thread.start()
    for _ in range(200):
        clear_cache(ours)
    for thread in threads:
        thread.join()
    assert results == [True, True, True]
    clear_cache(ours)
    assert [ours.encode_ordinary(text) for text in texts] == expected


# --------------------------------------------------------------------- merges lists and the merge rules

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
    for loaded in (BPE.load(model.save(tmp_path / "m.json")), pickle.loads(pickle.dumps(model))):
        assert loaded == model and loaded.kind == "merges" and loaded.name == "m"
        assert loaded.encode("bc abc<|end|>", allowed_special="all") == [257, 32, 258, 300]
    assert model != BPE.from_merges(vocab, [(b"a", b"b"), (b"ab", b"c")], "cl100k", {"<|end|>": 300})
    assert "merges" in repr(model)


def test_bad_merges_are_rejected() -> None:
    vocab = BYTES | {b"ab": 256}
    with pytest.raises(InvalidVocabularyError, match="must be a pair of tokens of the vocabulary"):
        BPE.from_merges(vocab, [(b"a", b"zz")], "gpt2")
    with pytest.raises(InvalidVocabularyError, match="makes b'xy', which is not a token"):
        BPE.from_merges(vocab, [(b"x", b"y")], "gpt2")


# ------------------------------------------------------------------------------------------- from_vocab

BYTE_VOCAB = {i: bytes([i]) for i in range(256)}


def _texts(specials: list[str]) -> list[str]:
    docs = textgen.documents(random.Random(7), scaled(60_000))
    return docs + ["".join(specials) + " x " + " ".join(specials)]


@pytest.mark.parametrize("encoding", ["gpt2", "cl100k_base"])
def test_vocab_and_merges_round_trip_through_from_vocab(encoding: str) -> None:
    model = hf_bpe.get_encoding(encoding)
    specials = sorted(model.special_tokens)
    again = hf_bpe.BPE.from_vocab(model.vocab, model.merges, specials, model.pattern)
    assert again.vocab == model.vocab
    assert again.merges == model.merges
    assert again.special_tokens == model.special_tokens
    texts = _texts(specials)
    assert again.encode_batch(texts, allowed_special="all") == model.encode_batch(texts, allowed_special="all")


def test_a_trained_model_round_trips_through_gpt2_style_files(tmp_path: Path) -> None:
    docs = textgen.tie_documents(random.Random(3), words=200, special_tokens=["<|endoftext|>"])
    model = hf_bpe.train(docs, 600, special_tokens=["<|endoftext|>"], show_progress=False)
    (tmp_path / "vocab.json").write_text(json.dumps({token_to_str(token): i for i, token in model.vocab.items()}))
    (tmp_path / "merges.txt").write_text("".join(f"{token_to_str(a)} {token_to_str(b)}\n" for a, b in model.merges))
    again = conversion.gpt2.load(tmp_path / "vocab.json", tmp_path / "merges.txt", ["<|endoftext|>"])
    assert again.vocab == model.vocab and again.merges == model.merges
    assert again.encode_batch(docs, allowed_special="all") == model.encode_batch(docs, allowed_special="all")


def test_cs336_reference_files_encode_as_the_model_trained_on_the_same_corpus() -> None:
    folder = require_shared("cs336")
    reference = conversion.gpt2.load(folder / "train-bpe-reference-vocab.json",
                                     folder / "train-bpe-reference-merges.txt", ["<|endoftext|>"])
    assert reference.special_tokens == {"<|endoftext|>": 0}, "CS336's vocab holds the special token at id 0"
    trained = hf_bpe.train(files=[folder / "corpus.en"], vocab_size=500, special_tokens=["<|endoftext|>"],
                           show_progress=False)
    assert [a + b for a, b in reference.merges] == [trained.decode_single_token_bytes(256 + i) for i in range(243)]
    text = (folder / "corpus.en").read_text(encoding="utf-8")[:50_000] + "<|endoftext|>"
    ours = trained.decode_tokens_bytes(trained.encode(text, allowed_special="all"))
    theirs = reference.decode_tokens_bytes(reference.encode(text, allowed_special="all"))
    assert ours == theirs


def test_special_tokens_keep_their_vocab_id_or_come_after_the_largest() -> None:
    model = hf_bpe.BPE.from_vocab(BYTE_VOCAB | {300: b"<|a|>"}, [], ["<|b|>", "<|a|>"])
    assert model.special_tokens == {"<|b|>": 301, "<|a|>": 300}
    assert model.vocab[301] == b"<|b|>"


@pytest.mark.parametrize(
    ("vocab", "merges", "specials", "message"),
    [
        (BYTE_VOCAB | {256: b"ab"}, [(b"a", b"c")], None, r"merge 0 \(b'a', b'c'\): its result b'ac' is not in vocab"),
        (BYTE_VOCAB, [(b"a", b"xy")], None, r"its token b'xy' is not in vocab"),
        (BYTE_VOCAB | {256: b"a"}, [], None, "ids 97 and 256 are both b'a'"),
        (BYTE_VOCAB | {-1: b"ab"}, [], None, "vocab id -1 is not a non-negative int"),
        (BYTE_VOCAB | {256: "ab"}, [], None, r"vocab\[256\] is str, not bytes"),
        (BYTE_VOCAB, [(b"a",)], None, "merge 0 .* is not a pair of bytes"),
        (BYTE_VOCAB, [], ["<|a|>", "<|a|>"], "given twice"),
        (BYTE_VOCAB | {256: b"ab"}, [(b"a", b"b")], ["ab"], r"its result b'ab' is not in vocab \(or is a special token\)"),
        ({i: bytes([i]) for i in range(1, 256)}, [], None, r"lack the single byte b.\\x00."),
    ],
)
def test_inconsistent_input_is_refused_saying_what(vocab, merges, specials, message) -> None:
    with pytest.raises(InvalidVocabularyError, match=message):
        hf_bpe.BPE.from_vocab(vocab, merges, specials)


def test_unreadable_files_name_the_file_and_line(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.json"
    vocab.write_text(json.dumps({token_to_str(bytes([b])): b for b in range(256)}))
    merges = tmp_path / "merges.txt"
    merges.write_text("#version: 0.2\nĠ t\na b c\n")
    with pytest.raises(TokenizerFileError, match=r"merges.txt, line 3: expected two tokens"):
        conversion.gpt2.load(vocab, merges)
    vocab.write_text('["not", "an", "object"]')
    with pytest.raises(TokenizerFileError, match="vocab.json: expected a JSON object"):
        conversion.gpt2.load(vocab, merges)


PIECE_CACHE_MEMORY = """
import random, sys
import hf_bpe
enc = hf_bpe.get_encoding("cl100k_base")
def anonymous_kb():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
# 300,000 different words of 8-14 letters: short pieces no table of the first size holds, none a token
chance = random.Random(3)
letters = "bcdfghjklmnpqrstvwxz"
words = [" " + "".join(chance.choice(letters) for _ in range(chance.randint(8, 14))) for _ in range(300_000)]
docs = ["".join(words[start:start + 500]) for start in range(0, len(words), 500)]
ids = [enc.encode_ordinary(doc) for doc in docs]
before = anonymous_kb()
for _ in range(3):
    for doc, expected in zip(docs, ids):
        assert enc.encode_ordinary(doc) == expected
print(anonymous_kb() - before)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RssAnon from /proc/self/status (Linux)")
@pytest.mark.parametrize("budget", [None, "0"])
def test_piece_caches_grow_on_text_read_again_within_their_bound(budget: str | None) -> None:
    """Text read again whose pieces do not fit grows the thread's table of short pieces, from 16 MB
    to the 32 MB that holds them (docs/limits.md), and no further however often it is read;
    `HF_BPE_CACHE_GROWTH_MB=0` keeps it at its first size."""
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "HF_BPE_CACHE_GROWTH_MB"}
    if budget is not None:
        env["HF_BPE_CACHE_GROWTH_MB"] = budget
    result = subprocess.run([sys.executable, "-c", PIECE_CACHE_MEMORY], capture_output=True, text=True,
                            check=True, env=env, timeout=600)
    grown_mb = int(result.stdout.split()[-1]) / 1024
    if budget is None:
        # 16 MB grown to 32 MB (with up to 8 MB of ids beside it), and what the allocator keeps of
        # the size it outgrew
        assert 8 < grown_mb < 48, grown_mb
    else:
        # the table's side array of ids (at most 8 bytes per slot: 4 MB) fills as pieces of four or
        # more ids come; nothing doubles
        assert grown_mb < 6, grown_mb
