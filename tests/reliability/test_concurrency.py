"""Threads and forks: one ``BPE`` or ``BPETokenizer`` shared by eight Python threads gives exactly
the results of calling it serially, the core really runs in parallel (the GIL is released), adding
tokens while other threads encode is safe (each call sees the tokenizer wholly before or after an
addition), and a process forked while threads encode works.

Every thread runs its share of the work in its own order, several rounds, all started together; a
thread that does not finish in time fails the test (a hang), and any exception in a thread is
re-raised.
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
import warnings
from array import array
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
import textgen
from suite import PARITY_ENCODINGS, scaled

import hf_bpe
from hf_bpe import BPE, BPETokenizer
from hf_bpe._streaming import decode_parts

THREADS = 8
TIMEOUT = 300.0
Result = TypeVar("Result")


def run_together(work: Callable[[int], Result], threads: int = THREADS) -> list[Result]:
    """``work(0) ... work(threads - 1)``, each in its own thread, started at once."""
    barrier = threading.Barrier(threads)
    results: list[Any] = [None] * threads
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = work(index)
        except BaseException as error:  # noqa: BLE001 - re-raised in the main thread
            errors.append(error)

    workers = [threading.Thread(target=run, args=(index,), daemon=True) for index in range(threads)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + TIMEOUT
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    assert not any(worker.is_alive() for worker in workers), f"threads still running after {TIMEOUT} s: a hang"
    if errors:
        raise errors[0]
    return results


@pytest.fixture(scope="module")
def documents() -> list[str]:
    """Varied documents with special-token text, and a few over the size from which the core
    releases the GIL."""
    rng = random.Random(11)
    docs = textgen.documents(rng, scaled(120_000), huge=(20_000, 60_000))
    return [doc for doc in docs if doc]


# ----------------------------------------------------------------------------------------- BPE


def bpe_calls(enc: BPE, docs: list[str]) -> dict[str, Callable[[], Any]]:
    """Every way of encoding and decoding, each over all documents."""
    eot = "".join(docs[:40])
    return {
        "encode": lambda: [enc.encode(doc, allowed_special="all") for doc in docs],
        "encode_ordinary": lambda: [enc.encode_ordinary(doc) for doc in docs],
        "encode_with_offsets": lambda: [enc.encode_with_offsets(doc, disallowed_special=()) for doc in docs],
        "encode_batch": lambda: enc.encode_batch(docs, num_threads=2, allowed_special="all"),
        "encode_batch_all_cores": lambda: enc.encode_ordinary_batch(docs),
        "encode_iterable": lambda: list(enc.encode_iterable(docs, allowed_special="all")),
        "decode": lambda: [enc.decode(enc.encode_ordinary(doc)) for doc in docs],
        "stream_decoder": lambda: "".join(decode_parts(enc.stream_decoder(), enc.encode_iterable(eot, disallowed_special=()))),
    }


@pytest.mark.parametrize("name", PARITY_ENCODINGS)
def test_one_bpe_shared_by_eight_threads_gives_the_serial_results(name: str, documents: list[str]) -> None:
    enc = hf_bpe.get_encoding(name)
    calls = bpe_calls(enc, documents)
    expected = {label: call() for label, call in calls.items()}
    labels = list(calls)

    def work(index: int) -> list[str]:
        wrong = []
        order = random.Random(index).sample(labels, len(labels))
        for round_ in range(2):
            for label in order[round_:] + order[:round_]:
                if calls[label]() != expected[label]:
                    wrong.append(label)
        return wrong

    assert run_together(work) == [[]] * THREADS


def main_thread_ran_during(work: Callable[[], Any]) -> tuple[bool, str]:
    """Whether this thread ran Python code in the middle third of ``work()`` running in another
    thread (it cannot while ``work`` holds the GIL: it gets the switch interval, 5 ms, around the
    call's start and end), and what it saw."""
    inside, done = threading.Event(), threading.Event()
    span: list[float] = []

    def worker() -> None:
        inside.set()
        start = time.perf_counter()
        work()
        span.extend((start, time.perf_counter()))
        done.set()

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    inside.wait()
    stamps = array("d")
    while not done.is_set():
        stamps.append(time.perf_counter())
    thread.join()
    start, end = span
    third = (end - start) / 3
    middle = sum(start + third < stamp < end - third for stamp in stamps)
    return middle > 0, f"{middle} of {len(stamps)} loops in the middle of a {end - start:.3f} s call"


def test_the_gil_check_sees_a_call_that_holds_the_gil() -> None:
    ran, seen = main_thread_ran_during(lambda: sum(range(scaled(30_000_000, 10_000_000))))
    assert not ran, seen


@pytest.fixture(scope="module")
def large_text() -> str:
    return "".join(textgen.documents(random.Random(5), scaled(5_000_000, 2_500_000), specials=False))


@pytest.mark.parametrize("call", ["encode", "encode_ordinary", "encode_with_offsets", "encode_batch",
                                  "encode_iterable"])
def test_the_core_encodes_without_the_gil(call: str, large_text: str) -> None:
    """While one thread encodes a large text, another runs Python code (in the middle third of the
    call: its start and end, reading the str and building the returned lists, need the GIL). The
    text is varied, so that encoding is most of the call; one line repeated would hit the piece cache
    every time, leaving the call mostly to list building (with offsets, two lists of ints)."""
    enc = hf_bpe.get_encoding("cl100k_base")
    text = large_text
    work = {
        "encode": lambda: enc.encode(text),
        "encode_ordinary": lambda: enc.encode_ordinary(text),
        "encode_with_offsets": lambda: enc.encode_with_offsets(text),
        "encode_batch": lambda: enc.encode_batch([text], num_threads=1),
        "encode_iterable": lambda: enc._core.encode_stream().feed(text),  # what each part of a stream does
    }[call]
    ran, seen = main_thread_ran_during(work)
    assert ran, seen


def test_batches_from_several_threads_share_the_thread_pools(documents: list[str]) -> None:
    enc = hf_bpe.get_encoding("o200k_base")
    expected = enc.encode_batch(documents, num_threads=1, allowed_special="all")
    sizes = [None, 1, 2, 3, 4, None, 2, 5]

    def work(index: int) -> bool:
        return all(enc.encode_batch(documents, num_threads=sizes[index], allowed_special="all") == expected
                   for _ in range(3))

    assert all(run_together(work))


# ----------------------------------------------------------------------------------- tokenizer


def make_tokenizer() -> BPETokenizer:
    tokenizer = BPETokenizer.from_model(hf_bpe.get_encoding("cl100k_base"), bos_token="<|endoftext|>",
                                        eos_token="<|endoftext|>", pad_token="<|pad|>", add_bos_token=True)
    tokenizer.add_tokens(["<tool>", "hello wor"])
    return tokenizer


def tokenizer_calls(tokenizer: BPETokenizer, docs: list[str]) -> dict[str, Callable[[], Any]]:
    batch = [doc[:300] for doc in docs] + ["hello world <tool> x", ""]
    pairs = list(zip(batch[::2], batch[1::2]))
    return {
        "encode": lambda: [tokenizer.encode(text) for text in batch],
        "call_padding": lambda: tokenizer(batch, padding=True)["input_ids"],
        "call_offsets": lambda: tokenizer(batch, padding="longest", return_offsets_mapping=True).data,
        "call_pairs": lambda: tokenizer(pairs, truncation=True, max_length=64, padding="max_length").data,
        "tokenize": lambda: [tokenizer.tokenize(text) for text in batch[:50]],
        "decode": lambda: tokenizer.batch_decode(tokenizer(batch)["input_ids"], skip_special_tokens=True),
    }


def test_one_tokenizer_shared_by_eight_threads_gives_the_serial_results(documents: list[str]) -> None:
    tokenizer = make_tokenizer()
    calls = tokenizer_calls(tokenizer, documents)
    expected = {label: call() for label, call in calls.items()}
    labels = list(calls)

    def work(index: int) -> list[str]:
        order = random.Random(index).sample(labels, len(labels))
        return [label for _ in range(2) for label in order if calls[label]() != expected[label]]

    assert run_together(work) == [[]] * THREADS


# Each step adds one token: an ordinary one, a special one, or a new padding token (which changes
# what padding inserts, so a call that saw half of the change would pad with a wrong id).
STEPS: list[tuple[str, Any]] = [
    ("tokens", ["<step0>"]), ("special", {"pad_token": "<pad1>"}), ("tokens", ["lo wo"]),
    ("special", {"extra_special_tokens": ["<s3>", "<s3b>"]}), ("tokens", ["rld <step0"]),
    ("special", {"pad_token": "<pad5>"}), ("tokens", ["<step6>", " hel"]), ("special", {"pad_token": "<pad7>"}),
]
TEXTS = ["hello world <step0> <s3><s3b>", "x <step6> hello world <pad1><pad5>", "rld <step0>rld <step0>>", "lo wo"]


def apply_step(tokenizer: BPETokenizer, step: tuple[str, Any]) -> None:
    kind, argument = step
    if kind == "tokens":
        tokenizer.add_tokens(argument)
    else:
        tokenizer.add_special_tokens(argument, replace_extra_special_tokens=False)


def padded_batch(tokenizer: BPETokenizer) -> tuple[Any, Any]:
    encoded = tokenizer(TEXTS, padding=True)
    return encoded["input_ids"], encoded["attention_mask"]


def test_adding_tokens_while_threads_encode_gives_each_call_a_whole_state() -> None:
    """Seven threads call the tokenizer while one adds tokens step by step: every call returns what
    it returns serially after some number of steps, never a mix of two."""
    serial = make_tokenizer()
    batches, tokenized, decoded = [], [], []
    for step in [None, *STEPS]:
        if step is not None:
            apply_step(serial, step)
        batches.append(padded_batch(serial))
        tokenized.append(serial.tokenize(TEXTS[0]))
        decoded.append(serial.batch_decode(batches[-1][0]))
    assert len({repr(batch) for batch in batches}) == len(batches)  # every step changes the result

    tokenizer = make_tokenizer()
    writing = threading.Event()
    seen: list[set[int]] = [set() for _ in range(THREADS)]

    def work(index: int) -> None:
        if index == 0:
            writing.set()
            for step in STEPS:
                time.sleep(0.02)
                apply_step(tokenizer, step)
            writing.clear()
            return
        writing.wait()
        while writing.is_set():
            batch = padded_batch(tokenizer)
            assert batch in batches, f"a call saw the tokenizer between two additions: {batch}"
            state = batches.index(batch)
            seen[index].add(state)
            assert tokenizer.batch_decode(batch[0]) == decoded[state]  # later tokens do not change it
            assert tokenizer.tokenize(TEXTS[0]) in tokenized[state:]
            len(tokenizer), tokenizer.get_vocab(), tokenizer.added_tokens_decoder, tokenizer.all_special_ids

    run_together(work)
    assert padded_batch(tokenizer) == batches[-1]
    assert len(set().union(*seen)) > 2, "the readers never ran while tokens were added"


def test_adding_tokens_from_inside_a_call_fails_clearly_instead_of_waiting_forever() -> None:
    tokenizer = make_tokenizer()
    tokenizer._lock.acquire_read()
    try:
        with pytest.raises(RuntimeError, match="cannot add tokens from inside"):
            tokenizer.add_tokens(["<x>"])
    finally:
        tokenizer._lock.release_read()
    assert tokenizer.add_tokens(["<x>"]) == 1


# ------------------------------------------------------------------------------------- forking


def _child_encodes(queue: Any, docs: list[str]) -> None:  # runs in a forked process
    enc = hf_bpe.get_encoding("gpt2")
    tokenizer = _SHARED_TOKENIZER
    tokenizer.add_tokens(["<after-fork>"])
    queue.put((enc.encode_batch(docs, num_threads=2, allowed_special="all"),
               list(enc.encode_iterable(docs, allowed_special="all")),
               tokenizer(["x <after-fork>", "y"], padding=True)["input_ids"]))


_SHARED_TOKENIZER: BPETokenizer


def test_a_process_forked_while_threads_encode_works(documents: list[str]) -> None:
    """The forking thread's pools, locks and tables are usable in the child, whatever the other
    threads of the parent were doing at the fork (they do not exist in the child)."""
    global _SHARED_TOKENIZER
    enc = hf_bpe.get_encoding("gpt2")
    tokenizer = _SHARED_TOKENIZER = make_tokenizer()
    docs = documents[:60]
    reference = make_tokenizer()
    reference.add_tokens(["<after-fork>"])
    expected = (enc.encode_batch(docs, num_threads=1, allowed_special="all"),
                enc.encode(("".join(docs)), allowed_special="all"),
                reference(["x <after-fork>", "y"], padding=True)["input_ids"])
    stop = threading.Event()

    def busy(index: int) -> None:
        while not stop.is_set():
            if index % 2:
                enc.encode_batch(documents, allowed_special="all")
            else:
                tokenizer(documents[:20], padding=True)

    workers = [threading.Thread(target=busy, args=(index,), daemon=True) for index in range(4)]
    for worker in workers:
        worker.start()
    context = multiprocessing.get_context("fork")
    try:
        for _ in range(3):
            time.sleep(0.05)
            queue = context.Queue()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
                child = context.Process(target=_child_encodes, args=(queue, docs))
                child.start()
            try:
                got = queue.get(timeout=120)
            finally:
                child.join(30)
                if child.is_alive():
                    child.kill()
            assert child.exitcode == 0
            assert got == expected
    finally:
        stop.set()
        for worker in workers:
            worker.join(60)


def _child_adds_a_token(queue: Any) -> None:  # runs in a forked process
    queue.put(_SHARED_TOKENIZER.add_tokens(["<in-child>"]))


def test_a_child_forked_while_another_thread_is_inside_a_call_can_add_tokens() -> None:
    """A read held by another thread at the fork does not exist in the child: adding tokens there
    must not wait for it."""
    global _SHARED_TOKENIZER
    tokenizer = _SHARED_TOKENIZER = make_tokenizer()
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        tokenizer._lock.acquire_read()  # as a call in progress does
        holding.set()
        release.wait()
        tokenizer._lock.release_read()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    holding.wait()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            child = context.Process(target=_child_adds_a_token, args=(queue,))
            child.start()
        assert queue.get(timeout=60) == 1
        child.join(30)
        assert child.exitcode == 0
    finally:
        release.set()
        thread.join(30)
    assert tokenizer.add_tokens(["<in-parent>"]) == 1
