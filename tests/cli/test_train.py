"""The ``hf-bpe`` command line: ``hf-bpe train`` on files, datasets and the default corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

import hf_bpe
from hf_bpe.cli import MODEL_FILE, main


def test_train_on_files_writes_the_model_and_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat<|endoftext|>the hat\n" * 200, encoding="utf-8")
    status = main(
        [
            "train",
            str(corpus),
            "--vocab-size",
            "270",
            "--special-token",
            "<|endoftext|>",
            "--special-token",
            "<pad>",
            "--out",
            str(tmp_path / "tok"),
            "--quiet",
        ]
    )
    assert status == 0
    out = capsys.readouterr().out
    assert f"Wrote {tmp_path / 'tok'}" in out
    assert type(AutoTokenizer.from_pretrained(tmp_path / "tok")).__name__ == "BPETokenizer"
    assert "270 tokens: 256 bytes + 12 merges + 2 special tokens; pattern gpt2" in out
    model = hf_bpe.BPE.load(tmp_path / "tok" / MODEL_FILE)
    assert model.n_vocab == 270 and model.name == "tok"
    assert model.special_tokens == {"<|endoftext|>": 268, "<pad>": 269}
    expected = hf_bpe.train(corpus, 270, special_tokens=["<|endoftext|>", "<pad>"], show_progress=False)
    assert model.mergeable_ranks == expected.mergeable_ranks


def test_max_pieces_bounds_the_count_table_and_warns_when_it_pruned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"id{index:x} the cat sat\n" for index in range(5000)), encoding="utf-8")
    status = main(["train", str(corpus), "--vocab-size", "280", "--max-pieces", "500", "--out",
                   str(tmp_path / "tok"), "--quiet"])
    assert status == 0 and hf_bpe.BPE.load(tmp_path / "tok" / MODEL_FILE).n_vocab == 280
    # the command prints warnings as one line each on stderr
    err = capsys.readouterr().err
    assert "hf-bpe train: warning: " in err and "occurrences of rare pieces" in err, err
    assert main(["train", str(corpus), "--vocab-size", "280", "--max-pieces", "100000", "--out",
                 str(tmp_path / "exact"), "--quiet"]) == 0
    assert "warning" not in capsys.readouterr().err
    exact = hf_bpe.train(corpus, 280, show_progress=False)
    assert hf_bpe.BPE.load(tmp_path / "exact" / MODEL_FILE).mergeable_ranks == exact.mergeable_ranks


def test_train_with_no_input_uses_pythons_documentation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["train", "--vocab-size", "1000", "--pattern", "cl100k", "--out", str(tmp_path / "docs")])
    assert status == 0
    captured = capsys.readouterr()
    assert "the default corpus (Python's documentation" in captured.out and "pattern cl100k" in captured.out
    assert "Counting pieces" not in captured.err  # not a terminal: no progress bars (cli/test_messages.py)
    model = hf_bpe.BPE.load(tmp_path / "docs" / MODEL_FILE)
    assert model.n_vocab == 1000
    assert len(model.encode("def function(argument):\n    return None")) < 15


def test_train_on_a_saved_dataset_and_a_data_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import datasets

    rows = {"id": [1, 2, 3], "body": ["first text here", "second text there", "third text everywhere"]}
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "saved"))
    status = main(
        [
            "train",
            "--dataset",
            str(tmp_path / "saved"),
            "--text-column",
            "body",
            "--vocab-size",
            "265",
            "--out",
            str(tmp_path / "a"),
            "--quiet",
        ]
    )
    assert status == 0
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps({"body": body}) + "\n" for body in rows["body"]), encoding="utf-8")
    status = main(
        [
            "train",
            "--dataset",
            str(jsonl),
            "--text-column",
            "body",
            "--vocab-size",
            "265",
            "--out",
            str(tmp_path / "b"),
            "--quiet",
        ]
    )
    assert status == 0
    a = hf_bpe.BPE.load(tmp_path / "a" / MODEL_FILE)
    b = hf_bpe.BPE.load(tmp_path / "b" / MODEL_FILE)
    assert (
        a.mergeable_ranks
        == b.mergeable_ranks
        == hf_bpe.train(rows["body"], 265, show_progress=False).mergeable_ranks
    )
    assert "dataset" in capsys.readouterr().out


def test_errors_are_reported_with_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import datasets

    out = str(tmp_path / "out")
    assert main(["train", "--vocab-size", "200", "--out", out]) == 1
    assert "vocab_size 200 is too small" in capsys.readouterr().err

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff")
    assert main(["train", str(bad), "--vocab-size", "300", "--out", out]) == 1
    assert "bad.txt: not UTF-8 text: invalid byte 0xff at byte offset 3" in capsys.readouterr().err

    datasets.Dataset.from_dict({"content": ["x"]}).save_to_disk(str(tmp_path / "ds"))
    assert main(["train", "--dataset", str(tmp_path / "ds"), "--vocab-size", "300", "--out", out]) == 1
    assert "no column 'text'; its columns are ['content']" in capsys.readouterr().err

    with pytest.raises(SystemExit) as exit_info:
        main(["train", str(bad), "--dataset", "x", "--vocab-size", "300", "--out", out])
    assert exit_info.value.code == 2
    assert "give FILES or --dataset, not both" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_command_runs_as_a_program(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello hello world\n" * 50, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hf_bpe.cli",
            "train",
            str(corpus),
            "--vocab-size",
            "260",
            "--out",
            str(tmp_path / "t"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "260 tokens" in done.stdout
    assert (tmp_path / "t" / MODEL_FILE).is_file()


def test_inspect_reads_what_train_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello hello world\n" * 50, encoding="utf-8")
    assert main(["train", str(corpus), "--vocab-size", "260", "--out", str(tmp_path / "t"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "t" / MODEL_FILE)]) == 0
    assert "260" in capsys.readouterr().out


def test_train_parity_aware_bpe_per_language(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = {"en": ["the new lower newest " * 20, "newer and lower"], "el": ["η νέα γλώσσα " * 15]}
    paths: dict[str, list[Path]] = {}
    for language, documents in texts.items():
        for i, document in enumerate(documents):
            paths.setdefault(language, []).append(tmp_path / f"{language}{i}.txt")
            paths[language][-1].write_text(document, encoding="utf-8")
    dev = tmp_path / "dev_el.txt"
    dev.write_text("η γλώσσα", encoding="utf-8")
    status = main(["train", "--language", f"en={paths['en'][0]},{paths['en'][1]}", "--language",
                   f"el={paths['el'][0]}", "--dev", f"en={paths['en'][1]}", "--dev", f"el={dev}", "--variant",
                   "window", "--window-size", "4", "--vocab-size", "290", "--out", str(tmp_path / "tok"), "--quiet"])
    assert status == 0
    assert "Wrote" in capsys.readouterr().out
    model = hf_bpe.BPE.load(tmp_path / "tok" / MODEL_FILE)
    expected = hf_bpe.train(vocab_size=290, languages=paths, dev={"en": paths["en"][1], "el": dev}, variant="window",
                            window_size=4, show_progress=False)
    assert model.kind == "merges" and model.merges == expected.merges

    out = str(tmp_path / "other")
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--language", "en", "--vocab-size", "290", "--out", out])
    assert exit_info.value.code == 2
    assert "write --language NAME=FILES" in capsys.readouterr().err
    assert main(["train", "--language", f"en={paths['en'][0]}", "--dev", f"el={dev}", "--vocab-size", "290",
                 "--out", out]) == 1
    assert "dev needs one corpus per language" in capsys.readouterr().err
    assert main(["train", "--language", f"en={tmp_path / 'missing.txt'}", "--vocab-size", "290", "--out", out]) == 2
    assert "no such file" in capsys.readouterr().err


def test_train_superbpe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("by the way, the cat sat on the mat. 1234567 cats\n" * 50, encoding="utf-8")
    status = main(["train", str(corpus), "--vocab-size", "320", "--superword-transition", "290", "--out",
                   str(tmp_path / "tok"), "--quiet"])
    assert status == 0
    capsys.readouterr()
    model = hf_bpe.BPE.load(tmp_path / "tok" / MODEL_FILE)
    expected = hf_bpe.train(corpus, 320, superword_transition=290, show_progress=False, name="tok")
    assert model.merges == expected.merges and model.pattern == expected.pattern
    assert AutoTokenizer.from_pretrained(tmp_path / "tok")("the cat sat")["input_ids"] == model.encode("the cat sat")
