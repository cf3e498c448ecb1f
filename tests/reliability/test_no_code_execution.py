"""Loading a tokenizer never executes code from the files: hf_bpe's formats hold no pickle (nothing in
hf_bpe or conversion unpickles, evaluates or imports by name), every loader works with pickle's and
marshal's loaders replaced by ones that raise, and a folder whose ``tokenizer_config.json`` has an
``auto_map`` pointing at foreign code does not run it unless the caller passes
``trust_remote_code=True``."""

from __future__ import annotations

import ast
import json
import marshal
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import reliability_support as support

import hf_bpe
import hf_bpe._encodings

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("hf_bpe", "conversion")

UNSAFE_MODULES = {"pickle", "_pickle", "cPickle", "dill", "cloudpickle", "joblib", "marshal", "shelve", "yaml", "torch"}
UNSAFE_BUILTINS = {"eval", "exec", "compile", "__import__"}
UNSAFE_METHODS = {"import_module", "load_source", "exec_module", "run_path", "run_module"}
ALLOWED = {("hf_bpe/_autotokenizer.py", "self._loader.exec_module")}
"""Where the import hook runs transformers' own module ``tokenization_auto`` for the import system."""


def _sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_no_module_of_hf_bpe_unpickles_evaluates_or_imports_by_name() -> None:
    """A static scan of hf_bpe and conversion: no import of a module that deserializes code, no call
    that runs or imports code by name, and no ``trust_remote_code=True``. (``_autotokenizer`` wraps
    the import system's loader of transformers' ``tokenization_auto`` to register our class when it
    loads; that one call is allowed.)"""
    found: list[str] = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import):
                found += [f"{where} imports {alias.name}" for alias in node.names
                          if alias.name.split(".")[0] in UNSAFE_MODULES]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
                found.append(f"{where} imports from {node.module}")
            elif isinstance(node, ast.Call):
                function = node.func
                unsafe = (isinstance(function, ast.Name) and function.id in UNSAFE_BUILTINS) or (
                    isinstance(function, ast.Attribute) and function.attr in UNSAFE_METHODS
                )
                if unsafe and (path.relative_to(ROOT).as_posix(), ast.unparse(function)) not in ALLOWED:
                    found.append(f"{where} calls {ast.unparse(function)}")
                for keyword in node.keywords:
                    if keyword.arg == "trust_remote_code" and not (
                        isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                    ):
                        found.append(f"{where} passes trust_remote_code")
    assert found == []
    assert len(_sources()) > 15  # the scan saw the packages


@pytest.fixture
def no_deserializers(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``arm()`` replaces pickle's and marshal's loaders by functions that record the call and raise,
    and returns the record. (Arm after a first load: importing Python modules reads their compiled
    code with marshal, which is the interpreter at work, not the file being loaded.)"""
    calls: list[str] = []

    def refuse(name: str) -> Any:
        def refused(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} called while loading a tokenizer")

        return refused

    def arm() -> list[str]:
        for module, name in ((pickle, "load"), (pickle, "loads"), (pickle, "Unpickler"), (marshal, "load"),
                             (marshal, "loads")):
            monkeypatch.setattr(module, name, refuse(f"{module.__name__}.{name}"))
        return calls

    return arm


@pytest.mark.parametrize("name", sorted(support.FORMATS))
def test_every_loader_loads_without_pickle(tmp_path: Path, name: str, no_deserializers: Any) -> None:
    form = support.FORMATS[name]
    folder = support.materialize(support.valid_files(name), tmp_path / name)
    form.load(folder)  # imports what the loader needs
    calls = no_deserializers()
    assert support.check_load(form, folder, corrupted="") == "loaded"
    assert calls == []


def test_named_encodings_load_without_pickle(no_deserializers: Any) -> None:
    import conversion.gpt2
    import conversion.tiktoken  # noqa: F401

    calls = no_deserializers()
    hf_bpe._encodings._cache.clear()
    try:
        for name in ("gpt2", "cl100k_base"):
            try:
                model = hf_bpe.get_encoding(name)
            except FileNotFoundError as error:
                pytest.skip(str(error))
            assert model.decode(model.encode("hello world")) == "hello world"
    finally:
        hf_bpe._encodings._cache.clear()
    assert calls == []


FOREIGN_CODE = '''
import pathlib
pathlib.Path({marker!r}).write_text("foreign code ran")
from transformers import PreTrainedTokenizer


class EvilTokenizer(PreTrainedTokenizer):
    pass
'''

PROBE = '''
import json, sys, traceback
folder, how = sys.argv[1], sys.argv[2]
if how in ("with hf_bpe", "BPETokenizer.from_pretrained"):
    import hf_bpe
from transformers import AutoTokenizer
try:
    if how == "BPETokenizer.from_pretrained":
        tokenizer = hf_bpe.BPETokenizer.from_pretrained(folder)
    else:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=how == "trust_remote_code=True")
    outcome = type(tokenizer).__name__
except Exception as error:
    outcome = f"{type(error).__name__}: {error}"
print(json.dumps(outcome))
'''


def _foreign_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A saved BPETokenizer folder whose tokenizer_config.json's auto_map names a module that writes
    a marker file when imported."""
    folder = tmp_path / "foreign"
    marker = tmp_path / "marker.txt"
    support.materialize(support.valid_files("folder"), folder)
    (folder / "evil_tokenizer.py").write_text(FOREIGN_CODE.format(marker=str(marker)))
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["auto_map"] = {"AutoTokenizer": ["evil_tokenizer.EvilTokenizer", None]}
    config_path.write_text(json.dumps(config))
    return folder, marker


def _load_in_fresh_process(tmp_path: Path, folder: Path, how: str) -> str:
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE), str(folder), how], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return str(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("how", ["without hf_bpe", "with hf_bpe", "BPETokenizer.from_pretrained"])
def test_auto_map_code_does_not_run_without_trust_remote_code(tmp_path: Path, how: str) -> None:
    folder, marker = _foreign_folder(tmp_path)
    outcome = _load_in_fresh_process(tmp_path, folder, how)
    assert not marker.exists(), f"{how}: the folder's code ran ({outcome})"
    if how == "without hf_bpe":  # transformers refuses: the folder asks for code it may not run
        assert "trust_remote_code" in outcome, outcome
    else:  # our class, registered by name, loads the folder without its code
        assert outcome == "BPETokenizer", outcome


def test_auto_map_code_runs_only_when_the_caller_trusts_it(tmp_path: Path) -> None:
    """The control: with ``trust_remote_code=True`` (and hf_bpe not imported: once it is, transformers
    prefers the registered class to the folder's code) transformers runs the folder's module, so the
    marker above would have shown a run."""
    folder, marker = _foreign_folder(tmp_path)
    outcome = _load_in_fresh_process(tmp_path, folder, "trust_remote_code=True")
    assert marker.read_text() == "foreign code ran", outcome
