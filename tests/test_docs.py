"""Every ``>>>`` example in the public modules runs and shows what it claims (the one place doctests
are collected)."""

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
    "hf_bpe.rank_file",
    "hf_bpe._io",
    "hf_bpe.cli.common",
    "hf_bpe.cli.encode",
    "hf_bpe.rules",
    "hf_bpe.sources",
    "hf_bpe.encodings",
    "hf_bpe.tiktoken",
    "hf_bpe.train",
    "hf_bpe._train_minbpe",
    "conversion.tiktoken",
    "conversion.gpt2",
    "conversion.sentencepiece",
    "conversion.hf",
    "hf_bpe.sentencepiece_bpe",
    "hf_bpe.train",
    "hf_bpe._corpus",
    "hf_bpe.transformers",
    "hf_bpe.transformers.tokenizer",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
    assert result.attempted > 0, f"{name} has no examples"
