"""Registers ``BPETokenizer`` with ``AutoTokenizer`` without importing transformers up front.

``import hf_bpe`` must make ``AutoTokenizer.from_pretrained(folder)`` return our class, but importing
transformers takes seconds, which users of the plain BPE model should not pay. So :func:`install`
(called once by ``hf_bpe/__init__.py``): if transformers' auto-tokenizer module is already loaded,
register now; otherwise put a one-shot finder first on ``sys.meta_path`` that wraps that module's
loader, registers right after the module has run, and removes itself. Registering is
:func:`hf_bpe.transformers.register` (``AutoTokenizer.register``, idempotent), which anyone may also
call directly. transformers offers no entry point that loads a tokenizer class by name from an
installed package without importing it first (its ``auto_map`` needs ``trust_remote_code``), so the
hook is the way to keep both promises; tests/test_autotokenizer.py checks both.
"""

from __future__ import annotations

import importlib.abc
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

AUTO_MODULE = "transformers.models.auto.tokenization_auto"


def install() -> None:
    """Register now if transformers' auto module is loaded, else when it loads."""
    if AUTO_MODULE in sys.modules:
        register()
    elif not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def register() -> None:
    """Import :mod:`hf_bpe.transformers`, which registers ``BPETokenizer`` (a failure only warns)."""
    try:
        import hf_bpe.transformers  # noqa: F401  (registers on import)
    except Exception as error:  # noqa: BLE001 - whatever fails here must not break importing transformers
        warnings.warn(f"hf_bpe could not register BPETokenizer with AutoTokenizer: {error}", stacklevel=2)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the auto module with the other finders and wraps its loader."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != AUTO_MODULE:
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(fullname, path, target) if find_spec else None
            if spec is not None and spec.loader is not None:
                spec.loader = _RegisteringLoader(spec.loader)
                return spec
        return None


class _RegisteringLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        register()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... of the real loader
        return getattr(self._loader, name)
