"""What the command line tells its user: messages that say what is true and name the command-line
option, errors that name the file the user gave, folders created openly, and progress bars only where
someone watches work that lasts."""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from terminal import on_a_terminal

import hf_bpe
from hf_bpe.cli import main
from hf_bpe.train import count_pieces

ROOT = Path(__file__).resolve().parents[2]


def mistral_v3() -> Path:
    spec = importlib.util.find_spec("mistral_common")
    if spec is None or spec.origin is None:
        pytest.skip("mistral-common (a test extra: pip install -e '.[test]') ships the v3 SentencePiece model")
    path = Path(spec.origin).parent / "data" / "mistral_instruct_tokenizer_240323.model.v3"
    if not path.is_file():
        pytest.skip(f"{path} is not in this mistral-common version")
    return path


def test_convert_with_lossy_writes_what_the_refusal_says_lossy_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model_file = shutil.copy(mistral_v3(), tmp_path / "v3.model")
    out = tmp_path / "out.json"
    assert main(["convert", str(model_file), "--to", "hf", str(out)]) == 1
    assert "(on the command line: --lossy)" in capsys.readouterr().err and not out.exists()
    assert main(["convert", str(model_file), "--to", "hf", str(out), "--lossy"]) == 0
    assert "warning: lossy tokenizer.json" in capsys.readouterr().err and out.is_file()


def test_repr_and_inspect_count_the_same_ordinary_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    for source in (str(mistral_v3()), "gpt2"):
        model = hf_bpe.load(source, format="sentencepiece" if source != "gpt2" else None)
        assert main(["inspect", source, "--json"] + (["--from", "sentencepiece"] if source != "gpt2" else [])) == 0
        described = json.loads(capsys.readouterr().out)
        ordinary, special = described["ordinary_tokens"], described["special_tokens"]
        assert f": {ordinary} ordinary tokens, {special} special>" in repr(model)
        assert ordinary + special <= model.n_vocab
    assert "32017 ordinary tokens, 751 special" in repr(hf_bpe.load(mistral_v3(), format="sentencepiece"))


@pytest.mark.parametrize(("content", "kind"), [("[1, 2]", "array"), ('"x"', "string"), ("3", "number")])
def test_a_tokenizer_json_that_is_not_an_object_says_what_it_holds(
    content: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(hf_bpe.errors.TokenizerFileError) as raised:
        hf_bpe.load(path, format="hf")
    message = str(raised.value)
    assert f"it holds a JSON {kind}" in message and "indices" not in message and "tokenizer.json" in message
    assert main(["inspect", str(path), "--from", "hf"]) == 1
    assert f"it holds a JSON {kind}" in capsys.readouterr().err


def test_a_malformed_tokenizer_json_does_not_print_pythons_type_error(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": [1, 2], "added_tokens": []}', encoding="utf-8")
    with pytest.raises(hf_bpe.errors.TokenizerFileError) as raised:
        hf_bpe.load(path, format="hf")
    assert "indices" not in str(raised.value) and "wrong JSON type" in str(raised.value)


def test_an_empty_file_holds_no_text(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty.txt holds no text"):
        hf_bpe.train(files=[empty], vocab_size=300, show_progress=False)
    with pytest.raises(ValueError, match="empty.txt, .*empty2.txt hold no text"):
        shutil.copy(empty, tmp_path / "empty2.txt")
        hf_bpe.train(files=[empty, tmp_path / "empty2.txt"], vocab_size=300, show_progress=False)


def test_the_vocab_size_message_says_what_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "a.txt"
    corpus.write_text("hello world hello", encoding="utf-8")
    assert main(["train", str(corpus), "--vocab-size", "255", "--out", str(tmp_path / "small"), "--quiet"]) == 1
    message = capsys.readouterr().err
    assert "ask for at least 256 (exactly 256 learns no merges" in message and "more than 256" not in message
    assert main(["train", str(corpus), "--vocab-size", "256", "--out", str(tmp_path / "bytes"), "--quiet"]) == 0
    assert "256 bytes + 0 merges" in capsys.readouterr().out
    with pytest.raises(ValueError, match="at least 258 "):
        hf_bpe.train(["hi"], 257, special_tokens=["<a>", "<b>"], show_progress=False)


def test_convert_and_train_say_when_they_create_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "new" / "deeper" / "gpt2.json"
    assert main(["convert", "gpt2", "--to", "hf_bpe", str(target)]) == 0
    assert f"created the folder {tmp_path / 'new'} (it did not exist)" in capsys.readouterr().out
    assert hf_bpe.load(target).encode("hello world") == [31373, 995]
    assert main(["convert", "gpt2", "--to", "hf_bpe", str(tmp_path / "new" / "again.json")]) == 0
    assert "created" not in capsys.readouterr().out
    corpus = tmp_path / "a.txt"
    corpus.write_text("hello world hello", encoding="utf-8")
    out = tmp_path / "models" / "mine"
    assert main(["train", str(corpus), "--vocab-size", "258", "--out", str(out), "--quiet"]) == 0
    assert f"created the folder {tmp_path / 'models'} (it did not exist)" in capsys.readouterr().out


def test_an_unwritable_target_is_named_not_the_temporary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocking = tmp_path / "a.txt"
    blocking.write_text("x", encoding="utf-8")
    folder = tmp_path / "folder.json"
    folder.mkdir()
    for target, reason in ((blocking / "gpt2.json", f"{blocking} is a file, not a folder"),
                           (folder, "it is a folder; give a file name inside it")):
        assert main(["convert", "gpt2", "--to", "hf_bpe", str(target)]) == 1
        error = capsys.readouterr().err
        assert f"cannot write {target}: {reason}" in error and ".tmp" not in error
        with pytest.raises(OSError, match="cannot write") as raised:
            hf_bpe.get_encoding("gpt2").save(target)
        assert ".tmp" not in str(raised.value)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt", "folder.json"]
    assert list(folder.iterdir()) == []


def test_a_missing_dataset_column_names_the_command_line_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("datasets", reason="--dataset needs the datasets package (pip install -e '.[test]')")
    data = tmp_path / "data.jsonl"
    data.write_text('{"txt": "hello world"}\n', encoding="utf-8")
    code = main(["train", "--dataset", str(data), "--vocab-size", "260", "--out", str(tmp_path / "m"), "--quiet"])
    assert code == 1
    error = capsys.readouterr().err
    assert "no column 'text'; its columns are ['txt']" in error and "--text-column" in error


def test_the_readme_first_commands_folder_is_ignored_by_git() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(["git", "check-ignore", "-q", "my-tokenizer/hf_bpe.json"], cwd=ROOT, check=False)
    assert done.returncode == 0, "the README's first command writes my-tokenizer/: .gitignore must hold it"
    assert "--out my-tokenizer" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_no_progress_bars_off_a_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    hf_bpe.train(["one short document, once"], 270)
    count_pieces(["another"])
    assert capfd.readouterr().err == ""


def test_no_progress_bar_for_a_quick_call_on_a_terminal() -> None:
    """On a terminal a bar waits hf_bpe.train.PROGRESS_DELAY (1 s) before it shows: a call that takes
    a few milliseconds prints nothing (a tqdm bar with no delay does print on this terminal)."""
    quick_bar = "import tqdm; bar = tqdm.tqdm(total=3, desc='Counting'); bar.update(3); bar.close()"
    assert b"Counting" in on_a_terminal(quick_bar)
    written = on_a_terminal("import sys, hf_bpe; assert sys.stderr.isatty(); "
                            "hf_bpe.train(['one short document, once'], 270)")
    assert b"Merging" not in written and b"Counting" not in written, written


def test_on_a_terminal_work_that_lasts_shows_progress_bars(tmp_path: Path) -> None:
    """HF_BPE_PROGRESS_DELAY=0 stands for work that lasts (by default a bar waits a second)."""
    corpus = tmp_path / "a.txt"
    corpus.write_text("hello world, hello there\n" * 200, encoding="utf-8")
    shown = on_a_terminal(f"import hf_bpe; hf_bpe.train(files=[{str(corpus)!r}], vocab_size=300)", delay="0")
    assert b"Counting pieces" in shown and b"Merging" in shown, shown
    counted = on_a_terminal(["-m", "hf_bpe", "count", "gpt2", "--lines", "--file", str(corpus)], delay="0")
    assert b"lines" in counted, counted


# ------------------------------------------------------------------------------ as a shell user sees it


def hf_bpe_process(*argv: object, timeout: float = 600, **options: object) -> subprocess.CompletedProcess[str]:
    """``python -m hf_bpe ARGV`` as a separate process (nothing imported beforehand)."""
    return subprocess.run([sys.executable, "-m", "hf_bpe", *map(str, argv)], check=False, capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout, **options)  # type: ignore[call-overload]


def test_transformers_advice_is_silenced_and_warnings_print_as_one_line(tmp_path: Path) -> None:
    """transformers says PyTorch is missing when imported without it (irrelevant to a tokenizer): not
    printed; our own warning (a vocabulary the corpus cannot reach) prints as one clean line."""
    pytest.importorskip("transformers")
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("PyTorch is installed: transformers gives no advice to silence")
    corpus = tmp_path / "a.txt"
    corpus.write_text("hello world, hello there\n" * 20, encoding="utf-8")
    done = hf_bpe_process("train", corpus, "--vocab-size", "100000", "--out", tmp_path / "tok", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "PyTorch" not in done.stderr and "[transformers]" not in done.stderr
    assert done.stderr.splitlines() == [line for line in done.stderr.splitlines() if line.strip()]
    warning_lines = [line for line in done.stderr.splitlines() if "allows only" in line]
    assert len(warning_lines) == 1 and warning_lines[0].startswith("hf-bpe train: warning: the corpus allows only")
    assert "UserWarning" not in done.stderr and "train_from_counts" not in done.stderr and ".py:" not in done.stderr
    converted = hf_bpe_process("convert", "gpt2", "--to", "folder", tmp_path / "gpt2")
    assert converted.returncode == 0 and converted.stderr == "", converted.stderr


def test_train_reports_each_phase_with_plurals_and_readable_durations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "a.txt"
    corpus.write_text("hello world hello", encoding="utf-8")
    assert main(["train", str(corpus), "--vocab-size", "257", "--out", str(tmp_path / "one"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "256 bytes + 1 merge + 0 special tokens" in out and "1 merges" not in out
    assert "trained on 1 file in " in out and "1 files" not in out
    durations = re.findall(r" in ([^;\n]*?)(?:;|$)", out, flags=re.MULTILINE)
    assert len(durations) == 2, out  # training, then writing the folder (tokenizer.json, card, audit)
    assert "wrote the folder" in out
    for shown in durations:
        assert re.fullmatch(r"under 1 ms|\d+ ms|\d\.\d s|\d+ s|\d+ min \d+ s", shown), shown
        assert shown != "0.0 s"


def test_train_and_convert_refuse_to_write_over_a_folder_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "a.txt"
    corpus.write_text("hello world hello", encoding="utf-8")
    out = tmp_path / "tok"
    out.mkdir()
    (out / "notes.md").write_text("mine", encoding="utf-8")
    for argv in (["train", str(corpus), "--vocab-size", "258", "--out", str(out), "--quiet"],
                 ["convert", "gpt2", "--to", "folder", str(out)],
                 ["audit", "gpt2", "--out", str(out)]):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2
        assert f"{out}: the folder exists and holds files; to write over them, add --force" in capsys.readouterr().err
        assert sorted(path.name for path in out.iterdir()) == ["notes.md"]
    assert main(["train", str(corpus), "--vocab-size", "258", "--out", str(out), "--quiet", "--force"]) == 0
    assert (out / "tokenizer.json").is_file() and (out / "notes.md").is_file()
    capsys.readouterr()
    assert main(["train", str(corpus), "--vocab-size", "258", "--out", str(tmp_path / "empty-is-fine"), "--quiet"]) == 0


def test_input_errors_name_the_file_and_say_what_to_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n", encoding="utf-8")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"ok\ncaf\xe9\n")
    cases = [
        (["encode", str(notes), "hello"], f"{notes} is not a tokenizer", f"hf-bpe encode gpt2 --file {notes}"),
        (["encode", "gpt2", "--file", str(latin1), "--lines"], f"{latin1} is not UTF-8 text: byte 6", "iconv -f"),
        (["encode", "gpt2", "--file", str(tmp_path)], f"--file {tmp_path}: is a folder, not a file",
         f"--file {tmp_path / 'notes.txt'}"),
        (["count", "gpt2", "--file", str(tmp_path / "missing.txt")], f"{tmp_path / 'missing.txt'}: no such file",
         f"ls {tmp_path / 'missing.txt'}"),
        (["train", str(tmp_path), "--vocab-size", "300", "--out", str(tmp_path / "o")], f"{tmp_path}: is a folder",
         f"hf-bpe train {tmp_path}/*.txt"),
    ]
    for argv, problem, advice in cases:
        try:
            status = main(argv)
        except SystemExit as stopped:
            status = int(str(stopped.code))
        error = capsys.readouterr().err
        assert status in (1, 2) and problem in error and advice in error, (argv, error)
        for python_advice in ("Errno", "codec", "format=", "glob(", "sorted(", "Traceback"):
            assert python_advice not in error, (argv, error)


def test_exit_status_is_one_convention_and_help_says_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing tokenizer file is a usage/input error (2) for every command; a corrupt one a failure (1)."""
    missing = tmp_path / "missing.tiktoken"
    corrupt = tmp_path / "corrupt.tiktoken"
    corrupt.write_text("not base64 at all\n", encoding="utf-8")
    commands = [["encode", "{}", "hi"], ["count", "{}", "hi"], ["decode", "{}", "1"], ["view", "{}", "--text", "hi"],
                ["inspect", "{}"], ["convert", "{}", "--to", "hf", str(tmp_path / "x.json")]]
    for command in commands:
        for source, expected in ((missing, 2), (corrupt, 1)):
            argv = [str(source) if item == "{}" else item for item in command] + ["--pattern", "gpt2"]
            if command[0] != "view":  # view detects the format of each of its tokenizers
                argv += ["--from", "tiktoken"]
            done = hf_bpe_process(*argv)
            assert done.returncode == expected, (argv, done.stderr)
            assert source.name in done.stderr and "Traceback" not in done.stderr, (argv, done.stderr)
    help_text = hf_bpe_process("--help").stdout
    assert "exit status:" in help_text and "2    bad usage or input" in help_text and "1    failed" in help_text


def test_encode_without_text_at_a_terminal_says_what_to_give() -> None:
    """TEXT omitted: standard input is read when piped; at a terminal (nothing piped) it is not waited on."""
    piped = hf_bpe_process("encode", "gpt2", input="hello world")
    assert piped.returncode == 0 and piped.stdout == "31373 995\n"
    controller, terminal = pty.openpty()
    try:
        for command, said in ((["encode", "gpt2"], "echo 'hello world' | hf-bpe encode gpt2"),
                              (["count", "gpt2"], "hf-bpe count gpt2 --file notes.txt"),
                              (["decode", "gpt2"], "| hf-bpe decode gpt2")):
            done = hf_bpe_process(*command, stdin=terminal, timeout=120)  # without the fix: waits for typing
            assert done.returncode == 2 and said in done.stderr, done.stderr
    finally:
        os.close(terminal)
        os.close(controller)


@pytest.mark.parametrize("command", [["encode", "gpt2", "--lines"], ["inspect", "gpt2"], ["view", "gpt2", "--text", "-"],
                                     ["count", "gpt2", "--lines", "--each"]])
def test_a_closed_pipe_ends_the_command_quietly(command: list[str], tmp_path: Path) -> None:
    """As ``hf-bpe ... | head -1``: the reader is gone before the command writes; no error, status 141."""
    text = tmp_path / "lines.txt"
    text.write_text("hello world\n" * 50_000, encoding="utf-8")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        with text.open("rb") as stdin:
            done = subprocess.run([sys.executable, "-m", "hf_bpe", *command], stdin=stdin, stdout=write_end,
                                  stderr=subprocess.PIPE, check=False, timeout=600)
    finally:
        os.close(write_end)
    assert done.stderr == b"" and done.returncode == 141, done.stderr


def test_a_progress_bar_shows_no_time_left_until_a_quarter_is_done(tmp_path: Path) -> None:
    """tqdm estimates the time left from the first steps (merging's first merges are the slowest):
    every frame before a quarter of the total shows elapsed time and rate only; later frames the estimate."""
    corpus = tmp_path / "a.txt"
    corpus.write_text("".join(f"word{n} other{n * 7} thing{n % 13}\n" for n in range(3000)), encoding="utf-8")
    shown = on_a_terminal(f"import hf_bpe; hf_bpe.train(files=[{str(corpus)!r}], vocab_size=1500)", delay="0")
    frames = re.findall(rb"Merging: *\d+%[^|]*\|[^|]*\| *(\d+)/(\d+) \[([^\]]*)\]", shown)
    assert frames and frames[0][0] == b"0", shown  # the opening frame (tqdm showed "<?" there, then 4:54)
    for done, total, times in frames:
        if int(done) < int(total) / 4:
            assert b"<" not in times, times
