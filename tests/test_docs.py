"""Every ``>>>`` example in the public modules runs and shows what it claims."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "hf_bpe",
    "hf_bpe.model",
    "hf_bpe.streaming",
    "hf_bpe.patterns",
    "hf_bpe.byte_level",
    "hf_bpe.encodings",
    "conversion.tiktoken",
    "conversion.gpt2",
    "conversion.sentencepiece",
    "conversion.hf",
    "hf_bpe.sentencepiece",
    "hf_bpe.distributed.training",
    "hf_bpe.distributed.tokenizing",
    "hf_bpe.distributed._inputs",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
