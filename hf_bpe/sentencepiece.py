"""What a SentencePiece BPE model is made of: pieces with scores and types, and the normalizer.

:class:`SentencePieceSpec` holds everything SentencePiece's own ``.model`` file says about encoding
and decoding, as plain Python data; :meth:`hf_bpe.BPE.from_sentencepiece` builds a model from it and
``conversion.sentencepiece`` reads and writes it as protobuf.

>>> spec = SentencePieceSpec(pieces=(Piece("<unk>", 0.0, UNKNOWN), Piece("▁a", -1.0, NORMAL),
...                                  Piece("▁", -2.0, NORMAL), Piece("a", -3.0, NORMAL)))
>>> spec.unk_id
0
"""

from __future__ import annotations

from dataclasses import dataclass

NORMAL = 1
UNKNOWN = 2
CONTROL = 3
USER_DEFINED = 4
UNUSED = 5
BYTE = 6
"""Piece types, numbered as in ``sentencepiece_model.proto``."""

TYPE_NAMES = {NORMAL: "NORMAL", UNKNOWN: "UNKNOWN", CONTROL: "CONTROL", USER_DEFINED: "USER_DEFINED",
              UNUSED: "UNUSED", BYTE: "BYTE"}

DEFAULT_UNK_SURFACE = " \u2047 "
"""What SentencePiece decodes ``<unk>`` to unless the model says otherwise."""


@dataclass(frozen=True)
class Piece:
    """One vocabulary entry; its id is its position in :attr:`SentencePieceSpec.pieces`."""

    text: str
    score: float
    type: int = NORMAL


@dataclass(frozen=True)
class SentencePieceSpec:
    """A SentencePiece BPE model, as the parts of its ``ModelProto`` that shape encoding.

    ``charsmap`` is the normalizer's precompiled character map (empty for the ``identity``
    normalizer); ``normalizer_name`` is kept for writing the file back. ``trainer_spec`` holds the
    serialized ``TrainerSpec`` of a loaded file (training settings, kept so a round trip preserves
    them); it does not affect encoding.
    """

    pieces: tuple[Piece, ...]
    byte_fallback: bool = False
    unk_surface: str = DEFAULT_UNK_SURFACE
    normalizer_name: str = "identity"
    charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = False
    escape_whitespaces: bool = True
    trainer_spec: bytes = b""

    @property
    def unk_id(self) -> int | None:
        return next((index for index, piece in enumerate(self.pieces) if piece.type == UNKNOWN), None)
