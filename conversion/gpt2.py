"""GPT-2's ``encoder.json`` (token string -> id) and ``vocab.bpe`` (merges in priority order).

Token strings use GPT-2's byte-to-unicode alphabet. ``vocab.bpe`` starts with a ``#version`` line,
then one merge per line: two token strings separated by a space. Only listed merges apply, in list
order, as in transformers' ``GPT2Tokenizer`` (HF ``tokenizers``' BPE); a merges list that provably
encodes like tiktoken's rank rule (GPT-2's own does) loads as a rank model. The pattern is GPT-2's
and is not in the files. transformers calls the same files ``vocab.json`` and ``merges.txt``, the
names :func:`save` writes.

Special tokens: ``<|endoftext|>`` (and ``<|startoftext|>``) found in ``encoder.json`` are special,
and so is every token a ``tokenizer_config.json`` next to the files lists in
``added_tokens_decoder`` (what :func:`save` writes); ``special_tokens=`` overrides both: a mapping of
texts to ids, or a list of texts as CS336's ``Tokenizer.from_files(vocab_filepath, merges_filepath,
special_tokens)`` takes them (a text the vocabulary holds keeps its id, the others follow the largest).

GPT-2's original ``encoder.py`` merges every occurrence of the best pair in one pass; that differs
from merging one pair at a time only for merges lists in which a merge uses a token that only a
later line makes, which no trained list has.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from hf_bpe import _rules, patterns
from hf_bpe._byte_level import str_to_token, token_to_str
from hf_bpe._io import atomic_write, read_json, read_text, replacing_folder
from hf_bpe.errors import ConversionError, InvalidVocabularyError, TokenizerFileError
from hf_bpe.model import BPE, as_model

__all__ = [
    "CONFIG_FILE", "ENDOFTEXT", "LEGACY_SPECIALS", "MERGES_FILE", "MERGES_HEADER", "VOCAB_FILE", "load",
    "read_encoder", "save"
]

ENDOFTEXT = "<|endoftext|>"
LEGACY_SPECIALS = (ENDOFTEXT, "<|startoftext|>")
VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
CONFIG_FILE = "tokenizer_config.json"
MERGES_HEADER = "#version: 0.2"


def read_encoder(path: str | os.PathLike[str]) -> dict[str, int]:
    """``encoder.json`` (``vocab.json``) as it is: GPT-2's token strings and their ids."""
    encoder = read_json(path)
    if not isinstance(encoder, dict) or not all(
        isinstance(token, str) and isinstance(rank, int) and not isinstance(rank, bool)
        for token, rank in encoder.items()
    ):
        raise TokenizerFileError(path, "expected a JSON object mapping token strings to integer ids")
    return encoder


def _numbered(texts: Iterable[str], encoder: Mapping[str, int]) -> dict[str, int]:
    """Ids for special tokens given as texts: a text ``encoder`` holds (in GPT-2's spelling) keeps its
    id, the others follow the largest id in the order given."""
    specials: dict[str, int] = {}
    next_id = max(encoder.values(), default=-1) + 1
    for text in [texts] if isinstance(texts, str) else texts:
        if not isinstance(text, str) or not text:
            raise InvalidVocabularyError(f"special token {text!r:.80} is not a non-empty str")
        if text in specials:
            raise InvalidVocabularyError(f"special token {text!r:.80} is given twice")
        known = encoder.get(token_to_str(text.encode("utf-8")))
        specials[text] = next_id if known is None else known
        next_id += known is None
    return specials


def _read_merges(path: str | os.PathLike[str]) -> list[tuple[int, str, str]]:
    """``(line number, left, right)`` for each merge line."""
    lines = read_text(path).split("\n")
    merges = []
    for number, line in enumerate(lines, start=1):
        if (number == 1 and line.startswith("#version")) or not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise TokenizerFileError(path, f"expected two tokens per merge line, got {line[:80]!r}", line=number)
        merges.append((number, fields[0], fields[1]))
    return merges


def _configured_specials(folder: Path) -> dict[str, int] | None:
    """Special tokens listed in ``tokenizer_config.json``'s ``added_tokens_decoder``, if present."""
    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        return None
    config = read_json(config_path)
    try:
        added = config.get("added_tokens_decoder")
        if added is None:
            return None
        specials = {entry["content"]: int(token_id) for token_id, entry in added.items()}
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise TokenizerFileError(config_path, f"unreadable added_tokens_decoder: {error}") from None
    for text in specials:
        if not isinstance(text, str) or not text:
            raise TokenizerFileError(config_path, f"added token {text!r:.80} is not a non-empty string")
    return specials


def load(
    encoder_json: str | os.PathLike[str],
    vocab_bpe: str | os.PathLike[str],
    special_tokens: Mapping[str, int] | Iterable[str] | None = None,
    *,
    pattern: str = "gpt2",
    name: str | None = None,
) -> BPE:
    """Load GPT-2 style files (``encoder.json``/``vocab.bpe`` or ``vocab.json``/``merges.txt``).

    ``special_tokens`` maps texts to ids, or lists texts (CS336's ``Tokenizer.from_files(vocab,
    merges, special_tokens)``): one the vocabulary holds keeps its id, the others follow the largest.
    Malformed files raise :class:`~hf_bpe.errors.TokenizerFileError` naming the file (and line):
    bad JSON, token strings outside the byte-to-unicode alphabet, merges naming tokens the encoder
    lacks or making tokens it lacks.

    >>> import conversion.gpt2, hf_bpe._encodings, tempfile
    >>> encoder, _ = hf_bpe._encodings.find_file(hf_bpe._encodings.ENCODER_JSON)
    >>> merges, _ = hf_bpe._encodings.find_file(hf_bpe._encodings.VOCAB_BPE)
    >>> gpt2 = conversion.gpt2.load(encoder, merges)
    >>> gpt2.encode("hello world"), gpt2.kind
    ([31373, 995], 'ranks')
    >>> folder = conversion.gpt2.save(gpt2, tempfile.mkdtemp())  # vocab.json, merges.txt
    >>> cs336 = conversion.gpt2.load(folder / "vocab.json", folder / "merges.txt", ["<|endoftext|>", "<|pad|>"])
    >>> cs336.special_tokens
    {'<|endoftext|>': 50256, '<|pad|>': 50257}
    """
    encoder = read_encoder(encoder_json)
    merges = _read_merges(vocab_bpe)
    if special_tokens is not None and not isinstance(special_tokens, Mapping):
        special_tokens = _numbered(special_tokens, encoder)
    if special_tokens is None:
        configured = _configured_specials(Path(encoder_json).parent)
        special_tokens = configured if configured is not None else {
            text: encoder[text] for text in LEGACY_SPECIALS if text in encoder
        }
    specials = dict(special_tokens)
    vocab: dict[bytes, int] = {}
    special_spellings = {token_to_str(text.encode("utf-8")): token_id for text, token_id in specials.items()}
    for spelled, token_id in encoder.items():
        if specials.get(spelled) == token_id or special_spellings.get(spelled) == token_id:
            continue
        try:
            vocab[str_to_token(spelled)] = token_id
        except KeyError:
            raise TokenizerFileError(
                encoder_json, f"token {spelled!r} is not spelled in GPT-2's byte-to-unicode alphabet"
            ) from None
    pairs: list[tuple[bytes, bytes]] = []
    for number, left, right in merges:
        for part in (left, right):
            if part not in encoder or specials.get(part) == encoder[part] or special_spellings.get(part) == encoder[part]:
                raise TokenizerFileError(
                    vocab_bpe, f"merge {left!r} {right!r} names {part!r}, which is not a token of "
                    f"{os.fspath(encoder_json)}", line=number,
                )
        pair = (str_to_token(left), str_to_token(right))
        if pair[0] + pair[1] not in vocab:
            raise TokenizerFileError(
                vocab_bpe, f"merge {left!r} {right!r} makes {left + right!r}, which {os.fspath(encoder_json)} "
                "lacks (encoder and merges do not match)", line=number,
            )
        pairs.append(pair)
    try:
        model = BPE.from_merges(vocab, pairs, pattern, specials, name=name or "gpt2")
    except InvalidVocabularyError as error:
        raise TokenizerFileError(encoder_json, str(error)) from None
    if _rules.rank_rule_difference(model) is None:
        return BPE(vocab, pattern, specials, name=model.name)
    return model


def save(model: BPE, directory: str | os.PathLike[str], *, lossy: bool = False) -> Path:
    """Write ``model`` as GPT-2 files in ``directory``: ``vocab.json`` (``encoder.json``),
    ``merges.txt`` (``vocab.bpe``) and a ``tokenizer_config.json`` listing the special tokens,
    which ``GPT2Tokenizer.from_pretrained(directory)`` loads. The three files replace those of
    ``directory`` together (see :func:`hf_bpe._io.replacing_folder`; other files in it are kept), and
    only after every check passed. Returns the directory.

    Refused with :class:`~hf_bpe.errors.ConversionError`, unless ``lossy=True``, when the files
    would encode differently: the pattern is not GPT-2's (GPT-2 files carry none, and
    ``GPT2Tokenizer`` always splits with GPT-2's), or the merges list (a rank model's is recovered
    from its ranks) does not reproduce the model without a whole-piece rule. SentencePiece models
    are always refused.

    >>> import conversion.gpt2, hf_bpe, tempfile
    >>> model = hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, "gpt2")
    >>> folder = conversion.gpt2.save(model, tempfile.mkdtemp())
    >>> (folder / "merges.txt").read_text()
    '#version: 0.2\\na b\\n'
    """
    model = as_model(model)
    _rules.check_not_sentencepiece(model, "GPT-2 files", "GPT-2 merges bytes by a list")
    _rules.check_no_word_affixes(model, "GPT-2 files")
    _rules.check_no_special_token_rules(model, "GPT-2 files", lossy=lossy)
    _rules.check_has_text_bytes(model, "GPT-2 files", "GPT2Tokenizer gives such a byte's symbol the unknown "
                                "token's id (or none)")
    if patterns.resolve(model.pattern) != patterns.GPT2 and not lossy:
        raise ConversionError(
            f"GPT-2 files cannot hold the split pattern of {model!r} ({model.pattern!r}): they carry none and "
            "GPT2Tokenizer always splits with GPT-2's. Pass lossy=True to write them anyway (and load them "
            "with pattern=...)."
        )
    difference = _rules.merge_rule_difference(model, False)
    if difference is not None and not lossy:
        raise ConversionError(
            f"GPT-2 files cannot hold {model!r} exactly: applying its merges list in order, without "
            f"tiktoken's whole-piece rule, encodes some text differently ({difference}). Pass lossy=True "
            "to write them anyway."
        )
    ranks = model.mergeable_ranks
    encoder = {token_to_str(token): token_id for token, token_id in ranks.items()}
    for text, token_id in model.special_tokens.items():
        if text in encoder and encoder[text] != token_id:
            raise ConversionError(
                f"special token {text!r} (id {token_id}) is spelled like the ordinary token {encoder[text]}; "
                "encoder.json cannot give one string two ids"
            )
        encoder[text] = token_id
    encoder = dict(sorted(encoder.items(), key=lambda item: item[1]))
    merges = "".join(f"{token_to_str(left)} {token_to_str(right)}\n" for left, right in model.merges)
    specials = sorted(model.special_tokens.items(), key=lambda item: item[1])
    config = {
        "tokenizer_class": "GPT2Tokenizer",
        "model_max_length": 1024,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(token_id): {"content": text, "special": True, "normalized": False, "lstrip": False,
                            "rstrip": False, "single_word": False}
            for text, token_id in specials
        },
    }
    if ENDOFTEXT in model.special_tokens:
        config.update(bos_token=ENDOFTEXT, eos_token=ENDOFTEXT, unk_token=ENDOFTEXT)
    else:
        config.update(bos_token=None, eos_token=None, unk_token=None)
    with replacing_folder(directory) as staging:
        atomic_write(staging / VOCAB_FILE, json.dumps(encoder, ensure_ascii=False))
        atomic_write(staging / MERGES_FILE, f"{MERGES_HEADER}\n{merges}")
        atomic_write(staging / CONFIG_FILE, json.dumps(config, ensure_ascii=False, indent=2))
    return Path(directory)
