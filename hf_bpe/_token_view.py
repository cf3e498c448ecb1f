"""The token view: how a tokenizer cuts a text, as spans to read, print, or show in a notebook.

``view_text(model, text)`` (also ``hf_bpe.view.view_text``) and ``BPETokenizer.view(text)`` return a :class:`TokenView`. Its
:attr:`~TokenView.spans` say, for each token, its id, its bytes, the characters of the text it
covers and whether it is a special token; ``print(view)`` draws the tokens for a terminal (in
colors, :meth:`~TokenView.ansi`, on a terminal; in brackets, :meth:`~TokenView.plain`, elsewhere),
and a notebook shows :meth:`~TokenView._repr_html_`.

Whitespace is drawn as symbols (space ``·``, tab ``→``, newline ``↵``, carriage return ``␍``,
other control characters as their Control Pictures, other spaces ``␣``). A token that holds part of
a UTF-8 character is drawn as its bytes, ``<0xE3 0x81>``, never as a replacement character.

About 520 lines: the spans and their three renderings (terminal colors, plain brackets, HTML) share
the drawing of whitespace, special tokens and partial characters, so they stay in one module.

This module sits at the model layer: it reads models only through their public methods
(``encode_with_offsets``, ``decode_tokens_bytes``, ``special_tokens``) and imports nothing else
of hf_bpe, so the model can build a view without depending on anything above it.

>>> import hf_bpe
>>> view = view_text(hf_bpe.get_encoding("gpt2"), "Hello world!")
>>> print(view)
gpt2: 3 tokens, 12 characters, 12 bytes (4.00 characters, 4.00 bytes per token)
[Hello][·world][!]
ids: [15496, 995, 0]
>>> view.spans[1]
Span(id=995, bytes=b' world', start=5, end=11, special=False)
"""

from __future__ import annotations

import html
import os
import re
import sys
from collections.abc import Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from hf_bpe.model import BPE

__all__ = ["Span", "TokenView", "draw_text", "view_ids", "view_text", "view_tokenizer"]

WHITESPACE_SYMBOLS = {" ": "·", "\t": "→", "\n": "↵", "\r": "␍", "\x7f": "␡"}
"""How whitespace and control characters are drawn (the rest of the C0 controls as U+2400 + code)."""
OTHER_SPACE_SYMBOL = "␣"
"""How a space other than U+0020 is drawn (no-break space, ideographic space, ...)."""
OTHER_SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
    "\u2028\u2029\u202f\u205f\u3000\x85"
_DRAWN = re.compile(f"[\\x00-\\x20\\x7f{OTHER_SPACES}]")

ANSI_BACKGROUNDS = (153, 157, 223, 189, 230)
"""256-color backgrounds the terminal form cycles through (light blue, green, peach, lilac, cream),
with black text; special tokens are drawn in reverse video, bytes of a partial character in red."""
HTML_BACKGROUNDS = ("#cde4fb", "#d3f3d0", "#fde2c7", "#e2dafb", "#fbf3c2")
"""The same five colors for HTML (the page and notebooks)."""


@dataclass(frozen=True)
class Span:
    """One token of a text: its ``id``, its ``bytes``, the characters ``text[start:end]`` it covers,
    and whether it is a ``special`` token.

    ``start`` and ``end`` are ``None`` for a token that holds part of a UTF-8 character (a rare
    character or an emoji cut into byte tokens): its bytes are not text on their own, so it has no
    characters of its own; the run of such tokens together covers whole characters.
    For byte-level models ``text[start:end]`` is exactly the token's text; a SentencePiece token's
    bytes may differ from the characters it covers (its ``▁`` space prefix, its normalizer).

    >>> span = Span(id=995, bytes=b" world", start=5, end=11, special=False)
    >>> span.text, span.partial
    (' world', False)
    """

    id: int
    bytes: bytes
    start: int | None
    end: int | None
    special: bool

    @property
    def partial(self) -> bool:
        """Whether the token holds part of a character (its bytes are not valid UTF-8 alone)."""
        return self.start is None

    @property
    def text(self) -> str | None:
        """The token's own text, or ``None`` for a token holding part of a character."""
        return None if self.start is None else self.bytes.decode("utf-8")

    def draw(self, *, line_breaks: bool = False) -> str:
        """The token as drawn in a view: whitespace as symbols, partial bytes as ``<0xE3 0x81>``;
        with ``line_breaks``, a newline also stays a line break after its symbol.

        >>> Span(id=1, bytes=b"\\xe6\\x97 a\\n", start=None, end=None, special=False).draw()
        '<0xE6 0x97>·a↵'
        """
        return "".join(draw_text(part, line_breaks=line_breaks) if isinstance(part, str)
                       else _draw_bytes(part) for part in byte_parts(self.bytes))


class TokenView:
    """A text and the tokens a tokenizer cuts it into (build one with ``view_text(model, text)``).

    ``text`` is what was viewed, ``name`` the tokenizer's name, ``ids`` the token ids (what
    ``encode`` gives) and :attr:`spans` one :class:`Span` per token. ``str(view)`` is the plain
    terminal form, :meth:`ansi` the colored one, :meth:`to_html` (``_repr_html_``) the notebook's.

    >>> import hf_bpe
    >>> view = view_text(hf_bpe.get_encoding("cl100k_base"), "égg <|endoftext|>")
    >>> [span.text for span in view.spans], view.ids[-1]
    (['é', 'gg', ' ', '<|endoftext|>'], 100257)
    """

    def __init__(
        self,
        text: str,
        ids: Sequence[int],
        starts: Sequence[int] | None,
        token_bytes: Sequence[bytes],
        special_ids: Collection[int],
        name: str | None = None,
    ) -> None:
        if len(token_bytes) != len(ids) or (starts is not None and len(starts) != len(ids)):
            raise ValueError(
                f"a token view needs one start and one bytes value per id: got {len(ids)} ids, "
                f"{len(token_bytes)} bytes values and {'no' if starts is None else len(starts)} starts"
            )
        self.text = text
        self.name = name
        self.ids = list(ids)
        self._bytes = list(token_bytes)
        self._special = [index for index, token in enumerate(self.ids) if token in special_ids] \
            if special_ids and not set(special_ids).isdisjoint(self.ids) else []
        self._given_starts = None if starts is None else list(starts)
        self._partial_found: list[int] | None = None
        self._starts_found: list[int] | None = None
        self._spans: list[Span] | None = None

    # ------------------------------------------------------------------------------- reading

    @property
    def spans(self) -> list[Span]:
        """One :class:`Span` per token, in order."""
        if self._spans is None:
            starts = self._starts
            ends = [*starts[1:], len(self.text)]
            partial = set(self._partial)
            special = set(self._special)
            self._spans = [
                Span(token, data, None if index in partial else start, None if index in partial else end,
                     index in special)
                for index, (token, data, start, end) in enumerate(zip(self.ids, self._bytes, starts, ends))
            ]
        return self._spans

    @property
    def _partial(self) -> list[int]:
        """The indexes of the tokens holding part of a character."""
        if self._partial_found is None:
            self._partial_found = _partial_indexes(self._bytes, self.text)
        return self._partial_found

    @property
    def _starts(self) -> list[int]:
        """Where each token's part of the text begins (a token holding part of a character: where
        that character, or the first character of its run of such tokens, begins)."""
        if self._given_starts is not None:
            return self._given_starts
        if self._starts_found is None:
            self._starts_found = _starts_from_bytes(self._bytes, self._partial)
        return self._starts_found

    @property
    def byte_count(self) -> int:
        """The UTF-8 length of the text."""
        return len(self.text.encode("utf-8", errors="surrogatepass"))

    def __len__(self) -> int:
        """The number of tokens."""
        return len(self.ids)

    def summary(self) -> str:
        """One line of counts: tokens, characters, bytes, and characters and bytes per token.

        >>> import hf_bpe
        >>> view_text(hf_bpe.get_encoding("gpt2"), "Hello world").summary()
        'gpt2: 2 tokens, 11 characters, 11 bytes (5.50 characters, 5.50 bytes per token)'
        """
        count, characters, size = len(self.ids), len(self.text), self.byte_count
        line = f"{self.name or 'tokens'}: {_plural(count, 'token')}, {_plural(characters, 'character')}, " \
            f"{_plural(size, 'byte')}"
        if count:
            line += f" ({characters / count:.2f} characters, {size / count:.2f} bytes per token)"
        return line

    # ------------------------------------------------------------------------------- drawing

    def plain(self) -> str:
        """The terminal form without colors: counts, each token in brackets (special tokens in
        ``⟦ ⟧``), whitespace as symbols (a newline also breaks the line), and the ids.

        >>> import hf_bpe
        >>> print(view_text(hf_bpe.get_encoding("gpt2"), "a\\n<|endoftext|>").plain())
        gpt2: 3 tokens, 15 characters, 15 bytes (5.00 characters, 5.00 bytes per token)
        [a][↵
        ]⟦<|endoftext|>⟧
        ids: [64, 198, 50256]
        """
        tokens = []
        for span in self.spans:
            opening, closing = ("⟦", "⟧") if span.special else ("[", "]")
            tokens.append(f"{opening}{span.draw(line_breaks=True)}{closing}")
        return f"{self.summary()}\n{''.join(tokens)}\n{self._ids_line()}"

    def ansi(self) -> str:
        """The terminal form with ANSI colors: tokens on alternating backgrounds, special tokens in
        reverse video, bytes of partial characters in red, whitespace symbols in gray."""
        tokens = []
        for index, span in enumerate(self.spans):
            if span.special:
                style, color = "\x1b[1;7m", "\x1b[39m"
            else:
                style, color = f"\x1b[30;48;5;{ANSI_BACKGROUNDS[index % len(ANSI_BACKGROUNDS)]}m", "\x1b[30m"

            drawn = "".join(_ansi_part(part, style, color) for part in byte_parts(span.bytes))
            tokens.append(f"{style}{drawn}\x1b[0m")
        return f"\x1b[1m{self.summary()}\x1b[0m\n{''.join(tokens)}\n{self._ids_line()}"

    def __str__(self) -> str:
        """The terminal form: in colors (:meth:`ansi`) when standard output is a terminal and
        ``NO_COLOR`` is not set, else :meth:`plain`."""
        return self.ansi() if color_terminal() else self.plain()

    def __repr__(self) -> str:
        return f"<TokenView {self.name or 'unnamed'}: {_plural(len(self.ids), 'token')}, " \
            f"{_plural(len(self.text), 'character')}>"

    def to_html(self) -> str:
        """A self-contained HTML fragment: counts, the tokens as colored spans (hover one for its id
        and bytes), and the ids. Notebooks show it (``_repr_html_``)."""
        cells = []
        for index, span in enumerate(self.spans):
            background = "#f4a6c8" if span.special else HTML_BACKGROUNDS[index % len(HTML_BACKGROUNDS)]
            title = f"id {span.id} · bytes {span.bytes.hex(' ') or '(none)'}" + \
                (" · special" if span.special else "")
            drawn = "".join(
                html.escape(draw_text(part, line_breaks=True)) if isinstance(part, str)
                else f'<b style="color:#b00020">{html.escape(_draw_bytes(part))}</b>'
                for part in byte_parts(span.bytes)
            )
            outline = ";outline:1px solid #a0306a" if span.special else ""
            cells.append(f'<span title="{html.escape(title)}" style="background:{background}{outline}">'
                         f"{drawn}</span>")
        return (
            '<div class="hf-bpe-token-view" style="font-family:monospace">'
            f"<div><b>{html.escape(self.summary())}</b></div>"
            f'<div style="white-space:pre-wrap;line-height:1.6">{"".join(cells)}</div>'
            f'<div style="color:#555;white-space:pre-wrap">{html.escape(self._ids_line())}</div></div>'
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_json(self) -> dict[str, Any]:
        """The view as compact JSON-ready arrays (what the token page draws): the tokenizer's
        ``name``, the ``ids``, ``special`` (the indexes of special tokens), the text's
        ``characters`` and ``bytes``, and where the tokens' bytes come from, in one of two forms:

        - ``lengths``, each token's length in bytes, when the tokens' bytes joined are exactly the
          text's UTF-8 (byte-level models): the page cuts the text's bytes into the tokens;
        - otherwise ``starts``, the character where each token's part of the text begins (a token
          holding part of a character: that character's), ``partial``, the indexes of the tokens
          holding part of a character, and ``pieces``, ``[index, parts]`` for each token whose bytes
          are not its slice of the text (``text[start:next start]``), its parts being strings and
          lists of byte values (bytes that are no text on their own).

        >>> import hf_bpe
        >>> data = view_text(hf_bpe.get_encoding("gpt2"), "🦙!").to_json()
        >>> data["ids"], data["lengths"]
        ([8582, 99, 247, 0], [2, 1, 1, 1])
        >>> data = view_ids(hf_bpe.get_encoding("gpt2"), [8582, 0]).to_json()  # text "\\ufffd!"
        >>> data["starts"], data["partial"], data["pieces"]
        ([0, 1], [0], [[0, [[240, 159]]]])
        """
        data: dict[str, Any] = {
            "name": self.name,
            "ids": self.ids,
            "special": self._special,
            "characters": len(self.text),
            "bytes": self.byte_count,
        }
        if self._matches_text():
            data["lengths"] = list(map(len, self._bytes))
            return data
        starts, partial = self._starts, self._partial
        ends = [*starts[1:], len(self.text)]
        partial_set = set(partial)
        pieces: list[list[Any]] = []
        for index, (token_bytes, start, end) in enumerate(zip(self._bytes, starts, ends)):
            if index in partial_set:
                pieces.append([index, [part if isinstance(part, str) else list(part)
                                       for part in byte_parts(token_bytes)]])
            elif token_bytes.decode("utf-8") != self.text[start:end]:
                pieces.append([index, [token_bytes.decode("utf-8")]])
        return data | {"starts": starts, "partial": partial, "pieces": pieces}

    # ------------------------------------------------------------------------------- helpers

    def _matches_text(self) -> bool:
        """Whether the tokens' bytes joined are exactly the text's (byte-level models)."""
        return b"".join(self._bytes) == self.text.encode("utf-8", errors="surrogatepass")

    def _ids_line(self) -> str:
        return f"ids: [{', '.join(map(str, self.ids))}]"


# ----------------------------------------------------------------------------------- building


class _Viewable(Protocol):
    name: str | None

    def encode_with_offsets(self, text: str, *, allowed_special: Any = ..., disallowed_special: Any = ...
                            ) -> tuple[list[int], list[int]]: ...

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]: ...

    @property
    def special_tokens(self) -> dict[str, int]: ...


def view_text(
    model: BPE | _Viewable,
    text: str,
    *,
    allowed_special: Literal["all"] | AbstractSet[str] = "all",
    name: str | None = None,
) -> TokenView:
    """How ``model`` cuts ``text``: special tokens in ``allowed_special`` (all, by default) become
    their ids, any other special-token text is encoded as ordinary text (a view never refuses
    text). ``BPE.view`` calls this.

    >>> import hf_bpe
    >>> view_text(hf_bpe.get_encoding("gpt2"), "<|endoftext|>", allowed_special=set()).ids[:3]
    [27, 91, 437]
    """
    if not isinstance(text, str):
        raise TypeError(f"view expects the text as a str, got {type(text).__name__}")
    ids, starts = model.encode_with_offsets(text, allowed_special=allowed_special, disallowed_special=())
    return TokenView(text, ids, starts, model.decode_tokens_bytes(ids), set(model.special_tokens.values()),
                     name=model.name if name is None else name)


def view_ids(model: BPE | _Viewable, ids: Iterable[int], *, name: str | None = None) -> TokenView:
    """The tokens of ``ids`` the other way round: the view's text is the tokens' bytes joined and
    decoded (a partial character that never completes becomes U+FFFD in ``text``, but its tokens
    still show their bytes). An id the model does not have raises ``KeyError`` naming it.

    >>> import hf_bpe
    >>> view = view_ids(hf_bpe.get_encoding("gpt2"), [15496, 995, 8582])
    >>> view.text, [span.draw() for span in view.spans]
    ('Hello world\\ufffd', ['Hello', '·world', '<0xF0 0x9F>'])
    """
    ids = [_checked_id(token) for token in ids]
    name = model.name if name is None else name
    token_bytes = []
    for token in ids:
        try:
            token_bytes.append(model.decode_tokens_bytes([token])[0])
        except (KeyError, ValueError):
            raise KeyError(f"id {token} is not a token of {name or 'this tokenizer'}") from None
    text = b"".join(token_bytes).decode("utf-8", errors="replace")
    return TokenView(text, ids, None, token_bytes, set(model.special_tokens.values()), name=name)


def view_tokenizer(tokenizer: Any, text: str) -> TokenView:
    """How a :class:`~hf_bpe.BPETokenizer` cuts ``text``, added tokens included, exactly as
    ``tokenizer.encode(text, add_special_tokens=False)`` does. ``BPETokenizer.view`` calls this."""
    if not isinstance(text, str):
        raise TypeError(f"view expects the text as a str, got {type(text).__name__}")
    ids, starts = tokenizer._ids_and_starts(text)
    model = tokenizer.model
    added = {token_id: token.content for token_id, token in tokenizer.added_tokens_decoder.items()}
    token_bytes = []
    for token in ids:
        content = added.get(token)
        if content is not None and not _in_model(model, token):
            token_bytes.append(content.encode("utf-8"))
        else:
            token_bytes.append(model.decode_single_token_bytes(token))
    special_ids = set(tokenizer.all_special_ids) | set(model.special_tokens.values())
    return TokenView(text, ids, starts, token_bytes, special_ids, name=tokenizer.name_or_path or model.name)


# ----------------------------------------------------------------------------------- drawing


def color_terminal() -> bool:
    """Whether standard output is a terminal that takes colors (``NO_COLOR`` unset)."""
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


def draw_text(text: str, *, line_breaks: bool = False) -> str:
    """``text`` with whitespace and control characters drawn as symbols; with ``line_breaks``, a
    newline also stays a line break after its symbol.

    >>> draw_text("a b\\tc\\n\\x00\\u3000")
    'a·b→c↵␀␣'
    """
    if line_breaks:
        return _DRAWN.sub(lambda match: _symbol(match.group()) + ("\n" if match.group() == "\n" else ""),
                          text)
    return _DRAWN.sub(lambda match: _symbol(match.group()), text)


def byte_parts(data: bytes) -> list[str | bytes]:
    """``data`` cut into its valid UTF-8 text and the bytes between that do not form characters.

    >>> byte_parts(b"\\xe6\\x97 ok \\xa5")
    [b'\\xe6\\x97', ' ok ', b'\\xa5']
    """
    decoded = data.decode("utf-8", errors="surrogateescape")
    parts: list[str | bytes] = []
    for run in re.split("([\udc80-\udcff]+)", decoded):
        if not run:
            continue
        if "\udc80" <= run[0] <= "\udcff":
            parts.append(bytes(ord(character) - 0xDC00 for character in run))
        else:
            parts.append(run)
    return parts


def _ansi_part(part: str | bytes, style: str, color: str) -> str:
    """One part of a token in ANSI colors: bytes of a partial character in red, whitespace symbols in
    gray; a newline also ends the background (it must not run on to the end of the line) and restarts it."""
    if isinstance(part, bytes):
        return f"\x1b[31m{_draw_bytes(part)}{color}"

    def symbol(match: re.Match[str]) -> str:
        character = match.group()
        return f"\x1b[90m{_symbol(character)}" + (f"\x1b[0m\n{style}" if character == "\n" else color)

    return _DRAWN.sub(symbol, part)


def _symbol(character: str) -> str:
    symbol = WHITESPACE_SYMBOLS.get(character)
    if symbol is not None:
        return symbol
    if character < " ":
        return chr(0x2400 + ord(character))
    return OTHER_SPACE_SYMBOL


def _draw_bytes(data: bytes) -> str:
    return "<" + " ".join(f"0x{byte:02X}" for byte in data) + ">"


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _partial_indexes(token_bytes: list[bytes], text: str) -> list[int]:
    """The indexes of the tokens whose bytes are not valid UTF-8 on their own."""
    if text.isascii() and all(data.isascii() for data in token_bytes):
        return []
    partial = []
    for index, data in enumerate(token_bytes):
        if not data.isascii():
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                partial.append(index)
    return partial


def _starts_from_bytes(token_bytes: list[bytes], partial: list[int]) -> list[int]:
    """Where each token starts in ``b"".join(token_bytes).decode(errors="replace")``: whole tokens
    at their own characters; the tokens of a run of partial ones all where the run's replacement
    characters start (a run ends at a whole token, which starts with a character's first byte, so
    decoding the runs and the tokens one by one gives the same characters as decoding all at once)."""
    partial_set = set(partial)
    starts = []
    position = 0
    run = bytearray()
    for index, data in enumerate(token_bytes):
        if index in partial_set:
            if not run:
                run_start = position
            run += data
            starts.append(run_start)
            continue
        if run:
            position += len(run.decode("utf-8", errors="replace"))
            run.clear()
        starts.append(position)
        position += len(data.decode("utf-8"))
    return starts


def _checked_id(token: Any) -> int:
    if isinstance(token, bool) or not isinstance(token, int):
        raise TypeError(f"ids must be ints, got {token!r:.40}")
    return token


def _in_model(model: Any, token_id: int) -> bool:
    try:
        model.decode_single_token_bytes(token_id)
    except (KeyError, ValueError):
        return False
    return True
