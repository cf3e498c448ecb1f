"""Parity with tiktoken: ``hf_bpe.get_encoding(name)`` must give exactly tiktoken's ids, errors and bytes.

tiktoken is the oracle (made to work offline by the ``tiktoken_cache`` fixture); no expected id is written
down here, except llama.cpp's GPT-2 reference ids, which come from the format's owner. Inputs:

- generated documents (``textgen``): ~5 MB at scale 1.0, from empty to 20 KB plus a few of 100-400 KB,
  covering many scripts, emoji sequences, whitespace runs, digits, code, contractions, special-token
  look-alikes and long words;
- the shared corpora in ``../shared/data/corpora`` (a slice of each, cut into 1-10 KB documents), when
  present;
- llama.cpp's 46 tricky GPT-2 test strings, when ``../shared/data`` is present;
- hypothesis strings: any valid text, text built from tricky pieces, text with lone surrogates.

A mismatch is reported with the first differing token, its byte offset, the text around it and a shrunk
input that still differs.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from suite import PARITY_ENCODINGS, require_shared, scaled

SEED = 20240611
GENERATED_BYTES = 5_000_000
HUGE_DOCUMENTS = (400_000, 200_000, 100_000)
CORPUS_SLICE_BYTES = 500_000
HYPOTHESIS_EXAMPLES = 300

Ids = list[int]
Outcome = tuple[Any, ...]


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", params=PARITY_ENCODINGS)
def pair(request: pytest.FixtureRequest, encoding_pair: Callable[[str], tuple[Any, Any]]) -> tuple[Any, Any]:
    """``(ours, theirs)`` for each parity encoding."""
    return encoding_pair(request.param)


@pytest.fixture(scope="module")
def generated_docs() -> list[str]:
    rng = random.Random(SEED)
    huge = tuple(scaled(size) for size in HUGE_DOCUMENTS)
    return textgen.documents(rng, scaled(GENERATED_BYTES), huge=huge)


@pytest.fixture(scope="module")
def corpus_docs() -> list[tuple[str, list[str]]]:
    corpora = require_shared("corpora")
    paths = sorted(corpora.glob("*.txt"))
    if not paths:
        pytest.skip(f"no corpora (*.txt) in {corpora}")
    return textgen.corpus_documents(paths, random.Random(SEED), limit_bytes=scaled(CORPUS_SLICE_BYTES))


_theirs_ids: dict[tuple[str, str], list[Ids]] = {}


def theirs_encode_ordinary(theirs: Any, key: str, docs: Sequence[str]) -> list[Ids]:
    """tiktoken's ids for a list of documents, computed once per (encoding, corpus)."""
    if (theirs.name, key) not in _theirs_ids:
        _theirs_ids[(theirs.name, key)] = [theirs.encode_ordinary(doc) for doc in docs]
    return _theirs_ids[(theirs.name, key)]


# ----------------------------------------------------------------------------------------------- reports


def shrink(text: str, differs: Callable[[str], bool], around: int, budget: int = 2000) -> str:
    """A short substring of ``text`` (near char ``around``) for which ``differs`` still holds."""
    radius = 4
    while radius < len(text):
        window = text[max(0, around - radius): around + radius]
        if differs(window):
            text = window
            break
        radius *= 2
    chunk = max(1, len(text) // 2)
    while budget > 0:
        changed = False
        start = 0
        while start < len(text) and budget > 0:
            candidate = text[:start] + text[start + chunk:]
            budget -= 1
            if candidate and differs(candidate):
                text, changed = candidate, True
            else:
                start += chunk
        if not changed:
            if chunk == 1:
                break
            chunk //= 2
    return text


def _token_bytes(enc: Any, token: int) -> bytes | str:
    try:
        return bytes(enc.decode_single_token_bytes(token))
    except Exception as error:  # noqa: BLE001 - shown in a report only
        return f"<{type(error).__name__}>"


def describe_difference(what: str, text: str, ours: Ids, theirs_ids: Ids, theirs: Any,
                        differs: Callable[[str], bool] | None = None) -> str:
    """Where two id lists for ``text`` part, with context and (when ``differs`` is given) a shrunk input."""
    ours, theirs_ids = list(ours), list(theirs_ids)
    index = next((i for i, (a, b) in enumerate(zip(ours, theirs_ids)) if a != b), min(len(ours), len(theirs_ids)))
    offset = len(theirs.decode_bytes(theirs_ids[:index]))
    raw = text.encode("utf-8", "surrogatepass")
    char_offset = len(raw[:offset].decode("utf-8", "replace"))
    lines = [
        (f"{what}: ids differ at token {index} (byte {offset}, char {char_offset}) of a "
         f"{len(raw)}-byte text; ours has {len(ours)} tokens, tiktoken {len(theirs_ids)}"),
        (f"  text around it: {text[max(0, char_offset - 40):char_offset]!r} >>> "
         f"{text[char_offset:char_offset + 40]!r}"),
        f"  ours:     {[(t, _token_bytes(theirs, t)) for t in ours[max(0, index - 2):index + 6]]}",
        f"  tiktoken: {[(t, _token_bytes(theirs, t)) for t in theirs_ids[max(0, index - 2):index + 6]]}",
    ]
    if differs is not None:
        lines.append(f"  shrunk input that still differs: {shrink(text, differs, char_offset)!r}")
    return "\n".join(lines)


def assert_same_ids(what: str, texts: Sequence[str], ours_ids: Sequence[Ids], theirs_ids: Sequence[Ids],
                    theirs: Any, differs: Callable[[str], bool] | None = None) -> None:
    """All documents' ids equal; otherwise report how many differ and describe the first one."""
    assert len(ours_ids) == len(theirs_ids), f"{what}: {len(ours_ids)} results for {len(theirs_ids)} texts"
    bad = [i for i, (a, b) in enumerate(zip(ours_ids, theirs_ids)) if list(a) != list(b)]
    if bad:
        first = bad[0]
        pytest.fail(f"{len(bad)} of {len(texts)} texts differ; first is text {first}:\n"
                    + describe_difference(what, texts[first], ours_ids[first], theirs_ids[first], theirs, differs))


def ordinary_differs(ours: Any, theirs: Any) -> Callable[[str], bool]:
    return lambda text: list(ours.encode_ordinary(text)) != theirs.encode_ordinary(text)


_TIKTOKEN_DISALLOWED = re.compile(r"disallowed special token (.+?)\.\n")


def outcome(encode: Callable[..., Ids], text: str, **policy: Any) -> Outcome:
    """``("ids", ids)``, or ``("raises", token)`` for a disallowed special token, or
    ``("other error", type, message)``."""
    from hf_bpe.errors import DisallowedSpecialTokenError

    try:
        return ("ids", list(encode(text, **policy)))
    except DisallowedSpecialTokenError as error:
        return ("raises", error.token)
    except ValueError as error:
        match = _TIKTOKEN_DISALLOWED.search(str(error))
        if match and not type(error).__module__.startswith("hf_bpe"):
            return ("raises", ast.literal_eval(match.group(1)))
        return ("other error", type(error).__name__, str(error))


def assert_same_outcomes(what: str, texts: Sequence[str], ours: Any, theirs: Any, **policy: Any) -> list[Outcome]:
    """``encode`` under ``policy`` gives the same ids, or raises naming the same token, on every text."""
    expected = [outcome(theirs.encode, text, **policy) for text in texts]
    actual = [outcome(ours.encode, text, **policy) for text in texts]
    bad = [i for i, (a, b) in enumerate(zip(actual, expected)) if a != b]
    if bad:
        first = bad[0]
        text, mine, oracle = texts[first], actual[first], expected[first]

        def differs(candidate: str) -> bool:
            return outcome(ours.encode, candidate, **policy) != outcome(theirs.encode, candidate, **policy)

        if mine[0] == oracle[0] == "ids":
            detail = describe_difference(what, text, mine[1], oracle[1], theirs, differs)
        else:
            detail = (f"{what}: ours {str(mine)[:300]}, tiktoken {str(oracle)[:300]}\n"
                      f"  shrunk input that still differs: {shrink(text, differs, 0)!r}")
        pytest.fail(f"{len(bad)} of {len(texts)} texts differ under {policy}; first is text {first} "
                    f"({text[:80]!r}...):\n{detail}")
    return expected


# ------------------------------------------------------------------------------- vocabulary and decoding


def test_vocabulary_metadata_matches_tiktoken(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    assert ours.name == theirs.name
    assert ours.n_vocab == theirs.n_vocab
    assert ours.max_token_value == theirs.max_token_value
    assert ours.special_tokens_set == theirs.special_tokens_set
    assert dict(ours.special_tokens) == {token: theirs.encode_single_token(token) for token in theirs.special_tokens_set}
    assert dict(ours.mergeable_ranks) == theirs._mergeable_ranks


def test_token_byte_values_match_tiktoken(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    values = list(ours.token_byte_values())
    assert sorted(values) == sorted(theirs.token_byte_values()), "token_byte_values() holds other tokens"
    assert values == theirs.token_byte_values(), "token_byte_values() is not in tiktoken's (sorted) order"


def test_decode_single_token_bytes_matches_for_every_id(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    holes = []
    for token in range(theirs.max_token_value + 2):
        try:
            expected = theirs.decode_single_token_bytes(token)
        except KeyError:
            holes.append(token)
            with pytest.raises(KeyError):
                ours.decode_single_token_bytes(token)
            continue
        assert ours.decode_single_token_bytes(token) == expected, f"token {token}"
    assert theirs.max_token_value + 1 in holes


def test_encode_single_token_matches_tiktoken(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    rng = random.Random(SEED)
    tokens = rng.sample(theirs.token_byte_values(), 3000)
    for token in tokens:
        assert ours.encode_single_token(token) == theirs.encode_single_token(token), token
    for special in theirs.special_tokens_set:
        assert ours.encode_single_token(special) == theirs.encode_single_token(special), special
    for unknown in (b"\xff\xfe\xfd\xfc not a token", "not a token at all, surely"):
        with pytest.raises(KeyError):
            theirs.encode_single_token(unknown)
        with pytest.raises(KeyError):
            ours.encode_single_token(unknown)


def test_encode_single_token_accepts_special_token_bytes_like_tiktoken(pair: tuple[Any, Any]) -> None:
    """tiktoken looks special tokens up by their UTF-8 bytes too: ``encode_single_token(b"<|endoftext|>")``."""
    ours, theirs = pair
    for special in sorted(theirs.special_tokens_set):
        assert ours.encode_single_token(special.encode()) == theirs.encode_single_token(special.encode()), special


def random_id_lists(rng: random.Random, theirs: Any, count: int) -> list[Ids]:
    """Random valid ids (specials included), often cutting UTF-8 sequences apart."""
    specials = [theirs.encode_single_token(token) for token in theirs.special_tokens_set]
    valid = [theirs.encode_single_token(token) for token in theirs.token_byte_values()] + specials
    return [rng.choices(valid, k=rng.randint(0, 30)) for _ in range(count)]


@pytest.mark.parametrize("errors", ["replace", "ignore", "strict", "backslashreplace"])
def test_decode_matches_tiktoken_on_random_ids(pair: tuple[Any, Any], errors: str) -> None:
    ours, theirs = pair
    for ids in random_id_lists(random.Random(SEED), theirs, scaled(3000, 100)):
        assert ours.decode_bytes(ids) == theirs.decode_bytes(ids), ids
        try:
            expected: Any = theirs.decode(ids, errors=errors)
        except UnicodeDecodeError:
            expected = UnicodeDecodeError
        if expected is UnicodeDecodeError:
            with pytest.raises(UnicodeDecodeError):
                ours.decode(ids, errors=errors)
        else:
            assert ours.decode(ids, errors=errors) == expected, ids


def test_decode_defaults_to_replace(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    ids = theirs.encode("héllo 😀 wörld")
    for cut in range(len(ids) + 1):
        assert ours.decode(ids[:cut]) == theirs.decode(ids[:cut])
        assert ours.decode(ids[cut:]) == theirs.decode(ids[cut:])


def test_decode_batch_matches_tiktoken(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    batch = random_id_lists(random.Random(SEED + 1), theirs, scaled(500, 20))
    assert list(ours.decode_batch(batch)) == theirs.decode_batch(batch)


# -------------------------------------------------------------------------------- ordinary text, corpora


@pytest.mark.slow
def test_encode_ordinary_matches_tiktoken_on_generated_documents(pair: tuple[Any, Any],
                                                                 generated_docs: list[str]) -> None:
    ours, theirs = pair
    expected = theirs_encode_ordinary(theirs, "generated", generated_docs)
    actual = [ours.encode_ordinary(doc) for doc in generated_docs]
    assert_same_ids(f"{theirs.name} encode_ordinary", generated_docs, actual, expected, theirs,
                    ordinary_differs(ours, theirs))


@pytest.mark.slow
def test_generated_documents_are_large_and_varied(generated_docs: list[str]) -> None:
    """The parity corpus is what the tests claim: >= 5 MB (at scale 1), varied lengths, many scripts."""
    sizes = sorted(len(doc.encode()) for doc in generated_docs)
    assert sum(sizes) >= scaled(GENERATED_BYTES)
    assert sizes[0] == 0 and sizes[-1] >= scaled(HUGE_DOCUMENTS[0])
    assert sum(1 for size in sizes if 1000 <= size <= 10_000) >= min(50, scaled(50, 0))
    text = "".join(generated_docs)
    characters = set(text)
    for name, alphabet in textgen.SCRIPTS.items():
        assert characters & set(alphabet), name
    for needle in ("\r\n", "\u00a0", "\u3000", "\u200d", "\ufe0f", "\uff11", "\u0661", "'LL", "\u017f",
                   "<|endoftext|>", "def ", "{\""):
        assert needle in text, needle


@pytest.mark.slow
def test_decode_inverts_encode_on_generated_documents(pair: tuple[Any, Any], generated_docs: list[str]) -> None:
    ours, _ = pair
    for index, doc in enumerate(generated_docs):
        ids = ours.encode_ordinary(doc)
        assert ours.decode_bytes(ids) == doc.encode(), f"document {index}: {doc[:200]!r}"
        assert ours.decode(ids) == doc, f"document {index}: {doc[:200]!r}"


@pytest.mark.slow
def test_encode_ordinary_matches_tiktoken_on_shared_corpora(pair: tuple[Any, Any],
                                                            corpus_docs: list[tuple[str, list[str]]]) -> None:
    ours, theirs = pair
    for name, docs in corpus_docs:
        expected = theirs_encode_ordinary(theirs, name, docs)
        actual = [ours.encode_ordinary(doc) for doc in docs]
        assert_same_ids(f"{theirs.name} encode_ordinary on {name}", docs, actual, expected, theirs,
                        ordinary_differs(ours, theirs))


def test_counts_of_str_and_of_utf8_parts_match_tiktoken(pair: tuple[Any, Any], generated_docs: list[str]) -> None:
    """``count_utf8_batch`` takes ``str`` parts and UTF-8 ``bytes`` parts, mixed in one batch: each
    count is the length of tiktoken's encoding (lone surrogates as tiktoken replaces them)."""
    from hf_bpe.counting import count_utf8_batch

    ours, theirs = pair
    docs = generated_docs[:scaled(400, 80)]
    expected = [len(ids) for ids in theirs_encode_ordinary(theirs, "generated, counted", docs)]
    as_bytes = [doc.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode() for doc in docs]
    mixed = [doc if index % 2 else data for index, (doc, data) in enumerate(zip(docs, as_bytes))]
    for name, parts in (("str", docs), ("bytes", as_bytes), ("mixed", mixed)):
        for threads in (1, 2):
            assert count_utf8_batch(ours, parts, num_threads=threads) == expected, f"{theirs.name}, {name} parts"
    with pytest.raises(TypeError, match="part 1 is int, not bytes or str"):
        count_utf8_batch(ours, ["text", 7])
    for single in ("one text", b"one text"):
        with pytest.raises(TypeError, match="got a single"):
            count_utf8_batch(ours, single)  # type: ignore[arg-type]


def long_pieces(rng: random.Random, count: int) -> list[str]:
    """Pieces the piece cache's slots cannot hold: runs of CJK and kana, long Latin, Cyrillic and
    Greek words (31 bytes to a few KB), and words of 16 to 30 bytes in scripts the vocabularies have
    few tokens for (Georgian, Devanagari: more than 8 ids each)."""
    alphabets = ["的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年", "あいうえおかきくけこさしすせそたちつてとなにぬねの",
                 "etaoinshrdlucmfwypvbgkqjxz", "оеаинтсрвлкмдпуяыьгзбчйхжшюцщэфъё", "αβγδεζηθικλμνξοπρστυφχψω"]
    scarce = ["აბგდევზთიკლმნოპჟრსტუფქღყშჩცძწჭხჯჰ", "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह"]
    pieces = []
    for _ in range(count // 4):
        pieces.append("".join(rng.choice(rng.choice(scarce)) for _ in range(rng.randint(6, 10))))
    for _ in range(count - len(pieces)):
        alphabet = rng.choice(alphabets)
        width = len(alphabet[0].encode())
        letters = rng.randint(31 // width + 1, rng.choice((40, 200, 1400)) // width + 12)
        pieces.append("".join(rng.choice(alphabet) for _ in range(letters)))
    return pieces


def test_long_pieces_met_again_and_after_the_store_starts_over_match_tiktoken(pair: tuple[Any, Any]) -> None:
    """Pieces the piece cache's slots cannot hold (too long, or of too many ids) are kept in a store
    of their own (up to 4 MB a thread, starting over when full): met again, and again after a flood of
    other long pieces emptied it, they still encode to tiktoken's ids."""
    ours, theirs = pair
    rng = random.Random(SEED + 7)
    pool = long_pieces(rng, scaled(300, 60))
    docs = [" ".join(rng.choice(pool) for _ in range(rng.randint(1, 12))) + rng.choice(("", "\n", ".")) for _ in
            range(scaled(200, 60))]
    expected = [theirs.encode_ordinary(doc) for doc in docs]
    for when in ("first met", "met again"):
        assert_same_ids(f"{theirs.name} {when}", docs, [ours.encode_ordinary(doc) for doc in docs], expected, theirs,
                        ordinary_differs(ours, theirs))
    flood = long_pieces(random.Random(SEED + 8), 24_000)
    assert sum(len(piece.encode()) for piece in flood) > 4 << 20, "more than the store holds (4 MB)"
    for start in range(0, len(flood), 500):
        ours.encode_ordinary(" ".join(flood[start:start + 500]))
    assert_same_ids(f"{theirs.name} after the store started over", docs, [ours.encode_ordinary(doc) for doc in docs],
                    expected, theirs, ordinary_differs(ours, theirs))


# ------------------------------------------------------------------------------------------------- batch


@pytest.mark.slow
def test_encode_ordinary_batch_matches_tiktoken(pair: tuple[Any, Any], generated_docs: list[str]) -> None:
    ours, theirs = pair
    expected = theirs_encode_ordinary(theirs, "generated", generated_docs)
    assert_same_ids(f"{theirs.name} encode_ordinary_batch", generated_docs,
                    ours.encode_ordinary_batch(generated_docs), expected, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("num_threads", [None, 1, 2])
def test_encode_batch_with_all_specials_allowed_matches_tiktoken(
        pair: tuple[Any, Any], generated_docs: list[str], num_threads: int | None) -> None:
    ours, theirs = pair
    docs = generated_docs if num_threads == 2 else generated_docs[: scaled(300, 20)]
    expected = theirs.encode_batch(docs, num_threads=2, allowed_special="all")
    actual = ours.encode_batch(docs, num_threads=num_threads, allowed_special="all")
    assert_same_ids(f"{theirs.name} encode_batch(allowed_special='all', num_threads={num_threads})", docs,
                    actual, expected, theirs)


def test_encode_batch_default_policy_raises_like_tiktoken(pair: tuple[Any, Any], generated_docs: list[str]) -> None:
    from hf_bpe.errors import DisallowedSpecialTokenError

    ours, theirs = pair
    docs = generated_docs[: scaled(300, 20)]
    clean = [doc for doc in docs if not any(special in doc for special in theirs.special_tokens_set)]
    assert_same_ids(f"{theirs.name} encode_batch (default policy)", clean, ours.encode_batch(clean, num_threads=2),
                    theirs.encode_batch(clean, num_threads=2), theirs)
    special = min(theirs.special_tokens_set)
    poisoned = clean[:10] + [f"a {special} b"] + clean[10:20]
    with pytest.raises(ValueError):
        theirs.encode_batch(poisoned)
    with pytest.raises(DisallowedSpecialTokenError) as raised:
        ours.encode_batch(poisoned, num_threads=2)
    assert special in str(raised.value)


# -------------------------------------------------------------------------------- special-token policies


def special_dense_documents(rng: random.Random, specials: Sequence[str], count: int) -> list[str]:
    """Documents mixing generated text with real special tokens (adjacent, glued, repeated) and look-alikes;
    about a quarter hold no special token at all."""
    docs = []
    for _ in range(count):
        parts: list[str] = []
        with_specials = rng.random() < 0.75
        for _ in range(rng.randint(0, 8)):
            roll = rng.random()
            if with_specials and roll < 0.35:
                parts.append(rng.choice(specials) * rng.choice([1, 1, 1, 2]))
            elif roll < 0.5:
                parts.append(rng.choice(textgen.SPECIAL_LOOKALIKES[1:6]))
            else:
                parts.append(textgen.fragment(rng, specials=False)[: rng.choice([5, 50, 500])])
        docs.append("".join(parts))
    return docs


def special_token_policies(specials: Sequence[str]) -> dict[str, dict[str, Any]]:
    first, second = set(specials[:1]), set(specials[1:2])
    return {
        "default: all disallowed": {},
        "allowed_special='all'": {"allowed_special": "all"},
        "a subset allowed, the rest disallowed": {"allowed_special": first},
        "disallowed_special=()": {"disallowed_special": ()},
        "a subset allowed, the rest ordinary": {"allowed_special": first, "disallowed_special": ()},
        "mix: one allowed, one disallowed, the rest ordinary": {"allowed_special": first,
                                                                "disallowed_special": second},
        "only one disallowed, the rest ordinary": {"disallowed_special": frozenset(specials[-1:])},
        "allowed 'all' with disallowed 'all'": {"allowed_special": "all", "disallowed_special": "all"},
        "allowed as a frozenset of all": {"allowed_special": frozenset(specials), "disallowed_special": ()},
        "explicitly disallowed all": {"disallowed_special": frozenset(specials)},
        "the same token allowed and disallowed": {"allowed_special": first, "disallowed_special": first},
    }


POLICY_NAMES = list(special_token_policies(["<|a|>", "<|b|>"]))


@pytest.mark.parametrize("policy_name", POLICY_NAMES)
def test_encode_under_special_token_policy_matches_tiktoken(pair: tuple[Any, Any], policy_name: str) -> None:
    ours, theirs = pair
    specials = sorted(theirs.special_tokens_set)
    policy = special_token_policies(specials)[policy_name]
    docs = special_dense_documents(random.Random(SEED), specials, scaled(400, 40))
    expected = assert_same_outcomes(f"{theirs.name} encode({policy})", docs, ours, theirs, **policy)
    if policy_name.startswith("default"):
        kinds = {result[0] for result in expected}
        assert kinds == {"ids", "raises"}, "the documents should both raise and encode under the default policy"
    # encode_batch follows the same policy: the same ids, or an error when any document raises.
    fine = [doc for doc, result in zip(docs, expected) if result[0] == "ids"]
    assert_same_ids(f"{theirs.name} encode_batch({policy})", fine,
                    ours.encode_batch(fine, num_threads=2, **policy), [result[1] for result in expected
                                                                      if result[0] == "ids"], theirs)
    if len(fine) < len(docs):
        with pytest.raises(ValueError):
            ours.encode_batch(docs, num_threads=2, **policy)


def test_special_tokens_at_every_position(pair: tuple[Any, Any]) -> None:
    """Each special token alone, at the start, the end, glued to letters, digits, spaces and other specials."""
    ours, theirs = pair
    specials = sorted(theirs.special_tokens_set)
    texts = []
    for special in specials:
        for left in ("", " ", "a", "1", "\n", "  ", "'", "<|", "<", "é", "😀", *specials):
            for right in ("", " ", "s", "'s", "1", "\n", " a", "|>", ">", *specials):
                texts.append(left + special + right)
    for policy in ({"allowed_special": "all"}, {}, {"disallowed_special": ()}):
        assert_same_outcomes(f"{theirs.name} encode({policy})", texts, ours, theirs, **policy)


# ---------------------------------------------------------------------------------------------- llama.cpp


def llamacpp_cases() -> list[tuple[str, Ids]]:
    base = require_shared("llamacpp")
    inputs = (base / "ggml-vocab-gpt-2.gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outputs = (base / "ggml-vocab-gpt-2.gguf.out").read_text(encoding="utf-8").split("\n")
    assert inputs[-1] == "" and outputs[-1] == "", "unexpected llama.cpp test file layout"
    assert len(inputs) == len(outputs), "llama.cpp .inp and .out disagree on the number of strings"
    return [(text, [int(token) for token in line.split()]) for text, line in zip(inputs[:-1], outputs[:-1])]


def test_llamacpp_strings_match_tiktoken(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    cases = llamacpp_cases()
    texts = [text for text, _ in cases]
    assert_same_ids(f"{theirs.name} encode_ordinary on llama.cpp strings", texts,
                    [ours.encode_ordinary(text) for text in texts], [theirs.encode_ordinary(text) for text in texts],
                    theirs, ordinary_differs(ours, theirs))
    assert_same_outcomes(f"{theirs.name} encode on llama.cpp strings", texts, ours, theirs)
    for text in texts:
        assert ours.decode(ours.encode_ordinary(text)) == text


def test_llamacpp_strings_match_reference_gpt2_ids(encoding_pair: Callable[[str], tuple[Any, Any]]) -> None:
    """For GPT-2, llama.cpp's file also holds the ids of the format's owner (HF's GPT-2 tokenizer)."""
    ours, theirs = encoding_pair("gpt2")
    cases = llamacpp_cases()
    assert len(cases) == 46
    texts = [text for text, _ in cases]
    assert_same_ids("gpt2 encode_ordinary vs llama.cpp's reference ids", texts,
                    [ours.encode_ordinary(text) for text in texts], [ids for _, ids in cases], theirs)


# --------------------------------------------------------------------------------------------- hypothesis

TRICKY_PIECES = [
    " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b", "\x00",
    "'", "s", "S", "t", "re", "RE", "ve", "m", "ll", "lL", "d", "D", "\u017f", "\u212a", "\u2019",
    "a", "A", "z", "é", "e\u0301", "ß", "İ", "ǅ", "ʰ", "ª", "Σ", "я", "中", "あ", "ア", "ー", "ก", "\u0e31", "ក", "\u17b6",
    "अ", "\u094d", "ع", "\u064b", "א", "한", "1", "12", "123", "1234", "٣", "۳", "１", "²", "Ⅻ", "½",
    "😀", "\U0001F468", "\u200d", "\ufe0f", "\U0001F3FB", "\U0001F1FA", "\u20e3", "\U00010348", "\U000E0001",
    "!", ".", ",", "/", "-", "_", "<", ">", "|", "<|", "|>", "<|endoftext|>", "<|endof", "...", "//", "\\",
    "\ufffd", "\uffff", "\U0010ffff", "\x7f", "\u00ad", "\u200b",
]
VALID_CHARS = st.characters(codec="utf-8")
VALID_TEXT = st.text(alphabet=VALID_CHARS, max_size=300)
TRICKY_TEXT = st.lists(st.one_of(st.sampled_from(TRICKY_PIECES), VALID_CHARS), max_size=60).map("".join)
SURROGATE_TEXT = st.lists(
    st.one_of(st.sampled_from(TRICKY_PIECES), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
              st.sampled_from(["\ud83d\ude00", "\ud800", "\udfff", "\udbff\udfff"])),
    max_size=40,
).map("".join)
HYPOTHESIS = settings(max_examples=scaled(HYPOTHESIS_EXAMPLES, 20), deadline=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def assert_text_parity(ours: Any, theirs: Any, text: str) -> None:
    expected = theirs.encode_ordinary(text)
    actual = list(ours.encode_ordinary(text))
    if actual != expected:
        pytest.fail(describe_difference(f"{theirs.name} encode_ordinary", text, actual, expected, theirs,
                                        ordinary_differs(ours, theirs)))
    assert outcome(ours.encode, text, allowed_special="all") == outcome(theirs.encode, text, allowed_special="all")
    assert outcome(ours.encode, text) == outcome(theirs.encode, text)


@HYPOTHESIS
@given(text=VALID_TEXT)
def test_hypothesis_any_text_matches_tiktoken_and_round_trips(pair: tuple[Any, Any], text: str) -> None:
    ours, theirs = pair
    assert_text_parity(ours, theirs, text)
    assert ours.decode(ours.encode_ordinary(text)) == text


@HYPOTHESIS
@given(text=TRICKY_TEXT)
def test_hypothesis_tricky_text_matches_tiktoken_and_round_trips(pair: tuple[Any, Any], text: str) -> None:
    ours, theirs = pair
    assert_text_parity(ours, theirs, text)
    assert ours.decode(ours.encode_ordinary(text)) == text


@HYPOTHESIS
@given(text=SURROGATE_TEXT)
def test_hypothesis_lone_surrogates_match_tiktoken(pair: tuple[Any, Any], text: str) -> None:
    """tiktoken replaces lone surrogates by U+FFFD (after pairing adjacent halves): no crash, same ids."""
    ours, theirs = pair
    assert_text_parity(ours, theirs, text)
    assert list(ours.encode_ordinary_batch([text, "ok"])) == [theirs.encode_ordinary(text), theirs.encode_ordinary("ok")]
    assert ours.decode(ours.encode_ordinary(text)) == theirs.decode(theirs.encode_ordinary(text))


@pytest.mark.parametrize("text", [
    # ruff's PT014 reads these lone surrogates as duplicates; every string here is different.
    "\ud800", "a\udfffb", "\ud83d\ude00", "\ud83d", "\ude00\ud83d", "x\ud83d\ude00y\ud800", "\udbff\udfff",  # noqa: PT014
    "\ud800<|endoftext|>", " \ud800 ", "'\ud800s", "1\ud8002",
])
def test_lone_surrogates_match_tiktoken(pair: tuple[Any, Any], text: str) -> None:
    ours, theirs = pair
    assert_text_parity(ours, theirs, text)
    policy = {"allowed_special": "all"}
    assert list(ours.encode_batch([text], **policy)) == theirs.encode_batch([text], **policy)


# ------------------------------------------------------------------------- models built from rank tables

CUSTOM_MODELS = {
    # name: (source encoding, keep ranks below, pattern given to ours, special tokens at these ids)
    "gpt2 ranks < 2000, gpt2 pattern by name": ("gpt2", 2000, "gpt2", {"<|endoftext|>": 2000}),
    "cl100k ranks < 1000, o200k regex, specials with a hole": (
        "cl100k_base", 1000, "o200k_regex", {"<|endoftext|>": 1000, "<|pad|>": 1005, "<|endofprompt|>": 1003}),
    "o200k ranks < 8000, cl100k pattern by name": ("o200k_base", 8000, "cl100k", {"<|endoftext|>": 9000}),
}


@pytest.mark.slow
@pytest.mark.parametrize("model", list(CUSTOM_MODELS))
def test_model_built_from_ranks_matches_tiktoken(tiktoken_encoding: Callable[[str], Any],
                                                 generated_docs: list[str], model: str) -> None:
    """``hf_bpe.BPE(ranks, pattern, special_tokens)`` equals ``tiktoken.Encoding`` built from the same data.
    Small vocabularies make long merge chains (every piece is many tokens)."""
    import tiktoken

    import hf_bpe
    from hf_bpe import patterns

    source, limit, pattern, specials = CUSTOM_MODELS[model]
    full = tiktoken_encoding(source)
    ranks = {token: rank for token, rank in full._mergeable_ranks.items() if rank < limit}
    regex = patterns.resolve(pattern.removesuffix("_regex"))
    ours_pattern = regex if pattern.endswith("_regex") else pattern
    theirs = tiktoken.Encoding(f"custom-{source}", pat_str=regex, mergeable_ranks=ranks, special_tokens=specials)
    ours = hf_bpe.BPE(ranks, ours_pattern, special_tokens=specials, name=f"custom-{source}")
    assert ours.n_vocab == theirs.n_vocab and ours.max_token_value == theirs.max_token_value
    assert ours.pattern == regex
    docs = generated_docs[: scaled(400, 20)] + [doc for doc in generated_docs if len(doc) > 50_000][:1]
    assert_same_ids(f"{model} encode_ordinary", docs, [ours.encode_ordinary(doc) for doc in docs],
                    [theirs.encode_ordinary(doc) for doc in docs], theirs, ordinary_differs(ours, theirs))
    assert_same_ids(f"{model} encode_batch(allowed_special='all')", docs,
                    ours.encode_batch(docs, num_threads=2, allowed_special="all"),
                    theirs.encode_batch(docs, num_threads=2, allowed_special="all"), theirs)
    dense = special_dense_documents(random.Random(SEED), sorted(specials), scaled(200, 20))
    for policy in special_token_policies(sorted(specials)).values():
        assert_same_outcomes(f"{model} encode({policy})", dense, ours, theirs, **policy)
