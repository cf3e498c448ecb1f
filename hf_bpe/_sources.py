"""Load a tokenizer from any source hf_bpe reads: :func:`load` (``hf_bpe.load``).

A source is a named encoding (``gpt2``, ``r50k_base``, ``cl100k_base``, ``o200k_base``) or a path, whose
format is detected from its name, layout and first bytes (or given as ``format=``):

============== ===============================================================================
tiktoken       ``.tiktoken`` rank file, or Meta's rank file named ``tokenizer.model`` (the pattern and
               special tokens are not in the file: for OpenAI's, Llama 3's and 4's and Qwen's files
               they are known, otherwise pass ``pattern=`` and ``special_tokens=``)
tekken         Mistral's tekken JSON
gpt2           ``vocab.json`` + ``merges.txt`` (or ``encoder.json`` + ``vocab.bpe``) in a folder
sentencepiece  a SentencePiece BPE ``.model``
gguf           a GGUF file (llama.cpp): its ``tokenizer.ggml.*`` metadata
hf             HF ``tokenizer.json`` (a file, or a folder holding one)
hf_bpe         our own one-file JSON (``BPE.save``)
folder         a ``BPETokenizer`` folder (``save_pretrained``; read through its ``hf_bpe.json``)
============== ===============================================================================

This module sits above :mod:`conversion` (it calls each format's ``load``) and below the command line,
the token view and the audit, which all take "any tokenizer" this way.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

import conversion.gguf
import conversion.gpt2
import conversion.hf
import conversion.sentencepiece
import conversion.tiktoken
from hf_bpe import _encodings, _known_rank_files
from hf_bpe._io import check_file, open_file, read_file
from hf_bpe.errors import TokenizerFileError
from hf_bpe.model import BPE, MODEL_FILE

__all__ = ["FORMATS", "SourceError", "detect_format", "load"]

FORMATS = ("tiktoken", "tekken", "gpt2", "sentencepiece", "gguf", "hf", "hf_bpe", "folder")


class SourceError(ValueError):
    """A tokenizer source that cannot be read as given: it does not exist, its format cannot be told,
    or it needs a setting that was not given. The message says which arguments of :func:`load` to
    pass; ``fixes`` holds them (argument name -> what it takes), so that the command line can name its
    own options instead.

    >>> str(SourceError("x.tiktoken holds no split pattern", {"pattern": "gpt2, cl100k, o200k or a regex"}))
    'x.tiktoken holds no split pattern; pass pattern= (gpt2, cl100k, o200k or a regex)'
    """

    def __init__(self, problem: str, fixes: Mapping[str, str] | None = None) -> None:
        self.problem = problem
        self.fixes = dict(fixes or {})
        fix = " and ".join(f"{name}= ({takes})" for name, takes in self.fixes.items())
        super().__init__(f"{problem}; pass {fix}" if fix else problem)


def load(
    source: str | os.PathLike[str],
    *,
    format: str | None = None,
    pattern: str | None = None,
    special_tokens: Mapping[str, int] | None = None,
) -> BPE:
    """The model in ``source``: a named encoding, or a file or folder in one of :data:`FORMATS`
    (detected unless ``format`` is given). ``pattern`` and ``special_tokens`` complete formats that
    lack them (a ``.tiktoken`` file other than OpenAI's, GPT-2 files with another pattern).

    >>> import hf_bpe, tempfile, os
    >>> hf_bpe.load("cl100k_base").encode("hello world")
    [15339, 1917]
    >>> path = hf_bpe.get_encoding("gpt2").save(os.path.join(tempfile.mkdtemp(), "gpt2.json"))
    >>> hf_bpe.load(path).encode("hello world")
    [31373, 995]
    """
    if format is None and isinstance(source, str) and source in _encodings.ENCODINGS and not os.path.exists(source):
        return _encodings.get_encoding(source)
    path = Path(source)
    fmt = format or detect_format(path)
    specials = dict(special_tokens or {})
    if path.is_dir():
        if fmt in _FOLDER_FILES and not (path / _FOLDER_FILES[fmt]).is_file():
            raise SourceError(f"the folder {path} has no {_FOLDER_FILES[fmt]}, which the format {fmt} reads from a folder")
        if fmt not in _FOLDER_FILES and fmt != "gpt2":
            raise SourceError(f"{path} is a folder, and the format {fmt} is read from a file: give the file inside it")
    elif fmt != "gpt2":
        check_file(path)
    if fmt == "tiktoken":
        named = _named_encoding(path)
        if pattern is None and named is None:
            raise SourceError(
                f"{path} is a .tiktoken file, which holds no split pattern",
                {"pattern": "gpt2, cl100k, o200k, llama3, qwen2 or a regex", "special_tokens": "any special tokens, text -> id"},
            )
        if named is not None:
            pattern = pattern or named[0]
            specials = specials or named[1]
        return conversion.tiktoken.load(path, pattern=str(pattern), special_tokens=specials)
    if fmt == "tekken":
        return conversion.tiktoken.load_tekken(path)
    if fmt == "gpt2":
        folder = path if path.is_dir() else path.parent
        for encoder, merges in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
            if (folder / encoder).is_file() and (folder / merges).is_file():
                return conversion.gpt2.load(folder / encoder, folder / merges, pattern=pattern or "gpt2",
                                            special_tokens=specials or None, name=folder.name or None)
        raise SourceError(f"{folder} holds neither vocab.json + merges.txt nor encoder.json + vocab.bpe")
    if fmt == "sentencepiece":
        return conversion.sentencepiece.load(path)
    if fmt == "gguf":
        return conversion.gguf.load(path)
    if fmt == "hf":
        return conversion.hf.load(path / "tokenizer.json" if path.is_dir() else path)
    if fmt == "hf_bpe":
        return BPE.load(path)
    if fmt == "folder":
        return BPE.load(path / MODEL_FILE if path.is_dir() else path)
    raise SourceError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")


_FOLDER_FILES = {"hf": "tokenizer.json", "folder": MODEL_FILE}
"""The file that a format read from a folder reads in it."""


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format of ``path`` (one of :data:`FORMATS`) from its name, layout and first bytes;
    :class:`SourceError` when it does not exist or cannot be told.

    >>> import hf_bpe._sources, tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> _ = hf_bpe.get_encoding("gpt2").save(os.path.join(folder, "model.json"))
    >>> hf_bpe._sources.detect_format(os.path.join(folder, "model.json"))
    'hf_bpe'
    """
    path = Path(path)
    if not path.exists():
        if os.path.lexists(path):
            check_file(path)  # a broken link or a symlink loop, named as such
        raise SourceError(f"{path} does not exist")
    if path.is_dir():
        for name in (MODEL_FILE, "vocab.json", "merges.txt", "encoder.json", "vocab.bpe", "tokenizer.json"):
            if os.path.lexists(path / name) and not (path / name).is_file():
                check_file(path / name)  # a FIFO, folder or symlink loop named like a tokenizer file
        if (path / MODEL_FILE).is_file():
            return "folder"
        if ((path / "vocab.json").is_file() and (path / "merges.txt").is_file()) or (
            (path / "encoder.json").is_file() and (path / "vocab.bpe").is_file()
        ):
            return "gpt2"
        if (path / "tokenizer.json").is_file():
            return "hf"
        raise SourceError(
            f"cannot tell the format of the folder {path}: it has no {MODEL_FILE}, vocab.json + merges.txt, "
            "encoder.json + vocab.bpe or tokenizer.json",
            {"format": ", ".join(FORMATS)},
        )
    name = path.name
    with open_file(path) as file:
        head = file.read(4096)
    if head[:4] == b"GGUF":
        return "gguf"
    if _looks_like_rank_lines(head):  # before the name: Meta's rank files are called tokenizer.model
        return "tiktoken"
    if name.endswith((".tiktoken", ".tiktoken.gz")):
        return "tiktoken"
    if name.endswith(".model") or ".model." in name:
        return "sentencepiece"
    if head.lstrip()[:1] == b"{":
        if b'"format"' in head and b'"hf_bpe"' in head:
            return "hf_bpe"
        if b'"config"' in head and b'"vocab"' in head and b'"pattern"' in head:
            return "tekken"
        if b'"model"' in head or b'"added_tokens"' in head or b'"version"' in head:
            return "hf"
        if name in ("vocab.json", "encoder.json"):
            return "gpt2"
    if head[:2] == b"\x1f\x8b" or _looks_like_rank_lines(head):
        return "tiktoken"
    if head[:1] == b"\x0a":  # protobuf field 1 (pieces), length-delimited
        return "sentencepiece"
    raise SourceError(f"cannot tell the format of {path}", {"format": ", ".join(FORMATS)})


def _looks_like_rank_lines(head: bytes) -> bool:
    lines = [line for line in head.split(b"\n")[:-1] if line.strip()][:8]
    return bool(lines) and all(len(line.split()) == 2 and line.split()[1].isdigit() for line in lines)


def _named_encoding(path: Path) -> tuple[str, dict[str, int]] | None:
    """(pattern, special tokens) when ``path`` is one of OpenAI's rank files or a known open model's
    (:mod:`hf_bpe._known_rank_files`), by SHA-256."""
    try:
        data = read_file(path, limit=_encodings.KNOWN_FILE_LIMIT)
    except TokenizerFileError:
        return None
    digest = hashlib.sha256(data).hexdigest()
    for name, remote in (("r50k_base", _encodings.R50K), ("cl100k_base", _encodings.CL100K),
                         ("o200k_base", _encodings.O200K)):
        if digest == remote.sha256:
            known = _encodings.get_encoding(name)
            return str(known.pattern), known.special_tokens
    model_file = _known_rank_files.identify(data)
    if model_file is not None:
        return model_file.pattern, model_file.special_tokens()
    return None
