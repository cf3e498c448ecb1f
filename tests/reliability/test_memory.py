"""Memory sized by the input is checked before it is taken: an input too large for memory raises
``MemoryError`` naming its size, and the interpreter lives on.

Rust aborts the process when an allocation fails, so an unchecked allocation sized by the input turns
a text too large for memory into SIGABRT. Each call runs in a child process under an address-space
limit (``RLIMIT_AS``) of what it holds plus :data:`HEADROOM`: merging a 100 MB piece needs some 2 GB.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

HEADROOM = 1_000_000_000
"""Bytes of address space the child may take beyond what it holds when the limit is set."""

CHILD = textwrap.dedent(
    """
    import json, resource, sys
    import hf_bpe

    enc = hf_bpe.get_encoding("cl100k_base")
    expected = enc.encode_ordinary("hello world")
    text = "a" * 100_000_000
    longest = max(range(enc.n_vocab - 1000), key=lambda id: len(enc.decode_single_token_bytes(id)))
    ids = [longest] * 10_000_000
    calls = {
        "encode_ordinary": lambda: enc.encode_ordinary(text),
        "encode": lambda: enc.encode(text),
        "encode_batch": lambda: enc.encode_batch([text, "hello"]),
        "encode_with_offsets": lambda: enc.encode_with_offsets(text),
        "decode": lambda: enc.decode(ids),
        "decode_bytes": lambda: enc.decode_bytes(ids),
    }
    with open("/proc/self/status") as status:
        held = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    limit = held + int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    results = {}
    for name in sys.argv[2:]:
        try:
            calls[name]()
            results[name] = "returned"
        except MemoryError as error:
            results[name] = f"MemoryError: {error}"
        # Still working, on small input, after the failure.
        assert enc.encode_ordinary("hello world") == expected
    print(json.dumps(results))
    """
)


def run_limited(*calls: str) -> dict[str, str]:
    child = subprocess.run([sys.executable, "-c", CHILD, str(HEADROOM), *calls], capture_output=True, text=True, check=False,
                           timeout=600)
    assert child.returncode == 0, f"the child died ({child.returncode}): {child.stderr[-2000:]}"
    results: dict[str, str] = json.loads(child.stdout.splitlines()[-1])
    return results


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_encoding_a_text_too_large_for_memory_raises_memory_error() -> None:
    results = run_limited("encode_ordinary", "encode", "encode_batch", "encode_with_offsets")
    for name, result in results.items():
        assert result.startswith("MemoryError"), f"{name}: {result}"
        assert "100,000,000" in result, f"{name}: the message names the input's size: {result}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_decoding_ids_too_many_for_memory_raises_memory_error() -> None:
    results = run_limited("decode", "decode_bytes")
    for name, result in results.items():
        assert result.startswith("MemoryError"), f"{name}: {result}"


OTHER_RULES = textwrap.dedent(
    """
    import json, resource, sys
    import hf_bpe, pydoc_data.topics
    from hf_bpe.patterns import Normalize, Split

    corpus = list(pydoc_data.topics.topics.values())[:100]
    models = {
        "sentencepiece": hf_bpe.train_sentencepiece(corpus, vocab_size=300, show_progress=False),
        "normalizer": hf_bpe.BPE({bytes([byte]): byte for byte in range(256)},
                                 (Normalize("nfkc"), Split(r"\\s+", "isolated"))),
    }
    text = "a" * 100_000_000
    expected = {name: model.encode_ordinary("a cat") for name, model in models.items()}
    with open("/proc/self/status") as status:
        held = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    limit = held + int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    results = {}
    for name, model in models.items():
        for call in ("encode_ordinary", "encode_with_offsets"):
            try:
                getattr(model, call)(text)
                results[f"{name} {call}"] = "returned"
            except MemoryError as error:
                results[f"{name} {call}"] = f"MemoryError: {error}"
            assert model.encode_ordinary("a cat") == expected[name]
    print(json.dumps(results))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_sentencepiece_and_normalizing_models_raise_memory_error_on_a_text_too_large() -> None:
    """SentencePiece's rule and tokenizers' normalizers allocate as they go: a long text is checked
    against the memory those paths take before they start."""
    child = subprocess.run([sys.executable, "-c", OTHER_RULES, str(HEADROOM)], capture_output=True, text=True,
                           check=False, timeout=600)
    assert child.returncode == 0, f"the child died ({child.returncode}): {child.stderr[-2000:]}"
    results = json.loads(child.stdout.splitlines()[-1])
    assert len(results) == 4
    for name, result in results.items():
        assert result.startswith("MemoryError") and "100,000,000" in result, f"{name}: {result}"


LOADING = textwrap.dedent(
    """
    import base64, json, resource, sys
    import hf_bpe

    BYTES = {bytes([byte]): byte for byte in range(256)}
    case = sys.argv[2]
    if case == "sparse id":  # a few tokens, one special token's id just below 2**24
        ranks, specials = {**BYTES, b"ab": 256}, {"<|end|>": (1 << 24) - 1}
    else:  # a vocabulary too large for the memory left: 1,000,000 tokens of three bytes and fewer
        pairs = {bytes([first, second]): 256 + 256 * first + second for first in range(256) for second in range(256)}
        triples = {bytes([first, second, third]): 256 + 65_536 + 65_536 * first + 256 * second + third
                   for first in range(15) for second in range(256) for third in range(256)}
        ranks, specials = {**BYTES, **pairs, **triples}, {}
    hf_bpe.BPE(BYTES, "gpt2").encode_batch(["ab", "cd"])  # the thread pools and their heaps, before the limit
    with open("/proc/self/status") as status:
        held = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    limit = held + int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        model = hf_bpe.BPE(ranks, "gpt2", special_tokens=specials)
        result = f"built: {model.encode('ab<|end|>', allowed_special='all') if specials else model.n_vocab}"
    except MemoryError as error:
        result = f"MemoryError: {error}"
    assert hf_bpe.BPE(BYTES, "gpt2").encode("ab") == [97, 98]  # the interpreter works on
    print(json.dumps(result))
    """
)


def load_limited(case: str, headroom: int) -> str:
    child = subprocess.run([sys.executable, "-c", LOADING, str(headroom), case], capture_output=True, text=True,
                           check=False, timeout=600)
    assert child.returncode == 0, f"the child died ({child.returncode}): {child.stderr[-2000:]}"
    result: str = json.loads(child.stdout.splitlines()[-1])
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_one_large_id_among_few_tokens_takes_memory_by_the_tokens() -> None:
    # A table indexed by id up to 2**24 took 268 MB for a 37 KB file; the tokens take kilobytes.
    assert load_limited("sparse id", 150_000_000) == "built: [256, 16777215]"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_a_vocabulary_too_large_for_memory_raises_memory_error() -> None:
    result = load_limited("large vocabulary", 100_000_000)
    assert result.startswith("MemoryError") and "1,048,832 tokens" in result, result


COUNTING = textwrap.dedent(
    """
    import json, resource, sys
    from hf_bpe.train import count_pieces

    def word(number):  # letters only, so each word is one piece
        letters = []
        while number:
            number, letter = divmod(number, 26)
            letters.append(chr(97 + letter))
        return "".join(letters)

    def batches():  # ever new words, 20,000,000 at most
        for batch in range(2000):
            yield " ".join(word(batch * 10_000 + index + 1) for index in range(10_000))

    count_pieces(["a b"], show_progress=False, num_threads=1)  # the thread pool and its heap, before the limit
    with open("/proc/self/status") as status:
        held = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    limit = held + int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        counts = count_pieces(batches(), show_progress=False, num_threads=1)
        result = f"counted {len(counts)}"
    except MemoryError as error:
        result = f"MemoryError: {error}"
    print(json.dumps(result))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_counting_more_distinct_pieces_than_memory_holds_raises_memory_error_naming_max_pieces() -> None:
    child = subprocess.run([sys.executable, "-c", COUNTING, "300000000"], capture_output=True, text=True,
                           check=False, timeout=600)
    assert child.returncode == 0, f"the child died ({child.returncode}): {child.stderr[-2000:]}"
    result = json.loads(child.stdout.splitlines()[-1])
    assert result.startswith("MemoryError") and "max_pieces" in result, result
