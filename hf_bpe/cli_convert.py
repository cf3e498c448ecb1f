"""The old home of ``hf-bpe convert`` and ``hf-bpe inspect``, kept so that old imports keep working: the
commands are now :mod:`hf_bpe.cli.convert` and :mod:`hf_bpe.cli.inspect`, and reading any tokenizer
source is :func:`hf_bpe.load` (:mod:`hf_bpe.sources`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from hf_bpe.cli import main
from hf_bpe.cli.common import read_source
from hf_bpe.cli.convert import describe_briefly, write_model
from hf_bpe.cli.inspect import SAMPLE, describe
from hf_bpe.model import BPE
from hf_bpe.sources import FORMATS, detect_format
from hf_bpe.sources import SourceError as ConvertUsageError

__all__ = ["FORMATS", "SAMPLE", "ConvertUsageError", "describe", "describe_briefly", "detect_format", "main",
           "read_model", "write_model"]


def read_model(path: str | os.PathLike[str], source_format: str | None = None, *, pattern: str | None = None,
               specials: Sequence[str] = ()) -> tuple[BPE, str]:
    """Load ``path`` as an :class:`hf_bpe.BPE` and say which format it was (use :func:`hf_bpe.load`)."""
    return read_source(os.fspath(path), source_format, pattern=pattern, specials=specials)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
