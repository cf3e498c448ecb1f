"""How often a ``tokenizer.json`` with a random ``Split`` pre-tokenizer loads into a model that encodes
differently from `tokenizers` itself, per construct class of the regex.

Usage (from the repository root, hf_bpe built)::

    python benchmarks/split_parity.py                       # 200 patterns, 300 texts, seeds 15 and 16
    python benchmarks/split_parity.py --patterns 50 --texts 100

Patterns come from ``tests/support/oniguruma_patterns.py`` (seeded), each tried with every ``behavior`` and
``invert`` value on one byte-level vocabulary trained by `tokenizers`' ``BpeTrainer``. For each
(pattern, behavior, invert) the file is loaded with ``conversion.hf.load`` and the texts are encoded by
both; the table counts, per construct class (a pattern is counted under the first of: can match the
empty string, POSIX brackets, ``\\w``/``\\b``, other):

- ``refused``: ``load`` raised (a clear refusal: not wrong, but not usable);
- ``exact``: loaded, and every text encodes to the same ids as `tokenizers` (where `tokenizers` fails
  on a text, by its backtracking limit, ours must fail too);
- ``(loaded!)``: patterns `tokenizers` cannot compile that ``load`` nevertheless accepts;
- ``WRONG``: loaded, and some text encodes differently: a silent wrong answer. ``texts`` is the
  number of such texts over all of them; ``slow`` the texts ours refused as over the split time
  budget (a clear error, whatever `tokenizers` does; it takes seconds on those).

Patterns `tokenizers` cannot compile are counted apart (``uncompiled``). Where ``BPE.pieces`` exists, the pieces
(``pre_tokenize_str``) are compared too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from _common import textgen  # first: sets RAYON_NUM_THREADS and the tests' path


def trained_document() -> dict[str, Any]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    rng = random.Random(3)
    tokenizer.train_from_iterator([textgen.fragment(rng, specials=False) for _ in range(3000)], trainer=trainer)
    return json.loads(tokenizer.to_str())


def with_split(base: dict[str, Any], regex: str, behavior: str, invert: bool) -> dict[str, Any]:
    """``base`` with the pre-tokenizer Split(regex, behavior, invert) then ByteLevel without regex."""
    split = {"type": "Split", "pattern": {"Regex": regex},
             "behavior": "".join(word.capitalize() for word in behavior.split("_")), "invert": invert}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return dict(base, pre_tokenizer={"type": "Sequence", "pretokenizers": [split, byte_level]})


def their_result(tokenizer: Any, text: str) -> Any:
    try:
        return tokenizer.encode(text, add_special_tokens=False).ids
    except BaseException as error:  # a Rust panic (PanicException) when Oniguruma gives up
        if isinstance(error, KeyboardInterrupt):
            raise
        return "error"


TOO_SLOW = "too slow"


def our_result(model: Any, text: str) -> Any:
    try:
        return model.encode_ordinary(text)
    except ValueError as error:
        return TOO_SLOW if "is too slow on this text" in str(error) else "error"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--patterns", type=int, default=200)
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--seed", type=int, default=15, help="pattern seed (texts use seed + 1)")
    arguments = parser.parse_args()

    import oniguruma_patterns  # tests/support/oniguruma_patterns.py, on the path once _common is imported
    from tokenizers import Regex, Tokenizer, pre_tokenizers

    import conversion.hf
    import hf_bpe
    from hf_bpe import patterns

    base = trained_document()
    family = oniguruma_patterns.patterns(random.Random(arguments.seed), arguments.patterns)
    texts = oniguruma_patterns.texts(random.Random(arguments.seed + 1), arguments.texts)
    has_pieces = hasattr(patterns, "pieces")
    outcome: Counter[tuple[str, str]] = Counter()
    wrong_texts: Counter[str] = Counter()
    slow_texts: Counter[str] = Counter()
    wrong_pieces: Counter[str] = Counter()
    uncompiled: Counter[str] = Counter()
    uncompiled_loaded: Counter[str] = Counter()
    examples: list[str] = []
    with tempfile.TemporaryDirectory() as folder, oniguruma_patterns.quiet_stderr():
        path = Path(folder) / "tokenizer.json"
        for pattern in family:
            kind = pattern.construct_class
            try:
                Regex(pattern.regex)
            except Exception:  # noqa: BLE001 - tokenizers' Regex raises Exception for a bad pattern
                uncompiled[kind] += 1
                path.write_text(json.dumps(with_split(base, pattern.regex, "isolated", False)), encoding="utf-8")
                with contextlib.suppress(Exception):
                    conversion.hf.load(path)
                    uncompiled_loaded[kind] += 1
                continue
            for behavior in oniguruma_patterns.BEHAVIORS:
                for invert in (False, True):
                    document = with_split(base, pattern.regex, behavior, invert)
                    path.write_text(json.dumps(document), encoding="utf-8")
                    try:
                        model = conversion.hf.load(path)
                    except Exception:  # noqa: BLE001 - any refusal counts
                        outcome[kind, "refused"] += 1
                        continue
                    theirs = Tokenizer.from_file(str(path))
                    ours = [our_result(model, text) for text in texts]
                    slow_texts[kind] += ours.count(TOO_SLOW)
                    wrong = [text for text, result in zip(texts, ours)
                             if result != TOO_SLOW and result != their_result(theirs, text)]
                    if has_pieces:
                        splitter = pre_tokenizers.Split(Regex(pattern.regex), behavior, invert)
                        for text in texts:
                            try:
                                expected: Any = [piece for piece, _ in splitter.pre_tokenize_str(text)]
                            except BaseException:  # noqa: BLE001 - a Rust panic (PanicException)
                                expected = "error"
                            try:
                                got: Any = patterns.pieces(model, text)
                            except ValueError as error:
                                got = TOO_SLOW if "is too slow on this text" in str(error) else "error"
                            wrong_pieces[kind] += got != TOO_SLOW and expected != got
                    outcome[kind, "WRONG" if wrong else "exact"] += 1
                    wrong_texts[kind] += len(wrong)
                    if wrong and len(examples) < 8:
                        examples.append(f"{pattern.regex!r} {behavior} invert={invert}: {wrong[0]!r}")

    print(f"{arguments.patterns} patterns (seed {arguments.seed}) x 5 behaviors x 2 invert, "
          f"{len(texts)} texts (seed {arguments.seed + 1}); hf_bpe at {Path(hf_bpe.__file__).parent}")
    print("columns: patterns tokenizers cannot compile (of which we load!); (pattern, behavior, invert) "
          "combinations refused, exact, WRONG; texts encoded wrong; texts refused as too slow (time budget)"
          + ("; pieces wrong" if has_pieces else ""))
    header = (f"{'class':<8} {'uncompiled':>10} {'(loaded!)':>9} {'refused':>8} {'exact':>6} {'WRONG':>6} "
              f"{'texts':>7} {'slow':>5}")
    print(header + (f" {'pieces':>7}" if has_pieces else ""))
    for kind in (*oniguruma_patterns.CLASSES, "total"):
        kinds = oniguruma_patterns.CLASSES if kind == "total" else (kind,)
        row = [sum(uncompiled[k] for k in kinds)] + [sum(outcome[k, what] for k in kinds)
                                                      for what in ("refused", "exact", "WRONG")]
        loaded = sum(uncompiled_loaded[k] for k in kinds)
        line = (f"{kind:<8} {row[0]:>10} {loaded:>9} {row[1]:>8} {row[2]:>6} {row[3]:>6} "
                f"{sum(wrong_texts[k] for k in kinds):>7} {sum(slow_texts[k] for k in kinds):>5}")
        print(line + (f" {sum(wrong_pieces[k] for k in kinds):>7}" if has_pieces else ""))
    for example in examples:
        print("  e.g.", example)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
