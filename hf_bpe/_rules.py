"""Which merge rule a model's vocabulary can be written with: the questions converters ask before
writing a format whose rule differs from the model's.

tiktoken's files (and tekken) apply the rank rule: any pair whose bytes form a token merges, lowest id
first, and a piece that is a token is emitted whole. GPT-2's files and HF's BPE apply a merges list in
order (the whole-piece rule only with ``ignore_merges``). The core proves, for a given model, that the
other rule encodes every text the same, or finds where it does not.

>>> import hf_bpe, hf_bpe._rules
>>> vocab = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"bc": 257, b"abc": 258}
>>> listed = hf_bpe.BPE.from_merges(vocab, [(b"a", b"b"), (b"ab", b"c")], "gpt2")
>>> hf_bpe._rules.rank_rule_difference(listed)
"the bytes of b'bc' merge to b'b' + b'c', a pair no merge joins; the rank rule would join them ..."
>>> hf_bpe._rules.merge_rule_difference(hf_bpe.get_encoding("gpt2"), ignore_merges=False) is None
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hf_bpe import patterns
from hf_bpe._word_affixes import word_affixes
from hf_bpe.errors import ConversionError
from hf_bpe.model import BPE, NEVER_IN_UTF8, MissingBytes, missing_bytes, missing_bytes_rule

__all__ = [
    "check_has_text_bytes",
    "check_not_sentencepiece",
    "from_spelled_merges",
    "from_tokenizer_json",
    "ignore_merges",
    "merge_pieces",
    "merge_rule_difference",
    "missing_bytes_difference",
    "rank_rule_difference",
    "read_tokenizer_json",
]


def rank_rule_difference(model: BPE) -> str | None:
    """For a merges-list model: how tiktoken's rank rule (ranks = these ids) would encode some text
    differently, or ``None`` when it provably encodes all text the same (then the model can be
    written as a tiktoken file). ``None`` for rank models; SentencePiece models always differ."""
    if model.kind == "sentencepiece":
        return "a SentencePiece model merges characters by piece score, not bytes by rank"
    return model._core.rank_rule_difference()  # the model layer's own core


def from_spelled_merges(
    vocab: Mapping[str, Any],
    merges: Sequence[Any],
    pattern: str | patterns.Split | Sequence[patterns.Step],
    special_tokens: dict[str, int],
    *,
    ignore_merges: bool,
    name: str | None,
) -> BPE | None:
    """A merges-list model read by the core straight from a byte-level ``tokenizer.json``'s
    ``model.vocab`` (tokens spelled in GPT-2's byte-to-unicode alphabet) and ``model.merges``, made
    the rank model it equals when the core proves that (see :func:`rank_rule_difference`) and no
    byte is missing. ``None`` when the file holds anything irregular (ids that are not ints, added
    tokens elsewhere in the vocabulary, merges naming unknown tokens or forming none): the caller's
    own reading then says what. Tokens spelled outside the alphabet, and merges naming them or an
    added token, are left out, as byte-level input never forms them.

    >>> vocab = {"a": 0, "b": 1, "ab": 2, "<s>": 3}
    >>> model = from_spelled_merges(vocab, ["a b"], "gpt2", {"<s>": 3}, ignore_merges=False, name="x")
    >>> model is None  # the vocabulary lacks most bytes: the rank rule is not proven
    False
    >>> model.kind, model.encode("ab<s>", allowed_special="all")
    ('merges', [2, 3])
    """
    return BPE._from_spelled_merges(vocab, merges, pattern, special_tokens, ignore_merges=ignore_merges, name=name)


def read_tokenizer_json(data: bytes) -> tuple[str, Any] | None:
    """A byte-level ``tokenizer.json``'s bytes read in two parts by the core: the document without
    ``model.vocab`` and ``model.merges`` as JSON text, and those two read (for
    :func:`from_tokenizer_json`; ``len`` of it is the vocabulary's size, ``ids_of(tokens)`` the ids
    the vocabulary gives tokens, ``reduced(added_ids, merges)`` the vocabulary and merges of a
    reduced copy). ``None`` when the file is not regular: not UTF-8 or JSON, no single ``model``
    holding one ``vocab`` and one ``merges``, an id that is not an integer from 0 to 2**31 - 1, a
    merge that is neither ``"left right"`` nor ``[left, right]``; the caller's own reading then says
    what is wrong.

    >>> rest, spelled = read_tokenizer_json(b'{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, '
    ...                                     b'"merges": ["a b"]}, "decoder": null}')
    >>> rest, len(spelled), spelled.ids_of(["ab", "c"])
    ('{"model":{"type":"BPE"},"decoder":null}', 3, [2, None])
    >>> read_tokenizer_json(b'{"model": {"vocab": {"a": 1.5}, "merges": []}}') is None
    True
    """
    return BPE._read_tokenizer_json(data)


def from_tokenizer_json(
    spelled: Any,
    pattern: str | patterns.Split | Sequence[patterns.Step],
    special_tokens: dict[str, int],
    *,
    ignore_merges: bool,
    name: str | None,
) -> BPE | None:
    """:func:`from_spelled_merges` of the vocabulary and merges :func:`read_tokenizer_json` read:
    the same model, or ``None`` for the same irregular files (and for a token written twice in
    ``model.vocab``).

    >>> _, spelled = read_tokenizer_json(b'{"model": {"vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3}, "merges": [["a", "b"]]}}')
    >>> model = from_tokenizer_json(spelled, "gpt2", {"<s>": 3}, ignore_merges=False, name="x")
    >>> model.kind, model.encode("ab<s>", allowed_special="all")
    ('merges', [2, 3])
    """
    return BPE._from_tokenizer_json(spelled, pattern, special_tokens, ignore_merges=ignore_merges, name=name)


def merge_rule_difference(model: BPE, ignore_merges: bool) -> str | None:
    """How ``model.merges`` applied as a merges list (HF's BPE; ``ignore_merges`` as given) would
    encode some text differently from ``model``, or ``None`` when it provably does not."""
    if model.kind == "sentencepiece":
        return "a SentencePiece model merges characters by piece score, not bytes by a list"
    return model._core.merge_rule_difference(bool(ignore_merges))  # the model layer's own core


def missing_bytes_difference(model: BPE, rule: MissingBytes) -> str | None:
    """How dropping the single bytes ``model``'s vocabulary lacks by ``rule`` (``"before merging"``,
    as `tokenizers` does, or ``"after merging"``, as llama.cpp does) would encode some text differently
    from ``model``, or ``None`` when it provably does not: the model lacks no byte UTF-8 text uses,
    drops them by ``rule`` already, or no listed merge joins a symbol ending in a byte that can come
    right before a missing one with a symbol starting with a byte that can come right after one (then
    no merge crosses a missing byte either way, and both rules merge each run of present bytes alone).

    >>> import hf_bpe
    >>> vocab = {bytes([b]): b for b in range(256) if b != ord("q")} | {b"ab": 256}
    >>> model = hf_bpe.BPE.from_merges(vocab, [(b"a", b"b")], "gpt2", drop_missing_bytes=True)
    >>> missing_bytes_difference(model, "after merging")
    "it lacks the byte 0x71, which UTF-8 text uses, and drops it before merging: the merge b'a' + b'b' ..."
    >>> missing_bytes_difference(model, "before merging") is None
    True
    """
    lacking = [byte for byte in missing_bytes(model) if byte not in NEVER_IN_UTF8]
    own = missing_bytes_rule(model)
    if not lacking or own == rule:
        return None
    absent = set(missing_bytes(model))
    before = {byte for byte in range(256) if byte not in absent and any(_may_follow(byte, gap) for gap in lacking)}
    after = {byte for byte in range(256) if byte not in absent and any(_may_follow(gap, byte) for gap in lacking)}
    for left, right in model.merges:
        if left and right and left[-1] in before and right[0] in after:
            shown = ", ".join(f"0x{byte:02X}" for byte in lacking[:12]) + (" ..." if len(lacking) > 12 else "")
            return (f"it lacks the byte{'s' if len(lacking) > 1 else ''} {shown}, which UTF-8 text uses, and drops "
                    f"{'them' if len(lacking) > 1 else 'it'} {own}: the merge {left!r} + {right!r} joins what such a "
                    f"byte may stand between when it is dropped before merging, never when it is dropped after "
                    f"(a symbol no merge joins)")
    return None


def _may_follow(first: int, second: int) -> bool:
    """Whether the byte ``second`` may come right after ``first`` in UTF-8 text (a superset: lead bytes'
    narrower ranges of second bytes are ignored)."""
    if first in NEVER_IN_UTF8 or second in NEVER_IN_UTF8:
        return False
    if first < 0x80:  # a character ends: another starts
        return second < 0x80 or second >= 0xC0
    if first >= 0xC0:  # a lead byte: a continuation byte follows
        return 0x80 <= second < 0xC0
    return True  # a continuation byte: another, or a character starts


def check_has_text_bytes(model: BPE, target: str, consequence: str) -> None:
    """Raise :class:`~hf_bpe.errors.ConversionError` when ``model``'s vocabulary lacks single bytes
    UTF-8 text uses, which ``target`` cannot drop from text as the model does (``consequence`` says what
    its library does instead); no lossy mode writes them."""
    lacking = [byte for byte in missing_bytes(model) if byte not in NEVER_IN_UTF8]
    if lacking:
        shown = ", ".join(f"0x{byte:02X}" for byte in lacking[:12]) + (" ..." if len(lacking) > 12 else "")
        raise ConversionError(
            f"{target} cannot hold {model!r}: its vocabulary lacks the single bytes {shown}, which UTF-8 text uses "
            f"and the model drops {missing_bytes_rule(model)}, while {consequence}; keep it as a tokenizer.json "
            "(conversion.hf.save) or GGUF file (conversion.gguf.save), which drop them as tokenizers and llama.cpp do"
        )


def check_not_sentencepiece(model: BPE, target: str, rule: str) -> None:
    """Raise :class:`~hf_bpe.errors.ConversionError` when ``model`` is a SentencePiece model, which no
    byte-level format (``target``, merging bytes by ``rule``) can hold, not even approximately."""
    if model.kind == "sentencepiece":
        raise ConversionError(
            f"{model!r} is a SentencePiece model and cannot be written as {target}: it merges characters "
            f"by piece score after normalizing (dummy prefix, spaces as U+2581, byte fallback), while {rule} "
            "after a split pattern; no lossy mode maps one onto the other"
        )


def check_no_word_affixes(model: BPE, target: str) -> None:
    """Raise :class:`~hf_bpe.errors.ConversionError` when ``model``'s symbols carry word affixes
    (`tokenizers`' ``continuing_subword_prefix`` / ``end_of_word_suffix``), which only ``tokenizer.json``
    and hf_bpe's own model file hold: ``target`` merges plain bytes."""
    affixes = word_affixes(model)
    if affixes is not None and affixes.continuing_subword_prefix is None and affixes.end_of_word_suffix is None:
        raise ConversionError(
            f"{model!r} cannot be written as {target}: it merges by tokenizers' rule with byte_fallback (a symbol "
            f"its vocabulary lacks becomes <0xXX> tokens), which {target} cannot say; save it as tokenizer.json instead"
        )
    if affixes is not None:
        raise ConversionError(
            f"{model!r} cannot be written as {target}: its symbols carry word affixes (continuing_subword_prefix "
            f"{affixes.continuing_subword_prefix!r}, end_of_word_suffix {affixes.end_of_word_suffix!r}), which "
            f"{target} cannot say (it merges plain bytes); save it as tokenizer.json instead"
        )


def check_no_special_token_rules(model: BPE, target: str, *, lossy: bool) -> None:
    """Raise :class:`~hf_bpe.errors.ConversionError` when ``model``'s special tokens have
    `tokenizers`' added-token rules (:func:`hf_bpe.model.with_special_token_rules`), which ``target``
    cannot hold, unless ``lossy`` (the file then matches them without)."""
    if model._rules and not lossy:
        raise ConversionError(
            f"{target} cannot hold the special-token rules of {model!r} ({', '.join(map(repr, sorted(model._rules)[:5]))}: "
            "lstrip, rstrip, single_word or normalized); keep it as tokenizer.json (conversion.hf.save), or pass "
            "lossy=True to write the tokens without them"
        )


def ignore_merges(model: BPE) -> bool | None:
    """Whether ``model`` emits a piece that is a token whole: always for rank models, as configured
    for merges lists (HF's ``ignore_merges``), ``None`` for SentencePiece models.

    >>> import hf_bpe
    >>> ignore_merges(hf_bpe.get_encoding("gpt2"))
    True
    """
    return model._core.ignore_merges  # type: ignore[no-any-return]


def merge_pieces(model: BPE, pieces: Iterable[bytes], *, num_threads: int | None = None) -> list[list[int] | None]:
    """What ``model``'s merge loop alone makes of each piece, in parallel: no split pattern, no
    whole-piece rule, no special tokens. For a SentencePiece model a piece is normalized text
    as UTF-8 (spaces as ``▁``, no dummy prefix added) and bytes that are not UTF-8 give ``None``.

    A token that the loop forms inside a longer piece, it forms from its own bytes alone, so
    whether a token can appear in any encoding follows from this loop (see :mod:`hf_bpe.audit`).

    >>> import hf_bpe
    >>> enc = hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256, b"abcd": 257}, "gpt2")
    >>> enc.encode_ordinary("abcd"), merge_pieces(enc, [b"abcd", b"ab ab"])
    ([257], [[256, 99, 100], [256, 32, 256]])
    """
    if isinstance(pieces, (bytes, str)):
        raise TypeError("merge_pieces expects a list of bytes, got a single piece")
    return model._core.merge_pieces([bytes(piece) for piece in pieces], num_threads)  # type: ignore[no-any-return]
