"""hf_bpe.datasets.tokenize and BPETokenizer.encode_arrow: a datasets corpus tokenized Arrow in, Arrow
out, with the ids (and attention masks) that the tokenizer itself gives."""

from __future__ import annotations

import os
import random

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from suite import scaled

import hf_bpe
from hf_bpe.datasets import tokenize

datasets = pytest.importorskip("datasets", reason="the datasets package is one of hf_bpe's dependencies")
pa = pytest.importorskip("pyarrow", reason="pyarrow comes with datasets")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is one of hf_bpe's dependencies")


def corpus(seed: int, size: int, *, specials: bool = True) -> list[str]:
    return textgen.documents(random.Random(seed), size, specials=specials)


@pytest.fixture(scope="module")
def llama_like() -> hf_bpe.BPETokenizer:
    """cl100k with BOS and EOS added to every text, and added tokens the core matches."""
    tokenizer = hf_bpe.BPETokenizer.from_model(hf_bpe.get_encoding("cl100k_base"), bos_token=100257,
                                               eos_token="<|end|>", add_bos_token=True, add_eos_token=True)
    tokenizer.add_tokens(["added words", "ça"])
    return tokenizer


@pytest.fixture(scope="module")
def stripping() -> hf_bpe.BPETokenizer:
    """gpt2 with an added token that strips the spaces around it, beside a token not of the model:
    refused by name (transformers' own matching of it differs from tokenizers')."""
    tokenizer = hf_bpe.BPETokenizer.from_model(hf_bpe.get_encoding("gpt2"), eos_token="<|endoftext|>",
                                               add_eos_token=True)
    tokenizer.add_tokens([tokenizers.AddedToken("added words", lstrip=True, rstrip=True), "ça"])
    return tokenizer


def test_tokenize_with_a_bpe_gives_encode_ordinary_ids_and_keeps_the_format() -> None:
    enc = hf_bpe.get_encoding("o200k_base")
    texts = corpus(1, scaled(200_000))
    dataset = datasets.Dataset.from_dict({"text": texts, "n": list(range(len(texts)))}).with_format("numpy")
    tokenized = tokenize(dataset, enc, batch_size=17)
    assert tokenized.format["type"] == "numpy"
    assert tokenized.column_names == ["text", "n", "input_ids"]
    assert tokenized.features["input_ids"].feature.dtype == "uint32"
    tokenized = tokenized.with_format(None)
    assert tokenized["input_ids"] == enc.encode_ordinary_batch(texts)
    assert tokenized["n"] == list(range(len(texts)))
    only_ids = tokenize(dataset, enc, remove_columns=True, dtype="int64")
    assert only_ids.column_names == ["input_ids"] and only_ids.features["input_ids"].feature.dtype == "int64"


def test_tokenize_with_bpetokenizer_matches_calling_the_tokenizer(llama_like: hf_bpe.BPETokenizer) -> None:
    texts = corpus(2, scaled(150_000)) + ["added words ça", "", "<|endoftext|> as text"]
    dataset = datasets.Dataset.from_dict({"content": texts})
    tokenized = tokenize(dataset, llama_like, column="content", batch_size=64)
    expected = llama_like(texts)
    assert tokenized["input_ids"] == expected["input_ids"]
    assert tokenized["attention_mask"] == expected["attention_mask"]


def test_encode_arrow_of_bpetokenizer_matches_its_call(llama_like: hf_bpe.BPETokenizer) -> None:
    texts = corpus(3, scaled(100_000)) + ["x <|end|> y", "added words"]
    array = pa.array(texts)
    for add_special_tokens in (True, False):
        for split_special_tokens in (False, True):
            ids = llama_like.encode_arrow(array, add_special_tokens=add_special_tokens,
                                          split_special_tokens=split_special_tokens)
            expected = llama_like(texts, add_special_tokens=add_special_tokens,
                                  split_special_tokens=split_special_tokens)["input_ids"]
            assert ids.to_pylist() == expected, (add_special_tokens, split_special_tokens)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.lists(st.one_of(st.sampled_from(["added words", "ça", "<|end|>", "<|endoftext|>", " ", "\n"]),
                                           st.text(max_size=12)), max_size=8).map("".join) | st.none(),
                       max_size=12),
       data=st.data())
def test_encode_arrow_of_tokenizers_with_added_tokens_matches_their_call(
        llama_like: hf_bpe.BPETokenizer, stripping: hf_bpe.BPETokenizer, pieces: list[str | None],
        data: st.DataObject) -> None:
    """Added and special tokens, BOS/EOS, null rows, sliced, chunked and empty arrays: the core's path
    (``llama_like``) and the calling path (``stripping``: an added token that strips spaces)."""
    tokenizer = data.draw(st.sampled_from([llama_like, stripping]))
    start = data.draw(st.integers(0, len(pieces)))
    array = pa.array(pieces, type=data.draw(st.sampled_from([pa.string(), pa.large_string()]))).slice(start)
    rows = pieces[start:]
    add_special_tokens = data.draw(st.booleans())
    # transformers refuses an empty batch
    expected = tokenizer([row or "" for row in rows], add_special_tokens=add_special_tokens)["input_ids"] if rows else []
    ids = tokenizer.encode_arrow(array, nulls="null", add_special_tokens=add_special_tokens)
    assert ids.to_pylist() == [None if row is None else row_ids for row, row_ids in zip(rows, expected)]
    if len(rows) > 1:
        chunked = pa.chunked_array([array.slice(0, 1), array.slice(1)])
        assert tokenizer.encode_arrow(chunked, nulls="empty", add_special_tokens=add_special_tokens).to_pylist() \
            == expected


def test_automatic_id_type_counts_added_tokens_and_stays_fixed_across_batches(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from transformers import TokenizersBackend

    byte_ranks = {bytes([b]): b for b in range(256)}
    small = hf_bpe.BPETokenizer.from_model(hf_bpe.BPE(byte_ranks | {b"ab": 65_534}, "gpt2", name="small"))
    texts = ["ab", "", "ab cd"] * 7
    dataset = datasets.Dataset.from_dict({"text": texts})
    fits = tokenize(dataset, small, dtype="auto", batch_size=4)
    assert fits.features["input_ids"].feature.dtype == "uint16"
    assert fits["input_ids"] == small(texts)["input_ids"]
    small.add_tokens(["cd"])  # id 65,535: still fits
    assert small.encode_arrow(pa.array(texts), dtype="auto").type.value_type == pa.uint16()
    small.add_tokens(["ef"])  # id 65,536: every batch becomes uint32, whether it holds "ef" or not
    wide = tokenize(datasets.Dataset.from_dict({"text": [*texts, "ef"]}), small, dtype="auto", batch_size=4)
    assert wide.features["input_ids"].feature.dtype == "uint32"
    assert wide["input_ids"] == small([*texts, "ef"])["input_ids"]
    small.save_pretrained(tmp_path, model_card=False)
    theirs = TokenizersBackend.from_pretrained(tmp_path)  # the calling path: len(tokenizer) decides
    assert tokenize(dataset, theirs, dtype="auto").features["input_ids"].feature.dtype == "uint32"


def test_added_tokens_that_strip_spaces_encode_arrow_as_the_call_and_tokenizers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from transformers import TokenizersBackend

    tokenizer = hf_bpe.BPETokenizer.from_model(hf_bpe.get_encoding("gpt2"))
    tokenizer.add_tokens([tokenizers.AddedToken("stripped", lstrip=True, rstrip=True)])
    texts = ["a stripped b", "stripped", "", "no added token here", "a  stripped  stripped\n b"]
    expected = tokenizer(texts)["input_ids"]
    ids = tokenizer.encode_arrow(pa.chunked_array([texts[:2], texts[2:]]), dtype="int64")
    assert ids.to_pylist() == expected
    tokenizer.save_pretrained(tmp_path, model_card=False)
    assert TokenizersBackend.from_pretrained(tmp_path)(texts)["input_ids"] == expected


def test_tokenize_calls_other_tokenizers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from transformers import TokenizersBackend

    ours = hf_bpe.BPETokenizer.from_model(hf_bpe.get_encoding("cl100k_base"))
    ours.save_pretrained(tmp_path, model_card=False)
    theirs = TokenizersBackend.from_pretrained(tmp_path)
    texts = corpus(4, 30_000, specials=False)
    dataset = datasets.Dataset.from_dict({"text": texts})
    assert tokenize(dataset, theirs)["input_ids"] == tokenize(dataset, ours)["input_ids"] == ours(texts)["input_ids"]


def test_tokenize_in_forked_processes() -> None:
    """``num_proc`` forks workers after the parent has used its thread pool: each builds its own."""
    enc = hf_bpe.get_encoding("cl100k_base")
    texts = corpus(5, scaled(100_000))
    enc.encode_arrow(pa.array(texts), num_threads=2, disallowed_special=())  # the parent's pool now has threads
    tokenized = tokenize(datasets.Dataset.from_dict({"text": texts}), enc, num_proc=2, batch_size=50)
    assert tokenized["input_ids"] == enc.encode_ordinary_batch(texts)


def test_tokenize_streams_an_iterable_dataset() -> None:
    enc = hf_bpe.get_encoding("gpt2")
    texts = corpus(6, 20_000)
    stream = datasets.Dataset.from_dict({"text": texts}).to_iterable_dataset(num_shards=2)
    rows = list(tokenize(stream, enc, batch_size=10))
    assert [row["input_ids"] for row in rows] == enc.encode_ordinary_batch(texts)


def test_tokenize_names_a_missing_column() -> None:
    dataset = datasets.Dataset.from_dict({"body": ["a"]})
    with pytest.raises(KeyError, match=r"no column 'text' .*pass column="):
        tokenize(dataset, hf_bpe.get_encoding("gpt2"))


def test_tokenize_refuses_the_tokenizers_call_arguments_by_name(llama_like: hf_bpe.BPETokenizer) -> None:
    """truncation=True is the tokenizer's argument, not Dataset.map()'s: a TypeError names it (and what
    to do), before any row is read; Dataset.map()'s own arguments still pass."""
    dataset = datasets.Dataset.from_dict({"text": ["hello world", "more text here"]})
    for tokenizer in (llama_like, hf_bpe.get_encoding("gpt2")):
        with pytest.raises(TypeError, match=r"call arguments 'max_length', 'truncation': it encodes each row whole"):
            tokenize(dataset, tokenizer, truncation=True, max_length=8)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments 'colour': neither its own nor Dataset.map"):
        tokenize(dataset, llama_like, colour="red")
    stream = dataset.to_iterable_dataset()
    with pytest.raises(TypeError, match=r"'padding'"):
        tokenize(stream, llama_like, padding="max_length")
    described = tokenize(dataset, hf_bpe.get_encoding("gpt2"), desc="Tokenizing", load_from_cache_file=False)
    assert described["input_ids"] == hf_bpe.get_encoding("gpt2").encode_ordinary_batch(dataset["text"])


PEAK_MEMORY = """
import os, sys, threading, time
import datasets, hf_bpe
from hf_bpe.datasets import tokenize

def anonymous_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))

dataset = datasets.load_from_disk(sys.argv[1])
rows = int(sys.argv[2])
dataset = dataset.select(range(rows))
enc = hf_bpe.get_encoding("cl100k_base")
# Imports, tables, the thread pool, and what each thread's caches learn of the text: the rows repeat
# one copy of a corpus (its first argv[4] rows), read three times here, so that the pieces the caches
# keep do not count as what tokenize holds.
for _ in range(3):
    tokenize(dataset.select(range(int(sys.argv[4]))), enc, batch_size=200, num_threads=2)
baseline = peak = anonymous_kb()
done = False
def watch():
    global peak
    while not done:
        peak = max(peak, anonymous_kb())
        time.sleep(0.002)
watcher = threading.Thread(target=watch)
watcher.start()
os.makedirs(sys.argv[3], exist_ok=True)
tokenize(dataset, enc, batch_size=200, num_threads=2, cache_file_name=os.path.join(sys.argv[3], f"{rows}.arrow"))
done = True
watcher.join()
print(peak - baseline)
"""


@pytest.mark.slow
def test_memory_is_bounded_by_the_batch_not_the_dataset(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Four times the rows on disk, in batches of 200: the memory tokenize holds hardly grows (the ids
    of each batch go to the cache file as it is done)."""
    import subprocess
    import sys

    if not os.path.exists("/proc/self/status"):
        pytest.skip("reads RssAnon from /proc/self/status (Linux)")
    texts = corpus(8, 2_000_000, specials=False) * scaled(10, minimum=4)  # 20 MB at full scale
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(tmp_path / "corpus")
    rows = len(texts) // 4
    # The rows repeat the corpus, which grows the piece caches (text read again); that growth has its
    # own bound (tests/test_model.py::test_piece_caches_grow_on_text_read_again_within_their_bound).
    # Here they keep their first size, so that what is measured is what tokenize holds.
    env = {**os.environ, "HF_BPE_CACHE_GROWTH_MB": "0"}
    grown = {}
    for count in (rows, 4 * rows):
        # the least of three runs: a busy machine can delay the freeing of a batch's buffers in one run
        runs = [subprocess.run([sys.executable, "-c", PEAK_MEMORY, str(tmp_path / "corpus"), str(count),
                                str(tmp_path / f"run{run}"), str(rows)], capture_output=True, text=True, check=True,
                               env=env)
                for run in range(3)]
        grown[count] = min(int(result.stdout.split()[-1]) for result in runs)
    # kB. Measured at the reduced scale: 28 kB, then 32-220 kB; with each row's ids held as an array
    # instead of written to the file, 35.5 MB, then 70 MB.
    assert grown[4 * rows] < 1.5 * grown[rows] + 2_000, grown
