"""tiktoken rank files: load, save, and rejection of malformed files; every line form read exactly as
tiktoken's ``load_tiktoken_bpe`` reads it (generated edge-form files, compared with tiktoken itself), the
empty token, and Whisper's two rank files against the encodings Whisper builds from them."""

from __future__ import annotations

import base64
import gzip
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from suite import scaled

import conversion.tiktoken
import hf_bpe
from hf_bpe import BPE, patterns
from hf_bpe.errors import TokenizerFileError

BYTES = {bytes([byte]): byte for byte in range(256)}


def rank_file(tmp_path: Path, lines: list[bytes], name: str = "ranks.tiktoken") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def byte_lines() -> list[bytes]:
    return [base64.b64encode(token) + b" " + str(rank).encode() for token, rank in BYTES.items()]


def test_save_then_load_round_trips_ranks_with_holes(tmp_path: Path) -> None:
    model = BPE(BYTES | {b"ab": 300, b"abc": 1000}, "cl100k", {"<|endoftext|>": 2000})
    path = conversion.tiktoken.save(model, tmp_path / "model.tiktoken")
    loaded = conversion.tiktoken.load(path, pattern="cl100k", special_tokens={"<|endoftext|>": 2000})
    assert loaded == model
    assert loaded.name == "model"


def test_saved_file_is_read_by_tiktoken_itself(tmp_path: Path) -> None:
    load_tiktoken_bpe = pytest.importorskip("tiktoken.load").load_tiktoken_bpe
    ranks = BYTES | {b" t": 256, b"he": 257, b" the": 258}
    path = conversion.tiktoken.save(BPE(ranks, "gpt2"), tmp_path / "x.tiktoken")
    assert load_tiktoken_bpe(os.fspath(path)) == ranks


def test_official_file_round_trips_byte_for_byte(tmp_path: Path) -> None:
    """Our writer reproduces the official cl100k file exactly (same SHA-256 as tiktoken expects)."""
    model = hf_bpe.get_encoding("cl100k_base")
    from hf_bpe._encodings import CL100K, find_file

    _, original = find_file(CL100K)
    assert conversion.tiktoken.dumps(model) == original


def test_gzipped_files_are_read(tmp_path: Path) -> None:
    path = tmp_path / "ranks.tiktoken.gz"
    path.write_bytes(gzip.compress(b"\n".join(byte_lines()) + b"\n"))
    assert conversion.tiktoken.load(path, pattern="gpt2").mergeable_ranks == BYTES


def test_blank_lines_are_skipped_like_tiktoken(tmp_path: Path) -> None:
    path = rank_file(tmp_path, [b"", *byte_lines()[:128], b"", *byte_lines()[128:], b""])
    assert conversion.tiktoken.read_ranks(path) == BYTES


@pytest.mark.parametrize(
    ("bad_line", "problem"),
    [
        (b"YWI=", "expected '<base64 token> <rank>'"),
        (b"YWI= 300 extra", "expected '<base64 token> <rank>'"),
        (b"!!notbase64 300", "invalid base64"),
        (b"YWI= three", "not an integer"),
        (b"YWI= -1", "out of range"),
        (b"YWI= 99999999999", "out of range"),
        (b"YWI= 97", "rank 97 is given to two tokens, b'a' \\(line 98\\) and b'ab'"),
        (b" 300", "expected '<base64 token> <rank>'"),
        (b" \t ", "expected '<base64 token> <rank>'"),  # only whitespace: not an empty line
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path: Path, bad_line: bytes, problem: str) -> None:
    lines = byte_lines()
    lines.insert(200, bad_line)
    path = rank_file(tmp_path, lines, "broken.tiktoken")
    with pytest.raises(TokenizerFileError, match=problem) as raised:
        conversion.tiktoken.load(path, pattern="gpt2")
    assert raised.value.line == 201
    assert "broken.tiktoken, line 201" in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_empty_and_corrupt_gzip_files_are_rejected(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tiktoken"
    empty.write_bytes(b"")
    with pytest.raises(TokenizerFileError, match="no ranks"):
        conversion.tiktoken.load(empty, pattern="gpt2")
    corrupt = tmp_path / "corrupt.tiktoken.gz"
    corrupt.write_bytes(gzip.compress(b"\n".join(byte_lines()))[:200])
    with pytest.raises(TokenizerFileError, match="corrupt.tiktoken.gz"):
        conversion.tiktoken.load(corrupt, pattern="gpt2")


def test_missing_single_bytes_are_rejected_with_the_file_loaded(tmp_path: Path) -> None:
    path = rank_file(tmp_path, byte_lines()[:100])
    with pytest.raises(hf_bpe.InvalidVocabularyError, match="single byte"):
        conversion.tiktoken.load(path, pattern="gpt2")


def test_save_is_atomic_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "model.tiktoken"
    target.write_bytes(b"previous contents\n")
    model = BPE(BYTES, "gpt2")

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        conversion.tiktoken.save(model, target)
    assert target.read_bytes() == b"previous contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.tiktoken"], "temporary file left behind"


def test_save_rejects_non_models(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        conversion.tiktoken.save({b"a": 0}, tmp_path / "x.tiktoken")  # type: ignore[arg-type]


# ------------------------------------------------------------- every line form, as tiktoken reads it

EDGE_TOKENS = {b"ab": 256, b" the": 257, b"\xe6\x97\xa5": 258, b"hello world!": 259}
"""Multi-byte tokens of the generated rank files (after the 256 single bytes)."""


@pytest.fixture
def tiktoken_reading(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``reading(path)``: the ranks tiktoken reads from ``path`` (``load_tiktoken_bpe``, then
    ``tiktoken.Encoding`` built from them, which refuses some tables the loader returns), or the
    exception one of them raised."""
    tiktoken = pytest.importorskip("tiktoken")
    load_tiktoken_bpe = pytest.importorskip("tiktoken.load").load_tiktoken_bpe
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # no cache: a path read twice may hold new contents

    def reading(path: Path) -> dict[bytes, int] | BaseException:
        try:
            ranks = load_tiktoken_bpe(os.fspath(path))
            tiktoken.Encoding("edge", pat_str=patterns.GPT2, mergeable_ranks=ranks, special_tokens={})
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # noqa: BLE001 (tiktoken's Rust panics are BaseExceptions)
            return error
        return ranks

    return reading


def _respell(rng: random.Random, encoded: bytes) -> bytes:
    """Another spelling of a base64 token, valid or not: padding dropped or added, characters outside
    the alphabet (urlsafe ones, punctuation, non-ASCII bytes) inserted, data after the padding."""
    choice = rng.randrange(6)
    if choice == 0:
        return encoded.rstrip(b"=")
    if choice == 1:
        return encoded + b"=" * rng.randint(1, 3)
    if choice == 2:
        at = rng.randint(0, len(encoded))
        return encoded[:at] + rng.choice([b"!", b"-", b"_", b".", b"\xff", b"\x00", b"\xc3\xa9", b"*"]) + encoded[at:]
    if choice == 3:
        return encoded.replace(b"+", b"-").replace(b"/", b"_")
    if choice == 4:
        return encoded + rng.choice([b"YQ==", b"=", b"a", b"YWI="])
    return encoded.rstrip(b"=") + b"=" * rng.randint(0, 2)


def _mutate(rng: random.Random, lines: list[bytes]) -> str:
    """Apply one edge form to ``lines`` in place; return its name."""
    fresh = 300 + len(lines)
    form = rng.choice([
        "blank line", "whitespace line", "padded fields", "respelled token", "empty token", "token twice",
        "rank twice", "rank spelling", "rank out of range", "field count", "byte order mark",
    ])
    at = rng.randint(0, len(lines))
    if form == "blank line":
        lines.insert(at, b"")
    elif form == "whitespace line":
        lines.insert(at, rng.choice([b" ", b"\t", b"\x0b", b"\x0c", b" \t ", b"\x1c"]))
    elif form == "padded fields":
        index = rng.randrange(len(lines))
        fields = lines[index].split()
        if len(fields) == 2:
            space = [b" ", b"\t", b"\x0b", b"\x0c", b"  ", b"\x1c", b"\xa0"]
            lines[index] = rng.choice(space + [b""]) + fields[0] + rng.choice(space) + fields[1] + rng.choice(space + [b""])
    elif form == "respelled token":
        index = rng.randrange(len(lines))
        fields = lines[index].split()
        if len(fields) == 2:
            lines[index] = _respell(rng, fields[0]) + b" " + fields[1]
    elif form == "empty token":
        lines.insert(at, rng.choice([b"=", b"==", b"===", b"====", b"!", b"-"]) + b" " + str(fresh).encode())
    elif form == "token twice":
        fields = lines[rng.randrange(len(lines))].split()
        rank = fields[1] if rng.random() < 0.3 else str(fresh).encode()
        lines.insert(at, fields[0] + b" " + rank)
    elif form == "rank twice":
        fields = lines[rng.randrange(len(lines))].split()
        lines.insert(at, base64.b64encode(b"xyz%d" % fresh) + b" " + fields[1])
    elif form == "rank spelling":
        spelled = rng.choice([b"+%d", b"0%d", b"%d_0", b"%d.0", b"0x%d", b"-%d", b"%d\xd9\xa1", b"\xd9\xa1"])
        lines.insert(at, base64.b64encode(b"xyz%d" % fresh) + b" " + (spelled % fresh if b"%" in spelled else spelled))
    elif form == "rank out of range":
        rank = rng.choice([-1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40])
        lines.insert(at, base64.b64encode(b"xyz%d" % fresh) + b" " + str(rank).encode())
    elif form == "field count":
        lines.insert(at, rng.choice([b"YWJj", b"YWJj 1 2", b"YWJj 1 x", b"1"]))
    else:
        lines[0] = b"\xef\xbb\xbf" + lines[0]
    return form


def edge_rank_files(count: int, seed: int = 15) -> list[tuple[str, bytes]]:
    """``count`` generated rank files: the 256 single bytes and :data:`EDGE_TOKENS` in random order,
    with one to three edge forms each, joined by random line ends (``\\n``, ``\\r\\n``, ``\\r``),
    with or without a final one."""
    rng = random.Random(seed)
    files = []
    for _ in range(count):
        ranks = BYTES | EDGE_TOKENS
        lines = [base64.b64encode(token) + b" " + str(rank).encode() for token, rank in ranks.items()]
        rng.shuffle(lines)
        forms = [_mutate(rng, lines) for _ in range(rng.randint(1, 3))]
        end = rng.choice([b"\n", b"\n", b"\r\n", b"\r"])
        files.append((", ".join(forms), end.join(lines) + (end if rng.random() < 0.8 else b"")))
    return files


def _within_our_limits(ranks: dict[bytes, int]) -> bool:
    """Whether hf_bpe can hold a table tiktoken accepted: ids below 2**31 and all 256 single bytes."""
    return all(rank < 2**31 for rank in ranks.values()) and all(bytes([byte]) in ranks for byte in range(256))


@pytest.mark.slow
def test_generated_rank_files_read_exactly_as_tiktoken_reads_them(tmp_path: Path, tiktoken_reading: Any) -> None:
    """Every generated file: same ranks as tiktoken, or refused with ``TokenizerFileError`` naming the
    file where tiktoken refuses it (or, for a table tiktoken takes, where hf_bpe's limits refuse it);
    where both load it, the same ids on text."""
    import tiktoken

    texts = ["hello world! the", "日本 ab", " the  \n\tab", "", "xyz300 \x00\x01\xff"]
    outcomes: Counter[str] = Counter()
    files = edge_rank_files(scaled(600, 60))
    for index, (forms, data) in enumerate(files):
        path = tmp_path / f"edge-{index}.tiktoken"
        path.write_bytes(data)
        theirs = tiktoken_reading(path)
        try:
            ours: Any = conversion.tiktoken.load(path, pattern="gpt2")
        except (TokenizerFileError, hf_bpe.InvalidVocabularyError) as error:
            ours = error
        where = f"file {index} ({forms})"
        if isinstance(ours, BaseException):
            assert path.name in str(ours) or isinstance(ours, hf_bpe.InvalidVocabularyError), f"{where}: {ours}"
            if isinstance(theirs, dict):  # tiktoken takes it: only hf_bpe's documented limits may refuse
                assert not _within_our_limits(theirs), f"{where}: tiktoken reads it, we refuse: {ours}"
                outcomes["beyond our limits"] += 1
            else:
                outcomes["both refuse"] += 1
            continue
        assert isinstance(theirs, dict), f"{where}: tiktoken refuses it ({theirs!r}), we read it"
        assert ours.mergeable_ranks == theirs, where
        encoding = tiktoken.Encoding("edge", pat_str=patterns.GPT2, mergeable_ranks=theirs, special_tokens={})
        assert [ours.encode_ordinary(text) for text in texts] == [encoding.encode_ordinary(text) for text in texts]
        outcomes["both read"] += 1
    # The generated forms reach both outcomes often (about a third of the files are read).
    assert min(outcomes["both read"], outcomes["both refuse"]) >= len(files) // 10, outcomes


@pytest.mark.parametrize("line", [b"= 300", b"== 300", b"==== 300", b"! 300", b"=\t300 ", b"-_ 300"])
def test_the_empty_token_reads_as_tiktoken_reads_it(tmp_path: Path, tiktoken_reading: Any, line: bytes) -> None:
    """Whisper's ``multilingual.tiktoken`` ends with ``= 50256``: tiktoken reads ``b""`` with that rank."""
    path = rank_file(tmp_path, [*byte_lines(), line])
    expected = tiktoken_reading(path)
    assert isinstance(expected, dict) and b"" in expected
    model = conversion.tiktoken.load(path, pattern="gpt2")
    assert model.mergeable_ranks == expected
    assert model.decode_single_token_bytes(300) == b"" and model.decode([104, 300, 105]) == "hi"
    assert model.encode_single_token(b"") == model.encode_single_token("") == 300
    assert 300 not in model.encode_ordinary("any text at all, 日本語 \n\n  ")


def test_a_token_given_twice_takes_its_last_rank_as_in_tiktoken(tmp_path: Path, tiktoken_reading: Any) -> None:
    path = rank_file(tmp_path, [*byte_lines(), b"YWI= 300", b"YWI= 301", b"YQ== 302"])
    expected = tiktoken_reading(path)
    assert isinstance(expected, dict)
    model = conversion.tiktoken.load(path, pattern="gpt2")
    assert model.mergeable_ranks == expected
    with pytest.raises(KeyError):
        model.decode_single_token_bytes(97)  # b"a" moved to 302: 97 and 300 are holes, as in tiktoken


def test_saving_writes_the_empty_token_as_tiktoken_reads_it_back(tmp_path: Path, tiktoken_reading: Any) -> None:
    model = BPE(BYTES | {b"": 256, b"ab": 257}, "gpt2")
    path = conversion.tiktoken.save(model, tmp_path / "empty.tiktoken")
    assert path.read_bytes().endswith(b"\n= 256\nYWI= 257\n")
    assert tiktoken_reading(path) == model.mergeable_ranks
    assert conversion.tiktoken.load(path, pattern="gpt2") == model


EMPTY_MATCHING_PATTERNS = [r"a*", r"\b", r"(?=a)|b", r"x*(?!y)", r"é?", r"\w+|", r"\s*|\S", r"$|^|\p{L}+"]


@pytest.mark.parametrize("pattern", ["gpt2", *EMPTY_MATCHING_PATTERNS])
def test_the_empty_token_encodes_as_in_tiktoken_on_patterns_that_match_the_empty_string(
    tiktoken_encoding: Any, pattern: str
) -> None:
    """tiktoken looks every match up whole, an empty match too: with an empty token in the ranks each
    one becomes that token (the named patterns never match the empty string)."""
    import tiktoken
    from conversion_support import varied_texts

    ranks = {token: rank for token, rank in tiktoken_encoding("gpt2")._mergeable_ranks.items() if rank < 3000}
    ranks[b""] = 3000
    specials = {"<|endoftext|>": 3001}
    regex = patterns.resolve(pattern)
    theirs = tiktoken.Encoding("empty", pat_str=regex, mergeable_ranks=ranks, special_tokens=specials)
    ours = BPE(ranks, pattern, specials)
    texts = varied_texts(scaled(1000, 50), seed=3)
    assert [ours.encode_ordinary(text) for text in texts] == [theirs.encode_ordinary(text) for text in texts]
    assert ([ours.encode(text, allowed_special="all") for text in texts]
            == [theirs.encode(text, allowed_special="all") for text in texts])
    assert ours.encode_batch(list(texts), allowed_special="all") == theirs.encode_batch(list(texts), allowed_special="all")
    if pattern != "gpt2":
        assert any(3000 in theirs.encode_ordinary(text) for text in texts), "the pattern never matched empty"


# ---------------------------------------------------------------------------------- Whisper's files

WHISPER_ENCODINGS = ("gpt2", "multilingual")


@pytest.fixture(scope="module")
def whisper(whisper_files: Path) -> Any:
    """Whisper's own ``tokenizer.py``: ``get_encoding(name)`` builds the ``tiktoken.Encoding`` Whisper
    uses from ``assets/<name>.tiktoken`` (ranks, its pattern, 1,608 special tokens)."""
    pytest.importorskip("tiktoken")
    import oracles

    return oracles.whisper_tokenizer_module(whisper_files)


def whisper_asset(whisper_files: Path, name: str) -> Path:
    return whisper_files / "whisper" / "assets" / f"{name}.tiktoken"


def whisper_texts(theirs: Any, count: int) -> list[str]:
    """Varied strings, a fifth of them with Whisper's special tokens cut in (start of transcript,
    languages, tasks, timestamps), to exercise its 1,608 special tokens."""
    from conversion_support import varied_texts

    rng = random.Random(15)
    specials = sorted(theirs.special_tokens_set)
    texts = list(varied_texts(count))
    for index in range(0, len(texts), 5):
        text = texts[index]
        cut = rng.randint(0, len(text))
        texts[index] = text[:cut] + "".join(rng.choices(specials, k=rng.randint(1, 3))) + text[cut:]
    return texts


@pytest.mark.parametrize("name", WHISPER_ENCODINGS)
def test_whisper_rank_files_load_as_tiktoken_reads_them(
    whisper: Any, whisper_files: Path, tiktoken_reading: Any, name: str
) -> None:
    """Before: ``multilingual.tiktoken`` was refused over its last line, ``= 50256``."""
    path = whisper_asset(whisper_files, name)
    ranks = conversion.tiktoken.read_ranks(path)
    assert ranks == tiktoken_reading(path) == whisper.get_encoding(name)._mergeable_ranks
    assert (b"" in ranks) == (name == "multilingual")
    assert conversion.tiktoken.dumps(BPE(ranks, "gpt2")) == path.read_bytes(), "not saved back byte for byte"


@pytest.mark.slow
@pytest.mark.parametrize("name", WHISPER_ENCODINGS)
def test_whisper_encodings_match_tiktoken(whisper: Any, whisper_files: Path, name: str) -> None:
    """Whisper's encodings as Whisper builds them (its pattern and special tokens) against ours loaded
    from the same file, with its own pattern and with tiktoken's gpt2 pattern by name: every method
    we share with tiktoken, on 8,000 varied strings at scale 1."""
    import tiktoken
    from conversion_support import assert_same

    theirs = whisper.get_encoding(name)
    specials = dict(theirs._special_tokens)
    path = whisper_asset(whisper_files, name)
    ours = conversion.tiktoken.load(path, pattern=theirs._pat_str, special_tokens=specials)
    named = conversion.tiktoken.load(path, pattern="gpt2", special_tokens=specials)
    theirs_named = tiktoken.Encoding(name, pat_str=patterns.GPT2, mergeable_ranks=theirs._mergeable_ranks,
                                     special_tokens=specials, explicit_n_vocab=theirs.n_vocab)
    for model in (ours, named):
        assert (model.n_vocab, model.max_token_value, model.eot_token) == (
            theirs.n_vocab, theirs.max_token_value, theirs.eot_token)
        assert model.special_tokens_set == theirs.special_tokens_set
        assert model.mergeable_ranks == theirs._mergeable_ranks
    assert named.token_byte_values() == theirs.token_byte_values()
    for token in range(theirs.max_token_value + 2):
        try:
            expected: Any = theirs.decode_single_token_bytes(token)
        except KeyError:
            expected = KeyError
        if expected is KeyError:
            with pytest.raises(KeyError):
                named.decode_single_token_bytes(token)
        else:
            assert named.decode_single_token_bytes(token) == expected, token
    for value in [*theirs.token_byte_values(), *theirs.special_tokens_set]:
        assert named.encode_single_token(value) == theirs.encode_single_token(value), value
    for value in (b"", ""):  # the empty token, or an unknown one
        if b"" in theirs._mergeable_ranks:
            assert named.encode_single_token(value) == theirs.encode_single_token(value) == 50256
        else:
            with pytest.raises(KeyError):
                theirs.encode_single_token(value)
            with pytest.raises(KeyError):
                named.encode_single_token(value)

    texts = whisper_texts(theirs, scaled(8_000, 200))
    expected_ids = [theirs.encode(text, allowed_special="all") for text in texts]
    assert_same(f"{name} encode, gpt2 by name", texts, [named.encode(text, allowed_special="all") for text in texts],
                expected_ids)
    assert_same(f"{name} encode, Whisper's own pattern", texts,
                [ours.encode(text, allowed_special="all") for text in texts], expected_ids)
    assert_same(f"{name} encode_ordinary", texts, [named.encode_ordinary(text) for text in texts],
                [theirs_named.encode_ordinary(text) for text in texts])
    assert_same(f"{name} encode_batch", texts, named.encode_batch(texts, allowed_special="all", num_threads=2),
                theirs_named.encode_batch(texts, allowed_special="all", num_threads=2))
    assert named.encode_ordinary_batch(texts[:2000]) == theirs_named.encode_ordinary_batch(texts[:2000])
    assert_same(f"{name} decode", texts, [named.decode(ids) for ids in expected_ids],
                [theirs.decode(ids) for ids in expected_ids])
    rng = random.Random(15)
    valid = [*theirs._mergeable_ranks.values(), *specials.values()]
    id_lists = [rng.choices(valid, k=rng.randint(0, 30)) + [50256] * rng.randint(0, 2) for _ in range(scaled(3000, 100))]
    assert [named.decode_bytes(ids) for ids in id_lists] == [theirs.decode_bytes(ids) for ids in id_lists]
    assert named.decode_batch(id_lists) == theirs.decode_batch(id_lists)
    assert [named.decode_tokens_bytes(ids) for ids in id_lists] == [theirs.decode_tokens_bytes(ids) for ids in id_lists]
    for text in ("<|startoftranscript|> hi", "a<|en|>", "<|0.02|>"):
        with pytest.raises(ValueError):
            theirs.encode(text)
        with pytest.raises(ValueError):
            named.encode(text)


@pytest.mark.slow
@pytest.mark.parametrize("name", WHISPER_ENCODINGS)
def test_whisper_models_round_trip_through_every_writer(
    whisper: Any, whisper_files: Path, tmp_path: Path, name: str
) -> None:
    """The empty token survives our file, ``tokenizer.json`` (read by ``tokenizers``) and a
    transformers folder (``BPETokenizer``, and ``TokenizersBackend`` without hf_bpe's class)."""
    tokenizers = pytest.importorskip("tokenizers")
    from transformers import AutoTokenizer, TokenizersBackend

    import conversion.hf

    theirs = whisper.get_encoding(name)
    model = conversion.tiktoken.load(whisper_asset(whisper_files, name), pattern="gpt2",
                                     special_tokens=dict(theirs._special_tokens))
    texts = whisper_texts(theirs, scaled(2000, 100))
    expected = [theirs.encode(text, allowed_special="all") for text in texts]

    model.save(tmp_path / "model.json")
    assert BPE.load(tmp_path / "model.json") == model

    conversion.hf.save(model, tmp_path / "tokenizer.json")
    hf_tokenizer = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert [hf_tokenizer.encode(text, add_special_tokens=False).ids for text in texts] == expected
    assert ([hf_tokenizer.decode(ids, skip_special_tokens=False) for ids in expected]
            == [theirs.decode(ids) for ids in expected])
    assert hf_tokenizer.decode([50256, 1], skip_special_tokens=False) == theirs.decode([50256, 1])
    back = conversion.hf.load(tmp_path / "tokenizer.json")
    assert [back.encode(text, allowed_special="all") for text in texts] == expected

    folder = tmp_path / "folder"
    hf_bpe.BPETokenizer.from_model(model, eos_token="<|endoftext|>").save_pretrained(folder)
    for tokenizer in (AutoTokenizer.from_pretrained(folder), TokenizersBackend.from_pretrained(folder)):
        assert [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts] == expected, type(tokenizer)
        assert tokenizer.decode([50256, 1]) == theirs.decode([50256, 1])
