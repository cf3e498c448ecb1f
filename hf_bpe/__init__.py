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

if TYPE_CHECKING:
    from hf_bpe.hf import BPETokenizer, save_tokenizer_folder

__all__ = [
    "BPE",
    "BPETokenizer",
    "ConversionError",
    "DisallowedSpecialTokenError",
    "InternalError",
    "InvalidVocabularyError",
    "LossyConversionWarning",
    "PieceCounts",
    "TokenizerFileError",
    "UnknownTokenError",
    "audit",
    "count_pieces",
    "get_encoding",
    "list_encoding_names",
    "patterns",
    "save_tokenizer_folder",
    "train",
    "train_from_counts",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The transformers tokenizer loads transformers, so it is imported on first use; so is the audit
    # (hf_bpe.audit(model) calls it, hf_bpe.audit.reachability is its module).
    if name == "audit":
        import hf_bpe.audit

        return hf_bpe.audit
    if name in ("BPETokenizer", "save_tokenizer_folder"):
        from hf_bpe import hf

        return getattr(hf, name)
    raise AttributeError(f"module 'hf_bpe' has no attribute {name!r}")


_autotokenizer.install()
