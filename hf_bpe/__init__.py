"""hf_bpe: exact, fast byte-level BPE for the Hugging Face ecosystem.

>>> import hf_bpe
>>> enc = hf_bpe.get_encoding("gpt2")
>>> enc.decode(enc.encode("hello world"))
'hello world'

``__all__`` holds what a user needs: the model (:class:`BPE`), the transformers tokenizer
(:class:`BPETokenizer`), :func:`train`, the named encodings, :func:`load` for any tokenizer file, :func:`audit` (the
vocabulary audit) and :mod:`~hf_bpe.errors`. The names earlier versions exported stay importable from here too (the error
classes, ``PieceCounts``, ``count_pieces``, ``train_from_counts``, ``patterns``,
``save_tokenizer_folder``). How the code is laid out: README, "How the code is laid out".
"""

from typing import TYPE_CHECKING, Any

from hf_bpe import _autotokenizer, errors, patterns
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
    from hf_bpe.sources import load
    from hf_bpe.transformers import BPETokenizer, save_tokenizer_folder  # noqa: F401

__all__ = [
    "BPE",
    "BPETokenizer",
    "audit",
    "errors",
    "get_encoding",
    "list_encoding_names",
    "load",
    "train",
]
__version__ = "0.1.0"

# Kept at the top level for the code written against earlier versions (README uses most of them).
_IMPORTABLE = (
    ConversionError, DisallowedSpecialTokenError, InternalError, InvalidVocabularyError, LossyConversionWarning,
    TokenizerFileError, UnknownTokenError, PieceCounts, count_pieces, train_from_counts, patterns,
)


def __getattr__(name: str) -> Any:
    # The transformers tokenizer loads transformers, and load() the converters (tokenizers, protobuf):
    # each is imported on first use; so is the audit (hf_bpe.audit(model) calls it, hf_bpe.audit.reachability
    # is its module).
    if name == "audit":
        import hf_bpe.audit

        return hf_bpe.audit
    if name in ("BPETokenizer", "save_tokenizer_folder"):
        from hf_bpe import transformers

        return getattr(transformers, name)
    if name == "load":
        from hf_bpe import sources

        return sources.load
    raise AttributeError(f"module 'hf_bpe' has no attribute {name!r}")


_autotokenizer.install()
