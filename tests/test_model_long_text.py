"""One long text encoded on several threads (``BPE.encode_ordinary``, ``BPE.encode`` and the tiktoken
drop-in's ``encode_to_numpy``): the text is cut where every split of the named patterns ends a piece,
its parts are encoded on the process's pool and their ids joined (``crates/core/src/parallel.rs``).
The ids must be tiktoken's and those of the one-thread encode, always.

The parallel path starts at 256 KiB; these tests lower the threshold and fix the number of parts
through ``_core._set_parallel_for_tests``, and prove the path ran by the core's count of parts
(``_core._parallel_counts``): a test in which nothing was cut would assert nothing. The count of
texts encoded again on one thread (a part that did not end at its cut) must stay 0.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import textgen
from suite import forked_child_result, require_shared, scaled

import hf_bpe
import hf_bpe.tiktoken
from hf_bpe import _core

ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]

FILLER = "The quick brown fox, 42 times; it's (really) over-the-top.\n"
"""Prose with a cut after every word: what surrounds the awkward places."""

AWKWARD = {
    "a run of one letter": "a" * 10_000,
    "a run of spaces": " " * 3_000,
    "a run of newlines": "\n" * 2_000,
    "a run of CRLF": "\r\n" * 1_000,
    "spaces and line breaks": " \n \t\r\n  \n\n \u3000\u00a0 " * 200,
    "a long word": "Supercalifragilistic" * 100,
    "digits": "1234567890" * 500,
    "punctuation and slashes": ".\n/!?//\n.\r\n/" * 300,
    "contractions": "it's we'll they'RE 'll '" * 200,
}
"""Stretches centred on each proposed cut: the cut must move out of them, to a safe place."""

PART = 20_000
"""Bytes between proposed cuts in the awkward texts: more than half of each awkward stretch, so the
cut proposed inside it finds a safe place before the next one."""


@contextmanager
def parallel(parts: int, threshold: int = 1) -> Iterator[None]:
    """Texts of at least ``threshold`` bytes cut into ``parts`` proposed parts, in this block."""
    _core._set_parallel_for_tests(threshold, parts)
    try:
        yield
    finally:
        _core._set_parallel_for_tests(None, None)


def one_thread(encode, text: str) -> list[int]:
    """``encode(text)`` with the parallel path off."""
    _core._set_parallel_for_tests(1 << 62, None)
    try:
        return encode(text)
    finally:
        _core._set_parallel_for_tests(None, None)


def parts_taken(encode, text: str, parts: int) -> tuple[list[int], int]:
    """``encode(text)`` proposing ``parts`` parts, and how many parts the core encoded."""
    before, fallbacks, _ = _core._parallel_counts()
    with parallel(parts):
        ids = encode(text)
    after, fallbacks_after, _ = _core._parallel_counts()
    assert fallbacks_after == fallbacks, "a part did not end at its cut"
    return list(ids), after - before


def awkward_text(kind: str, parts: int) -> str:
    """``parts * PART`` ASCII characters of filler with the stretch ``kind`` centred on every
    proposed cut (the core proposes cuts at byte ``k * len / parts``)."""
    length = parts * PART
    chars = list((FILLER * (length // len(FILLER) + 1))[:length])
    stretch = AWKWARD[kind]
    for k in range(1, parts):
        start = k * PART - len(stretch) // 2
        chars[start:start + len(stretch)] = stretch
    return "".join(chars)


@pytest.mark.parametrize("kind", sorted(AWKWARD))
@pytest.mark.parametrize("name", ENCODINGS)
def test_cuts_move_out_of_awkward_places_and_ids_stay_tiktokens(encoding_pair, name: str, kind: str) -> None:
    ours, theirs = encoding_pair(name)
    parts = 8
    text = awkward_text(kind, parts)
    ids, taken = parts_taken(ours.encode_ordinary, text, parts)
    assert ids == theirs.encode_ordinary(text)
    assert ids == one_thread(ours.encode_ordinary, text)
    # Every proposed cut found a safe place before the next one.
    assert taken == parts


def test_a_cut_proposed_between_cr_and_lf_moves(encoding_pair) -> None:
    ours, theirs = encoding_pair("o200k_base")
    text = "x" * 999 + "\r\n" + "abc " * 250  # two parts: the cut proposed at byte 1000 is between CR and LF
    ids, taken = parts_taken(ours.encode_ordinary, text, 2)
    assert (ids, taken) == (theirs.encode_ordinary(text), 2)


@pytest.mark.parametrize("name", ENCODINGS)
def test_generated_texts_encode_in_parts_like_tiktoken(encoding_pair, name: str) -> None:
    """Text of every kind the generator makes (every script and code point class, white space,
    digits, code, emoji, special-token look-alikes), cut into many parts."""
    ours, theirs = encoding_pair(name)
    rng = random.Random(7)
    total = 0
    for size, parts in [(scaled(3_000), 5), (scaled(30_000), 17), (scaled(100_000), 64)]:
        text = textgen.document(rng, size)
        ids, taken = parts_taken(ours.encode_ordinary, text, parts)
        assert ids == theirs.encode_ordinary(text), (size, parts)
        assert ids == one_thread(ours.encode_ordinary, text)
        total += taken
    assert total >= 5 + 17 + 64 - 10


@pytest.mark.parametrize("name", ENCODINGS)
def test_special_tokens_are_cut_out_before_the_parts(encoding_pair, name: str) -> None:
    ours, theirs = encoding_pair(name)
    rng = random.Random(11)
    specials = sorted(theirs.special_tokens_set)
    pieces = []
    for _ in range(scaled(300)):
        pieces.append(textgen.fragment(rng))
        if rng.random() < 0.2:
            pieces.append(rng.choice(specials))
    text = "".join(pieces) + specials[0] + specials[0]
    ids, taken = parts_taken(lambda text: ours.encode(text, allowed_special="all"), text, 32)
    assert ids == theirs.encode(text, allowed_special="all")
    assert taken > 32
    drop_in = hf_bpe.tiktoken.get_encoding(name)
    numpy_ids, taken = parts_taken(lambda text: drop_in.encode_to_numpy(text, allowed_special="all"), text, 9)
    assert numpy_ids == ids and taken > 9


def test_a_custom_pattern_is_encoded_on_one_thread() -> None:
    """No bound on what later text changes (a custom regex): never cut, still exact."""
    ranks = hf_bpe.get_encoding("gpt2").mergeable_ranks
    model = hf_bpe.BPE(ranks, r"a+b|a|\s+|[^a\s]+")
    text = "aaa aab bab " * 2_000
    ids, taken = parts_taken(model.encode_ordinary, text, 8)
    assert (ids, taken) == (one_thread(model.encode_ordinary, text), 0)


def test_long_texts_take_the_parallel_path_by_default() -> None:
    """From 256 KiB, on a pool of at least two threads, without any test setting."""
    import os

    if len(os.sched_getaffinity(0)) < 2 or os.environ.get("RAYON_NUM_THREADS") == "1":
        pytest.skip("one thread: long texts are encoded whole")
    model = hf_bpe.get_encoding("gpt2")
    text = FILLER * ((1 << 18) // len(FILLER) + 1)
    before = _core._parallel_counts()
    ids = model.encode_ordinary(text)
    after = _core._parallel_counts()
    assert after[0] - before[0] >= 2 and after[1] == before[1]
    assert ids == one_thread(model.encode_ordinary, text)


@pytest.mark.parametrize("name", ENCODINGS)
def test_parts_through_the_table_of_short_pieces_give_tiktokens_ids(encoding_pair, name: str) -> None:
    """Past 256 KB a thread encodes through its table of short pieces (tokens and the pieces merged
    before), parts of a long text too: text of every kind, read several times so that the table's
    learned pieces answer, in parts of every size."""
    ours, theirs = encoding_pair(name)
    rng = random.Random(13)
    text = textgen.document(rng, scaled(1_500_000, minimum=700_000))
    expected = theirs.encode_ordinary(text)
    through_table = 0
    for parts in (4, 16, 64):
        before = _core._parallel_counts()
        ids, taken = parts_taken(ours.encode_ordinary, text, parts)
        through_table += _core._parallel_counts()[2] - before[2]
        assert ids == expected and taken >= parts // 2, (parts, taken)
    assert through_table > 0, "no part went through a table: this test would assert nothing of it"


def _encode_in_child(queue, text) -> None:  # runs in a forked process
    with parallel(8):
        queue.put(hf_bpe.get_encoding("gpt2").encode_ordinary(text))


def test_a_forked_child_encodes_in_parts_after_the_parent_did() -> None:
    """The parts run on the process's own pool: a child forked after the parent used it builds its own."""
    model = hf_bpe.get_encoding("gpt2")
    text = FILLER * 500
    with parallel(8):
        expected = model.encode_ordinary(text)
    assert forked_child_result(_encode_in_child, text, what="encoding in parts") == expected


@pytest.mark.slow
@pytest.mark.parametrize("name", ENCODINGS)
def test_the_shared_corpora_encode_in_parts_like_tiktoken(encoding_pair, name: str) -> None:
    """The shared corpora (many languages), a few MB, at the default sizes of parts."""
    corpora = require_shared("corpora")
    ours, theirs = encoding_pair(name)
    text = "".join(path.read_text(encoding="utf-8") for path in sorted(corpora.glob("*.txt")))
    text = text[: scaled(4_000_000, minimum=200_000)]
    ids, taken = parts_taken(ours.encode_ordinary, text, 24)
    assert taken >= 20
    assert ids == theirs.encode_ordinary(text)


def test_a_long_texts_list_is_filled_part_by_part_and_owns_its_small_ints() -> None:
    """The parts' ids are copied into one list on the pool's threads: the list is whole, tracked by
    the garbage collector, and holds one reference to each small int per slot (as any list does)."""
    import gc
    import sys

    model = hf_bpe.get_encoding("gpt2")
    text = FILLER * 6_000  # some 80,000 ids: a list filled on the pool's threads
    expected = one_thread(model.encode_ordinary, text)
    small = next(id for id in expected if id <= 256)
    gc.collect()
    gc.disable()  # nothing else may release a reference to the small int meanwhile
    try:
        before, parts_before = sys.getrefcount(small), _core._parallel_counts()[0]
        with parallel(8):
            ids = model.encode_ordinary(text)  # the list made by the core, not a copy
        assert ids == expected and _core._parallel_counts()[0] - parts_before == 8
        held = sum(1 for id in ids if id is small)
        assert type(ids) is list and gc.is_tracked(ids) and held > 0
        if sys.version_info < (3, 12):  # CPython's small ints are immortal from 3.12 on
            assert sys.getrefcount(small) - before == held
        del ids
        assert sys.getrefcount(small) == before
    finally:
        gc.enable()
