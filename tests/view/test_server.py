"""The token page's answers (``hf_bpe.view``): what ``/api/encode`` and ``/api/decode`` send for every
kind of model, the requests they refuse, and the page with its configuration put in safely."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import re
import socket
import threading
import time
from array import array
from collections.abc import Iterator
from typing import Any

import pytest
from conversion_support import mistral_file, trained_model, varied_texts

import hf_bpe
from hf_bpe._token_view import view_text
from hf_bpe.view import DEFAULT_TEXT, EXAMPLES, TokenPage, make_server
from hf_bpe.view._server import MAX_REQUEST_BYTES, url_of


def unpacked(result: dict[str, Any]) -> tuple[list[int], list[int]]:
    """The ids and byte lengths of a packed result, as the page reads them."""
    ids = array("I", base64.b64decode(result["ids"])).tolist()
    raw = base64.b64decode(result["lengths"])
    lengths = list(raw) if len(raw) == len(ids) else array("H", raw).tolist()
    return ids, lengths


@pytest.fixture(scope="module")
def page() -> Iterator[TokenPage]:
    import conversion.sentencepiece

    page = TokenPage([("gpt2", hf_bpe.get_encoding("gpt2")), ("o200k_base", hf_bpe.get_encoding("o200k_base")),
                      ("trained", trained_model()),
                      ("mistral", conversion.sentencepiece.load(mistral_file("tokenizer.model.v1")))])
    yield page
    page.close()


def test_encode_answers_what_each_models_view_says(page: TokenPage) -> None:
    for text in [*varied_texts(300, seed=18), "x" * 20_000 + "🦙<|endoftext|>"]:
        answer = page.encode(text)
        assert [result["name"] for result in answer["results"]] == page.labels
        for result, (_, model) in zip(answer["results"], page.tokenizers):
            view = view_text(model, text)
            if model.kind == "sentencepiece":
                assert result == view.to_json() | {"name": result["name"]}
                continue
            ids, lengths = unpacked(result)
            assert ids == view.ids == model.encode(text, allowed_special="all")
            assert lengths == [len(span.bytes) for span in view.spans]
            assert (result["characters"], result["bytes"]) == (len(text), len(text.encode("utf-8")))


def test_decode_answers_the_text_or_the_unknown_id(page: TokenPage) -> None:
    ids = hf_bpe.get_encoding("gpt2").encode("Hello 🦙<|endoftext|>", allowed_special="all")
    results = page.decode(ids)["results"]
    assert results[0]["text"] == "Hello 🦙<|endoftext|>" and results[0]["ids"] == ids
    assert results[1]["text"] == hf_bpe.get_encoding("o200k_base").decode(ids)
    assert results[2] == {"name": "trained", "error": f"id {ids[0]} is not a token of trained"}
    unknown = next(token for token in ids if token >= page.tokenizers[3][1].n_vocab)
    assert results[3] == {"name": "mistral", "error": f"id {unknown} is not a token of mistral"}
    with pytest.raises(ValueError, match="ids must be a list of ints from 0 to 4294967295"):
        page.decode([1, -2])


def test_page_holds_its_configuration_and_nothing_from_the_network(page: TokenPage) -> None:
    html = page.html()
    config = json.loads(re.search(r'<script type="application/json" id="config">(.*?)</script>', html, re.DOTALL)[1])
    assert config["tokenizers"] == page.labels and config["text"] == DEFAULT_TEXT
    assert config["examples"] == [list(example) for example in EXAMPLES]
    assert config["special_ids"][0] == [50256] and config["special_ids"][3] == [0, 1, 2]
    assert not re.search(r"https?://|<script[^>]*src=|<link", html)


def test_text_cannot_break_out_of_the_page(page: TokenPage) -> None:
    text = "</script><script>alert(1)</script><!-- \u2028"
    html = page.static_html(text)
    assert "<script>alert" not in html and html.count("</script>") == page.html().count("</script>")
    config = json.loads(re.search(r'<script type="application/json" id="config">(.*?)</script>', html, re.DOTALL)[1])
    assert config["static"]["text"] == text


def test_labels_are_made_unique() -> None:
    model = hf_bpe.get_encoding("gpt2")
    page = TokenPage([("gpt2", model), ("gpt2", model), ("gpt2", model)])
    assert page.labels == ["gpt2", "gpt2 (2)", "gpt2 (3)"]
    page.close()
    with pytest.raises(ValueError, match="at least one tokenizer"):
        TokenPage([])


# -------------------------------------------------------------------------------------------- HTTP


@pytest.fixture(scope="module")
def server(page: TokenPage) -> Iterator[tuple[str, int]]:
    server = make_server(page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    assert host == "127.0.0.1" and url_of(server) == f"http://127.0.0.1:{port}/"
    yield str(host), int(port)
    server.shutdown()
    server.server_close()


def exchange(server: tuple[str, int], method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection(*server, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        answer = connection.getresponse()
        data = answer.read()
        return answer.status, json.loads(data) if answer.headers["Content-Type"].startswith("application/json") \
            else data.decode("utf-8")
    finally:
        connection.close()


def test_http_answers_and_refusals(server: tuple[str, int]) -> None:
    status, html = exchange(server, "GET", "/")
    assert status == 200 and "hf_bpe token view" in html
    status, answer = exchange(server, "POST", "/api/encode", json.dumps({"text": "Hi!"}).encode())
    ids = hf_bpe.get_encoding("gpt2").encode("Hi!")
    assert status == 200 and unpacked(answer["results"][0]) == (ids, [2, 1])
    status, answer = exchange(server, "POST", "/api/decode", json.dumps({"ids": ids}).encode())
    assert status == 200 and answer["results"][0]["text"] == "Hi!"
    refusals = [
        ("GET", "/nothing", None, 404, "no page at /nothing; the token page is at /"),
        ("POST", "/api/nothing", b"{}", 404, "no endpoint /api/nothing; use /api/encode or /api/decode"),
        ("POST", "/api/encode", b"not json", 400, "/api/encode: Expecting value"),
        ("POST", "/api/encode", b"[1]", 400, "/api/encode: send a JSON object"),
        ("POST", "/api/encode", b'{"text": "\\ud800"}', 400, "lone surrogate at character 0"),
        ("POST", "/api/decode", b'{"ids": "1 2"}', 400, 'send the ids as {"ids": [int, ...]}, not str'),
        ("POST", "/api/decode", b'{"ids": [1.5]}', 400, "ids must be a list of ints"),
    ]
    for method, path, body, expected_status, message in refusals:
        status, answer = exchange(server, method, path, body)
        assert status == expected_status and message in answer["error"], (path, body, answer)
    status, answer = exchange(server, "POST", "/api/encode", b"{}",
                              headers={"Content-Length": str(MAX_REQUEST_BYTES + 1)})
    assert status == 413 and "at most" in answer["error"]
    for host in ("localhost", f"localhost:{server[1]}", "[::1]:80"):
        assert exchange(server, "GET", "/", headers={"Host": host})[0] == 200
    status, answer = exchange(server, "POST", "/api/decode", b'{"ids": [1]}', headers={"Host": "evil.example:80"})
    assert status == 403 and "not to 'evil.example'" in answer["error"]


@contextlib.contextmanager
def serving(page: TokenPage, **limits: Any) -> Iterator[Any]:
    server = make_server(page, **limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def connections_served(server: Any) -> int:
    return int(server.max_connections - server._slots._value)


def wait_for(condition: Any) -> None:
    """Poll ``condition()`` until it holds (the server accepts connections in its own thread)."""
    for _ in range(6000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("the server did not get there")


IDLE_STARTS = [  # what a starving client sends, then nothing more
    b"GET / HTTP/1.1\r\nHost: loc",  # part of the headers
    b"POST /api/encode HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n{\"te" % MAX_REQUEST_BYTES,
]


def test_idle_connections_do_not_starve_the_page_and_are_closed(page: TokenPage) -> None:
    """200 connections that send part of a request and then nothing: the page is still served while
    they are open, and the server closes each once it has been silent for the timeout."""
    with serving(page, request_timeout=5) as server:
        address = server.server_address[:2]
        idle = []
        for number in range(200):
            connection = socket.create_connection(address, timeout=120)
            connection.sendall(IDLE_STARTS[number % 2])
            idle.append(connection)
        wait_for(lambda: connections_served(server) == 200)
        status, answer = exchange(address, "POST", "/api/encode", json.dumps({"text": "Hi!"}).encode())
        assert status == 200 and unpacked(answer["results"][0])[0] == hf_bpe.get_encoding("gpt2").encode("Hi!")
        assert exchange(address, "GET", "/")[0] == 200
        assert connections_served(server) >= 200  # they were all open meanwhile
        for connection in idle:
            assert connection.recv(1024) == b""  # closed by the server (the socket waits up to 120 s)
            connection.close()
        wait_for(lambda: connections_served(server) == 0)


def test_connections_past_the_limit_are_answered_503(page: TokenPage) -> None:
    with serving(page, max_connections=3, request_timeout=120) as server:
        address = server.server_address[:2]
        idle = [socket.create_connection(address, timeout=120) for _ in range(3)]
        for connection in idle:
            connection.sendall(IDLE_STARTS[0])
        wait_for(lambda: connections_served(server) == 3)
        status, answer = exchange(address, "GET", "/")
        assert status == 503 and "at most 3 connections at once" in answer["error"]
        for connection in idle:
            connection.close()  # the server reads the end of the request and frees the slot
        wait_for(lambda: connections_served(server) == 0)
        assert exchange(address, "GET", "/")[0] == 200
    for bad in [{"request_timeout": 0}, {"request_timeout": True}, {"max_connections": 0}]:
        with pytest.raises(ValueError, match="must be a positive"):
            make_server(page, **bad)
