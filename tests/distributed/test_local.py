"""hf_bpe.distributed on this machine's cores (this process is not connected to Ray here, so every
call runs locally): the models and files of the single-process path, byte for byte; resumption,
pruning's bound and bad input. The same on a real local Ray is ``test_ray.py``, on a two-node cluster
``test_cluster.py``; the three share their inputs (``tests/support/distributed_inputs.py``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import pickle
import time
from pathlib import Path

import numpy as np
import pytest
from distributed_inputs import (  # the module-scoped inputs and the single-process run, and the helpers
    SPECIAL,
    corpus,
    file_bytes,
    final_names,
    local_tokenized,
    mixed_inputs,
    same_model,
    write_corpus,
)
from suite import require_shared, scaled

import hf_bpe
import hf_bpe.distributed
from hf_bpe.distributed import ShardError
from hf_bpe.distributed._training import prune
from hf_bpe.train import PieceCounts, count_pieces, train_from_counts

__all__ = ["corpus", "local_tokenized", "mixed_inputs"]  # fixtures: used by name, not by reference


# ------------------------------------------------------------------------------------------- training


def test_train_on_local_threads_is_train_on_the_same_files(corpus: list[Path]) -> None:
    ours = hf_bpe.distributed.train(corpus, 700, pattern="o200k", special_tokens=[SPECIAL], group_bytes=1,
                                    num_workers=2)
    reference = hf_bpe.train(files=corpus, vocab_size=700, pattern="o200k", special_tokens=[SPECIAL],
                             show_progress=False)
    same_model(ours, reference, [path.read_text(encoding="utf-8")[:5000] for path in corpus])


def test_train_with_a_file_of_only_special_tokens_and_an_empty_file(tmp_path: Path, corpus: list[Path]) -> None:
    (tmp_path / "specials.txt").write_text(SPECIAL * 3, encoding="utf-8")
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    files = [*corpus[:2], tmp_path / "specials.txt", tmp_path / "empty.txt"]
    ours = hf_bpe.distributed.train(files, 400, special_tokens=[SPECIAL], group_bytes=1)
    assert ours == hf_bpe.train(files=files, vocab_size=400, special_tokens=[SPECIAL], show_progress=False)


def test_piece_counts_pickle_compactly(corpus: list[Path]) -> None:
    counts = count_pieces(files=corpus, show_progress=False)
    pieces = counts.to_dict()
    # Each entry: the piece's bytes, a varint length and a varint count (at most 3 + 3 bytes here).
    payload = sum(len(piece) + 6 for piece in pieces)
    data = pickle.dumps(counts, protocol=pickle.HIGHEST_PROTOCOL)
    assert len(data) <= payload + 512
    assert pickle.loads(data) == counts


def pair_counts(symbols: list[list[int]], weights: list[int]) -> dict[tuple[int, int], int]:
    counts: dict[tuple[int, int], int] = {}
    for piece, weight in zip(symbols, weights):
        for pair in itertools.pairwise(piece):
            counts[pair] = counts.get(pair, 0) + weight
    return counts


def guaranteed_merges(exact: dict[bytes, int], loss_bound: dict[bytes, int], num_merges: int) -> int:
    """How many of the exact merges pruning provably keeps: the exact loop is run, and merge i is
    certain while the best pair's count minus what pruning can remove from it (the pieces' loss
    bounds, times the pair's occurrences) still exceeds every other pair's exact count."""
    tokens = [bytes([byte]) for byte in range(256)]
    ids = {token: i for i, token in enumerate(tokens)}
    pieces = [piece for piece in exact if len(piece) >= 2]
    symbols = [list(piece) for piece in pieces]
    weights = [exact[piece] for piece in pieces]
    losses = [loss_bound[piece] for piece in pieces]
    for step in range(num_merges):
        counts = pair_counts(symbols, weights)
        if not counts:
            return step
        ranked = sorted(counts.items(), key=lambda item: (item[1], tokens[item[0][0]], tokens[item[0][1]]),
                        reverse=True)
        best, best_count = ranked[0]
        runner_up = ranked[1][1] if len(ranked) > 1 else 0
        if best_count - pair_counts(symbols, losses).get(best, 0) <= runner_up:
            return step
        merged = tokens[best[0]] + tokens[best[1]]
        ids[merged] = len(tokens)
        tokens.append(merged)
        for index, piece in enumerate(symbols):
            out, at = [], 0
            while at < len(piece):
                if at + 1 < len(piece) and (piece[at], piece[at + 1]) == best:
                    out.append(ids[merged])
                    at += 2
                else:
                    out.append(piece[at])
                    at += 1
            symbols[index] = out
    return num_merges


def pruned_tables(files: list[Path], threshold: int) -> tuple[list[PieceCounts], dict[bytes, int], dict[bytes, int]]:
    shards = [count_pieces(files=[path], show_progress=False) for path in files]
    exact = sum(shards).to_dict()  # type: ignore[union-attr]
    pruned = sum(prune(shard, threshold) for shard in shards).to_dict()  # type: ignore[union-attr]
    return shards, exact, pruned


def test_pruning_stays_within_its_stated_bound(tmp_path: Path) -> None:
    files = write_corpus(tmp_path, 8, 6, scaled(120_000))
    threshold = 3
    shards, exact, pruned = pruned_tables(files, threshold)
    bound = {piece: min(count, len(files) * (threshold - 1)) for piece, count in exact.items()}
    for piece, count in exact.items():
        assert 0 <= count - pruned.get(piece, 0) <= bound[piece], piece
    assert set(pruned) <= set(exact)
    assert len(pruned) <= sum(exact.values()) / threshold
    assert len(pruned) < len(exact)  # pruning did something
    # The pruned training is the merge loop on exactly the pruned tables.
    model = hf_bpe.distributed.train(files, 256 + 50, prune_below=threshold, group_bytes=1)
    assert model == train_from_counts(sum(prune(shard, threshold) for shard in shards), 256 + 50,
                                             show_progress=False)


@pytest.mark.slow
def test_pruning_keeps_the_merges_its_bound_guarantees(tmp_path: Path) -> None:
    text = require_shared("corpora", "shakespeare_milton.txt").read_text(encoding="utf-8")
    files = []
    for number in range(6):
        files.append(tmp_path / f"{number}.txt")
        files[-1].write_text(text[number * len(text) // 6:(number + 1) * len(text) // 6], encoding="utf-8")
    threshold, num_merges = 2, 40
    _, exact, pruned = pruned_tables(files, threshold)
    model = hf_bpe.distributed.train(files, 256 + num_merges, prune_below=threshold, group_bytes=1)
    reference = hf_bpe.train(files=files, vocab_size=256 + num_merges, show_progress=False)
    learned = [model.decode_single_token_bytes(i) for i in range(256, model.n_vocab)]
    expected = [reference.decode_single_token_bytes(i) for i in range(256, reference.n_vocab)]
    # Merge i is certain while the best pair's lead over the next exceeds what pruning removed from it.
    removed = {piece: count - pruned.get(piece, 0) for piece, count in exact.items()}
    kept = guaranteed_merges(exact, removed, num_merges)
    assert kept >= 3  # English's first pairs lead by a few percent: ' t' 4764 vs 'th' 4500 in 190 KB
    assert learned[:kept] == expected[:kept]
    print(f"pruning below {threshold} in {len(files)} shards: {len(exact)} -> {len(pruned)} pieces; the first "
          f"{kept} merges are certain, {sum(a == b for a, b in zip(learned, expected))} of {num_merges} agree")


def test_train_refuses_bad_options_before_any_work(corpus: list[Path], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="vocab_size 200 is too small"):
        hf_bpe.distributed.train(corpus, 200)
    with pytest.raises(ValueError, match="prune_below"):
        hf_bpe.distributed.train(corpus, 300, prune_below=0)
    with pytest.raises(FileNotFoundError, match="no file matches"):
        hf_bpe.distributed.train([str(tmp_path / "*.nothing")], 300)
    with pytest.raises(ValueError, match="num_workers"):
        hf_bpe.distributed.train(corpus, 300, num_workers=0)
    with pytest.raises(ValueError, match="task_memory_limit caps a Ray task's memory"):
        hf_bpe.distributed.train(corpus, 300, task_memory_limit=1 << 30)
    with pytest.raises(ValueError, match="max_retries must be an int >= 0"):
        hf_bpe.distributed.train(corpus, 300, max_retries=-1)


# ----------------------------------------------------------------------------------------- tokenizing


def read_shards(out: Path, dtype: str) -> tuple[list[list[int]], list[list[int]]]:
    """Every document's ids from the .bin/.idx files and from the Parquet files, in shard order."""
    import pyarrow.parquet as pq

    manifest = json.loads((out / "manifest.json").read_text())
    from_bin: list[list[int]] = []
    from_parquet: list[list[int]] = []
    for shard in manifest["shards"]:
        ids = np.fromfile(out / f"{shard['name']}.bin", dtype=np.dtype(dtype).newbyteorder("<"))
        offsets = np.fromfile(out / f"{shard['name']}.idx", dtype="<u8")
        assert offsets[0] == 0 and offsets[-1] == len(ids) == shard["num_tokens"]
        from_bin += [ids[start:stop].tolist() for start, stop in itertools.pairwise(offsets)]
        from_parquet += pq.read_table(out / f"{shard['name']}.parquet").column("input_ids").to_pylist()
    return from_bin, from_parquet


def test_tokenize_on_local_threads_writes_every_document_in_order(
    mixed_inputs: tuple[list[Path], list[str]], local_tokenized: Path
) -> None:
    _, documents = mixed_inputs
    encoding = hf_bpe.get_encoding("gpt2")
    expected = [encoding.encode_ordinary(text) + [50256] for text in documents]
    manifest = json.loads((local_tokenized / "manifest.json").read_text())
    assert manifest["dtype"] == "uint16" and manifest["eot"] == 50256
    assert len(manifest["shards"]) >= 4
    assert [shard["name"] for shard in manifest["shards"]] == [f"shard-{i:05d}" for i in range(len(manifest["shards"]))]
    from_bin, from_parquet = read_shards(local_tokenized, "uint16")
    assert from_bin == expected
    assert from_parquet == expected
    assert manifest["num_documents"] == len(documents)
    assert manifest["num_tokens"] == sum(map(len, expected))
    assert hf_bpe.BPE.load(local_tokenized / "hf_bpe.json") == encoding


def test_tokenize_uses_uint32_for_a_large_vocabulary(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("héllo wörld, 12345 times\n", encoding="utf-8")
    manifest = hf_bpe.distributed.tokenize_files([tmp_path / "a.txt"], "cl100k_base", tmp_path / "out", formats=["bin"])
    ids = np.fromfile(tmp_path / "out" / "shard-00000.bin", dtype="<u4").tolist()
    assert manifest["dtype"] == "uint32"
    assert ids == hf_bpe.get_encoding("cl100k_base").encode_ordinary("héllo wörld, 12345 times\n")
    assert not (tmp_path / "out" / "shard-00000.parquet").exists()


def test_a_rerun_redoes_only_missing_or_damaged_shards(
    mixed_inputs: tuple[list[Path], list[str]], local_tokenized: Path, tmp_path: Path
) -> None:
    paths, _ = mixed_inputs
    out = tmp_path / "out"
    for name, data in file_bytes(local_tokenized).items():
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_bytes(data)
    (out / "manifest.json").unlink()
    (out / "shard-00001.bin").unlink()
    damaged = bytearray((out / "shard-00002.parquet").read_bytes())
    damaged[100] ^= 0xFF
    (out / "shard-00002.parquet").write_bytes(bytes(damaged))
    (out / "shard-00003.json").unlink()
    before = {path.name: path.stat().st_mtime_ns for path in out.iterdir()}
    time.sleep(0.01)
    hf_bpe.distributed.tokenize_files(paths, "gpt2", out, eot=SPECIAL, shard_size=scaled(20_000), num_workers=1)
    assert file_bytes(out) == file_bytes(local_tokenized)
    # Shards 1 to 3 are redone, and only their missing or damaged files written: the others already
    # hold the very bytes (as after a worker stopped between two files of its shard).
    rewritten = {path.name for path in out.iterdir() if path.stat().st_mtime_ns != before.get(path.name)}
    assert rewritten == {"manifest.json", "shard-00001.bin", "shard-00002.parquet", "shard-00003.json"}


def test_a_rerun_with_other_inputs_or_options_is_refused(
    mixed_inputs: tuple[list[Path], list[str]], local_tokenized: Path, tmp_path: Path
) -> None:
    paths, _ = mixed_inputs
    with pytest.raises(ValueError, match="holds shards of another run .its eot differ"):
        hf_bpe.distributed.tokenize_files(paths, "gpt2", local_tokenized, shard_size=scaled(20_000))
    with pytest.raises(ValueError, match="its tokenizer, dtype, eot differ"):  # cl100k: uint32, eot 100257
        hf_bpe.distributed.tokenize_files(paths, "cl100k_base", local_tokenized, eot=SPECIAL, shard_size=scaled(20_000))
    with pytest.raises(ValueError, match="inputs, shards differ"):
        hf_bpe.distributed.tokenize_files(paths[1:], "gpt2", local_tokenized, eot=SPECIAL, shard_size=scaled(20_000))
    (tmp_path / "stranger.txt").write_text("not ours")
    with pytest.raises(ValueError, match="is not empty and holds no plan.json"):
        hf_bpe.distributed.tokenize_files(paths, "gpt2", tmp_path)


@pytest.mark.parametrize("kind", ["txt", "jsonl"])
def test_a_rerun_redoes_a_shard_whose_input_changed_with_its_size_and_time_kept(tmp_path: Path, kind: str) -> None:
    """Inputs are fingerprinted by content: an input rewritten with the same size and modification
    time is encoded again on resume, and the other shards are kept."""
    def write(path: Path, text: str) -> None:
        path.write_text(text if kind == "txt" else json.dumps({"text": text}) + "\n", encoding="utf-8")

    first, second = tmp_path / f"a.{kind}", tmp_path / f"b.{kind}"
    write(first, "hello world")
    write(second, "other words")
    out = tmp_path / "out"
    hf_bpe.distributed.tokenize_files([first, second], "gpt2", out, shard_size=1, num_workers=1)
    kept = {path.name: path.stat().st_mtime_ns for path in out.glob("shard-00001.*")}
    status = first.stat()
    write(first, "jello there")
    os.utime(first, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert (first.stat().st_size, first.stat().st_mtime_ns) == (status.st_size, status.st_mtime_ns)
    manifest = hf_bpe.distributed.tokenize_files([first, second], "gpt2", out, shard_size=1, num_workers=1)
    encoding = hf_bpe.get_encoding("gpt2")
    assert np.fromfile(out / "shard-00000.bin", dtype="<u2").tolist() == encoding.encode_ordinary("jello there")
    assert np.fromfile(out / "shard-00001.bin", dtype="<u2").tolist() == encoding.encode_ordinary("other words")
    assert {path.name: path.stat().st_mtime_ns for path in out.glob("shard-00001.*")} == kept
    digest = hashlib.blake2b(first.read_bytes(), digest_size=32).hexdigest()
    assert manifest["shards"][0]["input_digests"] == [digest]
    assert json.loads((out / "manifest.json").read_text()) == manifest


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("latin1.txt", "caf\xe9 cr\xe8me".encode("latin-1"), r"shard-00001 \(.*latin1.txt\): .*latin1.txt: not UTF-8 at byte 3"),
        ("mixed.jsonl", b'{"text": "ok"}\n{"text": "caf\xe9"}\n', r"shard-00002 .*mixed.jsonl bytes 15-32\): .*: not UTF-8 at byte 28"),
        ("nokey.jsonl", b'{"text": "ok"}\n{"body": "x"}\n', r"shard-00002 .*the object at byte 15 has no key 'text'"),
        ("notjson.jsonl", b'{"text": "ok"}\nplain text\n', r"shard-00002 .*the line at byte 15 is not JSON"),
        ("blank.jsonl", b"\n\n\n", r"shard-00001 .*holds no documents"),
    ],
)
def test_bad_input_names_the_file_and_shard_and_leaves_no_final_file(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    good = tmp_path / "good.txt"
    good.write_text("a good document", encoding="utf-8")
    bad = tmp_path / name
    bad.write_bytes(content)
    out = tmp_path / "out"
    with pytest.raises(ShardError, match=message) as failure:
        hf_bpe.distributed.tokenize_files([good, bad], "gpt2", out, shard_size=10, num_workers=1)
    # The shards before it are complete; nothing of the bad one exists under a final name; no manifest.
    failed = int(str(failure.value).split()[0].removeprefix("shard-"))
    expected = {"hf_bpe.json", "plan.json"} | {f"shard-{k:05d}.{suffix}" for k in range(failed)
                                               for suffix in ("bin", "idx", "parquet", "json")}
    assert final_names(out) == expected


def test_inputs_that_cannot_be_read_are_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "link.txt").symlink_to(tmp_path / "gone.txt")
    (tmp_path / "data.csv").write_text("text\nhello\n")
    (tmp_path / "bom.txt").write_bytes("\ufeffhello".encode())
    (tmp_path / "utf16.txt").write_bytes("héllo".encode("utf-16"))  # Python writes the mark of its byte order
    (tmp_path / "utf16be.ndjson").write_bytes(b"\xfe\xff" + '{"text": "hi"}\n'.encode("utf-16-be"))
    (tmp_path / "utf32.txt").write_bytes("hi".encode("utf-32"))
    out = tmp_path / "out"
    mark = "FF FE" if "é".encode("utf-16")[:2] == b"\xff\xfe" else "FE FF"
    cases = [
        ([tmp_path / "bom.txt"], ValueError, (r"bom.txt: starts with a UTF-8 byte order mark \(EF BB BF\), which "
                                             "would be tokenized as the character U\\+FEFF; remove it")),
        ([tmp_path / "utf16.txt"], ValueError, (rf"utf16.txt: a UTF-16 file \(it starts with the byte order mark "
                                               rf"{mark}\), not UTF-8; convert it first \(iconv -f UTF-16")),
        ([tmp_path / "utf16be.ndjson"], ValueError, r"utf16be.ndjson: a UTF-16 file \(.*FE FF\)"),
        ([tmp_path / "utf32.txt"], ValueError, r"utf32.txt: a UTF-32 file"),
        ([tmp_path / "empty.txt"], ValueError, "empty.txt: empty file"),
        ([tmp_path / "link.txt"], FileNotFoundError, "link.txt: a broken symbolic link"),
        ([tmp_path / "missing.txt"], FileNotFoundError, "missing.txt: no such file"),
        ([tmp_path], IsADirectoryError, "is a folder"),
        ([tmp_path / "data.csv"], ValueError, "cannot tell how to read a .csv file"),
        ([str(tmp_path / "*.jsonl")], FileNotFoundError, "no file matches this pattern"),
    ]
    for inputs, error, message in cases:
        with pytest.raises(error, match=message):
            hf_bpe.distributed.tokenize_files(inputs, "gpt2", out)
        assert not out.exists()
    with pytest.raises(ValueError, match="is not a special token of the model"):
        hf_bpe.distributed.tokenize_files([tmp_path / "data.csv"], "gpt2", out, eot="<|end|>")


def test_a_memory_limit_is_refused_on_local_cores(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a document", encoding="utf-8")
    with pytest.raises(ValueError, match="task_memory_limit caps a Ray task's memory"):
        hf_bpe.distributed.tokenize_files([tmp_path / "a.txt"], "gpt2", tmp_path / "out", task_memory_limit=1 << 30)
    with pytest.raises(ValueError, match="task_memory_limit must be a positive int"):
        hf_bpe.distributed.tokenize_files([tmp_path / "a.txt"], "gpt2", tmp_path / "out", task_memory_limit=0)


# ---------------------------------------------------------------------------------------- command line


def test_cli_tokenize_writes_what_the_api_writes(mixed_inputs: tuple[list[Path], list[str]], local_tokenized: Path,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hf_bpe import cli

    paths, documents = mixed_inputs
    out = tmp_path / "out"
    status = cli.main(["tokenize", *map(str, paths), "--tokenizer", "gpt2", "--eot", SPECIAL, "--out", str(out),
                       "--shard-size", str(scaled(20_000)), "--num-workers", "1"])
    assert status == 0
    assert file_bytes(out) == file_bytes(local_tokenized)
    assert f"{len(documents):,} documents" in capsys.readouterr().out
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9")
    status = cli.main(["tokenize", str(tmp_path / "bad.txt"), "--tokenizer", "gpt2", "--out", str(tmp_path / "b")])
    assert status == 1
    assert "shard-00000" in capsys.readouterr().err
    status = cli.main(["tokenize", str(paths[0]), "--tokenizer", "gpt2", "--out", str(tmp_path / "c"),
                       "--task-memory-limit", "1G"])
    assert status == 1
    assert "task_memory_limit caps a Ray task's memory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["train", str(paths[0]), "--vocab-size", "300", "--out", str(tmp_path / "t"), "--prune-below", "2"])
    assert "--prune-below work with --ray only" in capsys.readouterr().err
