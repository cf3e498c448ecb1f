"""The numbers behind docs/scale.md: how the count table grows with the corpus, what it weighs, and
what the merge phase costs, measured on ``../shared/data/corpora`` and extrapolated to 1 TB.

1. Distinct pieces ``D(n)`` (GPT-2 pattern) of prefixes of the shared corpora's documents in shuffled
   order (no repetition) at sizes from 0.25 MB to all of it, fitted as ``D = k * n^beta`` (least
   squares on logarithms); the pickled table's bytes per distinct piece.
2. Counting rate of one core (``count_pieces(files=..., num_threads=1)``), MB/s.
3. The merge phase on the full table: seconds and peak resident memory (a child process) for each
   ``--vocab``, per distinct piece.
4. The plan for ``--tb`` TB on ``--nodes`` nodes of ``--cores`` cores: groups of 64 MB counted by one
   actor per core into its own table, the tables of each level of the combine tree over the actors
   (fan-in 4) from the fit, the bytes each level moves, and the time.

    python benchmarks/scale.py
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import MB, SHARED_CORPORA, load_documents
from _memory import peak_mib

from hf_bpe.train import count_pieces, train_from_counts

GROUP_BYTES = 64 * MB
FAN_IN = 4


def merge_child(table_path: str, vocab_size: int) -> None:
    counts = pickle.loads(Path(table_path).read_bytes())
    before = peak_mib()  # its own peak: the main process, which holds 64 MB of documents, is larger
    started = time.perf_counter()
    train_from_counts(counts, vocab_size, show_progress=False)
    seconds = time.perf_counter() - started
    peak = peak_mib()
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "table_loaded_mb": before}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, nargs="+", default=[32768, 131072])
    parser.add_argument("--tb", type=float, default=1.0)
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--cores", type=int, default=32)
    parser.add_argument("--merge-child", nargs=2, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.merge_child:
        merge_child(arguments.merge_child[0], int(arguments.merge_child[1]))
        return
    described, documents = load_documents([SHARED_CORPORA], 64, 0)
    print(f"corpus: {described}")
    total = sum(len(document.encode("utf-8")) for document in documents)
    sizes = [0.25 * MB * 2**k for k in range(20) if 0.25 * MB * 2**k < total] + [total]
    points = []
    folder = Path(tempfile.mkdtemp(prefix="hf_bpe-scale-"))
    prefix, used, index = [], 0, 0
    for size in sizes:
        while index < len(documents) and used < size:
            prefix.append(documents[index])
            used += len(documents[index].encode("utf-8"))
            index += 1
        counts = count_pieces(iter(prefix), show_progress=False)
        points.append((used, len(counts), counts.total))
        print(f"  {used / MB:8.2f} MB: {len(counts):>9,} distinct pieces of {counts.total:>11,}")
    xs = [math.log(n) for n, _, _ in points]
    ys = [math.log(d) for _, d, _ in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    beta = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    k = math.exp(mean_y - beta * mean_x)
    worst = max(abs(math.exp(math.log(k) + beta * x) / math.exp(y) - 1) for x, y in zip(xs, ys))
    print(f"fit: D(n) = {k:.3f} * n^{beta:.3f} (n in bytes); largest relative error at a measured point {worst:.1%}")

    def distinct(n: float) -> float:
        return k * n**beta

    pickled = pickle.dumps(counts, protocol=pickle.HIGHEST_PROTOCOL)
    per_piece = len(pickled) / len(counts)
    print(f"pickled table: {len(pickled) / MB:.2f} MB for {len(counts):,} pieces = {per_piece:.1f} bytes per piece")

    text_file = folder / "all.txt"
    text_file.write_text("".join(documents), encoding="utf-8")
    started = time.perf_counter()
    count_pieces(files=[text_file], num_threads=1, show_progress=False)
    rate = total / MB / (time.perf_counter() - started)
    print(f"counting, one core: {rate:.1f} MB/s")

    table_path = folder / "table.pickle"
    table_path.write_bytes(pickled)
    merges = {}
    for vocab in arguments.vocab:
        child = subprocess.run([sys.executable, __file__, "--merge-child", str(table_path), str(vocab)],
                               capture_output=True, text=True, check=True)
        merges[vocab] = json.loads(child.stdout.strip().splitlines()[-1])
        result = merges[vocab]
        print(f"merge phase, vocab {vocab}: {result['seconds']:.1f} s, peak {result['peak_mb']:.0f} MB "
              f"(at most {result['peak_mb'] * 2**20 / len(counts):.0f} bytes per distinct piece, interpreter included)")

    corpus_bytes = arguments.tb * 1e12
    groups = math.ceil(corpus_bytes / GROUP_BYTES)
    actors = arguments.nodes * arguments.cores
    print(f"\nplan: {arguments.tb} TB, {arguments.nodes} nodes x {arguments.cores} cores, groups of "
          f"{GROUP_BYTES / MB:.0f} MB: {groups:,} groups for {actors:,} counting actors "
          f"({groups / actors:.1f} groups, {corpus_bytes / actors / MB:,.0f} MB each)")
    level, tables, covered, moved_total = 0, actors, corpus_bytes / actors, 0.0
    while tables > 1:
        entries = min(distinct(covered), distinct(corpus_bytes))
        after = math.ceil(tables / FAN_IN)
        moved = (tables - after) * entries * per_piece  # the first actor of each step keeps its table
        moved_total += moved
        print(f"  level {level}: {tables:>6,} tables of {entries:>13,.0f} pieces ({entries * per_piece / MB:>9,.1f} MB "
              f"each): {moved / 1e9:,.1f} GB moved")
        tables = after
        covered *= FAN_IN
        level += 1
    final = distinct(corpus_bytes)
    print(f"  combined table: {final:,.0f} distinct pieces, {final * per_piece / 1e9:,.1f} GB pickled; "
          f"{moved_total / 1e9:,.0f} GB moved by the tree in all")
    hours = corpus_bytes / MB / (rate * arguments.nodes * arguments.cores) / 3600
    print(f"  counting at {rate:.1f} MB/s per core on {arguments.nodes * arguments.cores} cores: {hours * 3600:,.0f} s")
    for vocab, result in merges.items():
        scale = final / len(counts)
        print(f"  merge phase, vocab {vocab}: about {result['seconds'] * scale / 3600:.1f} h and "
              f"{result['peak_mb'] * scale / 1024:,.0f} GB if time and memory grow in proportion to the "
              f"distinct pieces ({scale:,.0f} times the measured table)")
    for threshold in (2, 10):
        print(f"  prune_below={threshold}: the combined table holds at most total/{threshold} pieces; measured on "
              f"{total / MB:.0f} MB: {sum(1 for _, n in counts.most_common() if n >= threshold):,} of {len(counts):,} "
              f"pieces have count >= {threshold} over the whole corpus")
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()


if __name__ == "__main__":
    main()
