"""``hf-bpe convert`` and ``hf-bpe inspect`` (``hf_bpe.cli``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conversion_support import cl100k_file, gpt2_files, mistral_file, shared, trained_model

import conversion.gpt2
import conversion.tiktoken
import hf_bpe
from hf_bpe import BPE
from hf_bpe._sources import SourceError, detect_format
from hf_bpe.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture()
def gpt2_folder(tmp_path: Path) -> Path:
    encoder, merges = gpt2_files()
    folder = tmp_path / "gpt2"
    folder.mkdir()
    shutil.copy(encoder, folder / "encoder.json")
    shutil.copy(merges, folder / "vocab.bpe")
    return folder


def test_inspect_shows_format_vocab_specials_pattern_and_a_sample(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "inspect", mistral_file("tokenizer.model.v1"))
    assert status == 0
    assert "format              sentencepiece" in out and "vocab size          32000" in out
    assert '"<s>": 1' in out and "sample ids" in out and "byte fallback       true" in out
    status, out, _ = run(capsys, "inspect", cl100k_file(), "--json", "--text", "hello world")
    described = json.loads(out)
    assert described["format"] == "tiktoken" and described["pattern"] == "cl100k"
    assert described["special_tokens"] == 5 and described["sample_ids"] == [15339, 1917]
    assert described["sample_tokens"] == ["hello", " world"]


def test_convert_there_and_back(capsys: pytest.CaptureFixture[str], gpt2_folder: Path, tmp_path: Path) -> None:
    status, out, _ = run(capsys, "convert", gpt2_folder, "--to", "tiktoken", tmp_path / "gpt2.tiktoken")
    assert status == 0 and "(gpt2) ->" in out and "pattern 'gpt2'" in out
    status, _, _ = run(capsys, "convert", tmp_path / "gpt2.tiktoken", "--to", "hf_bpe", tmp_path / "gpt2.json",
                       "--pattern", "gpt2", "--special", "<|endoftext|>=50256")
    assert status == 0
    original = conversion.tiktoken.load(tmp_path / "gpt2.tiktoken", pattern="gpt2",
                                        special_tokens={"<|endoftext|>": 50256})
    assert BPE.load(tmp_path / "gpt2.json") == original
    status, _, _ = run(capsys, "convert", tmp_path / "gpt2.json", "--to", "gpt2", tmp_path / "back")
    assert status == 0 and detect_format(tmp_path / "back") == "gpt2"
    encoder, _ = gpt2_files()
    assert json.loads((tmp_path / "back" / "vocab.json").read_text(encoding="utf-8")) == \
        json.loads(encoder.read_text(encoding="utf-8"))


def test_refusals_explain_and_lossy_writes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = mistral_file("tekken_240911.json")
    status, _, err = run(capsys, "convert", source, "--to", "gpt2", tmp_path / "out")
    assert status == 1 and "cannot hold the split pattern" in err and "--lossy" in err
    assert not (tmp_path / "out").exists()
    status, _, _ = run(capsys, "convert", source, "--to", "gpt2", tmp_path / "out", "--lossy")
    assert status == 0 and (tmp_path / "out" / "merges.txt").is_file()


def test_sentencepiece_round_trip_through_our_format(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    source = shared("sentencepiece", "botchan_en_bpe_1000.model")
    assert run(capsys, "convert", source, "--to", "hf_bpe", tmp_path / "m.json")[0] == 0
    assert run(capsys, "convert", tmp_path / "m.json", "--to", "sentencepiece", tmp_path / "m.model")[0] == 0
    import sentencepiece

    theirs = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    assert BPE.load(tmp_path / "m.json").encode_ordinary("Hello there, Botchan!") == \
        theirs.encode("Hello there, Botchan!")


def test_tiktoken_files_need_a_pattern_unless_known(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = conversion.tiktoken.save(trained_model(), tmp_path / "trained.tiktoken")
    with pytest.raises(SystemExit) as raised:
        main(["inspect", str(path)])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "holds no split pattern; pass --pattern" in err and "--special TOKEN=ID" in err and "pattern=" not in err
    special = f"<|endoftext|>={trained_model().special_tokens['<|endoftext|>']}"
    status, out, _ = run(capsys, "inspect", path, "--pattern", "gpt2", "--special", special)
    assert status == 0 and "gpt2" in out


def test_the_library_names_its_arguments_and_the_command_line_its_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """hf_bpe.load speaks Python (pattern=, format=); hf-bpe says what to type in the shell."""
    path = conversion.tiktoken.save(trained_model(), tmp_path / "trained.tiktoken")
    with pytest.raises(SourceError) as raised:
        hf_bpe.load(path)
    assert "pass pattern= (" in str(raised.value) and "special_tokens= (" in str(raised.value)
    assert "--" not in str(raised.value)
    unknown = tmp_path / "unknown.bin"
    unknown.write_bytes(b"\x00 nothing known")
    with pytest.raises(SourceError, match=r"pass format= \(tiktoken, ") as raised:
        hf_bpe.load(unknown)
    assert "--" not in str(raised.value)
    with pytest.raises(SystemExit):
        main(["inspect", str(unknown)])
    err = capsys.readouterr().err
    assert "pass --from (tiktoken, " in err and "format=" not in err


def test_bpe_tokenizer_folders(capsys: pytest.CaptureFixture[str], gpt2_folder: Path, tmp_path: Path) -> None:
    """Writing a BPETokenizer folder, reading one back, and what transformers makes of it."""
    transformers = pytest.importorskip("transformers")
    import hf_bpe.transformers  # noqa: F401 - registers BPETokenizer with AutoTokenizer

    status, _, _ = run(capsys, "convert", gpt2_folder, "--to", "folder", tmp_path / "tok")
    assert status == 0 and detect_format(tmp_path / "tok") == "folder"
    status, out, _ = run(capsys, "inspect", tmp_path / "tok")
    assert status == 0 and "format              folder" in out
    assert run(capsys, "convert", tmp_path / "tok", "--to", "tiktoken", tmp_path / "x.tiktoken")[0] == 0
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    model = conversion.gpt2.load(gpt2_folder / "encoder.json", gpt2_folder / "vocab.bpe")
    assert tokenizer.encode("Hello world <|endoftext|>", add_special_tokens=False) == \
        model.encode("Hello world <|endoftext|>", allowed_special="all")


def test_hf_bpe_command_line_runs_convert_and_inspect(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from hf_bpe.cli import main as hf_bpe_main

    source = mistral_file("tekken_240718.json")
    assert hf_bpe_main(["inspect", str(source), "--text", "hi"]) == 0
    assert "format              tekken" in capsys.readouterr().out
    assert hf_bpe_main(["convert", str(source), "--to", "sentencepiece", str(tmp_path / "x.model")]) == 1
    assert "--lossy" in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:
        hf_bpe_main(["convert", str(tmp_path / "missing"), "--to", "hf", str(tmp_path / "y.json")])
    assert raised.value.code == 2


def test_a_tokenizer_json_s_post_processor_goes_into_the_folder(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    """A Llama 3-style post-processor (BOS before each sequence) is kept by ``--to folder``, so the
    folder's pairs are those of `tokenizers`; one it cannot carry over is named in a warning."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, processors

    import conversion.hf
    import hf_bpe.transformers  # registers BPETokenizer with AutoTokenizer

    model = hf_bpe.BPE({bytes([b]): b for b in range(256)} | {b"ab": 256}, "gpt2", special_tokens={"<s>": 257})
    path = conversion.hf.save(model, tmp_path / "tokenizer.json")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", 257)])])
    tokenizer.save(str(path))
    status, _, err = run(capsys, "convert", path, "--to", "folder", tmp_path / "tok")
    assert status == 0 and "warning" not in err
    folder = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    for text, pair in [("ab c", None), ("ab", "c ab"), ("", "")]:
        encoding = tokenizer.encode(text, pair)
        got = folder(text, pair, return_token_type_ids=True)
        assert (got["input_ids"], got["token_type_ids"]) == (encoding.ids, encoding.type_ids)
    tokenizer.post_processor = processors.RobertaProcessing(("<s>", 257), ("<s>", 257), trim_offsets=True)
    tokenizer.save(str(path))
    status, _, err = run(capsys, "convert", path, "--to", "folder", tmp_path / "roberta")
    assert status == 0 and "warning" not in err
    folder = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "roberta"))
    for text, pair in [(" ab  c ", None), ("ab", "  c ab"), ("", "")]:
        encoding = tokenizer.encode(text, pair)
        got = folder(text, pair, return_token_type_ids=True, return_offsets_mapping=True)
        assert (got["input_ids"], got["token_type_ids"], got["offset_mapping"]) == \
            (encoding.ids, encoding.type_ids, encoding.offsets)
    tokenizer.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=True)] * 2)
    tokenizer.save(str(path))
    status, _, err = run(capsys, "convert", path, "--to", "folder", tmp_path / "trimmed")
    assert status == 0 and "the post-processor trims offsets twice" in err


def test_detection(tmp_path: Path, gpt2_folder: Path) -> None:
    assert detect_format(gpt2_folder) == "gpt2"
    assert detect_format(mistral_file("tekken_240718.json")) == "tekken"
    assert detect_format(mistral_file("mistral_instruct_tokenizer_240216.model.v2")) == "sentencepiece"
    odd = tmp_path / "ranks.txt"
    odd.write_bytes(conversion.tiktoken.dumps(trained_model()))
    assert detect_format(odd) == "tiktoken"
    model_json = trained_model().save(tmp_path / "model.json")
    assert detect_format(model_json) == "hf_bpe"


def test_corrupt_input_is_an_error_naming_the_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.model"
    broken.write_bytes(mistral_file("tokenizer.model.v1").read_bytes()[:1000])
    status, _, err = run(capsys, "inspect", broken)
    assert status == 1 and "broken.model" in err and "error:" in err
    with pytest.raises(SystemExit):
        main(["inspect", str(tmp_path / "missing.json")])
