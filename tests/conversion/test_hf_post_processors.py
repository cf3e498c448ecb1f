"""The post-processor of a byte-level ``tokenizer.json``, read by
:func:`conversion.hf.special_token_settings` into ``BPETokenizer``'s settings and proven against
``tokenizers.Tokenizer`` and transformers' ``TokenizersBackend``: generated post-processors (templates
of every BOS/EOS shape and pair form, ``ByteLevel`` with and without ``trim_offsets`` and its
``add_prefix_space``, ``RobertaProcessing`` with its two flags, ``BertProcessing``, Sequences of them),
behind a ``ByteLevel`` pre-tokenizer with and without ``add_prefix_space``, on single texts and pairs
with whitespace of every kind at either end, empty texts, texts of spaces only, added tokens inside
and characters of every code point class: ``input_ids``, ``token_type_ids``, the special-tokens mask
and ``offset_mapping`` equal, or the file refused naming the post-processor.

Sizes follow ``HF_BPE_TEST_SCALE``; the full-size run is marked ``slow``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import transformers
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from suite import FULL_SIZE, scaled
from textgen import WHITESPACE, fragment
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

import conversion.hf
from conversion import _unicode_probe
from hf_bpe.errors import TokenizerFileError
from hf_bpe.transformers import BPETokenizer

ADDED = ["<s>", "</s>", "<mask>", " x\u3000", "\u0120\u4e2d"]
"""Added tokens (all ``normalized=False``, no stripping): the special ones, and two whose text has
whitespace or the byte-level space ``Ġ`` at an edge (trimming looks at a token's text)."""

_EDGES = [*WHITESPACE, "", "", " ", "  ", "\u0120", "<s>", " <mask> "]
_CHARS = _unicode_probe.run_ends()


@pytest.fixture(scope="module")
def trained() -> Tokenizer:
    """A byte-level tokenizer `tokenizers` trained on generated text, with the :data:`ADDED` tokens."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    rng = random.Random(1)
    tokenizer.train_from_iterator([fragment(rng) for _ in range(300)], trainer=trainer)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in ADDED[:3]])
    tokenizer.add_tokens([AddedToken(token, special=False, normalized=False) for token in ADDED[3:]])
    return tokenizer


def texts(rng: random.Random, count: int) -> list[str]:
    """Texts with whitespace of every kind (or nothing, an added token) at either end, around
    fragments of generated text, characters of every code point class and added tokens; empty texts
    and texts of spaces only among them."""
    out = ["", " ", "   ", "\t", "\n "]
    while len(out) < count:
        middle = []
        for _ in range(rng.randint(0, 4)):
            roll = rng.random()
            middle.append(fragment(rng)[:20] if roll < 0.4 else rng.choice(ADDED) if roll < 0.6
                          else rng.choice(_CHARS) if roll < 0.8 else rng.choice(WHITESPACE))
        out.append(rng.choice(_EDGES) + "".join(middle) + rng.choice(_EDGES))
    return out[:count]


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
    """A post-processor, and whether BPETokenizer reproduces it: at most one step that adds special
    tokens (a template of the forms transformers writes, RobertaProcessing, BertProcessing), at most
    one that trims offsets, and none trimming after RobertaProcessing or BertProcessing."""
    def step() -> tuple[Any, str, bool]:  # the step, what it does, whether it trims
        kind = draw(st.sampled_from(["template", "template", "byte_level", "byte_level", "roberta", "bert"]))
        cls, sep = ("<s>", ids["<s>"]), ("</s>", ids["</s>"])
        if kind == "template":
            bos, eos = draw(st.sampled_from([None, "<s>"])), draw(st.sampled_from([None, "</s>"]))
            form = draw(st.sampled_from(["transformers", "transformers", "type 0", "bare"]))
            bare = form == "bare" and bos is None and eos is None  # "$A:0 $B:1" either way
            return _template(bos, eos, form, ids), "template" if form == "transformers" or bare else "other", False
        if kind == "byte_level":
            trim = draw(st.booleans())
            return processors.ByteLevel(trim_offsets=trim, add_prefix_space=draw(st.booleans())), "none", trim
        if kind == "roberta":
            trim = draw(st.booleans())
            return (processors.RobertaProcessing(sep, cls, trim_offsets=trim, add_prefix_space=draw(st.booleans())),
                    "framing", trim)
        return processors.BertProcessing(sep, cls), "framing", False

    count = draw(st.integers(0, 2))
    if count == 0:
        return None, True
    steps = [step() for _ in range(count)]
    roles = [role for _, role, _ in steps]
    adding = [index for index, role in enumerate(roles) if role in ("template", "framing", "other")]
    trimming = [index for index, (_, _, trim) in enumerate(steps) if trim]
    reproduced = "other" not in roles and len(adding) <= 1 and len(trimming) <= 1 and not any(
        roles[first] == "framing" and later > first for first in adding for later in trimming)
    if count == 1 and draw(st.booleans()):
        return steps[0][0], reproduced
    return processors.Sequence([processor for processor, _, _ in steps]), reproduced


def _pairs(rng: random.Random, count: int) -> list[tuple[str, str | None]]:
    firsts, seconds = texts(rng, count), texts(rng, count)
    return [(first, second if rng.random() < 0.5 else None) for first, second in zip(firsts, seconds)]


def _assert_same(ours: Any, theirs: Tokenizer, text: str, pair: str | None, what: str,
                 add_special_tokens: bool = True) -> None:
    encoding = theirs.encode(text, pair, add_special_tokens=add_special_tokens)
    got = ours(text, pair, return_token_type_ids=True, return_special_tokens_mask=True, return_offsets_mapping=True,
               add_special_tokens=add_special_tokens)
    assert got["input_ids"] == encoding.ids, (text, pair, what)
    assert got["token_type_ids"] == encoding.type_ids, (text, pair, what)
    assert got["special_tokens_mask"] == encoding.special_tokens_mask, (text, pair, what)
    assert [tuple(span) for span in got["offset_mapping"]] == encoding.offsets, (text, pair, what)


@pytest.mark.parametrize("size", [pytest.param(scaled(20, 5), id="ci"),
                                  pytest.param(scaled(250, 20), id="full", marks=FULL_SIZE)])
def test_generated_post_processors_give_tokenizers_encodings_or_are_refused(
        trained: Tokenizer, size: int, tmp_path: Path) -> None:
    ids = {token: trained.token_to_id(token) for token in ("<s>", "</s>")}

    @settings(max_examples=size, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(chosen=_post_processor(ids), prefix_space=st.booleans(), seed=st.integers(0, 2**16))
    def check(chosen: tuple[Any, bool], prefix_space: bool, seed: int) -> None:
        processor, reproduced = chosen
        tokenizer = Tokenizer.from_str(trained.to_str())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
        tokenizer.post_processor = processor
        path = tmp_path / "tokenizer.json"
        tokenizer.save(str(path))
        if not reproduced:
            with pytest.raises(TokenizerFileError, match="post-processor"):
                conversion.hf.special_token_settings(path)
            return
        ours = BPETokenizer.from_model(conversion.hf.load(path), **conversion.hf.special_token_settings(path))
        what = json.dumps(json.loads(tokenizer.to_str())["post_processor"])
        for number, (text, pair) in enumerate(_pairs(random.Random(seed), 20)):
            _assert_same(ours, tokenizer, text, pair, what, add_special_tokens=number % 4 != 3)

    check()


@pytest.mark.parametrize("processor", [
    processors.RobertaProcessing(("</s>", 301), ("<s>", 300), trim_offsets=True, add_prefix_space=True),
    processors.RobertaProcessing(("</s>", 301), ("<s>", 300), trim_offsets=True, add_prefix_space=False),
    processors.BertProcessing(("</s>", 301), ("<s>", 300)),
    processors.Sequence([processors.ByteLevel(trim_offsets=True, add_prefix_space=False),
                         processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                                       special_tokens=[("<s>", 300)])]),
], ids=["roberta", "roberta without prefix space", "bert", "trimming template"])
def test_bpe_tokenizer_equals_tokenizers_backend_on_the_folder_and_saves_the_same(
        trained: Tokenizer, processor: Any, tmp_path: Path) -> None:
    assert [trained.token_to_id(token) for token in ("<s>", "</s>")] == [300, 301]
    tokenizer = Tokenizer.from_str(trained.to_str())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tokenizer.post_processor = processor
    (tmp_path / "file").mkdir()
    path = tmp_path / "file" / "tokenizer.json"
    tokenizer.save(str(path))
    backend = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "file"))
    assert type(backend).__name__ == "TokenizersBackend"
    ours = BPETokenizer.from_model(conversion.hf.load(path), **conversion.hf.special_token_settings(path))
    ours.save_pretrained(tmp_path / "saved")
    reloaded = BPETokenizer.from_pretrained(tmp_path / "saved")
    (tmp_path / "written").mkdir()  # the tokenizer.json the save wrote, read without hf_bpe's settings
    (tmp_path / "written" / "tokenizer.json").write_bytes((tmp_path / "saved" / "tokenizer.json").read_bytes())
    saved_backend = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "written"))
    pairs = _pairs(random.Random(7), 60)
    options = {"return_token_type_ids": True, "return_special_tokens_mask": True, "return_offsets_mapping": True}
    firsts, seconds = [first for first, _ in pairs], [second or "" for _, second in pairs]
    expected = backend(firsts, seconds, **options)
    for candidate in (ours, reloaded, saved_backend):
        got = candidate(firsts, seconds, **options)
        for key in ("input_ids", "token_type_ids", "special_tokens_mask", "offset_mapping"):
            assert [list(map(tuple, row)) if key == "offset_mapping" else row for row in got[key]] == \
                [list(map(tuple, row)) if key == "offset_mapping" else row for row in expected[key]], \
                (type(candidate).__name__, key)
    assert ours(firsts)["input_ids"] == backend(firsts)["input_ids"]  # the batch path of single texts
    truncated = {"truncation": True, "max_length": 6, **options}  # (pairs are cut differently by each backend)
    assert ours(firsts, **truncated)["offset_mapping"] == backend(firsts, **truncated)["offset_mapping"]


def test_llama3_s_post_processor_reads_as_add_bos(trained: Tokenizer, tmp_path: Path) -> None:
    tokenizer = Tokenizer.from_str(trained.to_str())
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                      special_tokens=[("<s>", tokenizer.token_to_id("<s>"))])])
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    assert conversion.hf.special_token_settings(tmp_path / "tokenizer.json") == {
        "bos_token": "<s>", "eos_token": None, "add_bos_token": True, "add_eos_token": False}


def test_roberta_s_post_processor_reads_as_its_settings(trained: Tokenizer, tmp_path: Path) -> None:
    tokenizer = Tokenizer.from_str(trained.to_str())
    cls, sep = ("<s>", tokenizer.token_to_id("<s>")), ("</s>", tokenizer.token_to_id("</s>"))
    tokenizer.post_processor = processors.RobertaProcessing(sep, cls, trim_offsets=True, add_prefix_space=False)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    assert conversion.hf.special_token_settings(tmp_path / "tokenizer.json") == {
        "bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True, "add_eos_token": True,
        "pair_template": "roberta", "trim_offsets": True}


@pytest.mark.parametrize(("processor", "name"), [
    (processors.Sequence([processors.ByteLevel(trim_offsets=True)] * 2), "trims offsets twice"),
    (processors.Sequence([processors.BertProcessing(("</s>", 301), ("<s>", 300)), processors.ByteLevel()]),
     "ByteLevel trims offsets after BertProcessing"),
    (processors.Sequence([processors.BertProcessing(("</s>", 301), ("<s>", 300)),
                          processors.RobertaProcessing(("</s>", 301), ("<s>", 300), trim_offsets=False)]),
     "has two steps that add special tokens"),
    (processors.RobertaProcessing(("</s>", 300), ("<s>", 301)),
     "RobertaProcessing gives cls '<s>' the id 301, but the file gives it the id 300"),
    (processors.TemplateProcessing(single="<s> $A <s>", pair="<s> $A <s> $B:1", special_tokens=[("<s>", 300)]),
     "TemplateProcessing"),
])
def test_other_post_processors_are_refused_by_name(trained: Tokenizer, processor: Any, name: str,
                                                   tmp_path: Path) -> None:
    tokenizer = Tokenizer.from_str(trained.to_str())
    tokenizer.post_processor = processor
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(TokenizerFileError, match=f"the post-processor {name}"):
        conversion.hf.special_token_settings(tmp_path / "tokenizer.json")


def test_bpe_tokenizer_checks_its_post_processing_settings() -> None:
    from hf_bpe import BPE

    model = BPE({bytes([byte]): byte for byte in range(256)}, "gpt2", special_tokens={"<s>": 256, "</s>": 257})
    with pytest.raises(ValueError, match="pair_template='roberta' puts bos_token"):
        BPETokenizer.from_model(model, bos_token="<s>", eos_token="</s>", add_bos_token=True, pair_template="roberta")
    with pytest.raises(ValueError, match="pair_template is 'gpt'"):
        BPETokenizer.from_model(model, pair_template="gpt")
    with pytest.raises(TypeError, match="trim_offsets is 'yes'"):
        BPETokenizer.from_model(model, trim_offsets="yes")
    tokenizer = BPETokenizer.from_model(model, bos_token="<s>", eos_token="</s>", add_bos_token=True,
                                        add_eos_token=True, pair_template="bert")
    with pytest.raises(ValueError, match="always adds eos_token"):
        tokenizer.add_eos_token = False
