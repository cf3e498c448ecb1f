"""SentencePiece BPE training: ``hf_bpe.train_sentencepiece`` against ``SentencePieceTrainer.train``.

Three modes, each trainer always in a fresh child process that reports its wall time for the
training call (the import of ``hf_bpe`` or ``sentencepiece`` before it is timed apart and shown in its
own column: ``SentencePieceTrainer.train`` is the code of the ``spm_train`` binary, which imports
nothing; the trainers take turns, best of ``--repeat`` kept) and its own peak resident memory (``VmHWM`` of ``/proc/self/status``: interpreter,
imports and training; not ``ru_maxrss``, which on Linux keeps the parent's peak from before
``exec``):

- default: speed and memory on 25 MB of ``../shared/data/corpora`` (the first 93% of each of the
  five corpora, cut at a line end; the last 7% is held back), vocab 8,000 and 32,000, the Llama 2
  option set, ``num_threads`` the same for both. Each row also says how far the two models agree
  (see ``--agreement``).
- ``--agreement``: for each case (botchan at vocab 5,000 with the Llama 2 options and with the
  defaults; generated text with two option mixes; the 25 MB corpus at 8,000 and 32,000 with the
  Llama 2 options), the share of identical pieces (as a set, and at the same index), the first
  index where they differ, and the share of held-back lines that ``SentencePieceProcessor`` encodes
  to the same ids with our ``.model`` and with sentencepiece's.
- ``--stream-gb N``: an N GB file made by repeating the shared corpora's lines in shuffled order
  (written to ``$TMPDIR``, deleted after), trained by hf_bpe (streamed) and by sentencepiece (which
  loads every sentence: Llama 2's ``input_sentence_size=200000000`` is above the file's 13.5 million
  lines per GB, so nothing is sampled), with the share of identical pieces; ``--slices-mb`` adds
  slices of it to show how sentencepiece's memory grows.

    python benchmarks/train_sentencepiece.py                       # speed table, 2 threads
    python benchmarks/train_sentencepiece.py --agreement
    python benchmarks/train_sentencepiece.py --stream-gb 1 --vocab 32000
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _memory import peak_mib

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
SOURCES = ["shakespeare_milton.txt", "wiki_ja.txt", "wiki_el.txt", "wiki_vi.txt", "wiki_uk.txt"]
TRAINED_SHARE = 0.93


def build_corpus(folder: Path) -> tuple[list[Path], list[str]]:
    """The first 93% of each shared corpus (cut at a line end) as files in ``folder``, and the held-back
    lines (the rest)."""
    paths, held_back = [], []
    for source in SOURCES:
        data = (SHARED / "corpora" / source).read_bytes()
        cut = data.rfind(b"\n", 0, int(len(data) * TRAINED_SHARE)) + 1
        path = folder / source
        path.write_bytes(data[:cut])
        paths.append(path)
        held_back += [line for line in data[cut:].decode("utf-8").splitlines() if line.strip()]
    return paths, held_back


def llama2_options() -> dict[str, Any]:
    from hf_bpe.train_sentencepiece import LLAMA2_OPTIONS

    return dict(LLAMA2_OPTIONS)


# ----------------------------------------------------------------------- one trainer, in a child


def child(trainer: str, files: list[Path], vocab_size: int, options: dict[str, Any], out: Path) -> None:
    """Trains, reports the training call's seconds, the import's seconds and peak memory as JSON, then
    writes the ``.model`` (untimed)."""
    started = time.perf_counter()
    if trainer == "hf_bpe":
        import hf_bpe

        imported = time.perf_counter()
        model = hf_bpe.train_sentencepiece(files=files, vocab_size=vocab_size, show_progress=False, **options)
        seconds = time.perf_counter() - imported
        peak = peak_mib()
        from conversion import sentencepiece as conversion_sentencepiece

        conversion_sentencepiece.save(model, out)
    else:
        import sentencepiece

        imported = time.perf_counter()
        written = io.BytesIO()
        sentencepiece.SentencePieceTrainer.train(input=",".join(map(str, files)), model_writer=written,
                                                 vocab_size=vocab_size, minloglevel=2, **options)
        seconds = time.perf_counter() - imported
        peak = peak_mib()
        out.write_bytes(written.getvalue())
    print(json.dumps({"seconds": seconds, "import_seconds": imported - started, "peak_mib": peak}))


def measure(trainer: str, files: list[Path], vocab_size: int, options: dict[str, Any], out: Path,
            timeout: float) -> dict[str, float] | None:
    """Runs one trainer in a child process; None when it failed or ran out of time."""
    command = [sys.executable, __file__, "--child", trainer, "--vocab", str(vocab_size), "--options",
               json.dumps(options), "--out", str(out), "--files", *map(str, files)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        print(f"{trainer} took more than {timeout:.0f} s", file=sys.stderr)
        return None
    if done.returncode != 0:
        print(f"{trainer} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# ----------------------------------------------------------------------- agreement


def agreement(ours_file: Path, theirs_file: Path, held_back: list[str]) -> dict[str, Any]:
    """How far two ``.model`` files agree: pieces (text, score, type) and ids on held-back lines."""
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2

    def pieces(path: Path) -> list[tuple[str, float, int]]:
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(path.read_bytes())
        return [(piece.piece, piece.score, piece.type) for piece in proto.pieces]

    ours, theirs = pieces(ours_file), pieces(theirs_file)
    first = next((index for index, (a, b) in enumerate(zip(ours, theirs)) if a != b),
                 None if len(ours) == len(theirs) else min(len(ours), len(theirs)))
    ours_ids = sentencepiece.SentencePieceProcessor(model_file=str(ours_file)).encode(held_back)
    theirs_ids = sentencepiece.SentencePieceProcessor(model_file=str(theirs_file)).encode(held_back)
    return {
        "same_set": len({piece[0] for piece in ours} & {piece[0] for piece in theirs}) / len(theirs),
        "same_index": sum(a == b for a, b in zip(ours, theirs)) / len(theirs),
        "first_difference": first,
        "same_ids": sum(a == b for a, b in zip(ours_ids, theirs_ids)) / len(held_back),
        "held_back_lines": len(held_back),
    }


def agreement_cell(result: dict[str, Any]) -> str:
    first = "none" if result["first_difference"] is None else str(result["first_difference"])
    return (f"{100 * result['same_set']:.2f}% | {100 * result['same_index']:.2f}% | {first} | "
            f"{100 * result['same_ids']:.2f}% of {result['held_back_lines']:,}")


def generated_case(folder: Path, mix: str, seed: int) -> tuple[list[Path], list[str], int]:
    """The generated corpus of tests/test_train_sentencepiece.py for an option mix, held-back lines
    (200 KB more of generated text) and its vocab_size."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import textgen

    docs = textgen.documents(random.Random(seed), 200_000, specials=False)
    path = folder / f"generated-{seed}.txt"
    path.write_text("\n".join(docs), encoding="utf-8")
    held_back = [line for doc in textgen.documents(random.Random(seed + 1), 200_000, specials=False)
                 for line in doc.splitlines() if line.strip()]
    vocab_size = len(set(path.read_text(encoding="utf-8"))) + 300 + 600
    return [path], held_back, vocab_size


def run_agreement(threads: int, timeout: float) -> None:
    llama2 = llama2_options()
    defaults = {"model_type": "bpe"}
    mixes = {
        "no byte fallback, coverage 0.98": {"model_type": "bpe", "character_coverage": 0.98, "byte_fallback": False},
        "short sentences only": {"model_type": "bpe", "max_sentence_length": 200},
    }
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        botchan = SHARED / "sentencepiece" / "botchan.txt"
        botchan_held_back = [line for line in (SHARED / "corpora" / "shakespeare_milton.txt").read_text(
            encoding="utf-8").splitlines()[-20_000:] if line.strip()]
        cases: list[tuple[str, list[Path], list[str], int, dict[str, Any]]] = [
            ("botchan, Llama 2 options", [botchan], botchan_held_back, 5000, llama2),
            ("botchan, defaults", [botchan], botchan_held_back, 5000, defaults),
        ]
        for mix, options in mixes.items():
            files, held_back, vocab_size = generated_case(folder, mix, seed=len(mix))
            cases.append((f"generated text (tests' textgen), {mix}", files, held_back, vocab_size, options))
        files, held_back = build_corpus(folder)
        size = sum(path.stat().st_size for path in files) / 1e6
        for vocab_size in (8000, 32000):
            cases.append((f"shared corpora {size:.1f} MB, Llama 2 options", files, held_back, vocab_size, llama2))
        print("| case | vocab | same pieces (set) | same pieces (index) | first difference | same ids, held-back lines |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, files, held_back, vocab_size, options in cases:
            options = {**options, "num_threads": threads}
            models = {trainer: folder / f"{trainer}.model" for trainer in ("hf_bpe", "sentencepiece")}
            if all(measure(trainer, files, vocab_size, options, models[trainer], timeout)
                   for trainer in models):
                cell = agreement_cell(agreement(models["hf_bpe"], models["sentencepiece"], held_back))
            else:
                cell = "failed | | |"
            print(f"| {label} | {vocab_size} | {cell} |", flush=True)


# ----------------------------------------------------------------------- speed


def run_speed(vocab_sizes: list[int], threads: int, repeat: int, timeout: float) -> None:
    import sentencepiece

    options = {**llama2_options(), "num_threads": threads}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        files, held_back = build_corpus(folder)
        size = sum(path.stat().st_size for path in files) / 1e6
        print(f"Corpus: {size:.1f} MB, the first {TRAINED_SHARE:.0%} of {', '.join(SOURCES)} "
              f"({len(held_back):,} lines held back); Llama 2 options, num_threads={threads}; "
              f"sentencepiece {sentencepiece.__version__}; best of {repeat} run(s), each in a fresh process\n")
        print("| vocab | trainer | wall time (s) | speed-up | import (s, untimed) | peak memory (MiB) | "
              "same pieces (index) | same ids, held-back lines |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|")
        for vocab_size in vocab_sizes:
            models = {trainer: folder / f"{trainer}.model" for trainer in ("sentencepiece", "hf_bpe")}
            results: dict[str, dict[str, float]] = {}
            # The trainers take turns, so a slow spell of this shared machine falls on both.
            runs: dict[str, list[dict[str, float] | None]] = {trainer: [] for trainer in models}
            for _ in range(repeat):
                for trainer, model in models.items():
                    runs[trainer].append(measure(trainer, files, vocab_size, options, model, timeout))
            for trainer, measured in runs.items():
                done = [run for run in measured if run]
                if done:
                    results[trainer] = min(done, key=lambda run: run["seconds"])
                    results[trainer]["import_seconds"] = min(run["import_seconds"] for run in done)
            if len(results) < 2:
                print(f"| {vocab_size} | failed | | | | | | |")
                continue
            agreed = agreement(models["hf_bpe"], models["sentencepiece"], held_back)
            for trainer, result in results.items():
                speed_up = results["sentencepiece"]["seconds"] / result["seconds"]
                same = (f"{100 * agreed['same_index']:.2f}% | {100 * agreed['same_ids']:.2f}%"
                        if trainer == "hf_bpe" else " | ")
                print(f"| {vocab_size} | {trainer} | {result['seconds']:.2f} | {speed_up:.1f}x | "
                      f"{result['import_seconds']:.3f} | {result['peak_mib']:.0f} | {same} |", flush=True)


# ----------------------------------------------------------------------- a long stream


def write_stream(path: Path, total_bytes: int, seed: int) -> int:
    """Writes about ``total_bytes`` of the shared corpora's lines, repeated in shuffled order (each
    pass a new order). Returns the bytes written."""
    lines = [line for source in SOURCES
             for line in (SHARED / "corpora" / source).read_bytes().splitlines(keepends=True) if line.strip()]
    rng = random.Random(seed)
    written = 0
    with path.open("wb") as out:
        while written < total_bytes:
            rng.shuffle(lines)
            for line in lines:
                out.write(line)
                written += len(line)
                if written >= total_bytes:
                    break
    return written


def run_stream(gigabytes: float, vocab_size: int, slices_mb: list[float], threads: int, timeout: float) -> None:
    options = {**llama2_options(), "num_threads": threads}
    folder = Path(tempfile.mkdtemp(prefix="spm-stream-"))
    try:
        stream = folder / "stream.txt"
        size = write_stream(stream, int(gigabytes * 1e9), seed=0)
        print(f"Stream: {size / 1e9:.2f} GB, the shared corpora's lines repeated in shuffled order "
              f"({stream}); vocab {vocab_size}, Llama 2 options, num_threads={threads}\n")
        print("| trainer | input | wall time (s) | peak memory (MiB) |")
        print("|---|---:|---:|---:|")
        for trainer in ("hf_bpe", "sentencepiece"):
            result = measure(trainer, [stream], vocab_size, options, folder / f"{trainer}-stream.model", timeout)
            cells = f"{result['seconds']:.1f} | {result['peak_mib']:.0f}" if result else "failed | "
            print(f"| {trainer} | {size / 1e6:,.0f} MB | {cells} |", flush=True)
        models = [folder / f"{trainer}-stream.model" for trainer in ("hf_bpe", "sentencepiece")]
        if all(model.exists() for model in models):
            with stream.open(encoding="utf-8") as text:
                lines = [line.rstrip("\n") for _, line in zip(range(10_000), text)]
            agreed = agreement(*models, held_back=lines)
            print(f"\nSame pieces at the same index: {100 * agreed['same_index']:.2f}%; same ids on the "
                  f"stream's first {len(lines):,} lines: {100 * agreed['same_ids']:.2f}%\n", flush=True)
        for slice_mb in slices_mb:
            part = folder / f"slice-{slice_mb:g}.txt"
            with stream.open("rb") as source, part.open("wb") as out:
                left = int(slice_mb * 1e6)
                for line in source:
                    out.write(line)
                    left -= len(line)
                    if left <= 0:
                        break
            for trainer in ("hf_bpe", "sentencepiece"):
                result = measure(trainer, [part], vocab_size, options, folder / f"{trainer}.model", timeout)
                cells = f"{result['seconds']:.1f} | {result['peak_mib']:.0f}" if result else "failed | "
                print(f"| {trainer} | {part.stat().st_size / 1e6:,.0f} MB | {cells} |", flush=True)
            part.unlink()
    finally:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agreement", action="store_true", help="how far the two trainers' models agree, per case")
    parser.add_argument("--stream-gb", type=float, help="train hf_bpe on a stream of this many GB")
    parser.add_argument("--slices-mb", type=float, nargs="*", default=[],
                        help="with --stream-gb: also measure both trainers on slices of the stream of these sizes")
    parser.add_argument("--vocab", type=int, nargs="+", default=[8000, 32000])
    parser.add_argument("--threads", type=int, default=2, help="num_threads of both trainers (default 2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; the fastest is shown")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before a run is given up")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--options", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--files", nargs="+", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.child:
        child(arguments.child, arguments.files, arguments.vocab[0], json.loads(arguments.options), arguments.out)
        return
    if not (SHARED / "corpora").is_dir():
        sys.exit(f"{SHARED / 'corpora'} is absent: the benchmark needs the shared corpora")
    os.environ.setdefault("RAYON_NUM_THREADS", str(arguments.threads))
    if arguments.agreement:
        run_agreement(arguments.threads, arguments.timeout)
    elif arguments.stream_gb:
        run_stream(arguments.stream_gb, arguments.vocab[-1], arguments.slices_mb, arguments.threads,
                   arguments.timeout)
    else:
        run_speed(arguments.vocab, arguments.threads, arguments.repeat, arguments.timeout)


if __name__ == "__main__":
    main()
