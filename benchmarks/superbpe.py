"""SuperBPE's headline (arXiv 2503.13423): bytes per token against ordinary BPE at the same vocabulary size.

For each shared corpus, ``hf_bpe.train`` learns an ordinary BPE model of ``--vocab`` tokens and a SuperBPE model
of the same size (``superword_transition`` at ``--transition`` of it, the paper's 80% by default) on the first
``--mb`` MB of its documents (split at blank lines), with the same pattern; both then encode the next
``--mb / 4`` MB, held out, and the bytes per token of each are printed, with SuperBPE's gain and the seconds
each training took.

    python benchmarks/superbpe.py                     # 2 MB per corpus, vocab 16384, transition 80%
    python benchmarks/superbpe.py --mb 4 --vocab 32768 --pattern o200k
"""

from __future__ import annotations

import argparse
import time

from _common import SHARED_CORPORA, THREADS_DEFAULT

import hf_bpe

CORPORA = ("shakespeare_milton", "wiki_el", "wiki_ja", "wiki_uk", "wiki_vi")


def documents(name: str, start_mb: float, mb: float) -> list[str]:
    """The blank-line separated documents of a shared corpus that start in ``[start_mb, start_mb + mb)`` MB."""
    found, offset = [], 0
    for document in (SHARED_CORPORA / f"{name}.txt").read_text(encoding="utf-8").split("\n\n"):
        if start_mb * 1e6 <= offset < (start_mb + mb) * 1e6 and document:
            found.append(document)
        offset += len(document.encode("utf-8")) + 2
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=2.0, help="training MB per corpus (default 2)")
    parser.add_argument("--vocab", type=int, default=16384)
    parser.add_argument("--transition", type=float, default=0.8, help="transition as a share of --vocab")
    parser.add_argument("--pattern", default="gpt2")
    args = parser.parse_args()
    transition = int(args.vocab * args.transition)
    print(f"vocab {args.vocab:,}, SuperBPE transition {transition:,}, pattern {args.pattern}, {args.mb} MB training "
          f"and {args.mb / 4} MB held out per corpus, {THREADS_DEFAULT} threads")
    print("| corpus | BPE bytes/token | SuperBPE bytes/token | gain | BPE train s | SuperBPE train s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in CORPORA:
        train, held_out = documents(name, 0, args.mb), documents(name, args.mb, args.mb / 4)
        size = sum(len(text.encode("utf-8")) for text in held_out)
        row = []
        for transition_size in (None, transition):
            began = time.perf_counter()
            model = hf_bpe.train(train, args.vocab, pattern=args.pattern, superword_transition=transition_size,
                                 show_progress=False, num_threads=THREADS_DEFAULT)
            seconds = time.perf_counter() - began
            tokens = sum(len(ids) for ids in model.encode_ordinary_batch(held_out))
            row.append((size / tokens, seconds))
        (bpe, bpe_s), (superbpe, superbpe_s) = row
        print(f"| {name} | {bpe:.3f} | {superbpe:.3f} | {superbpe / bpe - 1:+.1%} | {bpe_s:.2f} | {superbpe_s:.2f} |")


if __name__ == "__main__":
    main()
