"""What hf_bpe.distributed costs over the single-process path on the same cores: training and
tokenizing ``--gb`` GB (default 1) with 1 and 2 workers, on Ray and on local threads, and peak memory.

The corpus repeats and shuffles the documents of ``../shared/data/corpora`` (generated text when
absent) until it holds ``--gb`` GB, written under ``$TMPDIR`` (deleted afterwards) twice: as text files
(one per pass over the shuffled documents, at most 64 MB; 27 MB with the shared corpora) whose
documents are joined by ``<|endoftext|>`` (training: each file a document split
on that special token, as ``hf_bpe.train(files=...)`` reads it) and as JSON Lines files (tokenizing:
one document per line). Every run happens in a child process of its own:

- ``train``: ``hf_bpe.train(files=..., num_threads=N)`` (single process) against
  ``hf_bpe.distributed.train`` with ``num_workers=N`` on local threads and on a local Ray started
  with ``num_cpus=N`` (Ray's start-up is not timed: on a cluster it is up already);
- ``tokenize``: a plain loop (read each JSON Lines file, ``encode_ordinary_batch(num_threads=N)``,
  one ``.bin`` per file) against ``hf_bpe.distributed.tokenize_files(formats=("bin",))`` with
  ``num_workers=N`` on local cores (worker processes when N > 1) and on Ray (shards of 64 MB, ``.idx``,
  sha256, records and manifest).

Peak memory: the driver's own ``ru_maxrss``, and for Ray the largest resident size any worker process
reached (sampled every 0.1 s); local worker processes are not measured.

    python benchmarks/distributed.py                 # 1 GB, vocab 8192, 1 and 2 workers
    python benchmarks/distributed.py --gb 0.2 --workers 2
    python benchmarks/distributed.py --runs train-single train-local train-ray --repeat 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import MB, SHARED_CORPORA, load_documents

EOT = "<|endoftext|>"
FILE_BYTES = 64 * MB
RUNS = ("train-single", "train-local", "train-ray", "tokenize-single", "tokenize-local", "tokenize-ray")


def build_corpus(folder: Path, gigabytes: float, seed: int) -> tuple[list[Path], list[Path], str]:
    """Text files (documents joined by EOT) and JSON Lines files with the same documents."""
    described, documents = load_documents([SHARED_CORPORA], 64, seed)
    rng = random.Random(seed)
    target = int(gigabytes * 1000 * MB)
    texts: list[Path] = []
    lines: list[Path] = []
    written = 0
    while written < target:
        order = documents[:]
        rng.shuffle(order)
        start = 0
        while start < len(order) and written < target:
            batch, size = [], 0
            while start < len(order) and size < FILE_BYTES:
                batch.append(order[start])
                size += len(order[start].encode("utf-8"))
                start += 1
            number = len(texts)
            texts.append(folder / f"part-{number:04d}.txt")
            texts[-1].write_text(EOT.join(batch), encoding="utf-8", newline="")
            lines.append(folder / f"part-{number:04d}.jsonl")
            with open(lines[-1], "w", encoding="utf-8") as file:
                file.writelines(json.dumps({"text": document}, ensure_ascii=False) + "\n" for document in batch)
            written += size
    return texts, lines, f"{written / MB:,.0f} MB in {len(texts)} files, repeating and shuffling {described}"


class WorkerMemory:
    """Samples the resident size of this process's descendants (Ray's workers) every 0.1 s."""

    def __init__(self) -> None:
        import psutil

        self.peak: dict[int, int] = {}
        self.stop = threading.Event()
        self.me = psutil.Process()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        import psutil

        while not self.stop.wait(0.1):
            for child in self.me.children(recursive=True):
                try:
                    if " ".join(child.cmdline()).startswith("ray::"):
                        self.peak[child.pid] = max(self.peak.get(child.pid, 0), child.memory_info().rss)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue

    def result(self) -> int:
        self.stop.set()
        self.thread.join()
        return max(self.peak.values(), default=0)


def run_one(name: str, workers: int, folder: Path, vocab_size: int) -> dict[str, Any]:
    import numpy as np

    import hf_bpe
    import hf_bpe.distributed

    texts = sorted(folder.glob("*.txt"))
    lines = sorted(folder.glob("*.jsonl"))
    out = folder / f"out-{name}-{workers}"
    ray = None
    if name.endswith("-ray"):
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                 _temp_dir=os.path.join(tempfile.gettempdir(), "ray"))
    memory = WorkerMemory() if ray is not None else None
    started = time.perf_counter()
    if name == "train-single":
        model = hf_bpe.train(files=texts, vocab_size=vocab_size, special_tokens=[EOT], num_threads=workers,
                             show_progress=False)
    elif name.startswith("train-"):
        model = hf_bpe.distributed.train(texts, vocab_size, special_tokens=[EOT], num_workers=workers)
    elif name == "tokenize-single":
        encoding = hf_bpe.get_encoding("gpt2")
        out.mkdir()
        for path in lines:
            with open(path, encoding="utf-8") as file:
                documents = [json.loads(line)["text"] for line in file]
            parts = []
            for start in range(0, len(documents), 256):
                rows = encoding.encode_ordinary_batch(documents[start:start + 256], num_threads=workers)
                for row in rows:
                    row.append(50256)
                parts.append(np.fromiter(itertools.chain.from_iterable(rows), dtype="<u2"))
            np.concatenate(parts).tofile(out / f"{path.stem}.bin")
    else:
        hf_bpe.distributed.tokenize_files(lines, "gpt2", out, eot=EOT, shard_size=FILE_BYTES, formats=("bin",),
                                    num_workers=workers)
    seconds = time.perf_counter() - started
    result: dict[str, Any] = {"seconds": seconds, "driver_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if memory is not None:
        result["worker_peak_mb"] = memory.result() / MB
    if name.startswith("train"):
        result["merges"] = model.n_vocab - 257
        model.save(folder / f"model-{name}-{workers}.json")
    if ray is not None:
        ray.shutdown()
    shutil.rmtree(out, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="corpus size in GB (default 1)")
    parser.add_argument("--vocab", type=int, default=8192, help="vocabulary size for training (default 8192)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (default 1 2)")
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=RUNS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of every run, interleaved; the table shows each cell's best (default 1)")
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.run:
        print(json.dumps(run_one(arguments.run, arguments.workers[0], arguments.folder, arguments.vocab)))
        return
    folder = Path(tempfile.mkdtemp(prefix="hf_bpe-distributed-"))
    try:
        _, _, described = build_corpus(folder, arguments.gb, arguments.seed)
        print(f"corpus: {described}; vocab {arguments.vocab}; the machine's {os.cpu_count()} cores may be shared")
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for round_number in range(arguments.repeat):  # rounds interleave the contenders; the best run counts
            for workers in arguments.workers:
                for name in arguments.runs:
                    child = subprocess.run(
                        [sys.executable, __file__, "--run", name, "--workers", str(workers), "--folder", str(folder),
                         "--vocab", str(arguments.vocab)], capture_output=True, text=True, check=False)
                    if child.returncode != 0:
                        print(f"{name} x{workers} failed:\n{child.stderr[-2000:]}")
                        continue
                    result = json.loads(child.stdout.strip().splitlines()[-1])
                    best = results.get((name, workers))
                    if best is None or result["seconds"] < best["seconds"]:
                        results[name, workers] = result
                    print(f"{name:16} {workers} worker(s), round {round_number + 1}: {json.dumps(result)}", flush=True)
        models = {path.name: path.read_bytes() for path in folder.glob("model-*.json")}
        identical = len({data for data in models.values()}) == 1
        print(f"\ntrained models identical across every run: {identical} ({len(models)} models)")
        print("\n| task | workers | single process s | local cores s (ratio) | Ray s (ratio) | Ray worker peak MB |")
        print("|---|---|---|---|---|---|")
        for task in ("train", "tokenize"):
            for workers in arguments.workers:
                single = results.get((f"{task}-single", workers), {}).get("seconds")
                local = results.get((f"{task}-local", workers), {}).get("seconds")
                on_ray = results.get((f"{task}-ray", workers), {})
                cells = [f"{single:.1f}" if single else "-"]
                for value in (local, on_ray.get("seconds")):
                    cells.append(f"{value:.1f} ({value / single:.2f})" if value and single else "-")
                cells.append(f"{on_ray['worker_peak_mb']:.0f}" if "worker_peak_mb" in on_ray else "-")
                print(f"| {task} | {workers} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
