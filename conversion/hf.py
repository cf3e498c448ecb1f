"""Hugging Face ``tokenizer.json`` (the `tokenizers` library's one-file format).

:func:`save` writes a ``tokenizer.json`` with which `tokenizers` (and so transformers'
``TokenizersBackend``) gives exactly our ids; :func:`load` (in ``_hf_load``) reads one. What
makes the written file exact:

- **Pattern.** tiktoken's split regexes are fancy-regex's; `tokenizers` runs Oniguruma (Ruby
  syntax), which reads some of it differently (``\\p{N}{1,3}+`` is not possessive there; ``$`` and
  ``^`` match at every line). :func:`translate_pattern` rewrites that. Text the pattern does not
  match is dropped, as tiktoken drops it (``Split`` with ``Removed`` and ``invert``); the named
  patterns match all text, and are written as the usual ``Isolated`` split.
- **Whole-piece rule.** ``ignore_merges`` as the model has it (always, for rank models).
- **Merges.** A rank table has none; the core recovers them and proves the list encodes as the
  ranks do, else :func:`recover_merges` gives a list that does for any rank table. Merges-list
  models (GPT-2 files, ``tokenizer.json``) keep theirs. SentencePiece models are refused.
- **Ids.** `tokenizers` numbers added tokens that are not in the model's vocabulary consecutively
  after it, whatever ids the file says. So every id below the last run of consecutive added tokens
  lives in the model vocabulary: holes get placeholder entries (spelled with a space, which no
  byte-level piece contains, so they can never be produced) and earlier special tokens are entered
  under their own text.

Where the pattern is not one of the named ones, :func:`build_tokenizer` encodes a set of probe
texts with both and refuses (:class:`~hf_bpe.errors.ConversionError`) on any difference.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

from conversion._hf_load import load  # the reader, written alongside this writer
from hf_bpe import BPE, patterns
from hf_bpe._io import atomic_write
from hf_bpe.byte_level import BYTE_TO_UNICODE
from hf_bpe.errors import ConversionError, InvalidVocabularyError

__all__ = [
    "ConversionError",
    "build_tokenizer",
    "load",
    "probe_texts",
    "recover_merges",
    "save",
    "translate_pattern",
]

PLACEHOLDER = "<unused id {id}>"
"""Vocabulary entry for an id the model does not use (never produced: it contains a space)."""


_SPELLING = dict(BYTE_TO_UNICODE)


def _spell(token: bytes) -> str:
    """Token bytes in GPT-2's byte-to-unicode alphabet (``hf_bpe.byte_level.token_to_str``, faster)."""
    return token.decode("latin-1").translate(_SPELLING)


# ------------------------------------------------------------------------------------- pattern

_QUANTIFIER = re.compile(r"\*|\+|\?|\{\d+(?:,\d*)?\}")
_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


def translate_pattern(pattern: str) -> str:
    r"""Rewrite a split regex for Oniguruma, the engine of `tokenizers`, keeping its meaning.

    tiktoken's regexes are fancy-regex's; `tokenizers` compiles them with Oniguruma's Ruby syntax.
    Possessive quantifiers become atomic groups (Ruby reads ``X{1,3}+`` as ``(?:X{1,3})+``); ``^`` and
    ``$`` become ``\A`` and ``\z`` (Ruby anchors them at every line) unless the ``m`` flag asks for
    that; and flags are renamed (Ruby's ``m`` is fancy-regex's ``s``, "dot matches newline").

    >>> translate_pattern(r"\p{N}{1,3}+|\s++$|[$^]|(?s:.)")
    '(?>\\p{N}{1,3})|(?>\\s+)\\z|[$^]|(?m:.)'
    """
    out: list[str] = []
    groups: list[tuple[int, bool]] = []  # where each open group starts in `out`, and the m flag outside it
    multiline = False
    atom: int | None = None  # where the last quantifiable item starts in `out`
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            end = _escape_end(pattern, i)
            atom = len(out)
            out.append(pattern[i:end])
            i = end
        elif char == "[":
            end = _class_end(pattern, i)
            atom = len(out)
            out.append(pattern[i:end])
            i = end
        elif char == "(" and (flags := _FLAGS.match(pattern, i)):
            on, off, kind = flags.group(1), flags.group(2) or "", flags.group(3)
            inner = (multiline or "m" in on) and "m" not in off
            ruby_on, ruby_off = _ruby_flags(on), _ruby_flags(off)
            written = f"(?{ruby_on}{'-' + ruby_off if ruby_off else ''}"
            if kind == ":":
                groups.append((len(out), multiline))
                out.append(written + ":")
            elif written != "(?":
                out.append(written + ")")
            multiline = inner
            atom = None
            i = flags.end()
        elif char == "(":
            groups.append((len(out), multiline))
            out.append(char)
            atom = None
            i += 1
        elif char == ")":
            atom, multiline = groups.pop() if groups else (None, multiline)
            out.append(char)
            i += 1
        elif char == "|":
            out.append(char)
            atom = None
            i += 1
        elif char in "$^":
            out.append(char if multiline else r"\z" if char == "$" else r"\A")
            atom = len(out) - 1
            i += 1
        elif (match := _QUANTIFIER.match(pattern, i)) and atom is not None:
            end = match.end()
            if end < len(pattern) and pattern[end] == "+":  # possessive: X{..}+ -> (?>X{..})
                quantified = "".join(out[atom:]) + match.group()
                del out[atom:]
                out.append(f"(?>{quantified})")
                end += 1
            else:
                out.append(match.group())
                if end < len(pattern) and pattern[end] == "?":  # lazy
                    out.append("?")
                    end += 1
            i = end
        else:
            atom = len(out)
            out.append(char)
            i += 1
    return "".join(out)


def _ruby_flags(flags: str) -> str:
    """fancy-regex inline flags as Ruby's: ``s`` is Ruby's ``m``; ``m`` is how Ruby always is."""
    return "".join("m" if flag == "s" else flag for flag in flags if flag != "m")


def _escape_end(pattern: str, start: int) -> int:
    """Index just past the escape sequence starting at ``pattern[start] == '\\'``."""
    if start + 1 >= len(pattern):
        return len(pattern)
    kind = pattern[start + 1]
    if kind in "pPx" and start + 2 < len(pattern) and pattern[start + 2] == "{":
        close = pattern.find("}", start + 3)
        return len(pattern) if close < 0 else close + 1
    if kind in "pP" and start + 2 < len(pattern):  # \pL
        return start + 3
    return start + 2


def _class_end(pattern: str, start: int) -> int:
    """Index just past the character class opening at ``pattern[start] == '['`` (classes nest)."""
    depth = 0
    i = start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i = _escape_end(pattern, i)
            continue
        if char == "[":
            depth += 1
            i += 1
            if i < len(pattern) and pattern[i] == "^":
                i += 1
            if i < len(pattern) and pattern[i] == "]":  # a leading ']' is literal
                i += 1
            continue
        if char == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(pattern)


# -------------------------------------------------------------------------------------- merges


def recover_merges(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merge list of a rank table, in rank order.

    A token's merge is the pair BPE reaches when it runs on the token's own bytes with every other
    token, stopping at two parts. If tiktoken ever forms the token by merging, it merges exactly
    this pair: no merge reaches outside the token's bytes before it forms, so they merge as they do
    alone. For vocabularies whose tokens rank after their parts (trained ones, tiktoken's) the steps
    all use lower ranks: minbpe's ``recover_merges``. A token that never gets down to two parts is
    reachable only as a whole piece and has no merge.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
    >>> recover_merges(ranks)
    [(b'a', b'b'), (b'ab', b'c')]
    """
    merges: list[tuple[int, bytes, bytes]] = []
    for token, rank in ranks.items():
        if len(token) < 2:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:  # (so no pair joins into the token itself)
            best_index, best_rank = -1, None
            for index in range(len(parts) - 1):
                pair_rank = ranks.get(parts[index] + parts[index + 1])
                if pair_rank is not None and (best_rank is None or pair_rank < best_rank):
                    best_index, best_rank = index, pair_rank
            if best_index < 0:
                break
            parts[best_index : best_index + 2] = [parts[best_index] + parts[best_index + 1]]
        if len(parts) == 2:
            merges.append((rank, parts[0], parts[1]))
    merges.sort()
    return [(left, right) for _, left, right in merges]


# ----------------------------------------------------------------------------------- tokenizer


def build_tokenizer(
    model: BPE,
    *,
    added_tokens: Mapping[int, AddedToken | str] | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
    add_bos_token: bool = False,
    add_eos_token: bool = False,
    merges: Sequence[tuple[bytes, bytes]] | None = None,
    check: bool | None = None,
) -> Tokenizer:
    """A `tokenizers.Tokenizer` that encodes and decodes exactly as ``model``.

    ``added_tokens`` maps ids to extra tokens (as transformers' ``added_tokens_decoder``); the
    model's special tokens are added as special tokens unless listed there. ``add_bos_token`` /
    ``add_eos_token`` put ``bos_token`` / ``eos_token`` around each sequence (a post-processor).
    ``merges`` skips :func:`recover_merges` when the caller has them. ``check`` encodes
    :func:`probe_texts` with both and raises :class:`ConversionError` on any difference; by default
    only when the split pattern is not one of the named ones (those are proven by the test suite).
    """
    if not isinstance(model, BPE):
        raise TypeError(f"build_tokenizer expects an hf_bpe.BPE, got {type(model).__name__}")
    if model.kind == "sentencepiece":
        raise ConversionError(
            f"{model!r} is a SentencePiece model: it merges characters by piece score after its own "
            "normalization, which a byte-level tokenizer.json cannot express; keep it as a .model "
            "(conversion.sentencepiece)"
        )
    ranks = model.mergeable_ranks
    tokens = _added_token_table(model, ranks, added_tokens or {})
    vocab = {_spell(token): rank for token, rank in ranks.items()}

    # Ids from `first_appended` on are consecutive added tokens that `tokenizers` numbers itself;
    # every smaller id must be in the model vocabulary to keep its number.
    rank_ids = set(ranks.values())
    first_appended = max(rank_ids | tokens.keys(), default=-1) + 1
    while first_appended - 1 in tokens and first_appended - 1 not in rank_ids:
        first_appended -= 1
    for token_id in range(first_appended):
        if token_id in tokens:
            content = tokens[token_id].content
            owner = vocab.get(content)
            if owner is not None and owner != token_id:
                raise ConversionError(
                    f"added token {content!r} (id {token_id}) is spelled like ordinary token {owner}; "
                    "tokenizer.json cannot give one text two ids"
                )
            vocab[content] = token_id
        elif token_id not in rank_ids:
            vocab[PLACEHOLDER.format(id=token_id)] = token_id
    proven = True
    if merges is None:
        merges, proven = _merges(model, ranks)
    bpe = models.BPE(
        vocab=vocab,
        merges=[(_spell(left), _spell(right)) for left, right in merges],
        fuse_unk=False,
        byte_fallback=False,
        ignore_merges=bool(model.ignore_merges),
    )
    tokenizer = Tokenizer(bpe)
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            _split(model.pattern),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    for token_id in sorted(tokens):
        token = tokens[token_id]
        if token.special:
            tokenizer.add_special_tokens([token])
        else:
            tokenizer.add_tokens([token])
        if tokenizer.token_to_id(token.content) != token_id:
            raise ConversionError(
                f"tokenizers numbered added token {token.content!r} {tokenizer.token_to_id(token.content)}, "
                f"not {token_id}"
            )
    tokenizer.post_processor = _post_processor(tokenizer, bos_token, eos_token, add_bos_token, add_eos_token)
    if check if check is not None else not proven or patterns.name_of(model.pattern) is None:
        _check_same_ids(model, tokenizer)
    return tokenizer


def _merges(model: BPE, ranks: Mapping[bytes, int]) -> tuple[list[tuple[bytes, bytes]], bool]:
    """The merges list to write and whether the core proved it encodes as ``model``: a merges-list
    model's own; for a rank model the core's recovered list when it proves that equal (the usual
    case), else :func:`recover_merges`'s."""
    if model.kind == "merges":
        return model.merges, True
    if model.merge_rule_difference(ignore_merges=True) is None:
        return model.merges, True
    return recover_merges(ranks), False


def _split(pattern: str) -> pre_tokenizers.Split:
    """The Split step: pieces are the pattern's matches; text between them is dropped (tiktoken).
    The named patterns match every character, so they take the conventional ``Isolated`` form."""
    regex = Regex(translate_pattern(pattern))
    if patterns.name_of(pattern) is not None:
        return pre_tokenizers.Split(regex, behavior="isolated", invert=False)
    return pre_tokenizers.Split(regex, behavior="removed", invert=True)


def save(
    model: BPE,
    path: str | os.PathLike[str],
    *,
    added_tokens: Mapping[int, AddedToken | str] | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
    add_bos_token: bool = False,
    add_eos_token: bool = False,
    merges: Sequence[tuple[bytes, bytes]] | None = None,
    check: bool | None = None,
) -> Path:
    """Write ``model`` as a ``tokenizer.json`` (atomically); arguments as :func:`build_tokenizer`.

    >>> import conversion.hf, hf_bpe, tempfile, os, tokenizers
    >>> model = hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, "gpt2",
    ...                    special_tokens={"<|end|>": 258})
    >>> path = conversion.hf.save(model, os.path.join(tempfile.mkdtemp(), "tokenizer.json"))
    >>> tokenizers.Tokenizer.from_file(str(path)).encode("abc<|end|>").ids
    [256, 99, 258]
    """
    tokenizer = build_tokenizer(
        model,
        added_tokens=added_tokens,
        bos_token=bos_token,
        eos_token=eos_token,
        add_bos_token=add_bos_token,
        add_eos_token=add_eos_token,
        merges=merges,
        check=check,
    )
    return atomic_write(path, tokenizer.to_str(pretty=True))


def _added_token_table(
    model: BPE, ranks: dict[bytes, int], added_tokens: Mapping[int, AddedToken | str]
) -> dict[int, AddedToken]:
    """Id -> AddedToken for the model's special tokens and the caller's added tokens, validated."""
    table: dict[int, AddedToken] = {
        token_id: AddedToken(
            text, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False
        )
        for text, token_id in model.special_tokens.items()
    }
    spelled = {rank: _spell(token) for token, rank in ranks.items()}
    for token_id, token in added_tokens.items():
        if isinstance(token, str):
            token = AddedToken(token, special=False, normalized=True)
        if not isinstance(token_id, int) or token_id < 0:
            raise InvalidVocabularyError(
                f"added token {token.content!r} has id {token_id!r}; ids are ints >= 0"
            )
        if token_id in spelled and spelled[token_id] != token.content:
            raise InvalidVocabularyError(
                f"added token {token.content!r} has id {token_id}, which is the id of the ordinary token "
                f"{spelled[token_id]!r}; give the added token an id of its own"
            )
        table[token_id] = token
    contents: dict[str, int] = {}
    for token_id, token in table.items():
        if token.content in contents:
            raise InvalidVocabularyError(
                f"added token {token.content!r} has two ids, {contents[token.content]} and {token_id}"
            )
        contents[token.content] = token_id
    return table


def _post_processor(
    tokenizer: Tokenizer, bos_token: str | None, eos_token: str | None, add_bos: bool, add_eos: bool
) -> processors.TemplateProcessing:
    """BOS/EOS around each sequence, as transformers' ``TokenizersBackend.update_post_processor``."""
    pieces: list[tuple[str, str]] = []  # (role, token)
    specials: list[tuple[str, int]] = []
    for add, role, token in ((add_bos, "bos", bos_token), (add_eos, "eos", eos_token)):
        if not add:
            continue
        if token is None:
            raise ValueError(f"add_{role}_token=True needs a {role}_token")
        token_id = tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"{role}_token {token!r} is not a token of this tokenizer")
        pieces.append((role, token))
        specials.append((token, token_id))
    bos = next((f"{token}:{{type}} " for role, token in pieces if role == "bos"), "")
    eos = next((f" {token}:{{type}}" for role, token in pieces if role == "eos"), "")
    single = f"{bos.format(type=0)}$A:0{eos.format(type=0)}"
    pair = f"{single} {bos.format(type=1)}$B:1{eos.format(type=1)}"
    return processors.TemplateProcessing(
        single=single, pair=pair, special_tokens=list(dict.fromkeys(specials))
    )


# ------------------------------------------------------------------------------------ checking

_PROBE_ALPHABET = [
    *"aZéßſKİıǅʰ中文あア한ΩωдДاעก\u093c\u0301ⅷ٣５70²½",
    *[" ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\xa0", "\u2003", "\u3000", "\u2028"],
    *["\u200b", "'", "'s", "'S", "'ll", "'LL", "'ve", "'re", "'d", "'m", "'t", "\u2019", "!", "?", ".", ","],
    *[
        "-",
        "_",
        "/",
        "\\",
        "(",
        "<|",
        "|>",
        "😀",
        "👍🏽",
        "🇺🇸",
        "\u200d",
        "$",
        "€",
        "#",
        "@",
        "\x00",
        "\ufeff",
    ],
    *["abc", "ABC", "Hello", "123", "12345", "   \n", " \n ", "\n\n\n", " the", " The", "ing", "2023"],
]


def probe_texts(count: int = 2000, seed: int = 0) -> list[str]:
    """Short random texts mixing scripts, digits, every kind of space, contractions, emoji and
    control characters: the places where regex engines disagree.

    >>> len(probe_texts(10)), probe_texts(3) == probe_texts(3)
    (10, True)
    """
    rng = random.Random(seed)
    return ["".join(rng.choices(_PROBE_ALPHABET, k=rng.randint(1, 40))) for _ in range(count)]


def _check_same_ids(model: BPE, tokenizer: Tokenizer, texts: Iterable[str] | None = None) -> None:
    texts = list(probe_texts() if texts is None else texts)
    ours = model.encode_ordinary_batch(texts)
    theirs = [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]
    for text, expected, got in zip(texts, ours, theirs):
        if expected != got:
            raise ConversionError(
                f"tokenizers cannot reproduce this model (pattern {model.pattern!r}, as Oniguruma "
                f"{translate_pattern(model.pattern)!r}): {text!r} encodes to {expected} here but to {got} in "
                "tokenizers; pass check=False to write the file anyway"
            )
