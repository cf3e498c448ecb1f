"""Make ``docs/view.png``, the README's picture of the token page: GPT-2, cl100k_base and a tokenizer
trained as README's first command trains one, on the page's opening text.

Usage (from the repository root; Playwright and Debian's ``chromium``, fonts-noto-cjk and
fonts-noto-color-emoji for the Korean, Japanese and emoji)::

    python docs/view_screenshot.py                 # writes docs/view.png
"""

from __future__ import annotations

import argparse
import io
import shutil
import threading
from pathlib import Path
from pydoc_data.topics import topics

import hf_bpe
from hf_bpe.view import TokenPage, make_server
from hf_bpe.view._server import url_of

WAIT = """() => new Promise((resolve) => { const check = () => (window.hfBpeView.state.rendered > 0 &&
  !window.hfBpeView.state.inFlight) ? resolve() : setTimeout(check, 20); check(); })"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("view.png"))
    parser.add_argument("--browser", default=shutil.which("chromium") or "/usr/bin/chromium")
    arguments = parser.parse_args()

    from playwright.sync_api import sync_playwright

    corpus = [topics[name] for name in sorted(topics)]  # hf-bpe train's default corpus
    trained = hf_bpe.train(corpus, 4096, special_tokens=["<|endoftext|>"], show_progress=False,
                           name="my-tokenizer")
    page_data = TokenPage([("gpt2", hf_bpe.get_encoding("gpt2")),
                           ("cl100k_base", hf_bpe.get_encoding("cl100k_base")),
                           ("my-tokenizer (trained, 4,096)", trained)])
    server = make_server(page_data)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=arguments.browser)
            page = browser.new_page(viewport={"width": 1280, "height": 820})
            page.goto(url_of(server))
            page.evaluate(WAIT)
            # A tooltip in the picture: a token holding the first bytes of the llama emoji.
            page.locator('.panel[data-name="cl100k_base"] .tokens .t.p', has_text="<0xF0 0x9F>").first.hover()
            png = page.screenshot(clip={"x": 0, "y": 0, "width": 1280, "height": 820})
            browser.close()
    finally:
        server.shutdown()
        page_data.close()
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=96, dither=Image.Dither.NONE)
    image.save(arguments.out, optimize=True)
    print(f"Wrote {arguments.out}: {arguments.out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
