"""Reading HF ``tokenizer.json`` files (byte-level BPE) into :class:`hf_bpe.BPE` models.

This is ``conversion.hf.load``; it lives apart from the writer only so the two could be written in
parallel. What is read, and what is refused with :class:`~hf_bpe.errors.TokenizerFileError`:

- ``model``: ``BPE`` with its ``vocab`` and ``merges`` (``"a b"`` strings or ``[a, b]`` pairs);
  ``ignore_merges`` becomes the whole-piece rule. Refused: ``byte_fallback``, ``dropout``,
  ``continuing_subword_prefix``, ``end_of_word_suffix`` (not byte-level BPE), and vocabularies
  lacking one of the 256 byte symbols (`tokenizers` silently drops such bytes).
- ``normalizer``: must be ``null``.
- ``pre_tokenizer``: ``ByteLevel`` with its built-in regex (GPT-2's pattern), or a ``Sequence`` of
  a ``Split`` (``Isolated``, not inverted) and a ``ByteLevel`` without regex, as written for tiktoken
  patterns. The ``Split`` regex is Oniguruma's; it is rewritten for fancy-regex where the two read
  it differently (``X{1,3}+`` is ``(?:X{1,3})+`` in Oniguruma; ``^``/``$`` match at lines), and text
  between its matches is kept as pieces, as `tokenizers` keeps it. ``add_prefix_space`` is refused.
- ``decoder``: ``ByteLevel``.
- ``added_tokens`` become special tokens (the ``special`` flag is not kept): `tokenizers` cuts all of
  them out of text, so ``tokenizer.encode(text, add_special_tokens=False)`` equals our
  ``encode(text, allowed_special="all")``. ``lstrip``/``rstrip``/``single_word`` are refused unless
  ``lossy=True`` (which drops them). A merge that names an added token can never apply there and is
  dropped.
- ``post_processor`` (BOS/EOS templates), truncation and padding are not part of the model.

Vocabulary entries not spelled in the byte-level alphabet and not added tokens (such as the
placeholders written for id holes) can never be produced and are left out, as ids without a token.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hf_bpe import BPE, patterns
from hf_bpe.byte_level import str_to_token
from hf_bpe.errors import InvalidVocabularyError, TokenizerFileError

BYTE_LEVEL_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""The regex of `tokenizers`' ``ByteLevel`` pre-tokenizer; it splits as GPT-2's pattern does."""


def load(tokenizer_json: str | os.PathLike[str], *, name: str | None = None, lossy: bool = False) -> BPE:
    """Load a byte-level BPE ``tokenizer.json``: ``encode(text, allowed_special="all")`` equals
    ``tokenizers.Tokenizer.from_file(path).encode(text, add_special_tokens=False).ids``.

    >>> import tempfile, os
    >>> from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    >>> vocab = {chr(c): i for i, c in enumerate(sorted(hf_alphabet()))} | {"ab": 256}
    >>> tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    >>> tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    >>> tokenizer.decoder = decoders.ByteLevel()
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> tokenizer.save(path)
    >>> load(path).encode("abc")
    [256, 66]
    """
    try:
        document = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TokenizerFileError(tokenizer_json, f"not valid JSON: {error}") from None
    try:
        return _load(document, tokenizer_json, name=name, lossy=lossy)
    except (KeyError, TypeError, AttributeError) as error:
        raise TokenizerFileError(tokenizer_json, f"not a tokenizer.json: missing or malformed {error}") from None


def hf_alphabet() -> set[int]:
    """The code points of the byte-level alphabet (``pre_tokenizers.ByteLevel.alphabet()``)."""
    from hf_bpe.byte_level import BYTE_TO_UNICODE

    return {ord(char) for char in BYTE_TO_UNICODE.values()}


def _load(document: dict[str, Any], path: str | os.PathLike[str], *, name: str | None, lossy: bool) -> BPE:
    def refuse(problem: str) -> TokenizerFileError:
        return TokenizerFileError(path, problem)

    model = document["model"]
    if model.get("type") != "BPE":
        raise refuse(f"the model is {model.get('type')!r}; hf_bpe reads BPE models only")
    if model.get("byte_fallback"):
        raise refuse("byte_fallback is on: this is a SentencePiece-style BPE, not byte-level BPE")
    for option in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise refuse(f"model.{option} = {model[option]!r} is not supported (not byte-level BPE)")
    if document.get("normalizer") is not None:
        raise refuse(f"the normalizer {_describe(document['normalizer'])} is not supported; byte-level BPE needs none")
    pattern = _pattern(document.get("pre_tokenizer"), refuse)
    decoder = document.get("decoder")
    if not _is_byte_level(decoder):
        raise refuse(f"the decoder {_describe(decoder)} is not supported; byte-level BPE decodes with ByteLevel")

    specials: dict[str, int] = {}
    for entry in document.get("added_tokens") or []:
        content, token_id = entry["content"], entry["id"]
        stripped = [flag for flag in ("lstrip", "rstrip", "single_word") if entry.get(flag)]
        if stripped and not lossy:
            raise refuse(
                f"added token {content!r} has {', '.join(stripped)}, which hf_bpe's special tokens cannot "
                "express; pass lossy=True to load it without"
            )
        if content in specials:
            raise refuse(f"added token {content!r} appears twice")
        specials[content] = token_id

    added_ids = set(specials.values())
    vocab: dict[bytes, int] = {}
    spelled_ids: dict[str, int] = {}
    for spelled, token_id in model["vocab"].items():
        if not isinstance(token_id, int) or isinstance(token_id, bool):
            raise refuse(f"vocab entry {spelled!r} has the id {token_id!r}, not an integer")
        if token_id in added_ids:
            if specials.get(spelled) != token_id:
                raise refuse(f"vocab entry {spelled!r} has id {token_id}, which is the id of another added token")
            continue
        if spelled in specials:
            raise refuse(f"added token {spelled!r} has id {specials[spelled]} but vocab gives it {token_id}")
        try:
            token = str_to_token(spelled)
        except KeyError:
            continue  # not byte-level text: ByteLevel input never forms it
        vocab[token] = token_id
        spelled_ids[spelled] = token_id

    merges: list[tuple[bytes, bytes]] = []
    for number, merge in enumerate(model.get("merges") or []):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        if left in specials or right in specials:
            continue  # the added-token matcher cuts this text out first: the merge can never apply
        missing = [part for part in (left, right) if part not in model["vocab"]]
        if missing:
            raise refuse(f"merge {number} ({left!r} {right!r}) names {missing[0]!r}, which the vocab lacks")
        if left not in spelled_ids or right not in spelled_ids:
            continue  # a token outside the byte-level alphabet: never formed, so never merged
        if left + right not in spelled_ids:
            raise refuse(f"merge {number} ({left!r} {right!r}) makes {left + right!r}, which the vocab lacks")
        merges.append((str_to_token(left), str_to_token(right)))

    ignore_merges = bool(model.get("ignore_merges", False))
    try:
        loaded = BPE.from_merges(vocab, merges, pattern, specials, ignore_merges=ignore_merges,
                                 name=name or Path(path).parent.name or "tokenizer")
    except InvalidVocabularyError as error:
        raise refuse(str(error)) from None
    except ValueError as error:  # the split pattern
        raise refuse(f"the split pattern cannot be used: {error}") from None
    if loaded.rank_rule_difference() is None:
        return BPE(vocab, pattern, specials, name=loaded.name)
    return loaded


def _describe(component: Any) -> str:
    if isinstance(component, dict):
        return repr(component.get("type"))
    return repr(component)


def _is_byte_level(component: Any) -> bool:
    if not isinstance(component, dict):
        return False
    if component.get("type") == "Sequence":
        parts = component.get("decoders") or component.get("pretokenizers") or []
        return len(parts) == 1 and _is_byte_level(parts[0])
    return component.get("type") == "ByteLevel"


def _pattern(pre_tokenizer: Any, refuse: Any) -> str:
    """Our split pattern for a byte-level pre-tokenizer."""
    steps = pre_tokenizer.get("pretokenizers", []) if isinstance(pre_tokenizer, dict) and \
        pre_tokenizer.get("type") == "Sequence" else [pre_tokenizer]
    if not steps or not _is_byte_level(steps[-1]):
        raise refuse(f"the pre-tokenizer {_describe(pre_tokenizer)} is not supported; byte-level BPE ends in ByteLevel")
    byte_level = steps[-1]
    if byte_level.get("add_prefix_space"):
        raise refuse("ByteLevel's add_prefix_space is not supported (it changes the text before splitting)")
    splits = steps[:-1]
    if not splits:
        if not byte_level.get("use_regex", True):
            raise refuse("ByteLevel without its regex and without a Split step: nothing splits the text")
        return patterns.GPT2
    if len(splits) != 1 or byte_level.get("use_regex", True):
        raise refuse("only one Split followed by ByteLevel without regex is supported")
    split = splits[0]
    # Removed + invert keeps the matches as pieces and drops the rest, as tiktoken (conversion.hf.save).
    drops_gaps = split.get("behavior") == "Removed" and split.get("invert") is True
    if split.get("type") != "Split" or not (drops_gaps or (split.get("behavior") == "Isolated" and not split.get("invert"))):
        raise refuse(f"the pre-tokenizer step {_describe(split)} is not supported (expected an Isolated Split)")
    regex = split.get("pattern", {}).get("Regex")
    if regex is None:
        raise refuse("a Split with a plain string pattern is not supported (expected a Regex)")
    if regex == BYTE_LEVEL_REGEX:
        return patterns.GPT2
    from conversion.hf import translate_pattern  # how conversion.hf.save writes the named patterns

    translated = oniguruma_to_fancy(regex)
    for named in (patterns.GPT2, patterns.CL100K, patterns.O200K):
        if translated == named or regex == translate_pattern(named):
            return named
    if drops_gaps:
        return translated
    # `tokenizers` keeps the text between matches as pieces; tiktoken's splitter drops it.
    return f"(?:{translated})|(?:(?!(?:{translated}))(?s:.))+"


def oniguruma_to_fancy(pattern: str) -> str:
    """Rewrite an Oniguruma (Ruby syntax) regex so fancy-regex reads it the same way.

    ``X{n,m}+`` repeats ``X{n,m}`` in Oniguruma (not possessive): it becomes ``(?:X{n,m})+``.
    ``^`` and ``$`` match at every line there: they become ``(?m:^)`` and ``(?m:$)``.

    >>> oniguruma_to_fancy(r"\\p{N}{1,3}+|\\s+$|[$^]")
    '(?:\\\\p{N}{1,3})+|\\\\s+(?m:$)|[$^]'
    """
    out: list[str] = []
    groups: list[int] = []
    atom: int | None = None
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            end = _escape_end(pattern, index)
            atom = len(out)
            out.append(pattern[index:end])
            index = end
        elif char == "[":
            end = _class_end(pattern, index)
            atom = len(out)
            out.append(pattern[index:end])
            index = end
        elif char == "(":
            groups.append(len(out))
            out.append(char)
            atom = None
            index += 1
        elif char == ")":
            atom = groups.pop() if groups else None
            out.append(char)
            index += 1
        elif char == "|":
            out.append(char)
            atom = None
            index += 1
        elif char in "^$":
            out.append(f"(?m:{char})")
            atom = None
            index += 1
        elif char == "{" and atom is not None and (interval_end := _interval_end(pattern, index)) is not None:
            if interval_end < len(pattern) and pattern[interval_end] == "+":
                repeated = "".join(out[atom:]) + pattern[index:interval_end]
                del out[atom:]
                out.append(f"(?:{repeated})+")
                interval_end += 1
            else:
                out.append(pattern[index:interval_end])
            atom = None
            index = interval_end
        else:
            atom = len(out) if char not in "*+?" else None
            out.append(char)
            index += 1
    return "".join(out)


def _interval_end(pattern: str, start: int) -> int | None:
    """Index just past ``{n}``, ``{n,}`` or ``{n,m}`` at ``start``, or None if it is not one."""
    close = pattern.find("}", start)
    if close < 0:
        return None
    body = pattern[start + 1 : close]
    low, _, high = body.partition(",")
    if low.isdigit() and (high == "" or high.isdigit()):
        return close + 1
    return None


def _escape_end(pattern: str, start: int) -> int:
    """Index just past the escape sequence starting at ``pattern[start] == '\\\\'``."""
    if start + 1 >= len(pattern):
        return len(pattern)
    kind = pattern[start + 1]
    if kind in "pPx" and start + 2 < len(pattern) and pattern[start + 2] == "{":
        close = pattern.find("}", start + 3)
        return len(pattern) if close < 0 else close + 1
    if kind in "pP" and start + 2 < len(pattern):
        return start + 3
    return start + 2


def _class_end(pattern: str, start: int) -> int:
    """Index just past the character class opening at ``pattern[start] == '['`` (classes nest)."""
    depth = 0
    index = start
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index = _escape_end(pattern, index)
            continue
        if char == "[":
            depth += 1
            index += 1
            if index < len(pattern) and pattern[index] == "^":
                index += 1
            if index < len(pattern) and pattern[index] == "]":
                index += 1
            continue
        if char == "]":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return len(pattern)
