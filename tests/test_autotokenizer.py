"""``AutoTokenizer`` on a saved folder, each case in a fresh Python process:

(a) after ``import hf_bpe`` it returns ``BPETokenizer``;
(b) in a process that never imports hf_bpe it returns transformers' ``TokenizersBackend``, built
    from our ``tokenizer.json``;
(c) with ``save_pretrained(..., remote_code=True)`` and ``trust_remote_code=True`` it returns
    ``BPETokenizer`` where hf_bpe was never imported.

Every case must give the ids, masks, offsets and decodes that ``BPETokenizer`` gives in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import hf_bpe
from hf_bpe import BPETokenizer

pytest.importorskip("transformers")

# Runs in the subprocess (and, as `measure`, in this one). Keep it free of hf_bpe imports.
PROBE = r"""
import json, sys


def measure(tokenizer, inputs):
    texts, pairs = inputs["texts"], inputs["pairs"]
    out = {"len": len(tokenizer), "special_tokens": tokenizer.all_special_tokens}
    out["single"] = [dict(tokenizer(text)) for text in texts]
    out["plain"] = [tokenizer.encode(text, add_special_tokens=False) for text in texts]
    batch = tokenizer(texts, padding=True, return_special_tokens_mask=True, return_offsets_mapping=True)
    out["batch"] = {key: [[list(item) if isinstance(item, tuple) else item for item in row] for row in value]
                    for key, value in batch.items()}
    out["left"] = dict(tokenizer(texts, padding="longest", padding_side="left"))
    out["pairs"] = [dict(tokenizer(first, second, return_token_type_ids=True)) for first, second in pairs]
    out["truncated"] = dict(tokenizer(texts, truncation=True, max_length=6, padding="max_length"))
    words = tokenizer([text.split(" ") for text in texts], is_split_into_words=True, return_offsets_mapping=True)
    out["words"] = {key: [[list(item) if isinstance(item, tuple) else item for item in row] for row in value]
                    for key, value in words.items()}
    ids = out["batch"]["input_ids"]
    out["decode"] = [tokenizer.decode(row) for row in ids]
    out["decode_skip"] = tokenizer.batch_decode(ids, skip_special_tokens=True)
    out["tokenize"] = [tokenizer.tokenize(text) for text in texts]
    chat = [{"role": "user", "content": texts[0]}, {"role": "assistant", "content": texts[1]}]
    out["chat"] = tokenizer.apply_chat_template(chat, tokenize=False)
    out["chat_ids"] = tokenizer.apply_chat_template(chat, return_dict=False)
    return out


if __name__ == "__main__":
    mode, folder, inputs_file = sys.argv[1:4]
    if mode == "import":
        import hf_bpe  # noqa: F401
    from transformers import AutoTokenizer

    if mode == "import-after":  # transformers' auto module is already loaded when hf_bpe arrives
        import hf_bpe  # noqa: F401
    if mode == "register":  # the explicit way, called twice: registering is idempotent
        import hf_bpe.transformers

        hf_bpe.transformers.register()
        hf_bpe.transformers.register()

    options = {"trust_remote_code": True} if mode == "trust" else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, **options)
    except Exception as error:
        print("RESULT " + json.dumps({"error": f"{type(error).__name__}: {error}"}))
        sys.exit(0)
    result = {"class": f"{type(tokenizer).__module__}.{type(tokenizer).__name__}",
              "hf_bpe_loaded": "hf_bpe" in sys.modules}
    with open(inputs_file, encoding="utf-8") as file:
        result.update(measure(tokenizer, json.load(file)))
    print("RESULT " + json.dumps(result))
"""

TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"

TEXTS = [
    "Hello world! This is a test of the tokenizer.",
    "Numbers 1234567 and 2023-11-22, spaces   and\ttabs\n\nnew lines.",
    "<|im_start|>system\nSpecial tokens <|endoftext|> inside<|im_end|>",
    "added tokens: blorple, zz top, and blorpleblorple",
    "Ünïcödé: 東京, Київ, Ελλάδα, 😀👍🏽🇺🇸 and a lone é",
    "",
    " leading space and trailing  ",
]
PAIRS = [(TEXTS[0], TEXTS[1]), ("short", TEXTS[4])]


def _make_tokenizer(name: str) -> BPETokenizer:
    if name == "cl100k_base":
        model = hf_bpe.get_encoding("cl100k_base")  # id holes around its special tokens
    else:  # a small trained-style model with a split pattern of our own
        ranks = {bytes([byte]): byte for byte in range(256)}
        for word in [b"th", b"the", b" the", b"in", b"ing", b"er", b" t", b"ok", b"en"]:
            ranks[word] = len(ranks)
        model = hf_bpe.BPE(
            ranks, r"\p{L}+|\p{N}{1,2}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s", {"<|endoftext|>": 300}
        )
    tokenizer = BPETokenizer.from_model(
        model,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|pad|>",
        add_bos_token=True,
        add_eos_token=name != "cl100k_base",
        chat_template=TEMPLATE,
    )
    tokenizer.add_special_tokens({"extra_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.add_tokens(["blorple", "zz top"])
    return tokenizer


@pytest.fixture(scope="module", params=["cl100k_base", "trained"])
def folders(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tokenizer = _make_tokenizer(request.param)
    root = tmp_path_factory.mktemp(request.param)
    tokenizer.save_pretrained(root / "plain")
    tokenizer.save_pretrained(root / "remote", remote_code=True)
    inputs = root / "inputs.json"
    inputs.write_text(json.dumps({"texts": TEXTS, "pairs": PAIRS}), encoding="utf-8")
    probe = root / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    namespace: dict[str, Any] = {}
    exec(compile(PROBE, str(probe), "exec"), namespace)  # noqa: S102 - our own probe, also run in-process
    expected = namespace["measure"](
        BPETokenizer.from_pretrained(root / "plain"), {"texts": TEXTS, "pairs": PAIRS}
    )
    return {"root": root, "inputs": inputs, "probe": probe, "expected": json.loads(json.dumps(expected))}


def _run(folders: dict[str, Any], mode: str, folder: str, tmp_path: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, str(folders["probe"]), mode, str(folders["root"] / folder), str(folders["inputs"])],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # not the repository, so nothing is imported from the source tree by accident
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.rpartition("RESULT ")[2])


def _assert_same(result: dict[str, Any], expected: dict[str, Any]) -> None:
    assert "error" not in result, result.get("error")
    for key, value in expected.items():
        assert result[key] == value, key


def test_a_after_import_hf_bpe_autotokenizer_returns_our_class(
    folders: dict[str, Any], tmp_path: Path
) -> None:
    result = _run(folders, "import", "plain", tmp_path)
    assert result["class"] == "hf_bpe.transformers.BPETokenizer"
    _assert_same(result, folders["expected"])


def test_a_registration_also_works_when_transformers_came_first(
    folders: dict[str, Any], tmp_path: Path
) -> None:
    result = _run(folders, "import-after", "plain", tmp_path)
    assert result["class"] == "hf_bpe.transformers.BPETokenizer"
    _assert_same(result, folders["expected"])


def test_a_explicit_registration_returns_our_class(folders: dict[str, Any], tmp_path: Path) -> None:
    result = _run(folders, "register", "plain", tmp_path)
    assert result["class"] == "hf_bpe.transformers.BPETokenizer"
    _assert_same(result, folders["expected"])


def test_import_hf_bpe_imports_no_framework_and_leaves_one_hook(tmp_path: Path) -> None:
    """``import hf_bpe`` stays cheap: no transformers, tokenizers, datasets or protobuf; the deferred
    registration is one finder on sys.meta_path, gone once transformers' auto module has loaded."""
    script = (
        "import sys, hf_bpe\n"
        "heavy = [name for name in ('transformers', 'tokenizers', 'datasets', 'google.protobuf') if name in sys.modules]\n"
        "hooks = [type(finder).__name__ for finder in sys.meta_path if type(finder).__module__ == 'hf_bpe._autotokenizer']\n"
        "import transformers.models.auto.tokenization_auto\n"
        "left = [finder for finder in sys.meta_path if type(finder).__module__ == 'hf_bpe._autotokenizer']\n"
        "print(heavy, hooks, len(left), 'hf_bpe.transformers' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[-2] == "[] ['_Finder'] 0 True", done.stdout


def test_b_without_hf_bpe_tokenizers_backend_gives_the_same_ids(
    folders: dict[str, Any], tmp_path: Path
) -> None:
    result = _run(folders, "plain", "plain", tmp_path)
    assert result["class"].endswith("TokenizersBackend")
    assert not result["hf_bpe_loaded"]
    _assert_same(result, folders["expected"])


def test_c_remote_code_loads_our_class_where_hf_bpe_was_never_imported(
    folders: dict[str, Any], tmp_path: Path
) -> None:
    result = _run(folders, "trust", "remote", tmp_path)
    assert result["class"] == "hf_bpe.transformers.BPETokenizer"
    _assert_same(result, folders["expected"])


def test_c_remote_code_folder_needs_trust_without_hf_bpe_but_not_with_it(
    folders: dict[str, Any], tmp_path: Path
) -> None:
    refused = _run(folders, "plain", "remote", tmp_path)
    assert "trust_remote_code" in refused.get("error", ""), refused
    result = _run(folders, "import", "remote", tmp_path)
    assert result["class"] == "hf_bpe.transformers.BPETokenizer"
    _assert_same(result, folders["expected"])
