"""The vocabulary audit (``hf_bpe.audit``): how long it takes, and what it finds in real tokenizers.

Usage (from the repository root, with a release build: ``pip install -e .``)::

    python benchmarks/audit.py                      # timing: cl100k without a corpus, then 1x, 2x, 4x corpus
    python benchmarks/audit.py --base-mb 2 --repeat 3
    python benchmarks/audit.py --table              # findings and compression of every tokenizer below
    python benchmarks/audit.py --residue            # merge residue of every tokenizer below on the corpora

Timing: ``hf_bpe.audit.audit(cl100k_base)`` without a corpus (best of ``--repeat``); then with a corpus of
``--base-mb`` MB of the shared corpora (``../shared/data/corpora``: every file gets an equal share,
a group per file), and twice and four times that, timing the corpus part (``hf_bpe.audit._corpus.measure``,
with o200k_base as the ``--compare`` tokenizer) and the whole audit. The corpus part should grow
linearly: the last column divides its time by the size.

Table: for gpt2, r50k_base, cl100k_base, o200k_base, Mistral's SentencePiece models
(``mistral-common``: ``tokenizer.model.v1``, the instruct ``v2``, ``v3``, ``v7``) and its tekken files:
unreachable tokens by reason, the intermediate ones, round-trip failures (the "Fishing for Magikarp"
indicator), partial UTF-8 tokens by kind; and characters per token on each language of the shared
corpora (English: taylorswift.txt, a Wikipedia article; Japanese, Greek, Vietnamese, Ukrainian:
4 MB of Wikipedia each).

Residue: merge residue (``hf_bpe.audit._residue``) of the same tokenizers on all five languages together,
at the default share (1e-5) and at 1e-4: the steps counted, their share of the ordinary tokens, and the
first few.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from _common import SHARED_CORPORA, best_seconds

import hf_bpe
import hf_bpe.audit
from hf_bpe.audit import _corpus as corpus_module
from hf_bpe.audit import _vocabulary
from hf_bpe.audit._residue import RESIDUE_BELOW, merge_parents, merge_residue

MISTRAL = ("tokenizer.model.v1", "mistral_instruct_tokenizer_240216.model.v2",
           "mistral_instruct_tokenizer_240323.model.v3", "mistral_instruct_tokenizer_241114.model.v7")
TEKKEN = ("tekken_240718.json", "tekken_240911.json")
LANGUAGES = {"English": "taylorswift.txt", "Japanese": "wiki_ja.txt", "Greek": "wiki_el.txt",
             "Vietnamese": "wiki_vi.txt", "Ukrainian": "wiki_uk.txt"}


def tokenizers() -> dict[str, Any]:
    """Every tokenizer of the table, by name."""
    import mistral_common

    import conversion.sentencepiece
    import conversion.tiktoken

    data = Path(mistral_common.__file__).parent / "data"
    found: dict[str, Any] = {name: hf_bpe.get_encoding(name) for name in ("gpt2", "r50k_base", "cl100k_base",
                                                                           "o200k_base")}
    for name in MISTRAL:
        found[name.replace("mistral_instruct_tokenizer_", "")] = conversion.sentencepiece.load(data / name)
    for name in TEKKEN:
        found[name.removesuffix(".json")] = conversion.tiktoken.load_tekken(data / name)
    return found


def corpus_groups(limit_chars: int | None) -> dict[str, list[str]]:
    """Each language's file cut into lines (the first ``limit_chars`` characters, or all)."""
    groups = {}
    for language, name in LANGUAGES.items():
        path = SHARED_CORPORA / name
        if not path.is_file():
            sys.exit(f"{path} is missing: the benchmark reads the shared corpora next to the repository")
        text = path.read_text(encoding="utf-8")
        groups[language] = (text if limit_chars is None else text[:limit_chars]).splitlines(keepends=True)
    return groups


def table() -> None:
    models = tokenizers()
    groups = corpus_groups(None)
    print("| tokenizer | ordinary tokens | unreachable | by reason | intermediate | round-trip failures | "
          "partial UTF-8 | lead / continuation / mixed / invalid | audit seconds |")
    print("|---|---:|---:|---|---:|---:|---:|---|---:|")
    stats = {}
    for name, model in models.items():
        started = time.perf_counter()
        report = hf_bpe.audit.audit(model)
        seconds = time.perf_counter() - started
        summary = report.summary()
        reasons = ", ".join(f"{reason} {count}" for reason, count in summary["unreachable_by_reason"].items())
        kinds = " / ".join(str(count) for count in summary["partial_utf8_by_kind"].values())
        print(f"| {name} | {summary['ordinary_tokens']:,} | {summary['unreachable']:,} | {reasons} | "
              f"{summary['intermediate_only']} | {summary['round_trip_failures']:,} | {summary['partial_utf8']:,} | "
              f"{kinds} | {seconds:.1f} |", flush=True)
        for id in report.unreachable:
            verdict = report.reachability.verdicts[id]
            if verdict.reason not in ("invalid_utf8", "byte_never_needed"):
                print(f"|   | {report.show(id)} | {verdict.reason} (searched {verdict.searched}) |", flush=True)
        stats[name] = corpus_module.measure(model, groups)
    print()
    languages = list(LANGUAGES)
    print("Characters per token (higher is better):\n")
    print("| tokenizer | " + " | ".join(languages) + " |")
    print("|---|" + "---:|" * len(languages))
    for name, measured in stats.items():
        by_name = {group.name: group for group in measured.groups}
        print(f"| {name} | " + " | ".join(f"{by_name[language].characters_per_token():.2f}" for language in languages)
              + " |")
    print("\nTokens per character relative to English (same measure, no parallel text):\n")
    print("| tokenizer | " + " | ".join(languages[1:]) + " |")
    print("|---|" + "---:|" * (len(languages) - 1))
    for name, measured in stats.items():
        by_name = {group.name: group for group in measured.groups}
        english = by_name["English"].characters_per_token()
        print(f"| {name} | " + " | ".join(f"{english / by_name[language].characters_per_token():.2f}x"
                                          for language in languages[1:]) + " |")
    sizes = {group.name: (group.bytes, group.characters) for group in next(iter(stats.values())).groups}
    print("\nCorpus: " + ", ".join(f"{language} {sizes[language][0] / 1e6:.2f} MB ({sizes[language][1]:,} characters)"
                                   for language in languages))


def residue() -> None:
    groups = corpus_groups(None)
    print("| tokenizer | ordinary tokens | merge steps | corpus tokens | residue at 1e-5 (share) | residue at 1e-4 "
          "(share) | examples |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, model in tokenizers().items():
        stats = corpus_module.measure(model, groups)
        table = _vocabulary.tokens_of(model)
        parents = merge_parents(model)
        steps = sum(1 for id in parents if id in table.merge_position)
        ordinary = len(table.bytes_of)
        found = {share: merge_residue(model, stats.counts, residue_below=share, table=table, parents=parents)
                 for share in (RESIDUE_BELOW, 1e-4)}
        examples = ", ".join(f"`{model.decode_single_token_bytes(token.id)!r}`" for token in found[RESIDUE_BELOW][:3])
        cells = [f"{len(found[share]):,} ({len(found[share]) / ordinary:.1%})" for share in (RESIDUE_BELOW, 1e-4)]
        print(f"| {name} | {ordinary:,} | {steps:,} | {int(stats.counts.sum()):,} | {cells[0]} | {cells[1]} | "
              f"{examples} |", flush=True)


def timing(base_mb: float, repeat: int) -> None:
    cl100k = hf_bpe.get_encoding("cl100k_base")
    o200k = hf_bpe.get_encoding("o200k_base")
    seconds = best_seconds(lambda: hf_bpe.audit.audit(cl100k), repeat)
    print(f"hf_bpe.audit.audit(cl100k_base), no corpus: {seconds:.2f} s (best of {repeat})\n")
    print("| corpus | MB | corpus part s | corpus part s per MB | whole audit s |")
    print("|---|---:|---:|---:|---:|")
    per_language = int(base_mb * 1_000_000 / len(LANGUAGES) / 2)  # characters; about 2 bytes each on average
    for factor in (1, 2, 4):
        groups = corpus_groups(per_language * factor)
        size = sum(len(line.encode("utf-8")) for lines in groups.values() for line in lines) / 1e6
        corpus_seconds = best_seconds(
            lambda groups=groups: corpus_module.measure(cl100k, groups, {"o200k_base": o200k}), repeat)
        whole = best_seconds(lambda groups=groups: hf_bpe.audit.audit(cl100k, groups, compare={"o200k_base": o200k}), 1)
        print(f"| {factor}x | {size:.1f} | {corpus_seconds:.2f} | {corpus_seconds / size:.3f} | {whole:.2f} |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", action="store_true", help="findings and compression of every tokenizer")
    parser.add_argument("--residue", action="store_true", help="merge residue of every tokenizer on the corpora")
    parser.add_argument("--base-mb", type=float, default=4.0, help="the 1x corpus size in MB (default: 4)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs (default: 3)")
    arguments = parser.parse_args()
    print(f"hf_bpe {hf_bpe.__version__}, {os.cpu_count()} cores\n")
    if arguments.table:
        table()
    elif arguments.residue:
        residue()
    else:
        timing(arguments.base_mb, arguments.repeat)


if __name__ == "__main__":
    main()
