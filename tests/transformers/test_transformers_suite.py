"""transformers' own tokenizer test suite (``TokenizerTesterMixin``) run against ``BPETokenizer``, and
against transformers' GPT-2 fast tokenizer with ``hf_bpe.patch_transformers()`` in effect.

The mixin is not part of the transformers wheel, and it is not copied into this repository: at test
time ``pip download`` fetches the source release of the installed transformers version (cached in the
temp folder), and the mixin's three modules are extracted from it. The whole module skips, saying
why, when that is impossible (no network to PyPI, no ``parameterized``, ...).

Each test of the mixin passes, or is skipped below with the reason next to the skip: on GPT-2's
vocabulary (byte-level) and on Mistral's v1 SentencePiece model.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path
from typing import Any, ClassVar

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("parameterized", reason="the mixin needs `parameterized` (pip install parameterized)")

import hf_bpe
from hf_bpe import BPETokenizer

MIXIN_MODULES = (
    "test_tokenization_common.py",
    "test_tokenizers_backend_mixin.py",
    "test_sentencepiece_backend_mixin.py",
)
PACKAGE = "transformers_tests"  # transformers' get_tests_dir() wants a folder whose name ends in "tests"

# The sdist has no tests/fixtures; setUpClass only reads this file into `_data`, which no test uses.
SAMPLE_TEXT = "This is a sample text for the tokenizer tests.\nIt has two lines.\n"


def _complete(root: Path) -> bool:
    return all((root / PACKAGE / name).is_file() for name in MIXIN_MODULES)


def _mixin_package() -> Path:
    """Folder holding the package with the mixin of the installed transformers version.

    Built in a private folder and renamed into place whole: test workers (pytest-xdist) collect this
    module at the same time, and none of them may import a half-written module."""
    version = transformers.__version__
    root = (
        Path(os.environ.get("HF_BPE_MIXIN_CACHE", tempfile.gettempdir()))
        / f"hf_bpe-transformers-{version}-tests"
    )
    if _complete(root):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{root.name}.partial-", dir=root.parent))
    try:
        _build_mixin_package(partial, version)
        for _ in range(2):
            try:
                partial.rename(root)
                return root
            except OSError:
                if _complete(root):  # another worker got there first
                    return root
                shutil.rmtree(root, ignore_errors=True)  # half-made by a run killed before this rename existed
        raise RuntimeError(f"could not move the mixin package from {partial} to {root}")
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _build_mixin_package(root: Path, version: str) -> None:
    """Download transformers' source release into ``root/download`` and extract the mixin into
    ``root/PACKAGE``, or skip the module saying why that is impossible."""
    package = root / PACKAGE
    download = root / "download"
    download.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--quiet",
               f"transformers=={version}", "-d", str(download)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    archives = sorted(download.glob("transformers-*.tar.gz"))
    if not archives:
        pytest.skip(
            f"could not get the transformers {version} source release from PyPI (`{' '.join(command[2:])}` "
            f"failed: {result.stderr.strip()[-300:]})",
            allow_module_level=True,
        )
    package.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archives[0]) as archive:
        for member in archive.getmembers():
            name = Path(member.name)
            if name.parent.name == "tests" and name.name in MIXIN_MODULES:
                source = archive.extractfile(member)
                assert source is not None
                (package / name.name).write_bytes(source.read())
    missing = [name for name in MIXIN_MODULES if not (package / name).is_file()]
    if missing:
        pytest.skip(
            f"the transformers {version} source release lacks tests/{missing[0]}", allow_module_level=True
        )
    (package / "__init__.py").write_text("")
    (package / "fixtures").mkdir(exist_ok=True)
    (package / "fixtures" / "sample_text.txt").write_text(SAMPLE_TEXT, encoding="utf-8")


sys.path.insert(0, str(_mixin_package()))
common = importlib.import_module(f"{PACKAGE}.test_tokenization_common")


def _gpt2_tokenizer(**policy: object) -> BPETokenizer:
    return BPETokenizer.from_model(
        hf_bpe.get_encoding("gpt2"),
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        pad_token="<|pad|>",
        **policy,
    )


def _gpt2_reference() -> transformers.PreTrainedTokenizerBase:
    """transformers' own GPT-2 tokenizer, built from GPT-2's original files: the oracle for the
    mixin's integration test (expected tokens and ids are never written down here)."""
    from hf_bpe._encodings import ENCODER_JSON, VOCAB_BPE, find_file

    folder = Path(tempfile.mkdtemp())
    shutil.copy(find_file(ENCODER_JSON)[0], folder / "vocab.json")
    shutil.copy(find_file(VOCAB_BPE)[0], folder / "merges.txt")
    return transformers.GPT2Tokenizer.from_pretrained(folder)


def _expect_as(test: Any, reference: Any) -> None:
    """The mixin's integration test expects what ``reference`` (transformers' own GPT-2 tokenizer,
    unpatched) gives for its input string."""
    text = test.integration_test_input_string
    test.integration_expected_tokens = reference.tokenize(text)
    test.integration_expected_token_ids = reference.encode(text, add_special_tokens=False)
    test.integration_expected_decoded_text = text


class BPETokenizerConformance(common.TokenizerTesterMixin):
    """The mixin's setup: our folder is loaded with ``AutoTokenizer`` and saved again (the mixin's
    own ``setUpClass``), so every test also runs on a tokenizer that went through a save/load."""

    tokenizer_class = BPETokenizer
    # prepare_seq2seq_batch is for encoder-decoder tokenizers (and needs torch); we do not define it.
    test_seq2seq = False
    policy: ClassVar[dict[str, object]] = {}

    @classmethod
    def setUpClass(cls) -> None:
        cls.source = tempfile.mkdtemp()
        _gpt2_tokenizer(**cls.policy).save_pretrained(cls.source)
        cls.from_pretrained_id = [cls.source]
        super().setUpClass()
        _expect_as(cls, _gpt2_reference())

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        shutil.rmtree(cls.source, ignore_errors=True)

    @unittest.skip(
        "builds the class from tokenizer.json's vocab and merges (`tokenizer_class(vocab=..., merges=...)`); "
        "BPETokenizer is built from an hf_bpe model, and reading tokenizer.json is conversion.hf's job"
    )
    def test_integration_from_extractor(self) -> None: ...

    def test_conversion_reversible(self) -> None:
        # transformers marks this one slow (RUN_SLOW=1); for GPT-2's 50k tokens it takes a second.
        test = common.TokenizerTesterMixin.test_conversion_reversible
        getattr(test, "__wrapped__", test)(self)

    # Skipped by the mixin itself, for these reasons:
    # - test_sequence_ids, test_chat_template_return_assistant_tokens_mask_truncated: they need
    #   tokenizers' Encoding objects (`sequence_ids()`, `char_to_token()`), which only TokenizersBackend
    #   returns; the mixin skips every other backend ("Tokenizers backend tokenizer", "Custom backend
    #   tokenizer"). Our offsets are checked against tokenizers' in test_tokenizer.py instead.
    # - test_chat_template_save_loading: it checks `reloaded.tokenizer.chat_template`, an attribute of
    #   processors; the mixin skips tokenizers whose __init__ has no `chat_template` parameter, which is
    #   every tokenizer in transformers and ours (chat templates are saved and loaded: test_chat_template).
    # - test_chat_template_return_assistant_tokens_mask, test_batch_encode_dynamic_overflowing,
    #   test_empty_input_string, test_prepare_seq2seq_batch: they need torch, and run where it is installed
    #   (test_prepare_seq2seq_batch then skips: test_seq2seq is False above).


class TestBPETokenizerConformance(BPETokenizerConformance, unittest.TestCase):
    """GPT-2's vocabulary, no BOS/EOS added."""


class TestBPETokenizerConformanceBosEos(BPETokenizerConformance, unittest.TestCase):
    """GPT-2's vocabulary with BOS and EOS around each sequence."""

    policy: ClassVar[dict[str, object]] = {"add_bos_token": True, "add_eos_token": True}


class TestSentencePieceConformance(BPETokenizerConformance, unittest.TestCase):
    """Mistral's v1 SentencePiece model (Llama 2's layout) with SentencePiece's policy (BOS added).
    The integration oracle is ``SentencePieceProcessor`` on each stretch of text between the special
    pieces, which the tokenizer matches in text as transformers' tokenizers do."""

    @classmethod
    def setUpClass(cls) -> None:
        import re

        import sentencepiece
        from conversion_support import mistral_file

        import conversion.sentencepiece

        path = mistral_file("tokenizer.model.v1")
        cls.source = tempfile.mkdtemp()
        BPETokenizer.from_model(conversion.sentencepiece.load(path), pad_token="</s>").save_pretrained(cls.source)
        cls.from_pretrained_id = [cls.source]
        super(BPETokenizerConformance, cls).setUpClass()
        processor = sentencepiece.SentencePieceProcessor(model_file=str(path))
        tokens: list[str] = []
        ids: list[int] = []
        for part in re.split("(<s>|</s>|<unk>)", cls.integration_test_input_string):
            if part in ("<s>", "</s>", "<unk>"):
                tokens.append(part)
                ids.append(processor.piece_to_id(part))
            elif part:
                tokens += processor.encode(part, out_type=str)
                ids += processor.encode(part)
        cls.integration_expected_tokens = tokens
        cls.integration_expected_token_ids = ids
        cls.integration_expected_decoded_text = processor.decode(ids)


def test_the_installed_transformers_is_a_release_the_pipeline_was_checked_against() -> None:
    """hf_bpe/transformers/_pipeline.py implements transformers' private ``_encode_plus``: on a major it
    was not checked against this fails, saying what to do, before anything subtler does."""
    import transformers

    from hf_bpe.transformers import _pipeline

    major = int(transformers.__version__.split(".")[0])
    assert major in _pipeline.TRANSFORMERS_MAJORS, (
        f"transformers {transformers.__version__} is outside {_pipeline.TRANSFORMERS_CHECKED}, the releases "
        "hf_bpe/transformers/_pipeline.py (its _encode_plus override) was checked against: compare it with this "
        "release's PythonBackend._encode_plus, run this file, then widen TRANSFORMERS_CHECKED and the pin in "
        "pyproject.toml"
    )
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"transformers{_pipeline.TRANSFORMERS_CHECKED}"' in pyproject, "pyproject.toml pins another range"


class TestPatchedTransformersConformance(common.TokenizerTesterMixin, unittest.TestCase):
    """transformers' own GPT-2 fast tokenizer (``TokenizersBackend``, from GPT-2's original files) with
    ``hf_bpe.patch_transformers()`` in effect for the whole class: every tokenizer the mixin loads
    encodes and decodes on hf_bpe (checked in ``setUpClass``), and each test passes as it does on
    `tokenizers`."""

    tokenizer_class = transformers.GPT2Tokenizer
    test_seq2seq = False

    @classmethod
    def setUpClass(cls) -> None:
        from hf_bpe.transformers._patch import Backend

        reference = _gpt2_reference()
        reference.pad_token = "<|pad|>"
        cls.source = tempfile.mkdtemp()
        reference.save_pretrained(cls.source)
        cls.from_pretrained_id = [cls.source]
        hf_bpe.patch_transformers()
        try:
            loaded = transformers.AutoTokenizer.from_pretrained(cls.source)
            assert isinstance(loaded._tokenizer, Backend), "the patch left GPT-2's tokenizer on tokenizers"
            super().setUpClass()
        except BaseException:
            hf_bpe.unpatch_transformers()  # tearDownClass does not run after a failed setUpClass
            raise
        _expect_as(cls, reference)

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        hf_bpe.unpatch_transformers()
        shutil.rmtree(cls.source, ignore_errors=True)

    @classmethod
    def get_tokenizer(cls, pretrained_name: str | None = None, **kwargs: object) -> transformers.PreTrainedTokenizerBase:
        """The mixin's tokenizer, checked to encode on hf_bpe (a test on `tokenizers` would say nothing)."""
        from hf_bpe.transformers._patch import Backend

        tokenizer = super().get_tokenizer(pretrained_name, **kwargs)
        assert isinstance(tokenizer._tokenizer, Backend), f"{pretrained_name or cls.tmpdirname} stayed on tokenizers"
        return tokenizer

    def test_conversion_reversible(self) -> None:
        test = common.TokenizerTesterMixin.test_conversion_reversible
        getattr(test, "__wrapped__", test)(self)
