"""Training on a streamed corpus far larger than memory needs: peak memory stays under a ceiling.

A generator yields ``--gb`` GB of documents (64 KB each) built from the lines of
``../shared/data/corpora`` in turn (generated text when absent); every line also gets a random
made-up word, so the number of distinct pieces keeps growing with the corpus, as in real web text
(repeating the same lines would only re-count the same pieces). ``hf_bpe.train`` consumes the
generator; nothing holds the corpus. The run happens in a child process, which reports its wall
time and its own peak resident memory (``ru_maxrss``: interpreter, imports, generator, training).

    python benchmarks/train_stream.py                    # 1 GB, vocab 32768, 2 threads, 2 GB ceiling
    python benchmarks/train_stream.py --gb 0.2 --vocab 8192
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from _common import SHARED_CORPORA, textgen

DOCUMENT_BYTES = 64 * 1024


def lines_of_corpora(seed: int) -> Iterator[str]:
    """The non-blank lines of the shared corpora, read lazily and over again without end (generated
    text when the corpora are absent): the benchmark holds no corpus in memory either."""
    files = sorted(path for path in SHARED_CORPORA.glob("*.txt") if "COPYING" not in path.name)
    if not files:
        docs = textgen.documents(random.Random(seed), 5_000_000, specials=False)
        generated = [line for doc in docs for line in doc.splitlines() if line.strip()]
        while True:
            yield from generated
    while True:
        for path in files:
            with path.open(encoding="utf-8") as lines:
                yield from (line.rstrip("\n") for line in lines if line.strip())


def documents(total_bytes: int, seed: int) -> Iterator[str]:
    """Documents of about ``DOCUMENT_BYTES`` until ``total_bytes`` of UTF-8 have been yielded."""
    rng = random.Random(seed)
    lines = lines_of_corpora(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    produced = 0
    while produced < total_bytes:
        parts, size = [], 0
        while size < DOCUMENT_BYTES:
            word = "".join(rng.choices(letters, k=rng.randint(5, 9)))
            line = f"{next(lines)} {word}\n"
            parts.append(line)
            size += len(line.encode("utf-8"))
        produced += size
        yield "".join(parts)


def child(gb: float, vocab: int, threads: int, seed: int) -> None:
    import hf_bpe

    total = int(gb * 1e9)
    start = time.perf_counter()
    model = hf_bpe.train(documents(total, seed), vocab, pattern="gpt2", show_progress=False, num_threads=threads)
    seconds = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"bytes": total, "seconds": seconds, "peak_mib": peak_mib, "n_vocab": model.n_vocab}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=1.0, help="GB of text to stream (default 1)")
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ceiling-gb", type=float, default=2.0, help="peak memory allowed (default 2 GB)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.gb, args.vocab, args.threads, args.seed)
        return 0
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--gb", str(args.gb), "--vocab",
               str(args.vocab), "--threads", str(args.threads), "--seed", str(args.seed)]
    result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    ceiling_mib = args.ceiling_gb * 1e9 / 2**20
    verdict = "under" if result["peak_mib"] < ceiling_mib else "OVER"
    print(f"streamed {result['bytes'] / 1e9:.2f} GB (shared corpora lines + a random word per line, 64 KB "
          f"documents); vocab {result['n_vocab']}; {args.threads} threads")
    print(f"wall time {result['seconds']:.1f} s ({result['bytes'] / 1e6 / result['seconds']:.1f} MB/s), peak memory "
          f"{result['peak_mib']:.0f} MiB: {verdict} the {args.ceiling_gb:g} GB ceiling")
    return 0 if verdict == "under" else 1


if __name__ == "__main__":
    sys.exit(main())
