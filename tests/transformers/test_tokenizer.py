"""BPETokenizer (``hf_bpe.transformers``) and the ``tokenizer.json`` it writes (``conversion.hf``).

Oracles, never written-down ids: the model itself (``BPE.encode``), the `tokenizers` library reading
our ``tokenizer.json``, and transformers' own ``PythonBackend`` code path run on our tokenizer.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import pickle
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import cost
import numpy as np
import pytest
import regex
import textgen
from naive_bpe import merge_words
from suite import require_shared, scaled

import conversion.hf
import hf_bpe
from hf_bpe import BPE, BPETokenizer
from hf_bpe.errors import InvalidVocabularyError, TokenizerFileError
from hf_bpe.transformers import MODEL_FILE, REMOTE_CODE_FILE

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

NAMED = ["gpt2", "cl100k_base", "o200k_base"]


# ------------------------------------------------------------------------------------ test data


def corpus_chunks(bytes_per_file: int) -> list[str]:
    """Documents cut from the shared corpora (English, Greek, Japanese, Ukrainian, Vietnamese)."""
    paths = sorted(path for path in require_shared("corpora").glob("*.txt") if "COPYING" not in path.name)
    corpora = textgen.corpus_documents(paths, random.Random(0), limit_bytes=bytes_per_file)
    return [document for _, documents in corpora for document in documents]


WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "it",
    "an",
    "are",
    "were",
    "which",
    "this",
    "be",
    "or",
    "have",
    "had",
    "not",
    "but",
    "one",
    "all",
    "their",
    "they",
    "there",
    "been",
    "has",
    "more",
    "when",
    "who",
    "will",
    "would",
    "can",
    "if",
    "about",
    "into",
    "Zürich",
    "naïve",
    "café",
    "façade",
    "Ελλάδα",
    "Київ",
    "Việt",
    "Nam",
    "東京",
    "日本語",
    "中文",
    "한국어",
    "ʻokina",
    "ﬁne",
    "Ǆemal",
    "İstanbul",
]


def varied_documents(count: int, seed: int = 0) -> list[str]:
    """Longer texts: words of several scripts, numbers, code, odd spacing and probe fragments."""
    rng = random.Random(seed)
    probes = conversion.hf.probe_texts(count * 4, seed)
    documents = []
    for index in range(count):
        parts = []
        for _ in range(rng.randint(3, 40)):
            kind = rng.random()
            if kind < 0.6:
                parts.append(rng.choice(WORDS))
            elif kind < 0.7:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 9))))
            elif kind < 0.8:
                parts.append(
                    rng.choice(["def f(x):\n    return x", "{'a': [1, 2]}", "i += 1;", "<div>", "\t\t"])
                )
            else:
                parts.append(probes[(index * 4 + len(parts)) % len(probes)])
        documents.append("".join(rng.choice([" ", " ", " ", "\n", "  ", ""]) + part for part in parts))
    return documents


def naive_bpe_ranks(text: str, merges: int, pattern: str) -> dict[bytes, int]:
    """A trained-style rank table from the seeds' naive loop: most frequent pair, ties to the
    greatest, on the pieces of ``text``."""
    words = Counter(tuple(bytes([byte]) for byte in piece.encode()) for piece in regex.findall(pattern, text))
    ranks = {bytes([byte]): byte for byte in range(256)}
    for _ in range(merges):
        pairs: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in itertools.pairwise(word):
                pairs[pair] += count
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))
        ranks[best[0] + best[1]] = len(ranks)
        words = merge_words(words, best)
    return ranks


CUSTOM_PATTERN = r"""\p{L}+(?:'\p{L}+)?|\p{N}{1,4}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s"""


@functools.cache
def encoding(name: str) -> BPE:
    """A named encoding, or a small model trained here ("trained": GPT-2 pattern; "custom": a
    pattern of our own), both with special tokens after the merges."""
    if name in NAMED:
        return hf_bpe.get_encoding(name)
    pattern = hf_bpe.patterns.GPT2 if name == "trained" else CUSTOM_PATTERN
    ranks = naive_bpe_ranks("\n".join(varied_documents(150, seed=7)), 150, pattern)
    specials = {"<|endoftext|>": len(ranks), "<|im_start|>": len(ranks) + 1, "<|im_end|>": len(ranks) + 3}
    return BPE(ranks, pattern, specials, name=name)


@functools.cache
def reference_tokenizers(name: str) -> tokenizers.Tokenizer:
    return conversion.hf.build_tokenizer(encoding(name))


def tokenizer_for(name: str = "gpt2", **policy: Any) -> BPETokenizer:
    specials = encoding(name).special_tokens
    end = "<|endoftext|>" if "<|endoftext|>" in specials else next(iter(specials))
    policy.setdefault("bos_token", end)
    policy.setdefault("eos_token", end)
    policy.setdefault("pad_token", "<|pad|>")
    return BPETokenizer.from_model(encoding(name), **policy)


def with_specials(texts: Iterable[str], specials: list[str], seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for text in texts:
        cut = rng.randint(0, len(text))
        out.append(text[:cut] + rng.choice(specials) + text[cut:] + rng.choice(["", rng.choice(specials)]))
    return out


# ---------------------------------------------------------------------------- tokenizer.json


def test_translate_pattern_rewrites_only_what_oniguruma_reads_differently() -> None:
    translate = conversion.hf.translate_pattern
    assert translate(r"\p{N}{1,3}+") == r"(?>\p{N}{1,3})"
    assert translate(r"[^\s\p{L}]++[\r\n]*+") == r"(?>[^\s\p{L}]+)(?>[\r\n]*)"
    assert translate(r"\s++$|^x") == r"(?>\s+)\z|\Ax"
    assert translate(r"[$^\]]+|\$\^") == r"[$^\]]+|\$\^"  # literal in classes and escaped
    assert translate(r"(?m)^a$|(?s:.)|(?i)b") == r"^a$|(?m:.)|(?i)b"
    assert translate(r"a+?|(?:ab)++|x{2}") == r"a+?|(?>(?:ab)+)|x{2}"


@pytest.mark.parametrize("name", [*NAMED, "trained", "custom"])
def test_tokenizer_json_gives_our_ids(name: str) -> None:
    model = encoding(name)
    texts = conversion.hf.probe_texts(scaled(1500), seed=11) + varied_documents(scaled(200), seed=3)
    texts = with_specials(texts, sorted(model.special_tokens), seed=5)
    texts += textgen.documents(random.Random(name), scaled(300_000))
    theirs = [
        encoding.ids for encoding in reference_tokenizers(name).encode_batch(texts, add_special_tokens=False)
    ]
    ours = model.encode_batch(texts, allowed_special="all")
    assert ours == theirs
    round_trip = reference_tokenizers(name).decode_batch(ours, skip_special_tokens=False)
    assert round_trip == [model.decode(ids) for ids in ours]


@pytest.mark.slow
@pytest.mark.parametrize("name", [*NAMED, "trained"])
def test_tokenizer_json_gives_our_ids_on_corpora(name: str) -> None:
    texts = corpus_chunks(scaled(100_000))
    model = encoding(name)
    theirs = [
        encoding.ids for encoding in reference_tokenizers(name).encode_batch(texts, add_special_tokens=False)
    ]
    assert model.encode_ordinary_batch(texts) == theirs


@pytest.mark.parametrize("seed", range(6))
def test_recovered_merges_are_exact_even_when_tokens_outrank_their_parts(seed: int) -> None:
    """Shuffled ids: a token may rank before its parts; tiktoken still forms it by merging."""
    ranks = naive_bpe_ranks("\n".join(varied_documents(60, seed=seed)), 120, hf_bpe.patterns.GPT2)
    merged = [token for token in ranks if len(token) > 1]
    ids = [ranks[token] for token in merged]
    random.Random(seed).shuffle(ids)
    model = BPE(
        {**{token: rank for token, rank in ranks.items() if len(token) == 1}, **dict(zip(merged, ids))},
        "gpt2",
    )
    texts = varied_documents(300, seed=seed + 100)
    tokenizer = conversion.hf.build_tokenizer(model)
    assert model.encode_ordinary_batch(texts) == [
        e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)
    ]


def test_custom_pattern_that_oniguruma_cannot_follow_is_refused() -> None:
    model = BPE({bytes([byte]): byte for byte in range(256)}, r"(?m)^\w+|\w+|\s")
    with pytest.raises(conversion.hf.ConversionError, match="tokenizers cannot reproduce this model"):
        conversion.hf.build_tokenizer(model)
    conversion.hf.build_tokenizer(model, check=False)  # opting out writes it anyway


def test_tokenizer_json_keeps_ids_across_holes_and_added_tokens(tmp_path: Path) -> None:
    model = encoding("cl100k_base")  # specials at 100257-100260 and 100276, holes around them
    added = {
        100277: tokenizers.AddedToken("<|pad|>", special=True, normalized=False),
        100278: tokenizers.AddedToken("hello there", special=False, normalized=True),
        100281: tokenizers.AddedToken("<gap>", special=True, normalized=False),
    }
    path = conversion.hf.save(model, tmp_path / "tokenizer.json", added_tokens=added)
    loaded = tokenizers.Tokenizer.from_file(str(path))
    for text, token_id in [*model.special_tokens.items(), *((t.content, i) for i, t in added.items())]:
        assert loaded.token_to_id(text) == token_id
        assert loaded.encode(f"x{text}y").ids == [*model.encode("x"), token_id, *model.encode("y")]


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_merges_list_models_keep_their_merges(ignore_merges: bool) -> None:
    """A merges-list model, with tokens no merge makes (the whole-piece rule alone may produce them)."""
    ranks = naive_bpe_ranks("\n".join(varied_documents(80, seed=2)), 100, hf_bpe.patterns.GPT2)
    merges = BPE(ranks, hf_bpe.patterns.GPT2).merges  # recovered from the ranks
    vocab = {**ranks, b"the abc": len(ranks), b" abc": len(ranks) + 1}
    model = BPE.from_merges(
        vocab, merges, CUSTOM_PATTERN, {"<|end|>": len(vocab)}, ignore_merges=ignore_merges
    )
    assert model.kind == "merges"
    texts = varied_documents(200, seed=8) + ["the abc abc", " abc"]
    tokenizer = conversion.hf.build_tokenizer(model)
    assert model.encode_ordinary_batch(texts) == [
        e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)
    ]
    wrapped = BPETokenizer.from_model(model, eos_token="<|end|>", add_eos_token=True)
    assert wrapped(texts)["input_ids"] == [[*ids, len(vocab)] for ids in model.encode_ordinary_batch(texts)]


@pytest.mark.parametrize("name", [*NAMED, "trained", "custom"])
def test_the_reader_reads_what_the_writer_wrote(name: str, tmp_path: Path) -> None:
    model = encoding(name)
    loaded = conversion.hf.load(conversion.hf.save(model, tmp_path / "tokenizer.json"))
    texts = varied_documents(100, seed=13)
    assert loaded.encode_batch(texts, allowed_special="all") == model.encode_batch(
        texts, allowed_special="all"
    )
    if name != "custom":  # a custom pattern comes back in a different (equivalent) spelling
        assert loaded == model


def test_added_token_on_an_ordinary_id_is_refused() -> None:
    with pytest.raises(InvalidVocabularyError, match="id of the ordinary token"):
        conversion.hf.build_tokenizer(encoding("gpt2"), added_tokens={100: tokenizers.AddedToken("<x>")})


# ----------------------------------------------------------------------------- encoding


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "trained"])
def test_call_gives_the_model_ids_with_bos_and_eos(name: str) -> None:
    model = encoding(name)
    tokenizer = tokenizer_for(name, add_bos_token=True, add_eos_token=True)
    texts = with_specials(varied_documents(50, seed=1), sorted(model.special_tokens))
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    expected = [[bos, *ids, eos] for ids in model.encode_batch(texts, allowed_special="all")]
    assert tokenizer(texts)["input_ids"] == expected
    assert [tokenizer(text)["input_ids"] for text in texts[:10]] == expected[:10]
    assert tokenizer.encode(texts[0], add_special_tokens=False) == expected[0][1:-1]
    pair = tokenizer(texts[0], texts[1], return_token_type_ids=True)
    assert pair["input_ids"] == expected[0] + expected[1]
    assert pair["token_type_ids"] == [0] * len(expected[0]) + [1] * len(expected[1])


def test_tokenize_and_convert_tokens_agree_with_encode() -> None:
    tokenizer = tokenizer_for("cl100k_base")
    tokenizer.add_tokens(["new token", "ünïcode"])
    for text in with_specials(varied_documents(40, seed=2), ["<|fim_prefix|>", "new token", "ünïcode"]):
        tokens = tokenizer.tokenize(text)
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert tokenizer.convert_tokens_to_ids(tokens) == ids
        assert tokenizer.convert_ids_to_tokens(ids) == tokens
        assert tokenizer.convert_tokens_to_string(tokens) == text == tokenizer.decode(ids)
    assert tokenizer.tokenize("hello world") == ["hello", "Ġworld"]


class GenericPath(BPETokenizer):
    """Our tokenizer driven by transformers' own ``PythonBackend._encode_plus`` (through our
    ``tokenize``): the reference for truncation, padding, masks and tensors."""

    def _encode_plus(self, *args: Any, return_offsets_mapping: bool = False, **kwargs: Any) -> Any:
        return transformers.PreTrainedTokenizer._encode_plus(self, *args, **kwargs)


CALL_OPTIONS = [
    {},
    {"add_special_tokens": False},
    {"padding": True},
    {"padding": True, "padding_side": "left"},
    {"padding": "max_length", "max_length": 40},
    {"padding": True, "pad_to_multiple_of": 8},
    {"truncation": True, "max_length": 7},
    {"truncation": True, "max_length": 7, "padding": "max_length", "padding_side": "left"},
    {"truncation": "only_first", "max_length": 9, "stride": 2, "return_overflowing_tokens": True},
    {"truncation": "only_second", "max_length": 12, "stride": 3, "return_overflowing_tokens": True},
    {"truncation": "longest_first", "max_length": 10, "return_overflowing_tokens": True},
    {"return_special_tokens_mask": True, "return_token_type_ids": True, "return_length": True},
    {"padding": True, "return_tensors": "np", "return_special_tokens_mask": True},
    {"return_attention_mask": False, "padding": True},
    {"max_length": 6},
    # NumPy output of padded batches is built as arrays from the core's flat buffer:
    {"padding": True, "return_tensors": "np"},
    {"padding": True, "padding_side": "left", "return_tensors": "np"},
    {"padding": "max_length", "max_length": 40, "return_tensors": "np"},
    {"padding": "max_length", "max_length": 6, "return_tensors": "np"},  # rows longer than the padding
    {"padding": True, "pad_to_multiple_of": 8, "padding_side": "left", "return_tensors": "np"},
    {"padding": True, "return_attention_mask": False, "return_tensors": "np"},
    {"padding": True, "add_special_tokens": False, "return_tensors": "np"},
]
INPUTS = {
    "single": ("A short text.", None),
    "batch": (["A short text.", "A somewhat longer text, with more words in it.", "", "x"], None),
    "pair": ("First part here.", "And a second part that is longer than the first."),
    "pairs": (["one", "two three four five six seven"], ["eight nine ten", "eleven"]),
    "words": (["Split", "into", " words", "!"], None),
    "word batch": ([["Split", "into"], [" words", "!", "more", "words"]], None),
    "ids": ([40, 1842, 345], None),
}


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), _plain(value.tolist()))
    if isinstance(value, dict) or hasattr(value, "data"):
        return {key: _plain(item) for key, item in dict(value).items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(item) for item in value)
    return value


@pytest.mark.parametrize(
    "policy", [{}, {"add_bos_token": True, "add_eos_token": True}], ids=["plain", "bos-eos"]
)
@pytest.mark.parametrize("options", CALL_OPTIONS, ids=lambda options: ",".join(options) or "defaults")
@pytest.mark.parametrize("kind", list(INPUTS))
def test_call_assembles_exactly_as_python_backend(
    kind: str, options: dict[str, Any], policy: dict[str, Any]
) -> None:
    text, pair = INPUTS[kind]
    options = dict(options)
    if kind.startswith("word"):
        options["is_split_into_words"] = True
    ours, reference = (
        tokenizer_for("gpt2", **policy),
        GenericPath.from_model(encoding("gpt2"), **_named(policy)),
    )

    def run(tokenizer: BPETokenizer) -> Any:
        try:
            return _plain(tokenizer(text, pair, **options))
        except Exception as error:  # noqa: BLE001 - the same error is the expected outcome too
            return type(error).__name__

    assert run(ours) == run(reference)


@pytest.mark.parametrize(("text", "pair", "says"), [
    (["a", 3], None, "text[1] is int 3"),
    ([3, "a"], None, "text[1] is str 'a' in a list of token ids"),
    (["a", None], None, "text[1] is NoneType None"),
    (["a", b"x"], None, "text[1] is bytes b'x'"),
    ([[1, 2], [3, "x"]], None, "text[1][1] is str 'x' in a list of token ids"),
    ([("a", "b"), ("c", 4)], None, "text[1][1] is int 4"),
    (["a", True], None, "text[1] is bool True"),
    (3, None, "text is int 3"),
    (["a", "b"], ["c", 5], "text_pair[1] is int 5"),
])
@pytest.mark.parametrize("added", ["plain", "lstrip"])
def test_call_names_the_item_of_a_wrong_type(text: Any, pair: Any, says: str, added: str) -> None:
    """PythonBackend reads [3, "a"] as token ids and returns the string among them; a batch with an
    int fails deep inside. The item is named before added tokens the core cannot match are refused."""
    tokenizer = tokenizer_for("gpt2")
    if added == "lstrip":
        tokenizer.add_tokens([transformers.AddedToken("<x>", lstrip=True)])
    with pytest.raises(TypeError, match=re.escape(says)):
        tokenizer(text, pair)
    with pytest.raises(TypeError, match=re.escape(says)):
        tokenizer.encode(text, pair)


def _named(policy: dict[str, Any]) -> dict[str, Any]:
    return {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|pad|>", **policy}


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "custom"])
def test_offsets_are_the_characters_tokenizers_gives(name: str) -> None:
    tokenizer = tokenizer_for(name, add_bos_token=True)
    tokenizer.add_tokens(["added words", "ça"])
    reference = conversion.hf.build_tokenizer(
        encoding(name),
        added_tokens=tokenizer.added_tokens_decoder,
        bos_token=tokenizer.bos_token,
        add_bos_token=True,
    )
    specials = [*sorted(encoding(name).special_tokens), "added words", "ça"]
    texts = with_specials(varied_documents(80, seed=9), specials) + ["😀x", "a😀", "🇺🇸 中文", "é"]
    batch = tokenizer(texts, return_offsets_mapping=True)
    for text, ids, offsets in zip(texts, batch["input_ids"], batch["offset_mapping"]):
        expected = reference.encode(text)
        assert ids == expected.ids
        assert offsets == expected.offsets
    single = tokenizer(texts[0], texts[1], return_offsets_mapping=True)
    expected = reference.encode(texts[0], texts[1])
    assert single["offset_mapping"] == expected.offsets
    padded = tokenizer(texts[:3], return_offsets_mapping=True, padding=True, return_tensors="np")
    assert padded["offset_mapping"].shape == (*padded["input_ids"].shape, 2)


def test_return_tensors_np_and_pt() -> None:
    tokenizer = tokenizer_for("gpt2", add_eos_token=True)
    texts = ["one", "two three four"]
    lists = tokenizer(texts, padding=True)
    arrays = tokenizer(texts, padding=True, return_tensors="np")
    assert arrays["input_ids"].tolist() == lists["input_ids"]
    assert arrays["attention_mask"].tolist() == lists["attention_mask"]
    torch = pytest.importorskip("torch", reason="torch is not installed (the 'pt' case runs where it is)")
    tensors = tokenizer(texts, padding=True, return_tensors="pt")
    assert isinstance(tensors["input_ids"], torch.Tensor)
    assert tensors["input_ids"].tolist() == lists["input_ids"]


@pytest.mark.parametrize("split_special_tokens", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_padded_arrays_equal_the_padded_lists(padding_side: str, split_special_tokens: bool) -> None:
    """The NumPy path against the list path, with run-time added tokens (cut out before the core
    encodes), special tokens in the text, empty texts, and BOS/EOS."""
    tokenizer = tokenizer_for("cl100k_base", add_bos_token=True, add_eos_token=True)
    tokenizer.add_tokens(["added words", " ça"])
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|extra|>"]})
    specials = [*sorted(encoding("cl100k_base").special_tokens), "added words", " ça", "<|extra|>"]
    texts = with_specials(varied_documents(60, seed=4), specials) + ["", "é", "<|extra|>"]
    options = {"padding": True, "padding_side": padding_side, "split_special_tokens": split_special_tokens}
    lists = tokenizer(texts, **options)
    arrays = tokenizer(texts, return_tensors="np", **options)
    for key in ("input_ids", "attention_mask"):
        assert arrays[key].dtype == np.int64
        assert arrays[key].tolist() == lists[key]


@pytest.mark.parametrize("options", [
    {"padding": "max_length", "max_length": 3000},
    {"padding": True, "pad_to_multiple_of": 64, "padding_side": "left"},
    {"padding": True, "return_attention_mask": False},
    {"padding": True, "add_special_tokens": False},
], ids=["max_length", "multiple_left", "no_mask", "no_specials"])
def test_padded_arrays_equal_the_padded_lists_for_each_padding_option(options: dict[str, Any]) -> None:
    tokenizer = tokenizer_for("gpt2", add_bos_token=True, add_eos_token=True)
    texts = [*varied_documents(40, seed=9), "", " "]
    lists = tokenizer(texts, **options)
    arrays = tokenizer(texts, return_tensors="np", **options)
    assert sorted(arrays.keys()) == sorted(lists.keys())
    for key in lists:
        assert arrays[key].dtype == np.int64 and arrays[key].tolist() == lists[key], key


def test_rows_kept_in_the_core_refuse_a_padded_length_they_do_not_fit() -> None:
    from hf_bpe._core import EncodedRows

    rows = EncodedRows([[5, 6, 7], []])
    assert rows.lengths().tolist() == [3, 0] and rows.row(0) == [5, 6, 7] and len(rows) == 2
    ids, mask = rows.padded(5, 0, True, bos=1, eos=2)
    assert ids.tolist() == [[1, 5, 6, 7, 2], [0, 0, 0, 1, 2]] and mask.tolist() == [[1] * 5, [0, 0, 0, 1, 1]]
    with pytest.raises(ValueError, match="row 0 has 5 ids with its special tokens, more than the padded length 4"):
        rows.padded(4, 0, False, bos=1, eos=2)
    with pytest.raises(IndexError, match="row 2 of a batch of 2 rows"):
        rows.row(2)
    empty, no_mask = EncodedRows([[], []]).padded(0, 0, False, attention_mask=False)
    assert empty.shape == (2, 0) and no_mask is None
    with pytest.raises(MemoryError, match="could not allocate 2 x 1152921504606846976 int64 ids"):
        rows.padded(2**60, 0, False)


def test_decode_skips_special_tokens_and_keeps_everything_else() -> None:
    tokenizer = tokenizer_for("cl100k_base", add_bos_token=True)
    tokenizer.add_tokens(["café au lait"])
    text = "héllo <|fim_prefix|> wörld café au lait 😀"
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids) == "<|endoftext|>" + text
    assert tokenizer.decode(ids, skip_special_tokens=True) == text.replace("<|fim_prefix|>", "")
    assert tokenizer.batch_decode([ids, ids[:2]], skip_special_tokens=True)[0] == tokenizer.decode(
        ids[1:]
    ).replace("<|fim_prefix|>", "")
    assert tokenizer.decode(np.array(ids)) == tokenizer.decode(ids)
    emoji = tokenizer.encode("😀", add_special_tokens=False)
    assert len(emoji) > 1 and tokenizer.decode(emoji[:1]) == "\ufffd"  # a partial character
    assert tokenizer.decode(ids[3]) == tokenizer.convert_tokens_to_string(
        [tokenizer.convert_ids_to_tokens(ids[3])]
    )


def test_tokens_added_at_run_time_are_matched_in_the_core_as_tokenizers_matches_them() -> None:
    tokenizer = tokenizer_for("gpt2")
    before = len(tokenizer)
    assert tokenizer.add_tokens(["blorple", "zz top", "hello"]) == 2  # "hello" is already a token
    assert tokenizer.add_special_tokens({"cls_token": "<cls>", "extra_special_tokens": ["<|x|>"]}) == 2
    assert tokenizer.convert_tokens_to_ids(["blorple", "zz top", "hello", "<cls>", "<|x|>"]) == [
        before,
        before + 1,
        31373,
        before + 2,
        before + 3,
    ]
    assert len(tokenizer) == before + 4
    # A normalized token overlapping a special one: tokenizers cuts out the special one first.
    tokenizer.add_tokens(["a<|x"])
    reference = conversion.hf.build_tokenizer(encoding("gpt2"), added_tokens=tokenizer.added_tokens_decoder)
    texts = with_specials(
        varied_documents(60, seed=4), ["blorple", "zz top", "<cls>", "<|x|>", "a<|x", "a<|x|>"]
    )
    assert tokenizer(texts)["input_ids"] == [e.ids for e in reference.encode_batch(texts)]
    assert tokenizer("a<|x|>")["input_ids"] == [64, before + 3]
    assert tokenizer.decode(tokenizer("zz top <cls>")["input_ids"], skip_special_tokens=True) == "zz top "


def test_many_added_and_special_tokens_cost_linear_time_and_match_as_tokenizers_does() -> None:
    """Adding special tokens after ordinary added ones is not pairwise: 10,000 of each cost about 10x
    what 1,000 do (a pairwise overlap check costs 100x; 3,000 of each took half a minute)."""
    def added(size: int) -> tuple[BPETokenizer, list[str], list[str]]:
        return tokenizer_for("gpt2"), [f"w{i}x" for i in range(size)], [f"<|s{i}|>" for i in range(size)]

    def prepare(size: int) -> Callable[[], object]:
        tokenizer, words, specials = added(size)
        tokenizer.add_tokens(words)
        return lambda: tokenizer.add_special_tokens({"additional_special_tokens": specials})

    linear, report = cost.cost_grows_linearly_in_steps(prepare, 1_000, (3_000, 10_000))
    assert linear, f"add_special_tokens after add_tokens: {report}"
    tokenizer, words, specials = added(10_000)
    before = len(tokenizer)
    assert tokenizer.add_tokens(words) == tokenizer.add_special_tokens({"additional_special_tokens": specials})
    assert len(tokenizer) == before + 20_000
    # A word ending with the beginning of a special token: both matching phases are needed.
    tokenizer.add_tokens(["w3x<|"])
    reference = conversion.hf.build_tokenizer(encoding("gpt2"), added_tokens=tokenizer.added_tokens_decoder)
    texts = with_specials(varied_documents(40, seed=5), [*words[::997], *specials[::991], "w3x<|s3|>", "w3x<|"])
    assert tokenizer(texts)["input_ids"] == [e.ids for e in reference.encode_batch(texts)]


def test_added_tokens_that_strip_spaces_are_matched_beyond_the_model_s_special_tokens() -> None:
    """A token added with lstrip is matched as tokenizers matches it (the whitespace before it is its
    own) in every path; tests/transformers/test_added_tokens.py compares with TokenizersBackend."""
    tokenizer = tokenizer_for("gpt2")
    tokenizer.add_tokens([transformers.AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    mask = tokenizer.convert_tokens_to_ids("<mask>")
    expected = [*encoding("gpt2").encode("hello"), mask, *encoding("gpt2").encode(" world")]
    assert tokenizer("hello  <mask> world")["input_ids"] == expected
    assert tokenizer.encode("hello  <mask> world") == expected
    assert tokenizer.convert_tokens_to_ids(tokenizer.tokenize("hello  <mask> world")) == expected


def test_split_special_tokens_encodes_special_text_as_text() -> None:
    tokenizer = tokenizer_for("gpt2")
    text = "a <|endoftext|> b"
    assert tokenizer(text, split_special_tokens=True)["input_ids"] == encoding("gpt2").encode_ordinary(text)
    assert tokenizer(text)["input_ids"] == encoding("gpt2").encode(text, allowed_special="all")


def test_chat_template_renders_and_encodes_special_tokens() -> None:
    template = (
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    tokenizer = tokenizer_for("trained", chat_template=template)
    chat = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"}]
    rendered = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert rendered.count("<|im_start|>") == 3
    ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=False)
    assert ids == encoding("trained").encode(rendered, allowed_special="all")
    assert ids.count(tokenizer.convert_tokens_to_ids("<|im_start|>")) == 3


def test_pickle_and_deepcopy_keep_everything() -> None:
    tokenizer = tokenizer_for("gpt2", add_bos_token=True)
    tokenizer.add_tokens(["blorple"])
    texts = ["blorple and <|endoftext|> text", "more"]
    expected = tokenizer(texts, return_offsets_mapping=True)
    for clone in (pickle.loads(pickle.dumps(tokenizer)), copy.deepcopy(tokenizer)):
        assert clone(texts, return_offsets_mapping=True) == expected
        assert clone.add_bos_token and len(clone) == len(tokenizer)


def test_datasets_map_with_two_processes() -> None:
    datasets = pytest.importorskip("datasets")
    tokenizer = tokenizer_for("gpt2", add_eos_token=True)
    texts = varied_documents(64, seed=12)
    dataset = datasets.Dataset.from_dict({"text": texts})
    mapped = dataset.map(lambda batch: tokenizer(batch["text"]), batched=True, batch_size=8, num_proc=2)
    assert mapped["input_ids"] == tokenizer(texts)["input_ids"]
    assert mapped["attention_mask"] == tokenizer(texts)["attention_mask"]


def test_vocabulary_views() -> None:
    tokenizer = tokenizer_for("cl100k_base")
    model = encoding("cl100k_base")
    assert tokenizer.vocab_size == model.n_vocab
    assert len(tokenizer) == model.n_vocab + 1  # <|pad|> was added after the last id
    vocab = tokenizer.get_vocab()
    assert vocab["Ġworld"] == 1917 and vocab["<|endofprompt|>"] == 100276 and vocab["<|pad|>"] == 100277
    assert tokenizer.convert_ids_to_tokens(100265) is None  # a hole in cl100k's ids
    assert tokenizer.model is model


# ------------------------------------------------------------------------------------- saving


def test_save_pretrained_writes_a_self_sufficient_folder(tmp_path: Path) -> None:
    template = "{% for m in messages %}{{ m['content'] }}<|endoftext|>{% endfor %}"
    tokenizer = tokenizer_for("gpt2", add_bos_token=True, chat_template=template, model_max_length=1024)
    tokenizer.add_tokens(["blorple"])
    files = {Path(file).name for file in tokenizer.save_pretrained(tmp_path)}
    assert {
        "tokenizer_config.json",
        MODEL_FILE,
        "tokenizer.json",
        "special_tokens_map.json",
        "README.md",
    } <= files
    assert {"chat_template.jinja"} <= {path.name for path in tmp_path.iterdir()}
    assert REMOTE_CODE_FILE not in files
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "BPETokenizer"
    fingerprint = {name: hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()  # of the files that set the ids
                   for name in (MODEL_FILE, "tokenizer.json", "special_tokens_map.json")}
    assert config["hf_bpe"] == {"add_bos_token": True, "add_eos_token": False, "files": fingerprint}
    assert "auto_map" not in config

    loaded = BPETokenizer.from_pretrained(tmp_path)
    assert loaded.add_bos_token and not loaded.add_eos_token
    assert loaded.chat_template == template and loaded.model_max_length == 1024
    assert loaded.get_vocab() == tokenizer.get_vocab()
    texts = ["blorple <|endoftext|> text", "more"]
    assert loaded(texts)["input_ids"] == tokenizer(texts)["input_ids"]
    assert loaded.model == tokenizer.model
    # Saving what was loaded gives the same folder again.
    loaded.save_pretrained(tmp_path / "again")
    again = json.loads((tmp_path / "again" / "tokenizer_config.json").read_text())
    # The same settings; the fingerprint is of the files this save wrote (special_tokens_map.json
    # now spells its tokens as objects).
    assert again["hf_bpe"].pop("files") == {
        name: hashlib.sha256((tmp_path / "again" / name).read_bytes()).hexdigest() for name in fingerprint
    }
    del config["hf_bpe"]["files"]
    assert again == config


def test_model_card_describes_the_tokenizer(tmp_path: Path) -> None:
    tokenizer = tokenizer_for("cl100k_base", add_eos_token=True)
    tokenizer.save_pretrained(tmp_path)
    card = (tmp_path / "README.md").read_text()
    assert "| vocabulary size (ids `0` to `100277`) | 100278 |" in card
    assert "`cl100k`" in card and hf_bpe.patterns.CL100K in card
    assert "| 100276 | `<\\|endofprompt\\|>` | model | yes |" in card
    assert "EOS `<|endoftext|>` last" in card
    assert "bytes per token" in card and "Not recorded" in card
    assert "| undecided within the reachability search's bounds | 0 |" in card
    assert "The neighbour search for the rest shares a budget of 1,048,576 pieces merged and texts tried" in card
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not (tmp_path / "token_lengths.png").exists()
    else:
        assert (tmp_path / "token_lengths.png").read_bytes()[:4] == b"\x89PNG"
        assert "![Histogram of token lengths in bytes](token_lengths.png)" in card


def test_model_card_of_a_model_trained_by_hf_bpe_says_how(tmp_path: Path) -> None:
    """hf_bpe.train records the corpus on the model; BPETokenizer.save_pretrained writes it into the card
    (and tokenizer_config.json keeps it for the next save)."""
    texts = ["the cat sat on the mat", "the hat <|endoftext|> naïve café"] * 50
    model = hf_bpe.train(texts, 275, special_tokens=["<|endoftext|>"], pattern="cl100k", show_progress=False)
    BPETokenizer.from_model(model).save_pretrained(tmp_path / "texts")
    card = (tmp_path / "texts" / "README.md").read_text(encoding="utf-8")
    assert "Not recorded" not in card and "not trained by hf_bpe" not in card
    size = sum(len(text.encode("utf-8")) for text in texts)
    assert f"100 texts, {size:,} bytes of UTF-8." in card and "Corpus: a list of texts." in card
    assert "Split pattern: cl100k." in card and "Trained to a vocabulary of 275." in card
    assert "Special tokens: `<|endoftext|>`." in card
    BPETokenizer.from_pretrained(tmp_path / "texts").save_pretrained(tmp_path / "again")
    assert f"100 texts, {size:,} bytes of UTF-8." in (tmp_path / "again" / "README.md").read_text(encoding="utf-8")
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for path in files:
        path.write_text("hello world, hello there\n" * 20, encoding="utf-8")
    from_files = hf_bpe.train(files=files, vocab_size=270, show_progress=False)
    BPETokenizer.from_model(from_files).save_pretrained(tmp_path / "files")
    card = (tmp_path / "files" / "README.md").read_text(encoding="utf-8")
    assert "Corpus: files a.txt, b.txt." in card and f"2 files, {2 * 25 * 20:,} bytes of UTF-8." in card
    assert "Split pattern: gpt2." in card and "Special tokens: " not in card


def test_each_card_audits_its_own_vocabulary_when_models_are_saved_in_turn(tmp_path: Path) -> None:
    """The card keeps the last model's audit for the next save of an equal model: a different model
    saved in between, or the same vocabulary with other special tokens, gets its own findings."""
    ranks = encoding("trained").mergeable_ranks
    eot = len(ranks)
    plain = BPE(ranks, "gpt2", special_tokens={"<|endoftext|>": eot})
    overlapping = BPE(ranks, "gpt2", special_tokens={"<|endoftext|>": eot, "<|endoftext|>!": eot + 1})
    row = "| special tokens that are also one ordinary token / overlapping ones |"

    def card(model: BPE, folder: str) -> str:
        BPETokenizer.from_model(model).save_pretrained(tmp_path / folder)
        text = (tmp_path / folder / "README.md").read_text()
        return next(line for line in text.splitlines() if line.startswith(row))

    first = card(plain, "plain")
    assert first == f"{row} 0 / 0 |"
    assert card(overlapping, "overlapping") == f"{row} 0 / 1 |"
    assert card(BPE(ranks, "gpt2", special_tokens={"<|endoftext|>": eot}), "plain again") == first
    assert card(overlapping, "overlapping again") == f"{row} 0 / 1 |"
    # The charts too: each folder's are those drawn for its own model, also right after another
    # vocabulary's were drawn.
    other = encoding("custom")
    card(other, "other")
    card(plain, "plain after other")
    charts = {folder.name: {path.name: path.read_bytes() for path in folder.glob("*.png")} for folder in tmp_path.iterdir()}
    assert charts["plain again"] == charts["plain"] == charts["plain after other"]
    assert charts["overlapping again"] == charts["overlapping"]
    if charts["plain"]:  # matplotlib is installed
        assert set(charts["plain"]) == {"token_lengths.png", "audit_findings.png"}
        assert charts["plain"]["token_lengths.png"] != charts["other"]["token_lengths.png"]


def test_remote_code_is_opt_in(tmp_path: Path) -> None:
    tokenizer = tokenizer_for("gpt2")
    tokenizer.save_pretrained(tmp_path, remote_code=True)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["auto_map"] == {"AutoTokenizer": ["tokenization_hf_bpe.BPETokenizer", None]}
    assert (tmp_path / REMOTE_CODE_FILE).read_text().startswith("from hf_bpe import BPETokenizer")
    # A tokenizer loaded from such a folder keeps writing it; remote_code=False drops it.
    loaded = BPETokenizer.from_pretrained(tmp_path)
    loaded.save_pretrained(tmp_path / "kept")
    assert (tmp_path / "kept" / REMOTE_CODE_FILE).is_file()
    loaded.save_pretrained(tmp_path / "dropped", remote_code=False)
    assert "auto_map" not in json.loads((tmp_path / "dropped" / "tokenizer_config.json").read_text())


def test_save_tokenizer_folder_is_from_model_then_save_pretrained(tmp_path: Path) -> None:
    training = {"corpus": "three generated files", "vocab_size": 409}
    hf_bpe.transformers.save_tokenizer_folder(
        encoding("trained"),
        tmp_path,
        eos_token="<|endoftext|>",
        add_eos_token=True,
        card={"training": training},
    )
    loaded = BPETokenizer.from_pretrained(tmp_path)
    assert loaded("abc")["input_ids"] == [*encoding("trained").encode("abc"), loaded.eos_token_id]
    assert "Corpus: three generated files." in (tmp_path / "README.md").read_text()
    loaded.save_pretrained(tmp_path / "again")  # what the card knows is kept in tokenizer_config.json
    assert "Corpus: three generated files." in (tmp_path / "again" / "README.md").read_text()


def test_a_model_split_by_tokenizers_splits_saves_and_loads_as_a_folder(tmp_path: Path) -> None:
    """Split pre-tokenizers (hf_bpe.patterns.Split) go into hf_bpe.json and tokenizer.json as they
    are: BPETokenizer and transformers' TokenizersBackend read the folder back to the same ids."""
    steps = (hf_bpe.patterns.Split(r"\p{N}{1,3}"), hf_bpe.patterns.Split(r"[[:alpha:]]+|\s+|[^[:alpha:]\s]+"))
    model = hf_bpe.train(varied_documents(200, seed=4), 500, pattern=steps, special_tokens=["<|endoftext|>"],
                         show_progress=False, name="split")
    tokenizer = BPETokenizer.from_model(model, eos_token="<|endoftext|>")
    tokenizer.save_pretrained(tmp_path)
    loaded = BPETokenizer.from_pretrained(tmp_path)
    assert loaded.model == model and loaded.model.pattern == steps
    backend = transformers.TokenizersBackend(tokenizer_file=str(tmp_path / "tokenizer.json"))
    texts = [*varied_documents(scaled(300, 50), seed=5), "Bạn 12345 ²x <|endoftext|>"]
    assert loaded(texts)["input_ids"] == tokenizer(texts)["input_ids"] == backend(texts)["input_ids"]
    card = (tmp_path / "README.md").read_text()
    assert "`tokenizers` Split pre-tokenizer (Oniguruma)" in card and "[[:alpha:]]+|\\s+" in card


# -------------------------------------------------------------------------------- bad input


def test_missing_model_file_is_named(tmp_path: Path) -> None:
    tokenizer_for("gpt2").save_pretrained(tmp_path)
    (tmp_path / MODEL_FILE).unlink()
    with pytest.raises(TokenizerFileError, match=f"{MODEL_FILE}.*missing"):
        BPETokenizer.from_pretrained(tmp_path)


def test_corrupt_model_file_is_named(tmp_path: Path) -> None:
    tokenizer_for("gpt2").save_pretrained(tmp_path)
    (tmp_path / MODEL_FILE).write_text('{"format": "hf_bpe", "version": 1, "ranks": [["not base64!", 0]]')
    with pytest.raises(TokenizerFileError) as raised:
        BPETokenizer.from_pretrained(tmp_path)
    assert str(tmp_path / MODEL_FILE) in str(raised.value)


def test_special_token_id_colliding_with_an_ordinary_token_is_refused(tmp_path: Path) -> None:
    model = encoding("gpt2")
    with pytest.raises(
        InvalidVocabularyError, match=r"eos_token=995 is the id of the ordinary token b' world'"
    ):
        BPETokenizer.from_model(model, eos_token=995)
    assert BPETokenizer.from_model(model, eos_token=50256).eos_token == "<|endoftext|>"
    with pytest.raises(InvalidVocabularyError, match="not an id of this model"):
        BPETokenizer.from_model(model, eos_token=60000)
    with pytest.raises(InvalidVocabularyError, match="already the id of the token"):
        BPE(model.mergeable_ranks, "gpt2", {"<|end|>": 995})
    # The same mistake in a saved folder names the file.
    tokenizer_for("gpt2").save_pretrained(tmp_path)
    config_path = tmp_path / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["added_tokens_decoder"]["995"] = {"content": "<|mine|>", "special": True}
    config_path.write_text(json.dumps(config))
    with pytest.raises(
        InvalidVocabularyError, match=r"tokenizer_config.json: added token '<\|mine\|>' has id 995"
    ):
        BPETokenizer.from_pretrained(tmp_path)


def test_bos_policy_needs_a_bos_token() -> None:
    with pytest.raises(ValueError, match="add_bos_token=True needs a bos_token"):
        BPETokenizer.from_model(encoding("gpt2"), add_bos_token=True)


# ------------------------------------------------------------------------------------ training


def test_train_new_from_iterator_keeps_the_setup(tmp_path: Path) -> None:
    if not hasattr(hf_bpe, "train"):
        pytest.skip("hf_bpe.train is not on this branch yet")
    template = "{% for m in messages %}{{ m['content'] }}<|im_end|>{% endfor %}"
    old = BPETokenizer.from_model(
        encoding("trained"), eos_token="<|endoftext|>", add_eos_token=True, chat_template=template
    )
    corpus = varied_documents(300, seed=21)
    new = old.train_new_from_iterator(
        (corpus[start : start + 50] for start in range(0, len(corpus), 50)),
        vocab_size=400,
        new_special_tokens=["<|new|>"],
    )
    assert isinstance(new, BPETokenizer) and len(new) == 400
    assert new.model.pattern == old.model.pattern and new.chat_template == template
    assert new.add_eos_token and new.eos_token == "<|endoftext|>"
    assert {"<|im_start|>", "<|im_end|>", "<|new|>"} <= set(new.all_special_tokens)
    assert new.decode(new("some text")["input_ids"], skip_special_tokens=True) == "some text"
    new.save_pretrained(tmp_path)
    card = (tmp_path / "README.md").read_text()
    assert f"{len(corpus):,} texts" in card and "Trained to a vocabulary of 400" in card
    assert "| start of the training data |" in card


@pytest.mark.filterwarnings("ignore:the corpus allows only")
def test_train_new_from_iterator_reads_names_of_files_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' method takes texts: a list of strings that name files is text there, as in the
    fast tokenizers (hf_bpe.train refuses it; this method keeps transformers' meaning)."""
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("the files' own text, which is not trained on", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    old = BPETokenizer.from_model(encoding("gpt2"), eos_token="<|endoftext|>")
    new = old.train_new_from_iterator(["a.txt", "b.txt"], vocab_size=262)
    # The names' pieces are a . txt b . txt: "xt" and "t"+"xt" (count 2 each) are all there is to learn.
    learned = [token for token in new.model.mergeable_ranks if len(token) > 1]
    assert learned == [b"xt", b"txt"]


def test_a_large_batch_with_added_tokens_gives_their_ids() -> None:
    """A batch of over 65,536 ids becomes lists on the pool's threads; the ids of added tokens lie past
    the model's vocabulary, and so past its shared ints."""
    tokenizer = BPETokenizer.from_model(hf_bpe.get_encoding("cl100k_base"), eos_token="<|end|>")
    tokenizer.add_tokens(["added words", "ça"])
    rng = random.Random(7)
    texts = [" added words ça <|end|>" * 20 + textgen.document(rng, 3_000) for _ in range(scaled(150, minimum=150))]
    assert tokenizer(texts)["input_ids"] == [tokenizer(text)["input_ids"] for text in texts]
