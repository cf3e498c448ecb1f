"""How often hf_bpe.train learns other merges than the naive recount trainer (tests/support/naive_bpe.py), and why.

Two fixed families of generated corpora, every code point allowed:
- ``varied``: ``textgen.documents(random.Random(seed), --bytes)``;
- ``ties``: ``textgen.tie_documents(random.Random(seed), words=300 | 1000 | 2000)`` (most merges are ties).
Corpus ``seed`` (0, 1, ...) takes vocab 1000 / 1500 / 2000, pattern gpt2 / cl100k / o200k and no special
token / ``<|endoftext|>`` in turn. For each corpus: the first merge where ``hf_bpe.train`` and the naive
trainer differ; whether their piece counts differ (the naive trainer pre-tokenizes with the ``regex``
module); whether the merge loop given the naive trainer's own pieces learns its merges; and the first
difference once the code points only the ``regex`` module knows (newer Unicode) are left out.

    python benchmarks/train_rule.py                 # 40 corpora per family, 60 KB each
    python benchmarks/train_rule.py --corpora 10 --bytes 30000
"""

from __future__ import annotations

import argparse
import random
import warnings
from collections.abc import Callable

from _common import textgen

import hf_bpe
from hf_bpe import patterns

from naive_bpe import naive_pieces, recount_train, regex_only_code_points  # isort: skip  (tests/)
from hf_bpe.train import PieceCounts, count_pieces, train_from_counts

VOCAB_SIZES = (1000, 1500, 2000)
PATTERNS = ("gpt2", "cl100k", "o200k")
SPECIAL_TOKENS = ([], ["<|endoftext|>"])


def first_difference(ours: list[bytes], theirs: list[bytes]) -> int | None:
    if ours == theirs:
        return None
    return next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))


def compare(documents: list[str], vocab_size: int, pattern: str, special_tokens: list[str]) -> dict[str, object]:
    pieces = naive_pieces(documents, patterns.resolve(pattern), special_tokens)
    expected = recount_train(pieces, vocab_size - 256 - len(special_tokens)).tokens
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "the corpus allows only")
        model = hf_bpe.train(documents, vocab_size, pattern=pattern, special_tokens=special_tokens,
                             show_progress=False)
        counts = count_pieces(documents, pattern=pattern, special_tokens=special_tokens,
                                     show_progress=False)
        same_table = PieceCounts(dict(pieces), pattern=pattern, special_tokens=special_tokens)
        on_their_pieces = train_from_counts(same_table, vocab_size, show_progress=False)
    def learned(trained: hf_bpe.BPE) -> list[bytes]:
        return [trained.decode_single_token_bytes(i) for i in range(256, trained.n_vocab - len(special_tokens))]
    return {
        "first": first_difference(learned(model), expected),
        "pieces differ": counts.to_dict() != dict(pieces),
        "loop exact on their pieces": learned(on_their_pieces) == expected,
    }


def run_family(name: str, make: Callable[[int], list[str]], corpora: int) -> None:
    excluded = regex_only_code_points()
    rows = []
    for seed in range(corpora):
        vocab_size = VOCAB_SIZES[seed % 3]
        pattern = PATTERNS[(seed // 3) % 3]
        special_tokens = SPECIAL_TOKENS[seed % 2]
        documents = make(seed)
        result = compare(documents, vocab_size, pattern, special_tokens)
        cleaned = [''.join(char for char in document if ord(char) not in excluded) for document in documents]
        result["first without regex-only"] = compare(cleaned, vocab_size, pattern, special_tokens)["first"]
        rows.append((seed, vocab_size, pattern, special_tokens, result))
    differ = [row for row in rows if row[4]["first"] is not None]
    print(f"\n### {name}: {corpora} corpora, {len(differ)} learn other merges than the naive trainer\n")
    print("| seed | vocab | pattern | special | first different merge | pieces differ | loop exact on the "
          "naive trainer's pieces | first difference without regex-only code points |")
    print("|---:|---:|---|---|---:|---|---|---:|")
    for seed, vocab_size, pattern, special_tokens, result in differ:
        special = ",".join(special_tokens).replace("|", "\\|") or "-"  # a | would end the table cell
        print(f"| {seed} | {vocab_size} | {pattern} | {special} | {result['first']} | "
              f"{result['pieces differ']} | {result['loop exact on their pieces']} | "
              f"{result['first without regex-only']} |")
    still = sum(row[4]["first without regex-only"] is not None for row in rows)
    loop = sum(not row[4]["loop exact on their pieces"] for row in rows)
    pieces = sum(bool(row[4]["pieces differ"]) for row in rows)
    print(f"\nPieces differ on {pieces} of {corpora}. Without the regex-only code points: {still} of {corpora} "
          f"differ. The merge loop given the naive trainer's own pieces differs on {loop} of {corpora}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", type=int, default=40, help="corpora per family (default 40)")
    parser.add_argument("--bytes", type=int, default=60_000, help="size of a varied corpus (default 60,000)")
    args = parser.parse_args()
    print(f"hf_bpe.train vs the naive recount trainer; the regex module knows {len(regex_only_code_points())} "
          "code points more than this Python's unicodedata")
    run_family("varied", lambda seed: textgen.documents(random.Random(seed), args.bytes), args.corpora)
    run_family("ties", lambda seed: textgen.tie_documents(random.Random(seed), words=(300, 1000, 2000)[seed % 3]),
               args.corpora)


if __name__ == "__main__":
    main()
