"""Streams: ``BPE.encode_iterable`` gives exactly ``encode`` of the joined texts, wherever the texts
are cut, in memory that does not grow with the input; ``stream_decoder`` (and ``decode_parts`` over it) give
exactly ``decode`` of all the ids, never part of a character.

Most checks make the core encode after every part (``_streaming.BLOCK_BYTES = 1``), so every cut is
a boundary the stream has to get right; a few keep the default block. The memory checks run in a
fresh interpreter and read its peak RSS; they are ``slow`` (sized by ``HF_BPE_TEST_SCALE``).
"""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from suite import PARITY_ENCODINGS, require_shared, scaled

import hf_bpe
from hf_bpe import BPE, DisallowedSpecialTokenError, UnknownTokenError, _streaming
from hf_bpe._streaming import decode_parts

SUPPORT = Path(textgen.__file__).resolve().parent

# Characters of every class the split patterns tell apart (contraction letters and their folds,
# Lt/Lm/Lo letters, a mark, numbers, white space with and without line breaks, apostrophe, slash,
# punctuation), emoji sequences that span several tokens, and the start of a special token.
EVERY_CLASS = [
    "a", "s", "l", "e", "v", "t", "L", "S", "A", "\u017f", "\u01c5", "\u02b0", "中", "\u0301", "1", "²", "٣",
    " ", " ", "\t", "\n", "\r", "\u00a0", "\u3000", "'", "/", "!", ".", "😀", "👨\u200d👩\u200d👧", "🇫🇷", "é", "<|",
]
SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>", "<|endoftext", "endoftext|>"]

TRICKY = (
    "Hello world's  end  \n\n  It'S THEY'LL don't we've I'M  \t\r\n1234567 ٣٣٣٣ x²³ HTMLParser "
    "A\u02b0B\u02b0c 中文字符 naïve café ☕ 👨\u200d👩\u200d👧 🇫🇷🇩🇪 e\u0301\u0301 a/b\n/ "
    "<|endoftext|>x<|fim_prefix|><|endoftext <|endofprompt|>   \n \n   trailing  "
)


@pytest.fixture
def every_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the core encode after every part it gets, not every 64 KiB."""
    monkeypatch.setattr(_streaming, "BLOCK_BYTES", 1)


@pytest.fixture(scope="module", params=PARITY_ENCODINGS)
def enc(request: pytest.FixtureRequest) -> BPE:
    return hf_bpe.get_encoding(request.param)


def cut(text: str, positions: list[int]) -> list[str]:
    edges = [0, *sorted(positions), len(text)]
    return [text[start:end] for start, end in itertools.pairwise(edges)]


def streamed(enc: BPE, parts: Any, **policy: Any) -> list[int]:
    return list(enc.encode_iterable(parts, **policy))


# ------------------------------------------------------------------------------- exactness


@pytest.mark.usefixtures("every_part")
def test_every_cut_into_two_parts_streams_to_the_ids_of_the_whole(enc: BPE) -> None:
    for policy in ({"allowed_special": "all"}, {"disallowed_special": ()}):
        expected = enc.encode(TRICKY, **policy)
        for at in range(len(TRICKY) + 1):
            assert streamed(enc, cut(TRICKY, [at]), **policy) == expected, (policy, TRICKY[:at])


@pytest.mark.usefixtures("every_part")
def test_every_cut_into_three_parts_streams_to_the_ids_of_the_whole(enc: BPE) -> None:
    text = "it'll  \n\n A\u02b0Bc 12345<|endoftext|><|endoftext 😀!!\r\n x"
    expected = enc.encode(text, allowed_special="all")
    for first in range(len(text) + 1):
        for second in range(first, len(text) + 1):
            assert streamed(enc, cut(text, [first, second]), allowed_special="all") == expected


@pytest.mark.usefixtures("every_part")
@settings(max_examples=scaled(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pieces=st.lists(st.sampled_from(EVERY_CLASS + SPECIALS), max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    name=st.sampled_from(PARITY_ENCODINGS),
    allowed=st.sampled_from(["all", {"<|endoftext|>"}, set()]),
)
def test_random_text_cut_anywhere_streams_to_the_ids_of_the_whole(
    pieces: list[str], cuts: list[int], name: str, allowed: Any
) -> None:
    enc = hf_bpe.get_encoding(name)
    text = "".join(pieces)
    policy = {"allowed_special": allowed, "disallowed_special": ()}
    parts = cut(text, [at for at in cuts if at <= len(text)])
    assert streamed(enc, parts, **policy) == enc.encode(text, **policy)


@pytest.mark.usefixtures("every_part")
def test_generated_documents_stream_exactly_in_random_parts(enc: BPE) -> None:
    rng = random.Random(7)
    text = "<|endoftext|>".join(textgen.documents(rng, scaled(150_000)))
    expected = enc.encode(text, allowed_special="all")
    for _ in range(3):
        positions = rng.sample(range(len(text)), rng.choice([5, 300, len(text) // 20]))
        assert streamed(enc, cut(text, positions), allowed_special="all") == expected


@pytest.mark.parametrize("block", [1, _streaming.BLOCK_BYTES])
def test_shared_corpora_stream_exactly_line_by_line_and_in_odd_sizes(
    enc: BPE, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_streaming, "BLOCK_BYTES", block)
    folder = require_shared("corpora")
    rng = random.Random(block)
    for path in sorted(folder.glob("*.txt")):
        text = path.read_text(encoding="utf-8")[: scaled(120_000) if block == 1 else scaled(600_000)]
        expected = enc.encode_ordinary(text)
        assert streamed(enc, io.StringIO(text), disallowed_special=()) == expected, path.name
        positions = rng.sample(range(len(text)), len(text) // rng.choice([7, 1000, 50_000]))
        assert streamed(enc, cut(text, positions), disallowed_special=()) == expected, path.name


@pytest.mark.usefixtures("every_part")
def test_surrogate_pairs_split_between_parts_join_as_in_the_whole(enc: BPE) -> None:
    text = "a\ud83d\ude00b \ud83d x\ude00 \ud83d"  # a pair, then lone surrogates (U+FFFD, as encode)
    expected = enc.encode(text)
    for at in range(len(text) + 1):
        assert streamed(enc, cut(text, [at]) + [""]) == expected
    assert streamed(enc, list(text)) == expected


@pytest.mark.usefixtures("every_part")
def test_overlapping_special_tokens_take_the_longest_match_across_parts() -> None:
    ranks = {bytes([byte]): byte for byte in range(256)}
    enc = BPE(ranks, "gpt2", special_tokens={"<|a": 300, "<|a|>": 301, "|>": 302})
    text = "x<|a|>y<|a<|a|>|>"
    expected = enc.encode(text, allowed_special="all")
    assert expected.count(301) == 2 and 300 in expected
    for first in range(len(text) + 1):
        for second in range(first, len(text) + 1):
            assert streamed(enc, cut(text, [first, second]), allowed_special="all") == expected


@pytest.mark.usefixtures("every_part")
def test_a_disallowed_special_token_raises_wherever_it_is_cut() -> None:
    enc = hf_bpe.get_encoding("cl100k_base")
    text = "some text <|endoftext|> more"
    for at in range(len(text) + 1):
        with pytest.raises(DisallowedSpecialTokenError, match="<\\|endoftext\\|>"):
            streamed(enc, cut(text, [at]))
        with pytest.raises(DisallowedSpecialTokenError, match="<\\|fim_prefix\\|>"):
            streamed(enc, cut(text.replace("endoftext", "fim_prefix"), [at]), allowed_special={"<|endoftext|>"})
    assert streamed(enc, cut(text, [13]), disallowed_special=()) == enc.encode(text, disallowed_special=())


# ----------------------------------------------------------------------------- the interface


def test_ids_arrive_before_the_input_ends() -> None:
    enc = hf_bpe.get_encoding("gpt2")
    taken = 0

    def lines() -> Iterator[str]:
        nonlocal taken
        for number in range(2000):
            taken += 1
            yield f"line {number}: the quick brown fox jumps over the lazy dog. " * 8 + "\n"

    ids = enc.encode_iterable(lines())
    first = next(ids)
    assert taken < 500  # 64 KiB is ~120 lines
    rest = list(ids)
    assert [first, *rest] == enc.encode("".join(lines()))


def test_any_iterable_of_str_is_accepted_and_a_str_is_one_text() -> None:
    enc = hf_bpe.get_encoding("o200k_base")
    text = "one line\nanother line\n"
    expected = enc.encode(text)
    assert streamed(enc, text) == expected
    assert streamed(enc, io.StringIO(text)) == expected
    assert streamed(enc, (line for line in text.splitlines(keepends=True))) == expected
    assert streamed(enc, []) == [] and streamed(enc, ["", ""]) == []
    with pytest.raises(TypeError, match="iterable of str, got an item of type bytes"):
        streamed(enc, ["text", b"bytes"])
    with pytest.raises(TypeError):
        enc.encode_iterable(42)  # type: ignore[arg-type]


def test_models_whose_pattern_may_look_far_ahead_refuse_to_stream_at_once() -> None:
    ranks = {bytes([byte]): byte for byte in range(256)}
    custom = BPE(ranks, r"a+b|a|\s+|[^a\s]+")  # a run of "a" is one piece only if "b" follows it
    with pytest.raises(ValueError, match="custom split pattern"):
        custom.encode_iterable(["aaa"])
    with pytest.raises(ValueError, match="no split pattern"):
        sentencepiece_model("botchan").encode_iterable(["text"])


def test_a_piece_longer_than_the_limit_raises_and_none_lifts_the_limit() -> None:
    enc = hf_bpe.get_encoding("cl100k_base")
    letters = ["abcdefghij" * 100] * 200  # 200 KB of letters: one piece
    with pytest.raises(ValueError, match="max_piece_bytes"):
        streamed(enc, letters, max_piece_bytes=50_000)
    assert streamed(enc, letters, max_piece_bytes=None) == enc.encode("".join(letters))
    assert streamed(enc, ["word "] * 40_000, max_piece_bytes=100) == enc.encode("word " * 40_000)
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="max_piece_bytes"):
            enc.encode_iterable(["x"], max_piece_bytes=bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- decoding


@pytest.fixture(scope="module")
def interesting_ids() -> dict[str, list[int]]:
    """Per encoding: ids of tokens that are not whole UTF-8 (parts of characters), of some that are,
    and of the special tokens."""
    chosen = {}
    for name in PARITY_ENCODINGS:
        enc = hf_bpe.get_encoding(name)
        partial, whole = [], []
        for token_id in range(0, enc.n_vocab, 7):
            try:
                token = enc.decode_single_token_bytes(token_id)
            except KeyError:
                continue
            try:
                token.decode("utf-8")
            except UnicodeDecodeError:
                partial.append(token_id)
            else:
                whole.append(token_id)
        rng = random.Random(0)
        chosen[name] = (rng.sample(partial, min(300, len(partial))) + rng.sample(whole, 100)
                        + list(enc.special_tokens.values()))
    return chosen


def decoded_in_parts(enc: BPE, ids: list[int], cuts: list[int], errors: str) -> str:
    decoder = enc.stream_decoder(errors=errors)
    texts = [decoder.feed(part) for part in cut_ids(ids, cuts)]
    return "".join(texts) + decoder.finish()


def cut_ids(ids: list[int], positions: list[int]) -> list[list[int]]:
    edges = [0, *sorted(at for at in positions if at <= len(ids)), len(ids)]
    return [ids[start:end] for start, end in itertools.pairwise(edges)]


@settings(max_examples=scaled(200), deadline=None)
@given(data=st.data(), name=st.sampled_from(PARITY_ENCODINGS),
       errors=st.sampled_from(["replace", "ignore", "backslashreplace", "surrogateescape", "strict"]))
def test_decoding_in_parts_equals_decoding_the_whole(
    interesting_ids: dict[str, list[int]], data: st.DataObject, name: str, errors: str
) -> None:
    enc = hf_bpe.get_encoding(name)
    ids = data.draw(st.lists(st.sampled_from(interesting_ids[name]), max_size=30))
    cuts = data.draw(st.lists(st.integers(0, 30), max_size=8))
    try:
        expected = enc.decode(ids, errors=errors)
    except UnicodeDecodeError:
        with pytest.raises(UnicodeDecodeError):
            decoded_in_parts(enc, ids, cuts, errors)
        return
    assert decoded_in_parts(enc, ids, cuts, errors) == expected
    assert decoded_in_parts(enc, ids, list(range(len(ids))), errors) == expected


@settings(max_examples=scaled(150), deadline=None)
@given(pieces=st.lists(st.sampled_from(EVERY_CLASS + ["日本語", "𝄞", "ÿ", "\U0010ffff"]), max_size=30),
       name=st.sampled_from(PARITY_ENCODINGS))
def test_one_id_at_a_time_never_gives_part_of_a_character(pieces: list[str], name: str) -> None:
    enc = hf_bpe.get_encoding(name)
    text = "".join(pieces)
    decoder = enc.stream_decoder()
    so_far = ""
    for token in enc.encode(text, disallowed_special=()):
        so_far += decoder.feed(token)
        assert text.startswith(so_far), (text, so_far)
    assert so_far + decoder.finish() == text


def test_a_truncated_character_at_the_end_decodes_as_decode_does() -> None:
    enc = hf_bpe.get_encoding("gpt2")
    ids = enc.encode("ok 🦀")  # the crab spans three tokens
    for keep in range(len(ids) + 1):
        for errors in ("replace", "ignore", "backslashreplace"):
            assert decoded_in_parts(enc, ids[:keep], [1, 2, 3], errors) == enc.decode(ids[:keep], errors=errors)
    decoder = enc.stream_decoder(errors="strict")
    decoder.feed(ids[:-1])
    with pytest.raises(UnicodeDecodeError):
        decoder.finish()


def sentencepiece_model(name: str) -> BPE:
    conversion_sentencepiece = pytest.importorskip("conversion.sentencepiece")
    from conversion_support import mistral_file

    if name == "botchan":  # no byte fallback, nmt_nfkc normalization
        return conversion_sentencepiece.load(require_shared("sentencepiece", "botchan_en_bpe_1000.model"))
    return conversion_sentencepiece.load(mistral_file("tokenizer.model.v1"))  # byte fallback


@pytest.mark.parametrize("name", ["botchan", "mistral-v1"])
def test_sentencepiece_models_decode_in_parts_as_a_whole(name: str) -> None:
    enc = sentencepiece_model(name)
    rng = random.Random(3)
    text_ids = enc.encode_ordinary(" leading space, naïve 日本語 🦀 tail ")
    for _ in range(scaled(300)):
        ids = [rng.randrange(enc.n_vocab) for _ in range(rng.randrange(12))]
        ids = rng.choice([ids, text_ids, [1, *text_ids], [rng.randrange(3, 259) for _ in range(6)]])
        cuts = [rng.randrange(len(ids) + 1) for _ in range(3)]
        for errors in ("replace", "ignore"):
            assert decoded_in_parts(enc, ids, cuts, errors) == enc.decode(ids, errors=errors), (ids, cuts)
    decoder = enc.stream_decoder()
    assert decoder.feed(text_ids[:1]) + decoder.feed(text_ids[1:]) + decoder.finish() == enc.decode(text_ids)
    assert decoder.feed(text_ids) + decoder.finish() == enc.decode(text_ids)  # a new sequence after finish


def test_decode_parts_takes_ids_or_groups_and_yields_as_characters_complete() -> None:
    enc = hf_bpe.get_encoding("cl100k_base")
    text = "naïve café ☕ 日本語 and more text\n" * 50
    ids = enc.encode(text)
    pulled = 0

    def one_by_one() -> Iterator[int]:
        nonlocal pulled
        for token in ids:
            pulled += 1
            yield token

    texts = decode_parts(enc.stream_decoder(), one_by_one())
    assert next(texts) and pulled < 5
    assert "".join(texts) and "" not in list(decode_parts(enc.stream_decoder(), ids))
    assert "".join(decode_parts(enc.stream_decoder(), cut_ids(ids, [3, 50, 51]))) == text
    assert "".join(decode_parts(enc.stream_decoder(), enc.encode_iterable(io.StringIO(text)))) == text


def test_decoders_reject_unknown_ids_and_error_handlers() -> None:
    enc = hf_bpe.get_encoding("cl100k_base")
    with pytest.raises(UnknownTokenError):
        enc.stream_decoder().feed([100261])  # a hole between the special tokens
    with pytest.raises(UnknownTokenError):
        list(decode_parts(enc.stream_decoder(), [1, -5]))
    with pytest.raises(LookupError):
        enc.stream_decoder(errors="no-such-handler")


# ------------------------------------------------------------------------------------ memory

# Runs in a fresh interpreter: streams generated text (documents separated by <|endoftext|>) and
# prints the peak RSS growth while streaming, and whether the ids equal each document's own
# encoding followed by the separator (what encode gives for the whole, never built here).
MEMORY_SCRIPT = textwrap.dedent(
    """
    import ctypes, gc, hashlib, json, random, sys
    sys.path.insert(0, sys.argv[1])
    import hf_bpe, textgen
    name, megabytes, max_piece = sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    enc = hf_bpe.get_encoding(name)
    docs = textgen.documents(random.Random(5), 1_000_000, specials=False)
    eot = enc.encode_single_token("<|endoftext|>")
    expected_ids = [enc.encode(doc, disallowed_special=()) + [eot] for doc in docs]

    def rss(field):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1]) * 1024

    def lines(total, pathological):
        sent = 0
        while sent < total:
            if pathological:
                part = "a" * 65536
            else:
                doc = docs[(sent // 7919) % len(docs)]
                part = doc + "<|endoftext|>"
            sent += len(part.encode())
            yield from part.splitlines(keepends=True) or [part]

    def expected(total):
        sent = 0
        while sent < total:
            index = (sent // 7919) % len(docs)
            sent += len((docs[index] + "<|endoftext|>").encode())
            yield expected_ids[index]

    def digest(batches):
        hasher, count = hashlib.blake2b(), 0
        for batch in batches:
            hasher.update(repr(batch).encode())
            count += len(batch)
        return hasher.hexdigest(), count

    def batched(ids, size=4096):
        batch = []
        for token in ids:
            batch.append(token)
            if len(batch) == size:
                yield batch
                batch = []
        yield batch

    pathological = max_piece > 0
    total = int(megabytes * 2**20)
    policy = dict(allowed_special="all", max_piece_bytes=max_piece or None)
    list(enc.encode_iterable(lines(2**20, False), **policy))  # warm up
    gc.collect()
    try:  # free memory goes back to the system, so reusing it shows as growth
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    open("/proc/self/clear_refs", "w").write("5")  # restart the peak-RSS counter (Linux)
    baseline = rss("VmRSS")
    error = None
    try:
        got = digest(batched(enc.encode_iterable(lines(total, pathological), **policy)))
    except ValueError as raised:
        got, error = None, str(raised)
    growth = rss("VmHWM") - baseline
    flat = (token for ids in expected(total) for token in ids)
    same = None if pathological else got == digest(batched(flat))
    print(json.dumps({"growth": growth, "same": same, "ids": got and got[1], "error": error}))
    """
)


def stream_in_a_fresh_process(name: str, megabytes: float, max_piece: int = 0) -> dict[str, Any]:
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("measuring peak memory needs Linux's /proc/self/clear_refs")
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(SUPPORT), name, str(megabytes), str(max_piece)],
        capture_output=True, text=True, timeout=600, check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    if result.returncode != 0 and "clear_refs" in result.stderr:
        pytest.skip(f"cannot restart the peak-RSS counter here: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.slow
def test_memory_does_not_grow_with_the_length_of_the_stream() -> None:
    small, large = scaled(6), scaled(24)
    first = stream_in_a_fresh_process("cl100k_base", small)
    second = stream_in_a_fresh_process("cl100k_base", large)
    assert first["same"] and second["same"], (first, second)
    assert second["ids"] > 3 * first["ids"]
    mib = 2**20
    assert first["growth"] < 16 * mib and second["growth"] < 16 * mib, (first, second)
    assert second["growth"] < first["growth"] + 8 * mib, (first, second)


@pytest.mark.slow
def test_a_stream_without_a_piece_boundary_stops_at_the_limit_in_bounded_memory() -> None:
    limit = 4 * 2**20
    report = stream_in_a_fresh_process("o200k_base", scaled(64), max_piece=limit)
    assert report["error"] and "max_piece_bytes" in report["error"], report
    assert report["growth"] < 3 * limit + 4 * 2**20, report  # about twice the limit is held at most
