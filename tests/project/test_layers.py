"""The import contract (``[tool.importlinter]`` in pyproject.toml, docs/architecture.md): imports run one way,
command line > transformers layer and sources > the vocabulary audit > named encodings > conversion > model
layer > base."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CORE_USERS = {"hf_bpe.model", "hf_bpe.counting", "hf_bpe.train", "hf_bpe.train_sentencepiece", "hf_bpe._corpus", "hf_bpe._streaming",
              "hf_bpe._train_parity", "hf_bpe._train_superbpe"}
"""The model-layer modules that may import the Rust core, ``hf_bpe._core``."""

TOP = ("hf_bpe.cli", "hf_bpe.__main__", "hf_bpe.__init__")
"""Modules allowed to import names from the package ``hf_bpe`` itself (its ``__init__``)."""


def _modules() -> dict[str, ast.Module]:
    found = {}
    for package in ("hf_bpe", "conversion"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return found


def test_the_layers_contract_holds() -> None:
    """``lint-imports`` (import-linter) on the contract in pyproject.toml; its report is the message."""
    pytest.importorskip("importlinter", reason="import-linter is in the test extra: pip install -e '.[test]'")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, f"lint-imports failed:\n{done.stdout}\n{done.stderr}"
    assert "0 broken" in done.stdout


def test_only_the_model_layer_imports_the_rust_core_and_nothing_below_the_top_imports_the_package() -> None:
    """What import-linter cannot see: it has no node for the extension module ``hf_bpe._core`` (it files
    ``from hf_bpe import _core`` under the package), so the two rules are read from the sources here."""
    modules = set(_modules())
    wrong = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "hf_bpe" and node.level == 0:
                for alias in node.names:
                    if alias.name == "_core":
                        if name not in CORE_USERS:
                            wrong.append(f"{name}: imports hf_bpe._core (only {sorted(CORE_USERS)} may)")
                    elif f"hf_bpe.{alias.name}" not in modules and not name.startswith(TOP):
                        wrong.append(f"{name}: imports {alias.name} from the package hf_bpe (import its module)")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "hf_bpe._core" and name not in CORE_USERS:
                        wrong.append(f"{name}: imports hf_bpe._core")
                    if alias.name == "hf_bpe" and not name.startswith(TOP):
                        wrong.append(f"{name}: imports the package hf_bpe (import the module it needs)")
    assert not wrong, "\n".join(wrong)
