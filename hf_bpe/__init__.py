"""hf_bpe: exact, fast byte-level BPE for the Hugging Face ecosystem.

>>> import hf_bpe
>>> enc = hf_bpe.get_encoding("gpt2")
>>> enc.decode(enc.encode("hello world"))
'hello world'

``__all__`` is the whole entry surface: the model (:class:`BPE`), the transformers tokenizer
(:class:`BPETokenizer`), :func:`train`, :func:`train_sentencepiece` and :func:`extend` (new tokens
for an existing model, every id kept), :func:`load` for any tokenizer
file, the named encodings (:func:`get_encoding`, :func:`list_encoding_names`),
:func:`patch_transformers` / :func:`unpatch_transformers` (transformers' fast tokenizers encode with
hf_bpe), :class:`DecodeStream` (`tokenizers`' incremental detokenizer) and the errors of
:mod:`hf_bpe.errors`. The rest lives in its module: ``hf_bpe.train`` (``count_pieces``,
``train_from_counts``), ``hf_bpe.audit``, ``hf_bpe.tiktoken`` (tiktoken's API), ``hf_bpe.transformers``,
``hf_bpe.datasets``, ``hf_bpe.distributed``, ``conversion.<format>``. How the code is laid out:
``docs/architecture.md``.

Registration with transformers: after ``import hf_bpe``, ``AutoTokenizer.from_pretrained(folder)``
returns :class:`BPETokenizer` for a folder saved by it, yet ``import hf_bpe`` does not import
transformers (seconds of start-up). :mod:`hf_bpe._autotokenizer` installs a one-shot import hook that
registers the class when transformers' auto-tokenizer module loads (at once if it already is);
``hf_bpe.transformers.register()`` does the same explicitly.
"""

from typing import TYPE_CHECKING, Any

from hf_bpe import _autotokenizer
from hf_bpe._decode_stream import DecodeStream
from hf_bpe._encodings import get_encoding, list_encoding_names
from hf_bpe.errors import (
    ConversionError,
    DecodeStreamError,
    DisallowedSpecialTokenError,
    InternalError,
    InvalidVocabularyError,
    LossyConversionWarning,
    MissingBytesWarning,
    PrunedCountsWarning,
    TokenizerFileError,
    UnknownTokenError,
)
from hf_bpe.extend import extend
from hf_bpe.model import BPE
from hf_bpe.train import train
from hf_bpe.train_sentencepiece import train_sentencepiece

if TYPE_CHECKING:
    from hf_bpe._sources import load
    from hf_bpe.transformers import BPETokenizer
    from hf_bpe.transformers._patch import patch_transformers, unpatch_transformers

__all__ = [
    "BPE",
    "BPETokenizer",
    "ConversionError",
    "DecodeStream",
    "DecodeStreamError",
    "DisallowedSpecialTokenError",
    "InternalError",
    "InvalidVocabularyError",
    "LossyConversionWarning",
    "MissingBytesWarning",
    "PrunedCountsWarning",
    "TokenizerFileError",
    "UnknownTokenError",
    "extend",
    "get_encoding",
    "list_encoding_names",
    "load",
    "patch_transformers",
    "train",
    "train_sentencepiece",
    "unpatch_transformers",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy only to keep ``import hf_bpe`` cheap: BPETokenizer and patch_transformers import transformers,
    # and load() the converters (tokenizers, protobuf); each is imported on first use. Nothing else is
    # served here.
    if name == "BPETokenizer":
        from hf_bpe.transformers import BPETokenizer

        return BPETokenizer
    if name == "load":
        from hf_bpe._sources import load

        return load
    if name in ("patch_transformers", "unpatch_transformers"):
        from hf_bpe.transformers import _patch

        return getattr(_patch, name)
    raise AttributeError(f"module 'hf_bpe' has no attribute {name!r}")


_autotokenizer.install()
