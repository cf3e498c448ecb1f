"""Hugging Face ``tokenizer.json`` (the `tokenizers` library's one-file format).

:func:`load` reads byte-level BPE files (see its documentation for what it accepts and refuses);
:func:`save` writes a ``tokenizer.json`` that makes `tokenizers` (and so transformers'
``TokenizersBackend``) produce exactly our ids. Four things make that work:

- **Pattern.** tiktoken's split regexes are written for fancy-regex; `tokenizers` runs Oniguruma
  (Ruby syntax), which reads them differently: ``\\p{N}{1,3}+`` is not possessive there, and ``$``
  and ``^`` match at every line end and start. :func:`translate_pattern` rewrites possessive
  quantifiers as atomic groups and anchors as ``\\z`` / ``\\A``. A model whose pattern is
  `tokenizers`' own Split pre-tokenizer (:class:`hf_bpe.patterns.Split`, what :func:`load` gives for
  a custom Split) is written back as it is. The pre-tokenizer, both ways, and the probes that check
  it live in :mod:`conversion._hf_pretokenizers`.
- **Whole-piece rule.** ``ignore_merges: true``: a piece that is itself a token becomes that token.
- **Merges.** A rank table has no merges; :attr:`hf_bpe.BPE.merges` recovers, for each token, the
  pair that forms it when BPE runs on its bytes with lower ranks only.
- **Ids.** `tokenizers` numbers added tokens that are not in the model's vocabulary consecutively
  after it, whatever ids the file says. So every id below the last run of consecutive added tokens
  lives in the model vocabulary: holes get placeholder entries (spelled with a space, which no
  byte-level piece contains, so they can never be produced) and earlier special tokens are entered
  under their own text.

SentencePiece models are written by :mod:`conversion._hf_sentencepiece` (byte fallback, merges by
piece score, SentencePiece's whitespace handling as normalizer steps), exactly where
`tokenizers` can reproduce them and otherwise only with ``lossy=True``; SentencePiece-style files
are read by :mod:`conversion._hf_sentencepiece_read`.

About 730 lines: building, saving and loading one file format, whose two directions must agree on
ids, added tokens and normalizers, read best side by side; the pre-tokenizer and SentencePiece parts
already live in their own modules.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

from conversion import _hf_affixes, _hf_sentencepiece, _hf_sentencepiece_read
from conversion._hf_normalizers import (
    normalizer_difference,
    normalizer_steps,
    their_normalizer,
    written_normalizer,
)
from conversion._hf_pretokenizers import (  # noqa: F401 - the constants were defined here; still importable
    BYTE_LEVEL_REGEX,
    PROBE_SECONDS,
    SPLIT_PROBE_EDGES,
    checked_pattern,
    describe,
    first_passing,
    is_byte_level,
    pre_tokenizer_difference,
    probe_texts,
    split_candidates,
    split_probe_texts,
    split_steps,
    translate_pattern,
)
from hf_bpe import _rules, patterns
from hf_bpe._byte_level import BYTE_TO_UNICODE, str_to_token, token_to_str, try_str_to_token
from hf_bpe._io import atomic_write, json_of, read_file, text_of
from hf_bpe.errors import (
    ConversionError,
    InvalidVocabularyError,
    LossyConversionWarning,
    MissingBytesWarning,
    TokenizerFileError,
)
from hf_bpe.model import (
    BPE,
    MAX_DENSE_IDS,
    NEVER_IN_UTF8,
    SPECIAL_TOKEN_RULES,
    as_model,
    missing_bytes,
    special_token_rules,
    with_special_token_rules,
)

__all__ = [
    "ConversionError",
    "added_token_probe_texts",
    "build_tokenizer",
    "load",
    "pre_tokenizer_difference",
    "probe_texts",
    "save",
    "sentencepiece_differences",
    "sentencepiece_probe_texts",
    "special_added_tokens",
    "special_token_settings",
    "split_probe_texts",
    "translate_pattern",
]

PLACEHOLDER = "<unused id {id}>"
"""Vocabulary entry for an id the model does not use (never produced: it contains a space)."""


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
    lossy: bool = False,
    pair_template: str = "bos_eos",
    trim_offsets: bool = False,
    trim_keeps_prefix_space: bool = False,
) -> Tokenizer:
    """A `tokenizers.Tokenizer` that encodes and decodes exactly as ``model``.

    ``added_tokens`` maps ids to extra tokens (as transformers' ``added_tokens_decoder``); the
    model's special tokens are added as special tokens unless listed there. ``add_bos_token`` /
    ``add_eos_token`` put ``bos_token`` / ``eos_token`` around each sequence (a post-processor);
    ``pair_template``, ``trim_offsets`` and ``trim_keeps_prefix_space`` as
    :meth:`hf_bpe.transformers.BPETokenizer.from_model` takes them (``RobertaProcessing`` or
    ``BertProcessing`` for the ``"roberta"`` and ``"bert"`` pair templates, a trimming ``ByteLevel``).
    ``merges`` defaults to the model's own (:attr:`hf_bpe.BPE.merges`: a merges list's, or those
    recovered from the ranks), checked to encode exactly as the model (else
    :class:`~hf_bpe.errors.ConversionError`); a rank model is written with ``ignore_merges``, a merges
    list with its own setting, and a model whose symbols carry word affixes with them (only its own
    merges). A model dropping missing bytes after merging (llama.cpp's rule, from a
    GGUF file) is refused where a listed merge could cross one: `tokenizers` drops them before. ``check`` encodes :func:`probe_texts` with both and raises
    :class:`ConversionError` on any difference; by default only when the split pattern is not one of
    the named ones (those are proven by the test suite).

    A SentencePiece model (see :func:`sentencepiece_differences`) is written with byte fallback, its
    merges by piece score and SentencePiece's normalizer as `tokenizers` steps: its ``encode(text,
    add_special_tokens=False)`` equals ``model.encode(text, allowed_special="all")``, with
    ``encode_special_tokens = True`` (transformers: ``split_special_tokens=True``) it equals
    ``SentencePieceProcessor.encode`` on every text, and ``decode(ids, skip_special_tokens=False)``
    equals ``SentencePieceProcessor.decode`` on ids that encode text (on byte pieces that are not
    UTF-8, `tokenizers` shows every byte of the run as U+FFFD). Where `tokenizers` cannot do that,
    the model is refused naming why; ``check`` (by default on) also compares the two on
    :func:`sentencepiece_probe_texts`.

    ``lossy=True`` writes what cannot be exact anyway (the closest file) and warns with
    :class:`~hf_bpe.errors.LossyConversionWarning`, which says why and on how many of the probe
    texts (:func:`probe_texts`, and for SentencePiece models also :func:`sentencepiece_probe_texts`)
    the file encodes or decodes differently.
    """
    model = as_model(model)
    if model.kind == "sentencepiece":
        if merges is not None:
            raise ConversionError(
                f"merges are not taken for SentencePiece models ({model!r}): the file holds the model's own merges"
            )
        post = _PostSettings(bos_token, eos_token, add_bos_token, add_eos_token, pair_template, trim_offsets,
                             trim_keeps_prefix_space)
        tokenizer = _sentencepiece_tokenizer(model, post, check, lossy)
        _add_to_sentencepiece_file(model, tokenizer, added_tokens or {})
        return tokenizer
    largest = max([model.n_vocab - 1, *(int(token_id) for token_id in added_tokens or {})])
    if largest >= MAX_DENSE_IDS:
        raise ConversionError(
            f"tokenizer.json cannot hold id {largest} of {model!r}: tokenizers numbers its vocabulary without "
            f"holes, so every id below the largest needs an entry; ids must be below {MAX_DENSE_IDS:,}"
        )
    ranks = model.mergeable_ranks
    tokens = _added_token_table(model, ranks, added_tokens or {})
    vocab = {token_to_str(token): rank for token, rank in ranks.items()}

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
    # A rank model gets tiktoken's whole-piece rule; a merges list keeps its own setting.
    ignore_merges = model.kind == "ranks" or bool(_rules.ignore_merges(model))
    own_merges = model.merges  # listed, or recovered from the ranks
    proven: list[str] = []  # why a lossy file differs, known before measuring
    own = merges is None or list(merges) == own_merges
    if merges is None or own:
        merges = own_merges
        difference = _rules.merge_rule_difference(model, ignore_merges)
        if difference is not None:
            if not lossy:
                raise ConversionError(f"tokenizer.json cannot hold {model!r} exactly: its merges list {difference}")
            proven.append(f"its merges list {difference}")
    dropped = _rules.missing_bytes_difference(model, "before merging")
    if dropped is not None:
        if not lossy:
            raise ConversionError(f"tokenizer.json cannot hold {model!r} exactly: tokenizers drops a byte the "
                                  f"vocabulary lacks before merging, and {dropped}")
        proven.append(f"tokenizers drops a missing byte before merging, and {dropped}")
    if not own and _hf_affixes.bpe_settings(model):
        raise ConversionError(f"merges are not taken for {model!r}, whose symbols carry word affixes: the file holds "
                              "its own merges")
    bpe = models.BPE(**{
        "vocab": vocab,
        "merges": [(token_to_str(left), token_to_str(right)) for left, right in merges],
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": ignore_merges,
        **_hf_affixes.bpe_settings(model),
    })
    tokenizer = Tokenizer(bpe)
    pre_tokenizer: pre_tokenizers.PreTokenizer
    steps = patterns.normalizers_of(model.pattern)
    if patterns.byte_level_of(model.pattern) is not None:
        pre_tokenizer = pre_tokenizers.Sequence(split_steps(model.pattern))  # ByteLevel among the Splits
    elif steps and steps[-1].kind == "prefix_space" and \
            patterns.split_steps_of(model.pattern) == (patterns.Split(BYTE_LEVEL_REGEX, "isolated"),):
        # What a lone ByteLevel with add_prefix_space loads as: written back as it was, offsets and all.
        pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
        steps = steps[:-1]
    else:
        pre_tokenizer = pre_tokenizers.Sequence([
            *split_steps(model.pattern),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
    normalizer = written_normalizer(steps)
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.ByteLevel()
    # In id order, each run of special or ordinary added tokens in one call (tokenizers rebuilds its
    # matcher of added tokens at every call: one call per token took seconds for Whisper's 1,608).
    for special, group in itertools.groupby(sorted(tokens.items()), key=lambda item: item[1].special):
        run = list(group)
        (tokenizer.add_special_tokens if special else tokenizer.add_tokens)([token for _, token in run])
        for token_id, token in run:
            if tokenizer.token_to_id(token.content) != token_id:
                raise ConversionError(
                    f"tokenizers numbered added token {token.content!r} {tokenizer.token_to_id(token.content)}, "
                    f"not {token_id}"
                )
    tokenizer.post_processor = _post_processor(tokenizer, _PostSettings(
        bos_token, eos_token, add_bos_token, add_eos_token, pair_template, trim_offsets, trim_keeps_prefix_space))
    if lossy:
        texts = probe_texts()
        ours = model.encode_ordinary_batch(texts)
        theirs = [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]
        wrong = [(text, f"encodes to {expected} here but to {got} in tokenizers")
                 for text, expected, got in zip(texts, ours, theirs) if expected != got]
        if proven or wrong:
            suspect = (f"the split pattern {model.pattern!r} reads differently in Oniguruma" if own
                       else "the merges given are not the model's own")
            _warn_lossy(model, proven or [suspect], wrong, len(texts), "conversion.hf.probe_texts()")
    elif check if check is not None else patterns.name_of(model.pattern) is None:
        _check_same_ids(model, tokenizer)
    return tokenizer


def sentencepiece_differences(model: BPE) -> list[str]:
    """Why `tokenizers` cannot encode or decode as the SentencePiece ``model`` does, naming the pieces
    or settings concerned (empty when :func:`save` writes it exactly). A merge order the pair-rank rule
    of `tokenizers` cannot follow (see :func:`hf_bpe.sentencepiece_bpe.merge_list`), a precompiled
    character map (`tokenizers` applies it per grapheme cluster), user-defined pieces next to the
    dummy prefix, and a few decoding corner cases are the reasons.

    >>> import conversion.hf, hf_bpe
    >>> from hf_bpe.sentencepiece_bpe import Piece, SentencePieceSpec, UNKNOWN, USER_DEFINED
    >>> pieces = (Piece("<unk>", 0, UNKNOWN), Piece("▁", -1), Piece("a", -2), Piece("<sep>", 0, USER_DEFINED))
    >>> model = hf_bpe.BPE.from_sentencepiece(SentencePieceSpec(pieces))
    >>> [reason[:48] for reason in conversion.hf.sentencepiece_differences(model)]
    ["the user-defined pieces ('<sep>') with the dummy"]
    """
    spec = model.sentencepiece
    if spec is None:
        raise TypeError(f"{model!r} is not a SentencePiece model")
    return _hf_sentencepiece.differences(spec)


def sentencepiece_probe_texts(model: BPE, count: int = 2000, seed: int = 0) -> list[str]:
    """The texts on which :func:`save` compares a SentencePiece ``model`` with the file it writes
    (besides :func:`probe_texts`): strings of the model's own pieces, its special, user-defined and
    byte pieces spelled out, whitespace runs, combining sequences and characters it lacks.

    >>> import conversion.hf, hf_bpe
    >>> from hf_bpe.sentencepiece_bpe import Piece, SentencePieceSpec, UNKNOWN
    >>> model = hf_bpe.BPE.from_sentencepiece(SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("▁a", -1))))
    >>> len(conversion.hf.sentencepiece_probe_texts(model, 10))
    10
    """
    spec = model.sentencepiece
    if spec is None:
        raise TypeError(f"{model!r} is not a SentencePiece model")
    return _hf_sentencepiece.probe_texts(spec, count, seed)


def _sentencepiece_tokenizer(model: BPE, post: _PostSettings, check: bool | None, lossy: bool) -> Tokenizer:
    lost = sentencepiece_differences(model)
    if lost and not lossy:
        raise ConversionError(
            f"tokenizer.json cannot hold the SentencePiece model {model!r} exactly ({len(lost)} "
            f"reason{'s' if len(lost) > 1 else ''}): " + "; ".join(lost)
            + ". Pass lossy=True to write the closest file anyway (it warns how often it differs)"
        )
    tokenizer = _hf_sentencepiece.tokenizer(model)
    tokenizer.post_processor = _post_processor(tokenizer, post)
    if check is False and not lost:
        return tokenizer
    texts = probe_texts() + sentencepiece_probe_texts(model)
    wrong = _hf_sentencepiece.mismatches(model, tokenizer, texts)
    if lost:
        _warn_lossy(model, lost, wrong, len(texts),
                    "conversion.hf.probe_texts() and sentencepiece_probe_texts(model)")
    elif wrong:
        text, problem = wrong[0]
        raise ConversionError(
            f"tokenizers does not reproduce the SentencePiece model {model!r} on {len(wrong)} of {len(texts)} "
            f"probe texts, though no known reason keeps it from that (please report it): {text!r} {problem}; "
            "pass lossy=True to write the file anyway"
        )
    return tokenizer


def _add_to_sentencepiece_file(model: BPE, tokenizer: Tokenizer, added_tokens: Mapping[int, AddedToken | str]) -> None:
    """Add ``added_tokens`` (id -> token) to the `tokenizers` file of a SentencePiece model: tokens
    spelled as one of its pieces keep the piece's id, the others take the ids after the last piece,
    in order, as `tokenizers` numbers them (so they must be consecutive)."""
    spec = model.sentencepiece
    assert spec is not None
    written = {entry.content for entry in tokenizer.get_added_tokens_decoder().values()}
    for token_id, token in sorted(added_tokens.items()):
        if isinstance(token, str):
            token = AddedToken(token, special=False, normalized=True)
        if token.content in written and token_id < len(spec.pieces) and spec.pieces[token_id].text == token.content:
            continue  # a control, unknown or user-defined piece, written with the model
        added = AddedToken(token.content, single_word=token.single_word, lstrip=token.lstrip, rstrip=token.rstrip,
                           normalized=token.normalized, special=token.special)
        expected = tokenizer.token_to_id(token.content)
        if expected is None:
            expected = tokenizer.get_vocab_size(with_added_tokens=True)
        if expected != token_id:
            raise ConversionError(
                f"added token {token.content!r} has id {token_id}, but tokenizer.json would give it id {expected}: "
                f"tokenizers numbers the tokens added to the {len(spec.pieces)} pieces of {model!r} one after the "
                "other, and spells each text once; renumber the added tokens without gaps"
            )
        if token.special:
            tokenizer.add_special_tokens([added])
        else:
            tokenizer.add_tokens([added])
        written.add(token.content)


def _warn_lossy(model: BPE, lost: Sequence[str], wrong: Sequence[tuple[str, str]], probes: int,
                probe_set: str) -> None:
    """Say why a lossy tokenizer.json differs and how often it did on the probe texts."""
    example = f"; e.g. {wrong[0][0]!r} {wrong[0][1]}" if wrong else ""
    message = (
        f"lossy tokenizer.json for {model!r} differs on {len(wrong)} of {probes} probe texts "
        f"({100 * len(wrong) / probes:.2f}%, {probe_set}){example}. Why: " + "; ".join(lost)
    )
    warnings.warn(LossyConversionWarning(message, mismatches=len(wrong), probes=probes), stacklevel=4)
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
    lossy: bool = False,
    pair_template: str = "bos_eos",
    trim_offsets: bool = False,
    trim_keeps_prefix_space: bool = False,
) -> Path:
    """Write ``model`` as a ``tokenizer.json`` (atomically); arguments as :func:`build_tokenizer`
    (SentencePiece models too; ``lossy=True`` writes the closest file and warns with the measured
    mismatch rate).

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
        lossy=lossy,
        pair_template=pair_template,
        trim_offsets=trim_offsets,
        trim_keeps_prefix_space=trim_keeps_prefix_space,
    )
    return atomic_write(path, tokenizer.to_str(pretty=True))


def special_added_tokens(model: BPE) -> dict[int, AddedToken]:
    """Id -> ``AddedToken`` for each special token of ``model``, as ``tokenizer.json`` holds it:
    special, with the model's rules as its flags (:func:`hf_bpe.model.special_token_rules`: a
    ``tokenizer.json``'s ``lstrip``, ``rstrip``, ``single_word`` and ``normalized``), the other
    flags false.

    >>> import hf_bpe
    >>> from hf_bpe.model import with_special_token_rules
    >>> model = hf_bpe.BPE({bytes([b]): b for b in range(256)}, "gpt2", special_tokens={"<mask>": 256})
    >>> token = special_added_tokens(with_special_token_rules(model, {"<mask>": ["lstrip"]}))[256]
    >>> token.content, token.special, token.lstrip, token.rstrip, token.normalized
    ('<mask>', True, True, False, False)
    """
    rules = special_token_rules(model)
    return {
        token_id: AddedToken(
            text, special=True, **{rule: rule in rules.get(text, ()) for rule in SPECIAL_TOKEN_RULES}
        )
        for text, token_id in model.special_tokens.items()
    }


def _added_token_table(
    model: BPE, ranks: dict[bytes, int], added_tokens: Mapping[int, AddedToken | str]
) -> dict[int, AddedToken]:
    """Id -> AddedToken for the model's special tokens and the caller's added tokens, validated."""
    table = special_added_tokens(model)
    spelled = {rank: token_to_str(token) for token, rank in ranks.items()}
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


class _PostSettings(NamedTuple):
    """What :func:`build_tokenizer` is asked to put in the post-processor."""

    bos_token: str | None
    eos_token: str | None
    add_bos: bool
    add_eos: bool
    pair_template: str = "bos_eos"
    trim_offsets: bool = False
    trim_keeps_prefix_space: bool = False


def _post_processor(tokenizer: Tokenizer, post: _PostSettings) -> processors.PostProcessor:
    """BOS/EOS around each sequence, as transformers' ``TokenizersBackend.update_post_processor``; or
    ``RobertaProcessing`` / ``BertProcessing`` for those pair templates; after a ``ByteLevel`` that
    trims offsets when asked."""
    pieces: list[tuple[str, str]] = []  # (role, token)
    specials: list[tuple[str, int]] = []
    for add, role, token in ((post.add_bos, "bos", post.bos_token), (post.add_eos, "eos", post.eos_token)):
        if not add:
            continue
        if token is None:
            raise ValueError(f"add_{role}_token=True needs a {role}_token")
        token_id = tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"{role}_token {token!r} is not a token of this tokenizer")
        pieces.append((role, token))
        specials.append((token, token_id))
    if post.pair_template not in ("bos_eos", "roberta", "bert"):
        raise ValueError(f"pair_template is {post.pair_template!r:.40}; expected 'bos_eos', 'roberta' or 'bert'")
    if post.pair_template != "bos_eos":
        if len(specials) != 2:
            raise ValueError(f"pair_template={post.pair_template!r} needs add_bos_token and add_eos_token (CLS and SEP)")
        if post.pair_template == "roberta":
            return processors.RobertaProcessing(specials[1], specials[0], trim_offsets=post.trim_offsets,
                                                add_prefix_space=post.trim_keeps_prefix_space)
        framing: processors.PostProcessor = processors.BertProcessing(specials[1], specials[0])
    else:
        bos = next((f"{token}:{{type}} " for role, token in pieces if role == "bos"), "")
        eos = next((f" {token}:{{type}}" for role, token in pieces if role == "eos"), "")
        single = f"{bos.format(type=0)}$A:0{eos.format(type=0)}"
        pair = f"{single} {bos.format(type=1)}$B:1{eos.format(type=1)}"
        framing = processors.TemplateProcessing(single=single, pair=pair, special_tokens=list(dict.fromkeys(specials)))
    if not post.trim_offsets:
        return framing
    trimming = processors.ByteLevel(add_prefix_space=post.trim_keeps_prefix_space, trim_offsets=True, use_regex=False)
    return processors.Sequence([trimming, framing])


# ------------------------------------------------------------------------------------ checking

def _check_same_ids(model: BPE, tokenizer: Tokenizer, texts: Iterable[str] | None = None) -> None:
    texts = list(probe_texts() if texts is None else texts)
    ours = model.encode_ordinary_batch(texts)
    theirs = [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]
    for text, expected, got in zip(texts, ours, theirs):
        if expected != got:
            pattern = model.pattern
            spelled = f", as Oniguruma {translate_pattern(pattern)!r}" if isinstance(pattern, str) else ""
            raise ConversionError(
                f"tokenizers cannot reproduce this model (pattern {patterns.describe(pattern)}{spelled}): "
                f"{text!r} encodes to {expected} here but to {got} in tokenizers; pass check=False to write "
                "the file anyway"
            )


# ------------------------------------------------------------------------------------- reading

def load(tokenizer_json: str | os.PathLike[str] | Tokenizer, *, name: str | None = None, lossy: bool = False,
         source: str | os.PathLike[str] | None = None) -> BPE:
    """Load a byte-level BPE ``tokenizer.json``: ``encode(text, allowed_special="all")`` equals
    ``tokenizers.Tokenizer.from_file(path).encode(text, add_special_tokens=False).ids``, and
    ``decode`` equals its ``decode(ids, skip_special_tokens=False)``.

    ``tokenizer_json`` may also be a live ``tokenizers.Tokenizer``: its ``to_str()`` is read, which
    holds what was changed after its file was read (the tokens and the post-processor transformers
    adds); ``source`` names it in the errors (by default, its type).

    A SentencePiece-style file (byte fallback, ``Metaspace``, a normalizer writing ``▁``) loads as a
    SentencePiece model with the same ``encode``, whose ``decode`` equals ``decode(ids,
    skip_special_tokens=True)``; see :mod:`conversion._hf_sentencepiece_read` for what it reads and
    refuses. The rest of this list is about byte-level files.

    What is read, and what is refused with :class:`~hf_bpe.errors.TokenizerFileError` naming the file:

    - ``model``: ``BPE`` with its ``vocab`` and ``merges`` (``"a b"`` strings or ``[a, b]`` pairs);
      ``ignore_merges`` becomes the whole-piece rule. ``continuing_subword_prefix`` and
      ``end_of_word_suffix`` (CLIP's ``</w>``) load as a model whose symbols carry them, with
      ``unk_token`` and ``fuse_unk`` (see :mod:`conversion._hf_affixes`). Refused: ``dropout``. A vocabulary may
      lack byte symbols: as `tokenizers` does, such a byte is dropped from the text before merging
      (a :class:`~hf_bpe.errors.MissingBytesWarning` names them, unless only bytes UTF-8 never uses
      are missing); with an ``unk_token`` that is refused.
    - ``normalizer``: ``NFC``, ``NFD``, ``NFKC``, ``NFKD``, ``Lowercase``, ``Strip``, ``Replace``,
      ``Prepend`` and ``Sequence`` s of them, run as `tokenizers` runs them (same tables; offsets
      into the original text) and checked at load on the probe texts; others are refused by name.
    - ``pre_tokenizer``: ``ByteLevel`` (its built-in regex is GPT-2's pattern), or a ``Sequence`` of
      ``Split`` steps and a ``ByteLevel``, with or without its regex. Each ``Split`` (every
      ``behavior``, ``invert``, ``Regex`` or ``String`` pattern) becomes a
      :class:`hf_bpe.patterns.Split`, run with Oniguruma as `tokenizers` runs it; a lone Split that
      spells a named pattern (as :func:`save` writes them), and ByteLevel's own regex, become the
      named pattern. Either way the split is checked at load: :func:`split_probe_texts` (every code
      point class of Unicode, edge characters, digits of every script) must be cut into the same
      pieces as `tokenizers` cuts them (:func:`pre_tokenizer_difference`), else the file is refused
      naming the text and both piece lists. ``Digits``, ``Punctuation``, ``Whitespace``,
      ``WhitespaceSplit`` and ``CharDelimiterSplit`` steps become Splits on `tokenizers`' own
      character tables. ``add_prefix_space`` is read for a lone ``ByteLevel``; steps after
      ``ByteLevel`` and other pre-tokenizers are refused by name.
    - ``decoder``: ``ByteLevel``.
    - ``added_tokens`` become special tokens (the ``special`` flag is not kept): `tokenizers` cuts all
      of them out of text. Their ``lstrip``, ``rstrip``, ``single_word`` and ``normalized`` flags
      become the model's special-token rules (:func:`hf_bpe.model.with_special_token_rules`), matched as `tokenizers` matches
      them (stripped whitespace is part of the token's span; ``normalized`` tokens are looked for
      between the others) and checked at load on texts full of the tokens
      (:func:`added_token_probe_texts`). Refused: ``normalized`` tokens with a normalizer
      (`tokenizers` matches them in the normalized text), and an ``rstrip`` token where a token
      starts with whitespace (`tokenizers` then matches overlapping text). A merge that names an
      added token can never apply and is dropped. ``lossy`` changes nothing for byte-level files.
    - ``post_processor`` (BOS/EOS templates), truncation and padding are not part of the model;
      :func:`special_token_settings` reads the BOS/EOS templates for
      :class:`hf_bpe.transformers.BPETokenizer`.

    Vocabulary entries not spelled in the byte-level alphabet that are not added tokens (such as the
    placeholders :func:`save` writes for id holes) can never be produced and are left out, as ids
    without a token. A merges list that provably encodes like tiktoken's rank rule loads as a rank
    model.

    >>> import conversion.hf, tempfile, os
    >>> from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    >>> vocab = {chr(c): i for i, c in enumerate(sorted(conversion.hf.hf_alphabet()))} | {"ab": 256}
    >>> tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    >>> tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    >>> tokenizer.decoder = decoders.ByteLevel()
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> tokenizer.save(path)
    >>> conversion.hf.load(path).encode("abc")
    [256, 66]
    """
    if isinstance(tokenizer_json, Tokenizer):
        document, path = _document(tokenizer_json, source)
        return _load_document(document, path, name=name, lossy=lossy)
    path = source if source is not None else tokenizer_json
    data = read_file(tokenizer_json)
    # The core reads the vocabulary and merges of a regular file (most of its bytes: a second or more as
    # Python objects for 100,000s of tokens), and hands back the rest of the document; anything irregular
    # is read again here whole, which says what is wrong.
    parts = _rules.read_tokenizer_json(data)
    confirmed_split = None
    if parts is not None:
        rest, spelled_model = parts
        try:
            return _load_document(json_of(rest, tokenizer_json), path, name=name, lossy=lossy, spelled_model=spelled_model)
        except _Irregular as irregular:
            confirmed_split = irregular.split
    document = json_of(text_of(data, tokenizer_json), tokenizer_json)
    return _load_document(document, path, name=name, lossy=lossy, confirmed_split=confirmed_split)


class _Irregular(Exception):
    """The vocabulary or merges of a file the core read (:func:`hf_bpe._rules.read_tokenizer_json`) need
    the whole document's reading; ``split`` is the split pattern already checked, if any."""

    def __init__(self, split: patterns.Pattern | None) -> None:
        super().__init__("irregular vocabulary or merges")
        self.split = split


def _load_document(document: Any, path: str | os.PathLike[str], *, name: str | None, lossy: bool,
                   spelled_model: Any = None, confirmed_split: patterns.Pattern | None = None) -> BPE:
    """:func:`load` of a parsed document (see :func:`_load`), refused when it is not a tokenizer.json."""
    if not isinstance(document, dict):
        raise TokenizerFileError(
            path,
            f"not a tokenizer.json: it holds a JSON {_json_kind(document)}, where a tokenizer.json holds an "
            'object with a "model" (as tokenizers\' Tokenizer.save writes it)',
        )
    try:
        return _load(document, path, name=name, lossy=lossy, spelled_model=spelled_model, confirmed_split=confirmed_split)
    except KeyError as error:
        raise TokenizerFileError(path, f"not a tokenizer.json: missing or malformed {error}") from None
    except (TypeError, AttributeError):
        raise TokenizerFileError(
            path, "not a tokenizer.json: a value inside it has the wrong JSON type (an array or a "
            "string where tokenizers writes an object, say)"
        ) from None


def _document(tokenizer_json: str | os.PathLike[str] | Tokenizer,
              source: str | os.PathLike[str] | None) -> tuple[Any, str | os.PathLike[str]]:
    """The JSON of a ``tokenizer.json`` file or of a live ``tokenizers.Tokenizer``, and what names it."""
    if isinstance(tokenizer_json, Tokenizer):
        return json.loads(tokenizer_json.to_str()), source if source is not None else "tokenizers.Tokenizer"
    return json_of(text_of(read_file(tokenizer_json), tokenizer_json), tokenizer_json), \
        source if source is not None else tokenizer_json


def special_token_settings(tokenizer_json: str | os.PathLike[str] | Tokenizer, *,
                           source: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The settings of a ``tokenizer.json``'s ``post_processor``, as
    :meth:`hf_bpe.transformers.BPETokenizer.from_model` takes them (``bos_token``, ``eos_token``,
    ``add_bos_token``, ``add_eos_token``; ``pair_template``, ``trim_offsets`` and
    ``trim_keeps_prefix_space`` when they are not the defaults): with them,
    ``BPETokenizer.from_model(load(path), **settings)(text, pair)`` gives the ``input_ids``,
    ``token_type_ids``, special-tokens mask and ``offset_mapping`` that `tokenizers` gives.

    Read: no post-processor; ``TemplateProcessing`` whose templates put a special token before
    and/or after each sequence, the pair's second half with type id 1 (as transformers writes them,
    Llama 3's); ``RobertaProcessing`` (``cls`` and ``sep`` as BOS and EOS, pairs ``<s> A </s> </s> B
    </s>`` all of type id 0: ``pair_template="roberta"``); ``BertProcessing`` (``[CLS] A [SEP] B
    [SEP]``, the second half of type id 1: ``pair_template="bert"``); ``ByteLevel``, whose
    ``trim_offsets`` (as ``RobertaProcessing``'s) takes the spaces at either end of a token out of its
    offsets, its ``add_prefix_space`` keeping the one space before a text's first token
    (``trim_keeps_prefix_space``); a ``Sequence`` of these. Refused with
    :class:`~hf_bpe.errors.TokenizerFileError` naming the post-processor: other templates, two steps
    that add special tokens, offsets trimmed twice or after ``RobertaProcessing`` or ``BertProcessing``
    added their tokens, special tokens whose ids are not theirs in the file, other post-processors. A live
    ``tokenizers.Tokenizer`` is read as :func:`load` reads it (``source`` names it).

    >>> import conversion.hf, tempfile, os
    >>> from tokenizers import Tokenizer, models, processors
    >>> tokenizer = Tokenizer(models.BPE(vocab={"<s>": 0, "a": 1}, merges=[]))
    >>> tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
    ...                                                          special_tokens=[("<s>", 0)])
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> tokenizer.save(path)
    >>> conversion.hf.special_token_settings(path)
    {'bos_token': '<s>', 'eos_token': None, 'add_bos_token': True, 'add_eos_token': False}
    >>> tokenizer.post_processor = processors.RobertaProcessing(("a", 1), ("<s>", 0))
    >>> tokenizer.save(path)
    >>> conversion.hf.special_token_settings(path)["pair_template"]
    'roberta'
    """
    document, tokenizer_json = _document(tokenizer_json, source)
    if not isinstance(document, dict):
        raise TokenizerFileError(tokenizer_json, f"not a tokenizer.json: it holds a JSON {_json_kind(document)}")

    def refuse(problem: str) -> TokenizerFileError:
        return TokenizerFileError(tokenizer_json, f"the post-processor {problem}")

    settings: dict[str, Any] = {"bos_token": None, "eos_token": None, "add_bos_token": False,
                                "add_eos_token": False}
    processor = document.get("post_processor")
    steps = processor.get("processors") if isinstance(processor, dict) and processor.get("type") == "Sequence" \
        else [processor]
    adding: dict[str, Any] | None = None  # the step that puts special tokens around the sequences
    trims: list[bool] = []  # each step trimming offsets: whether it keeps the prefix space
    for step in steps if isinstance(steps, list) else [processor]:
        if step is None:
            continue
        kind = step.get("type") if isinstance(step, dict) else None
        if kind in ("ByteLevel", "RobertaProcessing") and _flag(step, "trim_offsets", refuse):
            if adding is not None and adding.get("type") != "TemplateProcessing":
                raise refuse(f"{kind} trims offsets after {adding.get('type')} added its tokens, which is not "
                             "supported (BPETokenizer trims the offsets of each sequence before adding them)")
            trims.append(_flag(step, "add_prefix_space", refuse))
        if kind == "ByteLevel":
            continue
        if kind not in ("TemplateProcessing", "RobertaProcessing", "BertProcessing"):
            raise refuse(f"{kind!r} is not supported (BPETokenizer reads TemplateProcessing, RobertaProcessing, "
                         "BertProcessing, ByteLevel and Sequences of them)")
        if adding is not None:
            raise refuse(f"has two steps that add special tokens ({adding.get('type')} and {kind}), which is not "
                         "supported")
        adding = step
    if len(trims) > 1:
        raise refuse("trims offsets twice (two steps with trim_offsets), which is not supported")
    if adding is not None and adding["type"] == "TemplateProcessing":
        settings.update(_template_settings(adding, refuse))
    elif adding is not None:
        settings.update(_framing_settings(document, adding, refuse))
    if trims:
        settings["trim_offsets"] = True
    if trims and trims[0]:
        settings["trim_keeps_prefix_space"] = True
    return settings


def _framing_settings(document: dict[str, Any], adding: dict[str, Any], refuse: Any) -> dict[str, Any]:
    """The settings of a ``RobertaProcessing`` or ``BertProcessing``: its CLS and SEP as BOS and EOS."""
    settings: dict[str, Any] = {}
    for role, key in (("cls", "bos_token"), ("sep", "eos_token")):
        entry = adding.get(role)
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and entry[0]
                and isinstance(entry[1], int) and not isinstance(entry[1], bool)):
            raise refuse(f"{adding['type']} has {role} = {entry!r:.60}; expected [token, id]")
        token, token_id = entry
        own = _token_id_in(document, token)
        if own != token_id:
            raise refuse(f"{adding['type']} gives {role} {token!r} the id {token_id}, but the file gives it "
                         f"{'no id' if own is None else f'the id {own}'}; BPETokenizer gives a token its own id")
        settings[key] = token
    settings.update(add_bos_token=True, add_eos_token=True,
                    pair_template="roberta" if adding["type"] == "RobertaProcessing" else "bert")
    return settings


def _flag(step: dict[str, Any], name: str, refuse: Any) -> bool:
    """A true/false setting of a post-processor step (`tokenizers`' default, true, when absent)."""
    value = step.get(name, True)
    if not isinstance(value, bool):
        raise refuse(f"{step.get('type')} has {name} = {value!r:.40}; expected true or false")
    return value


def _token_id_in(document: dict[str, Any], token: str) -> int | None:
    """The id `tokenizers` gives ``token`` in a ``tokenizer.json``: as an added token
    (:func:`_added_token_id`, whatever the file's ``"id"`` says), else its vocabulary entry's."""
    model = document.get("model")
    model = model if isinstance(model, dict) else {}
    vocab: dict[str, Any] = model["vocab"] if isinstance(model.get("vocab"), dict) else {}
    earlier: dict[str, int] = {}
    largest = None  # of the ids in earlier (a running maximum: files hold thousands of added tokens)
    for entry in document.get("added_tokens") or []:
        content = entry.get("content") if isinstance(entry, dict) else None
        if isinstance(content, str) and content not in earlier:
            earlier[content] = found = _added_token_id(content, vocab.get(content), largest, len(vocab))
            largest = found if isinstance(found, int) and (largest is None or found > largest) else largest
    found = earlier.get(token, vocab.get(token))
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def _template_settings(template: dict[str, Any], refuse: Any) -> dict[str, Any]:
    """BOS/EOS settings of a ``TemplateProcessing`` that puts one special token before and/or after
    each sequence, the pair's second half with type id 1."""
    single = template.get("single") or []
    names = [next(iter(item.values())).get("id") if isinstance(item, dict) and item else None for item in single]
    bos = names[0] if len(names) > 1 and "SpecialToken" in single[0] else None
    eos = names[-1] if len(names) > 1 and "SpecialToken" in single[-1] else None
    settings = {"bos_token": bos, "eos_token": eos, "add_bos_token": bos is not None, "add_eos_token": eos is not None}
    ids = {name: entry.get("ids") for name, entry in (template.get("special_tokens") or {}).items()
           if isinstance(entry, dict)}

    class _Ids:
        @staticmethod
        def token_to_id(token: str) -> int | None:
            found = ids.get(token)
            return found[0] if isinstance(found, list) and len(found) == 1 else None

    try:
        expected = _post_processor(_Ids(), _PostSettings(bos, eos, bos is not None, eos is not None))  # type: ignore[arg-type]
    except ValueError:
        expected = None
    written = Tokenizer(models.BPE())
    written.post_processor = expected
    if expected is None or json.loads(written.to_str())["post_processor"] != template:
        raise refuse(
            f"TemplateProcessing (single {_template_text(single)}, pair {_template_text(template.get('pair') or [])}) "
            "is not one BPETokenizer reproduces: it puts one special token before and/or after each sequence, "
            "the second with type id 1"
        )
    return settings


def _template_text(items: list[Any]) -> str:
    """A template of the file as `tokenizers` spells it (``"<s>:0 $A:0"``)."""
    words = []
    for item in items:
        kind, value = next(iter(item.items())) if isinstance(item, dict) and item else ("?", {})
        name = f"${value.get('id')}" if kind == "Sequence" else str(value.get("id"))
        words.append(f"{name}:{value.get('type_id')}")
    return repr(" ".join(words))


def _json_kind(value: object) -> str:
    """JSON's name for the type of a parsed value."""
    kinds = {list: "array", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def hf_alphabet() -> set[int]:
    """The code points of the byte-level alphabet (``pre_tokenizers.ByteLevel.alphabet()``)."""
    return {ord(char) for char in BYTE_TO_UNICODE.values()}


def _load(document: dict[str, Any], path: str | os.PathLike[str], *, name: str | None, lossy: bool,
          checked: bool = True, confirmed_split: patterns.Pattern | None = None, spelled_model: Any = None) -> BPE:
    """The model of ``document``; ``checked=False`` leaves out the checks of the normalizer and the whole
    pipeline, and ``confirmed_split`` is the split :func:`checked_pattern` already confirmed for its
    pre-tokenizer (:func:`_check_pipeline` loads a reduced copy of a file it is checking). With
    ``spelled_model`` (:func:`hf_bpe._rules.read_tokenizer_json`), the document's model lacks its vocabulary and
    merges, which ``spelled_model`` holds; raises :class:`_Irregular` where they need the whole document's reading."""
    def refuse(problem: str) -> TokenizerFileError:
        return TokenizerFileError(path, problem)

    model = document["model"]
    if model.get("type") != "BPE":
        raise refuse(f"the model is {model.get('type')!r}; hf_bpe reads BPE models only")
    if _hf_sentencepiece_read.is_sentencepiece_style(document):
        if spelled_model is not None:
            raise _Irregular(None)
        return _hf_sentencepiece_read.load(document, path, refuse, name=name, lossy=lossy)
    normalizers = normalizer_steps(document.get("normalizer"), refuse)
    if model.get("dropout"):
        raise refuse(f"model.dropout = {model['dropout']!r} is not supported (tokenizers then merges at random)")
    affixes = _hf_affixes.word_affixes_of(model, refuse)
    if affixes is not None and spelled_model is not None:
        raise _Irregular(None)  # read from the whole document (_hf_affixes.built)
    pre_tokenizer = document.get("pre_tokenizer")
    lone = pre_tokenizer["pretokenizers"] if isinstance(pre_tokenizer, dict) and pre_tokenizer.get("type") == \
        "Sequence" and isinstance(pre_tokenizer.get("pretokenizers"), list) else [pre_tokenizer]
    if len(lone) == 1 and isinstance(lone[0], dict) and is_byte_level(lone[0]) and lone[0].get("add_prefix_space"):
        # ByteLevel alone puts its space before each stretch of text between added tokens: a last
        # normalizer step (checked with the whole pipeline below).
        normalizers += (patterns.Normalize("prefix_space"),)
        pre_tokenizer = dict(lone[0], add_prefix_space=False)
    candidates = [confirmed_split] if confirmed_split is not None else \
        split_candidates(pre_tokenizer, refuse, named=not normalizers)

    def checked_split() -> patterns.Pattern:
        return confirmed_split if confirmed_split is not None else first_passing(candidates, pre_tokenizer, refuse)

    def settings() -> tuple[dict[str, int], dict[str, set[str]]]:
        decoder = document.get("decoder")
        if decoder is None:
            raise refuse("the file has no decoder, so tokenizers decodes a byte-level token as its symbols "
                         "('Ġhello'), where hf_bpe decodes bytes; set the decoder to {\"type\": \"ByteLevel\"} to load it")
        if not is_byte_level(decoder):
            raise refuse(f"the decoder {describe(decoder)} is not supported; byte-level BPE decodes with ByteLevel")
        return _added_tokens(document, spelled_model, normalizers, refuse)

    def built(split: patterns.Pattern) -> BPE:
        pattern = (*normalizers, *((split,) if isinstance(split, patterns.Split) else split)) if normalizers else split
        name_or_folder = name or Path(path).parent.name or "tokenizer"
        if affixes is not None:
            return _hf_affixes.built(model, pattern, specials, affixes, name_or_folder, refuse)
        return _built(model, spelled_model, pattern, split, specials, name_or_folder, refuse)

    if spelled_model is None or confirmed_split is not None or not candidates:
        split = checked_split()
        specials, rules = settings()
        loaded = built(split)
    else:
        try:
            specials, rules = settings()
        except Exception as error:  # noqa: BLE001 - raised below, after the split's own refusal if any
            problem: Exception | None = error
        else:
            problem = None
        if problem is not None:
            checked_split()  # the split is checked first: its refusal comes before these
            raise problem
        # The split probe (a tenth of a second or more) runs while the core builds the model with the first
        # candidate split, which the probe confirms but for rare files.
        building = _InBackground(lambda: built(candidates[0]))
        try:
            split = checked_split()
        finally:
            building.join()
        loaded = building.result() if split is candidates[0] else built(split)
    absent = missing_bytes(loaded)
    if absent and model.get("unk_token") is not None:
        raise refuse(
            f"the vocabulary lacks the byte symbols {_show_bytes(absent)} and model.unk_token is set: tokenizers "
            "emits the unknown token for such bytes, which hf_bpe's byte-level models do not"
        )
    if rules:
        loaded = with_special_token_rules(loaded, rules)
    if checked and (normalizers or rules):
        reduced = _ReducedPair(document, path, lossy, split, specials, spelled_model)
        if normalizers:
            _check_normalizer(loaded, document, refuse)
            _check_pipeline(reduced, refuse)
        if rules:  # plain added tokens are matched leftmost-longest, as tokenizers does
            _check_added_tokens(reduced, sorted(loaded.special_tokens), refuse)
    in_text = bytes(byte for byte in absent if byte not in NEVER_IN_UTF8)
    if in_text:
        warnings.warn(
            f"{path}: the vocabulary lacks the byte symbols {_show_bytes(in_text)}, which UTF-8 text uses; as "
            "tokenizers does, hf_bpe drops such a byte from the text it encodes (so those ids decode to different "
            "text), and refuses raw bytes that need one",
            MissingBytesWarning, stacklevel=4,
        )
    return loaded


def _is_text(value: str) -> bool:
    """Whether ``value`` is text UTF-8 can spell (JSON can escape lone surrogates, which are not)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _added_tokens(document: dict[str, Any], spelled_model: Any, normalizers: tuple[patterns.Normalize, ...],
                  refuse: Any) -> tuple[dict[str, int], dict[str, set[str]]]:
    """The file's added tokens as special tokens (text -> the id `tokenizers` gives them) and their rules
    (see :func:`_load`, whose ``spelled_model`` holds the vocabulary when the document's model lacks it)."""
    model = document["model"]
    specials: dict[str, int] = {}
    rules: dict[str, set[str]] = {}
    vocab: dict[str, Any] = model["vocab"] if spelled_model is None and isinstance(model.get("vocab"), dict) else {}
    vocab_size = len(spelled_model) if spelled_model is not None else len(vocab)
    if spelled_model is not None:  # the vocabulary's ids of the added tokens, looked up at once
        added = document.get("added_tokens")
        # (a lone surrogate is no text and no token: left for the checks below to refuse by name)
        contents = [entry["content"] for entry in added if isinstance(entry, dict) and isinstance(entry.get("content"), str)
                    and _is_text(entry["content"])] if isinstance(added, list) else []
        vocab = {content: token_id for content, token_id in zip(contents, spelled_model.ids_of(contents)) if token_id is not None}
    file_ids: dict[int, str] = {}  # the ids the file gives its added tokens: refused when corrupt, else unused
    largest_added: int | None = None  # of the ids in specials (a running maximum: files hold thousands)
    theirs = None  # tokenizers' normalizer, where it changes the text normalized tokens are looked for in
    if any(step.kind != "prefix_space" for step in normalizers) and any(
            isinstance(entry, dict) and entry.get("normalized", not entry.get("special", False))
            for entry in document.get("added_tokens") or []):
        try:
            theirs = their_normalizer(document.get("normalizer"))
        except Exception as error:  # noqa: BLE001 - any failure of tokenizers to read it is the file's
            raise refuse(f"tokenizers cannot read the normalizer: {error}") from None
    for entry in document.get("added_tokens") or []:
        content, token_id = entry["content"], entry["id"]
        if content in specials:
            raise refuse(f"added token {content!r} appears twice")
        if not isinstance(token_id, int) or isinstance(token_id, bool) or not 0 <= token_id < 2**31:
            raise refuse(f"added token {content!r} has the id {token_id!r}, out of range (an int from 0 to 2**31 - 1)")
        if token_id in file_ids:
            raise refuse(f"added tokens {file_ids[token_id]!r} and {content!r} both have id {token_id} in the file")
        file_ids[token_id] = content
        token_id = _added_token_id(content, vocab.get(content), largest_added, vocab_size)
        if isinstance(token_id, int) and (largest_added is None or token_id > largest_added):
            largest_added = token_id
        normalized = entry.get("normalized", not entry.get("special", False))
        spelled = try_str_to_token(content)
        if spelled is not None and spelled != content.encode():
            raise refuse(
                f"added token {content!r} is spelled in the byte-level alphabet: tokenizers' ByteLevel decoder turns it "
                f"into the bytes {spelled!r}, not its text, which hf_bpe's special tokens do not reproduce"
            )
        if normalized and theirs is not None:
            spelling = theirs.normalize_str(content)
            decoded = try_str_to_token(spelling) or spelling.encode()
            if decoded != content.encode():
                raise refuse(
                    f"added token {content!r} has normalized = true and the normalizer spells it {spelling!r}: "
                    f"tokenizers decodes it so (as the bytes {decoded!r}), not as its text, which hf_bpe's special "
                    "tokens do not reproduce; give it normalized = false"
                )
        specials[content] = token_id
        rules[content] = {flag for flag in ("lstrip", "rstrip", "single_word") if entry.get(flag)} | \
            ({"normalized"} if normalized else set())
    return specials, _added_token_rules(rules, refuse, theirs)


def _built(model: dict[str, Any], spelled_model: Any, pattern: Any, split: patterns.Pattern, specials: dict[str, int],
           name: str, refuse: Any) -> BPE:
    """The model of the file's vocabulary and merges (see :func:`_load`)."""
    ignore_merges = bool(model.get("ignore_merges", False))
    try:
        # The core reads a regular file at once (a second or more in Python for 100,000s of tokens); anything
        # it leaves (None) is read below, which says what is wrong.
        if spelled_model is not None:
            loaded = _rules.from_tokenizer_json(spelled_model, pattern, specials, ignore_merges=ignore_merges, name=name)
            if loaded is None:
                raise _Irregular(split)
            return loaded
        loaded = _rules.from_spelled_merges(model["vocab"], model["merges"], pattern, specials,
                                            ignore_merges=ignore_merges, name=name) \
            if isinstance(model.get("vocab"), dict) and isinstance(model.get("merges"), list) else None
        return loaded if loaded is not None else _read_merges(model, pattern, specials, ignore_merges, name, refuse)
    except InvalidVocabularyError as error:
        raise refuse(str(error)) from None
    except ValueError as error:  # the split pattern
        raise refuse(f"the split pattern cannot be used: {error}") from None


class _InBackground:
    """A call run on another thread (the core builds without the GIL); :meth:`join` waits for it,
    :meth:`result` then returns its value or raises its exception."""

    def __init__(self, work: Callable[[], BPE]) -> None:
        self._value: BPE | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = work()
            except BaseException as error:  # noqa: BLE001 - handed to the caller, which raises it
                self._error = error

        self._thread = threading.Thread(target=run, name="hf_bpe-load", daemon=True)
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    def result(self) -> BPE:
        self.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value


def _read_merges(model: dict[str, Any], pattern: Any, specials: dict[str, int], ignore_merges: bool, name: str,
                 refuse: Any) -> BPE:
    """The model of a ``tokenizer.json``'s ``model.vocab`` and ``model.merges`` that the core's reading
    left (:func:`hf_bpe._rules.from_spelled_merges`), read entry by entry to say what is wrong; or, when
    nothing is, the same model as the core's reading."""
    added_ids = set(specials.values())
    vocab: dict[bytes, int] = {}
    spelled_ids: dict[str, int] = {}
    if not isinstance(model.get("vocab"), dict):
        raise refuse(f"model.vocab is {type(model.get('vocab')).__name__}, not a mapping of tokens to ids")
    for spelled, token_id in model["vocab"].items():
        if not isinstance(token_id, int) or isinstance(token_id, bool):
            raise refuse(f"vocab entry {spelled!r} has the id {token_id!r}, not an integer")
        if token_id in added_ids:
            if specials.get(spelled) != token_id:
                raise refuse(f"vocab entry {spelled!r} has id {token_id}, which is the id of another added token")
            continue
        if spelled in specials:
            raise refuse(f"added token {spelled!r} has id {specials[spelled]} but vocab gives it {token_id}")
        token = try_str_to_token(spelled)
        if token is None:
            continue  # not byte-level text: ByteLevel input never forms it
        vocab[token] = token_id
        spelled_ids[spelled] = token_id

    merges: list[tuple[bytes, bytes]] = []
    for number, merge in enumerate(model.get("merges") or []):
        pair = merge.split(" ", 1) if isinstance(merge, str) else merge
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(part, str) for part in pair):
            raise refuse(f"merge {number} is {merge!r:.80}; expected \"left right\" or [left, right]")
        left, right = pair
        if left in specials or right in specials:
            continue  # the added-token matcher cuts this text out first: the merge can never apply
        missing = [part for part in (left, right) if part not in model["vocab"]]
        if missing:
            raise refuse(f"merge {number} ({left!r} {right!r}) names {missing[0]!r}, which the vocab lacks")
        if left not in spelled_ids or right not in spelled_ids:
            continue  # a token outside the byte-level alphabet: never formed, so never merged
        if left + right not in spelled_ids:
            formed = left + right
            if formed in specials and specials[formed] == model["vocab"].get(formed) and str_to_token(formed) == formed.encode():
                # an added token that merges also form (from text the normalizer rewrote into it, since the
                # added-token matcher cuts the text itself out first): the model keeps it as a token too
                vocab[formed.encode()] = spelled_ids[formed] = specials[formed]
            else:
                raise refuse(f"merge {number} ({left!r} {right!r}) makes {formed!r}, which the vocab lacks")
        merges.append((str_to_token(left), str_to_token(right)))
    loaded = BPE.from_merges(vocab, merges, pattern, specials, ignore_merges=ignore_merges, drop_missing_bytes=True,
                             name=name)
    if not missing_bytes(loaded) and _rules.rank_rule_difference(loaded) is None:
        return BPE(vocab, pattern, specials, name=name)
    return loaded


PIPELINE_CHECK_MERGES = 3000
"""How many of a file's merges the pipeline check keeps (see :func:`_check_pipeline`)."""


def _reduced(document: dict[str, Any], added_ids: dict[str, int], merges: int = PIPELINE_CHECK_MERGES,
             spelled_model: Any = None) -> dict[str, Any]:
    """``document`` with its model cut to its first ``merges`` merges, the tokens they use and form, every
    token of one character (the byte symbols) and the added tokens' entries: the same steps around a
    small model. Ids stay as they are: ``added_ids`` are the ids the whole file gives its added tokens
    (:func:`_added_token_id`), which the reduced vocabulary pins, as tokenizers would number them after it.
    With ``spelled_model`` (see :func:`_load`), the core cuts the vocabulary and merges it holds, as here."""
    model = document["model"]
    if _hf_affixes.has_affixes(model):
        return dict(document, model=_hf_affixes.reduced(model, added_ids, merges), post_processor=None,
                    truncation=None, padding=None)
    if spelled_model is not None:
        kept, kept_merges = spelled_model.reduced(added_ids, merges)
        return dict(document, model=dict(model, vocab=kept, merges=kept_merges), post_processor=None,
                    truncation=None, padding=None)
    vocab, listed = model["vocab"], model.get("merges") or []
    kept = {spelled: token_id for spelled, token_id in vocab.items() if len(spelled) == 1}
    kept.update(added_ids)
    kept_merges = []
    for merge in listed[:merges]:
        pair = merge.split(" ", 1) if isinstance(merge, str) else merge
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) and part in vocab for part in pair) \
                and pair[0] + pair[1] in vocab:
            kept_merges.append(merge)
            kept.update({spelled: vocab[spelled] for spelled in (*pair, pair[0] + pair[1])})
    return dict(document, model=dict(model, vocab=kept, merges=kept_merges), post_processor=None, truncation=None,
                padding=None)


def _added_token_id(content: str, in_vocab: Any, largest: int | None, vocab_size: int) -> Any:
    """The id `tokenizers` gives an added token, whatever the file's ``"id"`` says: its id in the vocabulary
    (``in_vocab``, None when it is not there) if it is there, else the next after the vocabulary's size or
    after the added tokens before it (``largest``: the largest id of those, None when there are none).

    >>> _added_token_id("<x>", None, None, 2), _added_token_id("<y>", None, 7, 2), _added_token_id("a", 0, 7, 2)
    (2, 8, 0)
    """
    if in_vocab is not None:
        return in_vocab
    if largest is None:
        return vocab_size
    return largest + 1 if largest >= vocab_size or vocab_size == 0 else vocab_size


def _added_token_rules(rules: dict[str, set[str]], refuse: Any, normalizer: Any = None) -> dict[str, set[str]]:
    """The added tokens' rules as :func:`hf_bpe.model.with_special_token_rules` takes them: only those
    with some (``normalized`` only when some tokens lack it or the file's normalizer (``normalizer``,
    `tokenizers`' own, given when it changes text) rewrites the text they are looked for in: `tokenizers` looks for normalized
    tokens after the others, which otherwise changes nothing when all or none are). Refused: a token
    that strips the whitespace after it where a token looked for in the same text starts with
    whitespace, as written or (``normalized``) as normalized (`tokenizers` then gives overlapping
    tokens, or fails)."""
    if normalizer is None and all("normalized" in names for names in rules.values()):
        rules = {text: names - {"normalized"} for text, names in rules.items()}
    for later in (True, False):
        phase = [text for text, names in rules.items() if ("normalized" in names) == later]
        stripping = next((text for text in phase if "rstrip" in rules[text]), None)
        if stripping is not None and later and normalizer is not None:
            spaced = next((text for text in phase if normalizer.normalize_str(text)[:1].isspace()), None)
        else:
            spaced = next((text for text in phase if text[:1].isspace()), None)
        if stripping is not None and spaced is not None:
            raise refuse(
                f"added token {stripping!r} has rstrip and added token {spaced!r} starts with whitespace: tokenizers "
                "then matches overlapping text, which hf_bpe does not reproduce"
            )
    return {text: names for text, names in rules.items() if names}


_ADDED_TOKEN_CONTEXT = [" ", "  ", "\n", "\t", "\u3000", "\xa0", "a", "Z", "é", "1", "_", "\u0301", "中", ".", "-",
                        "<", ">", "\u200d", ""]


def added_token_probe_texts(tokens: Sequence[str], count: int = 300, seed: int = 0) -> list[str]:
    """Texts that put the added ``tokens`` next to each other, to whitespace of several kinds, word
    characters (letters, digits, ``_``, a combining mark) and punctuation: where stripping and
    single-word rules decide.

    >>> texts = added_token_probe_texts(["<x>"], 5)
    >>> len(texts), all("<x>" in text for text in texts)
    (5, True)
    """
    import random

    rng = random.Random(seed)
    tokens = list(tokens)
    texts = []
    for _ in range(count):
        parts = [rng.choice(tokens)]
        for _ in range(rng.randint(0, 6)):
            parts.append(rng.choice(tokens) if rng.random() < 0.3 else rng.choice(_ADDED_TOKEN_CONTEXT))
        rng.shuffle(parts)
        texts.append("".join(parts))
    return texts


class _ReducedPair:
    """The file's steps around a reduced model (:func:`_reduced`) in `tokenizers` and here, made once for the
    checks of a load: building the whole vocabulary in `tokenizers` too would double the load's time. What a
    load must confirm is how the file's own steps normalize, cut, match added tokens and map offsets back;
    that merging equals `tokenizers`' merging on every vocabulary is the merge engine's, proven by the test
    suite."""

    def __init__(self, document: dict[str, Any], path: str | os.PathLike[str], lossy: bool,
                 split: patterns.Pattern, added_ids: dict[str, int], spelled_model: Any = None) -> None:
        reduced = _reduced(document, added_ids, spelled_model=spelled_model)
        self.theirs = Tokenizer.from_str(json.dumps(reduced))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MissingBytesWarning)  # the whole file's warning is given once
            self.ours = _load(reduced, path, name=None, lossy=lossy, checked=False, confirmed_split=split)

    def first_difference(self, texts: list[str]) -> str | None:
        """How the first of ``texts`` that differs in ids or starts is encoded by each, or None."""
        for text, encoding in zip(texts, self.theirs.encode_batch(texts, add_special_tokens=False)):
            ids, starts = self.ours.encode_with_offsets(text, allowed_special="all")
            if ids != encoding.ids or starts != [start for start, _ in encoding.offsets]:
                return (f"{text!r:.80} encodes to {ids[:12]} (starting at {starts[:12]}) here but to "
                        f"{encoding.ids[:12]} (offsets {encoding.offsets[:12]}) in tokenizers, with the file's first "
                        f"{PIPELINE_CHECK_MERGES} merges")
        return None


def _check_added_tokens(reduced: _ReducedPair, tokens: list[str], refuse: Any) -> None:
    """Refuse the file unless ids and starts of texts full of its added tokens equal `tokenizers`'."""
    difference = reduced.first_difference(added_token_probe_texts(tokens))
    if difference is not None:
        raise refuse(f"hf_bpe cannot load the added tokens of this file exactly: {difference}; please report this")


def _check_pipeline(reduced: _ReducedPair, refuse: Any) -> None:
    """Refuse the file unless ids and offsets of a sample of probe texts equal `tokenizers`'."""
    difference = reduced.first_difference(list(split_probe_texts()[::7]) + probe_texts(200, seed=3))
    if difference is not None:
        raise refuse(f"hf_bpe cannot load this file exactly: {difference}; please report this")


def _show_bytes(absent: bytes) -> str:
    return ", ".join(f"0x{byte:02X}" for byte in absent)


def _check_normalizer(loaded: BPE, document: dict[str, Any], refuse: Any) -> None:
    """Refuse the file unless our normalizer rewrites the probe texts as `tokenizers` does."""
    try:
        difference = normalizer_difference(loaded, document.get("normalizer"), split_probe_texts(),
                                           prefix_space=patterns.Normalize("prefix_space") in
                                           patterns.normalizers_of(loaded.pattern))
    except Exception as error:  # noqa: BLE001 - whatever tokenizers raises, the file is refused with it
        raise refuse(f"tokenizers cannot read the normalizer: {error}") from None
    if difference is not None:
        raise refuse(f"hf_bpe cannot load the normalizer {describe(document.get('normalizer'))} exactly: {difference}")
