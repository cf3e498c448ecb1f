"""hf_bpe: exact, fast byte-level BPE for the Hugging Face ecosystem.

>>> import hf_bpe
>>> enc = hf_bpe.get_encoding("gpt2")
>>> enc.decode(enc.encode("hello world"))
'hello world'
"""

from typing import TYPE_CHECKING, Any

from hf_bpe import _autotokenizer, patterns
from hf_bpe.encodings import get_encoding, list_encoding_names
from hf_bpe.errors import (
    ConversionError,
    DisallowedSpecialTokenError,
    InternalError,
    InvalidVocabularyError,
    LossyConversionWarning,
    TokenizerFileError,
    UnknownTokenError,
)
from hf_bpe.model import BPE
from hf_bpe.train import PieceCounts, count_pieces, train, train_from_counts
from hf_bpe.train_sentencepiece import LLAMA2_OPTIONS, train_sentencepiece

if TYPE_CHECKING:
    from hf_bpe.hf import BPETokenizer, save_tokenizer_folder

__all__ = [
    "BPE",
    "LLAMA2_OPTIONS",
    "BPETokenizer",
    "ConversionError",
    "DisallowedSpecialTokenError",
    "InternalError",
    "InvalidVocabularyError",
    "LossyConversionWarning",
    "PieceCounts",
    "TokenizerFileError",
    "UnknownTokenError",
    "count_pieces",
    "get_encoding",
    "list_encoding_names",
    "patterns",
    "save_tokenizer_folder",
    "train",
    "train_from_counts",
    "train_sentencepiece",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The transformers tokenizer loads transformers, so it is imported on first use.
    if name in ("BPETokenizer", "save_tokenizer_folder"):
        from hf_bpe import hf

        return getattr(hf, name)
    raise AttributeError(f"module 'hf_bpe' has no attribute {name!r}")


_autotokenizer.install()
