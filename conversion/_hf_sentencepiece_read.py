"""SentencePiece-style BPE ``tokenizer.json`` files (Llama 2, Mistral, phi-3, what `tokenizers`'
and transformers' converters write for a ``.model``), read as a SentencePiece model of hf_bpe.

Such a file runs `tokenizers`' BPE on characters: characters that are pieces start as their pieces,
others become byte pieces (``byte_fallback``) or ``<unk>`` (a run of them one ``<unk>`` with
``fuse_unk``), then the adjacent pair listed first in ``merges`` joins, leftmost on ties. hf_bpe's
SentencePiece model joins the adjacent pair whose piece has the highest score. :func:`load` gives
each piece the score of the pair that forms it, ``-1 - (its line in merges)``, where "the pair that
forms it" is the last pair SentencePiece's rule joins on the piece's own text, with the scores of
the shorter pieces (so lengths are done in order). The two rules then join the same pairs:

- wherever adjacent symbols spell a piece, the pair is the one that forms it (the symbols inside the
  span merged as on the piece's own text: :func:`hf_bpe.sentencepiece_bpe.merge_list`), so of the
  listed pairs only those are ever present, and their lines order them as the scores do;
- the pair of every piece some text forms must be listed (else `tokenizers` never joins it: the
  file is refused naming the piece), and merges naming byte pieces or ``<unk>`` (which only
  `tokenizers` could join) are refused;
- characters that are not pieces must not be parts of formed pieces (``merge_list``'s conflicts).

Settings read: ``normalizer`` ``Prepend("▁")`` and ``Replace(" ", "▁")`` (a ``Sequence`` of them, or
none), as SentencePiece's whitespace handling; any other normalizer `tokenizers` has and hf_bpe runs
(``Precompiled``, SentencePiece's character map, which `tokenizers` applies per grapheme cluster, not
as SentencePiece does; ``Replace`` and ``Strip`` of whitespace, NFKC, ...: what converters write for
``.model`` files with the ``nmt_nfkc`` rule or ``remove_extra_whitespaces``) is kept as the model's
``tokenizers_normalizer`` and run exactly as `tokenizers` runs it, steps in the file's order;
``pre_tokenizer`` ``Metaspace`` (``replacement`` ``▁``, every ``prepend_scheme``, ``split``)
or none; ``model`` ``byte_fallback``, ``fuse_unk``, ``unk_token``, ``ignore_merges`` (where it changes
nothing; refused naming the pieces where it would); added tokens become control pieces, matched in
text as `tokenizers` matches them (``allowed_special="all"``), decoded to nothing
(``decode(ids, skip_special_tokens=True)`` in `tokenizers`). Refused by name: normalizers hf_bpe does
not run, other pre-tokenizers, ``dropout``, ``continuing_subword_prefix``,
``end_of_word_suffix``, added tokens that are not special or have ``lstrip``/``rstrip``/
``single_word``, decoders other than ``Replace``, ``ByteFallback``, ``Fuse``, ``Strip``,
``Metaspace`` and ``Sequence`` s of them. Last, ids and decoded text are compared with the real
`tokenizers` on probe texts of every code point class, and any difference refuses the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from conversion import _hf_sentencepiece
from conversion._hf_normalizers import normalizer_steps
from conversion._hf_pretokenizers import describe, probe_texts, split_probe_texts
from hf_bpe.errors import InvalidVocabularyError, TokenizerFileError
from hf_bpe.model import BPE
from hf_bpe.patterns import Normalize
from hf_bpe.sentencepiece_bpe import (
    BYTE,
    CONTROL,
    NORMAL,
    UNKNOWN,
    Piece,
    SentencePieceSpec,
    _last_merge,
    merge_list,
)

__all__ = ["is_sentencepiece_style", "load"]

SPACE = "\u2581"
_DECODERS = {"Replace", "ByteFallback", "Fuse", "Strip", "Metaspace", "Sequence"}

Refuse = Callable[[str], TokenizerFileError]


def is_sentencepiece_style(document: dict[str, Any]) -> bool:
    """A file of SentencePiece-style BPE: byte fallback (but for a byte-level model, which
    :mod:`conversion._hf_affixes` reads), a ``Metaspace`` pre-tokenizer or decoder, a ``ByteFallback``
    decoder step, or a normalizer that writes ``▁`` (without a ``ByteLevel`` step).

    >>> is_sentencepiece_style({"model": {"type": "BPE", "byte_fallback": True}})
    True
    >>> is_sentencepiece_style({"model": {"type": "BPE"}, "pre_tokenizer": {"type": "ByteLevel"}})
    False
    >>> is_sentencepiece_style({"model": {"type": "BPE", "byte_fallback": True, "end_of_word_suffix": "</w>"},
    ...                         "pre_tokenizer": {"type": "ByteLevel"}})
    False
    """
    model = document.get("model")
    kinds = set(_kinds(document.get("pre_tokenizer"), "pretokenizers")) | set(_kinds(document.get("decoder"), "decoders"))
    byte_level_split = "ByteLevel" in _kinds(document.get("pre_tokenizer"), "pretokenizers")
    if isinstance(model, dict) and model.get("byte_fallback") and not byte_level_split:
        return True
    if kinds & {"Metaspace", "ByteFallback"}:
        return True
    if "ByteLevel" in kinds:  # a byte-level file whose normalizer happens to write ▁
        return False
    try:
        steps = _steps(document.get("normalizer"), "normalizers")
    except TypeError:
        return False
    return any(step.get("prepend") == SPACE or step.get("content") == SPACE for step in steps)


def _kinds(component: Any, key: str) -> Iterable[str]:
    """The ``type`` of a component and of the steps of a ``Sequence``."""
    if not isinstance(component, dict):
        return
    yield str(component.get("type"))
    if component.get("type") == "Sequence" and isinstance(component.get(key), list):
        for part in component[key]:
            yield from _kinds(part, key)


def _steps(component: Any, key: str) -> list[dict[str, Any]]:
    """A component as its list of steps (a ``Sequence`` flattened, none: empty)."""
    if component is None:
        return []
    if not isinstance(component, dict):
        raise TypeError(component)
    if component.get("type") == "Sequence":
        parts = component.get(key)
        if not isinstance(parts, list):
            raise TypeError(parts)
        return [step for part in parts for step in _steps(part, key)]
    return [component]


def load(document: dict[str, Any], path: str | os.PathLike[str], refuse: Refuse, *, name: str | None,
         lossy: bool) -> BPE:
    """The SentencePiece model that encodes and decodes as `tokenizers` runs ``document`` (see the
    module documentation); ``refuse(problem)`` makes the error that names the file."""
    model = document["model"]
    for option in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise refuse(f"model.{option} = {model[option]!r} is not supported (SentencePiece-style BPE has none)")
    byte_fallback = bool(model.get("byte_fallback", False))
    add_dummy_prefix, metaspace, split, steps = _whitespace(document, refuse)
    vocab: dict[str, int] = model["vocab"]
    pieces, specials = _pieces(document, vocab, byte_fallback, refuse, lossy)
    texts = {piece.text: index for index, piece in enumerate(pieces)}
    unk_token = model.get("unk_token")
    if unk_token is not None and pieces[texts[unk_token]].type != UNKNOWN:
        raise refuse(f"model.unk_token {unk_token!r} is not in the vocabulary")
    if unk_token is None and not byte_fallback:
        raise refuse("model.unk_token is null and byte_fallback is off: tokenizers drops characters that are no "
                     "pieces, which no SentencePiece model does")
    if not model.get("fuse_unk", False) and not byte_fallback:
        raise refuse("model.fuse_unk is false: tokenizers emits one <unk> per unknown character, SentencePiece-style "
                     "BPE (and hf_bpe) one per run of them")

    merges = _merges(model.get("merges") or [], texts, pieces, byte_fallback, refuse)
    scores, missing = _scores(pieces, merges, split)
    if missing:
        shown = ", ".join(f"{text!r} (from {pair[0]!r} + {pair[1]!r})" for text, pair in missing[:5])
        raise refuse(
            f"the merges never join the pair that forms {len(missing)} piece{'s' if len(missing) > 1 else ''} where "
            f"SentencePiece's rule would ({shown}{' and more' if len(missing) > 5 else ''}); hf_bpe reads merges "
            "lists that hold the pair forming each piece (as the converters of .model files write them)"
        )
    pieces = [Piece(piece.text, scores.get(piece.text, piece.score), piece.type) for piece in pieces]
    if not any(piece.type == UNKNOWN for piece in pieces):
        # Byte fallback covers every character, so no <unk> is ever produced; the model needs one
        # piece to name it: the first special added token (it decodes to nothing either way).
        first = next((index for index, piece in enumerate(pieces) if piece.type == CONTROL), None)
        if first is None:
            pieces.append(Piece(_unused_name(texts), 0.0, UNKNOWN))
        else:
            pieces[first] = Piece(pieces[first].text, 0.0, UNKNOWN)
    unk_surface = ""
    if unk_token is not None and unk_token not in specials:
        unk_surface = unk_token.replace(SPACE, " ")
    spec = SentencePieceSpec(
        pieces=tuple(pieces), byte_fallback=byte_fallback, unk_surface=unk_surface, add_dummy_prefix=add_dummy_prefix,
        metaspace=metaspace, metaspace_split=split, tokenizers_normalizer=steps,
    )
    conflicts = merge_list(spec).conflicts
    if conflicts:
        raise refuse(f"SentencePiece's rule and tokenizers' merges list part ways here: {conflicts[0]}")
    if model.get("ignore_merges"):
        _check_ignore_merges(spec, specials, refuse)
    try:
        loaded = BPE.from_sentencepiece(spec, name=name or Path(path).parent.name or "tokenizer")
    except InvalidVocabularyError as error:
        raise refuse(str(error)) from None
    _check_with_tokenizers(loaded, document, refuse)
    return loaded


def _whitespace(document: dict[str, Any],
                refuse: Refuse) -> tuple[bool, str | None, bool, tuple[Normalize, ...]]:
    """(add_dummy_prefix, metaspace prepend_scheme or None, split, tokenizers_normalizer) from the
    normalizer and the pre-tokenizer."""
    try:
        normalizer = _steps(document.get("normalizer"), "normalizers")
        pre_tokenizer = _steps(document.get("pre_tokenizer"), "pretokenizers")
    except TypeError:
        raise refuse("a normalizer or pre_tokenizer Sequence is malformed") from None
    prepend = escape = False
    for step in normalizer:
        kind = step.get("type")
        if kind == "Prepend" and step.get("prepend") == SPACE and not escape:
            prepend = True
        elif kind == "Replace" and step.get("pattern") == {"String": " "} and step.get("content") == SPACE:
            escape = True
        else:  # not SentencePiece's whitespace handling alone: tokenizers' normalizer runs as it is
            return _with_normalizer(document, pre_tokenizer, refuse)
    if prepend and not escape and not pre_tokenizer:
        raise refuse("the normalizer prepends '\u2581' but leaves spaces as they are and there is no Metaspace; "
                     "hf_bpe reads SentencePiece-style files, where spaces become '\u2581'")
    if not pre_tokenizer:
        if not escape:
            raise refuse("spaces are not replaced by '\u2581' (no Replace normalizer, no Metaspace): not a "
                         "SentencePiece-style file hf_bpe reads")
        return prepend, None, False, ()
    scheme, split = _metaspace(document, pre_tokenizer, refuse)
    if prepend:  # every stretch already starts with ▁: Metaspace adds none
        return True, None, split, ()
    return scheme != "never", scheme, split, ()


def _with_normalizer(document: dict[str, Any], pre_tokenizer: list[dict[str, Any]],
                     refuse: Refuse) -> tuple[bool, str | None, bool, tuple[Normalize, ...]]:
    """:func:`_whitespace` for a normalizer kept as `tokenizers`' steps: Metaspace (or nothing) after
    it, and decoding drops the text's first ``▁`` where a prefix is written (a ``Prepend("▁")`` step
    or Metaspace's)."""
    steps = normalizer_steps(document.get("normalizer"), refuse)
    prefixed = any(step.kind == "prepend" and step.pattern == SPACE for step in steps)
    if not pre_tokenizer:
        return prefixed, None, False, steps
    scheme, split = _metaspace(document, pre_tokenizer, refuse)
    return prefixed or scheme != "never", scheme, split, steps


def _metaspace(document: dict[str, Any], pre_tokenizer: list[dict[str, Any]], refuse: Refuse) -> tuple[str, bool]:
    """The ``prepend_scheme`` and ``split`` of the file's Metaspace pre-tokenizer."""
    if len(pre_tokenizer) > 1 or pre_tokenizer[0].get("type") != "Metaspace":
        raise refuse(f"the pre_tokenizer {describe(document.get('pre_tokenizer'))} is not supported in a "
                     "SentencePiece-style file (hf_bpe reads Metaspace, or none)")
    step = pre_tokenizer[0]
    replacement = step.get("replacement", step.get("str_rep"))
    if replacement != SPACE:
        raise refuse(f"the Metaspace pre-tokenizer has replacement {replacement!r:.20}; hf_bpe reads '\u2581'")
    scheme = step.get("prepend_scheme")
    if scheme is None:  # files of tokenizers before 0.14
        scheme = "always" if step.get("add_prefix_space", True) else "never"
    if scheme not in ("always", "first", "never"):
        raise refuse(f"the Metaspace pre-tokenizer has prepend_scheme {scheme!r:.20}")
    return scheme, bool(step.get("split", True))


def _unused_name(texts: dict[str, int]) -> str:
    return next(text for text in ("<unk>", "<hf_bpe unk>", "<hf_bpe unk 2>") if text not in texts)


def _pieces(document: dict[str, Any], vocab: dict[str, int], byte_fallback: bool, refuse: Refuse,
            lossy: bool) -> tuple[list[Piece], set[str]]:
    """The pieces by id (their types; scores come later) and the texts of the special added tokens."""
    unk_token = document["model"].get("unk_token")
    by_id: dict[int, str] = {}
    for text, token_id in vocab.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise refuse(f"vocab entry {text!r:.80} has the id {token_id!r:.20}, not an integer >= 0")
        if token_id in by_id:
            raise refuse(f"vocab entries {by_id[token_id]!r:.80} and {text!r:.80} share the id {token_id}")
        by_id[token_id] = text
    added: dict[int, str] = {}
    for entry in document.get("added_tokens") or []:
        content, token_id = entry["content"], entry["id"]
        flags = [flag for flag in ("lstrip", "rstrip", "single_word") if entry.get(flag)]
        if flags and not lossy:
            raise refuse(f"added token {content!r} has {', '.join(flags)}, which hf_bpe's special tokens cannot "
                         "express; pass lossy=True to load it without")
        if not entry.get("special", False):
            raise refuse(f"added token {content!r} is not special: tokenizers decodes it as text, hf_bpe's "
                         "SentencePiece models decode added tokens to nothing")
        if entry.get("normalized", False) and document.get("normalizer") is not None:
            raise refuse(f"added token {content!r} has normalized = true and the file has a normalizer: tokenizers "
                         "matches it in the normalized text, hf_bpe in the text as given")
        if by_id.get(token_id, content) != content or added.get(token_id, content) != content:
            raise refuse(f"added token {content!r} has the id {token_id} of another token")
        if content in vocab and vocab[content] != token_id:
            raise refuse(f"added token {content!r} has id {token_id} but vocab gives it {vocab[content]}")
        added[token_id] = content
    by_id |= added
    size = max(by_id, default=-1) + 1
    holes = [token_id for token_id in range(size) if token_id not in by_id]
    if holes:
        raise refuse(f"no token has the id {holes[0]} ({len(holes)} such ids); hf_bpe's SentencePiece models number "
                     "their pieces without holes")
    byte_pieces = {f"<0x{byte:02X}>" for byte in range(256)}
    present = byte_pieces & set(vocab)
    if byte_fallback and len(present) < 256:
        missing = sorted(byte_pieces - present)
        raise refuse(f"byte_fallback is on but the byte pieces {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} "
                     "are missing: tokenizers emits <unk> for characters needing them, SentencePiece-style BPE "
                     "has all 256")
    pieces = []
    for token_id in range(size):
        text = by_id[token_id]
        if token_id in added:
            kind = UNKNOWN if text == unk_token else CONTROL
        elif text == unk_token:
            kind = UNKNOWN
        elif byte_fallback and text in byte_pieces:
            kind = BYTE
        else:
            kind = NORMAL
        pieces.append(Piece(text, 0.0, kind))
    return pieces, set(added.values())


def _merges(entries: list[Any], texts: dict[str, int], pieces: list[Piece], byte_fallback: bool,
            refuse: Refuse) -> list[tuple[str, str]]:
    merges = []
    for number, merge in enumerate(entries):
        pair = merge.split(" ", 1) if isinstance(merge, str) else merge
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(part, str) for part in pair):
            raise refuse(f"merge {number} is {merge!r:.80}; expected \"left right\" or [left, right]")
        left, right = pair
        for part in (left, right, left + right):
            if part not in texts:
                raise refuse(f"merge {number} ({left!r} {right!r}) names {part!r}, which the vocab lacks")
        kinds = {pieces[texts[part]].type for part in (left, right, left + right)}
        if kinds & {CONTROL, UNKNOWN} or (byte_fallback and BYTE in kinds):
            raise refuse(f"merge {number} ({left!r} {right!r}) joins a byte, unknown or added token, which only "
                         "tokenizers (starting from them) can do")
        merges.append((left, right))
    return merges


def _scores(pieces: list[Piece], merges: list[tuple[str, str]], split: bool) -> tuple[dict[str, float],
                                                                                     list[tuple[str, tuple[str, str]]]]:
    """Each normal piece's score: ``-1 - line`` of the pair that forms it, or below every line for
    pieces no text forms; and the pieces whose pair is not listed."""
    line: dict[tuple[str, str], int] = {}
    for number, (left, right) in enumerate(merges):
        if split and (SPACE in right or SPACE in left[1:]):
            continue  # Metaspace's words hold a ▁ only at their start: this pair never meets
        line.setdefault((left, right), number)
    floor = -2.0 - len(merges)
    scores: dict[str, float] = {}
    normal = sorted((piece.text for piece in pieces if piece.type == NORMAL), key=len)
    missing = []
    for text in normal:
        if len(text) == 1:
            scores[text] = 0.0
            continue
        scores[text] = 0.0  # the last join of its own text spells it
        pair = _last_merge(text, scores)
        if pair is None:
            scores[text] = floor
        elif pair in line:
            scores[text] = -1.0 - line[pair]
        else:
            scores[text] = floor
            missing.append((text, pair))
    return scores, missing


def _check_ignore_merges(spec: SentencePieceSpec, specials: set[str], refuse: Refuse) -> None:
    """``ignore_merges`` emits a word (the whole text, or each Metaspace word) that is a token as
    that token: the same as merging when every such token is one its own text forms."""
    formed = {text for text, _ in ((left + right, None) for left, right in merge_list(spec).merges)}
    always = spec.metaspace == "always" or (spec.metaspace is None and spec.add_dummy_prefix)
    odd = [piece.text for piece in spec.pieces
           if piece.text not in specials and piece.text not in formed and len(piece.text) > 1
           and (not always or piece.text.startswith(SPACE))
           and (not spec.metaspace_split or SPACE not in piece.text[1:])]
    if odd:
        raise refuse(f"model.ignore_merges is on and the pieces {', '.join(map(repr, odd[:5]))} are tokens that "
                     "merging their text does not form: tokenizers emits them whole, hf_bpe's SentencePiece "
                     "models merge")


def _check_with_tokenizers(loaded: BPE, document: dict[str, Any], refuse: Refuse) -> None:
    """Refuse the file unless ids and decoded text of the probe texts equal `tokenizers`'."""
    kinds = set(_kinds(document.get("decoder"), "decoders"))
    if kinds - _DECODERS:
        raise refuse(f"the decoder step {min(kinds - _DECODERS)!r} is not supported in a SentencePiece-style "
                     f"file (hf_bpe reads {', '.join(sorted(_DECODERS))})")
    try:
        theirs = Tokenizer.from_str(json.dumps(dict(document, post_processor=None, truncation=None, padding=None)))
    except Exception as error:  # noqa: BLE001 - whatever tokenizers raises, the file is refused with it
        raise refuse(f"tokenizers cannot read this file: {error}") from None
    spec = loaded.sentencepiece
    assert spec is not None
    texts = (list(split_probe_texts()[::5]) + probe_texts(300, seed=3)
             + _hf_sentencepiece.probe_texts(spec, 1500, seed=4))
    ours = loaded.encode_batch(texts, allowed_special="all")
    encodings = theirs.encode_batch(texts, add_special_tokens=False)
    for text, ids, encoding in zip(texts, ours, encodings):
        if ids != encoding.ids:
            raise refuse(f"hf_bpe cannot load this file exactly: {text!r:.80} encodes to {ids[:12]} here but to "
                         f"{encoding.ids[:12]} in tokenizers; please report this")
    decoded = theirs.decode_batch(ours, skip_special_tokens=True)
    for text, ids, expected in zip(texts, ours, decoded):
        if loaded.decode(ids) != expected:
            raise refuse(f"hf_bpe cannot decode as the decoder {describe(document.get('decoder'))}: the ids of "
                         f"{text!r:.80} decode to {loaded.decode(ids)!r:.80} here but to {expected!r:.80} in "
                         "tokenizers")
