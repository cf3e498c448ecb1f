"""How long loading a ``tokenizer.json`` takes: ``hf_bpe.load`` against ``tokenizers.Tokenizer.from_file``,
interleaved rounds in one process, on the files of the model families users load.

Usage (from the repository root, with hf_bpe built in release mode)::

    python benchmarks/load.py                       # llama.cpp's vocabularies, and Llama 3 if llama-models is at hand
    python benchmarks/load.py --repeat 7 path/to/tokenizer.json ...

The files: llama.cpp's own vocabulary test files (``ggml-vocab-*.gguf`` from the ``llama-cpp-python`` sdist,
``pip download --no-deps``; kept under ``--cache-dir``) of the byte-level families with vocabularies of
100,000 tokens and more (Command-R 256k, Qwen 2 152k, Llama 3 128k, DeepSeek LLM 102k), each written as a
``tokenizer.json`` by ``conversion.hf.save``; Llama 3's published rank file (PyPI ``llama-models``) written as
its ``tokenizer.json`` by transformers' ``TikTokenConverter`` with the split as Meta's file spells it; and any
``tokenizer.json`` given on the command line. Each load is timed whole, from the path to a model that
encodes (hf_bpe's includes its load-time probe against ``tokenizers``); the first load of each, untimed,
warms the file cache and imports. Ids of both are checked equal on a sample text before timing.

Printed: the median seconds of each and hf_bpe / tokenizers per file (below 1.0: hf_bpe loads faster), with
the machine's load average; on a shared machine read the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import warnings
from pathlib import Path

from _common import REPO, oracles, seconds_interleaved

FAMILIES = ("command-r", "qwen2", "llama-bpe", "deepseek-llm")
"""llama.cpp vocabulary files (``ggml-vocab-<name>.gguf``) written as tokenizer.json files."""

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
"""Llama 3's split as its published tokenizer.json spells it."""

SAMPLE = (REPO / "README.md").read_text("utf-8") + " naïve café 12345 日本語のテキスト\n\n\t x"


def llamacpp_files(cache: Path) -> list[Path]:
    import conversion.gguf
    import conversion.hf

    folder = oracles.fetch_package_files(oracles.LLAMA_CPP_SDIST, oracles.llama_cpp_vocab_file,
                                         cache / "llama-cpp-python", sdist=True)
    made = []
    for name in FAMILIES:
        target = cache / "tokenizer-json" / name / "tokenizer.json"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                conversion.hf.save(conversion.gguf.load(folder / f"ggml-vocab-{name}.gguf"), target)
        made.append(target)
    return made


def llama3_file(cache: Path) -> Path | None:
    try:
        folder = oracles.fetch_package_files(oracles.LLAMA_MODELS_WHEEL, oracles.LLAMA_MODELS_FILES,
                                             cache / "llama-models")
    except RuntimeError as error:
        print(f"Llama 3's published file skipped: {error}")
        return None
    target = cache / "tokenizer-json" / "llama3-published" / "tokenizer.json"
    if not target.exists():
        from transformers.convert_slow_tokenizer import TikTokenConverter

        specials = ["<|begin_of_text|>", "<|end_of_text|>"] + [f"<|reserved_special_token_{i}|>" for i in range(254)]
        target.parent.mkdir(parents=True, exist_ok=True)
        TikTokenConverter(vocab_file=str(folder / "llama_models/llama3/tokenizer.model"), pattern=LLAMA3_SPLIT,
                          extra_special_tokens=specials).converted().save(str(target))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="more tokenizer.json files to load")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "hf_bpe-load-benchmark")
    parser.add_argument("--no-fetch", action="store_true", help="only the files given")
    args = parser.parse_args()

    import tokenizers

    import hf_bpe

    files = list(args.files)
    if not args.no_fetch:
        files = [*llamacpp_files(args.cache_dir), *filter(None, [llama3_file(args.cache_dir)]), *files]
    print(f"{'file':<24} {'tokens':>8} {'tokenizers s':>13} {'hf_bpe s':>9} {'hf_bpe / tokenizers':>20}")
    for path in files:
        theirs = tokenizers.Tokenizer.from_file(str(path))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = hf_bpe.load(path)
        if ours.encode(SAMPLE, allowed_special="all") != theirs.encode(SAMPLE, add_special_tokens=False).ids:
            print(f"{path.parent.name:<24} ids differ: not timed")
            continue

        def load_ours(path: Path = path) -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                hf_bpe.load(path)

        seconds = seconds_interleaved({"tokenizers": lambda path=path: tokenizers.Tokenizer.from_file(str(path)),
                                       "hf_bpe": load_ours}, args.repeat, rotate=True)
        ratios = [ours_s / theirs_s for ours_s, theirs_s in zip(seconds["hf_bpe"], seconds["tokenizers"])]
        print(f"{path.parent.name:<24} {ours.n_vocab:>8} {statistics.median(seconds['tokenizers']):>13.3f} "
              f"{statistics.median(seconds['hf_bpe']):>9.3f} {statistics.median(ratios):>14.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f})", flush=True)
    print("load average " + " / ".join(f"{value:.2f}" for value in os.getloadavg()))


if __name__ == "__main__":
    main()
