"""``hf_bpe.DecodeStream`` (``hf_bpe._decode_stream``) against `tokenizers`' own
``tokenizers.decoders.DecodeStream``: the same sequence of returned strings (``None`` included) on the
same ids, on an hf_bpe model, on the ``tokenizer.json`` hf_bpe writes for it, and on the backend
``hf_bpe.patch_transformers()`` swaps in. Ids are drawn at random (so they end inside characters and
include the special tokens) or encoded from generated text."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import textgen
from conversion_support import trained_model

import conversion.hf
import hf_bpe
from hf_bpe.errors import DecodeStreamError

tokenizers = pytest.importorskip("tokenizers")
from tokenizers.decoders import DecodeStream as TokenizersDecodeStream


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    """(model, its tokenizers.Tokenizer, the folder holding its tokenizer.json)."""
    model = trained_model()
    folder = tmp_path_factory.mktemp("stream")
    conversion.hf.save(model, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    return model, tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")), folder


def id_runs(model: Any, count: int, seed: int) -> list[list[int]]:
    """Runs of random ids (special tokens often) and the ids of generated text."""
    rng = random.Random(seed)
    specials = list(model.special_tokens.values())
    runs = []
    for _ in range(count):
        if rng.random() < 0.5:
            runs.append([rng.choice(specials) if rng.random() < 0.1 else rng.randrange(model.n_vocab)
                         for _ in range(rng.randint(0, 25))])
        else:
            text = textgen.fragment(rng) + rng.choice(["", "<|endoftext|>"]) + textgen.fragment(rng)
            runs.append(model.encode(text, allowed_special="all"))
    return runs


def stepped(stream: Any, tokenizer: Any, ids: list[int], groups: random.Random) -> list[str | None]:
    """What ``stream`` returns for ``ids``, fed one by one or in small lists (``groups`` decides)."""
    out = []
    index = 0
    while index < len(ids):
        size = groups.choice([1, 1, 1, 2, 3])
        chunk = ids[index : index + size]
        out.append(stream.step(tokenizer, chunk[0] if size == 1 else chunk))
        index += size
    return out


@pytest.mark.parametrize("skip_special_tokens", [False, True])
def test_same_strings_as_tokenizers_decode_stream(files: tuple[Any, Any, Path], skip_special_tokens: bool) -> None:
    model, tokenizer, _ = files
    rng = random.Random(4)
    returned: list[str | None] = []
    for ids in id_runs(model, 250, seed=int(skip_special_tokens)):
        prompt = ids[: rng.choice([0, 0, 1, 3])]
        seed = rng.random()
        expected = stepped(TokenizersDecodeStream(prompt, skip_special_tokens), tokenizer, ids[len(prompt):],
                           random.Random(seed))
        for target in (model, tokenizer):
            got = stepped(hf_bpe.DecodeStream(prompt, skip_special_tokens), target, ids[len(prompt):],
                          random.Random(seed))
            assert got == expected, (ids, prompt, type(target).__name__)
        returned += expected
    # the runs hold steps that end inside a character (None) and that add no text
    assert None in returned and "" not in returned and any("\ufffd" in text for text in returned if text)


def test_on_the_patched_backend_and_in_place_of_tokenizers_own(files: tuple[Any, Any, Path]) -> None:
    """While patched, ``tokenizers.decoders.DecodeStream`` is hf_bpe's, and steps on the swapped backend
    (as vLLM's detokenizer does with ``tokenizer._tokenizer``) decode on hf_bpe."""
    transformers = pytest.importorskip("transformers")
    model, tokenizer, folder = files
    hf_bpe.patch_transformers()
    try:
        patched = transformers.AutoTokenizer.from_pretrained(folder)
        backend = patched._tokenizer
        assert tokenizers.decoders.DecodeStream is hf_bpe.DecodeStream
        answered = backend.answered
        for ids in id_runs(model, 50, seed=7):
            reference = TokenizersDecodeStream(skip_special_tokens=True)
            expected = [reference.step(tokenizer, token) for token in ids]
            on_backend, on_tokenizer = tokenizers.decoders.DecodeStream(skip_special_tokens=True), \
                hf_bpe.DecodeStream(skip_special_tokens=True)
            assert [on_backend.step(backend, token) for token in ids] == expected
            assert [on_tokenizer.step(patched, token) for token in ids] == expected
        assert backend.answered > answered
    finally:
        hf_bpe.unpatch_transformers()


def test_a_decoder_that_rewrites_earlier_text_raises() -> None:
    """`tokenizers` fails where the decode of more ids no longer starts with the text returned."""
    texts = {(1,): "a", (1, 2): "b!"}

    class Rewriting:
        def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
            return texts.get(tuple(ids), "")

    stream = hf_bpe.DecodeStream()
    assert stream.step(Rewriting(), 1) == "a"
    with pytest.raises(DecodeStreamError, match="invalid prefix .* at id 2"):
        stream.step(Rewriting(), 2)


def test_bad_ids_and_tokenizers_are_named() -> None:
    model = hf_bpe.get_encoding("gpt2")
    with pytest.raises(TypeError, match="an id .* got str"):
        hf_bpe.DecodeStream().step(model, "5")
    with pytest.raises(OverflowError, match="token id -1 is out of range"):
        hf_bpe.DecodeStream().step(model, [-1])
    with pytest.raises(TypeError, match="takes an hf_bpe.BPE, a transformers tokenizer or a tokenizers.Tokenizer"):
        hf_bpe.DecodeStream().step(object(), 5)
