"""Encode throughput: hf_bpe vs tiktoken, riptoken, bpe-openai (and HF tokenizers for cl100k), same text,
one process.

Usage (from the repository root, with hf_bpe built in release mode)::

    python benchmarks/encode.py                      # ../shared/data/corpora, up to 20 MB
    python benchmarks/encode.py --corpus my.txt --limit-mb 5 --repeat 3

The text is cut into documents of 1-10 KB at blank lines. Modes:

- ``single``: one thread, ``encode_ordinary`` per document (HF: ``Tokenizer.encode``).
- ``batch``: all documents at once on ``--threads`` threads: ours ``encode_ordinary_batch(num_threads=)``,
  tiktoken ``encode_ordinary_batch(num_threads=)``, HF ``encode_batch`` with ``RAYON_NUM_THREADS``.

Throughput is MB of UTF-8 input per second, the best of ``--repeat`` runs; the contenders take turns in
each round, so a busy spell on the machine slows all of them alike. Before timing, the ids of every library
are compared with tiktoken's on the whole benchmarked text and the result is printed. Two rules keep the
runs honest:

- hf_bpe's piece caches are emptied (``clear_cache(BPE)``) and warmed on other documents of the same
  corpora (a quarter as much text, held back from the timed text) before each of its timed runs, untimed:
  no run profits from pieces remembered from an earlier run over the same text, only from repeats within
  it and from what other text taught the caches, as in a process that has been encoding for a while.
- The ids kept for the comparison are dropped and everything left is frozen out of the cycle collector
  (``gc.freeze()``) before timing: a collection set off by a timed call then walks only what the calls
  themselves made, not millions of ids the benchmark held for the comparison. riptoken and
bpe-openai (exact peers) are used when installed (``pip install riptoken bpe-openai``); bpe-openai has no
``gpt2``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import inspect
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import (  # first: sets RAYON_NUM_THREADS
    MB,
    SHARED_CORPORA,
    THREADS_DEFAULT,
    best_seconds_interleaved,
    load_documents,
    oracles,
    textgen,
)

from hf_bpe.model import clear_cache

ENCODINGS = ("cl100k_base", "o200k_base", "gpt2")
WARM_UP_SHARE = 0.25


def hf_cl100k(cache_dir: Path, tiktoken_encoding: Any) -> Any:
    """cl100k as an HF ``tokenizers.Tokenizer``, converted by transformers' ``TikTokenConverter``."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    rank_file = cache_dir / oracles.cache_key(oracles.CL100K_URL)
    converter = TikTokenConverter(vocab_file=str(rank_file),
                                  extra_special_tokens=sorted(tiktoken_encoding.special_tokens_set))
    return converter.converted()


EXACT_PEERS = ("riptoken", "bpe_openai")


def exact_peer(module_name: str, name: str) -> Any:
    """``module_name.get_encoding(name)`` for a tiktoken-compatible peer (riptoken, bpe-openai), or None when
    the package is not installed. Both read tiktoken's rank files through ``TIKTOKEN_CACHE_DIR``."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        print(f"skipping {module_name}: not installed (pip install {module_name.replace('_', '-')})")
        return None
    try:
        return module.get_encoding(name)
    except (ValueError, KeyError) as error:
        print(f"skipping {module_name} for {name}: {error}")
        return None


def peer_batch(encoding: Any, threads: int) -> Callable[[list[str]], Any]:
    """The peer's ``encode_ordinary_batch`` on ``threads`` threads: a ``num_threads`` argument where it takes
    one (bpe-openai), else its rayon pool, sized by ``RAYON_NUM_THREADS`` (riptoken)."""
    if "num_threads" in inspect.signature(encoding.encode_ordinary_batch).parameters:
        return lambda texts: encoding.encode_ordinary_batch(texts, num_threads=threads)
    return encoding.encode_ordinary_batch


def split_warm_up(docs: list[str], share: float) -> tuple[list[str], list[str]]:
    """The first documents, about ``share`` of the bytes (the documents come shuffled), and the rest."""
    target, size = share * textgen.utf8_size(docs), 0
    for count, doc in enumerate(docs):
        if size >= target:
            return docs[:count], docs[count:]
        size += len(doc.encode("utf-8"))
    return docs, []


def mismatches(ids: Sequence[Sequence[int]], expected: Sequence[Sequence[int]]) -> int:
    return sum(1 for mine, theirs in zip(ids, expected) if list(mine) != list(theirs))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="*", default=[SHARED_CORPORA],
                        help="text files or folders of *.txt (default: ../shared/data/corpora; generated text "
                             "when absent)")
    parser.add_argument("--limit-mb", type=float, default=20.0, help="at most this many MB of input (default 20)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per measurement, best kept (default 3)")
    parser.add_argument("--threads", type=int, default=THREADS_DEFAULT, help="threads for batch mode (default 2; "
                        "HF reads RAYON_NUM_THREADS, set it too)")
    parser.add_argument("--encodings", default=",".join(ENCODINGS), help="comma-separated (default: all three)")
    parser.add_argument("--no-hf", action="store_true", help="skip HF tokenizers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-documents", metavar="PREFIX",
                        help="write the warm-up and timed documents to PREFIX.warm and PREFIX.timed (separated "
                             "by NUL bytes, for the core's encode_bench: BENCH_DOCS=PREFIX) and stop")
    args = parser.parse_args(argv)

    import tiktoken

    import hf_bpe

    # A fifth more than the timed text, held back to warm hf_bpe's piece caches before each timed run.
    description, docs = load_documents(args.corpus, args.limit_mb * (1 + WARM_UP_SHARE), args.seed)
    warm_up, docs = split_warm_up(docs, WARM_UP_SHARE / (1 + WARM_UP_SHARE))
    total_mb = textgen.utf8_size(docs) / MB
    if args.save_documents:
        for suffix, part in (("warm", warm_up), ("timed", docs)):
            Path(f"{args.save_documents}.{suffix}").write_text("\0".join(part), encoding="utf-8")
        print(f"wrote {args.save_documents}.warm ({len(warm_up)} documents) and {args.save_documents}.timed "
              f"({len(docs)} documents, {total_mb:.1f} MB)")
        return 0
    print(f"input: {description}; timed: {total_mb:.1f} MB in {len(docs)} documents; warm-up (other "
          f"documents): {textgen.utf8_size(warm_up) / MB:.1f} MB in {len(warm_up)}")
    print(f"threads for batch mode: {args.threads} (RAYON_NUM_THREADS={os.environ['RAYON_NUM_THREADS']}); "
          f"best of {args.repeat} runs; {os.cpu_count()} CPUs")

    rows = []
    scaling: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as cache, oracles.offline_tiktoken(cache):
        missing = oracles.fill_tiktoken_cache(cache)
        for name in args.encodings.split(","):
            if name in missing:
                print(f"skipping {name}: {missing[name]}")
                continue
            ours, theirs = hf_bpe.get_encoding(name), tiktoken.get_encoding(name)
            expected = theirs.encode_ordinary_batch(docs, num_threads=args.threads)
            peers: list[tuple[str, Callable[[str], Any], Callable[[list[str]], Any]]] = [
                ("tiktoken", theirs.encode_ordinary,
                 lambda texts, theirs=theirs: theirs.encode_ordinary_batch(texts, num_threads=args.threads))]
            for module_name in EXACT_PEERS:
                peer_encoding = exact_peer(module_name, name)
                if peer_encoding is not None:
                    peers.append((module_name, peer_encoding.encode_ordinary,
                                  peer_batch(peer_encoding, args.threads)))
            if name == "cl100k_base" and not args.no_hf:
                hf = hf_cl100k(Path(cache), theirs)
                peers.append(("HF tokenizers", lambda text, hf=hf: hf.encode(text, add_special_tokens=False).ids,
                              lambda texts, hf=hf: hf.encode_batch(texts, add_special_tokens=False)))

            single_ids = [ours.encode_ordinary(doc) for doc in docs]
            batch_ids = ours.encode_ordinary_batch(docs, num_threads=args.threads)
            print(f"{name}: hf_bpe ids equal tiktoken's on {len(docs) - mismatches(single_ids, expected)}/{len(docs)} "
                  f"documents (single), {len(docs) - mismatches(batch_ids, expected)}/{len(docs)} (batch)")
            peer_ids: Any = None
            for peer, _, batch in peers[1:]:
                peer_ids = [getattr(encoding, "ids", encoding) for encoding in batch(docs)]
                bad = mismatches(peer_ids, expected)
                print(f"{name}: {peer} ids equal tiktoken's on {len(docs) - bad}/{len(docs)} documents "
                      f"(mismatch rate {bad / max(1, len(docs)):.2%})")

            del single_ids, batch_ids, expected, peer_ids
            gc.collect()
            gc.freeze()

            def singles(encode: Callable[[str], Any]) -> Callable[[], None]:
                def run() -> None:
                    for doc in docs:
                        encode(doc)
                return run

            def warmed(warm: Callable[[], Any], ours: Any = ours) -> Callable[[], None]:
                def setup() -> None:
                    clear_cache(ours)
                    warm()
                return setup

            runs: dict[tuple[str, str], Callable[[], Any]] = {
                ("hf_bpe", "single"): singles(ours.encode_ordinary),
                ("hf_bpe", "batch"): lambda ours=ours: ours.encode_ordinary_batch(docs, num_threads=args.threads),
            }
            # Untimed: each run's threads start with caches warmed on other documents, never the timed ones.
            setups = {
                ("hf_bpe", "single"): warmed(lambda ours=ours: [ours.encode_ordinary(doc) for doc in warm_up]),
                ("hf_bpe", "batch"): warmed(lambda ours=ours: ours.encode_ordinary_batch(warm_up,
                                                                                       num_threads=args.threads)),
            }
            for peer, single, batch in peers:
                runs[(peer, "single")] = singles(single)
                runs[(peer, "batch")] = lambda batch=batch: batch(docs)
            seconds = best_seconds_interleaved(runs, args.repeat, setups)
            gc.unfreeze()
            scaling.append((name, seconds[("hf_bpe", "single")] / seconds[("hf_bpe", "batch")]))
            for peer, _, _ in peers:
                for mode, label in (("single", "single"), ("batch", f"batch, {args.threads} threads")):
                    ours_rate, peer_rate = total_mb / seconds[("hf_bpe", mode)], total_mb / seconds[(peer, mode)]
                    rows.append((name, label, ours_rate, peer, peer_rate))
                    print(f"  {name} {label}: hf_bpe {ours_rate:.2f} MB/s, {peer} {peer_rate:.2f} MB/s", flush=True)

    print()
    print("| encoding | mode | hf_bpe MB/s | peer | peer MB/s | hf_bpe / peer |")
    print("|---|---|---:|---|---:|---:|")
    for name, mode, ours_rate, peer, peer_rate in rows:
        print(f"| {name} | {mode} | {ours_rate:.2f} | {peer} | {peer_rate:.2f} | {ours_rate / peer_rate:.2f}x |")
    print()
    for name, ratio in scaling:
        print(f"hf_bpe {name}: batch on {args.threads} threads / single = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
