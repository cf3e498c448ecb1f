"""Soak: the reliability checks of ``tests/reliability``, run longer and bigger, with a report.

Usage (from the repository root, with hf_bpe built in release mode for meaningful speeds)::

    python benchmarks/soak.py                              # a 500 MB stream, 60 s per threaded phase
    python benchmarks/soak.py --stream-mb 50 --seconds 10  # a quicker run

Phases, each counting what it tried and every result that differed from the reference:

- ``stream``: a generated stream of ``--stream-mb`` MB (windows of the corpus at random offsets, each
  followed by ``<|endoftext|>``, cut into parts of random sizes, inside words and characters) through
  ``encode_iterable``; the ids must equal each window's ``encode`` followed by the separator's id (what
  ``encode`` of the whole stream gives, never built in memory), and ``decode_iterable`` of them must give
  the stream's text back. Reports the peak RSS growth while streaming and the throughput.
- ``endless piece``: letters without a split point, streamed until ``max_piece_bytes`` (16 MiB) stops it.
- ``encode vs stream``: ``encode`` of a ``--encode-mb`` MB text at once against ``encode_iterable`` of it
  line by line: throughput and peak RSS growth of each (the memory figures behind docs/limits.md).
- ``threads: BPE``, ``threads: tokenizer``: 8 threads calling one model / one ``BPETokenizer`` with random
  calls for ``--seconds``, each result compared with the serial one; in the tokenizer phase one thread
  adds tokens and special tokens meanwhile, and every call must match the tokenizer before or after
  some addition.
- ``forks``: children forked while threads encode must encode correctly (and exit).
- ``round trips``: generated and corpus text through encode/decode and the stream decoder, per encoding.

Exits with status 1 if anything differed or failed.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import hashlib
import itertools
import multiprocessing
import random
import sys
import threading
import time
import warnings
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _common import MB, SHARED_CORPORA, textgen

import hf_bpe
from hf_bpe import BPE, BPETokenizer
from hf_bpe._streaming import decode_parts

EOT = "<|endoftext|>"
THREADS = 8


# ------------------------------------------------------------------------------------- memory


class PeakMemory:
    """Peak resident memory above the level when entered (Linux: the kernel's high-water mark, reset
    on entry through /proc/self/clear_refs; elsewhere a 5 ms sampler of ``ru_maxrss``)."""

    def __enter__(self) -> PeakMemory:  # noqa: PYI034 - final class
        gc.collect()
        try:  # freed memory goes back to the system, so that reusing it counts as growth
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self._exact = True
        except OSError:
            self._exact = False
        self.baseline = self._rss("VmRSS")
        return self

    def __exit__(self, *exc: object) -> None:
        self.growth = self._rss("VmHWM") - self.baseline

    def _rss(self, field: str) -> int:
        if not self._exact:
            import resource

            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {field} in /proc/self/status")


# -------------------------------------------------------------------------------------- input


def load_corpus(seed: int) -> tuple[str, str]:
    """The shared corpora joined (generated text when absent), without the separator, and a description."""
    files = sorted(path for path in SHARED_CORPORA.glob("*.txt") if "COPYING" not in path.name)
    if files:
        text = "\n".join(path.read_text(encoding="utf-8") for path in files)
        where = ", ".join(path.name for path in files)
    else:
        text = "".join(textgen.documents(random.Random(seed), 20 * MB, specials=False))
        where = "generated text (tests/support/textgen.py)"
    text = text.replace(EOT, "<|endoftext|")
    return text, f"{len(text.encode()) / MB:.0f} MB of {where}"


def windows(corpus: str, rng: random.Random, total_bytes: int) -> Iterator[str]:
    """Random windows of the corpus (1 byte to 64 KB, log-uniform) until ``total_bytes`` are given."""
    given = 0
    while given < total_bytes:
        size = int(2 ** rng.uniform(0, 16))
        start = rng.randrange(len(corpus) - size)
        window = corpus[start:start + size]
        given += len(window.encode()) + len(EOT)
        yield window


def parts(text: str, rng: random.Random) -> Iterator[str]:
    """``text`` in parts of random sizes (1 to ~16 K characters, log-uniform)."""
    start = 0
    while start < len(text):
        end = start + int(2 ** rng.uniform(0, 14))
        yield text[start:end]
        start = end


# ------------------------------------------------------------------------------------- phases


class Report:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str, int, int, str]] = []

    def add(self, phase: str, tried: str, count: int, different: int, notes: str) -> None:
        self.rows.append((phase, tried, count, different, notes))
        print(f"  {phase}: {count:,} {tried}, {different} different; {notes}", flush=True)

    @property
    def failures(self) -> int:
        return sum(row[3] for row in self.rows)

    def print(self) -> None:
        print("\n| phase | tried | count | different or lost | notes |\n|---|---|---:|---:|---|")
        for phase, tried, count, different, notes in self.rows:
            print(f"| {phase} | {tried} | {count:,} | {different} | {notes} |")


def stream_phase(report: Report, enc: BPE, corpus: str, megabytes: float, seed: int) -> None:
    """The big stream, checked window by window without holding it."""
    rng = random.Random(seed)
    eot = enc.encode_single_token(EOT)
    expected: array[int] = array("I")
    text_hash, expected_hash = hashlib.blake2b(), hashlib.blake2b()

    def source() -> Iterator[str]:
        for window in windows(corpus, rng, int(megabytes * MB)):
            expected.extend(enc.encode(window, disallowed_special=()))
            expected.append(eot)
            whole = window + EOT
            expected_hash.update(whole.encode("utf-8", "surrogatepass"))
            yield from parts(whole, rng)

    ids = enc.encode_iterable(source(), allowed_special={EOT}, disallowed_special=())
    decoder = enc.stream_decoder()
    count = different = 0
    start = time.perf_counter()
    with PeakMemory() as memory:
        while batch := array("I", itertools.islice(ids, 1 << 16)):
            if batch != expected[: len(batch)]:
                different += 1
            del expected[: len(batch)]
            text_hash.update(decoder.feed(batch).encode("utf-8", "surrogatepass"))
            count += len(batch)
        text_hash.update(decoder.finish().encode("utf-8", "surrogatepass"))
    seconds = time.perf_counter() - start
    different += len(expected) + (text_hash.digest() != expected_hash.digest())
    report.add(f"stream ({enc.name})", "ids streamed (batches of 65,536 checked, and the decoded text)", count,
               different, f"{megabytes:,.0f} MB in {seconds:.0f} s ({megabytes / seconds:.1f} MB/s with the "
               f"check), peak RSS growth {memory.growth / 2**20:.1f} MiB")


def endless_piece_phase(report: Report, enc: BPE) -> None:
    letters = ("a" * 65536 for _ in range(10_000))
    limit = hf_bpe._streaming.DEFAULT_MAX_PIECE_BYTES
    with PeakMemory() as memory:
        try:
            sum(1 for _ in enc.encode_iterable(letters))
            outcome, failed = "no error", 1
        except ValueError as error:
            outcome, failed = f"ValueError ({str(error)[:60]}...)", 0
    report.add("endless piece", "streams of letters without a split point", 1, failed,
               f"{outcome}, peak RSS growth {memory.growth / 2**20:.1f} MiB (limit {limit / 2**20:.0f} MiB)")


def encode_vs_stream_phase(report: Report, enc: BPE, corpus: str, megabytes: float) -> None:
    text = (corpus * (1 + int(megabytes * MB) // len(corpus.encode())))[: int(megabytes * MB)]
    size = len(text.encode()) / MB
    lines = text.splitlines(keepends=True)
    with PeakMemory() as at_once:
        start = time.perf_counter()
        whole = enc.encode_ordinary(text)
        encode_seconds = time.perf_counter() - start
    whole_hash = hashlib.blake2b(array("I", whole).tobytes()).digest()
    count = len(whole)
    del whole
    with PeakMemory() as streamed:
        start = time.perf_counter()
        ids = enc.encode_iterable(lines, disallowed_special=())
        hasher = hashlib.blake2b()
        while batch := array("I", itertools.islice(ids, 1 << 16)):
            hasher.update(batch.tobytes())
        stream_seconds = time.perf_counter() - start
    report.add(f"encode vs stream ({enc.name})", "ids, encode_ordinary(text) against encode_iterable(lines)",
               count, int(hasher.digest() != whole_hash),
               f"{size:.0f} MB ({len(text):,} characters): encode {size / encode_seconds:.1f} MB/s, peak RSS "
               f"+{at_once.growth / 2**20:,.0f} MiB; encode_iterable {size / stream_seconds:.1f} MB/s, "
               f"+{streamed.growth / 2**20:,.1f} MiB")


def run_threads(seconds: float, work: Callable[[int, threading.Event], tuple[int, int]]) -> tuple[int, int]:
    """``work(index, stop)`` on 8 threads until ``seconds`` pass; summed (calls, differences)."""
    stop = threading.Event()
    results: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            results.append(work(index, stop))
        except BaseException as error:  # noqa: BLE001 - counted and shown
            errors.append(error)

    workers = [threading.Thread(target=run, args=(index,), daemon=True) for index in range(THREADS)]
    for worker in workers:
        worker.start()
    time.sleep(seconds)
    stop.set()
    for worker in workers:
        worker.join(600)
    hung = sum(worker.is_alive() for worker in workers)
    for error in errors:
        print(f"  error in a thread: {error!r}", file=sys.stderr)
    return sum(calls for calls, _ in results), sum(bad for _, bad in results) + len(errors) + hung


def bpe_threads_phase(report: Report, enc: BPE, docs: list[str], seconds: float) -> None:
    batch = docs[:32]
    calls: list[Callable[[str], Any]] = [
        lambda doc: enc.encode(doc, allowed_special="all"),
        lambda doc: enc.encode_with_offsets(doc, disallowed_special=()),
        lambda doc: list(enc.encode_iterable(parts(doc, random.Random(len(doc))), allowed_special="all")),
        lambda doc: enc.decode(enc.encode_ordinary(doc)),
        lambda doc: enc.encode_batch(batch, num_threads=2, allowed_special="all")[len(doc) % 32],
    ]
    expected = [[call(doc) for doc in docs] for call in calls]

    def work(index: int, stop: threading.Event) -> tuple[int, int]:
        rng, count, bad = random.Random(index), 0, 0
        while not stop.is_set():
            which, doc = rng.randrange(len(calls)), rng.randrange(len(docs))
            bad += calls[which](docs[doc]) != expected[which][doc]
            count += 1
        return count, bad

    count, bad = run_threads(seconds, work)
    report.add(f"threads: BPE ({enc.name})", "calls by 8 threads on one model", count, bad,
               f"{seconds:.0f} s; encode, offsets, stream, decode, batch; some texts > 4 KB (GIL released)")


TOKENIZER_TEXTS = ["hello world <t0> <t1>", "x <s2> lo wo <t3>", "<pad4><t5> world", "rld <t0>> lo wo"]


def tokenizer_steps(count: int) -> list[tuple[str, Any]]:
    steps: list[tuple[str, Any]] = []
    for step in range(count):
        kind = step % 3
        if kind == 0:
            steps.append(("tokens", [f"<t{step % 7}>", f"lo wo{step}"]))
        elif kind == 1:
            steps.append(("special", {"extra_special_tokens": [f"<s{step % 5}>"]}))
        else:
            steps.append(("special", {"pad_token": f"<pad{step % 6}>"}))
    return steps


def new_tokenizer() -> BPETokenizer:
    return BPETokenizer.from_model(hf_bpe.get_encoding("cl100k_base"), eos_token=EOT, pad_token="<|pad|>",
                                   add_eos_token=True)


def apply(tokenizer: BPETokenizer, step: tuple[str, Any]) -> None:
    kind, argument = step
    if kind == "tokens":
        tokenizer.add_tokens(argument)
    else:
        tokenizer.add_special_tokens(argument, replace_extra_special_tokens=False)


def tokenizer_threads_phase(report: Report, docs: list[str], seconds: float) -> None:
    steps = tokenizer_steps(40)
    serial = new_tokenizer()
    states = []
    for step in [None, *steps]:
        if step is not None:
            apply(serial, step)
        states.append(serial(TOKENIZER_TEXTS, padding=True)["input_ids"])
    texts = [doc[:400] for doc in docs[:64]]
    fixed = new_tokenizer()
    fixed_expected = (fixed(texts, padding=True, return_offsets_mapping=True).data,
                      fixed.batch_decode(fixed(texts)["input_ids"]))
    current: dict[str, BPETokenizer] = {"changing": new_tokenizer()}
    additions = 0

    def work(index: int, stop: threading.Event) -> tuple[int, int]:
        nonlocal additions
        count, bad = 0, 0
        while not stop.is_set():
            if index == 0:  # the writer: the steps, then again on a new tokenizer
                current["changing"] = tokenizer = new_tokenizer()
                for step in steps:
                    if stop.is_set():
                        break
                    apply(tokenizer, step)
                    additions += 1
                    time.sleep(0.01)
                continue
            tokenizer = current["changing"]
            bad += tokenizer(TOKENIZER_TEXTS, padding=True)["input_ids"] not in states
            got = (fixed(texts, padding=True, return_offsets_mapping=True).data,
                   fixed.batch_decode(fixed(texts)["input_ids"]))
            bad += got != fixed_expected
            count += 2
        return count, bad

    count, bad = run_threads(seconds, work)
    report.add("threads: tokenizer", "calls by 7 threads (one tokenizer fixed, one changing)", count, bad,
               f"{seconds:.0f} s; {additions:,} add_tokens/add_special_tokens meanwhile; padding, offsets, "
               "decode")


def _child(queue: Any, docs: list[str], expected: tuple[list[list[int]], list[int]]) -> None:  # forked
    enc = hf_bpe.get_encoding("cl100k_base")
    queue.put((enc.encode_batch(docs, num_threads=2, allowed_special="all"),
               list(enc.encode_iterable(docs, allowed_special="all"))) == expected)


def fork_phase(report: Report, docs: list[str], seconds: float) -> None:
    enc = hf_bpe.get_encoding("cl100k_base")
    batch = docs[:40]
    expected = (enc.encode_batch(batch, num_threads=1, allowed_special="all"),
                enc.encode("".join(batch), allowed_special="all"))
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            enc.encode_batch(docs, allowed_special="all")

    workers = [threading.Thread(target=busy, daemon=True) for _ in range(4)]
    for worker in workers:
        worker.start()
    context = multiprocessing.get_context("fork")
    count = bad = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        queue = context.Queue()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            child = context.Process(target=_child, args=(queue, batch, expected))
            child.start()
        try:
            ok = queue.get(timeout=120)
        except Exception:  # noqa: BLE001 - a child that hangs or dies counts as a failure
            ok = False
        child.join(30)
        if child.is_alive():
            child.kill()
            ok = False
        bad += not ok or child.exitcode != 0
        count += 1
    stop.set()
    for worker in workers:
        worker.join(60)
    report.add("forks", "children forked while 4 threads encode", count, bad, f"{seconds:.0f} s")


def round_trip_phase(report: Report, corpus: str, seconds: float, seed: int) -> None:
    rng = random.Random(seed)
    count = bad = 0
    deadline = time.monotonic() + seconds
    encodings = [hf_bpe.get_encoding(name) for name in ("gpt2", "cl100k_base", "o200k_base")]
    while time.monotonic() < deadline:
        if rng.random() < 0.5:
            text = textgen.document(rng, rng.randrange(1, 20_000))
        else:
            start = rng.randrange(len(corpus))
            text = corpus[start:start + rng.randrange(1, 20_000)]
        for enc in encodings:
            ids = enc.encode(text, disallowed_special=())
            size = rng.randrange(1, 9)
            decoded = "".join(decode_parts(enc.stream_decoder(), (ids[at:at + size] for at in range(0, len(ids), size))))
            bad += enc.decode(ids) != text or decoded != text
            count += 1
    report.add("round trips", "texts through encode, decode and the stream decoder", count, bad,
               f"{seconds:.0f} s; gpt2, cl100k_base, o200k_base")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stream-mb", type=float, default=500, help="size of the generated stream (500)")
    parser.add_argument("--encode-mb", type=float, default=100, help="text encoded at once vs streamed (100)")
    parser.add_argument("--seconds", type=float, default=60, help="duration of each threaded phase (60)")
    parser.add_argument("--encodings", nargs="+", default=["cl100k_base"], help="for the stream phase")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    corpus, description = load_corpus(args.seed)
    docs = [doc for doc in textgen.documents(random.Random(args.seed), 400_000, huge=(30_000,)) if doc]
    print(f"hf_bpe {hf_bpe.__version__} from {Path(hf_bpe.__file__).parent}; corpus: {description}", flush=True)
    report = Report()
    for name in args.encodings:
        stream_phase(report, hf_bpe.get_encoding(name), corpus, args.stream_mb, args.seed)
    endless_piece_phase(report, hf_bpe.get_encoding("o200k_base"))
    encode_vs_stream_phase(report, hf_bpe.get_encoding("cl100k_base"), corpus, args.encode_mb)
    for name in ("gpt2", "cl100k_base", "o200k_base"):
        bpe_threads_phase(report, hf_bpe.get_encoding(name), docs, args.seconds / 3)
    tokenizer_threads_phase(report, docs, args.seconds)
    fork_phase(report, docs, args.seconds / 2)
    round_trip_phase(report, corpus, args.seconds / 2, args.seed)
    report.print()
    if report.failures:
        print(f"\nFAILED: {report.failures} results differed, were lost or failed")
        return 1
    print("\nNothing lost, nothing different.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
