"""What the tests of hf_bpe.distributed share: generated corpora and mixed inputs (module-scoped
fixtures, made once per test module that imports them), the single-process run they are compared with,
and helpers reading what a run wrote."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import textgen
from suite import scaled

import hf_bpe
import hf_bpe.distributed

SPECIAL = "<|endoftext|>"


def write_corpus(folder: Path, seed: int, files: int, total_bytes: int) -> list[Path]:
    """Generated documents (every code point class, specials among them) in ``files`` text files."""
    rng = random.Random(seed)
    documents = textgen.documents(rng, total_bytes)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(files):
        text = SPECIAL.join(documents[number::files])
        path = folder / f"part-{number:03d}.txt"
        path.write_text(text, encoding="utf-8", newline="")
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_corpus(tmp_path_factory.mktemp("corpus"), 21, 10, scaled(300_000))


def same_model(ours: hf_bpe.BPE, reference: hf_bpe.BPE, texts: list[str]) -> None:
    assert ours.mergeable_ranks == reference.mergeable_ranks
    assert ours.special_tokens == reference.special_tokens
    assert ours.pattern == reference.pattern
    assert ours == reference
    assert ours.encode_batch(texts, allowed_special="all") == reference.encode_batch(texts, allowed_special="all")


@pytest.fixture(scope="module")
def mixed_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list[str]]:
    """Text files, a JSON Lines file and a Parquet file (3 row groups); and every document in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("inputs")
    rng = random.Random(3)
    documents = textgen.documents(rng, scaled(240_000))
    thirds = [documents[0::3], documents[1::3], documents[2::3]]
    paths = []
    for number, text in enumerate(thirds[0][:8]):
        path = folder / f"a{number}.txt"
        path.write_text(text, encoding="utf-8", newline="")
        paths.append(path)
    in_order = list(thirds[0][:8])
    jsonl = folder / "b.jsonl"
    jsonl.write_text("".join(json.dumps({"text": text, "n": i}) + "\n" for i, text in enumerate(thirds[1])),
                     encoding="utf-8")
    paths.append(jsonl)
    in_order += thirds[1]
    parquet = folder / "c.parquet"
    pq.write_table(pa.table({"text": thirds[2]}), parquet, row_group_size=max(1, len(thirds[2]) // 3 + 1))
    paths.append(parquet)
    in_order += thirds[2]
    return paths, in_order


def file_bytes(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if not path.name.startswith(".")}


@pytest.fixture(scope="module")
def local_tokenized(mixed_inputs: tuple[list[Path], list[str]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    paths, _ = mixed_inputs
    out = tmp_path_factory.mktemp("local") / "out"
    hf_bpe.distributed.tokenize_files(paths, "gpt2", out, eot=SPECIAL, shard_size=scaled(20_000), num_workers=2)
    return out


def final_names(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir() if not path.name.startswith(".")} if folder.exists() else set()
