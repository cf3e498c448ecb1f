"""The token page in a real browser, used as a person would: Debian's Chromium, headless, driven by
Playwright (no browser download: the system's ``chromium``, or ``HF_BPE_CHROMIUM``).

The tests type into the page, read the tokens back from what it shows, and check them against the
models: the spans' texts (bytes, for tokens holding part of a character) join to the input, the ids
listed equal ``encode``'s, the counts, the tooltips, the ids mode, the diff mode, and the static
export opened from a file with no server and no network. Skipped, saying why, when Playwright or
Chromium is missing (``pip install -e '.[test]'``; ``apt-get install chromium``).
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conversion_support import trained_model

import hf_bpe
from hf_bpe._token_view import view_text
from hf_bpe.model import BPE
from hf_bpe.view import EXAMPLES, TokenPage, make_server
from hf_bpe.view._server import url_of

pytestmark = pytest.mark.browser

TEXT = ("Hello world! 🦙 and 𠜎 are cut into bytes.<|endoftext|>naïve café\n"
        "def f(x):\n\tif x == 12345:\n        return ' egg' + 'Egg' + ' EGG'  \n"
        "토큰화는 핵심입니다 \u00a0\u3000 👨‍👩‍👧 end")
"""What the tests type. (A text box turns "\\r\\n" into "\\n", so no carriage return: the static
export, whose text is no box's, shows one.)"""

READ_PANELS = """() => Array.from(document.querySelectorAll(".panel")).map((panel) => ({
  name: panel.dataset.name,
  count: (panel.querySelector(".stats b") || {}).textContent || null,
  stats: panel.querySelector(".stats").textContent,
  ids: panel.querySelector(".ids").textContent,
  error: (panel.querySelector(".perror") || {}).textContent || null,
  spans: Array.from(panel.querySelectorAll(".tokens .t")).map((span) => ({
    cls: span.className,
    parts: Array.from(span.childNodes).map((node) => [node.nodeName === "B" ? "bytes" : "text", node.textContent]),
  })),
}))"""


def chromium_path() -> str:
    for candidate in (os.environ.get("HF_BPE_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                      shutil.which("google-chrome")):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip("no Chromium to drive: install Debian's chromium (apt-get install chromium) or set HF_BPE_CHROMIUM")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed: pip install -e '.[test]'")
    path = chromium_path()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def models() -> list[tuple[str, BPE]]:
    return [("gpt2", hf_bpe.get_encoding("gpt2")), ("cl100k_base", hf_bpe.get_encoding("cl100k_base")),
            ("trained", trained_model())]


@pytest.fixture(scope="module")
def server(models: list[tuple[str, BPE]]) -> Iterator[str]:
    page = TokenPage(models)
    server = make_server(page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url_of(server)
    server.shutdown()
    server.server_close()
    page.close()


@pytest.fixture()
def page(browser: Any, server: str) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server)
    settle(page)
    yield page
    page.close()
    assert not errors, f"the page raised: {errors}"


def settle(page: Any) -> None:
    """Wait until the page has drawn the answer to what its box holds now."""
    page.evaluate("""() => new Promise((resolve, reject) => {
      const view = window.hfBpeView, input = document.getElementById("input"), started = performance.now();
      const check = () => {
        const s = view.state;
        if (s.rendered === s.sent && s.rendered > 0 && !s.inFlight && !s.pending &&
            (s.mode !== "text" || (s.data && s.data.text === input.value))) resolve();
        else if (performance.now() - started > 60000) reject(new Error("the page did not draw in 60 s"));
        else setTimeout(check, 10);
      };
      check();
    })""")


def span_bytes(span: dict[str, Any]) -> bytes:
    """A span's bytes: its text, and the ``<0xF0 0x9F>`` bytes it shows for part of a character."""
    out = b""
    for kind, content in span["parts"]:
        if kind == "bytes":
            assert re.fullmatch(r"<0x[0-9A-F]{2}( 0x[0-9A-F]{2})*>", content), content
            out += bytes(int(byte, 16) for byte in re.findall(r"0x([0-9A-F]{2})", content))
        else:
            out += content.encode("utf-8")
    return out


def check_panels(page: Any, models: list[tuple[str, BPE]], text: str) -> list[dict[str, Any]]:
    """Every panel shows ``text`` cut exactly as its model cuts it, and says so in its counts."""
    panels = page.evaluate(READ_PANELS)
    assert [panel["name"] for panel in panels] == [name for name, _ in models]
    for panel, (name, model) in zip(panels, models):
        ids = model.encode(text, allowed_special="all")
        assert [int(token) for token in panel["ids"].split(", ") if token] == ids, name
        assert len(panel["spans"]) == len(ids) and panel["count"] == f"{len(ids):,}", name
        assert panel["stats"].startswith(f"{len(ids):,} token") and f"{len(text):,} characters" in panel["stats"]
        shown = [span_bytes(span) for span in panel["spans"]]
        assert shown == model.decode_tokens_bytes(ids), name
        assert b"".join(shown) == text.encode("utf-8"), name
        partial = [" p" in f"{span['cls']} " for span in panel["spans"]]
        special = [" sp" in f"{span['cls']} " for span in panel["spans"]]
        assert partial == [span.partial for span in view_text(model, text).spans], name
        assert special == [token in model.special_tokens.values() for token in ids], name
    return panels


def type_text(page: Any, text: str) -> None:
    """Put ``text`` in the box the way a person does: most of it pasted, the rest typed."""
    head, tail = text[:-12], text[-12:]
    page.fill("#input", head)
    page.focus("#input")
    page.evaluate("() => { const box = document.getElementById('input'); "
                  "box.setSelectionRange(box.value.length, box.value.length); }")
    page.keyboard.type(tail)
    settle(page)
    assert page.input_value("#input") == text


READ_BOXES = """() => Array.from(document.querySelectorAll(".panel")).map((panel) =>
  Array.from(panel.querySelectorAll(".tokens .t")).map((span) => {
    const box = span.getClientRects()[0];
    return box ? [box.left, box.right, box.top, box.bottom] : null;
  }))"""

RIGHT_TO_LEFT = ("مرحبا بالعالم، هذا نص عربي: ئؤ ٣٤٥ ﷲ! "
                 "שלום עולם, זה טקסט בעברית (123) סוף. "
                 "mixed עם English و عربي")
"""Arabic (with letters cut into bytes, shown as ``<0xD8 0xA6>`` labels, and Arabic-Indic digits),
Hebrew with digits and brackets, and both amid English."""


def drawn_out_of_order(boxes: list[list[float] | None]) -> list[int]:
    """The indexes of tokens not drawn after the token before them: to its right on the same line, or
    on a later line (logical order, left to right)."""
    wrong = []
    previous = None
    for index, box in enumerate(boxes):
        if box is None:
            continue
        if previous is not None:
            same_line = abs(box[2] - previous[2]) < 2
            if (same_line and box[0] < previous[1] - 1) or (not same_line and box[2] < previous[2]):
                wrong.append(index)
        previous = box
    return wrong


# ------------------------------------------------------------------------------------------------ tests


def test_right_to_left_tokens_keep_their_logical_order(page: Any, models: list[tuple[str, BPE]],
                                                       tmp_path: Path) -> None:
    """Arabic and Hebrew: every panel draws its token boxes in the tokens' order, left to right and
    line by line (the browser's bidi algorithm must not reorder tokens or byte labels among them).
    HF_BPE_SCREENSHOTS=DIR keeps a screenshot of the first panel there, to look at."""
    type_text(page, RIGHT_TO_LEFT)
    panels = check_panels(page, models, RIGHT_TO_LEFT)
    assert any(kind == "bytes" for panel in panels for span in panel["spans"] for kind, _ in span["parts"])
    for (name, _), boxes in zip(models, page.evaluate(READ_BOXES)):
        assert len(boxes) > 20 and drawn_out_of_order(boxes) == [], name
    page.locator(".panel").first.screenshot(path=str(tmp_path / "right-to-left.png"))
    if os.environ.get("HF_BPE_SCREENSHOTS"):
        shutil.copy(tmp_path / "right-to-left.png", Path(os.environ["HF_BPE_SCREENSHOTS"]) / "right-to-left.png")



def test_typed_text_is_cut_as_each_model_cuts_it(page: Any, models: list[tuple[str, BPE]], tmp_path: Path) -> None:
    type_text(page, TEXT)
    panels = check_panels(page, models, TEXT)
    assert any(" p" in span["cls"] for span in panels[0]["spans"])  # GPT-2 cuts the llama into bytes
    assert "\ufffd" not in page.inner_text("#panels")
    # Typing on changes only the tokens near the end; the page must still agree with the models.
    page.keyboard.type(" 🦙🦙 more\n\ttext")
    page.keyboard.press("Backspace")
    settle(page)
    check_panels(page, models, page.input_value("#input"))
    page.screenshot(path=str(Path(os.environ.get("TMPDIR", tmp_path)) / "hf-bpe-view-test.png"), full_page=True)


def test_tooltips_show_id_bytes_and_text(page: Any, models: list[tuple[str, BPE]]) -> None:
    type_text(page, "Hi 🦙<|endoftext|>")
    model = models[0][1]
    ids = model.encode("Hi 🦙<|endoftext|>", allowed_special="all")
    spans = page.locator('.panel[data-name="gpt2"] .tokens .t')
    for index, token in enumerate(ids):
        spans.nth(index).hover()
        tip = page.inner_text("#tip")
        data = model.decode_single_token_bytes(token)
        assert tip.startswith(f"id {token}"), tip
        assert f"bytes {data.hex(' ')}  ({len(data)})" in tip
        assert ("(special token)" in tip) == (token == model.eot_token)
        try:
            data.decode("utf-8")
            assert "(part of a character)" not in tip
        except UnicodeDecodeError:
            assert "(part of a character)" in tip and "<0x" in tip
    spans.nth(0).click()  # selecting a token marks the same characters in the other panels
    assert page.inner_text('.panel[data-name="gpt2"] .info').startswith(f"id {ids[0]}")
    marked = page.evaluate("""() => Array.from(document.querySelectorAll('.panel[data-name="cl100k_base"] .t.hl'))
                                 .map((span) => span.textContent)""")
    assert "".join(marked).startswith("Hi")


def test_ids_mode_decodes_ids_with_every_tokenizer(page: Any, models: list[tuple[str, BPE]]) -> None:
    type_text(page, "Hello 🦙 world")
    page.check('input[name="mode"][value="ids"]')
    settle(page)
    gpt2 = models[0][1]
    assert page.input_value("#input") == " ".join(map(str, gpt2.encode("Hello 🦙 world")))
    ids = [15496, 995, 8582, 99]  # ends inside the llama's four bytes
    page.fill("#input", ", ".join(map(str, ids)))
    settle(page)
    panels = page.evaluate(READ_PANELS)
    assert [span_bytes(span) for span in panels[0]["spans"]] == gpt2.decode_tokens_bytes(ids)
    cl100k = models[1][1]
    assert [span_bytes(span) for span in panels[1]["spans"]] == cl100k.decode_tokens_bytes(ids)
    assert panels[2]["error"] == "id 15496 is not a token of trained"  # the trained model has 657 tokens
    page.check('input[name="mode"][value="text"]')
    settle(page)
    assert page.input_value("#input") == gpt2.decode(ids)


def test_diff_mode_lines_up_two_tokenizers(page: Any, models: list[tuple[str, BPE]]) -> None:
    type_text(page, TEXT)
    page.check("#diffon")
    page.select_option("#diffa", "0")
    page.select_option("#diffb", "2")
    rows = page.evaluate("""() => Array.from(document.querySelectorAll("#diffrows .row")).map((row) =>
      Array.from(row.querySelectorAll(".line")).map((line) =>
        Array.from(line.querySelectorAll(".t")).map((span) => [span.textContent, span.classList.contains("d")])))""")
    expected = [changed_characters(models[0][1], models[2][1]), changed_characters(models[2][1], models[0][1])]
    for side in (0, 1):
        text = "".join(content for row in rows for content, _ in row[side])
        assert text == TEXT  # both lines of every row hold the same characters, in order
        shown = [changed for row in rows for content, changed in row[side] for _ in content]
        assert shown == expected[side]
    for row in rows:
        assert "".join(content for content, _ in row[0]) == "".join(content for content, _ in row[1])
    assert "pieces cut the same" in page.inner_text("#difflegend")


def test_diff_of_a_long_text_draws_the_rows_in_sight(page: Any) -> None:
    lines = [f"line {number}: {'🦙 ' * (number % 3)}the numbers {number * 7919} and {number * 104729}\n"
             for number in range(400)]
    page.evaluate("(text) => { const box = document.getElementById('input'); box.value = text; "
                  "box.dispatchEvent(new Event('input')); }", "".join(lines))
    settle(page)
    page.check("#diffon")
    read_rows = """() => Array.from(document.querySelectorAll("#diffrows .row")).map((row) =>
      Array.from(row.querySelectorAll(".line")).map((line) => line.textContent))"""
    rows = page.evaluate(read_rows)
    assert 5 < len(rows) < 100  # not 400
    assert rows[0] == [lines[0], lines[0]]
    page.evaluate("() => { const box = document.getElementById('diffrows'); box.scrollTop = box.scrollHeight; }")
    page.evaluate("() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)))")
    rows = page.evaluate(read_rows)
    assert rows[-1] == [lines[-1], lines[-1]] and len(rows) < 100
    assert all(row[0] == row[1] for row in rows) and [row[0] for row in rows] == lines[-len(rows):]


def pieces(model: BPE, text: str) -> list[tuple[int, int]]:
    """Where ``model`` cuts ``text``, in characters: each token, and each run of tokens holding parts
    of characters (from the character holding its first byte to the one holding its last)."""
    char_at = [index for index, character in enumerate(text) for _ in character.encode("utf-8")] + [len(text)]
    data = text.encode("utf-8")

    def char_end(offset: int) -> int:  # the end of the character holding the byte before ``offset``
        return char_at[offset] if offset == len(data) or data[offset] & 0xC0 != 0x80 else char_at[offset] + 1

    found: list[tuple[int, int]] = []
    offset, run_start = 0, None
    for span in view_text(model, text).spans:
        end = offset + len(span.bytes)
        if span.partial:
            run_start = offset if run_start is None else run_start
        else:
            if run_start is not None:
                found.append((char_at[run_start], char_end(offset)))
                run_start = None
            found.append((char_at[offset], char_end(end)))
        offset = end
    if run_start is not None:
        found.append((char_at[run_start], len(text)))
    return [(start, end) for start, end in found if end > start]


def changed_characters(model: BPE, other: BPE) -> list[bool]:
    """For each character of TEXT, whether ``model`` cuts the piece holding it unlike ``other``."""
    theirs = set(pieces(other, TEXT))
    return [(start, end) not in theirs for start, end in pieces(model, TEXT) for _ in range(end - start)]


def test_examples_are_one_click_away(page: Any, models: list[tuple[str, BPE]]) -> None:
    for label, text in EXAMPLES:
        page.click(f"#examples button:text-is('{label}')")
        settle(page)
        assert page.input_value("#input") == text
        check_panels(page, models, text)


def test_static_export_works_offline(browser: Any, models: list[tuple[str, BPE]], tmp_path: Path) -> None:
    page_data = TokenPage(models, command="hf-bpe view gpt2 cl100k_base trained")
    text = TEXT.replace("12345:\n", "12345:\r\n")
    exported = page_data.export(text, tmp_path / "tokens.html")
    page_data.close()
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(exported.as_uri())
    check_panels(page, models, text)
    assert requests == [exported.as_uri()] and not errors
    assert page.is_editable("#input") is False
    assert "static export" in page.inner_text("#note") and "hf-bpe view gpt2 cl100k_base trained" in page.inner_text("#note")
    page.close()
