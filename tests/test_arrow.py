"""BPE.encode_arrow / encode_ordinary_arrow: Arrow string columns in, Arrow list columns of ids out,
the same ids as encode / encode_ordinary on every row."""

from __future__ import annotations

import itertools
import random

import pytest
import textgen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from suite import PARITY_ENCODINGS, scaled

import hf_bpe
from hf_bpe.errors import DisallowedSpecialTokenError

pa = pytest.importorskip("pyarrow", reason="pyarrow comes with datasets; install hf_bpe's dependencies")


@pytest.fixture(scope="module", params=PARITY_ENCODINGS)
def enc(request: pytest.FixtureRequest) -> hf_bpe.BPE:
    return hf_bpe.get_encoding(request.param)


def expected_ordinary(enc: hf_bpe.BPE, texts: list[str | None], nulls: str = "null") -> list[list[int] | None]:
    return [enc.encode_ordinary(text) if text is not None else (None if nulls == "null" else [])
            for text in texts]


rows = st.lists(st.one_of(st.none(), st.text(max_size=80), st.sampled_from(["", " ", "\n\n", "héllo wörld"])),
                max_size=40)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=rows, data=st.data())
def test_every_row_matches_encode_ordinary_sliced_and_chunked(texts: list[str | None], data: st.DataObject) -> None:
    enc = hf_bpe.get_encoding("cl100k_base")
    start = data.draw(st.integers(0, len(texts)))
    stop = data.draw(st.integers(start, len(texts)))
    array = pa.array(texts, type=data.draw(st.sampled_from([pa.string(), pa.large_string(), pa.string_view()])))
    sliced = array.slice(start, stop - start)  # a non-zero offset into the same buffers
    nulls = data.draw(st.sampled_from(["null", "empty"]))
    expected = expected_ordinary(enc, texts[start:stop], nulls)
    ids = enc.encode_arrow(sliced, nulls=nulls, num_threads=data.draw(st.sampled_from([1, 2])), disallowed_special=())
    assert isinstance(ids, pa.ListArray) and ids.type.value_type == pa.uint32()
    assert ids.to_pylist() == expected
    assert ids.null_count == (texts[start:stop].count(None) if nulls == "null" else 0)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(texts)), max_size=4)))
    bounds = [0, *cuts, len(texts)]
    chunked = pa.chunked_array([array.slice(a, b - a) for a, b in itertools.pairwise(bounds)], type=array.type)
    chunked_ids = enc.encode_arrow(chunked, nulls="null", disallowed_special=())
    assert isinstance(chunked_ids, pa.ChunkedArray)
    assert [len(chunk) for chunk in chunked_ids.chunks] == [len(chunk) for chunk in chunked.chunks]
    assert chunked_ids.to_pylist() == expected_ordinary(enc, texts)


def test_generated_documents_match_encode_and_encode_ordinary(enc: hf_bpe.BPE) -> None:
    """Every code point class, special-token look-alikes, empty and 100 KB documents, on 2 threads."""
    rng = random.Random(22)
    docs = textgen.documents(rng, scaled(400_000), huge=(scaled(100_000),))
    array = pa.array(docs)
    assert enc.encode_arrow(array, num_threads=2, disallowed_special=()).to_pylist() == enc.encode_ordinary_batch(docs)
    assert (enc.encode_arrow(array, allowed_special="all", num_threads=2).to_pylist()
            == enc.encode_batch(docs, allowed_special="all"))
    assert (enc.encode_arrow(array, disallowed_special=(), num_threads=2).to_pylist()
            == enc.encode_batch(docs, disallowed_special=()))


def test_ids_match_tiktoken(encoding_pair) -> None:  # type: ignore[no-untyped-def]
    ours, theirs = encoding_pair("o200k_base")
    docs = textgen.documents(random.Random(5), scaled(100_000), specials=False)
    assert ours.encode_arrow(pa.array(docs), disallowed_special=()).to_pylist() == theirs.encode_ordinary_batch(docs)


@pytest.mark.slow
def test_a_huge_document_among_empty_ones() -> None:
    enc = hf_bpe.get_encoding("o200k_base")
    rng = random.Random(3)
    huge = textgen.document(rng, scaled(4_000_000))
    texts = ["", huge, "", "x" * scaled(300_000), ""]
    ids = enc.encode_arrow(pa.array(texts, type=pa.large_string()), num_threads=2, disallowed_special=())
    assert ids.to_pylist() == [enc.encode_ordinary(text) for text in texts]


def test_disallowed_special_token_raises_naming_the_row() -> None:
    enc = hf_bpe.get_encoding("gpt2")
    with pytest.raises(DisallowedSpecialTokenError) as raised:
        enc.encode_arrow(pa.array(["fine", "also fine", "not <|endoftext|> fine"]))
    assert "in row 2 of the array" in getattr(raised.value, "__notes__", [])


def test_nulls_raise_by_default_and_say_how_to_keep_or_drop_them() -> None:
    enc = hf_bpe.get_encoding("gpt2")
    texts = pa.array(["a", None, "b"])
    with pytest.raises(ValueError, match=r"row 1 of the array is null.*nulls='empty'.*nulls='null'"):
        enc.encode_arrow(texts, disallowed_special=())
    assert enc.encode_arrow(texts, nulls="empty", disallowed_special=()).to_pylist() == [[64], [], [65]]
    kept = enc.encode_arrow(texts, nulls="null", disallowed_special=())
    assert kept.to_pylist() == [[64], None, [65]] and kept.null_count == 1
    assert enc.encode_arrow(pa.array([None, None]), nulls="null", disallowed_special=()).to_pylist() == [None, None]  # type null
    with pytest.raises(ValueError, match="nulls='skip' is not one of"):
        enc.encode_arrow(texts, nulls="skip", disallowed_special=())  # type: ignore[arg-type]


def test_uint16_holds_vocabularies_up_to_65536_ids_and_is_refused_beyond() -> None:
    texts = pa.array(["hello world", "<|x|>"])
    byte_ranks = {bytes([b]): b for b in range(256)}
    fits = hf_bpe.BPE(byte_ranks, "gpt2", special_tokens={"<|x|>": 65535})
    ids = fits.encode_arrow(texts, allowed_special="all", dtype="uint16")
    assert ids.type.value_type == pa.uint16()
    assert ids.to_pylist() == [fits.encode("hello world"), [65535]]
    too_big = hf_bpe.BPE(byte_ranks, "gpt2", special_tokens={"<|x|>": 65536})
    with pytest.raises(ValueError, match=r"dtype='uint16' cannot hold .* up to 65536\); use 'uint32'"):
        too_big.encode_arrow(texts, dtype="uint16")
    with pytest.raises(ValueError, match="dtype='float32' is not one of"):
        fits.encode_arrow(texts, dtype="float32")  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.text(st.characters(codec="utf-8"), max_size=60), max_size=20), data=st.data())
def test_uint16_is_taken_exactly_when_the_vocabulary_fits(texts: list[str], data: st.DataObject) -> None:
    """gpt2 (50,257 ids with its special token) fits uint16, cl100k and o200k do not: uint16 output is
    then refused, never truncated, and ``dtype="auto"`` takes uint32; where uint16 is taken, the ids
    are encode's."""
    name = data.draw(st.sampled_from(PARITY_ENCODINGS))
    enc = hf_bpe.get_encoding(name)
    start = data.draw(st.integers(0, len(texts)))
    array = pa.array(texts).slice(start)
    automatic = enc.encode_arrow(array, dtype="auto", disallowed_special=())
    assert automatic.to_pylist() == enc.encode_ordinary_batch(texts[start:])
    if enc.n_vocab <= 1 << 16:
        ids = enc.encode_arrow(array, dtype="uint16", allowed_special="all")
        assert ids.type.value_type == pa.uint16() == automatic.type.value_type
        assert ids.to_pylist() == enc.encode_batch(texts[start:], allowed_special="all")
    else:
        assert automatic.type.value_type == pa.uint32()
        with pytest.raises(ValueError, match="dtype='uint16' cannot hold"):
            enc.encode_arrow(array, dtype="uint16")
    assert enc.encode_arrow(array, dtype="uint32", allowed_special="all").to_pylist() == enc.encode_batch(
        texts[start:], allowed_special="all")


@pytest.mark.parametrize("dtype", ["uint32", "int32", "int64"])
def test_wider_id_types_hold_the_same_ids(dtype: str) -> None:
    enc = hf_bpe.get_encoding("o200k_base")
    docs = textgen.documents(random.Random(1), 20_000)
    ids = enc.encode_arrow(pa.array(docs), dtype=dtype, allowed_special="all")  # type: ignore[arg-type]
    assert ids.type.value_type == pa.from_numpy_dtype(dtype)
    assert ids.to_pylist() == enc.encode_batch(docs, allowed_special="all")


def test_string_views_lists_and_empty_input() -> None:
    enc = hf_bpe.get_encoding("gpt2")
    texts = ["hello", "", "wörld"]
    expected = [enc.encode_ordinary(text) for text in texts]
    assert enc.encode_arrow(pa.array(texts, type=pa.string_view()), disallowed_special=()).to_pylist() == expected
    assert enc.encode_arrow(texts, disallowed_special=()).to_pylist() == expected  # a list of str
    assert enc.encode_arrow(pa.array([], type=pa.string()), disallowed_special=()).to_pylist() == []
    assert enc.encode_arrow(pa.chunked_array([], type=pa.string()), disallowed_special=()).to_pylist() == []


def test_columns_that_are_not_strings_are_refused_clearly() -> None:
    enc = hf_bpe.get_encoding("gpt2")
    with pytest.raises(TypeError, match="(?i)expects an Arrow array of strings .* got int64"):
        enc.encode_arrow(pa.array([1, 2]), disallowed_special=())
    with pytest.raises(TypeError, match=r"decode the dictionary first"):
        enc.encode_arrow(pa.array(["a", "b", "a"]).dictionary_encode(), disallowed_special=())
    with pytest.raises(TypeError, match="got a single str; wrap it in a list"):
        enc.encode_arrow("hello", disallowed_special=())


def test_threads_do_not_change_the_ids() -> None:
    enc = hf_bpe.get_encoding("cl100k_base")
    docs = pa.array(textgen.documents(random.Random(9), scaled(300_000)))
    one = enc.encode_arrow(docs, num_threads=1, allowed_special="all")
    assert enc.encode_arrow(docs, num_threads=2, allowed_special="all").equals(one)
    with pytest.raises(ValueError, match="num_threads must be at least 1"):
        enc.encode_arrow(docs, num_threads=0)
