"""A SentencePiece model's tokens as `tokenizers` finds them in the ``tokenizer.json`` that
:func:`conversion.hf.save` writes for it: the characters each covers (``offset_mapping``), and the
tokens added with ``normalized=True`` to a model whose file has a normalizer.

`tokenizers` cuts out the added tokens with ``normalized=False`` first, then normalizes each stretch
of text between them (SentencePiece's whitespace handling, the dummy prefix ``▁``), then looks for
the tokens with ``normalized=True`` in the normalized stretch, spelled as normalized too (``▁<x>``
for ``<x>`` after a dummy prefix), and runs the model on the normalized text between them. A model
read from a ``tokenizer.json`` with a ``Metaspace`` pre-tokenizer has no normalizer: its added tokens
are all cut out of the text, and ``▁`` goes before each stretch between them.

Each normalized character stands for one character of the text: a space for its ``▁``, the dummy
prefix for the stretch's first character, a run of spaces that ``remove_extra_whitespaces`` makes
one for its last. A token covers the characters its normalized characters stand for; a byte piece
(``<0xE4>``) the whole character its byte belongs to; ``<unk>`` the run of characters no piece
spells, which `tokenizers` fuses into one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from transformers.tokenization_utils_base import AddedToken

from hf_bpe._added_tokens import AddedTokensEncoder
from hf_bpe.model import BPE, SPECIAL_TOKEN_RULES
from hf_bpe.sentencepiece_bpe import BYTE, USER_DEFINED, SentencePieceSpec

__all__ = ["Pieces", "SentencePieceTwoPhase", "normalize", "relabeled", "ruled_policy", "spans_in_text",
           "without_normalizer"]

SPACE = "\u2581"

Span = tuple[int, int]


class Pieces:
    """What the spans of a SentencePiece model's tokens need to know about its pieces."""

    def __init__(self, spec: SentencePieceSpec) -> None:
        self.spec = spec
        self.lengths = [len(piece.text) for piece in spec.pieces]
        self.is_byte = bytearray(piece.type == BYTE for piece in spec.pieces)
        self.user_defined = frozenset(index for index, piece in enumerate(spec.pieces) if piece.type == USER_DEFINED)
        self.unk_id = spec.unk_id
        self._texts = frozenset(piece.text for piece in spec.pieces)
        self._unknown: dict[str, bool] = {}

    def unknown(self, char: str) -> bool:
        """Whether `tokenizers`' BPE gives ``<unk>`` for ``char``: no piece spells it and no byte
        pieces stand in for it."""
        found = self._unknown.get(char)
        if found is None:
            found = self._unknown[char] = char not in self._texts and not (
                self.spec.byte_fallback and all(f"<0x{byte:02X}>" in self._texts for byte in char.encode("utf-8"))
            )
        return found


def normalize(spec: SentencePieceSpec, text: str, start: int = 0, end: int | None = None) -> tuple[str, list[int]]:
    """``text[start:end]`` as the model of the ``tokenizer.json`` sees it (its normalizer, or its
    ``Metaspace`` pre-tokenizer's ``▁``), and the character of ``text`` each character stands for.

    >>> from hf_bpe.sentencepiece_bpe import Piece, UNKNOWN
    >>> spec = SentencePieceSpec((Piece("<unk>", 0, UNKNOWN),), remove_extra_whitespaces=True)
    >>> normalize(spec, "  a   b  ")
    ('▁a▁b', [2, 2, 5, 6])
    """
    end = len(text) if end is None else end
    chars = text[start:end]
    origin = list(range(start, end))
    if spec.metaspace is not None:
        chars = chars.replace(" ", SPACE)
        if chars and not chars.startswith(SPACE) and (
            spec.metaspace == "always" or (spec.metaspace == "first" and start == 0)
        ):
            return SPACE + chars, [start, *origin]
        return chars, origin
    space = SPACE if spec.escape_whitespaces else " "
    if spec.remove_extra_whitespaces:  # no leading spaces; a run of spaces becomes its last
        first = len(chars) - len(chars.lstrip(" "))
        kept = [index for index in range(first, len(chars))
                if chars[index] != " " or index + 1 == len(chars) or chars[index + 1] != " "]
        chars = "".join(chars[index] for index in kept)
        origin = [origin[index] for index in kept]
    if spec.add_dummy_prefix and chars:
        chars, origin = space + chars, [origin[0], *origin]
    if spec.escape_whitespaces:
        chars = chars.replace(" ", SPACE)
    if spec.remove_extra_whitespaces:
        chars = chars.rstrip(space)
        del origin[len(chars):]
    return chars, origin


def piece_spans(pieces: Pieces, ids: Sequence[int], normalized: str, origin: Sequence[int]) -> list[Span]:
    """The characters of the text each of ``ids`` covers, the model's tokens of ``normalized``
    (whose characters stand for the characters ``origin`` of the text)."""
    spans: list[Span] = []
    position = 0
    byte = 0  # the bytes of the character at `position` that byte pieces took
    split = pieces.spec.metaspace_split
    for token_id in ids:
        if token_id < len(pieces.lengths) and pieces.is_byte[token_id]:
            spans.append((origin[position], origin[position] + 1))
            byte += 1
            if byte == len(normalized[position].encode("utf-8")):
                position, byte = position + 1, 0
            continue
        if token_id == pieces.unk_id:  # fused: every unknown character after it in the same word
            end = position + 1
            while end < len(normalized) and pieces.unknown(normalized[end]) and not (
                split and normalized[end] == SPACE
            ):
                end += 1
        else:
            end = position + pieces.lengths[token_id]
        spans.append((origin[position], origin[end - 1] + 1))
        position = end
    return spans


WHITESPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(map(chr, range(0x2000, 0x200B)))
"""The characters `tokenizers` strips around added tokens (Rust's ``char::is_whitespace``)."""


def _added_span(text: str, token: AddedToken, start: int, next_start: int | None) -> Span:
    """An added token's span: from ``start`` (the whitespace it strips before it included), its text,
    and the whitespace it strips after it, up to the next token (``next_start``, which may have
    taken that whitespace with ``lstrip``)."""
    content = start
    while token.lstrip and not text.startswith(token.content, content):
        content += 1
    end = content + len(token.content)
    limit = len(text) if next_start is None else next_start
    while token.rstrip and end < limit and text[end] in WHITESPACE:
        end += 1
    return start, end


def relabeled(model: BPE, tokens: Mapping[int, AddedToken]) -> dict[int, tuple[int, AddedToken]]:
    """``tokens`` under ids of their own, after every id of the model and of ``tokens`` (-> the id
    and the token): an added token may have a piece's id, which the model's tokens then carry too."""
    base = max([model.n_vocab, *(token_id + 1 for token_id in tokens)])
    return {base + index: (token_id, token) for index, (token_id, token) in enumerate(tokens.items())}


def spans_in_text(pieces: Pieces, text: str, ids: Sequence[int], starts: Sequence[int],
                  cut: Mapping[int, tuple[int, AddedToken]]) -> tuple[list[int], list[Span]]:
    """The ids and spans of the tokens of ``text``, ``ids`` starting at ``starts``: the added tokens
    ``cut`` (their ids here -> their ids and tokens, see :func:`relabeled`) cut out of the text, the
    model's tokens between. For a ``Metaspace`` model, user-defined pieces are cut out too (they are
    added tokens of its ``tokenizer.json``)."""
    spec = pieces.spec
    cut_pieces = pieces.user_defined if spec.metaspace is not None else frozenset()
    spans: list[Span] = []
    done = 0  # where the text after the last cut token starts
    index = 0
    while index < len(ids):
        token_id = ids[index]
        if token_id in cut or token_id in cut_pieces:
            token = cut[token_id][1] if token_id in cut else AddedToken(spec.pieces[token_id].text)
            span = _added_span(text, token, starts[index], starts[index + 1] if index + 1 < len(ids) else None)
            spans.append(span)
            done = span[1]
            index += 1
            continue
        stop = index
        while stop < len(ids) and ids[stop] not in cut and ids[stop] not in cut_pieces:
            stop += 1
        end = starts[stop] if stop < len(ids) else len(text)
        normalized, origin = normalize(spec, text, done, end)
        spans += piece_spans(pieces, ids[index:stop], normalized, origin)
        index = stop
    return [cut[token_id][0] if token_id in cut else token_id for token_id in ids], spans


class SentencePieceTwoPhase:
    """Ids and spans of text with added tokens of both kinds, for a model whose ``tokenizer.json``
    normalizes (see the module documentation): the tokens with ``normalized=False`` cut out by the
    core, then each stretch normalized here, and the other tokens, as normalized, cut out of it by
    the core again, with the model (without its dummy prefix: the stretch has it) between."""

    def __init__(self, model: BPE, plain: BPE, pieces: Pieces, decoder: Mapping[int, AddedToken]) -> None:
        """``plain``: the model without its normalizer's steps (:func:`without_normalizer`)."""
        spec = pieces.spec
        self.pieces = pieces
        self.raw = relabeled(model, {token_id: token for token_id, token in decoder.items() if not token.normalized})
        self.first = AddedTokensEncoder(model._core, ruled_policy(model, self.raw), 0)
        spelled: dict[int, AddedToken] = {}
        for token_id, token in decoder.items():
            content = normalize(spec, token.content)[0] if token.normalized else ""
            if content:  # tokenizers cannot match a token that normalizes to nothing
                spelled[token_id] = AddedToken(content, lstrip=token.lstrip, rstrip=token.rstrip,
                                               single_word=token.single_word)
        self.normalized = relabeled(model, spelled)
        self.second = AddedTokensEncoder(plain._core, ruled_policy(plain, self.normalized), 0)

    def encode(self, text: str) -> tuple[list[int], list[Span]]:
        """Ids of ``text`` and the characters each covers."""
        first_ids, first_starts = self.first.encode_with_offsets(text)
        ids: list[int] = []
        spans: list[Span] = []
        done = 0
        index = 0
        while index <= len(first_ids):
            stop = index
            while stop < len(first_ids) and first_ids[stop] not in self.raw:
                stop += 1
            end = first_starts[stop] if stop < len(first_ids) else len(text)
            if stop > index:  # a stretch between cut-out tokens, normalized here
                normalized, origin = normalize(self.pieces.spec, text, done, end)
                stretch_ids, stretch_spans = self._encode_normalized(normalized, origin)
                ids += stretch_ids
                spans += stretch_spans
            if stop == len(first_ids):
                break
            token_id, token = self.raw[first_ids[stop]]
            span = _added_span(text, token, first_starts[stop],
                               first_starts[stop + 1] if stop + 1 < len(first_ids) else None)
            ids.append(token_id)
            spans.append(span)
            done = span[1]
            index = stop + 1
        return ids, spans

    def _encode_normalized(self, normalized: str, origin: list[int]) -> tuple[list[int], list[Span]]:
        ids, starts = self.second.encode_with_offsets(normalized)
        spans: list[Span] = []
        done = 0
        index = 0
        while index < len(ids):
            stop = index
            while stop < len(ids) and ids[stop] not in self.normalized:
                stop += 1
            end = starts[stop] if stop < len(ids) else len(normalized)
            spans += piece_spans(self.pieces, ids[index:stop], normalized[done:end], origin[done:end])
            if stop == len(ids):
                break
            token_id, token = self.normalized[ids[stop]]
            start, stop_at = _added_span(normalized, token, starts[stop],
                                         starts[stop + 1] if stop + 1 < len(ids) else None)
            spans.append((origin[start], origin[stop_at - 1] + 1))
            ids[stop] = token_id
            done = stop_at
            index = stop + 1
        return ids, spans


def without_normalizer(spec: SentencePieceSpec) -> BPE:
    """The model of ``spec`` for text normalized already: no dummy prefix, no whitespace removed."""
    return BPE.from_sentencepiece(dataclasses.replace(spec, add_dummy_prefix=False, remove_extra_whitespaces=False))


def ruled_policy(model: BPE, tokens: Mapping[int, AddedToken] | Mapping[int, tuple[int, AddedToken]]) -> object:
    """The core's policy that cuts out ``tokens`` (id -> token, or -> (id, token): the first id is
    the one given) with `tokenizers`' rules (``normalized`` as two passes, the tokens with it looked
    for between the others)."""
    entries = [(token_id, token if isinstance(token, AddedToken) else token[1]) for token_id, token in tokens.items()]
    return model._core.added_tokens_policy(
        [(token.content, token_id) for token_id, token in entries], [],
        [sum(bit for rule, bit in SPECIAL_TOKEN_RULES.items() if getattr(token, rule)) for _, token in entries],
    )
