"""SentencePiece BPE models as `tokenizer.json`: the part of :mod:`conversion.hf` that writes them.

The file reproduces ``SentencePieceProcessor`` with `tokenizers`' own parts:

- **model**: ``BPE`` holding every piece under its id, the merges of
  :func:`hf_bpe.sentencepiece_bpe.merge_list` (one pair per piece, by score), ``unk_token`` with
  ``fuse_unk`` (SentencePiece joins a run of unknown characters into one ``<unk>``) and
  ``byte_fallback`` as the model has it;
- **normalizer**: SentencePiece's whitespace handling written as ``Replace`` steps (leading spaces,
  runs of spaces and trailing ``▁`` for ``remove_extra_whitespaces``), ``Prepend("▁")`` for the dummy
  prefix (added to any text that is not empty, as SentencePiece does: ``Metaspace`` would skip it
  before a space) and ``Replace(" ", "▁")``; no pre-tokenizer, as SentencePiece has no split. A model
  read from a ``tokenizer.json`` with `tokenizers`' own normalizer (its ``tokenizers_normalizer``:
  ``Precompiled`` and the like) gets that normalizer back, and its ``Metaspace`` if it had one;
- **added tokens**: control pieces and ``<unk>`` as special tokens matched in the raw text (transformers'
  and our ``allowed_special="all"``: ``encode_special_tokens=True`` leaves them to the model, as
  SentencePiece does), user-defined pieces as normalized, non-special tokens;
- **decoder**: control pieces decode to nothing and ``<unk>`` to its surface (`` ⁇ ``), byte pieces
  to their bytes, then the text's first ``▁`` is dropped (all of them at the start with
  ``remove_extra_whitespaces``) and ``▁`` becomes a space.

What cannot be written exactly (see :func:`differences`) is refused unless ``lossy=True``, which
writes the closest file: ``Precompiled`` for a character map, user-defined pieces as a ``Split``
with ``ignore_merges`` next to the dummy prefix, a guessed order for tied merges.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from conversion._hf_normalizers import written_normalizer
from hf_bpe.errors import ConversionError
from hf_bpe.model import BPE
from hf_bpe.sentencepiece_bpe import (
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    USER_DEFINED,
    MergeList,
    SentencePieceSpec,
    merge_list,
)

SPACE = "\u2581"
"""SentencePiece's visible space, ``▁``."""

LONG_STRIP = 1 << 30
"""``Strip`` count that removes every leading ``▁`` (``remove_extra_whitespaces``)."""


def differences(spec: SentencePieceSpec) -> list[str]:
    """Why `tokenizers` cannot encode or decode as ``spec`` does, each with the pieces or settings
    concerned; empty when the file :func:`tokenizer` writes is exact.

    >>> from hf_bpe.sentencepiece_bpe import Piece, UNKNOWN
    >>> differences(SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("▁", -1), Piece("a", -2),
    ...                                Piece("▁a", -3))))
    []
    """
    found = [f"the merges: {conflict}" for conflict in _merge_list(spec).conflicts]
    if spec.charsmap:
        found.append(
            f"the normalizer {spec.normalizer_name!r} (a precompiled character map): tokenizers' Precompiled "
            "applies it to each grapheme cluster (a whole cluster under 6 bytes takes the rule of its shortest "
            "matching prefix, a longer one is mapped character by character), SentencePiece takes the longest "
            "rule at each position, so combining sequences and '\\r\\n' normalize differently"
        )
    user_defined = [piece.text for piece in spec.pieces if piece.type == USER_DEFINED]
    if user_defined and spec.add_dummy_prefix:
        found.append(
            f"the user-defined pieces ({_some(user_defined)}) with the dummy prefix: SentencePiece encodes a text "
            f"that starts with one as {SPACE!r} and the piece; tokenizers cuts added tokens out before "
            "normalizing, so no prefix reaches the empty text in front of it (isolating them in a Split with "
            "ignore_merges instead emits a byte, control or <unk> piece for text spelling one right after them)"
        )
    elif user_defined:
        changed = [text for text in user_defined if text != _normalized(spec, text) or " " in text]
        if changed:
            found.append(
                f"the user-defined pieces {_some(changed)} contain spaces or change under the normalizer; "
                "SentencePiece matches them in the text before its whitespace handling, tokenizers after it"
            )
    found.extend(_decoding_differences(spec))
    return found


def _decoding_differences(spec: SentencePieceSpec) -> list[str]:
    found = []
    if SPACE in spec.unk_surface:
        found.append(f"the unknown piece's surface {spec.unk_surface!r} holds {SPACE!r}, which SentencePiece "
                     "decodes as it is and the decoder turns into a space")
    if not _strips_first_space(spec):
        return found
    mergeable = {piece.text for piece in spec.pieces if piece.type in (NORMAL, USER_DEFINED)}
    if spec.byte_fallback and SPACE not in mergeable:
        found.append(f"{SPACE!r} is not a piece, so it decodes from byte pieces, which SentencePiece leaves as "
                     "they are; the decoder drops the text's first one and turns the others into spaces")
    doubled = sorted(text for text in mergeable if text.startswith(SPACE * 2))
    if spec.remove_extra_whitespaces and doubled:
        found.append(f"the pieces {_some(doubled)} start with {SPACE * 2!r}: SentencePiece decodes the first "
                     f"piece of a text without one {SPACE!r}, the decoder (which must drop every leading "
                     f"{SPACE!r} under remove_extra_whitespaces) without all")
    return found


@functools.lru_cache(maxsize=2)
def _merge_list(spec: SentencePieceSpec) -> MergeList:
    """:func:`merge_list`, which both :func:`differences` and :func:`tokenizer` need (0.4 s for 32,000
    pieces)."""
    return merge_list(spec)


def _some(texts: Sequence[str]) -> str:
    shown = ", ".join(repr(text) for text in texts[:5])
    return shown + (f" and {len(texts) - 5} more" if len(texts) > 5 else "")


def _strips_first_space(spec: SentencePieceSpec) -> bool:
    """SentencePiece's decoder drops a text's first ``▁`` under either of these settings."""
    return spec.add_dummy_prefix or spec.remove_extra_whitespaces


def _normalized(spec: SentencePieceSpec, text: str) -> str:
    return _normalizer(spec).normalize_str(text)


def tokenizer(model: BPE) -> Tokenizer:
    """The `tokenizers.Tokenizer` for a SentencePiece ``model``: exact when :func:`differences` is
    empty, else the closest one (see the module documentation). No post-processor is set.

    >>> import hf_bpe
    >>> from hf_bpe.sentencepiece_bpe import Piece, UNKNOWN, CONTROL
    >>> spec = SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("<s>", 0, CONTROL), Piece("▁", -1),
    ...                           Piece("a", -2), Piece("▁a", -3)))
    >>> written = tokenizer(hf_bpe.BPE.from_sentencepiece(spec))
    >>> written.encode("a a", add_special_tokens=False).ids, written.decode([1, 4, 4])
    ([4, 4], 'a a')
    """
    spec = model.sentencepiece
    if spec is None:
        raise TypeError(f"{model!r} is not a SentencePiece model")
    pieces = spec.pieces
    unk = pieces[spec.unk_id].text if spec.unk_id is not None else None
    user_defined = [piece.text for piece in pieces if piece.type == USER_DEFINED]
    isolate = bool(user_defined) and spec.add_dummy_prefix  # lossy: see differences()
    written = Tokenizer(models.BPE(
        vocab={piece.text: index for index, piece in enumerate(pieces)},
        merges=list(_merge_list(spec).merges),
        unk_token=unk,
        fuse_unk=True,
        byte_fallback=spec.byte_fallback,
        ignore_merges=isolate,
    ))
    if spec.tokenizers_normalizer:  # the normalizer read from a tokenizer.json, written back as it was
        written.normalizer = written_normalizer(spec.tokenizers_normalizer)
        if spec.metaspace is not None or spec.metaspace_split:
            written.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme=spec.metaspace or "never",
                                                             split=spec.metaspace_split)
    elif spec.metaspace is not None:
        written.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme=spec.metaspace,
                                                         split=spec.metaspace_split)
    else:
        written.normalizer = _normalizer(spec)
        if spec.metaspace_split:  # every stretch starts with ▁ already: Metaspace only splits
            written.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)
    if isolate:
        written.pre_tokenizer = pre_tokenizers.Split(Regex(_alternation(user_defined)), behavior="isolated")
    written.decoder = _decoder(spec)
    # All at once: each call rebuilds tokenizers' matcher of added tokens. Every piece is in the
    # vocabulary, so each keeps its id.
    written.add_special_tokens([AddedToken(piece.text, special=True, normalized=False)
                                for piece in pieces if piece.type in (CONTROL, UNKNOWN)])
    written.add_tokens([AddedToken(piece.text, special=False, normalized=True)
                        for piece in pieces if piece.type == USER_DEFINED and not isolate])
    for index, piece in enumerate(pieces):
        if piece.type in (CONTROL, UNKNOWN, USER_DEFINED) and written.token_to_id(piece.text) != index:
            raise ConversionError(f"tokenizers gave piece {piece.text!r} the id {written.token_to_id(piece.text)}, "
                                  f"not {index} (please report it)")
    return written


def _normalizer(spec: SentencePieceSpec) -> normalizers.Normalizer:
    """SentencePiece's ``normalizer.cc`` as `tokenizers` steps (exact without a character map)."""
    steps: list[normalizers.Normalizer] = []
    if spec.charsmap:
        steps.append(normalizers.Precompiled(spec.charsmap))
    space = SPACE if spec.escape_whitespaces else " "
    if spec.remove_extra_whitespaces:  # only U+0020 counts, after the character map
        steps += [normalizers.Replace(Regex(r"\A +"), ""), normalizers.Replace(Regex(" {2,}"), " ")]
    if spec.add_dummy_prefix:
        steps.append(normalizers.Prepend(space))  # to any text that is not empty, as SentencePiece
    if spec.escape_whitespaces:
        steps.append(normalizers.Replace(" ", SPACE))
    if spec.remove_extra_whitespaces:  # SentencePiece drops trailing ▁ whatever made them, a dummy prefix too
        steps.append(normalizers.Replace(Regex(re.escape(space) + r"+\z"), ""))
    return normalizers.Sequence(steps)


def _decoder(spec: SentencePieceSpec) -> decoders.Decoder:
    """SentencePiece's ``DecodeSentencePiece``: control pieces vanish, ``<unk>`` shows its surface,
    byte pieces their bytes, a text's first ``▁`` goes (see :func:`_decoding_differences` for where
    this differs), ``▁`` is a space."""
    steps: list[decoders.Decoder] = []
    controls = [piece.text for piece in spec.pieces if piece.type == CONTROL]
    if controls:
        steps.append(decoders.Replace(Regex(rf"\A(?:{_alternation(controls)})\z"), ""))
    if spec.unk_id is not None:
        steps.append(decoders.Replace(Regex(rf"\A{re.escape(spec.pieces[spec.unk_id].text)}\z"), spec.unk_surface))
    if _strips_first_space(spec):
        # The first ▁ must go before ▁ becomes a space, and after the pieces are joined.
        if spec.byte_fallback:
            steps.append(decoders.ByteFallback())
        steps.append(decoders.Fuse())
        steps.append(decoders.Strip(SPACE, LONG_STRIP if spec.remove_extra_whitespaces else 1, 0))
        steps.append(decoders.Replace(SPACE, " "))
    else:
        # ▁ becomes a space in each piece, before byte pieces are decoded (SentencePiece leaves theirs).
        steps.append(decoders.Replace(SPACE, " "))
        if spec.byte_fallback:
            steps.append(decoders.ByteFallback())
        steps.append(decoders.Fuse())
    return decoders.Sequence(steps)


def _alternation(texts: Sequence[str]) -> str:
    """A regex matching any of ``texts``, the longest at a position first: a trie of escaped text, so
    that Oniguruma tries a shared prefix once (Mistral models have 750 control pieces)."""
    trie: dict[str, dict] = {}
    for text in texts:
        node = trie
        for char in text:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if "" in node:  # a text ends here: try the longer ones first
            branches.append("")
        if len(branches) == 1:
            return branches[0]
        return "(?:" + "|".join(branches) + ")"

    return pattern(trie)


# ------------------------------------------------------------------------------------------ probes

_WHITESPACE = [" ", "  ", "   ", " " * 9, " " * 17, "\t", "\n", "\r\n", "\u3000", "\xa0", SPACE, SPACE * 3]
_MARKS = [chr(code) for code in range(0x300, 0x370)] + ["\u3099", "\u309a", "\u0e31", "\u094d", "\u200d", "\ufe0f"]
_ODD = ["ｶﾞ", "ﬁ", "①", "Ａ", "Å", "\u0378", "\U0002a6d6", "日本語", "👍🏽", "👩\u200d👩\u200d👧", "\x00", "\ufeff",
        "\ud7a4"]
_CLUSTERS = ["\u1100\u1161\u11a8", "\u1100\u1161", "ﬁ\u0301", "Ａ\u0308\u0301", "①\u0300", "\u0340\u0301", "ｶ\u3099",
             "\u2581\u0301", "\u200b", "\x08", "e\u0301\u0302\u0303", "👩\u200d👧", "\r\n", " \u0301"]
"""Grapheme clusters a character map rewrites whole (`tokenizers`' ``Precompiled``) or by its longest
rule (SentencePiece), and characters a map removes (at the start of a text they shift its offsets)."""


def probe_texts(spec: SentencePieceSpec, count: int = 2000, seed: int = 0) -> list[str]:
    """Short texts made of ``spec``'s own pieces (as text), its user-defined, control, unknown and byte
    pieces spelled out, whitespace runs, combining sequences and characters it lacks, now and then
    led or trailed by spaces (and, for a model keeping `tokenizers`' normalizer, by grapheme clusters
    a character map rewrites): where SentencePiece and `tokenizers` can part ways.

    >>> from hf_bpe.sentencepiece_bpe import Piece, UNKNOWN
    >>> spec = SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("▁a", -1)))
    >>> len(probe_texts(spec, 10)), probe_texts(spec, 5) == probe_texts(spec, 5)
    (10, True)
    """
    rng = random.Random(seed)
    # Pieces as text, cut to 64 characters so that a model with huge pieces makes no huge probes.
    surfaces = [piece.text[:64].replace(SPACE, " ") for piece in spec.pieces if piece.type == NORMAL]
    spelled = [piece.text[:64] for piece in spec.pieces if piece.type in (USER_DEFINED, CONTROL, UNKNOWN, BYTE)]
    texts = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 8)):
            kind = rng.random()
            if kind < 0.5 and surfaces:
                parts.append(rng.choice(surfaces))
            elif kind < 0.65 and spelled:
                parts.append(rng.choice(spelled))
            elif kind < 0.8:
                parts.append(rng.choice(_WHITESPACE))
            elif kind < 0.9:
                parts.append(rng.choice("aeoAEnNcsy") + "".join(rng.choices(_MARKS, k=rng.randint(1, 3))))
            else:
                parts.append(rng.choice(_ODD))
        text = "".join(parts)
        if rng.random() < 0.1:
            text = rng.choice(_WHITESPACE) + text
        if rng.random() < 0.1:
            text += rng.choice(_WHITESPACE)
        texts.append(text)
    if spec.tokenizers_normalizer:  # before and after some texts, from an rng of their own
        clusters = random.Random(seed + 1)
        texts = [clusters.choice(_CLUSTERS) + text if index % 6 == 0 else
                 text + clusters.choice(_CLUSTERS) if index % 6 == 3 else text for index, text in enumerate(texts)]
    return texts


def mismatches(model: BPE, written: Tokenizer, texts: Sequence[str]) -> list[tuple[str, str]]:
    """The texts on which ``written`` differs from ``model``, each with what differs: ids as
    ``SentencePieceProcessor.encode`` (``encode_special_tokens``), ids with control pieces matched
    (``allowed_special="all"``), or the text decoded from the model's ids."""
    texts = list(texts)
    ordinary = model.encode_ordinary_batch(texts)
    allowed = model.encode_batch(texts, allowed_special="all")
    written.encode_special_tokens = True
    try:
        theirs = [encoding.ids for encoding in written.encode_batch(texts, add_special_tokens=False)]
    finally:
        written.encode_special_tokens = False
    theirs_allowed = [encoding.ids for encoding in written.encode_batch(texts, add_special_tokens=False)]
    decoded = written.decode_batch(ordinary, skip_special_tokens=False)
    found = []
    for index, text in enumerate(texts):
        if ordinary[index] != theirs[index]:
            found.append((text, "encodes to " + _difference(ordinary[index], theirs[index])))
        elif allowed[index] != theirs_allowed[index]:
            found.append((text, "with special tokens allowed encodes to "
                          + _difference(allowed[index], theirs_allowed[index])))
        elif model.decode(ordinary[index]) != decoded[index]:
            here = model.decode(ordinary[index])
            found.append((text, f"decodes to {here!r:.80} here but to {decoded[index]!r:.80} in tokenizers"))
    return found


def _difference(ours: list[int], theirs: list[int]) -> str:
    """Two id lists around where they first differ."""
    at = next((index for index, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    start = max(0, at - 2)
    lead = "..." if start else ""
    return (f"[{lead}{', '.join(map(str, ours[start : at + 4]))}...] here but "
            f"[{lead}{', '.join(map(str, theirs[start : at + 4]))}...] in tokenizers")
