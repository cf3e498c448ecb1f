"""hf_bpe: exact, fast byte-level BPE for the Hugging Face ecosystem.

>>> import hf_bpe
>>> enc = hf_bpe.get_encoding("gpt2")
>>> enc.decode(enc.encode("hello world"))
'hello world'
"""

from hf_bpe import patterns
from hf_bpe.encodings import get_encoding, list_encoding_names
from hf_bpe.errors import (
    ConversionError,
    DisallowedSpecialTokenError,
    InvalidVocabularyError,
    TokenizerFileError,
    UnknownTokenError,
)
from hf_bpe.model import BPE
from hf_bpe.train import PieceCounts, count_pieces, train, train_from_counts

__all__ = [
    "BPE",
    "ConversionError",
    "DisallowedSpecialTokenError",
    "InvalidVocabularyError",
    "PieceCounts",
    "TokenizerFileError",
    "UnknownTokenError",
    "count_pieces",
    "get_encoding",
    "list_encoding_names",
    "patterns",
    "train",
    "train_from_counts",
]
__version__ = "0.1.0"
