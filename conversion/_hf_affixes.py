"""Byte-level ``tokenizer.json`` BPE models with ``continuing_subword_prefix`` and/or
``end_of_word_suffix`` (CLIP's ``</w>``; what ``BpeTrainer`` writes with either), read and written
as models whose symbols carry word affixes (:mod:`hf_bpe._word_affixes`).

Read with them: ``byte_fallback`` (a symbol the vocabulary lacks becomes the ``<0xXX>`` tokens of its
UTF-8 bytes, affixes included, when the vocabulary has them all), ``unk_token`` (the id other such
symbols become; without it they are left out, as `tokenizers` leaves them), ``fuse_unk`` and
``ignore_merges``. Refused by name: affixes with characters outside the byte-level alphabet, an
``unk_token`` the vocabulary lacks, and a merge whose token `tokenizers` cannot form (it refuses such
files too). ``byte_fallback`` files without a ``ByteLevel`` step are read as SentencePiece-style
files, which refuse the affixes.
"""

from __future__ import annotations

from typing import Any

from hf_bpe._byte_level import try_str_to_token
from hf_bpe._word_affixes import WordAffixes, from_affixed_merges, word_affixes
from hf_bpe.errors import InvalidVocabularyError
from hf_bpe.model import BPE

__all__ = ["bpe_settings", "built", "has_affixes", "reduced", "word_affixes_of"]

_AFFIXES = ("continuing_subword_prefix", "end_of_word_suffix")


def has_affixes(model: dict[str, Any]) -> bool:
    """Whether a byte-level ``tokenizer.json`` model takes this path: it sets either affix (``""``
    included, which is kept), or ``byte_fallback``, which `tokenizers`' own merge rule applies (a
    symbol the vocabulary lacks becomes its ``<0xXX>`` tokens).

    >>> has_affixes({"type": "BPE", "end_of_word_suffix": "</w>"}), has_affixes({"type": "BPE"})
    (True, False)
    >>> has_affixes({"type": "BPE", "byte_fallback": True})
    True
    """
    return any(model.get(key) is not None for key in _AFFIXES) or model.get("byte_fallback") is True


def word_affixes_of(model: dict[str, Any], refuse: Any) -> WordAffixes | None:
    """The affix settings of a ``tokenizer.json`` model, None when it has none; refused by name when
    one is not a string of the byte-level alphabet or ``unk_token`` / ``fuse_unk`` are malformed."""
    if not has_affixes(model):
        return None
    for key in (*_AFFIXES, "unk_token"):
        value = model.get(key)
        if not isinstance(value, str | None):
            raise refuse(f"model.{key} is {value!r:.60}; expected a string or null")
    for key in _AFFIXES:
        if model.get(key) and try_str_to_token(model[key]) is None:
            raise refuse(f"model.{key} = {model[key]!r} has characters outside the byte-level alphabet, which "
                         "hf_bpe does not read (its tokens then decode as UTF-8 text, not byte symbols)")
    flags = {key: model.get(key, False) for key in ("fuse_unk", "byte_fallback")}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise refuse(f"model.{key} is {value!r:.40}; expected true or false")
    return WordAffixes(model.get("continuing_subword_prefix"), model.get("end_of_word_suffix"), model.get("unk_token"),
                       flags["fuse_unk"], flags["byte_fallback"])


def _pair(merge: Any) -> list[Any] | None:
    pair = merge.split(" ", 1) if isinstance(merge, str) else merge
    return pair if isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair) else None


def _formed(left: str, right: str, cut: int) -> str | None:
    """The token `tokenizers` makes of a merge: ``left`` + ``right`` without its first ``cut`` bytes."""
    tail = right.encode()
    if len(tail) < cut:
        return None
    try:
        return (left.encode() + tail[cut:]).decode()
    except UnicodeDecodeError:
        return None


def built(model: dict[str, Any], pattern: Any, specials: dict[str, int], affixes: WordAffixes, name: str,
          refuse: Any) -> BPE:
    """The model of a ``tokenizer.json``'s vocabulary and merges with ``affixes``."""
    spelled_vocab = model.get("vocab")
    if not isinstance(spelled_vocab, dict):
        raise refuse(f"model.vocab is {type(spelled_vocab).__name__}, not a mapping of tokens to ids")
    vocab: dict[bytes, int] = {}
    for spelled, token_id in spelled_vocab.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool):
            raise refuse(f"vocab entry {spelled!r} has the id {token_id!r}, not an integer")
        token = try_str_to_token(spelled)
        if token is not None:  # else not byte-level text: no symbol or merge ever forms it
            vocab[token] = token_id
    cut = len((affixes.continuing_subword_prefix or "").encode())
    merges: list[tuple[bytes, bytes]] = []
    for number, merge in enumerate(model.get("merges") or []):
        pair = _pair(merge)
        if pair is None:
            raise refuse(f"merge {number} is {merge!r:.80}; expected \"left right\" or [left, right]")
        missing = [part for part in pair if part not in spelled_vocab]
        formed = _formed(pair[0], pair[1], cut)
        if missing:
            raise refuse(f"merge {number} ({pair[0]!r} {pair[1]!r}) names {missing[0]!r}, which the vocab lacks")
        if formed is None:
            raise refuse(f"merge {number} ({pair[0]!r} {pair[1]!r}): cutting the {cut} bytes of continuing_subword_prefix "
                         "off its right token leaves no text (it is shorter than the prefix, or the cut splits a "
                         "character); tokenizers fails on the file")
        if formed not in spelled_vocab:
            raise refuse(f"merge {number} ({pair[0]!r} {pair[1]!r}) forms {formed!r}, which the vocab lacks "
                         "(tokenizers refuses the file)")
        left, right = (try_str_to_token(part) for part in pair)
        if left is not None and right is not None:
            merges.append((left, right))
    try:
        return from_affixed_merges(BPE, vocab, merges, pattern, specials, affixes,
                                   ignore_merges=bool(model.get("ignore_merges", False)), name=name)
    except InvalidVocabularyError as error:
        raise refuse(str(error)) from None
    except ValueError as error:  # the split pattern
        raise refuse(f"the split pattern cannot be used: {error}") from None


def reduced(model: dict[str, Any], added_ids: dict[str, int], merges: int) -> dict[str, Any]:
    """``model`` cut to its first ``merges`` merges, the tokens they use and form, every symbol of one
    character (with its affixes), the byte fallback tokens (``<0xXX>``), the unknown token and the added
    tokens' entries (as ``conversion.hf._reduced`` cuts models without affixes)."""
    vocab, listed = model["vocab"], model.get("merges") or []
    prefix, suffix = model.get("continuing_subword_prefix") or "", model.get("end_of_word_suffix") or ""

    def bare(spelled: str) -> str:
        spelled = spelled[len(prefix):] if prefix and spelled.startswith(prefix) else spelled
        return spelled[:-len(suffix)] if suffix and spelled.endswith(suffix) else spelled

    byte_tokens = {f"<0x{byte:02X}>" for byte in range(256)} if model.get("byte_fallback") else set()
    kept = {spelled: token_id for spelled, token_id in vocab.items() if len(bare(spelled)) == 1 or spelled in byte_tokens}
    kept.update(added_ids)
    if model.get("unk_token") in vocab:
        kept[model["unk_token"]] = vocab[model["unk_token"]]
    cut = len(prefix.encode())
    kept_merges = []
    for merge in listed[:merges]:
        pair = _pair(merge)
        formed = _formed(pair[0], pair[1], cut) if pair is not None else None
        if pair is not None and all(part in vocab for part in pair) and formed in vocab:
            kept_merges.append(merge)
            kept.update({spelled: vocab[spelled] for spelled in (*pair, formed)})
    return dict(model, vocab=kept, merges=kept_merges)


def bpe_settings(model: BPE) -> dict[str, Any]:
    """The keyword arguments of ``tokenizers.models.BPE`` that write ``model``'s affixes back as its file
    had them (none for a model without affixes)."""
    affixes = word_affixes(model)
    if affixes is None:
        return {}
    settings = {key: value for key, value in (("continuing_subword_prefix", affixes.continuing_subword_prefix),
                                              ("end_of_word_suffix", affixes.end_of_word_suffix),
                                              ("unk_token", affixes.unk_token)) if value is not None}
    return settings | {"fuse_unk": affixes.fuse_unk, "byte_fallback": affixes.byte_fallback}
