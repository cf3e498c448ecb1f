"""``hf-bpe view`` (``hf_bpe.cli._view``): the terminal form, the static export, the live server as a
real process (its address, its answers, Ctrl-C), and bad input stopping it before anything starts.

The ids printed and served are compared with tiktoken's and with the loaded models' ``encode``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conversion_support import cl100k_file, gpt2_files, mistral_file, trained_model

import hf_bpe
from hf_bpe._token_view import view_text
from hf_bpe.cli import main
from hf_bpe.transformers import BPETokenizer

TEXT = "Hello 🦙 world!\n\tif x == 12345:<|endoftext|>토큰"


def run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    status = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def hf_bpe_command(*argv: Any, **options: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hf_bpe.cli", *map(str, argv)], check=False, capture_output=True,
                          text=True, encoding="utf-8", timeout=300, **options)


def printed_ids(out: str) -> list[list[int]]:
    return [json.loads(line[len("ids: "):]) for line in out.splitlines() if line.startswith("ids: [")]


# ------------------------------------------------------------------------------------------ terminal


def test_plain_terminal_form_has_the_ids_of_tiktoken(capsys: pytest.CaptureFixture[str], encoding_pair: Any) -> None:
    status, out, err = run(capsys, "view", "gpt2", "cl100k_base", "--text", TEXT, "--allow-special")
    assert status == 0 and err == ""
    assert "\x1b[" not in out  # not a terminal: no colors
    expected = [encoding_pair(name)[1].encode(TEXT, allowed_special="all") for name in ("gpt2", "cl100k_base")]
    assert printed_ids(out) == expected
    blocks = out.split("\n\n")
    sizes = f"{len(TEXT)} characters, {len(TEXT.encode())} bytes ("
    assert blocks[0].startswith(f"gpt2: {len(expected[0])} tokens, {sizes}")
    assert blocks[1].startswith(f"cl100k_base: {len(expected[1])} tokens, {sizes}")
    assert "⟦<|endoftext|>⟧" in out and "[·world]" in out and "→" in out
    assert "<0xF0 0x9F" in out and "\ufffd" not in out  # the llama is cut into bytes, shown as bytes


def test_view_and_encode_give_the_same_ids_with_and_without_allow_special(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """Special-token text is ordinary text for both by default; ``--allow-special`` makes it the
    special token's id for both (terminal, HTML export)."""
    for flag in ([], ["--allow-special"]):
        status, encoded, _ = run(capsys, "encode", "gpt2", TEXT, *flag)
        assert status == 0
        status, viewed, err = run(capsys, "view", "gpt2", "--text", TEXT, *flag)
        assert status == 0, err
        assert printed_ids(viewed) == [[int(token) for token in encoded.split()]]
        assert (50256 in printed_ids(viewed)[0]) == bool(flag)
        out_file = tmp_path / f"tokens{len(flag)}.html"
        assert run(capsys, "view", "gpt2", "--html", out_file, "--text", TEXT, *flag)[0] == 0
        page = out_file.read_text(encoding="utf-8")
        config = json.loads(re.search(r'<script type="application/json" id="config">(.*?)</script>', page,
                                      re.DOTALL)[1])
        assert array("I", base64.b64decode(config["static"]["results"][0]["ids"])).tolist() == printed_ids(viewed)[0]


def test_ansi_colors_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "view", "gpt2", "--text", TEXT, "--color", "always", "--allow-special")
    assert status == 0
    model = hf_bpe.get_encoding("gpt2")
    assert out == view_text(model, TEXT).ansi() + "\n"
    assert "\x1b[30;48;5;" in out and "\x1b[1;7m<|endoftext|>" in out


def test_standard_input_is_read_as_utf8_bytes(encoding_pair: Any) -> None:
    text = "line one\r\nline two\n🦙\n"
    done = hf_bpe_command("view", "o200k_base", "--text", "-", input=text, env=os.environ | {"NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    assert printed_ids(done.stdout) == [encoding_pair("o200k_base")[1].encode(text, allowed_special="all")]
    assert "␍↵" in done.stdout  # "\r\n" reached the tokenizer as it is
    refused = subprocess.run([sys.executable, "-m", "hf_bpe.cli", "view", "gpt2", "--text", "-"],
                             input=b"\xff\xfe bad", capture_output=True, timeout=300, check=False)
    assert refused.returncode == 2
    assert b"standard input is not UTF-8 (byte 0" in refused.stderr


def test_every_kind_of_tokenizer_file_is_viewed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    encoder, _ = gpt2_files()
    folder = tmp_path / "trained"
    BPETokenizer.from_model(trained_model()).save_pretrained(folder)
    import conversion.sentencepiece

    sources: list[tuple[Any, Any]] = [
        (folder, trained_model()),
        (folder / "tokenizer.json", trained_model()),
        (encoder.parent, hf_bpe.get_encoding("gpt2")),
        (cl100k_file(), hf_bpe.get_encoding("cl100k_base")),
        (mistral_file("tokenizer.model.v1"), conversion.sentencepiece.load(mistral_file("tokenizer.model.v1"))),
    ]
    status, out, err = run(capsys, "view", *[source for source, _ in sources], "--text", TEXT, "--allow-special")
    assert status == 0, err
    assert printed_ids(out) == [model.encode(TEXT, allowed_special="all") for _, model in sources]


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("extra", [["--text", "x"], ["--html", "out.html"], ["--no-browser", "--port", "0"]])
def test_an_unknown_tokenizer_stops_before_anything_starts(tmp_path: Path, extra: list[str]) -> None:
    done = hf_bpe_command("view", "gpt2", "no-such-tokenizer", *extra, cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown tokenizer 'no-such-tokenizer': it is neither a named encoding" in done.stderr
    assert "Serving" not in done.stdout and not (tmp_path / "out.html").exists()


def test_an_unreadable_tokenizer_file_gives_its_loaders_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.model"
    broken.write_bytes(mistral_file("tokenizer.model.v1").read_bytes()[:1000])
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01 not a tokenizer")
    empty = tmp_path / "empty"
    empty.mkdir()
    # exit status as for every command: 1 for a file that cannot be read, 2 for a format not told
    for source, message, status in [(broken, "broken.model", 1), (junk, "cannot tell the format of", 2),
                                    (empty, "cannot tell the format of the folder", 2)]:
        done = hf_bpe_command("view", source, "--no-browser")
        assert done.returncode == status, (source, done.stderr)
        assert "hf-bpe view: error: " in done.stderr and message in done.stderr
        assert "Serving" not in done.stdout
    done = hf_bpe_command("view", cl100k_file().with_suffix(".nope"), "--text", "x")
    assert done.returncode == 2 and "neither a named encoding" in done.stderr


# ------------------------------------------------------------------------------------------ export


def test_static_export_is_one_file_without_network(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_file = tmp_path / "tokens.html"
    status, out, _ = run(capsys, "view", "gpt2", "cl100k_base", "--html", out_file, "--text", TEXT, "--allow-special")
    assert status == 0 and f"Wrote {out_file}" in out
    page = out_file.read_text(encoding="utf-8")
    assert not re.search(r"https?://", page)
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=", page, re.IGNORECASE)
    config = json.loads(re.search(r'<script type="application/json" id="config">(.*?)</script>', page, re.DOTALL)[1])
    assert config["static"]["text"] == TEXT and config["tokenizers"] == ["gpt2", "cl100k_base"]
    for result, name in zip(config["static"]["results"], ("gpt2", "cl100k_base")):
        ids = array("I", base64.b64decode(result["ids"])).tolist()
        assert ids == hf_bpe.get_encoding(name).encode(TEXT, allowed_special="all")
    status, _, err = run(capsys, "view", "gpt2", "--html", out_file / "x.html")  # under a file
    assert status == 1 and "cannot write" in err


# ------------------------------------------------------------------------------------------ serving


SERVE_AS_IN_A_TERMINAL = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                          "from hf_bpe.cli import main; sys.exit(main())")
"""``hf-bpe`` with Ctrl-C raising KeyboardInterrupt, as when a person starts it in a terminal: a test run
started in the background (``pytest &`` in a script) passes SIGINT ignored to its children, and Python
then never turns SIGINT into KeyboardInterrupt."""


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``hf-bpe view gpt2 cl100k_base TRAINED --no-browser`` as a process, and its address."""
    folder = tmp_path / "trained"
    BPETokenizer.from_model(trained_model()).save_pretrained(folder)
    process = subprocess.Popen([sys.executable, "-c", SERVE_AS_IN_A_TERMINAL, "view", "gpt2", "cl100k_base",
                                str(folder), "--no-browser", "--allow-special"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, encoding="utf-8")
    try:
        line = process.stdout.readline() if process.stdout else ""
        match = re.search(r"at (http://127\.0\.0\.1:(\d+)/)", line)
        assert match, f"the server did not say where it serves: {line!r} {process.stderr.read() if process.stderr else ''}"
        yield process, match[1]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def post(url: str, body: Any) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def listening_addresses(port: int) -> set[str]:
    """The local addresses listening on ``port``, from the kernel's socket tables."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table, encoding="ascii") as file:
            for line in file.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if int(hex_port, 16) == port and state == "0A":  # LISTEN
                    found.add(address)
    return found


def test_the_server_answers_on_127_0_0_1_only_and_stops_on_ctrl_c(served: tuple[subprocess.Popen[str], str]) -> None:
    process, url = served
    port = int(url.rsplit(":", 1)[1].strip("/"))
    if not os.path.exists("/proc/net/tcp"):
        pytest.skip("no /proc/net/tcp to read the listening address from")
    assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1, and nothing else
    with urllib.request.urlopen(url, timeout=60) as answer:
        page = answer.read().decode("utf-8")
    assert answer.headers["Content-Type"] == "text/html; charset=utf-8" and "hf_bpe token view" in page
    status, answer = post(url + "api/encode", {"text": TEXT})
    assert status == 200
    gpt2 = array("I", base64.b64decode(answer["results"][0]["ids"])).tolist()
    assert gpt2 == hf_bpe.get_encoding("gpt2").encode(TEXT, allowed_special="all")
    status, answer = post(url + "api/decode", {"ids": gpt2})
    assert status == 200 and answer["results"][0]["text"] == TEXT
    assert post(url + "api/encode", {"text": 5}) == (400, {"error": '/api/encode: send the text as {"text": string}, not int'})
    assert post(url + "api/nothing", {})[0] == 404
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    assert "stopped" in (process.stderr.read() if process.stderr else "")
    time.sleep(0.1)
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=5)
