"""Every ``>>>`` example in the public modules runs and shows what it claims (the one place doctests
are collected)."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MODULES = [
    "hf_bpe",
    "hf_bpe.model",
    "hf_bpe.datasets",
    "hf_bpe._streaming",
    "hf_bpe.patterns",
    "hf_bpe._byte_level",
    "hf_bpe.counting",
    "hf_bpe._added_tokens",
    "hf_bpe._io",
    "hf_bpe.cli._common",
    "hf_bpe.cli._encode",
    "hf_bpe._rules",
    "hf_bpe._sources",
    "hf_bpe._encodings",
    "hf_bpe.tiktoken",
    "hf_bpe.tiktoken.core",
    "hf_bpe.tiktoken.load",
    "hf_bpe.tiktoken.model",
    "hf_bpe.tiktoken.registry",
    "hf_bpe.train",
    "hf_bpe._train_minbpe",
    "conversion.tiktoken",
    "conversion.gpt2",
    "conversion.sentencepiece",
    "conversion.hf",
    "conversion.gguf",
    "conversion._gguf_file",
    "conversion._llama_pre",
    "hf_bpe._known_rank_files",
    "conversion._hf_pretokenizers",
    "conversion._unicode_probe",
    "hf_bpe.sentencepiece_bpe",
    "hf_bpe.train",
    "hf_bpe.train_sentencepiece",
    "hf_bpe._corpus",
    "hf_bpe.transformers",
    "hf_bpe.transformers._tokenizer",
    "hf_bpe.transformers._encode",
    "hf_bpe._token_view",
    "hf_bpe.view._server",
    "hf_bpe.audit",
    "hf_bpe.audit._reachability",
    "hf_bpe.audit._utf8",
    "hf_bpe.audit._vocabulary",
    "hf_bpe.audit._specials",
    "hf_bpe.audit._corpus",
    "hf_bpe.cli._common",
    "hf_bpe.distributed._training",
    "hf_bpe.distributed._tokenizing",
    "hf_bpe.distributed._inputs",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
    assert result.attempted > 0, f"{name} has no examples"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    """``.ci/run`` ends with README's test command, line for line (the Chromium install included), so
    what the README tells a person to run is what CI runs."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"Install the test extras and run the tests.*?```sh\n(.*?)```", readme, re.DOTALL)
    assert found, "README.md lacks its test command: a ```sh block after 'Install the test extras...'"
    command = [line for line in found.group(1).splitlines() if line.strip()]
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.strip() and not line.startswith("#")]
    tail = ci[-len(command):]
    assert tail == command, f".ci/run must end with README's test command, {command}; it ends with {tail}"
