"""Training benchmark: hf_bpe against HF ``tokenizers``, ``rustbpe`` and SentencePiece (BPE).

Every trainer learns from the same text (by default ~25 MB of ``../shared/data/corpora``: Shakespeare
and Milton plus four Wikipedia languages) with the GPT-2 split pattern and a byte-level alphabet where
the trainer has them, at each vocabulary size. Each run happens in a fresh subprocess, which reports
its wall time for the training call and its own peak resident memory (``ru_maxrss``, the whole
process: interpreter, imports and training). Also timed: CS336's bar (``corpus.en``, vocab 500).

    python benchmarks/train.py                      # all trainers, vocab 8192 and 32768
    python benchmarks/train.py --trainers hf_bpe tokenizers --vocab 8192 --size-mb 5
    python benchmarks/train.py --trainers hf_bpe rustbpe --vocab 65536 131072 --pattern cl100k --mix-mb 100

``--mix-mb`` trains on a larger mix instead: the lines of all the shared corpora, shuffled (seeded) and
repeated until the mix holds that many MB, written into ``$TMPDIR`` in five files and deleted after.
The table gives each trainer's time and peak memory as multiples of hf_bpe's at the same vocabulary
(``rustbpe 2.40x`` = rustbpe took 2.4 times as long as hf_bpe).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hf_bpe.train import count_pieces

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
SOURCES = ["shakespeare_milton.txt", "wiki_ja.txt", "wiki_el.txt", "wiki_vi.txt", "wiki_uk.txt"]
TRAINERS = ["hf_bpe", "tokenizers", "rustbpe", "sentencepiece"]
HOW_FED = {
    "hf_bpe": "the files (streamed, each a document)",
    "tokenizers": "the files (`Tokenizer.train`, read by lines)",
    "rustbpe": "the files' lines (`train_from_iterator`)",
    "sentencepiece": "the files (lines are sentences)",
}


def build_corpus(folder: Path, size_mb: float) -> list[Path]:
    """Shakespeare and Milton whole, the rest of ``size_mb`` shared evenly by the four Wikipedias;
    every file cut at a line end."""
    budget = int(size_mb * 1_000_000)
    first = (SHARED / "corpora" / SOURCES[0]).read_bytes()
    shares = [min(len(first), budget // 2)] + [(budget - min(len(first), budget // 2)) // 4] * 4
    paths = []
    for source, share in zip(SOURCES, shares):
        data = (SHARED / "corpora" / source).read_bytes()
        cut = data.rfind(b"\n", 0, share) + 1 if share < len(data) else len(data)
        path = folder / source
        path.write_bytes(data[:cut])
        paths.append(path)
    return paths


def build_mix(folder: Path, size_mb: float, seed: int = 0) -> list[Path]:
    """The lines of every shared corpus, shuffled and repeated (each round shuffled anew) until the mix
    holds ``size_mb`` MB, in five files of about equal size."""
    import random

    lines = [line for source in SOURCES
             for line in (SHARED / "corpora" / source).read_bytes().splitlines(keepends=True)]
    rng = random.Random(seed)
    budget = int(size_mb * 1_000_000)
    per_file = budget // 5 + 1
    paths = [folder / f"mix_{index}.txt" for index in range(5)]
    written = 0
    files = [path.open("wb") for path in paths]
    try:
        current = 0
        while written < budget:
            rng.shuffle(lines)
            for line in lines:
                if written >= budget:
                    break
                files[current].write(line)
                written += len(line)
                if written >= per_file * (current + 1) and current < 4:
                    current += 1
    finally:
        for file in files:
            file.close()
    return paths


# ----------------------------------------------------------------------- one trainer, in a child


def run_hf_bpe(files: list[Path], vocab_size: int, threads: int, pattern: str) -> None:
    import hf_bpe

    hf_bpe.train(files, vocab_size, pattern=pattern, show_progress=False, num_threads=threads)


def hf_bpe_counting(files: list[Path], threads: int, pattern: str) -> str:
    """Counting alone (timed after the measured run), to split its time into the two stages."""

    started = time.perf_counter()
    counts = count_pieces(files, pattern=pattern, show_progress=False, num_threads=threads)
    return f"counting {time.perf_counter() - started:.2f} s ({len(counts):,} distinct pieces)"


def run_tokenizers(files: list[Path], vocab_size: int, threads: int, pattern: str) -> None:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    from hf_bpe import patterns

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(patterns.NAMED[pattern]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train([str(path) for path in files], trainer)


def run_rustbpe(files: list[Path], vocab_size: int, threads: int, pattern: str) -> None:
    import rustbpe

    from hf_bpe import patterns

    def lines():
        for path in files:
            with open(path, encoding="utf-8", newline="") as file:
                yield from file

    rustbpe.Tokenizer().train_from_iterator(lines(), vocab_size, pattern=patterns.NAMED[pattern])


def run_sentencepiece(files: list[Path], vocab_size: int, threads: int, pattern: str) -> None:
    import sentencepiece

    with tempfile.TemporaryDirectory() as folder:
        sentencepiece.SentencePieceTrainer.train(
            input=",".join(str(path) for path in files),
            model_prefix=os.path.join(folder, "m"),
            model_type="bpe",
            vocab_size=vocab_size,
            byte_fallback=True,
            character_coverage=0.9995,
            input_sentence_size=0,
            max_sentence_length=1 << 16,
            num_threads=threads,
            hard_vocab_limit=False,
            minloglevel=2,
        )


def child(trainer: str, files: list[Path], vocab_size: int, threads: int, pattern: str) -> None:
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    run = globals()[f"run_{trainer}"]
    started = time.perf_counter()
    run(files, vocab_size, threads, pattern)
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    detail = hf_bpe_counting(files, threads, pattern) if trainer == "hf_bpe" else None
    print(json.dumps({"seconds": seconds, "peak_mib": peak_kib / 1024, "detail": detail}))


def measure(
    trainer: str, files: list[Path], vocab_size: int, threads: int, timeout: float, pattern: str
) -> dict[str, float] | None:
    command = [
        sys.executable,
        __file__,
        "--child",
        trainer,
        "--vocab",
        str(vocab_size),
        "--threads",
        str(threads),
        "--pattern",
        pattern,
        "--files",
        *map(str, files),
    ]
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        print(f"{trainer} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def cs336_seconds(repeats: int = 5) -> float | None:
    corpus = SHARED / "cs336" / "corpus.en"
    if not corpus.is_file():
        return None
    import hf_bpe

    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        hf_bpe.train(corpus, 500, special_tokens=["<|endoftext|>"], show_progress=False)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trainers", nargs="+", default=TRAINERS, choices=TRAINERS)
    parser.add_argument("--vocab", nargs="+", type=int, default=[8192, 32768])
    parser.add_argument("--size-mb", type=float, default=25.0, help="corpus size (default 25)")
    parser.add_argument("--mix-mb", type=float, help="train on a shuffled, repeated mix of this many MB instead")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; the fastest is shown")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a run is given up")
    parser.add_argument("--pattern", choices=["gpt2", "cl100k", "o200k"], default="gpt2",
                        help="split pattern of every trainer but SentencePiece (default gpt2)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--files", nargs="+", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        child(arguments.child, arguments.files, arguments.vocab[0], arguments.threads, arguments.pattern)
        return
    if not (SHARED / "corpora").is_dir():
        sys.exit(f"{SHARED / 'corpora'} is absent: the benchmark needs the shared corpora")

    with tempfile.TemporaryDirectory() as folder:
        if arguments.mix_mb:
            files = build_mix(Path(folder), arguments.mix_mb)
            what = "a shuffled, repeated mix of the shared corpora's lines"
        else:
            files = build_corpus(Path(folder), arguments.size_mb)
            what = "the shared corpora"
        size = sum(path.stat().st_size for path in files)
        print(
            f"Best of {arguments.repeat} run(s) per cell. Corpus: {what}, {size / 1e6:.1f} MB in {len(files)} files "
            f"({', '.join(path.name for path in files)}); {arguments.threads} threads; split pattern {arguments.pattern}; "
            f"{size / 1e6:.1f} MB\n"
        )
        print("| trainer | vocab | wall time (s) | peak memory (MiB) | time / hf_bpe's | memory / hf_bpe's | fed with |")
        print("|---|---:|---:|---:|---:|---:|---|")
        details = []
        for vocab_size in arguments.vocab:
            ours: dict[str, float] | None = None
            trainers = sorted(arguments.trainers, key=lambda name: name != "hf_bpe")  # hf_bpe first
            for trainer in trainers:
                runs = [
                    measure(trainer, files, vocab_size, arguments.threads, arguments.timeout, arguments.pattern)
                    for _ in range(arguments.repeat)
                ]
                result = min(runs, key=lambda run: run["seconds"] if run else float("inf"))
                if result is None:
                    cells = f"> {arguments.timeout:.0f} (stopped) | – | – | – "
                elif not result:
                    cells = "failed | – | – | – "
                else:
                    if trainer == "hf_bpe":
                        ours = result
                    ratios = (f"{result['seconds'] / ours['seconds']:.2f}x | {result['peak_mib'] / ours['peak_mib']:.2f}x"
                              if ours else "– | –")
                    cells = f"{result['seconds']:.2f} | {result['peak_mib']:.0f} | {ratios} "
                    if result.get("detail"):
                        details.append(
                            f"{trainer} at {vocab_size}: {result['detail']} of the {result['seconds']:.2f} s"
                        )
                print(f"| {trainer} | {vocab_size} | {cells}| {HOW_FED[trainer]} |", flush=True)
        if details:
            print("\n" + "\n".join(details))
    seconds = cs336_seconds()
    if seconds is not None:
        print(
            f"\nCS336 bar (corpus.en, vocab 500, <|endoftext|>): hf_bpe {seconds:.3f} s (best of 5; bar: 1.5 s)"
        )


if __name__ == "__main__":
    main()
