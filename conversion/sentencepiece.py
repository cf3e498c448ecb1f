"""SentencePiece ``.model`` files (BPE models), read and written with SentencePiece's own protobuf
definitions (``sentencepiece.sentencepiece_model_pb2``, which needs the ``protobuf`` package).

A ``.model`` file is a ``ModelProto``: pieces (text, score, type), a ``TrainerSpec`` (model type,
byte fallback, unknown surface) and a ``NormalizerSpec`` (precompiled character map, dummy prefix,
whitespace handling). :func:`load` turns a BPE model into an :class:`hf_bpe.BPE` whose
``encode_ordinary(text)`` equals ``SentencePieceProcessor.encode(text)`` and whose ``decode`` equals
``SentencePieceProcessor.decode``; the normalizer, including ``nmt_nfkc``'s character map, runs in
the Rust core exactly as SentencePiece runs it. Unigram (and word/char) models are refused: they are
not BPE.

:func:`save` writes SentencePiece models back. A byte-level model (split pattern, byte symbols,
rank or list merges) is not expressible as SentencePiece BPE and is refused unless ``lossy=True``;
see :func:`save` for what the lossy file changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hf_bpe import _rules
from hf_bpe._io import atomic_write, read_file
from hf_bpe.errors import ConversionError, InvalidVocabularyError, TokenizerFileError
from hf_bpe.model import BPE, as_model
from hf_bpe.sentencepiece_bpe import BYTE, CONTROL, NORMAL, UNKNOWN, Piece, SentencePieceSpec

MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
BPE_MODEL_TYPE = 2


def _protobuf() -> Any:
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"reading and writing SentencePiece .model files needs the sentencepiece and protobuf packages "
            f"({error}); pip install sentencepiece protobuf"
        ) from None
    return sentencepiece_model_pb2


def read_proto(model_file: str | os.PathLike[str]) -> Any:
    """Parse ``model_file`` as a ``ModelProto``, raising :class:`~hf_bpe.errors.TokenizerFileError`
    when it does not parse or lacks its specs."""
    pb2 = _protobuf()
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

    data = read_file(model_file, decompress=False)
    proto = pb2.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as error:
        raise TokenizerFileError(model_file, f"not a SentencePiece model: the protobuf does not parse ({error})") from None
    if not proto.pieces or not proto.HasField("trainer_spec") or not proto.HasField("normalizer_spec"):
        raise TokenizerFileError(
            model_file, "not a complete SentencePiece model: pieces, trainer_spec or normalizer_spec is missing "
            "(a truncated or foreign file)"
        )
    return proto


def load(model_file: str | os.PathLike[str], *, name: str | None = None) -> BPE:
    """Load a SentencePiece BPE ``.model`` file.

    >>> import os, tempfile, hf_bpe
    >>> from hf_bpe.sentencepiece_bpe import Piece, SentencePieceSpec, UNKNOWN
    >>> spec = SentencePieceSpec((Piece("<unk>", 0, UNKNOWN), Piece("▁", -1), Piece("a", -2), Piece("▁a", -3)))
    >>> path = save(hf_bpe.BPE.from_sentencepiece(spec), os.path.join(tempfile.mkdtemp(), "tiny.model"))
    >>> model = load(path)
    >>> model.encode_ordinary("a a"), model.decode([3, 3])
    ([3, 3], 'a a')
    """
    proto = read_proto(model_file)
    trainer, normalizer = proto.trainer_spec, proto.normalizer_spec
    if trainer.model_type != BPE_MODEL_TYPE:
        kind = MODEL_TYPES.get(trainer.model_type, f"type-{trainer.model_type}")
        raise TokenizerFileError(
            model_file,
            f"is a {kind} SentencePiece model; hf_bpe reads BPE models only (a {kind} model does not "
            "segment text by merges, so no BPE can reproduce it)",
        )
    if trainer.treat_whitespace_as_suffix:
        raise TokenizerFileError(model_file, "treat_whitespace_as_suffix is not supported")
    if proto.HasField("denormalizer_spec") and proto.denormalizer_spec.precompiled_charsmap:
        raise TokenizerFileError(model_file, "a denormalizer (decode-time character map) is not supported")
    # protobuf hands strings that are not UTF-8 (proto2 does not check them) over as bytes.
    for what, value in [*((f"piece {index}", piece.piece) for index, piece in enumerate(proto.pieces)),
                        ("trainer_spec.unk_surface", trainer.unk_surface), ("normalizer_spec.name", normalizer.name)]:
        if not isinstance(value, str):
            raise TokenizerFileError(model_file, f"{what} is not UTF-8 text: {value!r:.80}")
    spec = SentencePieceSpec(
        pieces=tuple(Piece(piece.piece, piece.score, piece.type) for piece in proto.pieces),
        byte_fallback=trainer.byte_fallback,
        unk_surface=trainer.unk_surface,
        normalizer_name=normalizer.name,
        charsmap=normalizer.precompiled_charsmap,
        add_dummy_prefix=normalizer.add_dummy_prefix,
        remove_extra_whitespaces=normalizer.remove_extra_whitespaces,
        escape_whitespaces=normalizer.escape_whitespaces,
        trainer_spec=trainer.SerializeToString(),
    )
    try:
        return BPE.from_sentencepiece(spec, name=name or Path(model_file).name.split(".")[0])
    except InvalidVocabularyError as error:
        raise TokenizerFileError(model_file, str(error)) from None


def save(model: BPE, model_file: str | os.PathLike[str], *, lossy: bool = False) -> Path:
    """Write ``model`` as a SentencePiece ``.model`` file (atomically) that
    ``SentencePieceProcessor`` loads and that encodes and decodes as ``model`` does.

    A byte-level model is refused with :class:`~hf_bpe.errors.ConversionError`: SentencePiece has
    no split pattern and merges characters by score. With ``lossy=True`` it is written anyway, each
    id kept: single bytes become byte pieces (``byte_fallback``), tokens that are UTF-8 text become
    pieces scored by merge order, special tokens and ids without a token become
    control pieces, ``<unk>`` is appended, and spaces are not escaped (no dummy prefix either). The
    file then differs in what it encodes: merges
    cross the pattern's piece boundaries, tokens that are not whole characters are never produced,
    and there is no whole-piece rule.
    """
    model = as_model(model)
    _rules.check_no_word_affixes(model, "a SentencePiece .model")
    spec = model.sentencepiece
    if spec is not None and spec.tokenizers_normalizer:
        raise ConversionError(
            f"{model!r} normalizes with tokenizers' normalizer ({', '.join(step.kind for step in spec.tokenizers_normalizer)}"
            "), which a SentencePiece .model cannot say: tokenizers applies a Precompiled character map to each "
            "grapheme cluster, SentencePiece takes the longest rule at each position, and its other steps are not "
            "SentencePiece's; save it as tokenizer.json instead"
        )
    if spec is not None and (spec.metaspace is not None or spec.metaspace_split):
        raise ConversionError(
            f"{model!r} follows tokenizers' Metaspace pre-tokenizer (prepend_scheme {spec.metaspace or 'always'!r}"
            f"{', split' if spec.metaspace_split else ''}), which a SentencePiece .model cannot say (its dummy prefix "
            "goes before every text, its merges cross every \u2581); save it as tokenizer.json instead"
        )
    if spec is None:
        if not lossy:
            raise ConversionError(
                f"a SentencePiece BPE model cannot express {model!r} exactly: SentencePiece has no split pattern "
                f"(the pattern {model.pattern!r} would be dropped, so merges would cross its pieces), it merges "
                "characters by score rather than bytes by rank or list, and never emits tokens that are not "
                "whole UTF-8 characters. Pass lossy=True to write an approximation (same ids; see the docs)."
            )
        spec = byte_level_spec(model)
    return atomic_write(model_file, proto_of(spec).SerializeToString())


def proto_of(spec: SentencePieceSpec) -> Any:
    """The ``ModelProto`` of ``spec``; a loaded file's trainer settings are kept."""
    pb2 = _protobuf()
    proto = pb2.ModelProto()
    for piece in spec.pieces:
        entry = proto.pieces.add()
        entry.piece = piece.text
        entry.score = piece.score
        entry.type = piece.type
    trainer = proto.trainer_spec
    if spec.trainer_spec:
        trainer.ParseFromString(spec.trainer_spec)
    else:
        ids = {piece.text: index for index, piece in enumerate(spec.pieces) if piece.type in (CONTROL, UNKNOWN)}
        trainer.unk_id = spec.unk_id if spec.unk_id is not None else 0
        trainer.bos_id = ids.get("<s>", -1)
        trainer.eos_id = ids.get("</s>", -1)
        trainer.pad_id = ids.get("<pad>", -1)
    trainer.model_type = BPE_MODEL_TYPE
    trainer.vocab_size = len(spec.pieces)
    trainer.byte_fallback = spec.byte_fallback
    trainer.unk_surface = spec.unk_surface
    normalizer = proto.normalizer_spec
    normalizer.name = spec.normalizer_name
    normalizer.precompiled_charsmap = spec.charsmap
    normalizer.add_dummy_prefix = spec.add_dummy_prefix
    normalizer.remove_extra_whitespaces = spec.remove_extra_whitespaces
    normalizer.escape_whitespaces = spec.escape_whitespaces
    return proto


def byte_level_spec(model: BPE) -> SentencePieceSpec:
    """The lossy SentencePiece approximation of a byte-level model (see :func:`save`)."""
    ranks = model.mergeable_ranks
    order = {left + right: line for line, (left, right) in enumerate(model.merges)}
    by_id: dict[int, Piece] = {}
    texts: set[str] = set()
    for token, token_id in ranks.items():
        if len(token) == 1:
            by_id[token_id] = Piece(f"<0x{token[0]:02X}>", 0.0, BYTE)
            continue
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if not text or text in texts:
            by_id[token_id] = Piece(f"<token {token_id}: {token.hex(' ')}>", 0.0, CONTROL)
            continue
        texts.add(text)
        line = order.get(token, len(order) + token_id)
        by_id[token_id] = Piece(text, -float(line), NORMAL)
    for text, token_id in model.special_tokens.items():
        by_id[token_id] = Piece(text, 0.0, CONTROL)
    size = max(by_id, default=-1) + 1
    pieces = [by_id.get(token_id, Piece(f"<unused id {token_id}>", 0.0, CONTROL)) for token_id in range(size)]
    used = {piece.text for piece in pieces}
    unk = next(text for text in ("<unk>", "<unk_>", "<hf_bpe unk>") if text not in used)
    pieces.append(Piece(unk, 0.0, UNKNOWN))
    return SentencePieceSpec(
        pieces=tuple(pieces),
        byte_fallback=True,
        normalizer_name="identity",
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        # Spaces stay spaces: a space that is no piece then falls back to the byte piece of 0x20,
        # the model's own space token, where an escaped U+2581 would fall back to its three bytes.
        escape_whitespaces=False,
    )


__all__ = ["ConversionError", "byte_level_spec", "load", "proto_of", "read_proto", "save"]
