"""The exceptions hf_bpe raises. Each message names the input, the problem and the fix."""

from __future__ import annotations

import os

__all__ = [
    "ConversionError", "DecodeStreamError", "DisallowedSpecialTokenError", "InternalError", "InvalidVocabularyError",
    "LossyConversionWarning", "PrunedCountsWarning", "TokenizerFileError", "UnknownTokenError"
]


class DisallowedSpecialTokenError(ValueError):
    """Text contains a special token that the caller did not allow (tiktoken's safety check)."""

    def __init__(self, token: str) -> None:
        self.token = token
        super().__init__(
            f"Encountered text corresponding to disallowed special token {token!r}.\n"
            f"If you want this text to be encoded as a special token, pass it to `allowed_special`, "
            f"e.g. `allowed_special={{{token!r}, ...}}`.\n"
            f"If you want this text to be encoded as normal text, disable the check for this token "
            f"by passing `disallowed_special=(enc.special_tokens_set - {{{token!r}}})`.\n"
            f"To disable this check for all special tokens, pass `disallowed_special=()`.\n"
        )


class UnknownTokenError(KeyError, ValueError):
    """A token id (or token bytes) that the vocabulary does not have."""

    def __init__(self, token: object, n_vocab: int | None = None) -> None:
        self.token = token
        where = f" (ids run from 0 to {n_vocab - 1}, and may have holes)" if n_vocab else ""
        self.message = f"unknown token {token!r}: it is not in this vocabulary{where}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class InvalidVocabularyError(ValueError):
    """Ranks or special tokens that cannot form a model (duplicates, missing bytes, bad ids)."""


class ConversionError(ValueError):
    """A model that a format (or an API) cannot express exactly. The message says what would change;
    savers that can write an approximation take an explicit ``lossy=True``."""


class LossyConversionWarning(UserWarning):
    """A ``save(..., lossy=True)`` wrote a file that does not encode every text as the model does.
    The message says why and how often it differed on the stated probe texts; ``mismatches`` and
    ``probes`` hold those two counts."""

    def __init__(self, message: str, *, mismatches: int, probes: int) -> None:
        super().__init__(message)
        self.mismatches = mismatches
        self.probes = probes


class MissingBytesWarning(UserWarning):
    """A loaded ``tokenizer.json`` lacks byte symbols that UTF-8 text uses: as `tokenizers` does, such a
    byte is dropped from the text it encodes. The message names the bytes."""


class PrunedCountsWarning(UserWarning):
    """Training learned its merges from piece counts pruned to stay within ``max_pieces`` (a memory
    budget): the rarest pieces were dropped, so the merges may differ from the exact ones. The message
    says how many occurrences were dropped."""


class TokenizerFileError(ValueError):
    """A tokenizer file that cannot be read: names the file, the line when known, and the problem."""

    def __init__(self, path: str | os.PathLike[str], problem: str, *, line: int | None = None) -> None:
        self.path = os.fspath(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class DecodeStreamError(ValueError):
    """:class:`hf_bpe.DecodeStream`: the decode of the ids so far does not start with the text already
    returned (a decoder that rewrites earlier text); `tokenizers`' ``DecodeStream`` fails there too."""


class InternalError(RuntimeError):
    """A bug in hf_bpe's Rust core (a Rust panic), raised instead of crashing or of PyO3's
    ``PanicException``, which derives from ``BaseException`` and so escapes ``except Exception``.
    The message carries the panic's; please report it with the input that caused it. Models are
    immutable, so the one that raised keeps working."""
