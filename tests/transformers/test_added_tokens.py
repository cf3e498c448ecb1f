"""Added tokens with `tokenizers`' rules (``lstrip``, ``rstrip``, ``single_word``, ``normalized``) in a
:class:`~hf_bpe.transformers.BPETokenizer`, proven against transformers' ``TokenizersBackend`` (what
``AutoTokenizer`` gives on the same folder): RoBERTa-like ``tokenizer.json`` files `tokenizers` builds
(a ByteLevel pre-tokenizer with and without ``add_prefix_space``, ``RobertaProcessing``, ``<s>``,
``</s>``, ``<pad>``, ``<unk>`` and ``<mask>`` with ``lstrip``) and generated flag combinations, made
into a ``BPETokenizer`` with ``from_model`` and with ``hf-bpe convert --to folder``, on generated text
around the tokens (whitespace of every kind before and after them, at either end, tokens side by
side): ``input_ids``, ``attention_mask``, the special-tokens mask, ``offset_mapping`` and ``decode``
equal, also for the folder the tokenizer writes, read by transformers in a process without hf_bpe.
Tokens added later with such flags are matched alike, beside the model's own.

Sizes follow ``HF_BPE_TEST_SCALE``; the full-size run is marked ``slow``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
import transformers
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from suite import FULL_SIZE, scaled
from textgen import WHITESPACE, fragment
from tokenizers import (
    AddedToken,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

import conversion.hf
from hf_bpe import BPE
from hf_bpe.cli import main
from hf_bpe.model import special_token_rules
from hf_bpe.transformers import BPETokenizer

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
"""RoBERTa's special tokens before ``<mask>`` (ids 0 to 3, ``normalized`` as in its file)."""

_AROUND = [*WHITESPACE, "", "", " ", "  ", "\t\n", "a", "é", "中", ".", "_", "x1"]


@pytest.fixture(scope="module")
def trained() -> str:
    """A byte-level BPE `tokenizers` trained on generated text with RoBERTa's first four special tokens."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[AddedToken(token, special=True, normalized=True) for token in SPECIALS])
    rng = random.Random(3)
    tokenizer.train_from_iterator([fragment(rng) for _ in range(300)], trainer=trainer)
    return tokenizer.to_str()


def roberta_like(trained: str, folder: Path, *, prefix_space: bool, mask: AddedToken | None = None,
                 normalizer: normalizers.Normalizer | None = None) -> Path:
    """A RoBERTa-like ``tokenizer.json`` in ``folder``: ``<mask>`` (``lstrip`` unless given) and
    ``RobertaProcessing``, and ``normalizer`` if given; its path."""
    tokenizer = Tokenizer.from_str(trained)
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
    tokenizer.add_special_tokens([mask or AddedToken("<mask>", special=True, lstrip=True, normalized=False)])
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>")), trim_offsets=True,
        add_prefix_space=prefix_space)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def texts_around(rng: random.Random, tokens: list[str], count: int) -> list[str]:
    """Texts with the ``tokens`` among whitespace of every kind, word characters and generated text,
    at either end and side by side."""
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 7)):
            roll = rng.random()
            parts.append(rng.choice(tokens) if roll < 0.4 else rng.choice(_AROUND) if roll < 0.85
                         else fragment(rng)[:15])
        out.append("".join(parts))
    return out


def ours_of(path: Path) -> BPETokenizer:
    """A ``BPETokenizer`` of a ``tokenizer.json``, with its post-processor's settings and RoBERTa's names."""
    return BPETokenizer.from_model(conversion.hf.load(path), **conversion.hf.special_token_settings(path),
                                   pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")


OPTIONS = {"return_special_tokens_mask": True, "return_offsets_mapping": True, "return_attention_mask": True}
KEYS = ("input_ids", "attention_mask", "special_tokens_mask", "offset_mapping")


def assert_same(ours: Any, theirs: Any, texts: list[str], what: str) -> None:
    """``ours`` and ``theirs`` encode and decode ``texts`` alike: one by one, as a padded batch, pairs."""
    for text in texts:
        got, expected = ours(text, **OPTIONS), theirs(text, **OPTIONS)
        for key in KEYS:
            assert [tuple(item) if key == "offset_mapping" else item for item in got[key]] == \
                [tuple(item) if key == "offset_mapping" else item for item in expected[key]], (what, text, key)
        for skip in (False, True):
            assert ours.decode(got["input_ids"], skip_special_tokens=skip) == \
                theirs.decode(expected["input_ids"], skip_special_tokens=skip), (what, text, skip)
    got, expected = ours(texts, padding=True), theirs(texts, padding=True)
    assert got["input_ids"] == expected["input_ids"] and got["attention_mask"] == expected["attention_mask"], what
    arrays = ours(texts, padding=True, return_tensors="np")  # built from the core's flat buffer
    assert arrays["input_ids"].tolist() == expected["input_ids"], what
    pairs = (texts[::2], texts[1::2][: len(texts[::2])] + [""] * (len(texts[::2]) - len(texts[1::2])))
    got, expected = ours(*pairs, **OPTIONS), theirs(*pairs, **OPTIONS)
    for key in KEYS:
        assert [[tuple(item) if key == "offset_mapping" else item for item in row] for row in got[key]] == \
            [[tuple(item) if key == "offset_mapping" else item for item in row] for row in expected[key]], (what, key)


@pytest.mark.parametrize("size", [pytest.param(scaled(30, 15), id="ci"),
                                  pytest.param(scaled(1500, 100), id="full", marks=FULL_SIZE)])
@pytest.mark.parametrize("prefix_space", [False, True])
def test_a_roberta_like_file_encodes_as_tokenizers_backend(trained: str, prefix_space: bool, size: int,
                                                           tmp_path: Path) -> None:
    path = roberta_like(trained, tmp_path / "source", prefix_space=prefix_space)
    backend = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "source"), pad_token="<pad>")
    assert type(backend).__name__ == "TokenizersBackend"
    ours = ours_of(path)
    assert special_token_rules(ours.model)["<mask>"] == {"lstrip"}
    mask = ours.added_tokens_decoder[ours.mask_token_id]
    assert (mask.lstrip, mask.rstrip, mask.single_word, mask.normalized) == (True, False, False, False)
    texts = texts_around(random.Random(size + prefix_space), ["<mask>", "<mask>", *SPECIALS], size)
    texts += ["<mask>", " <mask>", "\t\n<mask>", "<mask> ", "a <mask>", "a\u3000<mask>b", "<mask><mask>", " <mask> <mask>"]
    assert_same(ours, backend, texts, "from_model")
    assert main(["convert", str(path), "--to", "folder", str(tmp_path / "converted")]) == 0
    converted = BPETokenizer.from_pretrained(tmp_path / "converted", pad_token="<pad>")
    assert_same(converted, backend, texts, "hf-bpe convert --to folder")
    written = transformers.TokenizersBackend(tokenizer_file=str(tmp_path / "converted" / "tokenizer.json"),
                                             pad_token="<pad>")
    assert_same(written, backend, texts, "the written folder in TokenizersBackend")
    assert ours.encode_arrow(pa.array(texts)).to_pylist() == backend(texts)["input_ids"]
    assert ours.convert_tokens_to_ids(ours.tokenize(texts[0])) == backend(texts[0], add_special_tokens=False)["input_ids"]


@st.composite
def _flags(draw: Any) -> list[AddedToken]:
    """The five tokens with generated flags (``<s>`` and ``</s>`` special, as the post-processor needs)."""
    return [AddedToken(content, special=content in ("<s>", "</s>") or draw(st.booleans()),
                       normalized=draw(st.booleans()), lstrip=draw(st.booleans()), rstrip=draw(st.booleans()),
                       single_word=draw(st.booleans()))
            for content in [*SPECIALS, "<mask>"]]


NORMALIZERS = {
    "none": lambda: None, "NFKC": normalizers.NFKC, "Lowercase": normalizers.Lowercase,
    "NFC, Replace": lambda: normalizers.Sequence([normalizers.NFC(), normalizers.Replace(" ", "_")]),
    "NFD, Strip, Lowercase": lambda: normalizers.Sequence([normalizers.NFD(), normalizers.Strip(), normalizers.Lowercase()]),
}
"""Normalizers, by name, that rewrite the text `tokenizers` looks for ``normalized`` tokens in."""


@pytest.mark.parametrize("size", [pytest.param(scaled(8, 4), id="ci"),
                                  pytest.param(scaled(300, 20), id="full", marks=FULL_SIZE)])
def test_generated_flag_combinations_encode_as_tokenizers_backend(trained: str, size: int, tmp_path: Path) -> None:
    @settings(max_examples=size, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(tokens=_flags(), prefix_space=st.booleans(), normalizer=st.sampled_from(sorted(NORMALIZERS)),
           seed=st.integers(0, 2**16))
    def check(tokens: list[AddedToken], prefix_space: bool, normalizer: str, seed: int) -> None:
        document = json.loads(trained)
        document["added_tokens"] = []  # the trainer's four, added again below with the generated flags
        tokenizer = Tokenizer.from_str(json.dumps(document))
        tokenizer.normalizer = NORMALIZERS[normalizer]()
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
        for token in tokens:
            (tokenizer.add_special_tokens if token.special else tokenizer.add_tokens)([token])
        tokenizer.post_processor = processors.RobertaProcessing(
            ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>")), add_prefix_space=prefix_space)
        tokenizer.save(str(tmp_path / "tokenizer.json"))
        backend = transformers.TokenizersBackend(tokenizer_file=str(tmp_path / "tokenizer.json"))
        ours = BPETokenizer.from_model(conversion.hf.load(tmp_path / "tokenizer.json"),
                                       **conversion.hf.special_token_settings(tmp_path / "tokenizer.json"))
        texts = texts_around(random.Random(seed), [*SPECIALS, "<mask>", "<MASK>", "<Ｓ>"], 25)
        for text in texts:
            got, expected = ours(text, **OPTIONS), backend(text, **OPTIONS)
            assert got["input_ids"] == expected["input_ids"], (text, tokens)
            assert got["special_tokens_mask"] == expected["special_tokens_mask"], (text, tokens)
            assert list(map(tuple, got["offset_mapping"])) == list(map(tuple, expected["offset_mapping"])), (text, tokens)
            assert ours.decode(got["input_ids"]) == backend.decode(expected["input_ids"]), (text, tokens)

    check()


PROBE = r"""
import json, sys
sys.modules["hf_bpe"] = None  # import hf_bpe fails: the folder must load without it
from transformers import AutoTokenizer

results = []
for folder, texts in json.load(open(sys.argv[1], encoding="utf-8")):
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoded = tokenizer(texts, return_offsets_mapping=True, return_special_tokens_mask=True)
    results.append({"class": type(tokenizer).__name__, "input_ids": encoded["input_ids"],
                    "offset_mapping": [[list(span) for span in row] for row in encoded["offset_mapping"]],
                    "special_tokens_mask": encoded["special_tokens_mask"],
                    "decoded": [tokenizer.decode(ids) for ids in encoded["input_ids"]],
                    "flags": {token.content: [token.lstrip, token.rstrip, token.single_word, token.normalized]
                              for token in tokenizer.added_tokens_decoder.values()}})
print("RESULT " + json.dumps(results))
"""


def _probed_without_hf_bpe(tmp_path: Path, cases: list[tuple[Any, str, list[str]]]) -> list[dict[str, Any]]:
    """What ``PROBE`` gives, in a process without hf_bpe, for each case's folder and texts."""
    (tmp_path / "cases.json").write_text(json.dumps([[folder, texts] for _, folder, texts in cases]), encoding="utf-8")
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(tmp_path / "cases.json")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, stdin=subprocess.DEVNULL,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    results: list[dict[str, Any]] = json.loads(done.stdout.split("RESULT ", 1)[1])
    return results


def test_the_saved_folder_keeps_the_flags_and_loads_without_hf_bpe(trained: str, tmp_path: Path) -> None:
    """Both files of the folder hold the flags; transformers alone reads them and encodes as we do."""
    cases = []
    for prefix_space in (False, True):
        ours = ours_of(roberta_like(trained, tmp_path / f"source-{prefix_space}", prefix_space=prefix_space))
        folder = tmp_path / f"saved-{prefix_space}"
        ours.save_pretrained(folder)
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        saved = {entry["content"]: entry for entry in config["added_tokens_decoder"].values()}
        assert saved["<mask>"]["lstrip"] and not saved["<mask>"]["rstrip"]
        in_file = {entry["content"]: entry for entry in json.loads((folder / "tokenizer.json").read_text())["added_tokens"]}
        assert in_file["<mask>"]["lstrip"] and in_file["<s>"]["normalized"] and not in_file["<mask>"]["normalized"]
        texts = texts_around(random.Random(prefix_space), ["<mask>", *SPECIALS], scaled(25, 15))
        cases.append((ours, str(folder), texts))
    for (ours, _, texts), result in zip(cases, _probed_without_hf_bpe(tmp_path, cases)):
        assert result["class"] == "TokenizersBackend"
        assert result["flags"]["<mask>"] == [True, False, False, False]
        encoded = ours(texts, return_offsets_mapping=True, return_special_tokens_mask=True)
        assert encoded["input_ids"] == result["input_ids"]
        assert encoded["special_tokens_mask"] == result["special_tokens_mask"]
        assert [[list(span) for span in row] for row in encoded["offset_mapping"]] == result["offset_mapping"]
        assert [ours.decode(ids) for ids in encoded["input_ids"]] == result["decoded"]


def test_flags_given_to_the_model_s_own_special_tokens_are_its_rules(tmp_path: Path) -> None:
    """A model without rules whose special token gets flags (``add_special_tokens({"mask_token":
    AddedToken(..., lstrip=True)})``, as on ``TokenizersBackend``) encodes as the folder it saves does in
    ``TokenizersBackend``."""
    model = BPE({bytes([b]): b for b in range(256)} | {b" a": 256}, "gpt2", special_tokens={"<mask>": 257})
    ours = BPETokenizer.from_model(model, mask_token="<mask>")
    flagged = AddedToken("<mask>", special=True, lstrip=True, rstrip=True, normalized=False)
    assert ours.add_special_tokens({"mask_token": flagged}) == 0
    ours.save_pretrained(tmp_path / "saved")
    backend = transformers.TokenizersBackend(tokenizer_file=str(tmp_path / "saved" / "tokenizer.json"))
    texts = texts_around(random.Random(5), ["<mask>", " a"], scaled(60, 20))
    assert ours(texts, return_offsets_mapping=True)["offset_mapping"] == \
        backend(texts, return_offsets_mapping=True)["offset_mapping"]
    assert ours(texts)["input_ids"] == backend(texts)["input_ids"]
    assert ours("b  <mask>  a")["input_ids"] == [98, 257, 97]


LATER = [AddedToken("<new>"), AddedToken("<x>", lstrip=True), AddedToken("<y>", rstrip=True, single_word=True, special=True),
         AddedToken("<z>", lstrip=True, rstrip=True, normalized=False), AddedToken("x<", single_word=True, normalized=False),
         AddedToken("<new>a", normalized=True)]
"""Tokens added after loading, beside the model's own with rules: every flag, overlapping one another."""

RESPELLED = [AddedToken("<Up>", special=True, normalized=True), AddedToken("ﬁ<", lstrip=True, normalized=True),
             AddedToken("<NEW>A", rstrip=True, normalized=False)]
"""Tokens that a normalizer (NFKC, Lowercase) respells, added later too: `tokenizers` looks for the
normalized ones as normalized (``<up>``, ``fi<``: overlapping ``<new>a``, ``x<``), and decodes them so."""


@pytest.mark.parametrize("size", [pytest.param(scaled(40, 20), id="ci"),
                                  pytest.param(scaled(1000, 100), id="full", marks=FULL_SIZE)])
def test_tokens_added_later_with_rules_encode_as_tokenizers_backend_on_the_saved_folder(
    trained: str, size: int, tmp_path: Path
) -> None:
    """Tokens added with ``lstrip``, ``rstrip``, ``single_word`` and ``normalized`` to a model whose own
    special token has rules (RoBERTa's ``<mask>``), to one without special tokens, and to one whose
    normalizer rewrites text (NFKC, Lowercase; tokens it respells too) are matched as `tokenizers`
    matches them: ``TokenizersBackend`` on the saved folder, in this process and in one
    without hf_bpe, gives the same ids, masks, offsets and decoded texts."""
    roberta = ours_of(roberta_like(trained, tmp_path / "source", prefix_space=True))
    plain = BPETokenizer.from_model(BPE({bytes([b]): b for b in range(256)} | {b"<n": 256}, "gpt2"), pad_token="<pad>")
    normalizing = ours_of(roberta_like(trained, tmp_path / "normalizing", prefix_space=True,
                                       normalizer=normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])))
    cases = []
    for name, ours in (("roberta", roberta), ("plain", plain), ("normalizing", normalizing)):
        ours.add_tokens(LATER + RESPELLED if name == "normalizing" else LATER)
        folder = tmp_path / name
        ours.save_pretrained(folder)
        saved = {entry["content"]: entry for entry in
                 json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]}
        assert saved["<z>"]["lstrip"] and saved["<z>"]["rstrip"] and saved["<y>"]["single_word"]
        backend = transformers.TokenizersBackend.from_pretrained(str(folder))
        texts = texts_around(random.Random(size), [token.content for token in LATER + RESPELLED]
                             + ["<mask>", "<s>", "<UP>", "FI<", "<NEW>a", "<Ｎew>A"], size)
        assert_same(ours, backend, texts, name)
        assert ours.encode_arrow(pa.array(texts)).to_pylist() == backend(texts)["input_ids"]
        assert [ours.convert_tokens_to_ids(ours.tokenize(text)) for text in texts] == \
            [backend(text, add_special_tokens=False)["input_ids"] for text in texts]
        cases.append((ours, str(folder), texts))
    for (ours, _, texts), result in zip(cases, _probed_without_hf_bpe(tmp_path, cases)):
        assert result["class"] == "TokenizersBackend"
        encoded = ours(texts, return_offsets_mapping=True, return_special_tokens_mask=True)
        assert encoded["input_ids"] == result["input_ids"]
        assert [[list(span) for span in row] for row in encoded["offset_mapping"]] == result["offset_mapping"]
        assert [ours.decode(ids) for ids in encoded["input_ids"]] == result["decoded"]
