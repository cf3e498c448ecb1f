"""``hf-bpe extend``: cl100k_base extended on Greek Wikipedia (the old ids unchanged on held-out text without
Greek, Greek bytes per token improved, the folder loads with ``AutoTokenizer`` in a fresh process where hf_bpe
cannot be imported), special tokens moved with their ids printed, and bad input refused by name."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from suite import require_shared, scaled

import hf_bpe
from hf_bpe.cli import main

PROBE = r"""
import json, sys
sys.modules["hf_bpe"] = None  # import hf_bpe fails: the folder must load without it
from transformers import AutoTokenizer

folder, texts_file = sys.argv[1:3]
tokenizer = AutoTokenizer.from_pretrained(folder)
texts = json.load(open(texts_file, encoding="utf-8"))
print("RESULT " + json.dumps({"class": type(tokenizer).__name__, "vocab": len(tokenizer),
                              "ids": [tokenizer.encode(text, add_special_tokens=False) for text in texts]}))
"""


def load_in_a_fresh_process_without_hf_bpe(folder: Path, texts: list[str], tmp_path: Path) -> dict[str, object]:
    (tmp_path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(folder), str(tmp_path / "texts.json")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, stdin=subprocess.DEVNULL,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.rpartition("RESULT ")[2])
    return result


def test_cl100k_extended_on_greek_keeps_old_ids_compresses_greek_and_loads_without_hf_bpe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = require_shared("corpora", "wiki_el.txt").read_text(encoding="utf-8")
    cut = text.index("\n", len(text) * 3 // 4) + 1
    greek = tmp_path / "greek.txt"
    greek.write_text(text[cut - scaled(1_000_000):cut], encoding="utf-8")
    held_out_greek = text[cut:cut + scaled(100_000)]
    english = require_shared("corpora", "shakespeare_milton.txt").read_text(encoding="utf-8")[:scaled(200_000)]
    add = scaled(1000, minimum=100)
    folder = tmp_path / "cl100k-greek"
    assert main(["extend", "cl100k_base", str(greek), "--add", str(add), "--out", str(folder), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"{add:,} new tokens (ids 100277 to {100_277 + add - 1})" in out
    before_after = re.search(r"greek\.txt: ([\d.]+) -> ([\d.]+)", out)
    assert before_after is not None and float(before_after[2]) > float(before_after[1]), out

    model = hf_bpe.get_encoding("cl100k_base")
    extended = hf_bpe.load(folder)
    old, new = model.mergeable_ranks, extended.mergeable_ranks
    assert {token: new[token] for token in old} == old
    assert extended.special_tokens == model.special_tokens
    # Held-out text without Greek: the same ids as before.
    assert extended.encode_ordinary(english) == model.encode_ordinary(english)
    # Held-out Greek: fewer tokens, more bytes per token.
    before, after = model.encode_ordinary(held_out_greek), extended.encode_ordinary(held_out_greek)
    assert len(after) < len(before) and extended.decode(after) == held_out_greek

    texts = [held_out_greek[:5000], english[:5000], "Ελλάδα <|endoftext|> and more"]
    result = load_in_a_fresh_process_without_hf_bpe(folder, texts, tmp_path)
    assert result["class"] == "TokenizersBackend" and result["vocab"] == extended.n_vocab
    assert result["ids"] == [extended.encode(text, allowed_special="all") for text in texts]
    assert any(token >= 100_277 for token in result["ids"][0])  # type: ignore[index]


def test_moving_the_special_tokens_prints_their_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("η ζωή είναι καλή, η ζωή είναι ωραία\n" * 50, encoding="utf-8")
    assert main(["extend", "gpt2", str(corpus), "--add", "5", "--out", str(tmp_path / "out"), "--quiet",
                 "--move-special-tokens"]) == 0
    out = capsys.readouterr().out
    assert "special token '<|endoftext|>': id 50256 -> 50261" in out
    extended = hf_bpe.load(tmp_path / "out")
    assert extended.special_tokens == {"<|endoftext|>": 50261}
    assert sorted(set(extended.mergeable_ranks.values()))[-5:] == list(range(50256, 50261))


@pytest.mark.parametrize(("arguments", "message"), [
    (["--add", "-1"], "--add must be 0 or more"),
    (["--add", "5", "missing.txt"], "no such file"),
])
def test_bad_input_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str],
                                      message: str) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("text\n", encoding="utf-8")
    files = [str(tmp_path / argument) if argument.endswith(".txt") else argument for argument in arguments]
    if not any(argument.endswith(".txt") for argument in arguments):
        files.append(str(corpus))
    try:
        status = main(["extend", "gpt2", *files, "--out", str(tmp_path / "out"), "--quiet"])
    except SystemExit as exit:  # a usage error: argparse prints the usage and exits
        status = int(exit.code or 0)
    assert status == 2
    assert message in capsys.readouterr().err
