"""Extension benchmark: ``hf_bpe.extend`` against training from scratch to the same vocabulary.

No peer extends a trained vocabulary while keeping its ids, so the closest alternative is training anew on
the old and the new text together. A base model is trained (untimed) on English (Shakespeare and Milton)
to ``--base-vocab`` tokens; then, in turns within each round:

- ``extend``: ``hf_bpe.extend(base, greek, N)``, N new tokens learned on Greek Wikipedia;
- ``hf_bpe.train``: training from scratch on English + Greek to ``base-vocab + N``;
- ``tokenizers``: HF ``tokenizers``' ``BpeTrainer`` on the same files to the same size (byte-level, GPT-2
  pattern, as hf_bpe's training).

Times are the calls' wall time, best of ``--repeat`` rounds, one process. Then cl100k_base extended by
1000 tokens on the first 3/4 of the Greek corpus: the time, and bytes per token on the last quarter
(held out) and on English before and after (English must not change).

    python benchmarks/extend.py
    python benchmarks/extend.py --new 1000 4096 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import hf_bpe

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "corpora"
ENGLISH, GREEK = SHARED / "shakespeare_milton.txt", SHARED / "wiki_el.txt"


def seconds(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def tokenizers_train(paths: list[Path], vocab_size: int) -> object:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(hf_bpe.patterns.GPT2), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, min_frequency=0,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train([str(path) for path in paths], trainer)
    return tokenizer


def from_scratch(base_vocab: int, news: list[int], repeat: int) -> None:
    base = hf_bpe.train(files=[ENGLISH], vocab_size=base_vocab, show_progress=False)
    greek = GREEK.read_text(encoding="utf-8")
    best: dict[tuple[str, int], float] = {}
    for _ in range(repeat):
        for new in news:
            runs = {
                "extend": lambda new=new: hf_bpe.extend(base, files=[GREEK], num_new_tokens=new, show_progress=False),
                "hf_bpe.train": lambda new=new: hf_bpe.train(files=[ENGLISH, GREEK], vocab_size=base_vocab + new,
                                                             show_progress=False),
                "tokenizers": lambda new=new: tokenizers_train([ENGLISH, GREEK], base_vocab + new),
            }
            for name, work in runs.items():
                taken = seconds(work)
                best[name, new] = min(best.get((name, new), taken), taken)
    extended = hf_bpe.extend(base, files=[GREEK], num_new_tokens=news[0], show_progress=False)
    before, after = len(base.encode_ordinary(greek)), len(extended.encode_ordinary(greek))
    print(f"Base: hf_bpe.train on {ENGLISH.name} ({ENGLISH.stat().st_size / 1e6:.1f} MB), vocab {base_vocab}; new "
          f"text {GREEK.name} ({GREEK.stat().st_size / 1e6:.1f} MB). Best of {repeat} rounds.\n")
    print("| new tokens | hf_bpe.extend s | hf_bpe.train from scratch s | tokenizers BpeTrainer from scratch s | "
          "train / extend | tokenizers / extend |")
    print("|---:|---:|---:|---:|---:|---:|")
    for new in news:
        times = [best[name, new] for name in ("extend", "hf_bpe.train", "tokenizers")]
        print(f"| {new:,} | {times[0]:.2f} | {times[1]:.2f} | {times[2]:.2f} | {times[1] / times[0]:.1f}x | "
              f"{times[2] / times[0]:.1f}x |")
    print(f"\nGreek bytes per token, base -> extended by {news[0]:,}: {len(greek.encode()) / before:.3f} -> "
          f"{len(greek.encode()) / after:.3f}")


def cl100k_greek(new: int) -> None:
    greek = GREEK.read_text(encoding="utf-8")
    cut = len(greek) * 3 // 4
    cut = greek.index("\n", cut) + 1
    train, held_out = greek[:cut], greek[cut:]
    english = ENGLISH.read_text(encoding="utf-8")[:2_000_000]
    model = hf_bpe.get_encoding("cl100k_base")
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extended = hf_bpe.extend(model, [train], new, show_progress=False)
    taken = time.perf_counter() - started
    old, new_ranks = model.mergeable_ranks, extended.mergeable_ranks
    kept = all(new_ranks[token] == id for token, id in old.items())
    print(f"\ncl100k_base extended by {new:,} on {len(train.encode()) / 1e6:.1f} MB of Greek: {taken:.2f} s; every old "
          f"id kept: {kept}")
    for label, text in (("held-out Greek", held_out), ("English", english)):
        before, after = model.encode_ordinary(text), extended.encode_ordinary(text)
        size = len(text.encode())
        print(f"  {label} ({size / 1e6:.2f} MB): bytes per token {size / len(before):.3f} -> {size / len(after):.3f}"
              + ("; same ids" if before == after else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-vocab", type=int, default=32768)
    parser.add_argument("--new", type=int, nargs="+", default=[1000, 4096])
    parser.add_argument("--repeat", type=int, default=3)
    arguments = parser.parse_args()
    for path in (ENGLISH, GREEK):
        if not path.is_file():
            raise SystemExit(f"{path} is missing: the benchmark reads the shared corpora next to the repository")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent, check=False).stdout.strip()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}, {platform.processor() or ''} "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}\n")
    from_scratch(arguments.base_vocab, arguments.new, arguments.repeat)
    cl100k_greek(1000)


if __name__ == "__main__":
    main()
