"""GPT-2's ``encoder.json`` (token string -> id) and ``vocab.bpe`` (merges in rank order).

Token strings use GPT-2's byte-to-unicode alphabet. The pattern is GPT-2's and is not in the files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from hf_bpe import BPE, patterns
from hf_bpe.byte_level import str_to_token
from hf_bpe.errors import TokenizerFileError

ENDOFTEXT = "<|endoftext|>"


def _read_encoder(path: str | os.PathLike[str]) -> dict[str, int]:
    try:
        encoder = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TokenizerFileError(path, f"not valid JSON: {error}") from None
    if not isinstance(encoder, dict) or not all(
        isinstance(token, str) and isinstance(rank, int) and not isinstance(rank, bool)
        for token, rank in encoder.items()
    ):
        raise TokenizerFileError(path, "expected a JSON object mapping token strings to integer ids")
    return encoder


def _read_merges(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as error:
        raise TokenizerFileError(path, f"not UTF-8: {error}") from None
    merges = []
    for number, line in enumerate(lines, start=1):
        if (number == 1 and line.startswith("#version")) or not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise TokenizerFileError(path, f"expected two tokens per merge line, got {line[:80]!r}", line=number)
        merges.append((fields[0], fields[1]))
    return merges


def load(
    encoder_json: str | os.PathLike[str],
    vocab_bpe: str | os.PathLike[str],
    *,
    pattern: str = "gpt2",
    special_tokens: Mapping[str, int] | None = None,
    name: str | None = None,
) -> BPE:
    """Load GPT-2 style files. ``<|endoftext|>`` found in ``encoder.json`` becomes a special token
    unless ``special_tokens`` is given.

    The merges must agree with the encoder ids: merge ``n`` (0-based) creates the token with id
    ``256 + n`` after the 256 single bytes, as in GPT-2's own files. Then merge order and id order
    coincide, and tiktoken's rank rule encodes exactly as GPT-2's merge list does.
    """
    encoder = _read_encoder(encoder_json)
    merges = _read_merges(vocab_bpe)
    specials: dict[str, int] = {}
    ranks: dict[bytes, int] = {}
    for spelled, rank in encoder.items():
        if spelled in (ENDOFTEXT, "<|startoftext|>"):
            specials[spelled] = rank
            continue
        try:
            ranks[str_to_token(spelled)] = rank
        except KeyError:
            raise TokenizerFileError(
                encoder_json, f"token {spelled!r} is not spelled in GPT-2's byte-to-unicode alphabet"
            ) from None
    merged_ranks = []
    for number, (left, right) in enumerate(merges, start=1):
        try:
            token = str_to_token(left) + str_to_token(right)
        except KeyError:
            raise TokenizerFileError(
                vocab_bpe, f"merge {left!r} {right!r} is not spelled in GPT-2's byte-to-unicode alphabet", line=number + 1
            ) from None
        if token not in ranks:
            raise TokenizerFileError(
                vocab_bpe, f"merge {left!r} {right!r} makes a token that encoder.json lacks", line=number + 1
            )
        merged_ranks.append(ranks[token])
    multi_byte = sum(1 for token in ranks if len(token) > 1)
    if multi_byte != len(merges):
        raise TokenizerFileError(
            encoder_json, f"{multi_byte} multi-byte tokens but {len(merges)} merges in {os.fspath(vocab_bpe)}"
        )
    if merged_ranks != sorted(merged_ranks) or len(set(merged_ranks)) != len(merged_ranks):
        raise TokenizerFileError(
            vocab_bpe,
            "merge order differs from the encoder ids; only files whose ids follow the merge order are supported",
        )
    if special_tokens is not None:
        specials = dict(special_tokens)
    return BPE(ranks, patterns.resolve(pattern), specials, name=name or "gpt2")
