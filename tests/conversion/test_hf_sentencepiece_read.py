"""SentencePiece-style BPE tokenizer.json files read by ``conversion.hf.load``, proven against `tokenizers`.

Files are made from SentencePiece ``.model`` files as the converters make them (vocabulary by id,
merges from transformers' ``generate_merges``: every split of every piece) and from what transformers'
own ``LlamaTokenizer`` writes for Mistral's model, under generated configurations: the whitespace
layout (legacy ``Prepend`` + ``Replace`` normalizer, or ``Metaspace`` with each ``prepend_scheme`` and
``split``), byte fallback, ``ignore_merges``, decoders. Each must encode as `tokenizers` on text of
every code point class and decode its ids as `tokenizers` does; the legacy layout also as
``SentencePieceProcessor``. What cannot be exact is refused naming the component.

Files whose normalizer holds ``Precompiled`` (SentencePiece's character map, which `tokenizers`
applies per grapheme cluster) come from ``.model`` files SentencePiece trained with each normalization
rule, converted by transformers' own ``build_tokenizer_from_spm_proto`` (legacy and not) and in the
layouts other converters write (``Precompiled`` with ``Prepend``/``Replace`` in each order, with
``Metaspace``, with ``Strip`` and ``Replace`` of space runs); they are checked on text of every code
point class and on grapheme clusters (combining marks, jamo runs, emoji ZWJ sequences), and written
back for transformers; the converted files also give the offsets `tokenizers` gives.
"""

from __future__ import annotations

import functools
import io
import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conversion_support import assert_same, mistral_file, training_corpus, varied_texts
from suite import FULL_SIZE, scaled
from textgen import cluster_text
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

import conversion.hf
import conversion.sentencepiece
from conversion._hf_pretokenizers import split_probe_texts
from hf_bpe import BPE
from hf_bpe.errors import ConversionError, TokenizerFileError
from hf_bpe.patterns import Normalize

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is an oracle; pip install -e '.[test]'")
pytest.importorskip("google.protobuf", reason="reading .model files needs protobuf; pip install protobuf")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is the oracle; pip install -e '.[test]'")

SPACE = "\u2581"
LAYOUTS = ["legacy", "legacy+split"] + [f"metaspace-{scheme}{'-split' if split else ''}"
                                        for scheme in ("always", "first", "never") for split in (False, True)]


def trained_model(folder: Path, byte_fallback: bool, vocab_size: int = 1_500) -> Path:
    options = {"model_type": "bpe", "vocab_size": vocab_size, "character_coverage": 0.98, "hard_vocab_limit": False,
               "minloglevel": 2, "num_threads": 1, "normalization_rule_name": "identity",
               "remove_extra_whitespaces": False, "byte_fallback": byte_fallback}
    stream = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(training_corpus()), model_writer=stream, **options)
    path = folder / f"trained-{vocab_size}-{'bytes' if byte_fallback else 'unk'}.model"
    path.write_bytes(stream.getvalue())
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, Path]:
    folder = tmp_path_factory.mktemp("trained")
    return {byte_fallback: trained_model(folder, byte_fallback) for byte_fallback in (True, False)}


def document_for(model_file: Path, layout: str, *, byte_fallback: bool | None = None, ignore_merges: bool = False,
                 unk_token: bool = True, extra: Sequence[str] = ()) -> dict[str, Any]:
    """The tokenizer.json a converter writes for ``model_file`` in ``layout``; ``extra`` special
    tokens come after the pieces (as phi-3's chat tokens)."""
    from transformers.tokenization_utils_base import generate_merges

    proto = conversion.sentencepiece.read_proto(model_file)
    vocab = {piece.piece: index for index, piece in enumerate(proto.pieces)}
    if byte_fallback is None:
        byte_fallback = proto.trainer_spec.byte_fallback
    unk = proto.pieces[proto.trainer_spec.unk_id].piece
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=generate_merges(vocab), unk_token=unk if unk_token else None,
                                     fuse_unk=True, byte_fallback=byte_fallback, ignore_merges=ignore_merges))
    tokenizer.add_special_tokens([AddedToken(piece.piece, special=True, normalized=False)
                                  for piece in proto.pieces if piece.type in (2, 3)])
    tokenizer.add_special_tokens([AddedToken(text, special=True, normalized=False) for text in extra])
    steps: list[Any] = [decoders.Replace(SPACE, " ")]
    if byte_fallback:
        steps.append(decoders.ByteFallback())
    steps.append(decoders.Fuse())
    if layout.startswith("legacy"):
        tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
        if layout.endswith("split"):
            tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(SPACE, prepend_scheme="always", split=True)
        strip = True
    else:
        scheme = layout.split("-")[1]
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(SPACE, prepend_scheme=scheme, split=layout.endswith("split"))
        strip = scheme != "never"
    if strip:
        steps.append(decoders.Strip(" ", 1, 0))
    tokenizer.decoder = decoders.Sequence(steps)
    return json.loads(tokenizer.to_str())


def write(document: dict[str, Any], folder: Path, name: str = "tokenizer.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def texts_of_every_class(count: int, seed: int = 0) -> list[str]:
    """Every code point class (the split probe texts), varied text, and texts around added tokens."""
    rng = random.Random(seed)
    texts = list(split_probe_texts()) + list(varied_texts(count, seed))
    texts += [rng.choice(["", " ", "a", "  b"]) + token + rng.choice(["", " ", "x", "\u2581y"])
              for token in ("<s>", "</s>", "<unk>") for _ in range(10)]
    return texts


def assert_same_as_tokenizers(what: str, model: BPE, path: Path, texts: Sequence[str]) -> list[list[int]]:
    theirs = tokenizers.Tokenizer.from_file(os.fspath(path))
    ids = model.encode_batch(texts, allowed_special="all")
    assert_same(f"{what}: ids", texts, ids, [encoding.ids for encoding in theirs.encode_batch(texts, add_special_tokens=False)])
    assert_same(f"{what}: decoded", texts, [model.decode(one) for one in ids],
                theirs.decode_batch(ids, skip_special_tokens=True))
    return ids


# ------------------------------------------------------------------------------------------ generated


@pytest.mark.parametrize("byte_fallback", [True, False], ids=["byte-fallback", "unk"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_generated_configurations_encode_and_decode_as_tokenizers(layout: str, byte_fallback: bool,
                                                                 trained: dict[bool, Path], tmp_path: Path) -> None:
    extra = ["<|assistant|>", "<|end|>"] if byte_fallback else []
    document = document_for(trained[byte_fallback], layout, extra=extra)
    path = write(document, tmp_path)
    model = conversion.hf.load(path)
    assert model.kind == "sentencepiece"
    texts = texts_of_every_class(scaled(600, 100), seed=len(layout))
    texts += [f"{text}<|assistant|> {text}<|end|>" for text in texts[-40:]]
    assert_same_as_tokenizers(layout, model, path, texts)


@pytest.mark.parametrize("byte_fallback", [True, False], ids=["byte-fallback", "unk"])
def test_the_legacy_layout_written_as_a_model_file_is_sentencepiece_and_tokenizers(
        byte_fallback: bool, trained: dict[bool, Path], tmp_path: Path) -> None:
    """The scores derived from a merges list, written to a .model, make SentencePiece itself encode as
    `tokenizers` runs the file (also where the converters' merges order ties unlike SentencePiece)."""
    for source in (trained[byte_fallback], mistral_file("tokenizer.model.v1")):
        path = write(document_for(source, "legacy", byte_fallback=None if byte_fallback else False), tmp_path)
        model_file = conversion.sentencepiece.save(conversion.hf.load(path), tmp_path / "derived.model")
        processor = spm.SentencePieceProcessor(model_file=os.fspath(model_file))
        theirs = tokenizers.Tokenizer.from_file(os.fspath(path))
        theirs.encode_special_tokens = True
        texts = texts_of_every_class(scaled(500, 100), seed=15)
        assert_same(f"{source.name} via .model", texts, processor.encode(texts),
                    [encoding.ids for encoding in theirs.encode_batch(texts, add_special_tokens=False)])


@pytest.mark.parametrize("byte_fallback", [True, False], ids=["byte-fallback", "unk"])
def test_the_legacy_layout_is_sentencepiece_itself(byte_fallback: bool, trained: dict[bool, Path],
                                                   tmp_path: Path) -> None:
    path = write(document_for(trained[byte_fallback], "legacy"), tmp_path)
    model = conversion.hf.load(path)
    processor = spm.SentencePieceProcessor(model_file=os.fspath(trained[byte_fallback]))
    texts = texts_of_every_class(scaled(600, 100), seed=2)
    assert_same("legacy layout vs SentencePieceProcessor", texts, model.encode_ordinary_batch(texts),
                processor.encode(texts))


@pytest.mark.parametrize("layout", ["legacy", "metaspace-first-split", "metaspace-never"])
def test_ignore_merges_loads_where_it_changes_nothing(layout: str, trained: dict[bool, Path], tmp_path: Path) -> None:
    path = write(document_for(trained[True], layout, ignore_merges=True), tmp_path)
    try:
        model = conversion.hf.load(path)
    except TokenizerFileError as error:
        assert "ignore_merges is on and the pieces" in str(error)
        # Words without a leading ▁ (after a special token, or all of them) can be byte pieces.
        assert layout in ("metaspace-first-split", "metaspace-never")
        return
    assert_same_as_tokenizers(layout, model, path, texts_of_every_class(scaled(300, 50), seed=7))


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "count"), [
    # seed 0: 3,000 pieces, no byte fallback, legacy; seed 3: 6,000 pieces, byte fallback, Metaspace
    *(pytest.param(seed, scaled(500, 100), id=f"ci-{seed}") for seed in (0, 3)),
    *(pytest.param(seed, scaled(5_000, 500), id=f"full-{seed}", marks=FULL_SIZE) for seed in range(6)),
])
def test_random_configurations_of_larger_models(seed: int, count: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    source = trained_model(tmp_path, rng.random() < 0.5, vocab_size=rng.choice([1_500, 3_000, 6_000]))
    layout = rng.choice(LAYOUTS)
    path = write(document_for(source, layout, ignore_merges=False), tmp_path)
    model = conversion.hf.load(path)
    assert_same_as_tokenizers(f"{layout} seed {seed}", model, path, texts_of_every_class(count, seed=seed))


# ----------------------------------------------------------------------------------------- real files


@pytest.fixture(scope="module")
def mistral_v1_llama_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What transformers' LlamaTokenizer writes for Mistral's v1 .model (Metaspace 'first', no unk_token)."""
    from transformers import LlamaTokenizer

    source = tmp_path_factory.mktemp("mistral-v1")
    (source / "tokenizer.model").write_bytes(mistral_file("tokenizer.model.v1").read_bytes())
    out = tmp_path_factory.mktemp("mistral-v1-llama")
    LlamaTokenizer.from_pretrained(os.fspath(source)).save_pretrained(os.fspath(out))
    return out


def test_the_file_llama_tokenizer_writes_for_mistral_loads_exactly(mistral_v1_llama_folder: Path) -> None:
    path = mistral_v1_llama_folder / "tokenizer.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["pre_tokenizer"]["prepend_scheme"] == "first"
    model = conversion.hf.load(path)
    texts = texts_of_every_class(scaled(2_000, 200), seed=11)
    assert_same_as_tokenizers("mistral v1 via LlamaTokenizer", model, path, texts)
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(os.fspath(mistral_v1_llama_folder))
    sample = texts[:: max(1, len(texts) // 500)]
    assert_same("AutoTokenizer", sample, [auto.encode(text, add_special_tokens=False) for text in sample],
                model.encode_batch(sample, allowed_special="all"))


def test_mistral_v1_in_the_legacy_layout_loads_exactly(tmp_path: Path) -> None:
    """The converters' merges order runs of ▁ (one score in the .model) by id, not as SentencePiece
    joins them, so this file is `tokenizers`' own reading, not SentencePiece's."""
    path = write(document_for(mistral_file("tokenizer.model.v1"), "legacy"), tmp_path)
    model = conversion.hf.load(path)
    assert_same_as_tokenizers("mistral v1 legacy", model, path, texts_of_every_class(scaled(2_000, 200), seed=12))
    assert model == conversion.hf.load(path)  # deterministic scores


def test_the_file_hf_bpe_writes_for_mistral_loads_back_as_sentencepiece(tmp_path: Path) -> None:
    source = mistral_file("tokenizer.model.v1")
    path = conversion.hf.save(conversion.sentencepiece.load(source), tmp_path / "tokenizer.json")
    model = conversion.hf.load(path)
    texts = texts_of_every_class(scaled(2_000, 200), seed=14)
    assert_same_as_tokenizers("mistral v1 written by hf_bpe", model, path, texts)
    processor = spm.SentencePieceProcessor(model_file=os.fspath(source))
    assert_same("mistral v1 written by hf_bpe vs SentencePieceProcessor", texts, model.encode_ordinary_batch(texts),
                processor.encode(texts))


def test_a_metaspace_model_is_written_back_and_refused_as_a_model_file(mistral_v1_llama_folder: Path,
                                                                      tmp_path: Path) -> None:
    model = conversion.hf.load(mistral_v1_llama_folder / "tokenizer.json")
    written = conversion.hf.save(model, tmp_path / "tokenizer.json")
    texts = texts_of_every_class(scaled(300, 50), seed=13)
    ids = assert_same_as_tokenizers("written back", model, written, texts)
    assert conversion.hf.load(written).encode_batch(texts, allowed_special="all") == ids
    with pytest.raises(ConversionError, match="Metaspace pre-tokenizer .* cannot say"):
        conversion.sentencepiece.save(model, tmp_path / "x.model")
    assert BPE.load(model.save(tmp_path / "model.json")) == model


# -------------------------------------------------------------------------------------------- refused


REFUSED = [
    (lambda doc: doc["model"].update(dropout=0.1), "model.dropout = 0.1 is not supported"),
    (lambda doc: doc["model"].update(fuse_unk=False, byte_fallback=False), "fuse_unk is false"),
    (lambda doc: doc["model"].update(merges=[m for m in doc["model"]["merges"] if m != ["▁", "t"]]),
     "the merges never join the pair that forms"),
    (lambda doc: doc["added_tokens"][1].update(special=False), "is not special"),
    (lambda doc: doc["added_tokens"][1].update(rstrip=True), "has rstrip"),
    (lambda doc: doc["added_tokens"][1].update(normalized=True), "normalized = true"),
    (lambda doc: doc["normalizer"]["normalizers"].append({"type": "StripAccents"}),
     "the normalizer 'StripAccents' is not supported"),
    (lambda doc: doc.update(pre_tokenizer={"type": "Whitespace"}), "the pre_tokenizer 'Whitespace' is not supported"),
    (lambda doc: doc.update(decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                     "use_regex": True}), "the decoder step 'ByteLevel' is not supported"),
    (lambda doc: doc["decoder"]["decoders"].pop(), "cannot decode as the decoder"),
    (lambda doc: doc["model"]["vocab"].update({"<byte A>": doc["model"]["vocab"].pop("<0x41>")}),
     "byte pieces <0x41> are missing"),
]


@pytest.mark.parametrize(("change", "problem"), REFUSED, ids=[problem[:30] for _, problem in REFUSED])
def test_what_cannot_be_exact_is_refused_naming_the_component(change: Any, problem: str, trained: dict[bool, Path],
                                                              tmp_path: Path) -> None:
    document = document_for(trained[True], "legacy")
    change(document)
    with pytest.raises(TokenizerFileError, match=problem):
        conversion.hf.load(write(document, tmp_path))


# -------------------------------------------------------------------------------------- Precompiled


RULES = ["nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf"]
CONVERTER_LAYOUTS = ["converter-legacy", "converter"]
"""What transformers' ``build_tokenizer_from_spm_proto`` writes for a ``.model`` (its ``legacy``)."""
PRECOMPILED_LAYOUTS = ["precompiled+legacy", "legacy+precompiled", "precompiled-between", "precompiled+metaspace-always",
                       "precompiled+metaspace-first-split", "precompiled+metaspace-never-split", "spm-converter"]
"""``Precompiled`` before, after and between ``Replace`` and ``Prepend``; alone before ``Metaspace``;
and the layout of transformers' ``SpmConverter`` (``Strip`` and ``Replace`` of space runs)."""


@functools.cache
def normalized_model(rule: str, byte_fallback: bool) -> bytes:
    """A BPE ``.model`` SentencePiece trains with ``rule`` (spaces collapsed, its default, for the
    ``nmt`` rules; kept for the others)."""
    stream = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(training_corpus()), model_writer=stream, model_type="bpe", vocab_size=1_500,
        character_coverage=0.98, hard_vocab_limit=False, minloglevel=2, num_threads=1,
        normalization_rule_name=rule, byte_fallback=byte_fallback, remove_extra_whitespaces=rule.startswith("nmt"))
    return stream.getvalue()


def precompiled_document(rule: str, byte_fallback: bool, layout: str, folder: Path) -> dict[str, Any]:
    """The tokenizer.json of a trained ``.model`` in ``layout``, its control pieces as special tokens."""
    from transformers.convert_slow_tokenizer import SpmConverter
    from transformers.tokenization_utils_base import generate_merges

    model_file = folder / f"{rule}-{byte_fallback}.model"
    model_file.write_bytes(normalized_model(rule, byte_fallback))
    proto = conversion.sentencepiece.read_proto(model_file)
    vocab = {piece.piece: index for index, piece in enumerate(proto.pieces)}
    charsmap = normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap)
    if layout in CONVERTER_LAYOUTS:
        tokenizer = SpmConverter.build_tokenizer_from_spm_proto(proto=proto, vocab=vocab,
                                                                legacy=layout == "converter-legacy")
    else:
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=generate_merges(vocab), fuse_unk=True,
                                         unk_token=proto.pieces[proto.trainer_spec.unk_id].piece,
                                         byte_fallback=byte_fallback))
        prepend, escape = normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)
        steps = {"precompiled+legacy": [charsmap, prepend, escape], "legacy+precompiled": [prepend, escape, charsmap],
                 "precompiled-between": [escape, charsmap, prepend],
                 "spm-converter": [charsmap, normalizers.Strip(left=False, right=True),
                                   normalizers.Replace(Regex(" {2,}"), SPACE)]}.get(layout, [charsmap])
        tokenizer.normalizer = normalizers.Sequence(steps)
        decoding = [decoders.Replace(SPACE, " "), *([decoders.ByteFallback()] if byte_fallback else []), decoders.Fuse()]
        if "metaspace" in layout:
            scheme = layout.split("-")[1]
            tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(SPACE, prepend_scheme=scheme, split=layout.endswith("split"))
            decoding += [decoders.Strip(" ", 1, 0)] if scheme != "never" else []
        else:
            decoding.append(decoders.Strip(" ", 1, 0))
        tokenizer.decoder = decoders.Sequence(decoding)
        if layout == "spm-converter":  # as transformers' SpmConverter writes it (no byte fallback there)
            tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(SPACE, prepend_scheme="always")
            tokenizer.decoder = decoders.Metaspace(SPACE, prepend_scheme="always")
    tokenizer.add_special_tokens([AddedToken(piece.piece, special=True, normalized=False)
                                  for piece in proto.pieces if piece.type in (2, 3)])
    return json.loads(tokenizer.to_str())


def cluster_texts(count: int, seed: int) -> list[str]:
    """Texts of every code point class, grapheme clusters where tokenizers' rule and SentencePiece's part
    ways, and both around special tokens."""
    rng = random.Random(seed)
    texts = texts_of_every_class(count, seed) + [cluster_text(rng) for _ in range(count)]
    return texts + [f"{text}</s>{rng.choice(['', ' ', SPACE])}{text[:8]}<s>" for text in texts[-40:]]


def load_precompiled(rule: str, byte_fallback: bool, layout: str, folder: Path) -> tuple[BPE, Path]:
    path = write(precompiled_document(rule, byte_fallback, layout, folder), folder)
    model = conversion.hf.load(path)
    assert model.sentencepiece is not None and model.sentencepiece.tokenizers_normalizer
    return model, path


@pytest.mark.parametrize("size", [pytest.param(scaled(300, 60), id="ci"),
                                  pytest.param(scaled(4_000, 400), id="full", marks=FULL_SIZE)])
@pytest.mark.parametrize("byte_fallback", [True, False], ids=["byte-fallback", "unk"])
@pytest.mark.parametrize("layout", CONVERTER_LAYOUTS)
@pytest.mark.parametrize("rule", RULES)
def test_converted_files_with_precompiled_encode_and_decode_as_tokenizers(rule: str, layout: str, byte_fallback: bool,
                                                                           size: int, tmp_path: Path) -> None:
    model, path = load_precompiled(rule, byte_fallback, layout, tmp_path)
    texts = cluster_texts(size, seed=len(rule + layout))
    assert_same_as_tokenizers(f"{rule} {layout}", model, path, texts)
    theirs = tokenizers.Tokenizer.from_file(os.fspath(path))
    assert_same(f"{rule} {layout}: where each token starts", texts,
                [model.encode_with_offsets(text, allowed_special="all")[1] for text in texts],
                [[start for start, _ in encoding.offsets]
                 for encoding in theirs.encode_batch(texts, add_special_tokens=False)])


@pytest.mark.parametrize(("layout", "byte_fallback"), [
    (layout, byte_fallback) for layout in PRECOMPILED_LAYOUTS for byte_fallback in (True, False)
    if not (layout == "spm-converter" and byte_fallback)  # SpmConverter writes none: its decoder spells byte pieces
])
def test_precompiled_in_every_order_encodes_and_decodes_as_tokenizers(layout: str, byte_fallback: bool,
                                                                      tmp_path: Path) -> None:
    """Under ``nfkc``, which keeps ``▁`` (``nmt_nfkc`` maps it to a space: ``Precompiled`` after ``Replace``
    then leaves spaces that decode otherwise than SentencePiece's decoding, and the file is refused)."""
    model, path = load_precompiled("nfkc", byte_fallback, layout, tmp_path)
    assert_same_as_tokenizers(layout, model, path, cluster_texts(scaled(300, 60), seed=len(layout)))


def test_where_tokenizers_and_sentencepiece_normalize_apart_the_file_is_followed(tmp_path: Path) -> None:
    """A jamo run (tokenizers maps a cluster of 6 bytes or more character by character: no syllable)
    and a mark on a full-width letter: the loaded model gives tokenizers' ids, not SentencePiece's."""
    model, path = load_precompiled("nmt_nfkc", True, "converter-legacy", tmp_path)
    processor = spm.SentencePieceProcessor(model_proto=normalized_model("nmt_nfkc", True))
    texts = ["\u1100\u1161\u11a8 \u1100\u1161\u11a8\u1100", "\uff21\u0308\u0301 x", "e\u0301\u0302\u0303\u0304"]
    theirs = tokenizers.Tokenizer.from_file(os.fspath(path))
    expected = [encoding.ids for encoding in theirs.encode_batch(texts, add_special_tokens=False)]
    assert model.encode_batch(texts) == expected
    assert expected != processor.encode(texts)  # the two rules part ways here


def test_a_precompiled_model_is_written_back_saved_and_refused_as_a_model_file(tmp_path: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    model, _ = load_precompiled("nmt_nfkc", True, "converter-legacy", tmp_path)
    written = conversion.hf.save(model, tmp_path / "written" / "tokenizer.json")
    normalizer = json.loads(written.read_text(encoding="utf-8"))["normalizer"]
    assert normalizer["normalizers"][0]["type"] == "Precompiled"
    texts = cluster_texts(scaled(300, 60), seed=21)
    ids = assert_same_as_tokenizers("written back", model, written, texts)
    fast = PreTrainedTokenizerFast(tokenizer_file=os.fspath(written))
    assert_same("PreTrainedTokenizerFast", texts, [fast.encode(text, add_special_tokens=False) for text in texts], ids)
    assert conversion.hf.load(written).encode_batch(texts, allowed_special="all") == ids
    saved = model.save(tmp_path / "model.json")
    assert json.loads(saved.read_text(encoding="utf-8"))["version"] == 4  # older readers refuse it
    assert BPE.load(saved) == model
    with pytest.raises(ConversionError, match=r"normalizes with tokenizers' normalizer \(precompiled, replace"):
        conversion.sentencepiece.save(model, tmp_path / "x.model")


def test_a_normalizer_hf_bpe_does_not_run_is_refused_by_name(tmp_path: Path) -> None:
    document = precompiled_document("nmt_nfkc", True, "precompiled+legacy", tmp_path)
    document["normalizer"]["normalizers"].insert(1, {"type": "BertNormalizer", "clean_text": True,
                                                     "handle_chinese_chars": True, "strip_accents": None,
                                                     "lowercase": False})
    with pytest.raises(TokenizerFileError, match="the normalizer 'BertNormalizer' is not supported"):
        conversion.hf.load(write(document, tmp_path))


def test_the_steps_are_kept_in_the_model_in_order(tmp_path: Path) -> None:
    model, _ = load_precompiled("nfkc", False, "precompiled-between", tmp_path)
    steps = model.sentencepiece.tokenizers_normalizer if model.sentencepiece else ()
    assert [step.kind for step in steps] == ["replace", "precompiled", "prepend"]
    assert steps[2] == Normalize("prepend", SPACE)
