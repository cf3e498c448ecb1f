"""Saves that are interrupted (``kill -9``, a full disk) or that meet a folder from another save: the
folder left behind is the old one or the new one, complete, or loading it is refused naming the files
that disagree; never a mix that loads with wrong ids."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import conversion.gpt2
import conversion.hf
import hf_bpe
from hf_bpe.errors import TokenizerFileError

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="kill -9 and RLIMIT_FSIZE are POSIX")
transformers = pytest.importorskip("transformers")

from hf_bpe import BPETokenizer
from hf_bpe.transformers import save_tokenizer_folder

SAMPLE = "ab abc<|endoftext|> cab<|pad|>"

# Two tokenizers that give different ids to the same text and special tokens, so that a folder
# mixing their files would load with wrong ids.
MODELS = """
import hf_bpe
base = {bytes([b]): b for b in range(256)}
MODELS = [
    hf_bpe.BPE(base | {b"ab": 256}, "gpt2", {"<|endoftext|>": 257, "<|pad|>": 258}, name="first"),
    hf_bpe.BPE(base | {b"ca": 256, b"ab": 257, b"abc": 258}, "gpt2", {"<|pad|>": 259, "<|endoftext|>": 260},
               name="second"),
]
"""
namespace: dict[str, list[hf_bpe.BPE]] = {}
exec(MODELS, namespace)  # noqa: S102 - the same definition the child processes run
FIRST, SECOND = namespace["MODELS"]


def save(model: hf_bpe.BPE, folder: Path) -> None:
    save_tokenizer_folder(model, folder, eos_token="<|endoftext|>", pad_token="<|pad|>")


def saved_model(folder: Path) -> hf_bpe.BPE:
    """The model a folder holds, after checking that every file of it agrees with it: the tokenizer
    loads, and it and tokenizer.json give the model's ids."""
    tokenizer = BPETokenizer.from_pretrained(folder)
    model = next(model for model in (FIRST, SECOND) if model == tokenizer.model)
    expected = model.encode(SAMPLE, allowed_special="all")
    assert tokenizer(SAMPLE)["input_ids"] == expected
    assert tokenizer.eos_token_id == model.special_tokens["<|endoftext|>"]
    assert tokenizer.pad_token_id == model.special_tokens["<|pad|>"]
    assert conversion.hf.load(folder / "tokenizer.json").encode(SAMPLE, allowed_special="all") == expected
    return model


def leftovers(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder.parent) if name.startswith(f".{folder.name}."))


SAVER = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    {models}
    folder, kind = Path(sys.argv[1]), sys.argv[2]
    if kind == "folder":
        from hf_bpe.transformers import save_tokenizer_folder
        def save(model):
            save_tokenizer_folder(model, folder, eos_token="<|endoftext|>", pad_token="<|pad|>")
    else:
        import conversion.gpt2
        def save(model):
            conversion.gpt2.save(model, folder)
    save(MODELS[0])  # imports done once; each round forks a process that saves in a loop
    start = time.monotonic()
    save(MODELS[1])
    save(MODELS[0])
    print((time.monotonic() - start) / 2, flush=True)  # how long a save takes here, to spread the kills
    for number, factor in enumerate(sys.stdin):
        done, told = os.pipe()
        forked = time.monotonic()
        child = os.fork()
        if child == 0:
            try:
                os.close(done)
                while True:
                    save(MODELS[(number + 1) % 2])  # first the model the folder does not hold
                    os.write(told, b".")
                    number += 1
            finally:
                os._exit(1)
        os.close(told)
        # The kill lands a random share of a save's time after the first save here is done, measured
        # on this save: a busy machine slows the saves and the delays alike.
        os.read(done, 1)
        time.sleep(float(factor) * (time.monotonic() - forked))
        os.kill(child, signal.SIGKILL)
        os.close(done)
        os.waitpid(child, 0)
        print("killed", flush=True)
""")


def loaded_gpt2_files(folder: Path) -> hf_bpe.BPE:
    """The model GPT-2 files hold, after checking that the special tokens of tokenizer_config.json
    are that model's."""
    loaded = conversion.gpt2.load(folder / "vocab.json", folder / "merges.txt")
    model = next(model for model in (FIRST, SECOND) if model.mergeable_ranks == loaded.mergeable_ranks)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    specials = {int(token_id): token["content"] for token_id, token in config["added_tokens_decoder"].items()}
    assert specials == {token_id: text for text, token_id in model.special_tokens.items()}
    return model


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks the saving processes")
@pytest.mark.parametrize("kind", ["folder", "gpt2"])
def test_kill_9_during_saves_leaves_a_complete_folder(tmp_path: Path, kind: str) -> None:
    """20 processes saving in a loop over an existing folder, each killed (SIGKILL) at a random
    moment after its first save: after each kill, the folder loads and all its files come from one save. (The processes
    are forked by one helper process, so that transformers is imported once.)"""
    folder = tmp_path / "tok"
    save(FIRST, folder) if kind == "folder" else conversion.gpt2.save(FIRST, folder)
    (folder / "weights.bin").write_bytes(b"not ours")  # a file the saves do not write: kept
    helper = subprocess.Popen([sys.executable, "-c", SAVER.format(models=MODELS), str(folder), kind],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert helper.stdin is not None and helper.stdout is not None
    duration = float(helper.stdout.readline())
    chance = random.Random(20)
    seen: set[str] = set()
    mid_save = 0
    try:
        for _ in range(20):
            helper.stdin.write(f"{chance.uniform(0.0, 2.5)}\n")  # the delay after a first save, in saves
            helper.stdin.flush()
            assert helper.stdout.readline() == "killed\n"
            mid_save += bool(leftovers(folder))
            model = saved_model(folder) if kind == "folder" else loaded_gpt2_files(folder)
            seen.add(model.name or "")
            assert (folder / "weights.bin").read_bytes() == b"not ours"
    finally:
        helper.stdin.close()
        helper.wait()
    print(f"{kind}: a save takes {duration:.2f} s; 20 kills, {mid_save} during a save (its temporary folder left behind), models seen {sorted(seen)}")
    assert mid_save > 0 and len(seen) == 2, "the kills did not land during saves: the test tested nothing"
    save(SECOND, folder) if kind == "folder" else conversion.gpt2.save(SECOND, folder)
    assert leftovers(folder) == []  # the next save removed what the killed ones left


FULL_DISK = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path
    {models}
    from hf_bpe.transformers import save_tokenizer_folder
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL if sys.argv[2] == "killed" else signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), int(sys.argv[3])))
    save_tokenizer_folder(hf_bpe.get_encoding("gpt2"), Path(sys.argv[1]), eos_token="<|endoftext|>")
""")


@pytest.mark.parametrize("how", ["error", "killed"])
def test_a_full_disk_leaves_the_old_folder_intact(tmp_path: Path, how: str) -> None:
    """RLIMIT_FSIZE stands for a full disk: writing GPT-2's model file fails (EFBIG, or SIGXFSZ
    kills the process) after tokenizer_config.json was written."""
    folder = tmp_path / "tok"
    save(FIRST, folder)
    before = {name: (folder / name).read_bytes() for name in os.listdir(folder)}
    limit = max(len(data) for data in before.values()) + 4096
    child = subprocess.run([sys.executable, "-c", FULL_DISK.format(models=MODELS), str(folder), how, str(limit)],
                           capture_output=True, text=True, check=False)
    assert child.returncode != 0
    if how == "error":
        assert f"cannot write {folder / 'hf_bpe.json'}: File too large; the folder {folder} is unchanged" \
            in child.stderr, child.stderr
        assert leftovers(folder) == []
    else:
        assert child.returncode == -signal.SIGXFSZ
    assert {name: (folder / name).read_bytes() for name in os.listdir(folder)} == before
    assert saved_model(folder) == FIRST
    save(SECOND, folder)
    assert saved_model(folder) == SECOND and leftovers(folder) == []


@pytest.fixture
def first_and_second(tmp_path: Path) -> tuple[Path, Path]:
    save(FIRST, tmp_path / "first")
    save(SECOND, tmp_path / "second")
    return tmp_path / "first", tmp_path / "second"


@pytest.mark.parametrize("moved", ["hf_bpe.json", "tokenizer.json"])
def test_a_folder_mixing_two_saves_is_refused_naming_the_file(first_and_second: tuple[Path, Path], moved: str) -> None:
    first, second = first_and_second
    shutil.copy(second / moved, first / moved)
    for load in (BPETokenizer.from_pretrained, transformers.AutoTokenizer.from_pretrained):
        with pytest.raises(TokenizerFileError, match="it differs from what tokenizer_config.json recorded when the "
                           "folder was saved: the folder mixes files of different saves") as raised:
            load(first)
        assert raised.value.path == str(first / moved)
    (first / moved).unlink()
    with pytest.raises(TokenizerFileError, match=rf"{moved} \(missing\) differ" if moved != "hf_bpe.json" else "hf_bpe.json"):
        BPETokenizer.from_pretrained(first)


def test_a_config_from_another_save_is_refused(first_and_second: tuple[Path, Path]) -> None:
    """What an interrupted in-place save leaves: tokenizer_config.json of one save, the rest of another."""
    first, second = first_and_second
    shutil.copy(second / "tokenizer_config.json", first / "tokenizer_config.json")
    with pytest.raises(TokenizerFileError, match="hf_bpe.json, tokenizer.json differ from what tokenizer_config.json recorded"):
        BPETokenizer.from_pretrained(first)


def test_folders_saved_without_a_fingerprint_still_load(first_and_second: tuple[Path, Path]) -> None:
    first, _ = first_and_second
    config = json.loads((first / "tokenizer_config.json").read_text())
    del config["hf_bpe"]["files"]
    (first / "tokenizer_config.json").write_text(json.dumps(config))
    assert saved_model(first) == FIRST


def test_a_malformed_fingerprint_is_named(first_and_second: tuple[Path, Path]) -> None:
    first, _ = first_and_second
    config = json.loads((first / "tokenizer_config.json").read_text())
    for wrong, says in ((["x"], "expected an object"), ({"../x": "0"}, "not a file of the folder")):
        config["hf_bpe"]["files"] = wrong
        (first / "tokenizer_config.json").write_text(json.dumps(config))
        with pytest.raises(TokenizerFileError, match=says):
            BPETokenizer.from_pretrained(first)


def test_hand_edits_of_the_card_and_the_chat_template_do_not_refuse_the_folder(
    first_and_second: tuple[Path, Path],
) -> None:
    first, _ = first_and_second
    (first / "README.md").write_text("my own card")
    (first / "chat_template.jinja").write_text("{{ messages }}")
    assert saved_model(first) == FIRST


@pytest.mark.parametrize("name", ["tokenizer_config.json", "hf_bpe.json", "tokenizer.json", "special_tokens_map.json"])
def test_save_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "tok"
    save(FIRST, folder)
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (folder / name).unlink()
    (folder / name).symlink_to(outside)
    save(SECOND, folder)
    assert outside.read_text() == "{}"
    assert not (folder / name).is_symlink()
    assert saved_model(folder) == SECOND


def test_a_folder_behind_a_symlink_is_replaced_and_the_link_kept(tmp_path: Path) -> None:
    save(FIRST, tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    save(SECOND, tmp_path / "link")
    assert (tmp_path / "link").is_symlink()
    assert saved_model(tmp_path / "real") == SECOND


def test_files_we_do_not_write_are_kept(tmp_path: Path) -> None:
    folder = tmp_path / "tok"
    save(FIRST, folder)
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "step1").write_text("1")
    (folder / "notes").symlink_to("model.safetensors")
    inode = (folder / "model.safetensors").stat().st_ino
    save(SECOND, folder)
    assert (folder / "model.safetensors").read_bytes() == b"weights"
    assert (folder / "model.safetensors").stat().st_ino == inode  # linked, not copied
    assert (folder / "checkpoints" / "step1").read_text() == "1"
    assert os.readlink(folder / "notes") == "model.safetensors"
