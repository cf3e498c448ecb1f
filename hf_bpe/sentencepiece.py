"""Deprecated name of :mod:`hf_bpe.sentencepiece_bpe` (the SentencePiece-BPE model kind: pieces, spec,
merge list). ``conversion.sentencepiece`` is the ``.model`` file format; this module keeps old imports
(``from hf_bpe.sentencepiece import Piece, SentencePieceSpec``) working, with a warning."""

import warnings

from hf_bpe.sentencepiece_bpe import *
from hf_bpe.sentencepiece_bpe import (
    __all__,  # noqa: F401
    _run_merges,  # noqa: F401  (tests of old versions reach it)
)

warnings.warn(
    "hf_bpe.sentencepiece is deprecated; import from hf_bpe.sentencepiece_bpe (the SentencePiece-BPE model kind)",
    DeprecationWarning,
    stacklevel=2,
)
