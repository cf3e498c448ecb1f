"""Parity-aware training: ``hf_bpe.train(languages=...)`` against ``tokenizers.trainers.ParityBpeTrainer`` on the
shared wiki corpora (Greek, Japanese, Ukrainian, Vietnamese as four languages, each file's documents split at
blank lines, the first ``--mb`` MB each for training and the next quarter of that as dev sets), the same
texts and options for both, HF's ByteLevel pre-tokenization (``ByteLevel(add_prefix_space=False)``, and on
hf_bpe's side the same regex as a Split). Rounds interleave the two trainers in one process; each call is
timed, and its peak resident memory measured above the resident size it started from (Linux's
``/proc/self/clear_refs`` restarts the peak). Both results' merges are compared first: the run stops on any
difference.

    python benchmarks/train_parity.py                        # 1 MB per language, vocab 8192, 3 rounds
    python benchmarks/train_parity.py --mb 3 --vocab 16384 --variant window --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import SHARED_CORPORA, THREADS_DEFAULT

import hf_bpe
from hf_bpe import patterns

from naive_parity_bpe import GPT2_PATTERN, from_byte_level  # isort: skip  (tests/)

LANGUAGES = ("el", "ja", "uk", "vi")


def documents(path: Path, start_mb: float, mb: float) -> list[str]:
    """The documents (blank-line separated) whose text starts in ``[start_mb, start_mb + mb)`` MB of ``path``."""
    text = path.read_text(encoding="utf-8")
    found, offset = [], 0
    for document in text.split("\n\n"):
        size = len(document.encode("utf-8")) + 2
        if start_mb * 1e6 <= offset < (start_mb + mb) * 1e6 and document:
            found.append(document)
        offset += size
    return found


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def peak_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


def measured(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """``run()``'s result, seconds and peak MiB above the resident size it started from."""
    Path("/proc/self/clear_refs").write_text("5")
    start = rss_mib()
    began = time.perf_counter()
    result = run()
    return result, time.perf_counter() - began, peak_mib() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=1.0, help="training MB per language (default 1)")
    parser.add_argument("--vocab", type=int, default=8192, help="vocabulary: 256 + merges (default 8192)")
    parser.add_argument("--variant", choices=["base", "window"], default="base")
    parser.add_argument("--mode", choices=["dev", "ratio", "none"], default="dev")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    train = [documents(SHARED_CORPORA / f"wiki_{language}.txt", 0, args.mb) for language in LANGUAGES]
    dev = [documents(SHARED_CORPORA / f"wiki_{language}.txt", args.mb, args.mb / 4) for language in LANGUAGES]
    dev_sets = dev if args.mode == "dev" else None
    ratio = [1.0, 1.2, 0.9, 1.1] if args.mode == "ratio" else None
    num_merges = args.vocab - 256
    options = {"variant": args.variant, "window_size": 100, "global_merges": 100}

    def ours() -> list[tuple[bytes, bytes]]:
        model = hf_bpe.train(vocab_size=args.vocab, pattern=patterns.Split(GPT2_PATTERN, "isolated"),
                             languages=dict(zip(LANGUAGES, train)),
                             dev=None if dev_sets is None else dict(zip(LANGUAGES, dev_sets)),
                             ratio=ratio, show_progress=False, num_threads=THREADS_DEFAULT, **options)
        return model.merges

    def theirs() -> list[tuple[bytes, bytes]]:
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.ParityBpeTrainer(num_merges=num_merges, show_progress=False, **options)
        trainer.train_from_iterator(tokenizer, [iter(texts) for texts in train],
                                    dev_iterators=None if dev_sets is None else [iter(texts) for texts in dev_sets],
                                    ratio=ratio)
        saved = json.loads(tokenizer.to_str())["model"]["merges"]
        return [(from_byte_level(left), from_byte_level(right)) for left, right in saved]

    runs = {"hf_bpe": ours, "ParityBpeTrainer": theirs}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    merges: dict[str, Any] = {}
    for _ in range(args.rounds):
        for name, run in runs.items():
            merges[name], seconds, peak = measured(run)
            results[name].append((seconds, peak))
        if merges["hf_bpe"] != merges["ParityBpeTrainer"]:
            raise SystemExit("the merges differ: no timing is reported")
    sizes = [sum(len(text.encode("utf-8")) for text in texts) / 1e6 for texts in train]
    print(f"{len(LANGUAGES)} languages, {sum(sizes):.2f} MB training ({', '.join(f'{s:.2f}' for s in sizes)}), "
          f"mode {args.mode}, variant {args.variant}, {len(merges['hf_bpe'])} merges, identical; "
          f"{THREADS_DEFAULT} threads")
    print("| trainer | " + " | ".join(f"round {i + 1} s" for i in range(args.rounds)) + " | median s | peak MiB |")
    print("|---|" + "---:|" * (args.rounds + 2))
    for name, rows in results.items():
        median = statistics.median(seconds for seconds, _ in rows)
        print(f"| {name} | " + " | ".join(f"{seconds:.2f}" for seconds, _ in rows) +
              f" | {median:.2f} | {max(peak for _, peak in rows):.0f} |")
    ratios = [theirs_s / ours_s for (ours_s, _), (theirs_s, _) in zip(results["hf_bpe"], results["ParityBpeTrainer"])]
    print("ParityBpeTrainer / hf_bpe per round: " + ", ".join(f"{r:.1f}x" for r in ratios))


if __name__ == "__main__":
    main()
