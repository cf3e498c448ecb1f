"""Worst-case input: encode speed on adversarial text against speed on natural text, per encoding.

Adversarial inputs are one megabyte each (``--mb``), built by ``tests/support/textgen.py``'s generators
plus random bytes: one letter repeated (one piece under every pattern), random ASCII letters without
spaces, random Latin-1 letters, random non-whitespace characters from several scripts, and random bytes
decoded with replacement. Natural text is ``../shared/data/corpora`` (generated text when absent), cut
into documents of 1-10 KB as ``encode.py`` does. Every timing is ``encode_ordinary`` on one thread, the
best of ``--repeat`` runs; each adversarial run gets a fresh first character, so no cache can carry one
run's work to the next.

    python benchmarks/adversarial.py
    python benchmarks/adversarial.py --encodings o200k_base --mb 4

The goal: every adversarial input at no less than a third of the natural MB/s.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable

from _common import MB, SHARED_CORPORA, load_documents, textgen


def adversarial_inputs(size: int) -> dict[str, Callable[[int], str]]:
    def random_bytes(run: int) -> str:
        rng = random.Random(4000 + run)
        return rng.randbytes(size).decode("utf-8", errors="replace")

    return {
        "one letter repeated": lambda run: textgen.repeated_letter(run, size),
        "random ASCII letters, no spaces": lambda run: textgen.random_ascii_letters(run, size),
        "random Latin-1 letters": lambda run: textgen.random_latin1_letters(run, size),
        "random non-whitespace, many scripts": lambda run: textgen.random_non_whitespace(run, size),
        "random bytes (decoded with replacement)": random_bytes,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encodings", default="cl100k_base,o200k_base,gpt2")
    parser.add_argument("--mb", type=float, default=1.0, help="size of each adversarial input (default 1 MB)")
    parser.add_argument("--natural-mb", type=float, default=10.0, help="natural text to time (default 10 MB)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import hf_bpe

    description, docs = load_documents([SHARED_CORPORA], args.natural_mb, seed=0)
    natural_mb = textgen.utf8_size(docs) / MB
    print(f"natural text: {description}; adversarial inputs of {args.mb:g} MB; best of {args.repeat}")
    rows = []
    for name in args.encodings.split(","):
        encoding = hf_bpe.get_encoding(name)
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            for doc in docs:
                encoding.encode_ordinary(doc)
            best = min(best, time.perf_counter() - start)
        natural = natural_mb / best
        for label, make in adversarial_inputs(int(args.mb * MB)).items():
            best, size = float("inf"), 0.0
            for run in range(args.repeat):
                text = make(run)
                size = len(text.encode("utf-8")) / MB
                start = time.perf_counter()
                encoding.encode_ordinary(text)
                best = min(best, time.perf_counter() - start)
            rate = size / best
            rows.append((name, label, rate, natural, rate / natural))
            print(f"  {name} {label}: {rate:.1f} MB/s (natural {natural:.1f} MB/s)", flush=True)
    print()
    print("| encoding | adversarial input | MB/s | natural text MB/s | adversarial / natural |")
    print("|---|---|---:|---:|---:|")
    for name, label, rate, natural, ratio in rows:
        print(f"| {name} | {label} | {rate:.1f} | {natural:.1f} | {ratio:.2f} |")
    worst = min(row[4] for row in rows)
    print(f"\nworst ratio {worst:.2f} (goal: at least 0.33)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
