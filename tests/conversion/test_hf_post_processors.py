"""The post-processor of a byte-level ``tokenizer.json``, read by
:func:`conversion.hf.special_token_settings` into ``BPETokenizer``'s BOS/EOS settings and proven
against ``tokenizers.Tokenizer``: generated post-processors (templates of every BOS/EOS shape and
pair form, ``ByteLevel`` with and without ``trim_offsets``, ``RobertaProcessing``,
``BertProcessing``, Sequences of them), single texts and pairs: ``input_ids``, ``token_type_ids``
and the special-tokens mask equal, or the file refused naming the post-processor.

Sizes follow ``HF_BPE_TEST_SCALE``; the full-size run is marked ``slow``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from suite import scaled
from textgen import fragment
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

import conversion.hf
from hf_bpe.errors import TokenizerFileError
from hf_bpe.transformers import BPETokenizer


@pytest.fixture(scope="module")
def trained() -> Tokenizer:
    """A byte-level tokenizer `tokenizers` trained on generated text, with ``<s>`` and ``</s>``."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    rng = random.Random(1)
    tokenizer.train_from_iterator([fragment(rng) for _ in range(300)], trainer=trainer)
    tokenizer.add_special_tokens([AddedToken("<s>", special=True, normalized=False),
                                  AddedToken("</s>", special=True, normalized=False)])
    return tokenizer


def _template(bos: str | None, eos: str | None, pair_form: str, ids: dict[str, int]) -> Any:
    first = f"{bos}:0 " if bos else ""
    last = f" {eos}:0" if eos else ""
    single = f"{first}$A:0{last}"
    second = {"transformers": f"{first.replace(':0', ':1')}$B:1{last.replace(':0', ':1')}",
              "type 0": f"{first}$B:0{last}", "bare": "$B:1"}[pair_form]
    tokens = [(token, ids[token]) for token in dict.fromkeys(token for token in (bos, eos) if token)]
    return processors.TemplateProcessing(single=single, pair=f"{single} {second}", special_tokens=tokens)


@st.composite
def _post_processor(draw: Any, ids: dict[str, int]) -> tuple[Any, bool]:
    """A post-processor, and whether BPETokenizer reproduces it."""
    def step() -> tuple[Any, bool]:
        kind = draw(st.sampled_from(["template", "template", "byte_level", "roberta", "bert"]))
        if kind == "template":
            bos, eos = draw(st.sampled_from([None, "<s>"])), draw(st.sampled_from([None, "</s>"]))
            form = draw(st.sampled_from(["transformers", "transformers", "type 0", "bare"]))
            bare = form == "bare" and bos is None and eos is None  # "$A:0 $B:1" either way
            return _template(bos, eos, form, ids), form == "transformers" or bare
        if kind == "byte_level":
            trim = draw(st.booleans())
            return processors.ByteLevel(trim_offsets=trim), not trim
        if kind == "roberta":
            return processors.RobertaProcessing(("</s>", ids["</s>"]), ("<s>", ids["<s>"])), False
        return processors.BertProcessing(("</s>", ids["</s>"]), ("<s>", ids["<s>"])), False

    count = draw(st.integers(0, 2))
    if count == 0:
        return None, True
    steps = [step() for _ in range(count)]
    templates = sum(isinstance(processor, processors.TemplateProcessing) for processor, _ in steps)
    reproduced = all(ok for _, ok in steps) and templates <= 1
    if count == 1 and draw(st.booleans()):
        return steps[0][0], reproduced
    return processors.Sequence([processor for processor, _ in steps]), reproduced


def _pairs(rng: random.Random, count: int) -> list[tuple[str, str | None]]:
    return [(fragment(rng)[:40], fragment(rng)[:40] if rng.random() < 0.5 else None) for _ in range(count)]


@pytest.mark.parametrize("size", [pytest.param(scaled(25, 5), id="ci"),
                                  pytest.param(scaled(250, 20), id="full", marks=pytest.mark.slow)])
def test_generated_post_processors_give_tokenizers_ids_and_type_ids_or_are_refused(
        trained: Tokenizer, size: int, tmp_path: Path) -> None:
    ids = {token: trained.token_to_id(token) for token in ("<s>", "</s>")}

    @settings(max_examples=size, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(chosen=_post_processor(ids), seed=st.integers(0, 2**16))
    def check(chosen: tuple[Any, bool], seed: int) -> None:
        processor, reproduced = chosen
        tokenizer = Tokenizer.from_str(trained.to_str())
        tokenizer.post_processor = processor
        path = tmp_path / "tokenizer.json"
        tokenizer.save(str(path))
        if not reproduced:
            with pytest.raises(TokenizerFileError, match="post-processor"):
                conversion.hf.special_token_settings(path)
            return
        ours = BPETokenizer.from_model(conversion.hf.load(path), **conversion.hf.special_token_settings(path))
        for text, pair in _pairs(random.Random(seed), 20):
            encoding = tokenizer.encode(text, pair)
            got = ours(text, pair, return_token_type_ids=True, return_special_tokens_mask=True)
            assert got["input_ids"] == encoding.ids, (text, pair, json.loads(tokenizer.to_str())["post_processor"])
            assert got["token_type_ids"] == encoding.type_ids, (text, pair)
            assert got["special_tokens_mask"] == encoding.special_tokens_mask, (text, pair)

    check()


def test_llama3_s_post_processor_reads_as_add_bos(trained: Tokenizer, tmp_path: Path) -> None:
    tokenizer = Tokenizer.from_str(trained.to_str())
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                      special_tokens=[("<s>", tokenizer.token_to_id("<s>"))])])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    assert conversion.hf.special_token_settings(tmp_path / "tokenizer.json") == {
        "bos_token": "<s>", "eos_token": None, "add_bos_token": True, "add_eos_token": False}


@pytest.mark.parametrize(("processor", "name"), [
    (processors.ByteLevel(trim_offsets=True), "ByteLevel with trim_offsets"),
    (processors.RobertaProcessing(("</s>", 1), ("<s>", 0)), "'RobertaProcessing'"),
    (processors.BertProcessing(("</s>", 1), ("<s>", 0)), "'BertProcessing'"),
])
def test_other_post_processors_are_refused_by_name(trained: Tokenizer, processor: Any, name: str,
                                                   tmp_path: Path) -> None:
    tokenizer = Tokenizer.from_str(trained.to_str())
    tokenizer.post_processor = processor
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(TokenizerFileError, match=f"the post-processor {name} is not supported"):
        conversion.hf.special_token_settings(tmp_path / "tokenizer.json")
