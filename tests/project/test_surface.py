"""The public surface, snapshotted: the public modules and each one's ``__all__``, ``BPE``'s public names,
``hf_bpe.tiktoken.Encoding``'s (tiktoken's own plus the documented extras) and the names ``BPETokenizer``
defines itself. Growing (or shrinking) the surface is a decision: the snapshot changes with it.

To change it deliberately: ``python tests/project/test_surface.py --update`` rewrites tests/data/surface.json;
commit it with the change and say why in the commit.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "data" / "surface.json"

TOP_LEVEL = {
    "BPE", "BPETokenizer", "train", "train_sentencepiece", "extend", "load", "get_encoding", "list_encoding_names",
    "patch_transformers", "unpatch_transformers", "DecodeStream",
    "ConversionError", "DecodeStreamError", "DisallowedSpecialTokenError", "InternalError", "InvalidVocabularyError",
    "LossyConversionWarning", "MissingBytesWarning", "PrunedCountsWarning", "TokenizerFileError", "UnknownTokenError",
}
"""hf_bpe.__all__: the entry points and the error classes of hf_bpe.errors."""

ENCODING_EXTRAS = {"model"}
"""The public names hf_bpe.tiktoken.Encoding has beyond tiktoken's: ``model``, the BPE it holds."""

UPDATE_HINT = ("the public surface changed; if that is deliberate, run `python tests/project/test_surface.py --update` "
               "and commit tests/data/surface.json with the change (say why in the commit)")


def _public(names: Any) -> list[str]:
    return sorted(name for name in names if not name.startswith("_"))


def public_modules() -> list[str]:
    """Every module of hf_bpe and conversion whose dotted name has no part starting with ``_``."""
    found = []
    for package in ("hf_bpe", "conversion"):
        root = importlib.import_module(package)
        found.append(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                found.append(info.name)
    return sorted(found)


def surface() -> dict[str, Any]:
    import hf_bpe
    from hf_bpe import tiktoken as ours
    from hf_bpe.transformers import BPETokenizer

    encoding = ours.get_encoding("gpt2")
    modules = {}
    for name in public_modules():
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        modules[name] = None if exported is None else sorted(exported)
    bpe = hf_bpe.get_encoding("gpt2")
    return {
        "modules": modules,
        "BPE": _public(dir(bpe)),
        "Encoding": _public(dir(encoding)),
        "BPETokenizer": _public(vars(BPETokenizer)),
    }


def test_hf_bpe_exports_the_entry_points_and_the_errors() -> None:
    import hf_bpe
    import hf_bpe.errors

    assert set(hf_bpe.__all__) == TOP_LEVEL and len(hf_bpe.__all__) == len(TOP_LEVEL) == 21
    errors = {name for name in vars(hf_bpe.errors) if isinstance(getattr(hf_bpe.errors, name), type)
              and issubclass(getattr(hf_bpe.errors, name), Exception)}
    assert errors <= TOP_LEVEL, f"errors missing from hf_bpe.__all__: {sorted(errors - TOP_LEVEL)}"
    for name in hf_bpe.__all__:
        assert getattr(hf_bpe, name) is not None


def test_the_surface_matches_the_snapshot() -> None:
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    got = json.loads(json.dumps(surface()))
    for key in ("modules", "BPE", "Encoding", "BPETokenizer"):
        if got[key] != expected[key]:
            if isinstance(got[key], dict):
                added = sorted(set(got[key]) - set(expected[key]))
                removed = sorted(set(expected[key]) - set(got[key]))
                changed = sorted(name for name in set(got[key]) & set(expected[key])
                                 if got[key][name] != expected[key][name])
                detail = f"added {added}, removed {removed}, changed __all__ of {changed}"
            else:
                detail = (f"added {sorted(set(got[key]) - set(expected[key]))}, "
                          f"removed {sorted(set(expected[key]) - set(got[key]))}")
            pytest.fail(f"{key}: {detail}. {UPDATE_HINT}")


def test_bpe_stays_narrow() -> None:
    assert len(surface()["BPE"]) <= 32


def test_encoding_has_tiktoken_s_names_and_the_documented_extras() -> None:
    tiktoken = pytest.importorskip("tiktoken")
    theirs = tiktoken.Encoding("probe", pat_str=r"\w+|\s+", mergeable_ranks={bytes([b]): b for b in range(256)},
                               special_tokens={"<|endoftext|>": 256})
    from hf_bpe import tiktoken as ours

    mine = ours.Encoding("probe", pat_str=r"\w+|\s+", mergeable_ranks={bytes([b]): b for b in range(256)},
                         special_tokens={"<|endoftext|>": 256})
    assert set(_public(dir(mine))) == set(_public(dir(theirs))) | ENCODING_EXTRAS
    assert set(surface()["Encoding"]) == set(_public(dir(theirs))) | ENCODING_EXTRAS


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        raise SystemExit("usage: python tests/project/test_surface.py --update  (rewrites tests/data/surface.json)")
    SNAPSHOT.write_text(json.dumps(surface(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
