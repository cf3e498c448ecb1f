"""The token view (``hf_bpe._token_view``): ``BPE.view`` and ``BPETokenizer.view``, their spans, the
terminal and HTML forms, and the compact JSON the token page draws.

The ids of a view are checked against the libraries that own the formats (tiktoken, SentencePiece,
transformers' encode of our own tokenizer class), on varied generated and corpus text; the spans are
checked against the text and each token's bytes.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import textgen
from conversion_support import mistral_file, trained_model, varied_texts
from suite import scaled

import hf_bpe
from hf_bpe._token_view import Span, TokenView, byte_parts, draw_text, view_ids, view_text

ESCAPE = "\x1b"


def check_spans(view: TokenView, model: Any, *, byte_level: bool = True) -> None:
    """Every span says the truth about its token, and the spans cover the text in order."""
    text, spans = view.text, view.spans
    assert [span.id for span in spans] == view.ids
    assert [span.bytes for span in spans] == model.decode_tokens_bytes(view.ids)
    specials = set(model.special_tokens.values())
    assert [span.special for span in spans] == [span.id in specials for span in spans]
    if byte_level:
        assert b"".join(span.bytes for span in spans) == text.encode("utf-8")
    position = 0
    for index, span in enumerate(spans):
        if span.partial:
            with pytest.raises(UnicodeDecodeError):
                span.bytes.decode("utf-8")
            assert span.end is None and span.text is None
            continue
        if index and spans[index - 1].partial:  # a run of partial tokens covers whole characters
            position = span.start
        assert span.start == position, f"token {index} of {text!r} starts at {span.start}, not {position}"
        assert span.end is not None and span.end >= span.start
        if byte_level:
            assert text[span.start:span.end] == span.text
        position = span.end
    if spans and not spans[-1].partial:
        assert position == len(text)


def bytes_from_json(data: dict[str, Any], text: str) -> list[bytes]:
    """Each token's bytes as the page rebuilds them from :meth:`TokenView.to_json`."""
    if "lengths" in data:
        encoded, position, out = text.encode("utf-8"), 0, []
        for length in data["lengths"]:
            out.append(encoded[position:position + length])
            position += length
        assert position == len(encoded)
        return out
    pieces = dict(data["pieces"])
    starts = [*data["starts"], len(text)]
    out = []
    for index in range(len(data["ids"])):
        if index in pieces:
            out.append(b"".join(part.encode("utf-8") if isinstance(part, str) else bytes(part)
                                for part in pieces[index]))
        else:
            out.append(text[starts[index]:starts[index + 1]].encode("utf-8"))
    return out


def check_drawings(view: TokenView) -> None:
    """The terminal forms never show a replacement character the text does not hold, and the plain
    form has no escape codes."""
    plain, ansi = view.plain(), view.ansi()
    assert ESCAPE not in plain and ESCAPE in ansi
    if "\ufffd" not in view.text:
        assert "\ufffd" not in plain and "\ufffd" not in ansi and "\ufffd" not in view.to_html()
    assert plain.splitlines()[-1] == f"ids: [{', '.join(map(str, view.ids))}]"


# ------------------------------------------------------------------------------- against the owners


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_view_of_a_named_encoding_has_tiktokens_ids_and_true_spans(
        name: str, encoding_pair: Any) -> None:
    ours, theirs = encoding_pair(name)
    texts = [*varied_texts(scaled(2_000)), *textgen.documents(random.Random(18), scaled(100_000))]
    for text in texts:
        view = view_text(ours, text)
        assert view.ids == theirs.encode(text, allowed_special="all"), text
        check_spans(view, ours)
        assert bytes_from_json(view.to_json(), text) == [span.bytes for span in view.spans]
    for text in texts[:200]:
        check_drawings(view_text(ours, text))


def test_view_without_allowed_specials_is_encode_ordinary(encoding_pair: Any) -> None:
    ours, theirs = encoding_pair("cl100k_base")
    text = "a<|endoftext|>b <|fim_prefix|>"
    view = view_text(ours, text, allowed_special=set())
    assert view.ids == theirs.encode_ordinary(text)
    assert not any(span.special for span in view.spans)
    assert view_text(ours, text, allowed_special={"<|fim_prefix|>"}).ids == \
        theirs.encode(text, allowed_special={"<|fim_prefix|>"}, disallowed_special=())


@pytest.mark.slow
def test_view_of_a_sentencepiece_model_has_sentencepieces_ids() -> None:
    sentencepiece = pytest.importorskip("sentencepiece")
    import conversion.sentencepiece

    path = mistral_file("tokenizer.model.v1")
    ours = conversion.sentencepiece.load(path)
    theirs = sentencepiece.SentencePieceProcessor(model_file=str(path))
    for text in varied_texts(scaled(2_000)):
        view = view_text(ours, text, allowed_special=set())  # SentencePiece never reads control pieces in text
        assert view.ids == theirs.encode(text), text
        check_spans(view, ours, byte_level=False)
        assert bytes_from_json(view.to_json(), text) == [span.bytes for span in view.spans]
    view = view_text(ours, "<s>Hello 🦙</s>")
    assert [span.special for span in view.spans][:1] == [True] and view.spans[-1].special
    assert [span.draw() for span in view.spans if span.partial] == ["<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"]


def test_view_of_a_trained_model() -> None:
    model = trained_model()
    for text in varied_texts(scaled(500)):
        view = view_text(model, text)
        assert view.ids == model.encode(text, allowed_special="all")
        check_spans(view, model)
    assert view_text(model, "x<|endoftext|>").spans[-1] == Span(model.special_tokens["<|endoftext|>"],
                                                          b"<|endoftext|>", 1, 14, True)


def test_tokenizer_view_includes_added_tokens() -> None:
    from hf_bpe.transformers import BPETokenizer

    tokenizer = BPETokenizer.from_model(hf_bpe.get_encoding("gpt2"))
    tokenizer.add_tokens(["<think>", "🦙llama"])
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    texts = ["Hi <think>🦙llama 🦙 <|im_start|><|endoftext|> x", *varied_texts(scaled(300))]
    for text in texts:
        view = tokenizer.view(text)
        assert view.ids == tokenizer.encode(text, add_special_tokens=False), text
        assert b"".join(span.bytes for span in view.spans).decode("utf-8") == text
    view = tokenizer.view(texts[0])
    assert [span.bytes for span in view.spans if span.id >= 50257] == [b"<think>", "🦙llama".encode(), b"<|im_start|>"]
    assert [span.bytes for span in view.spans if span.special] == [b"<|im_start|>", b"<|endoftext|>"]


# ------------------------------------------------------------------------------------------- drawing


def test_plain_form_draws_whitespace_specials_and_partial_characters(encoding_pair: Any) -> None:
    ours, theirs = encoding_pair("gpt2")
    text = "a  b\tc\r\n🦙<|endoftext|>\u3000"
    view = view_text(ours, text)
    assert view.ids == theirs.encode(text, allowed_special="all")
    assert str(view) == view.plain()
    count = len(view.ids)
    assert view.plain().split("\n") == [
        f"gpt2: {count} tokens, 23 characters, 28 bytes ({23 / count:.2f} characters, {28 / count:.2f} bytes per token)",
        "[a][·][·b][→][c][␍][↵",  # a newline token keeps its line break
        "][<0xF0 0x9F>][<0xA6>][<0x99>]⟦<|endoftext|>⟧[<0xE3 0x80>][<0x80>]",
        f"ids: [{', '.join(map(str, view.ids))}]",
    ]


def test_ansi_form_colors_tokens_and_ends_each_line() -> None:
    view = view_text(hf_bpe.get_encoding("gpt2"), "hi\n🦙<|endoftext|>")
    ansi = view.ansi()
    assert ansi.count("\x1b[30;48;5;") >= 3  # each ordinary token on a background
    assert "\x1b[1;7m<|endoftext|>" in ansi  # special tokens in reverse video
    assert "\x1b[31m<0xF0 0x9F>" in ansi and "\x1b[31m<0x99>" in ansi  # partial bytes in red
    for line in ansi.split("\n")[:-1]:
        assert line.endswith("\x1b[0m"), f"a background runs on past the end of {line!r}"


def test_printing_a_view_colors_it_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    view = view_text(hf_bpe.get_encoding("gpt2"), "Hello world")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert str(view) == view.plain()  # pytest captures standard output: no terminal
    monkeypatch.setattr("sys.stdout", Terminal())
    assert str(view) == view.ansi() and ESCAPE in str(view)
    monkeypatch.setenv("NO_COLOR", "1")
    assert str(view) == view.plain()


def test_draw_text_and_byte_parts() -> None:
    assert draw_text("a b\tc\n\r\x00\x7f\u00a0\u3000") == "a·b→c↵␍␀␡␣␣"
    assert draw_text("x\ny", line_breaks=True) == "x↵\ny"
    assert byte_parts(b"ok") == ["ok"]
    assert byte_parts(b"\xf0\x9f a \xa6\x99") == [b"\xf0\x9f", " a ", b"\xa6\x99"]
    assert byte_parts(b"") == []
    assert Span(1, b" \xe6\x97", None, None, False).draw() == "·<0xE6 0x97>"


def test_html_form_escapes_the_text_and_marks_tokens() -> None:
    view = view_text(hf_bpe.get_encoding("cl100k_base"), "<script>alert(1)</script> 🦙<|endoftext|>")
    html = view._repr_html_()
    assert "<script>" not in html and "&lt;" in html and "</script>" not in html
    assert html.count("<span ") == len(view.ids)
    assert "id 100257" in html and "outline" in html  # the special token, marked
    assert "&lt;0xF0 0x9F&gt;" in html and "\ufffd" not in html


def test_counts_and_repr() -> None:
    view = view_text(hf_bpe.get_encoding("cl100k_base"), "토큰화")
    assert len(view) == len(view.ids) and view.byte_count == 9
    assert view.summary().startswith(f"cl100k_base: {len(view.ids)} tokens, 3 characters, 9 bytes (")
    assert repr(view) == f"<TokenView cl100k_base: {len(view.ids)} tokens, 3 characters>"
    empty = view_text(hf_bpe.get_encoding("gpt2"), "")
    assert empty.spans == [] and empty.summary() == "gpt2: 0 tokens, 0 characters, 0 bytes"


# ----------------------------------------------------------------------------------------- from ids


def test_view_of_ids_decodes_them(encoding_pair: Any) -> None:
    ours, theirs = encoding_pair("o200k_base")
    rng = random.Random(5)
    for text in varied_texts(scaled(300)):
        ids = theirs.encode(text, allowed_special="all")
        view = view_ids(ours, ids)
        assert view.text == text and view.ids == ids
        check_spans(view, ours)
        # Any ids, whole characters or not: the text is the bytes decoded as tiktoken decodes them.
        cut = ids[rng.randrange(len(ids) + 1):] if ids else [rng.randrange(ours.n_vocab - 300)]
        view = view_ids(ours, cut)
        assert view.text == theirs.decode(cut) and b"".join(span.bytes for span in view.spans) == \
            theirs.decode_bytes(cut)
        assert bytes_from_json(view.to_json(), view.text) == [span.bytes for span in view.spans]


def test_view_of_ids_names_an_unknown_id() -> None:
    model = hf_bpe.get_encoding("gpt2")
    with pytest.raises(KeyError, match="id 60000 is not a token of gpt2"):
        view_ids(model, [15496, 60000])
    with pytest.raises(TypeError, match="ids must be ints"):
        view_ids(model, [1.5])  # type: ignore[list-item]


def test_view_refuses_what_is_not_text() -> None:
    with pytest.raises(TypeError, match="view expects the text as a str, got bytes"):
        view_text(hf_bpe.get_encoding("gpt2"), b"hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got bytes"):
        view_text(hf_bpe.get_encoding("gpt2"), b"x")  # type: ignore[arg-type]
