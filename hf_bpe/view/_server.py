"""The token page's server: Python's own ``http.server``, on 127.0.0.1 unless told otherwise.

Routes: ``GET /`` the page; ``POST /api/encode`` with ``{"text": str}`` and ``POST /api/decode``
with ``{"ids": [int, ...]}`` answer ``{"results": [one per tokenizer], "elapsed_ms": float}``, each
result a :meth:`~hf_bpe._token_view.TokenView.to_json` (encoding with a byte-level model packs it:
:meth:`TokenPage.encode`; decoding adds the decoded ``text``; a tokenizer that cannot decode the
ids gives ``{"name", "error"}`` instead). Bad requests get status 400 (413 when too large, 403
when addressed to another host name than localhost on a loopback address) and ``{"error": message}``.

>>> import hf_bpe
>>> page = TokenPage([("gpt2", hf_bpe.get_encoding("gpt2"))])
>>> page.decode([15496, 995])["results"][0]["text"]
'Hello world'
>>> page.decode([15496, 995, 99999])["results"][0]["error"]
'id 99999 is not a token of gpt2'
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import socket
import sys
import threading
import time
from array import array
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from hf_bpe._io import atomic_write
from hf_bpe._token_view import view_ids, view_text
from hf_bpe.view._examples import DEFAULT_TEXT, EXAMPLES

if TYPE_CHECKING:
    from hf_bpe.model import BPE

MAX_REQUEST_BYTES = 32 * 2**20
"""The largest request body the server reads (32 MiB of JSON: the page sends ``{"text": ...}``, so
texts of up to about 30 MB); a larger one is refused with 413 before any of it is read."""
READ_BYTES = 1 << 16
"""A body is read this many bytes at a time: what a connection holds is what it has sent."""
REQUEST_TIMEOUT = 30.0
"""Seconds a connection may stay silent (while sending a request or between two) before it is closed."""
MAX_CONNECTIONS = 256
"""Connections served at once; one more is answered 503 and closed."""
PARALLEL_BYTES = 16_384
"""Texts this long or longer are encoded by every tokenizer at once (the core releases the GIL)."""
MAX_IDS = 2**32
"""Ids are below this (the core's ids are 32-bit)."""
_CONFIG_SLOT = '<script type="application/json" id="config">null</script>'


class TokenPage:
    """The tokenizers a page shows, and its answers: :meth:`encode`, :meth:`decode`, :meth:`html`
    (the live page) and :meth:`static_html` (one self-contained file). ``tokenizers`` are
    ``(label, model)`` pairs in the order of the panels; ``text`` is what the live page opens with;
    ``command`` is shown in a static export as the way to edit it live; ``allow_special`` (default
    True) shows special-token text as the special tokens' ids, else as ordinary text (``hf-bpe
    encode``'s default)."""

    def __init__(self, tokenizers: Sequence[tuple[str, BPE]], *, text: str = DEFAULT_TEXT,
                 command: str | None = None, allow_special: bool = True) -> None:
        if not tokenizers:
            raise ValueError("a token page needs at least one tokenizer")
        labels: list[str] = []
        for label, _ in tokenizers:
            unique, number = label, 2
            while unique in labels:
                unique, number = f"{label} ({number})", number + 1
            labels.append(unique)
        self.tokenizers = [(label, model) for label, (_, model) in zip(labels, tokenizers)]
        self.text = text
        self.command = command
        self.allow_special = allow_special
        self._lengths = [_token_lengths(model) for _, model in self.tokenizers]
        # The core releases the GIL on long texts, so the tokenizers of one request encode in parallel.
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(len(tokenizers), os.cpu_count() or 1)),
                                        thread_name_prefix="hf-bpe-view")

    def encode(self, text: str) -> dict[str, Any]:
        """Every tokenizer's view of ``text`` (special tokens as :attr:`allow_special` says), as the page reads it: a
        :meth:`~hf_bpe._token_view.TokenView.to_json` per tokenizer, except that byte-level models
        answer with ``ids`` and ``lengths`` packed (base64 of little-endian 32-bit ids and 8-bit
        byte lengths, 16-bit if the model has tokens of 256 bytes or more; the page reads them as
        typed arrays) and no ``special`` (the page knows each
        tokenizer's special ids): one request per keystroke carries every tokenizer's tokens of the
        whole text, so it must be cheap to make, to send and to read.

        >>> import base64, hf_bpe
        >>> answer = TokenPage([("gpt2", hf_bpe.get_encoding("gpt2"))]).encode("Hi!")["results"][0]
        >>> sorted(answer)
        ['bytes', 'characters', 'ids', 'lengths', 'name']
        >>> array("I", base64.b64decode(answer["ids"])).tolist(), list(base64.b64decode(answer["lengths"]))
        ([17250, 0], [2, 1])
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a string, got {type(text).__name__}")
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise ValueError(f"the text holds a lone surrogate at character {error.start}; send UTF-8 text"
                             ) from None
        started = time.perf_counter()
        allowed: Literal["all"] | set[str] = "all" if self.allow_special else set()

        def one(item: tuple[tuple[str, BPE], tuple[list[int], str] | None]) -> dict[str, Any]:
            (label, model), lengths_by_id = item
            if lengths_by_id is not None:
                table, typecode = lengths_by_id
                ids = model.encode(text, allowed_special=allowed, disallowed_special=())
                lengths = list(map(table.__getitem__, ids))
                if sum(lengths) == size:
                    return {"name": label, "ids": _packed("I", ids),
                            "lengths": _packed(typecode, lengths),
                            "characters": len(text), "bytes": size}
            return view_text(model, text, name=label, allowed_special=allowed).to_json()

        if size < PARALLEL_BYTES:
            results = [one(item) for item in zip(self.tokenizers, self._lengths)]
        else:
            results = list(self._pool.map(one, zip(self.tokenizers, self._lengths)))
        return {"results": results, "elapsed_ms": round((time.perf_counter() - started) * 1000, 2)}

    def decode(self, ids: Sequence[int]) -> dict[str, Any]:
        """Every tokenizer's view of ``ids`` (the decoded ``text`` added to each result)."""
        if not isinstance(ids, list) or not all(isinstance(token, int) and not isinstance(token, bool)
                                                and 0 <= token < MAX_IDS for token in ids):
            raise ValueError(f"ids must be a list of ints from 0 to {MAX_IDS - 1}")
        started = time.perf_counter()
        results = []
        for label, model in self.tokenizers:
            try:
                view = view_ids(model, ids, name=label)
            except KeyError as error:
                results.append({"name": label, "error": error.args[0]})
                continue
            results.append(view.to_json() | {"text": view.text})
        return {"results": results, "elapsed_ms": round((time.perf_counter() - started) * 1000, 2)}

    def html(self) -> str:
        """The live page: it asks this server for the tokens as the text changes."""
        return _page(self._config() | {"text": self.text, "examples": EXAMPLES, "static": None})

    def static_html(self, text: str) -> str:
        """One self-contained page showing ``text`` under every tokenizer: the tokens are embedded,
        so it needs no server and no network (editing is off, and the page says so)."""
        answer = self.encode(text)
        static = {"text": text, "results": answer["results"]}
        return _page(self._config() | {"text": text, "examples": [], "static": static,
                                       "command": self.command})

    def export(self, text: str, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`static_html` of ``text`` to ``path`` (atomically)."""
        return atomic_write(path, self.static_html(text))

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self.tokenizers]

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    def _config(self) -> dict[str, Any]:
        return {"tokenizers": self.labels,
                "special_ids": [sorted(model.special_tokens.values()) for _, model in self.tokenizers]}


def _token_lengths(model: BPE) -> tuple[list[int], str] | None:
    """Each id's length in bytes, and the ``array`` type that holds them (bytes, or 16-bit if a
    token is longer than 255 bytes), for a byte-level model; ``None`` for other models and models
    with tokens of 64 KiB (these answer through their token views)."""
    if model.kind == "sentencepiece":
        return None
    table = [0] * model.n_vocab
    for token, rank in model.mergeable_ranks.items():
        table[rank] = len(token)
    for name, rank in model.special_tokens.items():
        table[rank] = len(name.encode("utf-8"))
    longest = max(table, default=0)
    return None if longest >= 2**16 else (table, "B" if longest < 2**8 else "H")


def _packed(typecode: str, values: list[int]) -> str:
    """``values`` as base64 of little-endian machine integers (``array`` ``typecode``)."""
    packed = array(typecode, values)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def page_template() -> str:
    """The page as shipped (``hf_bpe/view/page.html``), before its configuration is put in."""
    return resources.files("hf_bpe.view").joinpath("page.html").read_text(encoding="utf-8")


def _page(config: dict[str, Any]) -> str:
    template = page_template()
    if _CONFIG_SLOT not in template:
        raise RuntimeError("hf_bpe/view/page.html has lost its configuration slot; reinstall hf_bpe")
    # Inside <script>, "</script>" and "<!--" must not appear: JSON may write "<" as \u003c.
    data = json.dumps(config, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    data = data.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return template.replace(_CONFIG_SLOT, f'<script type="application/json" id="config">{data}</script>', 1)


# ------------------------------------------------------------------------------------------- serving


class _Server(ThreadingHTTPServer):
    """One thread per connection, at most ``max_connections`` at once; each connection silent for
    ``request_timeout`` seconds is closed (:meth:`_Handler.setup`)."""

    daemon_threads = True
    request_queue_size = 128  # connections waiting to be accepted (a browser opens several at once)
    page: TokenPage
    page_html: bytes
    request_timeout: float
    max_connections: int
    _slots: threading.BoundedSemaphore

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            _refuse_busy(request, self.max_connections)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # the browser left (a reload, a closed tab) before its answer was sent, or went silent
        super().handle_error(request, client_address)


def _refuse_busy(request: socket.socket, limit: int) -> None:
    """Answer 503 on a connection past the limit, without waiting for its request."""
    body = json.dumps({"error": f"the token page serves at most {limit} connections at once; try again"}).encode()
    head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n").encode()
    try:
        request.setblocking(False)  # a fresh socket's send buffer is empty: this does not wait
        request.send(head + body)
    except OSError:
        pass  # the client is gone, or not reading: closing the connection is the answer


class _Server6(_Server):
    address_family = socket.AF_INET6


def make_server(page: TokenPage, host: str = "127.0.0.1", port: int = 0, *,
                request_timeout: float = REQUEST_TIMEOUT,
                max_connections: int = MAX_CONNECTIONS) -> ThreadingHTTPServer:
    """A server for ``page`` listening on ``host``:``port`` (port 0: a free one; read it from
    ``server.server_address``). Call ``serve_forever()`` to answer and ``server_close()`` after.

    A connection silent for ``request_timeout`` seconds is closed, at most ``max_connections`` are
    served at once (one more is answered 503) and request bodies over :data:`MAX_REQUEST_BYTES` are
    refused (413): connections that send nothing cannot keep the page from its user."""
    if isinstance(request_timeout, bool) or not isinstance(request_timeout, (int, float)) or not request_timeout > 0:
        raise ValueError(f"request_timeout must be a positive number of seconds, got {request_timeout!r}")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise ValueError(f"max_connections must be a positive int, got {max_connections!r}")
    server_class = _Server6 if ":" in host else _Server
    server = server_class((host, port), _Handler)
    server.request_timeout = float(request_timeout)
    server.max_connections = max_connections
    server._slots = threading.BoundedSemaphore(max_connections)
    server.page = page
    server.page_html = page.html().encode("utf-8")
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    """The address to open the page at."""
    host, port = str(server.server_address[0]), server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    if shown in ("0.0.0.0", "[::]"):
        shown = "127.0.0.1" if shown == "0.0.0.0" else "[::1]"
    return f"http://{shown}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "hf-bpe-view"
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the answer's headers and body go out at once, not 40 ms apart

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)  # every read and write of the connection

    def do_GET(self) -> None:
        if not self._host_allowed():
            return
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            self._send(HTTPStatus.OK, "text/html; charset=utf-8", self.server.page_html)
        elif path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, "text/plain", b"")
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no page at {path}; the token page is at /")

    def do_POST(self) -> None:
        if not self._host_allowed():
            return
        path = urlsplit(self.path).path
        if path not in ("/api/encode", "/api/decode"):
            self._error(HTTPStatus.NOT_FOUND, f"no endpoint {path}; use /api/encode or /api/decode")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._error(HTTPStatus.LENGTH_REQUIRED, "send the request's Content-Length")
            return
        if length < 0 or length > MAX_REQUEST_BYTES:
            self.close_connection = True
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                        f"the request has {length} bytes; the token page takes at most {MAX_REQUEST_BYTES}")
            return
        body = self._body(length)
        if body is None:
            return
        try:
            request = json.loads(body)
            if not isinstance(request, dict):
                raise TypeError("send a JSON object")
            if path == "/api/encode":
                text = request.get("text")
                if not isinstance(text, str):
                    raise TypeError(f"send the text as {{\"text\": string}}, not {type(text).__name__}")
                answer = self.server.page.encode(text)
            else:
                ids = request.get("ids")
                if not isinstance(ids, list):
                    raise TypeError(f"send the ids as {{\"ids\": [int, ...]}}, not {type(ids).__name__}")
                answer = self.server.page.decode(ids)
        except (ValueError, TypeError, RecursionError) as error:
            self._error(HTTPStatus.BAD_REQUEST, f"{path}: {error}")
            return
        data = json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._send(HTTPStatus.OK, "application/json; charset=utf-8", data)

    def _body(self, length: int) -> bytes | None:
        """The request's body, read as it arrives (never ``length`` bytes reserved up front); None
        when the client stopped sending before the end (the connection is closed)."""
        chunks = []
        left = length
        while left:
            chunk = self.rfile.read(min(left, READ_BYTES))  # a silent client times out here
            if not chunk:
                self.close_connection = True
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _host_allowed(self) -> bool:
        """On a loopback address, answer only requests addressed to this machine by name or number:
        a web page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) is refused."""
        if not ipaddress.ip_address(str(self.server.server_address[0])).is_loopback:
            return True
        host = urlsplit(f"//{self.headers.get('Host', '')}").hostname or ""
        if host in ("localhost", "127.0.0.1", "::1") or host.endswith(".localhost"):
            return True
        self._error(HTTPStatus.FORBIDDEN, f"the token page answers only requests to localhost or 127.0.0.1, "
                    f"not to {host!r}; open it at {url_of(self.server)}")
        return False

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send(status, "application/json; charset=utf-8", json.dumps({"error": message}).encode("utf-8"))

    def _send(self, status: HTTPStatus, content_type: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per keystroke would drown the terminal
